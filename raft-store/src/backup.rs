//! Backups: a consistent copy of the lease state at one log index, and
//! seeding a new cluster's data dirs from it.
//!
//! A backup file is one JSON header line followed by the state machine's
//! own snapshot bytes (which carry their own format version). Seeding
//! installs that snapshot as the data dir's current snapshot at the backup's
//! index and marks the log purged up to it, so the new cluster's first
//! entry comes after it: every token it issues is larger than every token
//! in the backup, and the fencing rule holds across the restore.

use crate::data_dir::DataDir;
use crate::machine::LeaseMachine;
use crate::types::{LogId, NodeId, NodeInfo, StorageError};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{CommittedLeaderId, Membership, SnapshotMeta, StoredMembership};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;

/// The backup format this build writes and the newest it reads.
pub const BACKUP_VERSION: u32 = 1;
const FORMAT: &str = "raftlock-backup";

/// The first line of a backup file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    /// Always `raftlock-backup`.
    pub format: String,
    /// [`BACKUP_VERSION`] when written.
    pub version: u32,
    /// The log index the state is at: every token in it is at most this.
    pub last_index: u64,
    /// When taken (leader's wall clock, Unix ms).
    pub created_at_ms: u64,
    /// Cluster it was taken from, for the operator's information.
    pub cluster_id: String,
}

/// Why a backup cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Not a backup file, or damaged.
    #[error("not a raftlock backup: {0}")]
    NotABackup(String),
    /// Written by a newer raftlock.
    #[error("backup format version {found} is newer than this build supports ({supported}); restore with a newer raftlockd")]
    NewerVersion {
        /// In the file.
        found: u32,
        /// This build's.
        supported: u32,
    },
    /// The data dir already holds a cluster's data.
    #[error("{0} already holds data; restore needs an empty data dir")]
    NotEmpty(String),
    /// Storage failed.
    #[error("storage: {0}")]
    Storage(String),
}

impl From<StorageError> for BackupError {
    fn from(e: StorageError) -> Self {
        BackupError::Storage(e.to_string())
    }
}

/// Encodes a backup of `machine` at `last_index`.
pub fn encode(
    machine: &LeaseMachine,
    last_index: u64,
    created_at_ms: u64,
    cluster_id: &str,
) -> Vec<u8> {
    let header = BackupHeader {
        format: FORMAT.into(),
        version: BACKUP_VERSION,
        last_index,
        created_at_ms,
        cluster_id: cluster_id.into(),
    };
    // A struct of strings and integers always serializes.
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    out.extend_from_slice(&machine.to_snapshot());
    out
}

/// Splits and checks a backup: its header and the machine it holds.
pub fn decode(bytes: &[u8]) -> Result<(BackupHeader, LeaseMachine), BackupError> {
    let nl = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| BackupError::NotABackup("no header line".into()))?;
    let header: BackupHeader = serde_json::from_slice(&bytes[..nl])
        .map_err(|e| BackupError::NotABackup(format!("header: {e}")))?;
    if header.format != FORMAT {
        return Err(BackupError::NotABackup(format!(
            "format {:?}",
            header.format
        )));
    }
    if header.version > BACKUP_VERSION {
        return Err(BackupError::NewerVersion {
            found: header.version,
            supported: BACKUP_VERSION,
        });
    }
    let machine = LeaseMachine::from_snapshot(&bytes[nl + 1..])
        .map_err(|e| BackupError::NotABackup(format!("state: {e}")))?;
    Ok((header, machine))
}

/// Everything the data dir `data` holds, as a lease machine and the index
/// of its last entry: its snapshot, then every entry of its log applied,
/// committed or not. A node recovering alone from a lost quorum keeps
/// whatever it has; what only the lost nodes had is gone either way. The
/// data dir is read, not changed (the node must not be running).
pub async fn export_everything(data: &DataDir) -> Result<(LeaseMachine, u64), BackupError> {
    let (image, _) =
        crate::wal::read_only(&data.wal_dir()).map_err(|e| BackupError::Storage(e.to_string()))?;
    let mut sm = crate::state_machine::StateMachineStore::open(data.snapshot_file())?;
    let (applied, _) = sm.applied_state().await?;
    let from = applied.map_or(0, |l| l.index + 1);
    let entries: Vec<_> = image
        .entries
        .range(from..)
        .map(|(_, e)| e.clone())
        .collect();
    if !entries.is_empty() {
        sm.apply(entries).await?;
    }
    let shared = sm.shared();
    let state = shared.read();
    let index = state.last_applied.map_or(0, |l| l.index);
    Ok((state.machine.clone(), index))
}

/// Seeds the empty data dir `data` with `backup` for a new cluster of
/// `members`. Returns the index the new cluster starts after.
pub async fn seed(
    data: &DataDir,
    backup: &[u8],
    members: BTreeMap<NodeId, NodeInfo>,
) -> Result<u64, BackupError> {
    let (header, machine) = decode(backup)?;
    let (mut log, mut sm) = crate::open_storage(data)?;
    let state = log.get_log_state().await?;
    if state.last_log_id.is_some() || sm.applied_state().await?.0.is_some() {
        return Err(BackupError::NotEmpty(data.path().display().to_string()));
    }
    // Term 0 is below any term an election of the new cluster produces, so
    // this seeded entry never competes with a real one.
    let log_id = LogId::new(CommittedLeaderId::new(0, 0), header.last_index);
    let voters: BTreeSet<NodeId> = members.keys().copied().collect();
    let membership = Membership::new(vec![voters], members);
    let meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(Some(log_id), membership),
        snapshot_id: format!("restore-{}", header.last_index),
    };
    sm.install_snapshot(&meta, Box::new(Cursor::new(machine.to_snapshot())))
        .await?;
    log.purge(log_id).await?;
    log.sync()
        .await
        .map_err(|e| BackupError::Storage(e.to_string()))?;
    Ok(header.last_index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_newer_or_foreign_files() {
        let machine = LeaseMachine::default();
        let bytes = encode(&machine, 42, 7, "c1");
        let (header, _) = decode(&bytes).unwrap();
        assert_eq!((header.last_index, header.cluster_id.as_str()), (42, "c1"));

        let newer = String::from_utf8(bytes.clone()).unwrap().replacen(
            "\"version\":1",
            "\"version\":99",
            1,
        );
        assert!(matches!(
            decode(newer.as_bytes()),
            Err(BackupError::NewerVersion { found: 99, .. })
        ));
        assert!(matches!(
            decode(b"{\"format\":\"tar\"}\nxx"),
            Err(BackupError::NotABackup(_))
        ));
        assert!(matches!(
            decode(b"garbage"),
            Err(BackupError::NotABackup(_))
        ));
    }
}
