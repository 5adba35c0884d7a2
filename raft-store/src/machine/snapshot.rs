//! Snapshots of the state machine as bytes. Equal states give equal bytes
//! (every map is ordered), and the format carries a version so that a node
//! refuses a snapshot from a newer release instead of misreading it.

use super::LeaseMachine;
use serde::{Deserialize, Serialize};

/// The snapshot format this build writes and the newest it reads.
pub const SNAPSHOT_VERSION: u32 = 1;

/// A snapshot that cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Written by a newer raftlock.
    #[error("snapshot format version {found} is newer than this build supports ({supported}); upgrade raftlockd")]
    UnsupportedVersion {
        /// Version in the snapshot.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// Not a raftlock snapshot, or damaged.
    #[error("snapshot is damaged or not a raftlock snapshot: {0}")]
    Corrupt(#[from] serde_json::Error),
}

#[derive(Serialize)]
struct Written<'a> {
    version: u32,
    machine: &'a LeaseMachine,
}

#[derive(Deserialize)]
struct Header {
    version: u32,
}

#[derive(Deserialize)]
struct Read {
    machine: LeaseMachine,
}

impl LeaseMachine {
    /// The whole state as bytes.
    pub fn to_snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(&Written {
            version: SNAPSHOT_VERSION,
            machine: self,
        })
        .expect("the lease machine serializes: all keys are strings or integers")
    }

    /// Restores a state from [`LeaseMachine::to_snapshot`] bytes.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let header: Header = serde_json::from_slice(bytes)?;
        if header.version > SNAPSHOT_VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                found: header.version,
                supported: SNAPSHOT_VERSION,
            });
        }
        let read: Read = serde_json::from_slice(bytes)?;
        Ok(read.machine)
    }
}
