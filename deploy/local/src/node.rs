//! One node of a local cluster: its addresses, files and process.

use super::{io, Error, Options};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Logged once both of a node's listeners are bound.
pub(crate) const SERVING: &str = "raftlockd serving";

/// One node of a [`LocalCluster`](crate::LocalCluster).
#[derive(Debug)]
pub struct Node {
    /// Node id.
    pub id: u64,
    /// Client address (`host:port`).
    pub client_addr: String,
    /// Peer address (`host:port`).
    pub peer_addr: String,
    /// HTTP admin address (`/metrics`, `/health`, `/ready`), if it has one.
    pub metrics_addr: Option<String>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Log file (stdout and stderr, appended across restarts).
    pub log: PathBuf,
    pub(crate) child: Option<Child>,
    pub(crate) paused: bool,
    /// Started without `--initial-cluster`: it waits to be added.
    pub(crate) joiner: bool,
    pub(crate) env: Vec<(OsString, OsString)>,
}

impl Node {
    pub(crate) fn new(
        id: u64,
        client_addr: String,
        peer_addr: String,
        metrics_addr: Option<String>,
        dir: &Path,
    ) -> Node {
        Node {
            id,
            client_addr,
            peer_addr,
            metrics_addr,
            data_dir: dir.join(format!("node-{id}")),
            log: dir.join(format!("node-{id}.log")),
            child: None,
            paused: false,
            joiner: false,
            env: Vec::new(),
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process was started (and not seen to exit or be
    /// killed since).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Running and not paused.
    pub fn is_up(&self) -> bool {
        self.child.is_some() && !self.paused
    }

    pub(crate) fn spawn(&mut self, options: &Options, initial: &str) -> Result<(), Error> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(io(format!("cannot open {}", self.log.display())))?;
        let log_err = log
            .try_clone()
            .map_err(io(format!("cannot open {}", self.log.display())))?;
        let mut cmd = Command::new(&options.binary);
        cmd.arg("--id")
            .arg(self.id.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen-client")
            .arg(&self.client_addr)
            .arg("--listen-peer")
            .arg(&self.peer_addr);
        if !self.joiner {
            cmd.arg("--initial-cluster").arg(initial);
        }
        if let Some(m) = &self.metrics_addr {
            cmd.arg("--listen-metrics").arg(m);
        }
        cmd.args(&options.args)
            // The start-up line tells the launcher that a node serves,
            // whatever filter the caller set; RUST_LOG alone (not
            // RAFTLOCK_LOG_LEVEL, which would win over it) carries it.
            .env_remove("RAFTLOCK_LOG_LEVEL")
            .env(
                "RUST_LOG",
                format!("{},raftlock_node::server=info", options.log_filter),
            )
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        #[cfg(target_os = "linux")]
        if options.die_with_parent {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe and touches no memory of
            // the parent; this runs in the child between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().map_err(io(format!(
            "cannot start node {} ({})",
            self.id,
            options.binary.display()
        )))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    /// Signals the process, if this launcher started it and it has not
    /// been reaped (so the PID still names it).
    pub(crate) fn signal(&self, sig: Signal) {
        if let Some(c) = &self.child {
            let _ = kill(Pid::from_raw(c.id() as i32), sig);
        }
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Resume first: a stopped process cannot act on SIGKILL's exit
            // path until it runs.
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused = false;
    }
}

/// Removes `dir` and everything in it; one that is not there is fine.
pub(crate) fn remove_dir(dir: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(format!("cannot remove {}", dir.display()))(e)),
    }
}
