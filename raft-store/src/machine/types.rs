//! The nouns of the lease state machine.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A Raft log index.
pub type LogIndex = u64;
/// A session id: the log index of the entry that created the session.
pub type SessionId = u64;
/// A fencing token: the log index of the entry whose application produced a
/// grant. Exclusive tokens of one lock strictly increase in grant order.
pub type FencingToken = u64;

/// Chosen by the client once per logical acquisition and reused by its
/// retries, so that a retry finds the grant or wait it already has.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u128);

impl RequestId {
    /// Reads a request id from its 16-byte wire form.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let arr: [u8; 16] = bytes.try_into().ok()?;
        Some(Self(u128::from_be_bytes(arr)))
    }

    /// The 16-byte wire form.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// How a lock is held.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// The only holder.
    Exclusive,
    /// One of up to `permits` holders, never beside an exclusive one.
    Shared,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Exclusive => "x",
            Mode::Shared => "s",
        })
    }
}

/// A lock held by a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Lock name.
    pub name: String,
    /// The holding session.
    pub session: SessionId,
    /// The acquisition that produced this grant.
    pub request_id: RequestId,
    /// How it is held.
    pub mode: Mode,
    /// Fencing token.
    pub token: FencingToken,
    /// Leader's wall clock when the granting entry was proposed (Unix ms).
    pub granted_at_ms: u64,
    /// Opaque bytes from the holder (an election's value).
    pub metadata: Vec<u8>,
    /// What the acquisition asked for beyond a plain hold (snapshot
    /// version 5 on).
    #[serde(default)]
    pub terms: Terms,
}

/// A queued acquisition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    /// The waiting session.
    pub session: SessionId,
    /// The acquisition waiting.
    pub request_id: RequestId,
    /// Requested mode.
    pub mode: Mode,
    /// Leader's wall clock when queued (Unix ms).
    pub enqueued_at_ms: u64,
    /// How long it may wait; the leader cancels it with `CancelWait` after.
    pub timeout_ms: u64,
    /// Metadata to store with the grant.
    pub metadata: Vec<u8>,
    /// What the acquisition asks for beyond a plain hold.
    #[serde(default)]
    pub terms: Terms,
}

/// What an acquisition may ask for beyond a plain hold: several permits of
/// a semaphore, a cap on how long it may hold, and a lock-delay if it loses
/// the lock without releasing it. The default is a plain hold of one permit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    /// Permits of a shared lock this hold takes (1 for an exclusive one).
    pub count: u32,
    /// Longest the hold may last, in ms (0: no cap). The leader releases it
    /// once this much time has passed on its clock since the grant, even
    /// though the session lives.
    pub max_hold_ms: u64,
    /// If the hold ends without its holder releasing it (its session
    /// expired, an administrator forced it, its hold cap ran out), nobody
    /// is granted the lock for this long, in ms (0: no delay). Exclusive
    /// holds only.
    pub lock_delay_ms: u64,
}

impl Default for Terms {
    fn default() -> Self {
        Terms {
            count: 1,
            max_hold_ms: 0,
            lock_delay_ms: 0,
        }
    }
}

impl Terms {
    /// Nothing beyond a plain hold of one permit.
    pub fn is_plain(&self) -> bool {
        *self == Terms::default()
    }
}

/// A session as the state machine knows it. Deadlines are not here: they
/// live on the leader's steady clock, outside the replicated state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Session id.
    pub id: SessionId,
    /// Time to live without keep-alives, in ms.
    pub ttl_ms: u64,
    /// Free text naming the client.
    pub client_name: String,
    /// The identity that created it; empty without authentication.
    #[serde(default)]
    pub owner: String,
    /// Leader's wall clock at creation (Unix ms).
    pub created_at_ms: u64,
    /// Locks held, by name, with the acquisition that holds each.
    pub held: std::collections::BTreeMap<String, RequestId>,
    /// Locks waited for, by name, with the waiting acquisition.
    pub waiting: std::collections::BTreeMap<String, RequestId>,
    /// Recently finished acquisitions, oldest first, bounded by
    /// [`raftlock_proto::limits::FINISHED_REQUESTS_PER_SESSION`].
    pub finished: std::collections::VecDeque<(RequestId, Finished)>,
}

/// Where a session's client runs, as the client said when it created the
/// session: informational, for people answering "who holds this".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// Host name of the client's machine (at most 256 bytes).
    pub host: String,
    /// Process id of the client (0: not given).
    pub pid: u32,
}

/// How an acquisition ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Finished {
    /// It was granted and later released with this token.
    Released(FencingToken),
    /// Its wait was cancelled (timed out) before a grant.
    WaitCancelled,
}

impl Finished {
    /// What a duplicate of the acquisition `request_id` that ended so gets.
    pub(crate) fn error(self, request_id: RequestId) -> super::LeaseError {
        match self {
            Finished::Released(token) => super::LeaseError::RequestReleased { request_id, token },
            Finished::WaitCancelled => super::LeaseError::WaitCancelled { request_id },
        }
    }
}

/// Why a session ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndReason {
    /// The client closed it.
    Closed,
    /// The leader expired it.
    Expired,
}

/// Why a hold ended: what an observer reports, from the state machine
/// itself, never inferred from the command that carried it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldEnd {
    /// Its holder released it.
    Released,
    /// Its session was closed.
    SessionClosed,
    /// Its session expired.
    SessionExpired,
    /// An administrator forced it free.
    ForceReleased,
    /// Its hold cap ran out.
    CapRanOut,
}

impl HoldEnd {
    /// A session's end as the end of each hold it had.
    pub fn of_session(reason: EndReason) -> HoldEnd {
        match reason {
            EndReason::Closed => HoldEnd::SessionClosed,
            EndReason::Expired => HoldEnd::SessionExpired,
        }
    }
}

/// Why a wait ended without a grant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitEnd {
    /// Cancelled (its deadline passed, or the client gave up).
    Cancelled,
    /// Its session ended.
    SessionEnded,
}
