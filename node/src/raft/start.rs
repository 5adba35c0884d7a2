//! Starting Raft on a node's opened storage: openraft's configuration, the
//! peer network, and the handle the lock service uses ([`Node`]) with the
//! tasks behind it (group commit, leadership confirmation, the quorum
//! watch, the free-space alarm). Listeners are not started here.

use super::cluster_identity::ClusterIdentity;
use super::confirm::Confirmer;
use super::network::PeerNetwork;
use super::node::Node;
use raftlock_store::state_machine::StateMachineStore;
use raftlock_store::wal::Wal;
use raftlock_store::{NodeId, Raft};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How this node runs Raft: the parts of its configuration Raft needs.
pub struct Settings {
    /// This node's id.
    pub id: NodeId,
    /// The leader's heartbeat interval.
    pub heartbeat: Duration,
    /// The shortest election timeout (the longest is twice it).
    pub election_timeout: Duration,
    /// Log entries between snapshots.
    pub snapshot_every: u64,
    /// Proposals the leader keeps in flight at once.
    pub proposals_in_flight: usize,
    /// Commands at most in one log entry.
    pub max_batch_commands: usize,
    /// The leader replicates entries while it writes them.
    pub leader_flushes_in_parallel: bool,
    /// A follower writes appended entries before it answers.
    pub follower_flushes_inline: bool,
    /// Where this node listens for peers (the network's own address).
    pub listen_peer: String,
    /// TLS for calls to peers (mutual, with the cluster CA), if on.
    pub peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// The operator's limits.
    pub limits: crate::limits::Limits,
    /// The data dir, watched for free space.
    pub data_dir: PathBuf,
    /// The free-space reserve in bytes, if set.
    pub space_reserve: Option<u64>,
}

/// Why Raft did not start.
#[derive(Debug, thiserror::Error)]
pub enum RaftStartError {
    /// The settings make no valid openraft configuration.
    #[error("raft configuration: {0}")]
    Config(String),
    /// openraft failed to start on this storage.
    #[error("raft: {0}")]
    Raft(String),
}

/// Raft, started.
pub struct Started {
    /// The handle the lock service uses.
    pub node: Arc<Node>,
    /// Raft itself, for the peer service that feeds it.
    pub raft: Raft,
    /// The peer network, whose TLS a reload replaces.
    pub network: PeerNetwork,
}

/// Starts Raft on `log` and `sm`. `stopped` becomes true when the node
/// stops; `stop` is what the background tasks watch to end.
pub async fn start(
    settings: Settings,
    log: Wal,
    mut sm: StateMachineStore,
    cluster: ClusterIdentity,
    stopped: watch::Receiver<bool>,
) -> Result<Started, RaftStartError> {
    let id = settings.id;
    let log_stats = log.stats();
    let shared = sm.shared();
    let raft_config = openraft::Config {
        cluster_name: "raftlock".into(),
        heartbeat_interval: settings.heartbeat.as_millis() as u64,
        election_timeout_min: settings.election_timeout.as_millis() as u64,
        election_timeout_max: settings.election_timeout.as_millis() as u64 * 2,
        install_snapshot_timeout: 10_000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(settings.snapshot_every),
        // Keep at most one snapshot interval of log behind a snapshot: a
        // follower further behind than that gets the snapshot instead.
        max_in_snapshot_log_to_keep: settings.snapshot_every.min(1_000),
        // An AppendEntries must arrive within a heartbeat interval (openraft
        // times it out after that). A follower catching up after a restart
        // got 300 entries per request by default, which with 4 KiB of
        // metadata per grant took longer than that to encode, send and
        // decode, so catching up never finished.
        max_payload_entries: 32,
        ..Default::default()
    }
    .validate()
    .map_err(|e| RaftStartError::Config(e.to_string()))?;
    let leader_lease = Duration::from_millis(raft_config.election_timeout_max);
    // Nothing is applied before this node's log holds it durably: needed
    // once a leader replicates while it writes, harmless otherwise.
    sm.apply_after_flush(log.flushed());
    if settings.leader_flushes_in_parallel {
        log.flush_leader_appends_in_parallel(id);
    }
    if settings.follower_flushes_inline {
        // A quarter of the election timeout: a core blocked that long
        // still hears its leader before its timer runs out.
        log.flush_follower_appends_inline(id, settings.election_timeout / 4);
    }
    let network = PeerNetwork::new(&settings.listen_peer, settings.peer_tls.clone())
        .cluster(cluster.clone())
        .retry_unreachable_every(settings.heartbeat)
        .commit_at_most(log.flushed())
        .defer_commit_heartbeats(log.appended());
    let raft = Raft::new(id, Arc::new(raft_config), network.clone(), log, sm)
        .await
        .map_err(|e| RaftStartError::Raft(e.to_string()))?;

    let transferring = Arc::new(AtomicBool::new(false));
    let confirmer = Confirmer::start(
        id,
        raft.clone(),
        Duration::from_secs(3),
        transferring.clone(),
    );
    let batcher = super::batch::Batcher::start(
        id,
        raft.clone(),
        Duration::from_secs(5),
        settings.proposals_in_flight,
        settings.max_batch_commands,
    );
    let (cut_off_tx, cut_off_rx) = watch::channel(false);
    let (roles_tx, roles_rx) = watch::channel(crate::replica::Role::default());
    tokio::spawn(super::node::forward_roles(raft.clone(), roles_tx));
    let shutting_down = Arc::new(AtomicBool::new(false));
    let node = Arc::new(Node {
        id,
        raft: raft.clone(),
        state: shared,
        confirmer,
        leader_lease,
        transferring: transferring.clone(),
        shutting_down: shutting_down.clone(),
        stopping: stopped.clone(),
        cluster_id: cluster,
        limits: settings.limits,
        connections: Default::default(),
        peer_tls: settings.peer_tls,
        batcher,
        log_stats,
        space: Default::default(),
        cut_off: cut_off_rx,
        roles: roles_rx,
    });
    tokio::spawn(super::node::watch_quorum(
        raft.clone(),
        id,
        leader_lease,
        settings.heartbeat,
        [transferring, shutting_down],
        cut_off_tx,
        stopped.clone(),
    ));
    tokio::spawn(node.space.clone().watch(
        settings.data_dir,
        settings.space_reserve,
        Duration::from_secs(1),
        stopped.clone(),
    ));
    tokio::spawn(super::transfer::move_leadership_when_low(
        node.clone(),
        network.clone(),
        Duration::from_secs(1),
        stopped,
    ));
    Ok(Started {
        node,
        raft,
        network,
    })
}
