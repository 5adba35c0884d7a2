//! Opening a node's storage: the data dir (locked for this process), the
//! write-ahead log and the state machine, with any fault injection the
//! configuration asks for; and the first start's bootstrap.

use super::StartError;
use crate::config::{cluster_id, NodeConfig};
use raftlock_store::data_dir::DataDir;
use raftlock_store::state_machine::StateMachineStore;
use raftlock_store::wal::Wal;
use raftlock_store::{open_storage_with, NodeInfo, Raft};
use tracing::{error, info, warn};

/// Opens the data dir, then the log and the state machine in it.
pub(super) async fn open(
    config: &NodeConfig,
) -> Result<(DataDir, Wal, StateMachineStore), StartError> {
    let cluster = (!config.initial_cluster.is_empty()).then(|| cluster_id(&config.initial_cluster));
    let mut data = DataDir::open(&config.data_dir, config.id, cluster.as_deref())?;
    set_aside_a_log_that_ends_early(&mut data, config)?;
    if let Some(delay) = config.fault_sync_delay {
        warn!(
            node = config.id,
            ?delay,
            "FAULT INJECTION: every sync of the log is delayed"
        );
    }
    if config.fault_lose_unsynced {
        warn!(
            node = config.id,
            "FAULT INJECTION: log writes stay in memory until synced; a crash of this node loses them as a power loss would"
        );
    }
    let planted = raftlock_store::planted::plant_from_env().map_err(StartError::Storage)?;
    if let Some(bug) = &planted {
        warn!(bug = %bug, "PLANTED BUG: this node is deliberately broken for a harness test");
    }
    let (mut log, sm) = open_storage_with(
        &data,
        raftlock_store::Faults {
            lose_unsynced: config.fault_lose_unsynced,
            sync_delay: config.fault_sync_delay,
        },
        config.wal_segment_bytes,
    )
    .map_err(|e| StartError::Storage(e.to_string()))?;
    if planted.is_some() {
        use openraft::storage::RaftLogStorage;
        let state = log
            .get_log_state()
            .await
            .map_err(|e| StartError::Storage(e.to_string()))?;
        raftlock_store::planted::set_restart_index(state.last_log_id.map(|l| l.index).unwrap_or(0));
    }
    Ok((data, log, sm))
}

/// A log that ends before where it is known to have reached (a zeroed
/// block, a missing segment, an emptied `wal/`) may lack entries this node
/// acknowledged: it is moved aside, and the node rejoins with an empty log
/// and votes again only once it has caught up (`raft/standing.rs`). That
/// needs the other members' addresses; without `--initial-cluster` the
/// node refuses to start, as it does on any other damage.
fn set_aside_a_log_that_ends_early(
    data: &mut DataDir,
    config: &NodeConfig,
) -> Result<(), StartError> {
    if data.is_fresh() || !data.wal_dir().exists() {
        return Ok(());
    }
    let err = match raftlock_store::wal::read_only(&data.wal_dir()) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    let Some(damage) = raftlock_store::wal::recover::Damage::find(&err) else {
        return Ok(());
    };
    if !damage.ends_early || config.initial_cluster.is_empty() {
        return Ok(());
    }
    let aside = data.set_aside_lost_log()?;
    error!(
        node = config.id,
        damage = %damage,
        kept_at = %aside.display(),
        "the write-ahead log lost records it had made durable: it is kept aside, and this node rejoins with an empty log; it votes again once it holds what the other members may have committed"
    );
    Ok(())
}

/// Initializes the cluster on a first start: only when this node's Raft
/// state is empty (no log, no vote) and `--initial-cluster` names members.
/// Every member may do this with the same list; openraft accepts the same
/// initial membership from each. Later starts recover from the data dir.
///
/// openraft campaigns the moment it initializes, and a vote for a node
/// with a higher id outranks a leader's vote of the same term. So a member
/// that initialized after the others had elected a leader could unseat it:
/// 4 of 30 fresh three-node clusters elected twice when their nodes were
/// started one after another, and every one whose third member started
/// 0.8 s after the others (`tests/tests/cluster/formation.rs`). The member
/// with the lowest id therefore initializes at once; the others first serve
/// for one election timeout, in which a leader already elected reaches them
/// (it retries a peer every heartbeat early on) and makes them members, and
/// initialize only if none did, as when the lowest member is not running.
pub(super) async fn bootstrap(
    raft: &Raft,
    config: &NodeConfig,
    me: &NodeInfo,
) -> Result<(), StartError> {
    if !needs_bootstrap(raft, config).await? {
        return Ok(());
    }
    let members = crate::config::member_nodes(&config.initial_cluster);
    if members.get(&config.id) != Some(me) {
        warn!(node = config.id, advertised = %me, "--initial-cluster gives this node other addresses than it advertises");
    }
    if members.keys().next() == Some(&config.id) {
        return initialize(raft, config.id, members).await;
    }
    let (raft, id, wait) = (raft.clone(), config.id, config.election_timeout);
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if let Err(e) = initialize(&raft, id, members).await {
            // Nothing else will make this node a member: say so loudly.
            error!(node = id, error = %e, "could not initialize the cluster");
        }
    });
    Ok(())
}

/// Whether this start should initialize a cluster.
async fn needs_bootstrap(raft: &Raft, config: &NodeConfig) -> Result<bool, StartError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
    if initialized && !config.initial_cluster.is_empty() {
        info!(
            node = config.id,
            "recovering from data dir; --initial-cluster is ignored"
        );
    }
    Ok(!initialized && !config.initial_cluster.is_empty())
}

async fn initialize(
    raft: &Raft,
    id: u64,
    members: std::collections::BTreeMap<u64, NodeInfo>,
) -> Result<(), StartError> {
    if raft
        .is_initialized()
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?
    {
        info!(node = id, "joined the cluster its leader formed");
        return Ok(());
    }
    info!(
        node = id,
        members = members.len(),
        "bootstrapping a new cluster"
    );
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        Err(openraft::error::RaftError::APIError(e)) => {
            // Another member's initial entry, or a vote for it, reached us
            // first: the same cluster, formed by another member.
            info!(node = id, reason = %e, "cluster already initialized");
            Ok(())
        }
        Err(e) => Err(StartError::Raft(e.to_string())),
    }
}
