//! raftlock's replicated state: the pure lease state machine ([`machine`])
//! and, around it, the sled-backed storage openraft drives
//! ([`log_store`], [`state_machine`], [`data_dir`]).
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

pub use types::{
    batch_index, Applied, NodeId, NodeInfo, Proposal, Raft, TypeConfig, MAX_BATCH_COMMANDS,
};

/// Opens the log and the state machine kept in `data`.
pub fn open_storage(
    data: &data_dir::DataDir,
) -> Result<(log_store::LogStore, state_machine::StateMachineStore), types::StorageError> {
    let log = log_store::LogStore::open(data.db(), &data.db_file())?;
    let sm = state_machine::StateMachineStore::open(data.snapshot_file())?;
    Ok((log, sm))
}
