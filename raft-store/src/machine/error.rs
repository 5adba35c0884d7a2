//! Why the state machine refused a command. Refusals are deterministic
//! outcomes of an entry, not failures of a node: every replica refuses alike.

use super::types::{FencingToken, LogIndex, RequestId, SessionId};
use serde::{Deserialize, Serialize};

/// A command the state machine refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum LeaseError {
    /// The lock name is empty, too long, or not acceptable.
    #[error("invalid lock name: {reason}")]
    InvalidName {
        /// What is wrong with it.
        reason: String,
    },
    /// A session TTL outside the allowed range.
    #[error("ttl {ttl_ms} ms is out of range {min_ms}..={max_ms} ms")]
    TtlOutOfRange {
        /// Requested TTL.
        ttl_ms: u64,
        /// Lowest allowed.
        min_ms: u64,
        /// Highest allowed.
        max_ms: u64,
    },
    /// Another argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The session does not exist (never created, closed, or expired).
    #[error("session {0} not found (closed, expired, or never created)")]
    SessionNotFound(SessionId),
    /// The session does not hold the lock.
    #[error("session {session} does not hold lock {name:?}")]
    NotHolder {
        /// Lock name.
        name: String,
        /// The session that asked.
        session: SessionId,
    },
    /// The session holds the lock under another token.
    #[error("token {token} is stale for lock {name:?}: the session holds it with token {current}")]
    StaleToken {
        /// Lock name.
        name: String,
        /// The token given.
        token: FencingToken,
        /// The session's current token.
        current: FencingToken,
    },
    /// A stated permit count differs from the lock's.
    #[error("lock {name:?} has {current} permits, the request states {requested}")]
    PermitsMismatch {
        /// Lock name.
        name: String,
        /// Permits requested.
        requested: u32,
        /// Permits the lock has.
        current: u32,
    },
    /// The session already holds the lock through another acquisition.
    #[error("session already holds lock {name:?} (token {token}) through another request")]
    AlreadyHeld {
        /// Lock name.
        name: String,
        /// Its token.
        token: FencingToken,
    },
    /// The session already waits for the lock through another acquisition.
    #[error("session already waits for lock {name:?} through another request")]
    AlreadyWaiting {
        /// Lock name.
        name: String,
    },
    /// A retry of an acquisition that was granted and then released.
    #[error("request {request_id} already finished: granted with token {token} and released")]
    RequestReleased {
        /// The acquisition.
        request_id: RequestId,
        /// The token it had.
        token: FencingToken,
    },
    /// A retry of an acquisition whose wait was cancelled.
    #[error("request {request_id} already finished: its wait timed out or was cancelled")]
    WaitCancelled {
        /// The acquisition.
        request_id: RequestId,
    },
    /// No such wait to cancel.
    #[error("session {session} has no wait {request_id} on lock {name:?}")]
    WaitNotFound {
        /// Lock name.
        name: String,
        /// The session.
        session: SessionId,
        /// The acquisition.
        request_id: RequestId,
    },
    /// The lock's queue is full.
    #[error("lock {name:?} already has {max} waiters")]
    TooManyWaiters {
        /// Lock name.
        name: String,
        /// The limit.
        max: usize,
    },
    /// The session holds or waits for too many locks.
    #[error("session {session} already holds or waits for {max} locks")]
    TooManyLocks {
        /// The session.
        session: SessionId,
        /// The limit.
        max: usize,
    },
    // New variants go last (postcard numbers variants by position, and
    // answers are kept in snapshots).
    /// A sequenced request below what the client acknowledged: a late
    /// duplicate, refused without being executed.
    #[error("request {seq} of session {session} was already answered and acknowledged; a late duplicate is not executed")]
    RequestAcknowledged {
        /// The session.
        session: SessionId,
        /// The request's sequence number.
        seq: u64,
    },
    /// A retry of an acquisition that was granted or queued and has ended
    /// since (released, cancelled, or taken away).
    #[error("request {request_id} already finished")]
    RequestFinished {
        /// The acquisition.
        request_id: RequestId,
    },
    /// The session has too many requests whose answers the client has not
    /// acknowledged.
    #[error("session {session} has {max} unacknowledged requests, the limit")]
    TooManyUnacknowledged {
        /// The session.
        session: SessionId,
        /// The limit.
        max: usize,
    },
    /// A shared acquisition asks for more permits than the semaphore has.
    #[error("lock {name:?} has {permits} permits, the request asks for {count}")]
    PermitsExceeded {
        /// Lock name.
        name: String,
        /// Permits asked for.
        count: u32,
        /// The semaphore's size.
        permits: u32,
    },
    /// No rate limit of this name (and the take did not define one).
    #[error("no rate limit {name:?}: define it, or take with its rate and burst")]
    LimitNotFound {
        /// Limit name.
        name: String,
    },
    /// A rate limit exists with other parameters.
    #[error("rate limit {name:?} already allows {rate} per {per_ms} ms with burst {burst}")]
    LimitConflict {
        /// Limit name.
        name: String,
        /// Its rate.
        rate: u64,
        /// Its period, ms.
        per_ms: u64,
        /// Its burst.
        burst: u64,
    },
    /// A take of more tokens than the existing limit's burst: it could
    /// never be admitted.
    #[error("{n} tokens is more than rate limit {name:?}'s burst of {burst}: it could never be admitted")]
    MoreThanBurst {
        /// Limit name.
        name: String,
        /// Tokens asked for.
        n: u64,
        /// The limit's burst.
        burst: u64,
    },
    /// Too many rate limits.
    #[error("the cluster already has {max} rate limits; delete one first")]
    TooManyLimits {
        /// The limit.
        max: usize,
    },
    /// Too many semaphores have a size set by Resize.
    #[error("{max} semaphores already have a size set; forget one (resize to 0) first")]
    TooManySizes {
        /// The limit.
        max: usize,
    },
    // New variants go last: errors are kept in snapshots, decoded by
    // position.
    /// A token lease returned by another identity than the one that took
    /// it.
    #[error("lease {lease} of rate limit {name:?} was taken by {owner:?}; only it may return it")]
    NotLeaseOwner {
        /// Limit name.
        name: String,
        /// The lease.
        lease: LogIndex,
        /// The identity that took it.
        owner: String,
    },
    /// The session's owner already has as many live sessions as the
    /// limit the leader applied when it proposed the creation.
    #[error("identity {owner:?} already has {max} live sessions, the limit per identity; close some first")]
    TooManySessions {
        /// The identity ("" without authentication: every caller).
        owner: String,
        /// The limit.
        max: u64,
    },
}

impl LeaseError {
    /// A short stable name, for logs, metrics labels and scenario files.
    pub fn code(&self) -> &'static str {
        match self {
            LeaseError::InvalidName { .. } => "invalid-name",
            LeaseError::TtlOutOfRange { .. } => "ttl-out-of-range",
            LeaseError::InvalidArgument(_) => "invalid-argument",
            LeaseError::SessionNotFound(_) => "session-not-found",
            LeaseError::NotHolder { .. } => "not-holder",
            LeaseError::StaleToken { .. } => "stale-token",
            LeaseError::PermitsMismatch { .. } => "permits-mismatch",
            LeaseError::AlreadyHeld { .. } => "already-held",
            LeaseError::AlreadyWaiting { .. } => "already-waiting",
            LeaseError::RequestReleased { .. } => "request-released",
            LeaseError::WaitCancelled { .. } => "wait-cancelled",
            LeaseError::WaitNotFound { .. } => "wait-not-found",
            LeaseError::TooManyWaiters { .. } => "too-many-waiters",
            LeaseError::TooManyLocks { .. } => "too-many-locks",
            LeaseError::RequestAcknowledged { .. } => "request-acknowledged",
            LeaseError::RequestFinished { .. } => "request-finished",
            LeaseError::TooManyUnacknowledged { .. } => "too-many-unacknowledged",
            LeaseError::PermitsExceeded { .. } => "permits-exceeded",
            LeaseError::TooManySizes { .. } => "too-many-sizes",
            LeaseError::LimitNotFound { .. } => "limit-not-found",
            LeaseError::LimitConflict { .. } => "limit-conflict",
            LeaseError::MoreThanBurst { .. } => "more-than-burst",
            LeaseError::TooManyLimits { .. } => "too-many-limits",
            LeaseError::NotLeaseOwner { .. } => "not-lease-owner",
            LeaseError::TooManySessions { .. } => "too-many-sessions",
        }
    }
}
