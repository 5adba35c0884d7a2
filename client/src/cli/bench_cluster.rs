//! A 3-node `raftlockd` cluster the `failover` bench starts itself, so it can
//! kill the leader by PID and restart it on the same data dir. Loopback only,
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
    /// Starts `n` nodes of `exe`.
    pub fn start(exe: PathBuf, n: u64) -> anyhow::Result<LocalCluster> {
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
        let child = cmd
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
