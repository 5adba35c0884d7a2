//! Why a call was refused, in a form programs read: every error status
//! raftlock sends carries a `google.rpc.ErrorInfo` whose `reason` is one of
//! [`Reason`] and whose `domain` is [`DOMAIN`]. Clients map the reason to
//! their own error types and never read the message, which is for people.
//!
//! ```
//! use raftlock_proto::reason::{self, Reason};
//! let status = reason::status(Reason::StaleToken, "token 7 is not the holder's (9)");
//! assert_eq!(status.code(), tonic::Code::FailedPrecondition);
//! assert_eq!(reason::of(&status), Some(Reason::StaleToken));
//! assert_eq!(Reason::parse("STALE_TOKEN"), Some(Reason::StaleToken));
//! ```

use std::collections::HashMap;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The `domain` of raftlock's `ErrorInfo`s.
pub const DOMAIN: &str = "raftlock.v1";

/// Why a call was refused. The wire form is [`Reason::as_str`]
/// (`SCREAMING_SNAKE_CASE`, as `google.rpc.ErrorInfo` asks); each reason
/// always travels with the same gRPC code ([`Reason::code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// This node does not lead; the leader's address, when known, is in
    /// the `raftlock-leader` metadata key. UNAVAILABLE.
    NotLeader,
    /// No quorum answered in time. UNAVAILABLE.
    NoQuorum,
    /// The node is stopping. UNAVAILABLE.
    Stopping,
    /// A lock or election name is empty, too long or not acceptable.
    /// INVALID_ARGUMENT.
    InvalidName,
    /// A session TTL outside the allowed range. INVALID_ARGUMENT.
    TtlOutOfRange,
    /// Another field is missing, malformed or out of range.
    /// INVALID_ARGUMENT.
    InvalidArgument,
    /// The session does not exist (never created, closed, or expired).
    /// NOT_FOUND.
    SessionNotFound,
    /// No such wait to cancel. NOT_FOUND.
    WaitNotFound,
    /// The session does not hold the lock. FAILED_PRECONDITION.
    NotHolder,
    /// The session holds the lock under another token. FAILED_PRECONDITION.
    StaleToken,
    /// A stated permit count differs from the lock's. FAILED_PRECONDITION.
    PermitsMismatch,
    /// A retry of an acquisition that was granted and has been released
    /// since. FAILED_PRECONDITION.
    RequestReleased,
    /// A retry of an acquisition that ended otherwise. FAILED_PRECONDITION.
    RequestFinished,
    /// A request number the client said it had its answer for.
    /// FAILED_PRECONDITION.
    RequestAcknowledged,
    /// The session already holds the lock through another acquisition.
    /// ALREADY_EXISTS.
    AlreadyHeld,
    /// The session already waits for the lock through another acquisition.
    /// ALREADY_EXISTS.
    AlreadyWaiting,
    /// The wait for a lock was cancelled when its time ran out.
    /// DEADLINE_EXCEEDED.
    WaitCancelled,
    /// The wait for a lock, or for an answer, timed out. DEADLINE_EXCEEDED.
    WaitTimedOut,
    /// The lock has as many waiters as allowed. RESOURCE_EXHAUSTED.
    TooManyWaiters,
    /// The cluster or the session has as many locks as allowed.
    /// RESOURCE_EXHAUSTED.
    TooManyLocks,
    /// The session has as many unacknowledged requests as allowed.
    /// RESOURCE_EXHAUSTED.
    TooManyUnacknowledged,
    /// Another limit (sessions per identity, requests per connection, ...).
    /// RESOURCE_EXHAUSTED.
    LimitExceeded,
    /// No credentials, or unknown ones. UNAUTHENTICATED.
    Unauthenticated,
    /// The caller's identity may not do this. PERMISSION_DENIED.
    PermissionDenied,
    /// A membership change the cluster refused (another one in progress,
    /// an unknown node). FAILED_PRECONDITION.
    MembershipChangeRefused,
    /// A new learner did not catch up with the log in time.
    /// DEADLINE_EXCEEDED.
    LearnerNotCaughtUp,
    /// A watch asked to resume after an index this node no longer
    /// remembers events for (or its history was reset by a snapshot):
    /// read the state afresh and watch from now. OUT_OF_RANGE.
    WatchCompacted,
    /// A fault of the server's own. INTERNAL.
    Internal,
    /// No rate limit of this name, and the take did not say how to create
    /// it. NOT_FOUND.
    LimitNotFound,
    /// A rate limit of this name exists with other parameters, or with a
    /// burst smaller than a take asks for. FAILED_PRECONDITION.
    LimitConflict,
    /// The leader's data dir is below its free-space reserve: calls that
    /// grow the state (new sessions, acquires, campaigns, takes) are
    /// refused until space returns; releases, closes and keep-alives go
    /// on. RESOURCE_EXHAUSTED (HTTP 507).
    NoSpace,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 31] = [
        Reason::NotLeader,
        Reason::NoQuorum,
        Reason::Stopping,
        Reason::InvalidName,
        Reason::TtlOutOfRange,
        Reason::InvalidArgument,
        Reason::SessionNotFound,
        Reason::WaitNotFound,
        Reason::NotHolder,
        Reason::StaleToken,
        Reason::PermitsMismatch,
        Reason::RequestReleased,
        Reason::RequestFinished,
        Reason::RequestAcknowledged,
        Reason::AlreadyHeld,
        Reason::AlreadyWaiting,
        Reason::WaitCancelled,
        Reason::WaitTimedOut,
        Reason::TooManyWaiters,
        Reason::TooManyLocks,
        Reason::TooManyUnacknowledged,
        Reason::LimitExceeded,
        Reason::Unauthenticated,
        Reason::PermissionDenied,
        Reason::MembershipChangeRefused,
        Reason::LearnerNotCaughtUp,
        Reason::WatchCompacted,
        Reason::Internal,
        Reason::LimitNotFound,
        Reason::LimitConflict,
        Reason::NoSpace,
    ];

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotLeader => "NOT_LEADER",
            Reason::NoQuorum => "NO_QUORUM",
            Reason::Stopping => "STOPPING",
            Reason::InvalidName => "INVALID_NAME",
            Reason::TtlOutOfRange => "TTL_OUT_OF_RANGE",
            Reason::InvalidArgument => "INVALID_ARGUMENT",
            Reason::SessionNotFound => "SESSION_NOT_FOUND",
            Reason::WaitNotFound => "WAIT_NOT_FOUND",
            Reason::NotHolder => "NOT_HOLDER",
            Reason::StaleToken => "STALE_TOKEN",
            Reason::PermitsMismatch => "PERMITS_MISMATCH",
            Reason::RequestReleased => "REQUEST_RELEASED",
            Reason::RequestFinished => "REQUEST_FINISHED",
            Reason::RequestAcknowledged => "REQUEST_ACKNOWLEDGED",
            Reason::AlreadyHeld => "ALREADY_HELD",
            Reason::AlreadyWaiting => "ALREADY_WAITING",
            Reason::WaitCancelled => "WAIT_CANCELLED",
            Reason::WaitTimedOut => "WAIT_TIMED_OUT",
            Reason::TooManyWaiters => "TOO_MANY_WAITERS",
            Reason::TooManyLocks => "TOO_MANY_LOCKS",
            Reason::TooManyUnacknowledged => "TOO_MANY_UNACKNOWLEDGED",
            Reason::LimitExceeded => "LIMIT_EXCEEDED",
            Reason::Unauthenticated => "UNAUTHENTICATED",
            Reason::PermissionDenied => "PERMISSION_DENIED",
            Reason::MembershipChangeRefused => "MEMBERSHIP_CHANGE_REFUSED",
            Reason::LearnerNotCaughtUp => "LEARNER_NOT_CAUGHT_UP",
            Reason::WatchCompacted => "WATCH_COMPACTED",
            Reason::Internal => "INTERNAL",
            Reason::LimitNotFound => "LIMIT_NOT_FOUND",
            Reason::LimitConflict => "LIMIT_CONFLICT",
            Reason::NoSpace => "NO_SPACE",
        }
    }

    /// Reads the wire form.
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The gRPC code a status with this reason has.
    pub fn code(self) -> Code {
        match self {
            Reason::NotLeader | Reason::NoQuorum | Reason::Stopping => Code::Unavailable,
            Reason::InvalidName | Reason::TtlOutOfRange | Reason::InvalidArgument => {
                Code::InvalidArgument
            }
            Reason::SessionNotFound | Reason::WaitNotFound | Reason::LimitNotFound => {
                Code::NotFound
            }
            Reason::NotHolder
            | Reason::StaleToken
            | Reason::PermitsMismatch
            | Reason::RequestReleased
            | Reason::RequestFinished
            | Reason::RequestAcknowledged
            | Reason::MembershipChangeRefused
            | Reason::LimitConflict => Code::FailedPrecondition,
            Reason::AlreadyHeld | Reason::AlreadyWaiting => Code::AlreadyExists,
            Reason::WaitCancelled | Reason::WaitTimedOut | Reason::LearnerNotCaughtUp => {
                Code::DeadlineExceeded
            }
            Reason::TooManyWaiters
            | Reason::TooManyLocks
            | Reason::TooManyUnacknowledged
            | Reason::LimitExceeded
            | Reason::NoSpace => Code::ResourceExhausted,
            Reason::Unauthenticated => Code::Unauthenticated,
            Reason::PermissionDenied => Code::PermissionDenied,
            Reason::WatchCompacted => Code::OutOfRange,
            Reason::Internal => Code::Internal,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status refusing a call for `reason`, with a message for people.
pub fn status(reason: Reason, message: impl Into<String>) -> Status {
    Status::with_error_details(reason.code(), message, details(reason))
}

/// [`status`] with response metadata (the leader hint of
/// [`Reason::NotLeader`]).
pub fn status_with_metadata(
    reason: Reason,
    message: impl Into<String>,
    metadata: tonic::metadata::MetadataMap,
) -> Status {
    Status::with_error_details_and_metadata(reason.code(), message, details(reason), metadata)
}

fn details(reason: Reason) -> ErrorDetails {
    ErrorDetails::with_error_info(reason.as_str(), DOMAIN, HashMap::<String, String>::new())
}

/// The reason of a status raftlock sent; `None` for a status from anywhere
/// else (a proxy, the client's own transport, an older server).
pub fn of(status: &Status) -> Option<Reason> {
    status
        .get_details_error_info()
        .filter(|i| i.domain == DOMAIN)
        .and_then(|i| Reason::parse(&i.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_a_status_with_its_code() {
        for r in Reason::ALL {
            let s = status(r, "m");
            assert_eq!(s.code(), r.code(), "{r}");
            assert_eq!(of(&s), Some(r), "{r}");
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn a_status_without_our_error_info_has_no_reason() {
        assert_eq!(of(&Status::deadline_exceeded("Timeout expired")), None);
        let foreign = Status::with_error_details(
            Code::NotFound,
            "m",
            ErrorDetails::with_error_info("SESSION_NOT_FOUND", "example.com", HashMap::new()),
        );
        assert_eq!(of(&foreign), None);
    }
}
