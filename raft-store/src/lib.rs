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
    open_storage_with(data, Faults::default(), wal::SEGMENT_BYTES)
}

/// Faults a node can be started with to test what it survives; the
/// default is none. Never for production.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Keep the log's writes in memory until synced: a kill then loses
    /// what a power loss would (see [`wal::disk::LoseUnsyncedDir`]).
    pub lose_unsynced: bool,
    /// Add this to every `fdatasync` (see [`wal::disk::SlowSyncDir`]).
    pub sync_delay: Option<std::time::Duration>,
}

/// [`open_storage`], with log segments of `segment_bytes` and `faults`.
pub fn open_storage_with(
    data: &data_dir::DataDir,
    faults: Faults,
    segment_bytes: u64,
) -> Result<(wal::Wal, state_machine::StateMachineStore), types::StorageError> {
    fn open<D: wal::disk::WalDir>(
        dir: D,
        delay: Option<std::time::Duration>,
        segment_bytes: u64,
    ) -> Result<wal::Wal, types::StorageError> {
        Ok(match delay {
            Some(d) => wal::Wal::open_in(wal::disk::SlowSyncDir::new(dir, d), segment_bytes)?.0,
            None => wal::Wal::open_in(dir, segment_bytes)?.0,
        })
    }
    let io = |e: std::io::Error| openraft::StorageIOError::read_logs(&e);
    let log = if faults.lose_unsynced {
        let dir = wal::disk::LoseUnsyncedDir::new(data.wal_dir()).map_err(io)?;
        open(dir, faults.sync_delay, segment_bytes)?
    } else {
        let dir = wal::disk::FsDir::new(data.wal_dir()).map_err(io)?;
        open(dir, faults.sync_delay, segment_bytes)?
    };
    let sm = state_machine::StateMachineStore::open(data.snapshot_file())?;
    Ok((log, sm))
}
