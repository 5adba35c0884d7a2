//! `raftlockd` configuration: command-line flags, each with an environment
//! variable fallback (`RAFTLOCK_*`), over an optional TOML file
//! (`--config`), over defaults. Flags win over the environment, which wins
//! over the file.

pub use crate::error::ConfigError;
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default lowest election timeout: a dead leader is replaced after 0.9 to
/// 1.2 s (openraft 0.9 waits lease + timeout), while only a silence of at
/// least 900 ms, nine heartbeats, starts an election.
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 300;

/// Flags of a node.
#[derive(Args, Clone, Debug, Default)]
pub struct NodeArgs {
    /// TOML file with any of the settings below (keys as the flags, with
    /// underscores: `data_dir = "/var/lib/raftlock"`).
    #[arg(long, env = "RAFTLOCK_CONFIG")]
    pub config: Option<PathBuf>,
    /// This node's id (a positive integer unique in the cluster).
    #[arg(long, env = "RAFTLOCK_ID")]
    pub id: Option<u64>,
    /// Take the id from the host name's trailing number plus one
    /// (`raftlock-0` is node 1): a Kubernetes StatefulSet's pod ordinal.
    #[arg(long, env = "RAFTLOCK_ID_FROM_HOSTNAME", conflicts_with = "id")]
    pub id_from_hostname: bool,
    /// Where the node keeps its Raft log and snapshots.
    #[arg(long, env = "RAFTLOCK_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address for clients to connect to [default: 127.0.0.1:7000].
    #[arg(long, env = "RAFTLOCK_LISTEN_CLIENT")]
    pub listen_client: Option<String>,
    /// Address for peer (Raft) traffic [default: 127.0.0.1:7100].
    #[arg(long, env = "RAFTLOCK_LISTEN_PEER")]
    pub listen_peer: Option<String>,
    /// Client address other nodes hand to clients [default: --listen-client].
    #[arg(long, env = "RAFTLOCK_ADVERTISE_CLIENT")]
    pub advertise_client: Option<String>,
    /// Peer address other nodes use to reach this one [default: --listen-peer].
    #[arg(long, env = "RAFTLOCK_ADVERTISE_PEER")]
    pub advertise_peer: Option<String>,
    /// Members for a first start: `1=peer_host:port/client_host:port,2=...`
    /// (the `/client` part may be left out when it is the peer address with
    /// the port lowered by 100). Used only when the data dir is empty; later
    /// starts recover from the data dir.
    #[arg(long, env = "RAFTLOCK_INITIAL_CLUSTER")]
    pub initial_cluster: Option<String>,
    /// Raft heartbeat interval in ms [default: 100].
    #[arg(long, env = "RAFTLOCK_HEARTBEAT_MS")]
    pub heartbeat_ms: Option<u64>,
    /// Lowest election timeout in ms [default: 300]; the highest is twice
    /// it. A follower that has seen a leader waits the highest timeout
    /// (the leader's lease) plus a random one before it stands, so a dead
    /// leader is replaced after 3 to 4 times this.
    #[arg(long, env = "RAFTLOCK_ELECTION_TIMEOUT_MS")]
    pub election_timeout_ms: Option<u64>,
    /// Entries between snapshots [default: 10000].
    #[arg(long, env = "RAFTLOCK_SNAPSHOT_EVERY")]
    pub snapshot_every: Option<u64>,
    /// Most commands the leader groups into one log entry (group commit:
    /// one append and one fsync for all) [default: 1024; 1 turns grouping
    /// off; at most 65536].
    #[arg(long, env = "RAFTLOCK_MAX_BATCH_COMMANDS")]
    pub max_batch_commands: Option<usize>,
    /// Log entries the leader has proposed and not yet applied at once
    /// [default: 2; at most 64]. Commands that arrive meanwhile wait to
    /// form the next entry; an entry of more than a few commands waits
    /// until none is in flight, so load forms fewer, larger entries.
    #[arg(long, env = "RAFTLOCK_PROPOSALS_IN_FLIGHT")]
    pub proposals_in_flight: Option<usize>,
    /// How a leader's fsync and its followers' are ordered [default:
    /// parallel]: `parallel` replicates an entry while the leader writes
    /// it, so a commit waits for one fsync in series (no commit is visible
    /// before the leader's copy is durable); `serial` writes it first, as
    /// openraft alone does, for comparisons.
    #[arg(long, env = "RAFTLOCK_LEADER_FLUSH", value_enum)]
    pub leader_flush: Option<LeaderFlush>,
    /// Fault injection, never for production: keep the log's writes in
    /// memory until they are synced, so that killing the node loses what a
    /// power loss would (for power-loss drills and tests).
    #[arg(long, env = "RAFTLOCK_FAULT_LOSE_UNSYNCED", hide = true)]
    pub fault_lose_unsynced: bool,
    /// Log format: text or json [default: text].
    #[arg(long, env = "RAFTLOCK_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Log filter, e.g. `info` or `debug,openraft=info` [default:
    /// RUST_LOG, else `info,openraft=warn`].
    #[arg(long, env = "RAFTLOCK_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Address of the HTTP admin listener: /metrics (Prometheus), /health
    /// and /ready [default: none, no listener].
    #[arg(long, env = "RAFTLOCK_LISTEN_METRICS")]
    pub listen_metrics: Option<String>,
    /// Turns authentication on: a TOML file of roles and identities (bearer
    /// token hashes, client certificate names); see docs/security.md
    /// [default: off, every caller may do everything].
    #[arg(long, env = "RAFTLOCK_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub tls: crate::tls::TlsArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub limits: crate::limits::LimitArgs,
}

/// How a leader orders its own fsync and its followers' (`--leader-flush`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LeaderFlush {
    /// Replicate while writing: one fsync in series per commit.
    Parallel,
    /// Write, then replicate: two fsyncs in series per commit.
    Serial,
}

/// The file form of [`NodeArgs`].
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    id: Option<u64>,
    data_dir: Option<PathBuf>,
    listen_client: Option<String>,
    listen_peer: Option<String>,
    advertise_client: Option<String>,
    advertise_peer: Option<String>,
    initial_cluster: Option<String>,
    heartbeat_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    snapshot_every: Option<u64>,
    max_batch_commands: Option<usize>,
    proposals_in_flight: Option<usize>,
    leader_flush: Option<LeaderFlush>,
    log_format: Option<String>,
    log_level: Option<String>,
    listen_metrics: Option<String>,
    auth_file: Option<PathBuf>,
    #[serde(default)]
    tls: crate::tls::TlsArgs,
    #[serde(default)]
    limits: crate::limits::LimitArgs,
}

pub use raftlock_proto::cluster::InitialMember;

/// The members of `--initial-cluster` as Raft knows nodes.
pub fn member_nodes(
    members: &BTreeMap<u64, InitialMember>,
) -> BTreeMap<u64, raftlock_store::NodeInfo> {
    members
        .iter()
        .map(|(id, m)| {
            (
                *id,
                raftlock_store::NodeInfo {
                    peer_addr: m.peer.clone(),
                    client_addr: m.client.clone(),
                },
            )
        })
        .collect()
}

/// A complete, checked node configuration.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// Node id.
    pub id: u64,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Client listener.
    pub listen_client: String,
    /// Peer listener.
    pub listen_peer: String,
    /// Advertised client address.
    pub advertise_client: String,
    /// Advertised peer address.
    pub advertise_peer: String,
    /// Members for a first start.
    pub initial_cluster: BTreeMap<u64, InitialMember>,
    /// Raft heartbeat interval.
    pub heartbeat: Duration,
    /// Lowest election timeout.
    pub election_timeout: Duration,
    /// Most commands per log entry.
    pub max_batch_commands: usize,
    /// Entries proposed and not yet applied at once.
    pub proposals_in_flight: usize,
    /// Whether the leader replicates while it writes.
    pub leader_flush: LeaderFlush,
    /// Log writes stay in memory until synced (fault injection).
    pub fault_lose_unsynced: bool,
    /// Entries between snapshots.
    pub snapshot_every: u64,
    /// `text` or `json`.
    pub log_format: String,
    /// Log filter (`None`: RUST_LOG or the default).
    pub log_level: Option<String>,
    /// HTTP admin listener, if any.
    pub listen_metrics: Option<String>,
    /// Auth file (authentication on), if any.
    pub auth_file: Option<PathBuf>,
    /// TLS material.
    pub tls: crate::tls::Tls,
    /// Limits against exhaustion.
    pub limits: crate::limits::Limits,
}

impl NodeArgs {
    /// Merges flags, environment (already folded into the flags by clap),
    /// the config file and defaults, and checks the result.
    pub fn resolve(&self) -> Result<NodeConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let id = match (self.id.or(file.id), self.id_from_hostname) {
            (Some(id), _) => id,
            (None, true) => id_from_hostname(&hostname()?)?,
            (None, false) => return Err(ConfigError::Missing("--id")),
        };
        if id == 0 {
            return Err(ConfigError::Invalid {
                setting: "--id",
                reason: "node ids start at 1".into(),
            });
        }
        let data_dir = self
            .data_dir
            .clone()
            .or(file.data_dir)
            .ok_or(ConfigError::Missing("--data-dir"))?;
        let listen_client = self
            .listen_client
            .clone()
            .or(file.listen_client)
            .unwrap_or_else(|| "127.0.0.1:7000".into());
        let listen_peer = self
            .listen_peer
            .clone()
            .or(file.listen_peer)
            .unwrap_or_else(|| "127.0.0.1:7100".into());
        let advertise_client = self
            .advertise_client
            .clone()
            .or(file.advertise_client)
            .unwrap_or_else(|| listen_client.clone());
        let advertise_peer = self
            .advertise_peer
            .clone()
            .or(file.advertise_peer)
            .unwrap_or_else(|| listen_peer.clone());
        let initial_cluster = match self.initial_cluster.clone().or(file.initial_cluster) {
            Some(spec) => parse_initial_cluster(&spec)?,
            None => BTreeMap::new(),
        };
        if !initial_cluster.is_empty() && !initial_cluster.contains_key(&id) {
            return Err(ConfigError::Invalid {
                setting: "--initial-cluster",
                reason: format!("does not name this node (id {id})"),
            });
        }
        let heartbeat =
            Duration::from_millis(self.heartbeat_ms.or(file.heartbeat_ms).unwrap_or(100));
        let election_timeout = Duration::from_millis(
            self.election_timeout_ms
                .or(file.election_timeout_ms)
                .unwrap_or(DEFAULT_ELECTION_TIMEOUT_MS),
        );
        if heartbeat.is_zero() || election_timeout <= heartbeat * 2 {
            return Err(ConfigError::Invalid {
                setting: "--election-timeout-ms",
                reason: format!(
                    "must be more than twice the heartbeat ({} ms), so one lost heartbeat does not start an election",
                    heartbeat.as_millis()
                ),
            });
        }
        let max_batch_commands = self
            .max_batch_commands
            .or(file.max_batch_commands)
            .unwrap_or(crate::batch::MAX_BATCH);
        if !(1..=raftlock_store::MAX_BATCH_COMMANDS).contains(&max_batch_commands) {
            return Err(ConfigError::Invalid {
                setting: "--max-batch-commands",
                reason: format!(
                    "{max_batch_commands} is not in 1..={}",
                    raftlock_store::MAX_BATCH_COMMANDS
                ),
            });
        }
        let proposals_in_flight = self
            .proposals_in_flight
            .or(file.proposals_in_flight)
            .unwrap_or(crate::batch::IN_FLIGHT);
        if !(1..=crate::batch::MAX_IN_FLIGHT).contains(&proposals_in_flight) {
            return Err(ConfigError::Invalid {
                setting: "--proposals-in-flight",
                reason: format!(
                    "{proposals_in_flight} is not in 1..={}",
                    crate::batch::MAX_IN_FLIGHT
                ),
            });
        }
        let log_format = self
            .log_format
            .clone()
            .or(file.log_format)
            .unwrap_or_else(|| "text".into());
        if log_format != "text" && log_format != "json" {
            return Err(ConfigError::Invalid {
                setting: "--log-format",
                reason: format!("{log_format:?} is not text or json"),
            });
        }
        Ok(NodeConfig {
            id,
            data_dir,
            listen_client,
            listen_peer,
            advertise_client,
            advertise_peer,
            initial_cluster,
            heartbeat,
            election_timeout,
            max_batch_commands,
            proposals_in_flight,
            leader_flush: self
                .leader_flush
                .or(file.leader_flush)
                .unwrap_or(LeaderFlush::Parallel),
            fault_lose_unsynced: self.fault_lose_unsynced,
            snapshot_every: self
                .snapshot_every
                .or(file.snapshot_every)
                .unwrap_or(10_000),
            log_format,
            log_level: self.log_level.clone().or(file.log_level),
            listen_metrics: self.listen_metrics.clone().or(file.listen_metrics),
            auth_file: self.auth_file.clone().or(file.auth_file),
            tls: self.tls.resolve(&file.tls)?,
            limits: self.limits.resolve(&file.limits)?,
        })
    }
}

fn hostname() -> Result<String, ConfigError> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(ConfigError::Invalid {
            setting: "--id-from-hostname",
            reason: format!("gethostname failed: {}", std::io::Error::last_os_error()),
        });
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// `raftlock-2` -> 3: the StatefulSet ordinal plus one (ids start at 1).
pub fn id_from_hostname(host: &str) -> Result<u64, ConfigError> {
    let short = host.split('.').next().unwrap_or(host);
    short
        .rsplit('-')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .map(|n| n + 1)
        .ok_or_else(|| ConfigError::Invalid {
            setting: "--id-from-hostname",
            reason: format!("host name {host:?} does not end in -<number>"),
        })
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::File {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Parses `1=host:port/host:port,2=host:port` (the format's one parser
/// is [`raftlock_proto::cluster::InitialCluster`]).
pub fn parse_initial_cluster(spec: &str) -> Result<BTreeMap<u64, InitialMember>, ConfigError> {
    spec.parse::<raftlock_proto::cluster::InitialCluster>()
        .map(|c| c.0)
        .map_err(|e| ConfigError::Invalid {
            setting: "--initial-cluster",
            reason: e.to_string(),
        })
}

/// A stable id for the cluster an `--initial-cluster` describes, so that
/// every member started with the same list derives the same id, and a data
/// dir from another cluster is recognised.
pub fn cluster_id(members: &BTreeMap<u64, InitialMember>) -> String {
    raftlock_proto::cluster::InitialCluster(members.clone()).cluster_id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_from_a_statefulset_host_name() {
        assert_eq!(id_from_hostname("raftlock-0").unwrap(), 1);
        assert_eq!(
            id_from_hostname("raftlock-12.raftlock-peer.ns.svc").unwrap(),
            13
        );
        assert!(id_from_hostname("raftlock").is_err());
    }

    #[test]
    fn max_batch_commands_is_bounded_by_what_a_token_can_number() {
        let with = |n| NodeArgs {
            id: Some(1),
            data_dir: Some("/d".into()),
            max_batch_commands: Some(n),
            ..Default::default()
        };
        assert_eq!(with(1).resolve().unwrap().max_batch_commands, 1);
        assert_eq!(with(65_536).resolve().unwrap().max_batch_commands, 65_536);
        assert!(with(0).resolve().is_err());
        assert!(with(65_537).resolve().is_err());
        let default = NodeArgs {
            id: Some(1),
            data_dir: Some("/d".into()),
            ..Default::default()
        };
        assert_eq!(default.resolve().unwrap().max_batch_commands, 1024);
    }

    #[test]
    fn proposals_in_flight_is_bounded() {
        let with = |n| NodeArgs {
            id: Some(1),
            data_dir: Some("/d".into()),
            proposals_in_flight: n,
            ..Default::default()
        };
        assert_eq!(with(None).resolve().unwrap().proposals_in_flight, 2);
        assert_eq!(with(Some(64)).resolve().unwrap().proposals_in_flight, 64);
        assert!(with(Some(0)).resolve().is_err());
        assert!(with(Some(65)).resolve().is_err());
    }

    #[test]
    fn flags_win_over_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "id = 3\ndata_dir = \"/d\"\nheartbeat_ms = 50\n").unwrap();
        let args = NodeArgs {
            config: Some(path),
            heartbeat_ms: Some(60),
            ..Default::default()
        };
        let c = args.resolve().unwrap();
        assert_eq!((c.id, c.heartbeat.as_millis()), (3, 60));
        let bad = NodeArgs {
            id: Some(1),
            data_dir: Some("/d".into()),
            heartbeat_ms: Some(300),
            election_timeout_ms: Some(500),
            ..Default::default()
        };
        assert!(bad.resolve().is_err());
    }
}
