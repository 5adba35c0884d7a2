//! A node's command-line flags (each also a `RAFTLOCK_*` variable and a
//! key of the config file); unset flags leave the layers below in force.

use super::{is_false, FollowerFlush, LeaderFlush};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;

/// Flags of a node.
#[derive(Args, Clone, Debug, Default, Serialize)]
pub struct NodeArgs {
    /// TOML file with any of the settings below (keys as the flags, with
    /// underscores: `data_dir = "/var/lib/raftlock"`).
    #[arg(long, env = "RAFTLOCK_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the effective configuration, with where each value came from
    /// (default, config file, environment variable or flag), and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
    /// This node's id (a positive integer unique in the cluster).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Take the id from the host name's trailing number plus one
    /// (`raftlock-0` is node 1): a Kubernetes StatefulSet's pod ordinal.
    #[arg(long, conflicts_with = "id")]
    #[serde(skip_serializing_if = "is_false")]
    pub id_from_hostname: bool,
    /// Where the node keeps its Raft log and snapshots.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// Address for clients to connect to [default: 127.0.0.1:7000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen_client: Option<String>,
    /// Address for peer (Raft) traffic [default: 127.0.0.1:7100].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen_peer: Option<String>,
    /// Client address other nodes hand to clients [default: --listen-client].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_client: Option<String>,
    /// Peer address other nodes use to reach this one [default: --listen-peer].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_peer: Option<String>,
    /// Members for a first start: `1=peer_host:port/client_host:port,2=...`
    /// (the `/client` part may be left out when it is the peer address with
    /// the port lowered by 100). Used only when the data dir is empty; later
    /// starts recover from the data dir.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_cluster: Option<String>,
    /// Raft heartbeat interval in ms [default: 100].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u64>,
    /// Lowest election timeout in ms [default: 300]; the highest is twice
    /// it. A follower that has seen a leader waits the highest timeout
    /// (the leader's lease) plus a random one before it stands, so a dead
    /// leader is replaced after 3 to 4 times this.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub election_timeout_ms: Option<u64>,
    /// Entries between snapshots [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_every: Option<u64>,
    /// Size of each write-ahead log segment file, in MiB, preallocated
    /// when it starts [default: 64; 1 to 1024]. Smaller segments suit a
    /// small volume: a snapshot frees whole segments.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_segment_mb: Option<u64>,
    /// Commands with lock events each node remembers for watchers, so that
    /// a watch can resume after a reconnect [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_history: Option<usize>,
    /// Most commands the leader groups into one log entry (group commit:
    /// one append and one fsync for all) [default: 1024; 1 turns grouping
    /// off; at most 65536].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch_commands: Option<usize>,
    /// Log entries the leader has proposed and not yet applied at once
    /// [default: 2; at most 64]. Commands that arrive meanwhile wait to
    /// form the next entry; an entry of more than a few commands waits
    /// until none is in flight, so load forms fewer, larger entries.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposals_in_flight: Option<usize>,
    /// How a leader's fsync and its followers' are ordered [default:
    /// parallel]: `parallel` replicates an entry while the leader writes
    /// it, so a commit waits for one fsync in series (no commit is visible
    /// before the leader's copy is durable); `serial` writes it first, as
    /// openraft alone does, for comparisons.
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_flush: Option<LeaderFlush>,
    /// Where a follower syncs the entries its leader sends [default:
    /// inline]: `inline` writes and syncs them on the task that appends
    /// them, which has nothing else to do meanwhile; `thread` hands them
    /// to the log's writer thread, costing two thread wake-ups per entry,
    /// for comparisons.
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follower_flush: Option<FollowerFlush>,
    /// Free space the data dir keeps in reserve, in MiB: below it the
    /// leader refuses new sessions, acquires and takes (`NO_SPACE`) while
    /// releases, closes and keep-alives go on [default: 256, or 5 % of a
    /// smaller file system; 0 turns the alarm off].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space_reserve_mb: Option<u64>,
    /// A write or fdatasync of the log that has not returned after this
    /// many ms stops the node, as a failed one does: a leader on a disk
    /// that hangs would otherwise hold the cluster with heartbeats while
    /// nothing commits [default: 2000; 0 turns it off].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_stall_timeout_ms: Option<u64>,
    /// Fault injection, never for production: keep the log's writes in
    /// memory until they are synced, so that killing the node loses what a
    /// power loss would (for power-loss drills and tests).
    #[arg(long, hide = true)]
    #[serde(skip_serializing_if = "is_false")]
    pub fault_lose_unsynced: bool,
    /// Fault injection, never for production: add this many ms to every
    /// fdatasync of the log (a slow disk, for fault-injection runs).
    #[arg(long, hide = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault_sync_delay_ms: Option<u64>,
    /// Log format: text or json [default: text].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<String>,
    /// Log filter, e.g. `info` or `debug,openraft=info` [default:
    /// RUST_LOG, else `info,openraft=warn`].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// Address of the HTTP admin listener: /metrics (Prometheus), /health
    /// and /ready [default: none, no listener].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen_metrics: Option<String>,
    /// Turns authentication on: a TOML file of roles and identities (bearer
    /// token hashes, client certificate names); see docs/security.md
    /// [default: off, every caller may do everything].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_file: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub tls: crate::tls::TlsArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub limits: crate::limits::LimitArgs,
}
