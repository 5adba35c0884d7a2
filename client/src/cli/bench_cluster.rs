//! A 3-node `raftlockd` cluster the bench starts itself (`failover`,
//! `scale`, `--start-cluster`), so it can kill a node by PID and restart it
//! on the same data dir. Loopback only,
//! free ports, a temporary directory; every process it started is killed when
//! it is dropped.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

struct Member {
    id: u64,
    client: String,
    peer: String,
    metrics: String,
    child: Option<Child>,
}

/// The bench's own cluster.
pub struct LocalCluster {
    exe: PathBuf,
    dir: tempfile::TempDir,
    initial: String,
    members: Vec<Member>,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `raftlockd` beside this executable (where cargo and packages put both),
/// unless `explicit` names one.
pub fn find_raftlockd(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let me = std::env::current_exe().context("cannot find this executable")?;
    let beside = me.with_file_name("raftlockd");
    if beside.exists() {
        return Ok(beside);
    }
    bail!(
        "no raftlockd beside {}; pass --raftlockd PATH",
        me.display()
    )
}

impl LocalCluster {
    /// Starts `n` nodes of `exe` and waits until each accepts connections.
    /// A port picked free can be taken by another socket before the node
    /// binds it: when a node exits saying so, the cluster starts again on
    /// fresh ports (up to 3 times); any other early exit is an error.
    pub fn start(exe: PathBuf, n: u64) -> anyhow::Result<LocalCluster> {
        let mut attempt = 1;
        loop {
            let mut c = Self::start_once(exe.clone(), n)?;
            match c.wait_listening(std::time::Duration::from_secs(20))? {
                None => return Ok(c),
                Some(id) if attempt < 3 => {
                    eprintln!(
                        "node {id} lost its port to another socket; starting again on fresh ports"
                    );
                    attempt += 1;
                }
                Some(id) => bail!("node {id} could not bind its ports in 3 attempts"),
            }
        }
    }

    /// Waits until every node has logged that it serves (both listeners
    /// bound; a connection test could reach whatever else holds a port);
    /// returns the id of a node that exited because a port was taken.
    fn wait_listening(&mut self, within: std::time::Duration) -> anyhow::Result<Option<u64>> {
        let deadline = std::time::Instant::now() + within;
        let dir = self.dir.path().to_path_buf();
        loop {
            let mut listening = 0;
            for m in &mut self.members {
                let Some(child) = m.child.as_mut() else {
                    continue;
                };
                let log = std::fs::read_to_string(dir.join(format!("node-{}.log", m.id)))
                    .unwrap_or_default();
                if log.contains("raftlockd serving") {
                    listening += 1;
                } else if let Some(status) = child.try_wait()? {
                    if log.lines().any(|l| {
                        l.contains("cannot listen on") && l.contains("Address already in use")
                    }) {
                        return Ok(Some(m.id));
                    }
                    let why: Vec<&str> = log.lines().take(12).collect();
                    bail!(
                        "node {} exited ({status}) at start:\n{}",
                        m.id,
                        why.join("\n")
                    );
                }
            }
            if listening == self.members.len() {
                return Ok(None);
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "the nodes did not serve within {within:?}; logs in {}",
                    dir.display()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn start_once(exe: PathBuf, n: u64) -> anyhow::Result<LocalCluster> {
        let dir = tempfile::Builder::new()
            .prefix("raftlock-bench")
            .tempdir()?;
        let mut members = Vec::new();
        for id in 1..=n {
            members.push(Member {
                id,
                client: format!("127.0.0.1:{}", free_port()?),
                peer: format!("127.0.0.1:{}", free_port()?),
                metrics: format!("127.0.0.1:{}", free_port()?),
                child: None,
            });
        }
        let initial = members
            .iter()
            .map(|m| format!("{}={}/{}", m.id, m.peer, m.client))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = LocalCluster {
            exe,
            dir,
            initial,
            members,
        };
        for id in 1..=n {
            c.start_node(id)?;
        }
        Ok(c)
    }

    /// Client endpoints of every node.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client.clone()).collect()
    }

    /// Node ids.
    pub fn ids(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.id).collect()
    }

    /// Node `id`'s client endpoint.
    pub fn client_addr(&self, id: u64) -> Option<&str> {
        self.member(id).map(|m| m.client.as_str())
    }

    /// Node `id`'s metrics endpoint (`/metrics`).
    pub fn metrics_addr(&self, id: u64) -> Option<&str> {
        self.member(id).map(|m| m.metrics.as_str())
    }

    /// Node `id`'s process id, while it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.member(id)?.child.as_ref().map(|c| c.id())
    }

    fn member(&self, id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// Where the nodes' logs and data are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// (Re)starts node `id` on its data dir.
    pub fn start_node(&mut self, id: u64) -> anyhow::Result<()> {
        let dir = self.dir.path().to_path_buf();
        let (exe, initial) = (self.exe.clone(), self.initial.clone());
        let m = self
            .members
            .iter_mut()
            .find(|m| m.id == id)
            .with_context(|| format!("no node {id}"))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("node-{id}.log")))?;
        let mut cmd = Command::new(&exe);
        // If the bench itself is killed (SIGKILL skips Drop), its nodes must
        // not outlive it.
        #[cfg(target_os = "linux")]
        {
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
        // Whatever log filter the caller set, the start-up line stays: it
        // is how `start` knows a node serves.
        let (filter_var, filter) = match std::env::var("RAFTLOCK_LOG_LEVEL") {
            Ok(f) => ("RAFTLOCK_LOG_LEVEL", f),
            Err(_) => (
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
            ),
        };
        let child = cmd
            .env(filter_var, format!("{filter},raftlock_node::server=info"))
            .arg("--id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(dir.join(format!("node-{id}")))
            .arg("--listen-client")
            .arg(&m.client)
            .arg("--listen-peer")
            .arg(&m.peer)
            .arg("--listen-metrics")
            .arg(&m.metrics)
            .arg("--initial-cluster")
            .arg(&initial)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        m.child = Some(child);
        Ok(())
    }

    /// SIGKILLs node `id` and reaps it: a crash, not a graceful stop.
    pub fn kill(&mut self, id: u64) {
        if let Some(m) = self.members.iter_mut().find(|m| m.id == id) {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for id in 1..=self.members.len() as u64 {
            self.kill(id);
        }
    }
}
