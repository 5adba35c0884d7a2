//! Snapshots of the state machine as bytes. Equal states give equal bytes
//! (every map is ordered), and the format carries a version so that a node
//! refuses a snapshot from a newer release instead of misreading it.
//!
//! Version 2 is binary (postcard): a million held locks serialize in well
//! under a second, where version 1's JSON took seconds per hundred thousand
//! and the state is read-locked meanwhile. Version 1 snapshots and backups
//! (JSON, `{"version":1,"machine":...}`) are still read.
//!
//! Version 3 adds the exactly-once tables (`once.rs`) after the fields
//! version 2 had; postcard is positional, so version 2 is read through a
//! struct of those first fields.
//!
//! Version 4 adds where sessions' clients run (`origins`), after the fields
//! of version 3, and the call each exactly-once answer answered; version 3
//! is read through structs of its own layout.

use super::LeaseMachine;
use serde::{Deserialize, Serialize};

/// The snapshot format this build writes and the newest it reads.
pub const SNAPSHOT_VERSION: u32 = 4;

/// What a binary (version ≥ 2) snapshot starts with; JSON never does.
const MAGIC: &[u8; 8] = b"\0RLSNAP\0";

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
    /// A binary snapshot that does not decode.
    #[error("snapshot is damaged: {0}")]
    CorruptBinary(#[from] postcard::Error),
}

#[derive(Deserialize)]
struct Header {
    version: u32,
}

/// The fields a version 2 snapshot holds, in their order.
#[derive(Deserialize)]
struct V2 {
    sessions: std::collections::BTreeMap<super::SessionId, super::Session>,
    locks: std::collections::BTreeMap<String, super::LockState>,
    owners: std::collections::BTreeMap<String, u64>,
}

/// The fields a version 3 snapshot holds, in their order.
#[derive(Deserialize)]
struct V3 {
    sessions: std::collections::BTreeMap<super::SessionId, super::Session>,
    locks: std::collections::BTreeMap<String, super::LockState>,
    owners: std::collections::BTreeMap<String, u64>,
    once: std::collections::BTreeMap<super::SessionId, OnceV3>,
    session_keys: std::collections::BTreeMap<String, super::SessionId>,
}

/// A session's exactly-once bookkeeping as version 3 wrote it: its answers
/// without the call they answered.
#[derive(Deserialize)]
struct OnceV3 {
    key: Option<u128>,
    acked_below: u64,
    answers: std::collections::BTreeMap<u64, RecordedV3>,
}

#[derive(Deserialize)]
struct RecordedV3 {
    request_id: super::RequestId,
    first: Result<super::Reply, super::LeaseError>,
}

impl From<OnceV3> for super::once::Once {
    fn from(o: OnceV3) -> Self {
        super::once::Once {
            key: o.key,
            acked_below: o.acked_below,
            answers: o
                .answers
                .into_iter()
                .map(|(seq, r)| {
                    let recorded = super::once::Recorded {
                        request_id: r.request_id,
                        first: r.first,
                        call: None,
                    };
                    (seq, recorded)
                })
                .collect(),
        }
    }
}

#[derive(Deserialize)]
struct Read {
    machine: LeaseMachine,
}

impl LeaseMachine {
    /// The whole state as bytes.
    pub fn to_snapshot(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        // Into the same buffer: a large state is not copied once more.
        postcard::to_io(self, &mut out)
            .expect("the lease machine serializes: every field is a plain value");
        out
    }

    /// Restores a state from [`LeaseMachine::to_snapshot`] bytes, or from a
    /// version 1 (JSON) snapshot.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Self, SnapshotError> {
        if let Some(rest) = bytes.strip_prefix(MAGIC.as_slice()) {
            let (version, body) = rest
                .split_at_checked(4)
                .ok_or(SnapshotError::CorruptBinary(
                    postcard::Error::DeserializeUnexpectedEnd,
                ))?;
            let version = u32::from_le_bytes(version.try_into().unwrap_or_default());
            if version > SNAPSHOT_VERSION {
                return Err(SnapshotError::UnsupportedVersion {
                    found: version,
                    supported: SNAPSHOT_VERSION,
                });
            }
            let (machine, left) = if version <= 2 {
                let (v2, left) = postcard::take_from_bytes::<V2>(body)?;
                let machine = LeaseMachine {
                    sessions: v2.sessions,
                    locks: v2.locks,
                    owners: v2.owners,
                    ..LeaseMachine::default()
                };
                (machine, left)
            } else if version == 3 {
                let (v3, left) = postcard::take_from_bytes::<V3>(body)?;
                let machine = LeaseMachine {
                    sessions: v3.sessions,
                    locks: v3.locks,
                    owners: v3.owners,
                    once: v3.once.into_iter().map(|(s, o)| (s, o.into())).collect(),
                    session_keys: v3.session_keys,
                    ..LeaseMachine::default()
                };
                (machine, left)
            } else {
                postcard::take_from_bytes::<LeaseMachine>(body)?
            };
            if !left.is_empty() {
                return Err(SnapshotError::CorruptBinary(
                    postcard::Error::DeserializeBadEncoding,
                ));
            }
            return Ok(machine);
        }
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

    /// The state as a version 1 (JSON) snapshot, which
    /// [`LeaseMachine::from_snapshot`] still reads: for tests that edit a
    /// state by hand, and for tools that read snapshots.
    pub fn to_json_snapshot(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Written<'a> {
            version: u32,
            machine: &'a LeaseMachine,
        }
        serde_json::to_vec(&Written {
            version: 1,
            machine: self,
        })
        .expect("the lease machine serializes: all keys are strings or integers")
    }
}
