//! Cluster control: real `raftlockd` processes, each on its own loopback IP
//! (127.0.0.11, 127.0.0.12, ...) so that the network nemesis can cut links
//! between particular nodes, each with its own data dir and log file.

use anyhow::Context;
use raftlock_proto::v1::{cluster_client::ClusterClient, Role, StatusRequest};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

/// One node of the cluster under test.
pub struct Node {
    /// Raft node id (1-based).
    pub id: u64,
    /// The loopback IP it binds.
    pub ip: String,
    /// Client address (`ip:port`).
    pub client_addr: String,
    /// Peer address (`ip:port`).
    pub peer_addr: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// The rate its clock runs at, when started under libfaketime.
    skew: Option<f64>,
    /// In docker mode: the container (running or stopped).
    container: Option<String>,
    running: bool,
}

/// A cluster of real processes (stopped by PID when dropped), or of
/// containers of the raftlock image on a private network (removed, with
/// their network and volumes, when dropped).
pub struct Cluster {
    /// The nodes, index = id - 1.
    pub nodes: Vec<Node>,
    binary: PathBuf,
    initial: String,
    /// Docker mode: the image and the network's name.
    docker: Option<(String, String)>,
}

/// Runs a docker command; its trimmed stdout, or its stderr as the error.
pub(crate) fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run docker: {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn free_port(ip: &str) -> anyhow::Result<u16> {
    Ok(TcpListener::bind((ip, 0))
        .with_context(|| format!("cannot bind {ip}: is 127.0.0.0/8 routed to lo?"))?
        .local_addr()?
        .port())
}

/// The `--initial-cluster` value naming every node.
fn initial_cluster(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| format!("{}={}/{}", n.id, n.peer_addr, n.client_addr))
        .collect::<Vec<_>>()
        .join(",")
}

impl Cluster {
    /// Starts `n` nodes of `binary` with data and logs under `dir`, and waits
    /// for a leader.
    pub async fn start(binary: &Path, n: u64, dir: &Path) -> anyhow::Result<Cluster> {
        let mut nodes = Vec::new();
        for id in 1..=n {
            let ip = format!("127.0.0.{}", 10 + id);
            nodes.push(Node {
                id,
                client_addr: format!("{ip}:{}", free_port(&ip)?),
                peer_addr: format!("{ip}:{}", free_port(&ip)?),
                ip,
                data_dir: dir.join(format!("n{id}")),
                log: dir.join(format!("n{id}.log")),
                child: None,
                paused: false,
                skew: None,
                container: None,
                running: false,
            });
        }
        let initial = initial_cluster(&nodes);
        let mut cluster = Cluster {
            nodes,
            binary: binary.to_owned(),
            initial,
            docker: None,
        };
        for id in 1..=n {
            cluster.start_node(id)?;
        }
        cluster.wait_for_leader(Duration::from_secs(30)).await?;
        Ok(cluster)
    }

    /// Starts `n` containers of `image` on a new private network named after
    /// this process; clients reach them through ports published on
    /// 127.0.0.1, nodes reach each other by name.
    pub async fn start_docker(image: &str, n: u64, dir: &Path) -> anyhow::Result<Cluster> {
        let tag = format!("rlj{}", std::process::id());
        docker(&["network", "create", &tag])?;
        let mut nodes = Vec::new();
        for id in 1..=n {
            let port = free_port("127.0.0.1")?;
            nodes.push(Node {
                id,
                ip: String::new(),
                client_addr: format!("127.0.0.1:{port}"),
                peer_addr: format!("{tag}-n{id}:7100"),
                data_dir: dir.join(format!("n{id}")),
                log: dir.join(format!("n{id}.log")),
                child: None,
                paused: false,
                skew: None,
                container: Some(format!("{tag}-n{id}")),
                running: false,
            });
        }
        let initial = initial_cluster(&nodes);
        let mut cluster = Cluster {
            nodes,
            binary: PathBuf::new(),
            initial: initial.clone(),
            docker: Some((image.to_owned(), tag.clone())),
        };
        for n in &mut cluster.nodes {
            let name = n.container.clone().unwrap_or_default();
            let port = n
                .client_addr
                .rsplit(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            docker(&[
                "run",
                "-d",
                "--name",
                &name,
                "--hostname",
                &name,
                "--network",
                &tag,
                "--cap-add",
                "NET_ADMIN",
                "-p",
                &format!("127.0.0.1:{port}:7000"),
                "-v",
                &format!("{name}:/data"),
                "-e",
                &format!("RAFTLOCK_ID={}", n.id),
                "-e",
                &format!("RAFTLOCK_ADVERTISE_PEER={}", n.peer_addr),
                "-e",
                &format!("RAFTLOCK_ADVERTISE_CLIENT={}", n.client_addr),
                "-e",
                &format!("RAFTLOCK_INITIAL_CLUSTER={initial}"),
                "-e",
                "RUST_LOG=info,openraft=warn",
                image,
            ])?;
            n.running = true;
            n.ip = docker(&[
                "inspect",
                "-f",
                &format!("{{{{(index .NetworkSettings.Networks \"{tag}\").IPAddress}}}}"),
                &name,
            ])?;
        }
        cluster.wait_for_leader(Duration::from_secs(60)).await?;
        Ok(cluster)
    }

    /// The container of node `id` (docker mode).
    pub fn container(&self, id: u64) -> Option<&str> {
        self.nodes[(id - 1) as usize].container.as_deref()
    }

    /// Whether this cluster runs in containers.
    pub fn is_docker(&self) -> bool {
        self.docker.is_some()
    }

    fn node(&mut self, id: u64) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    /// Client endpoints of every node.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.client_addr.clone()).collect()
    }

    /// (Re)starts node `id` from its data dir, appending to its log.
    pub fn start_node(&mut self, id: u64) -> anyhow::Result<()> {
        let binary = self.binary.clone();
        let initial = self.initial.clone();
        let n = self.node(id);
        if let Some(name) = n.container.clone() {
            if !n.running {
                docker(&["start", &name])?;
                n.running = true;
                n.paused = false;
            }
            return Ok(());
        }
        if n.child.is_some() {
            return Ok(());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&n.log)?;
        let mut cmd = Command::new(&binary);
        if let Some(rate) = n.skew {
            // Every clock the process reads (monotonic and wall) runs at
            // `rate` times real time from its start.
            cmd.env("LD_PRELOAD", faketime_library()?)
                .env("FAKETIME", format!("+0 x{rate}"))
                .env("FAKETIME_DONT_RESET", "1");
        }
        let child = cmd
            .args(["--id", &id.to_string()])
            .arg("--data-dir")
            .arg(&n.data_dir)
            .args(["--listen-client", &n.client_addr])
            .args(["--listen-peer", &n.peer_addr])
            .args(["--initial-cluster", &initial])
            .env("RUST_LOG", "info,openraft=warn")
            // Every kill is a power loss of that node: what its log had
            // written but not synced is gone, not kept by the page cache.
            .env("RAFTLOCK_FAULT_LOSE_UNSYNCED", "true")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        n.child = Some(child);
        n.paused = false;
        Ok(())
    }

    fn signal(&mut self, id: u64, sig: libc::c_int) {
        if let Some(c) = &self.node(id).child {
            // SAFETY: kill(2) on a child we spawned and have not reaped, so
            // the pid still names our process.
            unsafe {
                libc::kill(c.id() as libc::pid_t, sig);
            }
        }
    }

    /// `kill -9` node `id` and reap it.
    pub fn kill(&mut self, id: u64) {
        if let Some(name) = self.node(id).container.clone() {
            let _ = docker(&["kill", "-s", "KILL", &name]);
            let n = self.node(id);
            n.running = false;
            n.paused = false;
            return;
        }
        self.signal(id, libc::SIGKILL);
        let n = self.node(id);
        if let Some(mut c) = n.child.take() {
            let _ = c.wait();
        }
        n.paused = false;
    }

    /// SIGSTOP node `id` (`docker pause` in docker mode).
    pub fn pause(&mut self, id: u64) {
        if let Some(name) = self.node(id).container.clone() {
            if docker(&["pause", &name]).is_ok() {
                self.node(id).paused = true;
            }
            return;
        }
        self.signal(id, libc::SIGSTOP);
        self.node(id).paused = true;
    }

    /// SIGCONT node `id` (`docker unpause`).
    pub fn resume(&mut self, id: u64) {
        if let Some(name) = self.node(id).container.clone() {
            let _ = docker(&["unpause", &name]);
            self.node(id).paused = false;
            return;
        }
        self.signal(id, libc::SIGCONT);
        self.node(id).paused = false;
    }

    /// Restarts node `id` (a `kill -9` first) with its clock running at
    /// `rate` times real time, under libfaketime.
    pub fn restart_skewed(&mut self, id: u64, rate: f64) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.node(id).container.is_none(),
            "clock skew needs process nodes (libfaketime on the host)"
        );
        faketime_library()?;
        self.kill(id);
        self.node(id).skew = Some(rate);
        self.start_node(id)
    }

    /// Brings every node back: resumes paused ones, restarts dead ones, and
    /// restarts skewed ones on the real clock.
    pub fn heal_processes(&mut self) -> anyhow::Result<()> {
        for id in 1..=self.nodes.len() as u64 {
            if self.node(id).paused {
                self.resume(id);
            }
            if self.node(id).skew.take().is_some() {
                self.kill(id);
            }
            let n = self.node(id);
            // A node that exited by itself (it could not bind its port at
            // first start, or it crashed) is restarted like a killed one;
            // left as an unreaped child it would never come back, and a
            // membership round would wait on it for ever.
            if let Some(c) = &mut n.child {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    tracing::warn!(node = id, "node exited by itself: restarting it");
                    n.child = None;
                }
            }
            if (n.container.is_some() && !n.running) || (n.container.is_none() && n.child.is_none())
            {
                self.start_node(id)?;
            }
        }
        Ok(())
    }

    /// Whether node `id` runs and is not paused.
    pub fn is_up(&self, id: u64) -> bool {
        let n = &self.nodes[(id - 1) as usize];
        (n.child.is_some() || n.running) && !n.paused
    }

    /// The node that says it leads, asking running nodes only.
    pub async fn leader(&self) -> Option<u64> {
        for n in &self.nodes {
            if !(n.child.is_some() || n.running) || n.paused {
                continue;
            }
            let Ok(s) = status(&n.client_addr).await else {
                continue;
            };
            if s.role == Role::Leader as i32 && s.leader_id == s.node_id {
                return Some(s.node_id);
            }
        }
        None
    }

    /// Waits until some running node leads.
    pub async fn wait_for_leader(&self, within: Duration) -> anyhow::Result<u64> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(l) = self.leader().await {
                return Ok(l);
            }
            if Instant::now() > deadline {
                anyhow::bail!("no leader within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The log file of node `id`.
    pub fn log_of(&self, id: u64) -> &Path {
        &self.nodes[(id - 1) as usize].log
    }
}

/// libfaketime's multi-threaded library (Debian's `libfaketime`), or
/// `RAFTLOCK_JEPSEN_FAKETIME`.
fn faketime_library() -> anyhow::Result<PathBuf> {
    let candidates = std::env::var_os("RAFTLOCK_JEPSEN_FAKETIME")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            [
                "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                "/usr/lib/faketime/libfaketimeMT.so.1",
            ]
            .map(PathBuf::from),
        );
    for c in candidates {
        if c.exists() {
            return Ok(c);
        }
    }
    anyhow::bail!(
        "libfaketime not found (apt-get install libfaketime, or set RAFTLOCK_JEPSEN_FAKETIME)"
    )
}

async fn status(addr: &str) -> anyhow::Result<raftlock_proto::v1::StatusResponse> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_millis(300))
        .timeout(Duration::from_millis(500))
        .connect()
        .await?;
    Ok(ClusterClient::new(channel)
        .status(StatusRequest::default())
        .await?
        .into_inner())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some((_, network)) = self.docker.clone() {
            for n in &self.nodes {
                let Some(name) = &n.container else { continue };
                // Keep each node's log with the run, then remove the
                // container and its volume.
                if let Ok(out) = Command::new("docker").args(["logs", name]).output() {
                    let mut log = out.stdout;
                    log.extend_from_slice(&out.stderr);
                    let _ = std::fs::write(&n.log, log);
                }
                let _ = docker(&["rm", "-f", "-v", name]);
                let _ = docker(&["volume", "rm", "-f", name]);
            }
            let _ = docker(&["network", "rm", &network]);
            return;
        }
        for id in 1..=self.nodes.len() as u64 {
            self.kill(id);
        }
    }
}
