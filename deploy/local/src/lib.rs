//! A cluster of local `raftlockd` processes: the one launcher behind
//! `raftlockd dev`, `raftlock bench --start-cluster`, the integration tests
//! and the Jepsen harness.
//!
//! Every node listens on loopback (one shared address, or one address per
//! node, 127.0.0.11, 127.0.0.12, ... by default, so a test can cut links between
//! particular nodes), on ports picked free, with its data dir and its log
//! file under the cluster's directory. Only processes this launcher started
//! are ever signalled, by PID, and every one still running is killed when
//! the [`LocalCluster`] is dropped, even when a test panics.
//!
//! ```no_run
//! # async fn f() -> Result<(), raftlock_local::Error> {
//! use raftlock_local::{LocalCluster, Options};
//! let mut cluster = LocalCluster::start(Options::new("target/debug/raftlockd", 3)).await?;
//! let leader = cluster.wait_for_leader(std::time::Duration::from_secs(10)).await?;
//! cluster.kill(leader);
//! let next = cluster.wait_for_new_leader(leader, std::time::Duration::from_secs(10)).await?;
//! cluster.start_node(leader)?;
//! println!("endpoints {:?}, leader now {next}", cluster.endpoints());
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod access;
mod node;
mod ports;

pub use access::Access;
use node::remove_dir;
pub use node::Node;
pub use ports::free_port;
pub use raftlock_proto::cluster::{InitialCluster, InitialMember};

use nix::sys::signal::Signal;
use raftlock_proto::v1::{cluster_client::ClusterClient, Role, StatusRequest, StatusResponse};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;
use tokio::time::Instant;

/// Why the cluster could not be started or did not reach a state in time.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file, directory, socket or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// The options cannot describe a cluster.
    #[error("{0}")]
    Invalid(String),
    /// A node exited while it was being waited for.
    #[error("node {id} exited ({status}); its log ends:\n{log}")]
    Exited {
        /// The node.
        id: u64,
        /// How it exited.
        status: ExitStatus,
        /// The tail of its log.
        log: String,
    },
    /// Something did not happen in time.
    #[error("{what} within {within:?}; node logs:\n{logs}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        within: Duration,
        /// The tail of every node's log.
        logs: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Where the nodes listen.
#[derive(Clone, Debug)]
pub enum Hosts {
    /// Every node on this address (`127.0.0.1`, say).
    Shared(String),
    /// Node `id` on `<net>.(10 + id)` for a loopback `/24` such as
    /// `127.0.0`, so links between nodes can be cut one by one (iptables
    /// on loopback addresses). Two harnesses on one host use two nets.
    PerNode(String),
}

impl Hosts {
    fn of(&self, id: u64) -> String {
        match self {
            Hosts::Shared(h) => h.clone(),
            Hosts::PerNode(net) => format!("{net}.{}", 10 + id),
        }
    }
}

/// What to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `raftlockd` executable.
    pub binary: PathBuf,
    /// How many nodes (ids 1..=nodes).
    pub nodes: u64,
    /// Where they listen.
    pub hosts: Hosts,
    /// Data dirs (`node-N`) and logs (`node-N.log`) go here; `None` makes a
    /// temporary directory removed with the cluster.
    pub dir: Option<PathBuf>,
    /// Record the ports in `DIR/ports.json` and reuse them when the
    /// directory is reused: a cluster's membership records its addresses,
    /// so a restarted cluster must come back on the same ones.
    pub keep_ports: bool,
    /// Extra flags for every node.
    pub args: Vec<OsString>,
    /// Extra environment for every node.
    pub env: Vec<(OsString, OsString)>,
    /// Give each node a metrics listener (`/metrics`, `/health`, `/ready`).
    pub metrics: bool,
    /// The nodes' log filter (`RUST_LOG` syntax; by default
    /// `RAFTLOCK_LOG_LEVEL` or `RUST_LOG` of this process). The start-up
    /// line the launcher waits for is always kept.
    pub log_filter: String,
    /// Kill the nodes when this process dies, even by SIGKILL (which skips
    /// `Drop`).
    pub die_with_parent: bool,
    /// How the launcher reaches the nodes (TLS, token) to ask who leads.
    pub access: Access,
    /// Start the cluster over on fresh ports this many times when a port
    /// picked free was taken before a node bound it.
    pub attempts: u32,
}

impl Options {
    /// `nodes` nodes of `binary` on 127.0.0.1, in a temporary directory,
    /// with metrics listeners.
    pub fn new(binary: impl Into<PathBuf>, nodes: u64) -> Options {
        Options {
            binary: binary.into(),
            nodes,
            hosts: Hosts::Shared("127.0.0.1".into()),
            dir: None,
            keep_ports: false,
            args: Vec::new(),
            env: shared_machine_env(nodes),
            metrics: true,
            log_filter: std::env::var("RAFTLOCK_LOG_LEVEL")
                .or_else(|_| std::env::var("RUST_LOG"))
                .unwrap_or_else(|_| "info,openraft=warn".into()),
            die_with_parent: true,
            access: Access::default(),
            attempts: 3,
        }
    }
}

/// The nodes of a local cluster share this machine's cores: each runs
/// `cores / nodes` tokio workers (at least one) instead of one per core, as
/// a node alone on its machine does. Three nodes of two workers each on two
/// cores spent about 10% more CPU per log entry at one client, on threads
/// waking each other to steal work, and were no faster at 64 clients
/// (the performance history in `CHANGELOG.md`). `TOKIO_WORKER_THREADS` set by the caller wins.
///
/// They also share its disk, a developer's or a CI machine's, often with
/// less free than a production node's reserve (256 MiB): a local cluster
/// keeps 16 MiB in reserve unless `RAFTLOCK_SPACE_RESERVE_MB` says
/// otherwise (a flag given to the nodes wins over both).
fn shared_machine_env(nodes: u64) -> Vec<(OsString, OsString)> {
    let mut env = Vec::new();
    if std::env::var_os("RAFTLOCK_SPACE_RESERVE_MB").is_none() {
        env.push(("RAFTLOCK_SPACE_RESERVE_MB".into(), "16".into()));
    }
    if std::env::var_os("TOKIO_WORKER_THREADS").is_some() {
        return env;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let workers = (cores / nodes.max(1)).max(1);
    env.push(("TOKIO_WORKER_THREADS".into(), workers.to_string().into()));
    env
}

enum Dir {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl Dir {
    fn path(&self) -> &Path {
        match self {
            Dir::Temp(t) => t.path(),
            Dir::Kept(p) => p,
        }
    }
}

/// Ports chosen on a first start, reused with the directory.
#[derive(Serialize, Deserialize)]
struct Ports {
    nodes: Vec<(u64, u16, u16)>,
}

/// The local cluster: its nodes, their processes and their directory.
pub struct LocalCluster {
    nodes: Vec<Node>,
    options: Options,
    initial: InitialCluster,
    dir: Dir,
    /// The ports were picked by this start, not read from the directory:
    /// another start may pick others.
    fresh_ports: bool,
}

impl LocalCluster {
    /// Starts the cluster, waits until every node serves, and returns once
    /// a leader is elected.
    pub async fn start(options: Options) -> Result<LocalCluster, Error> {
        Self::start_prepared(options, |_| Ok(())).await
    }

    /// As [`LocalCluster::start`], running `prepare` after the nodes'
    /// addresses are chosen and before they start (to seed their data dirs
    /// from a backup, say). It runs again if the cluster starts over on
    /// fresh ports.
    pub async fn start_prepared(
        options: Options,
        mut prepare: impl FnMut(&LocalCluster) -> Result<(), Error>,
    ) -> Result<LocalCluster, Error> {
        if options.nodes == 0 {
            return Err(Error::Invalid("a cluster needs at least one node".into()));
        }
        let mut attempt = 1;
        let cluster = loop {
            let mut cluster = Self::create(options.clone())?;
            // A data dir records the cluster id its node first started in,
            // and that id follows from the addresses: the dirs an attempt
            // on lost ports created must go with those ports.
            let existed: Vec<bool> = cluster.nodes.iter().map(|n| n.data_dir.exists()).collect();
            prepare(&cluster)?;
            for id in 1..=options.nodes {
                cluster.start_node(id)?;
            }
            match cluster.wait_serving(Duration::from_secs(30)).await {
                Err(Error::Exited { id, log, .. })
                    if attempt < options.attempts && lost_a_port(&log) && cluster.fresh_ports =>
                {
                    cluster.forget_ports();
                    for (node, existed) in cluster.nodes.iter().zip(existed) {
                        if !existed {
                            remove_dir(&node.data_dir)?;
                        }
                    }
                    eprintln!(
                        "node {id} could not bind its port (attempt {attempt}); starting again on fresh ports"
                    );
                    attempt += 1;
                }
                Err(e) => return Err(e),
                Ok(()) => break cluster,
            }
        };
        cluster.wait_for_leader(Duration::from_secs(30)).await?;
        Ok(cluster)
    }

    /// Lays the cluster out (addresses, directories) without starting it.
    pub fn create(options: Options) -> Result<LocalCluster, Error> {
        let dir = match &options.dir {
            Some(d) => {
                std::fs::create_dir_all(d).map_err(io(format!("cannot create {}", d.display())))?;
                Dir::Kept(d.clone())
            }
            None => Dir::Temp(
                tempfile::Builder::new()
                    .prefix("raftlock-")
                    .tempdir()
                    .map_err(io("cannot make a temporary directory"))?,
            ),
        };
        let (ports, fresh_ports) = ports(dir.path(), &options)?;
        let mut nodes = Vec::new();
        for (id, client, peer) in ports.nodes {
            let host = options.hosts.of(id);
            let metrics_addr = match options.metrics {
                // Picked afresh on every start: nothing refers to them
                // across restarts.
                true => Some(format!("{host}:{}", free_port(&host)?)),
                false => None,
            };
            nodes.push(Node::new(
                id,
                format!("{host}:{client}"),
                format!("{host}:{peer}"),
                metrics_addr,
                dir.path(),
            ));
        }
        let initial = InitialCluster(
            nodes
                .iter()
                .map(|n| {
                    (
                        n.id,
                        InitialMember {
                            peer: n.peer_addr.clone(),
                            client: n.client_addr.clone(),
                        },
                    )
                })
                .collect(),
        );
        Ok(LocalCluster {
            nodes,
            options,
            initial,
            dir,
            fresh_ports,
        })
    }

    /// Stops every node and drops the recorded ports, so that the next
    /// start picks new ones.
    fn forget_ports(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
        let _ = std::fs::remove_file(self.dir.path().join(PORTS_FILE));
    }

    /// The nodes, by position (id = position + 1).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Node `id`.
    ///
    /// # Panics
    /// If the cluster has no node `id`.
    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    /// The `--initial-cluster` the nodes start with.
    pub fn initial_cluster(&self) -> &InitialCluster {
        &self.initial
    }

    /// Client endpoints of every node.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.client_addr.clone()).collect()
    }

    /// Where the data dirs and logs are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// How the launcher reaches the nodes.
    pub fn access(&self) -> &Access {
        &self.options.access
    }

    /// Extra flags for every node started from now on.
    pub fn args_mut(&mut self) -> &mut Vec<OsString> {
        &mut self.options.args
    }

    /// (Re)starts node `id` from its data dir, appending to its log. A node
    /// already running is left alone.
    pub fn start_node(&mut self, id: u64) -> Result<(), Error> {
        let options = self.options.clone();
        let initial = self.initial.to_string();
        self.node_mut(id).spawn(&options, &initial)
    }

    /// Adds node `n + 1` with an empty data dir and starts it without
    /// `--initial-cluster`, so it waits to be added as a learner. Returns
    /// its id.
    pub fn add_node(&mut self) -> Result<u64, Error> {
        let id = self.nodes.len() as u64 + 1;
        let host = self.options.hosts.of(id);
        let metrics_addr = match self.options.metrics {
            true => Some(format!("{host}:{}", free_port(&host)?)),
            false => None,
        };
        let mut node = Node::new(
            id,
            format!("{host}:{}", free_port(&host)?),
            format!("{host}:{}", free_port(&host)?),
            metrics_addr,
            self.dir.path(),
        );
        node.joiner = true;
        self.nodes.push(node);
        self.start_node(id)?;
        Ok(id)
    }

    /// Deletes node `id`'s data dir (the node must be stopped): a machine
    /// whose disk was lost. It then starts as a new node waiting to be
    /// added.
    pub fn wipe(&mut self, id: u64) -> Result<(), Error> {
        let node = self.node_mut(id);
        if node.child.is_some() {
            return Err(Error::Invalid(format!("stop node {id} before wiping it")));
        }
        remove_dir(&node.data_dir)?;
        node.joiner = true;
        Ok(())
    }

    /// Node `id` starts without `--initial-cluster` from now on: its data
    /// dir says which cluster it belongs to (after `raftlockd recover`, say,
    /// which makes it a cluster of its own).
    pub fn detach_from_initial_cluster(&mut self, id: u64) {
        self.node_mut(id).joiner = true;
    }

    /// Environment added to node `id` from its next start on (replacing
    /// what was set before): a skewed clock under libfaketime, say.
    pub fn set_node_env(&mut self, id: u64, env: Vec<(OsString, OsString)>) {
        self.node_mut(id).env = env;
    }

    /// `kill -9` node `id` and reap it: a crash, not a graceful stop.
    pub fn kill(&mut self, id: u64) {
        self.node_mut(id).kill();
    }

    /// Sends SIGTERM to node `id` (a leader hands leadership over before it
    /// exits) and waits up to `within` for it to exit, then kills it.
    /// Returns whether it exited by itself with status 0.
    pub async fn terminate(&mut self, id: u64, within: Duration) -> bool {
        self.node_mut(id).signal(Signal::SIGTERM);
        let Some(mut child) = self.node_mut(id).child.take() else {
            return false;
        };
        let deadline = Instant::now() + within;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return false;
                }
            }
        }
    }

    /// Terminates every running node at once and waits for all of them;
    /// returns the ids of those that had to be killed.
    pub async fn stop(&mut self, within: Duration) -> Vec<u64> {
        for n in &mut self.nodes {
            n.signal(Signal::SIGCONT);
            n.signal(Signal::SIGTERM);
        }
        let mut killed = Vec::new();
        for id in 1..=self.nodes.len() as u64 {
            if self.node(id).child.is_some() && !self.terminate(id, within).await {
                killed.push(id);
            }
        }
        killed
    }

    /// SIGSTOP node `id`.
    pub fn pause(&mut self, id: u64) {
        let n = self.node_mut(id);
        n.signal(Signal::SIGSTOP);
        n.paused = n.child.is_some();
    }

    /// SIGCONT node `id`.
    pub fn resume(&mut self, id: u64) {
        let n = self.node_mut(id);
        n.signal(Signal::SIGCONT);
        n.paused = false;
    }

    /// How node `id` exited, if it has since it was started (it is reaped
    /// then, and counts as stopped).
    pub fn exited(&mut self, id: u64) -> Option<ExitStatus> {
        let n = self.node_mut(id);
        let status = n.child.as_mut()?.try_wait().ok()??;
        n.child = None;
        n.paused = false;
        Some(status)
    }

    /// The first node found to have exited by itself, and how.
    pub fn any_exited(&mut self) -> Option<(u64, ExitStatus)> {
        (1..=self.nodes.len() as u64).find_map(|id| self.exited(id).map(|s| (id, s)))
    }

    /// Node `id`'s status, asked of the node itself.
    pub async fn status(&self, id: u64) -> Result<StatusResponse, tonic::Status> {
        let channel = self
            .options
            .access
            .channel(&self.node(id).client_addr)
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut req = self.options.access.request(StatusRequest::default());
        req.set_timeout(Duration::from_millis(500));
        Ok(ClusterClient::new(channel).status(req).await?.into_inner())
    }

    /// The node that says it leads, asking running, unpaused nodes only.
    pub async fn leader(&self) -> Option<u64> {
        for n in self.nodes.iter().filter(|n| n.is_up()) {
            if let Ok(s) = self.status(n.id).await {
                if s.leader_id == s.node_id && s.role == Role::Leader as i32 {
                    return Some(s.node_id);
                }
            }
        }
        None
    }

    /// Waits until some running node leads.
    pub async fn wait_for_leader(&self, within: Duration) -> Result<u64, Error> {
        self.wait_for_leader_other_than(None, within).await
    }

    /// Waits until a running node other than `old` leads.
    pub async fn wait_for_new_leader(&self, old: u64, within: Duration) -> Result<u64, Error> {
        self.wait_for_leader_other_than(Some(old), within).await
    }

    async fn wait_for_leader_other_than(
        &self,
        old: Option<u64>,
        within: Duration,
    ) -> Result<u64, Error> {
        let deadline = Instant::now() + within;
        loop {
            match self.leader().await {
                Some(l) if Some(l) != old => return Ok(l),
                _ => {}
            }
            if Instant::now() > deadline {
                return Err(self.timeout("no leader", within));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every running node accepts connections on its client
    /// port.
    pub async fn wait_for_listeners(&self, within: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            while tokio::net::TcpStream::connect(&n.client_addr)
                .await
                .is_err()
            {
                if Instant::now() > deadline {
                    let what = format!("node {} does not listen on {}", n.id, n.client_addr);
                    return Err(self.timeout(&what, within));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    /// Waits until every running node has heard from a leader. A node that
    /// has not still runs its first, short election timer and may stand.
    pub async fn wait_for_followers(&self, within: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        for n in self.nodes.iter().filter(|n| n.is_up()) {
            while !self.status(n.id).await.is_ok_and(|s| s.leader_id != 0) {
                if Instant::now() > deadline {
                    let what = format!("node {} has not heard from a leader", n.id);
                    return Err(self.timeout(&what, within));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    /// Waits until every started node has logged that it serves (both
    /// listeners bound: a connection test could reach whatever else holds a
    /// port). A node that exits meanwhile is an error carrying its log.
    async fn wait_serving(&mut self, within: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        loop {
            let mut serving = 0;
            for id in 1..=self.nodes.len() as u64 {
                if self.node(id).child.is_none() {
                    serving += 1;
                    continue;
                }
                let log = self.log_of(id);
                if log.contains(node::SERVING) {
                    serving += 1;
                } else if let Some(status) = self.exited(id) {
                    return Err(Error::Exited {
                        id,
                        status,
                        log: tail(&log, 30),
                    });
                }
            }
            if serving == self.nodes.len() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.timeout("the nodes did not all serve", within));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn timeout(&self, what: &str, within: Duration) -> Error {
        Error::Timeout {
            what: what.to_owned(),
            within,
            logs: self.logs(),
        }
    }

    /// The full log of node `id`.
    pub fn log_of(&self, id: u64) -> String {
        std::fs::read_to_string(&self.node(id).log).unwrap_or_default()
    }

    /// The tail of every node's log with whether its process runs, for
    /// failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let text = std::fs::read_to_string(&n.log).unwrap_or_default();
            // Whether the process is alive tells a node that never started
            // from one that started and went quiet.
            let process = match &n.child {
                None => "not running".to_owned(),
                Some(c) => std::fs::read_to_string(format!("/proc/{}/status", c.id()))
                    .ok()
                    .and_then(|st| {
                        st.lines()
                            .find(|l| l.starts_with("State:"))
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| format!("pid {} has exited", c.id())),
            };
            out.push_str(&format!(
                "--- node {} (client {}, peer {}; {process}) ---\n{}\n",
                n.id,
                n.client_addr,
                n.peer_addr,
                tail(&text, 30)
            ));
        }
        out
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}

fn lost_a_port(log: &str) -> bool {
    log.lines()
        .any(|l| l.contains("cannot listen on") && l.contains("Address already in use"))
}

/// The last `n` lines of a log, with the lines that say why a process died
/// kept from above them (a backtrace alone fills the tail).
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines.len().saturating_sub(n);
    let mut in_error = false;
    let mut kept: Vec<&str> = lines[..cut]
        .iter()
        .filter(|l| {
            if l.starts_with("Error:") {
                in_error = true;
            } else if l.starts_with("Stack backtrace:") {
                in_error = false;
            }
            in_error || l.contains("panicked at")
        })
        .copied()
        .collect();
    kept.extend_from_slice(&lines[cut..]);
    kept.join("\n")
}

const PORTS_FILE: &str = "ports.json";

/// Client and peer ports for every node: those recorded in the directory
/// when ports are kept, else fresh ones (`true`).
fn ports(dir: &Path, options: &Options) -> Result<(Ports, bool), Error> {
    let file = dir.join(PORTS_FILE);
    if options.keep_ports {
        if let Ok(bytes) = std::fs::read(&file) {
            let ports: Ports = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Invalid(format!("{} is damaged: {e}", file.display())))?;
            if ports.nodes.len() as u64 != options.nodes {
                return Err(Error::Invalid(format!(
                    "{} holds a {}-node cluster, not {}",
                    dir.display(),
                    ports.nodes.len(),
                    options.nodes
                )));
            }
            return Ok((ports, false));
        }
    }
    let mut nodes = Vec::new();
    for id in 1..=options.nodes {
        let host = options.hosts.of(id);
        nodes.push((id, free_port(&host)?, free_port(&host)?));
    }
    let ports = Ports { nodes };
    if options.keep_ports {
        let json = serde_json::to_vec_pretty(&ports)
            .map_err(|e| Error::Invalid(format!("cannot record the ports: {e}")))?;
        std::fs::write(&file, json).map_err(io(format!("cannot write {}", file.display())))?;
    }
    Ok((ports, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_why_a_process_died() {
        let mut log = String::from("Error: cannot open data dir\n  disk full\nStack backtrace:\n");
        for i in 0..40 {
            log.push_str(&format!("frame {i}\n"));
        }
        let t = tail(&log, 30);
        assert!(
            t.starts_with("Error: cannot open data dir\n  disk full\nframe 10"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 32);
    }

    #[test]
    fn a_kept_directory_keeps_its_ports() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::new("raftlockd", 3);
        o.dir = Some(dir.path().to_owned());
        o.keep_ports = true;
        let a = LocalCluster::create(o.clone()).unwrap();
        let b = LocalCluster::create(o.clone()).unwrap();
        assert_eq!(a.initial_cluster(), b.initial_cluster());
        o.nodes = 5;
        assert!(matches!(LocalCluster::create(o), Err(Error::Invalid(_))));
    }

    #[test]
    fn nodes_are_laid_out_under_the_directory_and_named_in_the_initial_cluster() {
        let mut o = Options::new("raftlockd", 3);
        o.hosts = Hosts::Shared("127.0.0.1".into());
        let c = LocalCluster::create(o).unwrap();
        let text = c.initial_cluster().to_string();
        assert_eq!(
            text.parse::<InitialCluster>().unwrap(),
            *c.initial_cluster()
        );
        for n in c.nodes() {
            assert!(n.data_dir.starts_with(c.dir()));
            assert!(text.contains(&format!("{}={}/{}", n.id, n.peer_addr, n.client_addr)));
        }
    }
}
