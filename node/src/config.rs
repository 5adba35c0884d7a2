//! `raftlockd` configuration, layered with figment: defaults (written once,
//! in [`Settings::default`]), then the TOML file (`--config`), then
//! `RAFTLOCK_*` environment variables, then command-line flags; each layer
//! wins over the ones before. `raftlockd --print-config` shows the result
//! with where every value came from.

mod args;
mod cluster;

pub use crate::error::ConfigError;
pub use args::NodeArgs;
use clap::Args;
pub use cluster::{
    cluster_id, id_from_hostname, member_nodes, parse_initial_cluster, InitialMember,
};
use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::{Dict, Map};
use figment::{Figment, Metadata, Profile, Provider};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Default lowest election timeout: a dead leader is replaced after 0.9 to
/// 1.2 s (openraft 0.9 waits lease + timeout), while only a silence of at
/// least 900 ms, nine heartbeats, starts an election.
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 300;
/// How long a write or sync of the log may go without returning before the
/// node stops: well above a slow disk's fsync (the disk nemesis adds up to
/// 500 ms to each), well below what a hung disk would cost the cluster.
pub const DEFAULT_DISK_STALL_TIMEOUT_MS: u64 = 2_000;

/// How a leader orders its own fsync and its followers' (`--leader-flush`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LeaderFlush {
    /// Replicate while writing: one fsync in series per commit.
    Parallel,
    /// Write, then replicate: two fsyncs in series per commit.
    Serial,
}

/// Where a follower syncs the entries its leader sends (`--follower-flush`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FollowerFlush {
    /// On the task that appends them, when the log's writer is idle.
    Inline,
    /// On the log's writer thread.
    Thread,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Every setting of a node, each with its default: the one place defaults
/// are written. The config file has the same keys (`[tls]` and `[limits]`
/// as tables); each key is also a flag (`--data-dir`) and an environment
/// variable (`RAFTLOCK_DATA_DIR`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// This node's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Take the id from the host name's trailing number plus one.
    pub id_from_hostname: bool,
    /// Where the node keeps its Raft log and snapshots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// Client listener.
    pub listen_client: String,
    /// Peer listener.
    pub listen_peer: String,
    /// Advertised client address (default: the client listener).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_client: Option<String>,
    /// Advertised peer address (default: the peer listener).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_peer: Option<String>,
    /// Members for a first start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_cluster: Option<String>,
    /// Raft heartbeat interval, ms.
    pub heartbeat_ms: u64,
    /// Lowest election timeout, ms.
    pub election_timeout_ms: u64,
    /// Entries between snapshots.
    pub snapshot_every: u64,
    /// WAL segment size, MiB.
    pub wal_segment_mb: u64,
    /// Commands with lock events remembered for watchers.
    pub watch_history: usize,
    /// Most commands per log entry.
    pub max_batch_commands: usize,
    /// Entries proposed and not yet applied at once.
    pub proposals_in_flight: usize,
    /// How a leader's fsync and its followers' are ordered.
    pub leader_flush: LeaderFlush,
    /// Where a follower syncs the entries its leader sends.
    pub follower_flush: FollowerFlush,
    /// Free-space reserve, MiB (`None`: the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space_reserve_mb: Option<u64>,
    /// Fault injection: log writes stay in memory until synced.
    pub fault_lose_unsynced: bool,
    /// Fault injection: ms added to every log sync.
    pub fault_sync_delay_ms: u64,
    /// A log write or sync that has not returned in this many ms stops
    /// the node.
    pub disk_stall_timeout_ms: u64,
    /// `text` or `json`.
    pub log_format: String,
    /// Log filter (none: RUST_LOG or `info,openraft=warn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// HTTP admin listener, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen_metrics: Option<String>,
    /// Auth file (authentication on), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_file: Option<PathBuf>,
    /// TLS material.
    pub tls: crate::tls::TlsArgs,
    /// Limits against exhaustion.
    pub limits: crate::limits::Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            id: None,
            id_from_hostname: false,
            data_dir: None,
            listen_client: "127.0.0.1:7000".into(),
            listen_peer: "127.0.0.1:7100".into(),
            advertise_client: None,
            advertise_peer: None,
            initial_cluster: None,
            heartbeat_ms: 100,
            election_timeout_ms: DEFAULT_ELECTION_TIMEOUT_MS,
            snapshot_every: 10_000,
            wal_segment_mb: 64,
            watch_history: crate::locks::watch::DEFAULT_HISTORY,
            max_batch_commands: crate::raft::batch::MAX_BATCH,
            proposals_in_flight: crate::raft::batch::IN_FLIGHT,
            leader_flush: LeaderFlush::Parallel,
            follower_flush: FollowerFlush::Inline,
            space_reserve_mb: None,
            fault_lose_unsynced: false,
            fault_sync_delay_ms: 0,
            disk_stall_timeout_ms: DEFAULT_DISK_STALL_TIMEOUT_MS,
            log_format: "text".into(),
            log_level: None,
            listen_metrics: None,
            auth_file: None,
            tls: Default::default(),
            limits: Default::default(),
        }
    }
}

/// A provider under the name `--print-config` shows for it.
struct Named<P> {
    name: String,
    inner: P,
}

impl<P: Provider> Provider for Named<P> {
    fn metadata(&self) -> Metadata {
        // Errors name a key as the layer spells it, without figment's
        // profile: `RAFTLOCK_HEARTBEAT_MS`, `--heartbeat-ms`, `heartbeat_ms`.
        let layer = self.name.clone();
        Metadata::named(self.name.clone()).interpolater(move |_: &Profile, path: &[&str]| {
            let leaf = path.last().copied().unwrap_or_default();
            match layer.as_str() {
                ENVIRONMENT => format!("RAFTLOCK_{}", leaf.to_uppercase()),
                FLAGS => format!("--{}", leaf.replace('_', "-")),
                _ => path.join("."),
            }
        })
    }
    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        self.inner.data()
    }
}

const DEFAULTS: &str = "default";
const ENVIRONMENT: &str = "environment";
const FLAGS: &str = "flag";

/// Every setting as (name, key path), in the order of the flags: the name
/// (`max_wait_ms`) is what its flag and environment variable are called
/// after, the path (`limits.max_wait_ms`) where it sits in the file.
fn setting_paths() -> Vec<(String, String)> {
    let ids = |cmd: clap::Command| -> Vec<String> {
        cmd.get_arguments()
            .map(|a| a.get_id().to_string())
            .collect()
    };
    let tls = ids(crate::tls::TlsArgs::augment_args(clap::Command::new("tls")));
    let limits = ids(crate::limits::LimitArgs::augment_args(clap::Command::new(
        "limits",
    )));
    ids(NodeArgs::augment_args(clap::Command::new("node")))
        .into_iter()
        .filter(|id| id != "config" && id != "print_config")
        .map(|id| {
            let path = if tls.contains(&id) {
                format!("tls.{id}")
            } else if limits.contains(&id) {
                format!("limits.{id}")
            } else {
                id.clone()
            };
            (id, path)
        })
        .collect()
}

/// `RAFTLOCK_*` variables that name a setting; others (the CLI's
/// `RAFTLOCK_ENDPOINTS`, say) are not this program's.
fn environment() -> Env {
    let paths: BTreeMap<String, String> = setting_paths().into_iter().collect();
    let known = paths.clone();
    Env::prefixed("RAFTLOCK_")
        .filter(move |k| known.contains_key(&k.as_str().to_ascii_lowercase()))
        .map(move |k| {
            let name = k.as_str().to_ascii_lowercase();
            paths.get(&name).cloned().unwrap_or(name).into()
        })
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
    /// Where a follower syncs its leader's entries.
    pub follower_flush: FollowerFlush,
    /// Free-space reserve in bytes (`None`: the default; 0: off).
    pub space_reserve: Option<u64>,
    /// A log write or sync that has not returned within this stops the
    /// node (`None`: never).
    pub disk_stall_timeout: Option<Duration>,
    /// Log writes stay in memory until synced (fault injection).
    pub fault_lose_unsynced: bool,
    /// Added to every log sync (fault injection).
    pub fault_sync_delay: Option<Duration>,
    /// Entries between snapshots.
    pub snapshot_every: u64,
    /// Bytes of each WAL segment file.
    pub wal_segment_bytes: u64,
    /// Commands with lock events remembered for watchers.
    pub watch_history: usize,
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
    /// Where the TLS material came from, to read it again on SIGHUP.
    pub tls_files: crate::tls::TlsArgs,
    /// Limits against exhaustion.
    pub limits: crate::limits::Limits,
}

impl NodeArgs {
    /// The layers, in order: defaults, the config file, the environment,
    /// the flags.
    pub fn figment(&self) -> Result<Figment, ConfigError> {
        let mut f = Figment::new().merge(Named {
            name: DEFAULTS.into(),
            inner: Serialized::defaults(Settings::default()),
        });
        if let Some(path) = &self.config {
            // figment skips a missing file; a file named on purpose must exist.
            std::fs::metadata(path).map_err(|e| ConfigError::File {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            f = f.merge(Named {
                name: format!("config file {}", path.display()),
                inner: Toml::file_exact(path),
            });
        }
        Ok(f.merge(Named {
            name: ENVIRONMENT.into(),
            inner: environment(),
        })
        .merge(Named {
            name: FLAGS.into(),
            inner: Serialized::defaults(self),
        }))
    }

    /// The merged settings, before they are checked.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        self.figment()?
            .extract()
            .map_err(|e| ConfigError::Layers(e.to_string()))
    }

    /// Merges the layers and checks the result.
    pub fn resolve(&self) -> Result<NodeConfig, ConfigError> {
        self.settings()?.resolve()
    }

    /// The effective configuration as TOML, each value commented with the
    /// layer it came from (`--print-config`).
    pub fn print_config(&self) -> Result<String, ConfigError> {
        let figment = self.figment()?;
        let settings: Settings = figment
            .extract()
            .map_err(|e| ConfigError::Layers(e.to_string()))?;
        let value =
            toml::Value::try_from(&settings).map_err(|e| ConfigError::Layers(e.to_string()))?;
        let empty = toml::Table::new();
        let table = value.as_table().unwrap_or(&empty);
        let source = |path: &str, leaf: &str| -> String {
            match figment.find_metadata(path).map(|m| m.name.to_string()) {
                Some(n) if n == ENVIRONMENT => {
                    format!("environment RAFTLOCK_{}", leaf.to_uppercase())
                }
                Some(n) if n == FLAGS => format!("flag --{}", leaf.replace('_', "-")),
                Some(n) => n,
                None => DEFAULTS.into(),
            }
        };
        let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, path) in setting_paths() {
            let (section, key) = path.split_once('.').unwrap_or(("", &path));
            let value = match section {
                "" => table.get(key),
                s => table.get(s).and_then(|t| t.get(key)),
            };
            let line = match value {
                Some(v) => format!("{key} = {v}  # {}", source(&path, &name)),
                None => format!("# {key}: not set"),
            };
            sections.entry(section.to_owned()).or_default().push(line);
        }
        let mut out = String::new();
        for (section, lines) in sections {
            if !section.is_empty() {
                out.push_str(&format!("\n[{section}]\n"));
            }
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
        Ok(out)
    }
}

impl Settings {
    /// Checks merged settings and turns them into a node's configuration.
    pub fn resolve(self) -> Result<NodeConfig, ConfigError> {
        let id = match (self.id, self.id_from_hostname) {
            (Some(id), _) => id,
            (None, true) => id_from_hostname(&cluster::hostname()?)?,
            (None, false) => return Err(ConfigError::Missing("--id")),
        };
        if id == 0 {
            return Err(ConfigError::Invalid {
                setting: "--id",
                reason: "node ids start at 1".into(),
            });
        }
        let data_dir = self.data_dir.ok_or(ConfigError::Missing("--data-dir"))?;
        let advertise_client = self
            .advertise_client
            .unwrap_or_else(|| self.listen_client.clone());
        let advertise_peer = self
            .advertise_peer
            .unwrap_or_else(|| self.listen_peer.clone());
        let initial_cluster = match &self.initial_cluster {
            Some(spec) => parse_initial_cluster(spec)?,
            None => BTreeMap::new(),
        };
        if !initial_cluster.is_empty() && !initial_cluster.contains_key(&id) {
            return Err(ConfigError::Invalid {
                setting: "--initial-cluster",
                reason: format!("does not name this node (id {id})"),
            });
        }
        let heartbeat = Duration::from_millis(self.heartbeat_ms);
        let election_timeout = Duration::from_millis(self.election_timeout_ms);
        if heartbeat.is_zero() || election_timeout <= heartbeat * 2 {
            return Err(ConfigError::Invalid {
                setting: "--election-timeout-ms",
                reason: format!(
                    "must be more than twice the heartbeat ({} ms), so one lost heartbeat does not start an election",
                    heartbeat.as_millis()
                ),
            });
        }
        let max_batch_commands = self.max_batch_commands;
        if !(1..=raftlock_store::MAX_BATCH_COMMANDS).contains(&max_batch_commands) {
            return Err(ConfigError::Invalid {
                setting: "--max-batch-commands",
                reason: format!(
                    "{max_batch_commands} is not in 1..={}",
                    raftlock_store::MAX_BATCH_COMMANDS
                ),
            });
        }
        let proposals_in_flight = self.proposals_in_flight;
        if !(1..=crate::raft::batch::MAX_IN_FLIGHT).contains(&proposals_in_flight) {
            return Err(ConfigError::Invalid {
                setting: "--proposals-in-flight",
                reason: format!(
                    "{proposals_in_flight} is not in 1..={}",
                    crate::raft::batch::MAX_IN_FLIGHT
                ),
            });
        }
        if !(1..=1024).contains(&self.wal_segment_mb) {
            return Err(ConfigError::Invalid {
                setting: "--wal-segment-mb",
                reason: format!("{} is not between 1 and 1024", self.wal_segment_mb),
            });
        }
        if self.log_format != "text" && self.log_format != "json" {
            return Err(ConfigError::Invalid {
                setting: "--log-format",
                reason: format!("{:?} is not text or json", self.log_format),
            });
        }
        Ok(NodeConfig {
            id,
            data_dir,
            listen_client: self.listen_client,
            listen_peer: self.listen_peer,
            advertise_client,
            advertise_peer,
            initial_cluster,
            heartbeat,
            election_timeout,
            max_batch_commands,
            proposals_in_flight,
            leader_flush: self.leader_flush,
            follower_flush: self.follower_flush,
            space_reserve: self.space_reserve_mb.map(|mb| mb << 20),
            disk_stall_timeout: (self.disk_stall_timeout_ms > 0)
                .then(|| Duration::from_millis(self.disk_stall_timeout_ms)),
            fault_lose_unsynced: self.fault_lose_unsynced,
            fault_sync_delay: (self.fault_sync_delay_ms > 0)
                .then(|| Duration::from_millis(self.fault_sync_delay_ms)),
            snapshot_every: self.snapshot_every,
            wal_segment_bytes: self.wal_segment_mb << 20,
            watch_history: self.watch_history,
            log_format: self.log_format,
            log_level: self.log_level,
            listen_metrics: self.listen_metrics,
            auth_file: self.auth_file,
            tls: self.tls.resolve()?,
            tls_files: self.tls.clone(),
            limits: self.limits.check()?,
        })
    }
}

#[cfg(test)]
mod tests;
