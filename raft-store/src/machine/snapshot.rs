//! Snapshots of the state machine as bytes. Equal states give equal bytes
//! (every map is ordered), and the format carries a version so that a node
//! refuses a snapshot from a newer release instead of misreading it.
//!
//! Version 2 is binary (postcard): a million held locks serialize in well
//! under a second, where version 1's JSON took seconds per hundred thousand
//! and the state is read-locked meanwhile. Version 1 snapshots and backups
//! (JSON, `{"version":1,"machine":...}`) are still read.
//!
//! Version 3 adds the exactly-once tables (`exactly_once.rs`) after the fields
//! version 2 had; postcard is positional, so version 2 is read through a
//! struct of those first fields.
//!
//! Version 4 adds where sessions' clients run (`origins`), after the fields
//! of version 3, and the call each exactly-once answer answered; version 3
//! is read through structs of its own layout.
//!
//! Version 5 adds each grant's and waiter's terms (permits taken, hold
//! cap, lock-delay), the locks in lock-delay, the sizes set by Resize, the
//! rate clock and the rate limits; versions 2 to 4 are read through the
//! older layouts in `old`.
//!
//! Version 6 adds each session's runs of answers acknowledged one by one
//! (`Once::acked`), names each lock-delay by the index that started it,
//! indexes token leases by when they go, and keeps how a numbered
//! acquisition ended with its exactly-once answer (`Recorded::ended`,
//! `Once::standing`); version 5 is read through `V5`, its delays started at
//! index 0 and its lease index rebuilt.
//!
//! Version 7 adds the lock sets waiting in queues (`AcquireAll`); version 6
//! is read through `V6`, with none.

use super::LeaseMachine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The snapshot format this build writes and the newest it reads.
pub const SNAPSHOT_VERSION: u32 = 7;

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
    sessions: BTreeMap<super::SessionId, super::Session>,
    locks: BTreeMap<String, old::LockState>,
    owners: BTreeMap<String, u64>,
}

/// The fields a version 3 snapshot holds, in their order.
#[derive(Deserialize)]
struct V3 {
    sessions: BTreeMap<super::SessionId, super::Session>,
    locks: BTreeMap<String, old::LockState>,
    owners: BTreeMap<String, u64>,
    once: BTreeMap<super::SessionId, OnceV3>,
    session_keys: BTreeMap<String, super::SessionId>,
}

/// The fields a version 4 snapshot holds, in their order.
#[derive(Deserialize)]
struct V4 {
    sessions: BTreeMap<super::SessionId, super::Session>,
    locks: BTreeMap<String, old::LockState>,
    owners: BTreeMap<String, u64>,
    once: BTreeMap<super::SessionId, old::Once>,
    session_keys: BTreeMap<String, super::SessionId>,
    origins: BTreeMap<super::SessionId, super::Origin>,
}

/// The fields a version 5 snapshot holds, in their order.
#[derive(Deserialize)]
struct V5 {
    sessions: BTreeMap<super::SessionId, super::Session>,
    locks: BTreeMap<String, super::LockState>,
    owners: BTreeMap<String, u64>,
    once: BTreeMap<super::SessionId, OnceV5>,
    session_keys: BTreeMap<String, super::SessionId>,
    origins: BTreeMap<super::SessionId, super::Origin>,
    delayed: BTreeMap<String, u64>,
    sizes: BTreeMap<String, u32>,
    rate_clock_ns: u64,
    buckets: BTreeMap<String, super::Bucket>,
}

/// The fields a version 6 snapshot holds, in their order.
#[derive(Deserialize)]
struct V6 {
    sessions: BTreeMap<super::SessionId, super::Session>,
    locks: BTreeMap<String, super::LockState>,
    owners: BTreeMap<String, u64>,
    once: BTreeMap<super::SessionId, super::exactly_once::Once>,
    session_keys: BTreeMap<String, super::SessionId>,
    origins: BTreeMap<super::SessionId, super::Origin>,
    delayed: BTreeMap<String, super::Delay>,
    sizes: BTreeMap<String, u32>,
    rate_clock_ns: u64,
    buckets: BTreeMap<String, super::Bucket>,
    lease_ends: super::ratelimit::LeaseEnds,
}

impl From<V6> for LeaseMachine {
    fn from(v6: V6) -> Self {
        LeaseMachine {
            sessions: v6.sessions,
            locks: v6.locks,
            owners: v6.owners,
            once: v6.once,
            session_keys: v6.session_keys,
            origins: v6.origins,
            delayed: v6.delayed,
            sizes: v6.sizes,
            rate_clock_ns: v6.rate_clock_ns,
            buckets: v6.buckets,
            lease_ends: v6.lease_ends,
            sets: BTreeMap::new(),
        }
    }
}

/// A session's exactly-once bookkeeping as versions 4 and 5 wrote it: no
/// runs of answers acknowledged one by one.
#[derive(Deserialize)]
struct OnceV5 {
    key: Option<u128>,
    acked_below: u64,
    answers: BTreeMap<u64, RecordedV5>,
}

/// An exactly-once answer as versions 4 and 5 wrote it: not how its
/// acquisition ended (those went to the session's history).
#[derive(Deserialize)]
struct RecordedV5 {
    request_id: super::RequestId,
    first: Result<super::Reply, super::LeaseError>,
    call: Option<(String, bool)>,
}

impl From<V5> for LeaseMachine {
    fn from(v5: V5) -> Self {
        LeaseMachine {
            sessions: v5.sessions,
            locks: v5.locks,
            owners: v5.owners,
            once: v5
                .once
                .into_iter()
                .map(|(s, o)| {
                    let once = super::exactly_once::Once {
                        key: o.key,
                        acked_below: o.acked_below,
                        answers: o
                            .answers
                            .into_iter()
                            .map(|(seq, r)| {
                                let recorded = super::exactly_once::Recorded {
                                    request_id: r.request_id,
                                    first: r.first,
                                    call: r.call,
                                    ended: None,
                                };
                                (seq, Box::new(recorded))
                            })
                            .collect(),
                        acked: BTreeMap::new(),
                        standing: BTreeMap::new(),
                    };
                    (s, once)
                })
                .collect(),
            session_keys: v5.session_keys,
            origins: v5.origins,
            delayed: v5
                .delayed
                .into_iter()
                .map(|(n, ms)| (n, super::Delay { ms, started: 0 }))
                .collect(),
            sizes: v5.sizes,
            rate_clock_ns: v5.rate_clock_ns,
            lease_ends: super::ratelimit::LeaseEnds::of(&v5.buckets),
            buckets: v5.buckets,
            sets: BTreeMap::new(),
        }
    }
}

/// A session's exactly-once bookkeeping as version 3 wrote it: its answers
/// without the call they answered.
#[derive(Deserialize)]
struct OnceV3 {
    key: Option<u128>,
    acked_below: u64,
    answers: BTreeMap<u64, RecordedV3>,
}

#[derive(Deserialize)]
struct RecordedV3 {
    request_id: super::RequestId,
    first: Result<old::Reply, super::LeaseError>,
}

impl From<OnceV3> for super::exactly_once::Once {
    fn from(o: OnceV3) -> Self {
        old::Once {
            key: o.key,
            acked_below: o.acked_below,
            answers: o
                .answers
                .into_iter()
                .map(|(seq, r)| {
                    let recorded = old::Recorded {
                        request_id: r.request_id,
                        first: r.first,
                        call: None,
                    };
                    (seq, recorded)
                })
                .collect(),
        }
        .into()
    }
}

/// Layouts of versions 2 to 4, whose grants and waiters had no terms
/// (version 5 added them: permits taken, hold cap, lock-delay). Read
/// through these and given the default terms, which is what every hold of
/// those versions was.
mod old {
    use crate::machine::{self as now, FencingToken, LeaseError, Mode, RequestId, SessionId};
    use serde::Deserialize;
    use std::collections::{BTreeMap, VecDeque};

    #[derive(Deserialize)]
    pub(super) struct Grant {
        name: String,
        session: SessionId,
        request_id: RequestId,
        mode: Mode,
        token: FencingToken,
        granted_at_ms: u64,
        metadata: Vec<u8>,
    }

    impl From<Grant> for now::Grant {
        fn from(g: Grant) -> Self {
            now::Grant {
                name: g.name,
                session: g.session,
                request_id: g.request_id,
                mode: g.mode,
                token: g.token,
                granted_at_ms: g.granted_at_ms,
                metadata: g.metadata,
                terms: now::Terms::default(),
            }
        }
    }

    fn grants(gs: Vec<Grant>) -> Vec<now::Grant> {
        gs.into_iter().map(Into::into).collect()
    }

    #[derive(Deserialize)]
    struct Waiter {
        session: SessionId,
        request_id: RequestId,
        mode: Mode,
        enqueued_at_ms: u64,
        timeout_ms: u64,
        metadata: Vec<u8>,
    }

    #[derive(Deserialize)]
    pub(super) struct LockState {
        permits: Option<u32>,
        holders: Vec<Grant>,
        waiters: VecDeque<Waiter>,
    }

    impl From<LockState> for now::LockState {
        fn from(l: LockState) -> Self {
            now::LockState {
                permits: l.permits,
                holders: grants(l.holders),
                waiters: l
                    .waiters
                    .into_iter()
                    .map(|w| now::Waiter {
                        session: w.session,
                        request_id: w.request_id,
                        mode: w.mode,
                        enqueued_at_ms: w.enqueued_at_ms,
                        timeout_ms: w.timeout_ms,
                        metadata: w.metadata,
                        terms: now::Terms::default(),
                    })
                    .collect(),
            }
        }
    }

    /// `Reply` up to its `ForceReleased` variant, the last one then.
    #[derive(Deserialize)]
    pub(super) enum Reply {
        SessionCreated {
            session: SessionId,
            ttl_ms: u64,
        },
        SessionClosed {
            released: Vec<String>,
        },
        SessionsExpired {
            expired: Vec<SessionId>,
        },
        Acquired(Grant),
        Queued {
            position: usize,
        },
        Busy {
            holders: Vec<Grant>,
        },
        Released {
            granted: Vec<Grant>,
        },
        WaitCancelled,
        Proclaimed(Grant),
        ForceReleased {
            released: Vec<Grant>,
            granted: Vec<Grant>,
        },
    }

    impl From<Reply> for now::Reply {
        fn from(r: Reply) -> Self {
            match r {
                Reply::SessionCreated { session, ttl_ms } => {
                    now::Reply::SessionCreated { session, ttl_ms }
                }
                Reply::SessionClosed { released } => now::Reply::SessionClosed { released },
                Reply::SessionsExpired { expired } => now::Reply::SessionsExpired { expired },
                Reply::Acquired(g) => now::Reply::Acquired(g.into()),
                Reply::Queued { position } => now::Reply::Queued { position },
                Reply::Busy { holders } => now::Reply::Busy {
                    holders: grants(holders),
                },
                Reply::Released { granted } => now::Reply::Released {
                    granted: grants(granted),
                },
                Reply::WaitCancelled => now::Reply::WaitCancelled,
                Reply::Proclaimed(g) => now::Reply::Proclaimed(g.into()),
                Reply::ForceReleased { released, granted } => now::Reply::ForceReleased {
                    released: grants(released),
                    granted: grants(granted),
                },
            }
        }
    }

    #[derive(Deserialize)]
    pub(super) struct Recorded {
        pub(super) request_id: RequestId,
        pub(super) first: Result<Reply, LeaseError>,
        pub(super) call: Option<(String, bool)>,
    }

    #[derive(Deserialize)]
    pub(super) struct Once {
        pub(super) key: Option<u128>,
        pub(super) acked_below: u64,
        pub(super) answers: BTreeMap<u64, Recorded>,
    }

    impl From<Once> for now::exactly_once::Once {
        fn from(o: Once) -> Self {
            now::exactly_once::Once {
                key: o.key,
                acked_below: o.acked_below,
                answers: o
                    .answers
                    .into_iter()
                    .map(|(seq, r)| {
                        let recorded = now::exactly_once::Recorded {
                            request_id: r.request_id,
                            first: r.first.map(Into::into),
                            call: r.call,
                            ended: None,
                        };
                        (seq, Box::new(recorded))
                    })
                    .collect(),
                acked: BTreeMap::new(),
                standing: BTreeMap::new(),
            }
        }
    }

    pub(super) fn locks(ls: BTreeMap<String, LockState>) -> BTreeMap<String, now::LockState> {
        ls.into_iter().map(|(n, l)| (n, l.into())).collect()
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
                    locks: old::locks(v2.locks),
                    owners: v2.owners,
                    ..LeaseMachine::default()
                };
                (machine, left)
            } else if version == 3 {
                let (v3, left) = postcard::take_from_bytes::<V3>(body)?;
                let machine = LeaseMachine {
                    sessions: v3.sessions,
                    locks: old::locks(v3.locks),
                    owners: v3.owners,
                    once: v3.once.into_iter().map(|(s, o)| (s, o.into())).collect(),
                    session_keys: v3.session_keys,
                    ..LeaseMachine::default()
                };
                (machine, left)
            } else if version == 4 {
                let (v4, left) = postcard::take_from_bytes::<V4>(body)?;
                let machine = LeaseMachine {
                    sessions: v4.sessions,
                    locks: old::locks(v4.locks),
                    owners: v4.owners,
                    once: v4.once.into_iter().map(|(s, o)| (s, o.into())).collect(),
                    session_keys: v4.session_keys,
                    origins: v4.origins,
                    ..LeaseMachine::default()
                };
                (machine, left)
            } else if version == 5 {
                let (v5, left) = postcard::take_from_bytes::<V5>(body)?;
                (v5.into(), left)
            } else if version == 6 {
                let (v6, left) = postcard::take_from_bytes::<V6>(body)?;
                (v6.into(), left)
            } else {
                postcard::take_from_bytes::<LeaseMachine>(body)?
            };
            if !left.is_empty() {
                return Err(SnapshotError::CorruptBinary(
                    postcard::Error::DeserializeBadEncoding,
                ));
            }
            let mut machine = machine;
            if version < 6 {
                machine.rebuild_standing();
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
        let mut read: Read = serde_json::from_slice(bytes)?;
        read.machine.rebuild_standing();
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
