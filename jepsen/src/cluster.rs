//! Cluster control: real `raftlockd` processes started by the shared
//! [`raftlock_local`] launcher, each on its own loopback IP (127.0.0.11,
//! 127.0.0.12, ...) so that the network nemesis can cut links between
//! particular nodes, or containers of the raftlock image on a private
//! network.

use raftlock_local::{Hosts, LocalCluster, Options};
use raftlock_proto::v1::{cluster_client::ClusterClient, Role, StatusRequest};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tokio::time::Instant;

/// The cluster under test: processes (stopped by PID when dropped), or
/// containers on a private network (removed, with their network and
/// volumes, when dropped).
pub struct Cluster {
    mode: Mode,
    /// Each node's own tmpfs (disk nemesis), unmounted after the nodes are
    /// gone: fields drop in order.
    disks: Disks,
}

/// Where the nodes' data dirs live.
enum Disks {
    /// Wherever the cluster's directory is.
    Shared,
    /// Node `id`'s data dir is `disk-<id>/data` on a tmpfs mounted at
    /// `disk-<id>`.
    Own {
        dirs: Vec<PathBuf>,
        _mounts: crate::disk::Tmpfs,
    },
    /// Own disks were asked for and could not be mounted: why.
    Unavailable(String),
}

enum Mode {
    Processes {
        local: Box<LocalCluster>,
        /// Nodes running under libfaketime.
        skewed: BTreeSet<u64>,
    },
    Docker(Docker),
}

/// One node in docker mode.
struct DockerNode {
    id: u64,
    /// Its address on the private network.
    ip: String,
    client_addr: String,
    peer_addr: String,
    log: PathBuf,
    container: String,
    running: bool,
    paused: bool,
}

struct Docker {
    nodes: Vec<DockerNode>,
    network: String,
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
    Ok(raftlock_local::free_port(ip)?)
}

impl Cluster {
    /// Starts `n` nodes of `binary` with data and logs under `dir`, and waits
    /// for a leader. With `own_disks`, each node's data dir is on a tmpfs of
    /// its own (when this process may mount one), and its log is cut in
    /// small segments, so that a disk can be filled and a log damaged.
    pub async fn start(
        binary: &Path,
        n: u64,
        dir: &Path,
        own_disks: bool,
    ) -> anyhow::Result<Cluster> {
        let disks = if own_disks {
            own(n, dir)?
        } else {
            Disks::Shared
        };
        let mut options = Options::new(binary, n);
        options.hosts = Hosts::PerNode(crate::loopback::loopback_net().to_owned());
        options.dir = Some(dir.to_owned());
        options.metrics = false;
        options.log_filter = "info,openraft=warn".into();
        // Every kill is a power loss of that node: what its log had
        // written but not synced is gone, not kept by the page cache.
        options
            .env
            .push(("RAFTLOCK_FAULT_LOSE_UNSYNCED".into(), "true".into()));
        if own_disks {
            options.args.extend([
                "--wal-segment-mb".into(),
                crate::disk::SEGMENT_MB.to_string().into(),
                // No free-space reserve: a full disk is met by the write
                // that fails (the node stops, DESIGN.md rule 8), not by a
                // leader refusing growth for as long as its disk stays
                // full (rule 10), which no fault window here would end.
                "--space-reserve-mb".into(),
                "0".into(),
            ]);
        }
        let local = Box::new(LocalCluster::start(options).await?);
        Ok(Cluster {
            mode: Mode::Processes {
                local,
                skewed: BTreeSet::new(),
            },
            disks,
        })
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
            nodes.push(DockerNode {
                id,
                ip: String::new(),
                client_addr: format!("127.0.0.1:{port}"),
                peer_addr: format!("{tag}-n{id}:7100"),
                log: dir.join(format!("node-{id}.log")),
                container: format!("{tag}-n{id}"),
                running: false,
                paused: false,
            });
        }
        let initial = raftlock_local::InitialCluster(
            nodes
                .iter()
                .map(|n| {
                    let m = raftlock_local::InitialMember {
                        peer: n.peer_addr.clone(),
                        client: n.client_addr.clone(),
                    };
                    (n.id, m)
                })
                .collect(),
        )
        .to_string();
        // Owned before the first container runs, so that a failure below
        // removes whatever was created.
        let mut d = Docker {
            nodes,
            network: tag.clone(),
        };
        for n in &mut d.nodes {
            let port = n
                .client_addr
                .rsplit(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            let name = n.container.clone();
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
        let cluster = Cluster {
            mode: Mode::Docker(d),
            disks: Disks::Shared,
        };
        cluster.wait_for_leader(Duration::from_secs(60)).await?;
        Ok(cluster)
    }

    /// How many nodes.
    pub fn node_count(&self) -> u64 {
        match &self.mode {
            Mode::Processes { local, .. } => local.nodes().len() as u64,
            Mode::Docker(d) => d.nodes.len() as u64,
        }
    }

    /// The address node `id` sends and receives peer traffic on (what a
    /// network partition cuts).
    pub fn ip(&self, id: u64) -> String {
        match &self.mode {
            Mode::Processes { local, .. } => {
                let addr = &local.node(id).client_addr;
                addr.rsplit_once(':')
                    .map(|(h, _)| h)
                    .unwrap_or(addr)
                    .to_owned()
            }
            Mode::Docker(d) => d.nodes[(id - 1) as usize].ip.clone(),
        }
    }

    /// The container of node `id` (docker mode).
    pub fn container(&self, id: u64) -> Option<&str> {
        match &self.mode {
            Mode::Processes { .. } => None,
            Mode::Docker(d) => Some(&d.nodes[(id - 1) as usize].container),
        }
    }

    /// Whether this cluster runs in containers.
    pub fn is_docker(&self) -> bool {
        matches!(self.mode, Mode::Docker(_))
    }

    /// Client endpoints of every node.
    pub fn endpoints(&self) -> Vec<String> {
        match &self.mode {
            Mode::Processes { local, .. } => local.endpoints(),
            Mode::Docker(d) => d.nodes.iter().map(|n| n.client_addr.clone()).collect(),
        }
    }

    /// (Re)starts node `id` from its data dir, appending to its log.
    pub fn start_node(&mut self, id: u64) -> anyhow::Result<()> {
        match &mut self.mode {
            Mode::Processes { local, .. } => Ok(local.start_node(id)?),
            Mode::Docker(d) => {
                let n = &mut d.nodes[(id - 1) as usize];
                if !n.running {
                    docker(&["start", &n.container])?;
                    n.running = true;
                    n.paused = false;
                }
                Ok(())
            }
        }
    }

    /// `kill -9` node `id` and reap it.
    pub fn kill(&mut self, id: u64) {
        match &mut self.mode {
            Mode::Processes { local, .. } => local.kill(id),
            Mode::Docker(d) => {
                let n = &mut d.nodes[(id - 1) as usize];
                let _ = docker(&["kill", "-s", "KILL", &n.container]);
                n.running = false;
                n.paused = false;
            }
        }
    }

    /// Stops node `id` with SIGTERM (a leader hands leadership over
    /// first), killing it if it has not exited within `within`; whether it
    /// exited cleanly by itself.
    pub async fn terminate(&mut self, id: u64, within: Duration) -> bool {
        match &mut self.mode {
            Mode::Processes { local, .. } => local.terminate(id, within).await,
            Mode::Docker(d) => {
                let n = &mut d.nodes[(id - 1) as usize];
                let stopped = docker(&[
                    "stop",
                    "-t",
                    &within.as_secs().max(1).to_string(),
                    &n.container,
                ])
                .is_ok();
                n.running = false;
                n.paused = false;
                stopped
            }
        }
    }

    /// SIGSTOP node `id` (`docker pause` in docker mode).
    pub fn pause(&mut self, id: u64) {
        match &mut self.mode {
            Mode::Processes { local, .. } => local.pause(id),
            Mode::Docker(d) => {
                let n = &mut d.nodes[(id - 1) as usize];
                if docker(&["pause", &n.container]).is_ok() {
                    n.paused = true;
                }
            }
        }
    }

    /// SIGCONT node `id` (`docker unpause`).
    pub fn resume(&mut self, id: u64) {
        match &mut self.mode {
            Mode::Processes { local, .. } => local.resume(id),
            Mode::Docker(d) => {
                let n = &mut d.nodes[(id - 1) as usize];
                let _ = docker(&["unpause", &n.container]);
                n.paused = false;
            }
        }
    }

    /// Restarts node `id` (a `kill -9` first) with its clock running at
    /// `rate` times real time, under libfaketime.
    pub fn restart_skewed(&mut self, id: u64, rate: f64) -> anyhow::Result<()> {
        let Mode::Processes { local, skewed } = &mut self.mode else {
            anyhow::bail!("clock skew needs process nodes (libfaketime on the host)");
        };
        let library = faketime_library()?;
        local.kill(id);
        // Every clock the process reads (monotonic and wall) runs at `rate`
        // times real time from its start.
        let env: Vec<(OsString, OsString)> = vec![
            ("LD_PRELOAD".into(), library.into()),
            ("FAKETIME".into(), format!("+0 x{rate}").into()),
            ("FAKETIME_DONT_RESET".into(), "1".into()),
        ];
        local.set_node_env(id, env);
        skewed.insert(id);
        Ok(local.start_node(id)?)
    }

    /// Brings every node back: resumes paused ones, restarts dead ones, and
    /// restarts skewed ones on the real clock.
    pub fn heal_processes(&mut self) -> anyhow::Result<()> {
        match &mut self.mode {
            Mode::Processes { local, skewed } => {
                for id in 1..=local.nodes().len() as u64 {
                    local.resume(id);
                    if skewed.remove(&id) {
                        local.kill(id);
                        local.set_node_env(id, Vec::new());
                    }
                    // A node that exited by itself (it crashed, say) is
                    // restarted like a killed one; left as an unreaped child
                    // it would never come back, and a membership round would
                    // wait on it for ever.
                    if let Some(status) = local.exited(id) {
                        tracing::warn!(node = id, %status, "node exited by itself: restarting it");
                    }
                    local.start_node(id)?;
                }
                Ok(())
            }
            Mode::Docker(d) => {
                for n in &mut d.nodes {
                    if n.paused {
                        let _ = docker(&["unpause", &n.container]);
                        n.paused = false;
                    }
                    if !n.running {
                        docker(&["start", &n.container])?;
                        n.running = true;
                    }
                }
                Ok(())
            }
        }
    }

    /// Whether node `id` runs and is not paused.
    pub fn is_up(&self, id: u64) -> bool {
        match &self.mode {
            Mode::Processes { local, .. } => local.node(id).is_up(),
            Mode::Docker(d) => {
                let n = &d.nodes[(id - 1) as usize];
                n.running && !n.paused
            }
        }
    }

    /// The node that says it leads, asking running nodes only.
    pub async fn leader(&self) -> Option<u64> {
        match &self.mode {
            Mode::Processes { local, .. } => local.leader().await,
            Mode::Docker(d) => {
                for n in d.nodes.iter().filter(|n| n.running && !n.paused) {
                    let Ok(s) = status(&n.client_addr).await else {
                        continue;
                    };
                    if s.role == Role::Leader as i32 && s.leader_id == s.node_id {
                        return Some(s.node_id);
                    }
                }
                None
            }
        }
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

    /// Node `id`'s data dir (process nodes).
    pub fn data_dir(&self, id: u64) -> anyhow::Result<PathBuf> {
        match &self.mode {
            Mode::Processes { local, .. } => Ok(local.node(id).data_dir.clone()),
            Mode::Docker(_) => anyhow::bail!("the data dirs of containers are not reachable here"),
        }
    }

    /// The root of node `id`'s own tmpfs, or why it has none.
    pub fn own_disk(&self, id: u64) -> anyhow::Result<&Path> {
        match &self.disks {
            Disks::Own { dirs, .. } => Ok(&dirs[(id - 1) as usize]),
            Disks::Unavailable(why) => anyhow::bail!("no tmpfs of its own for n{id}: {why}"),
            Disks::Shared => anyhow::bail!("the cluster was started without disks of their own"),
        }
    }

    /// How node `id` exited, if it has since it was started (process
    /// nodes; it counts as stopped from then on).
    pub fn exited(&mut self, id: u64) -> Option<std::process::ExitStatus> {
        match &mut self.mode {
            Mode::Processes { local, .. } => local.exited(id),
            Mode::Docker(_) => None,
        }
    }

    /// Whether node `id`'s process runs (process nodes).
    pub fn is_running(&self, id: u64) -> bool {
        match &self.mode {
            Mode::Processes { local, .. } => local.node(id).is_running(),
            Mode::Docker(d) => d.nodes[(id - 1) as usize].running,
        }
    }

    /// Starts node `id` (stopped) from its data dir with `args` added to
    /// the usual flags for this start only.
    pub fn start_node_with(&mut self, id: u64, args: &[String]) -> anyhow::Result<()> {
        let Mode::Processes { local, .. } = &mut self.mode else {
            anyhow::bail!("extra flags need process nodes");
        };
        let before = local.args_mut().len();
        local.args_mut().extend(args.iter().map(OsString::from));
        let started = local.start_node(id);
        local.args_mut().truncate(before);
        Ok(started?)
    }

    /// Empties the stopped node `id`'s data dir, a disk replaced, and has
    /// it start from now on without `--initial-cluster`, as a node waiting
    /// to be added: a wiped node started with it would found a cluster of
    /// its own.
    pub fn wipe(&mut self, id: u64) -> anyhow::Result<()> {
        let Mode::Processes { local, .. } = &mut self.mode else {
            anyhow::bail!("wiping a node needs process nodes");
        };
        anyhow::ensure!(!local.node(id).is_running(), "stop n{id} before wiping it");
        // The entries, not the directory: it may be a tmpfs's, reached
        // through a link.
        let dir = local.node(id).data_dir.clone();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries {
                let p = e?.path();
                if p.is_dir() && !p.is_symlink() {
                    std::fs::remove_dir_all(&p)?;
                } else {
                    std::fs::remove_file(&p)?;
                }
            }
        }
        local.detach_from_initial_cluster(id);
        Ok(())
    }

    /// The log file of node `id`.
    pub fn log_of(&self, id: u64) -> PathBuf {
        match &self.mode {
            Mode::Processes { local, .. } => local.node(id).log.clone(),
            Mode::Docker(d) => d.nodes[(id - 1) as usize].log.clone(),
        }
    }
}

/// A tmpfs mounted at `dir/disk-<id>` for each node, its data dir
/// `dir/node-<id>` a link to `disk-<id>/data`; or why not.
fn own(n: u64, dir: &Path) -> anyhow::Result<Disks> {
    let dirs: Vec<PathBuf> = (1..=n).map(|id| dir.join(format!("disk-{id}"))).collect();
    let mounts = match crate::disk::Tmpfs::mount(&dirs, crate::disk::TMPFS_MB) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = %e, "no tmpfs per node: the full-disk rounds will fail");
            return Ok(Disks::Unavailable(format!("{e:#}")));
        }
    };
    for id in 1..=n {
        std::fs::create_dir_all(dirs[(id - 1) as usize].join("data"))?;
        std::os::unix::fs::symlink(format!("disk-{id}/data"), dir.join(format!("node-{id}")))?;
    }
    Ok(Disks::Own {
        dirs,
        _mounts: mounts,
    })
}

/// libfaketime's multi-threaded library (Debian's `libfaketime`), or
/// `RAFTLOCK_JEPSEN_FAKETIME`.
pub fn faketime_library() -> anyhow::Result<PathBuf> {
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

impl Drop for Docker {
    fn drop(&mut self) {
        for n in &self.nodes {
            // Keep each node's log with the run, then remove the container
            // and its volume.
            if let Ok(out) = Command::new("docker").args(["logs", &n.container]).output() {
                let mut log = out.stdout;
                log.extend_from_slice(&out.stderr);
                let _ = std::fs::write(&n.log, log);
            }
            let _ = docker(&["rm", "-f", "-v", &n.container]);
            let _ = docker(&["volume", "rm", "-f", &n.container]);
        }
        let _ = docker(&["network", "rm", &self.network]);
    }
}
