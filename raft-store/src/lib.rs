//! raftlock's replicated state: the pure lease state machine ([`machine`])
//! and, around it, the storage openraft drives: the write-ahead log
//! ([`wal`]), the state machine and its snapshots ([`state_machine`]), the
//! data directory ([`data_dir`], which migrates sled logs of earlier
//! releases through [`log_store`]).
//!
//! The machine knows nothing of Raft, disks or clocks; the storage adapter
//! feeds it committed entries and persists its snapshots.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use raftlock_store::{open_storage, data_dir::DataDir};
//! let dir = tempfile::tempdir().unwrap();
//! let data = DataDir::open(dir.path(), 1, Some("example")).unwrap();
//! let (log, sm) = open_storage(&data).unwrap();
//! assert_eq!(sm.shared().read().machine.counts(), (0, 0, 0));
//! # drop(log); }
//! ```
#![deny(missing_docs)]
// openraft's storage traits fix the error type (`StorageError`, ~224 bytes);
// boxing it in our helpers would only add conversions at every trait method.
#![allow(clippy::result_large_err)]

pub mod backup;
pub mod data_dir;
pub mod log_store;
pub mod machine;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod state_machine;
pub mod types;
pub mod wal;

pub use types::{
    batch_index, Applied, NodeId, NodeInfo, Proposal, Raft, TypeConfig, MAX_BATCH_COMMANDS,
};

/// Opens the log and the state machine kept in `data`.
pub fn open_storage(
    data: &data_dir::DataDir,
) -> Result<(wal::Wal, state_machine::StateMachineStore), types::StorageError> {
    open_storage_with(data, false)
}

/// [`open_storage`], with the log's writes kept in memory until synced when
/// `lose_unsynced` (fault injection: a kill then loses what a power loss
/// would; see [`wal::disk::LoseUnsyncedDir`]).
pub fn open_storage_with(
    data: &data_dir::DataDir,
    lose_unsynced: bool,
) -> Result<(wal::Wal, state_machine::StateMachineStore), types::StorageError> {
    let log = if lose_unsynced {
        let dir = wal::disk::LoseUnsyncedDir::new(data.wal_dir())
            .map_err(|e| openraft::StorageIOError::read_logs(&e))?;
        wal::Wal::open_in(dir, wal::SEGMENT_BYTES)?.0
    } else {
        wal::Wal::open(&data.wal_dir())?
    };
    let sm = state_machine::StateMachineStore::open(data.snapshot_file())?;
    Ok((log, sm))
}
