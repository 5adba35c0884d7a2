//! Opening a node's storage: the data dir (locked for this process), the
//! write-ahead log and the state machine, with any fault injection the
//! configuration asks for; and the first start's bootstrap.

use super::StartError;
use crate::config::{cluster_id, NodeConfig};
use raftlock_store::data_dir::DataDir;
use raftlock_store::state_machine::StateMachineStore;
use raftlock_store::wal::Wal;
use raftlock_store::{open_storage_with, NodeInfo, Raft};
use tracing::{info, warn};

/// Opens the data dir, then the log and the state machine in it.
pub(super) async fn open(
    config: &NodeConfig,
) -> Result<(DataDir, Wal, StateMachineStore), StartError> {
    let cluster = (!config.initial_cluster.is_empty()).then(|| cluster_id(&config.initial_cluster));
    let data = DataDir::open(&config.data_dir, config.id, cluster.as_deref())?;
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

/// Initializes the cluster on a first start: only when this node's Raft
/// state is empty (no log, no vote) and `--initial-cluster` names members.
/// Every member may do this with the same list; openraft accepts the same
/// initial membership from each. Later starts recover from the data dir.
pub(super) async fn bootstrap(
    raft: &Raft,
    config: &NodeConfig,
    me: &NodeInfo,
) -> Result<(), StartError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
    if initialized || config.initial_cluster.is_empty() {
        if initialized && !config.initial_cluster.is_empty() {
            info!(
                node = config.id,
                "recovering from data dir; --initial-cluster is ignored"
            );
        }
        return Ok(());
    }
    let members = crate::config::member_nodes(&config.initial_cluster);
    if members.get(&config.id) != Some(me) {
        warn!(node = config.id, advertised = %me, "--initial-cluster gives this node other addresses than it advertises");
    }
    info!(
        node = config.id,
        members = members.len(),
        "bootstrapping a new cluster"
    );
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        Err(openraft::error::RaftError::APIError(e)) => {
            // Another member's initial entry reached us first: same cluster.
            info!(node = config.id, reason = %e, "cluster already initialized");
            Ok(())
        }
        Err(e) => Err(StartError::Raft(e.to_string())),
    }
}
