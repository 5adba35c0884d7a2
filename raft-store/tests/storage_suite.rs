//! openraft's storage conformance suite against the write-ahead log and
//! the lease state machine: the same checks openraft's own stores must pass
//! (log state after append/truncate/purge, vote persistence, membership
//! recovery, snapshot install and read-back).

use openraft::testing::{StoreBuilder, Suite};
use raftlock_store::data_dir::DataDir;
use raftlock_store::state_machine::StateMachineStore;
use raftlock_store::types::StorageError;
use raftlock_store::wal::Wal;
use raftlock_store::{open_storage, TypeConfig};
use tempfile::TempDir;

struct WalStoreBuilder;

impl StoreBuilder<TypeConfig, Wal, StateMachineStore, TempDir> for WalStoreBuilder {
    async fn build(&self) -> Result<(TempDir, Wal, StateMachineStore), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = DataDir::open(dir.path(), 0, Some("suite")).expect("fresh data dir opens");
        let (log, sm) = open_storage(&data)?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    if let Err(e) = Suite::test_all(WalStoreBuilder) {
        panic!("storage suite failed: {e}");
    }
}
