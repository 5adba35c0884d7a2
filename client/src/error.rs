//! What can go wrong talking to raftlock.

use raftlock_proto::reason::{self, Reason};
use tonic::Code;

/// An error from the client library.
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) {
/// use raftlock_client::Error;
/// match s.lock("deploy").timeout(std::time::Duration::from_secs(5)).acquire().await {
///     Ok(guard) => println!("token {}", guard.token()),
///     Err(Error::WaitTimedOut(name)) => println!("{name} stayed busy"),
///     Err(Error::SessionLost(_) | Error::SessionGone(_)) => println!("start a new session"),
///     Err(e) => eprintln!("raftlock: {e}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// No endpoints were given.
    #[error("no endpoints given")]
    NoEndpoints,
    /// An endpoint is not a usable address.
    #[error("bad endpoint {0:?}: {1}")]
    BadEndpoint(String, String),
    /// No node could serve the call before its deadline (no leader, no
    /// quorum, or unreachable nodes).
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
    /// The session ended (closed, or expired by the leader) or was never known.
    #[error("session {0} is gone (expired or closed)")]
    SessionGone(u64),
    /// This client stopped treating the session as valid: no keep-alive was
    /// acknowledged within its TTL minus the safety margin.
    #[error("session {0} lost: no keep-alive acknowledged in time")]
    SessionLost(u64),
    /// The hold cap of this lock ran out (by the local clock, a margin
    /// before the leader releases it): the lock can no longer be claimed.
    #[error("hold cap of lock {0:?} ran out")]
    HoldExpired(String),
    /// A wait for a lock timed out.
    #[error("timed out waiting for lock {0:?}")]
    WaitTimedOut(String),
    /// A lock or election name the server does not accept (empty, too
    /// long, not UTF-8 text it allows).
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// A session TTL outside the range the cluster allows.
    #[error("TTL out of range: {0}")]
    TtlOutOfRange(String),
    /// Another field of the request was refused as malformed or out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The session does not hold the lock (it was released, or expired).
    #[error("not the holder: {0}")]
    NotHolder(String),
    /// The session holds the lock, under another token than the one given:
    /// this grant is stale.
    #[error("stale token: {0}")]
    StaleToken(String),
    /// The permit count given differs from the semaphore's.
    #[error("permits mismatch: {0}")]
    PermitsMismatch(String),
    /// The session already holds the lock through another acquisition.
    #[error("already held: {0}")]
    AlreadyHeld(String),
    /// The session already waits for the lock through another acquisition.
    #[error("already waiting: {0}")]
    AlreadyWaiting(String),
    /// No such wait to cancel.
    #[error("no such wait: {0}")]
    WaitNotFound(String),
    /// A retry of an acquisition that was granted and released since.
    #[error("request already released: {0}")]
    RequestReleased(String),
    /// A retry of an acquisition that ended some other way.
    #[error("request already finished: {0}")]
    RequestFinished(String),
    /// A retry of a request this client had said it had the answer to.
    #[error("request already acknowledged: {0}")]
    RequestAcknowledged(String),
    /// The lock has as many waiters as the cluster allows.
    #[error("too many waiters: {0}")]
    TooManyWaiters(String),
    /// The cluster, or this session, has as many locks as allowed.
    #[error("too many locks: {0}")]
    TooManyLocks(String),
    /// The session has as many unanswered requests as allowed.
    #[error("too many unacknowledged requests: {0}")]
    TooManyUnacknowledged(String),
    /// Another limit of the cluster's (sessions per identity, requests per
    /// connection, a wait longer than allowed, ...).
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    /// The cluster's leader is short of disk space: new sessions, acquires
    /// and takes are refused until an operator frees some; releases and
    /// keep-alives go on.
    #[error("no space: {0}")]
    NoSpace(String),
    /// The cluster does not know who this client is (no token or
    /// certificate, or an unknown one).
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// This client's identity may not do this.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The cluster refused a membership change (another in progress, an
    /// unknown node).
    #[error("membership change refused: {0}")]
    MembershipChangeRefused(String),
    /// A new learner did not catch up with the log in time.
    #[error("learner not caught up: {0}")]
    LearnerNotCaughtUp(String),
    /// A watch could not resume where it left off: the node no longer
    /// remembers events that far back. Read the state afresh (describe,
    /// list) and watch again from now.
    #[error("watch history compacted: {0}")]
    WatchCompacted(String),
    /// A fault of the server's own.
    #[error("internal server error: {0}")]
    Internal(String),
    /// No rate limit of this name: define it, or take with its rate and
    /// burst.
    #[error("rate limit not found: {0}")]
    LimitNotFound(String),
    /// A rate limit of this name exists with other parameters, or a take
    /// asks for more tokens than the existing limit's burst (it could never
    /// be admitted).
    #[error("rate limit conflict: {0}")]
    LimitConflict(String),
    /// The TLS settings are unusable (unreadable or invalid PEM).
    #[error("tls: {0}")]
    Tls(String),
    /// Any other answer from the server.
    #[error("server error {code:?}: {message}")]
    Server {
        /// gRPC code.
        code: Code,
        /// Message.
        message: String,
    },
}

impl Error {
    /// Whether another attempt may succeed (the client already retried
    /// until its deadline; a caller may try again later).
    ///
    /// ```
    /// use raftlock_client::Error;
    /// assert!(Error::Unavailable("no leader".into()).is_retryable());
    /// assert!(!Error::SessionGone(7).is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

    /// The error for a status the server (or the transport) returned.
    /// raftlock's own refusals are read by their reason
    /// (`google.rpc.ErrorInfo`), never by their message; a status without
    /// one (a proxy, the transport, an older server) by its code alone.
    pub(crate) fn from_status(s: &tonic::Status, session: Option<u64>, lock: Option<&str>) -> Self {
        let msg = s.message().to_owned();
        let Some(reason) = reason::of(s) else {
            return match s.code() {
                Code::Unavailable
                | Code::Unknown
                | Code::Cancelled
                | Code::Aborted
                | Code::DeadlineExceeded => Error::Unavailable(msg),
                Code::Unauthenticated => Error::Unauthenticated(msg),
                Code::PermissionDenied => Error::PermissionDenied(msg),
                code => Error::Server { code, message: msg },
            };
        };
        match reason {
            Reason::NotLeader | Reason::NoQuorum | Reason::Stopping => Error::Unavailable(msg),
            Reason::InvalidName => Error::InvalidName(msg),
            Reason::TtlOutOfRange => Error::TtlOutOfRange(msg),
            Reason::InvalidArgument => Error::InvalidArgument(msg),
            Reason::SessionNotFound => Error::SessionGone(session.unwrap_or_default()),
            Reason::WaitNotFound => Error::WaitNotFound(msg),
            Reason::NotHolder => Error::NotHolder(msg),
            Reason::StaleToken => Error::StaleToken(msg),
            Reason::PermitsMismatch => Error::PermitsMismatch(msg),
            Reason::RequestReleased => Error::RequestReleased(msg),
            Reason::RequestFinished => Error::RequestFinished(msg),
            Reason::RequestAcknowledged => Error::RequestAcknowledged(msg),
            Reason::AlreadyHeld => Error::AlreadyHeld(msg),
            Reason::AlreadyWaiting => Error::AlreadyWaiting(msg),
            Reason::WaitCancelled | Reason::WaitTimedOut => {
                Error::WaitTimedOut(lock.unwrap_or_default().to_owned())
            }
            Reason::TooManyWaiters => Error::TooManyWaiters(msg),
            Reason::TooManyLocks => Error::TooManyLocks(msg),
            Reason::TooManyUnacknowledged => Error::TooManyUnacknowledged(msg),
            Reason::LimitExceeded => Error::LimitExceeded(msg),
            Reason::NoSpace => Error::NoSpace(msg),
            Reason::Unauthenticated => Error::Unauthenticated(msg),
            Reason::PermissionDenied => Error::PermissionDenied(msg),
            Reason::MembershipChangeRefused => Error::MembershipChangeRefused(msg),
            Reason::LearnerNotCaughtUp => Error::LearnerNotCaughtUp(msg),
            Reason::WatchCompacted => Error::WatchCompacted(msg),
            Reason::Internal => Error::Internal(msg),
            Reason::LimitNotFound => Error::LimitNotFound(msg),
            Reason::LimitConflict => Error::LimitConflict(msg),
            // A reason without a variant of its own takes its code's kind.
            r => match r.code() {
                Code::Unavailable => Error::Unavailable(msg),
                Code::InvalidArgument => Error::InvalidArgument(msg),
                Code::ResourceExhausted => Error::LimitExceeded(msg),
                Code::Unauthenticated => Error::Unauthenticated(msg),
                Code::PermissionDenied => Error::PermissionDenied(msg),
                code => Error::Server { code, message: msg },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reason the server sends becomes a typed error, by its own
    /// variant or its code's kind, never by reading the message; only a
    /// code that names no kind of failure leaves it the catch-all `Server`.
    #[test]
    fn every_reason_has_a_typed_error() {
        for r in Reason::ALL {
            let s = reason::status(r, "a message nobody reads");
            let e = Error::from_status(&s, Some(7), Some("l"));
            let kinds = [
                Code::Unavailable,
                Code::InvalidArgument,
                Code::ResourceExhausted,
                Code::Unauthenticated,
                Code::PermissionDenied,
            ];
            assert!(
                !matches!(e, Error::Server { .. }) || !kinds.contains(&r.code()),
                "{r} became {e:?}"
            );
            let expected_gone = r == Reason::SessionNotFound;
            assert_eq!(
                matches!(e, Error::SessionGone(7)),
                expected_gone,
                "{r}: {e:?}"
            );
        }
    }

    /// The same code without raftlock's reason (a proxy, the transport, an
    /// older server) is not taken for a verdict it does not carry.
    #[test]
    fn a_status_without_a_reason_is_read_by_its_code_only() {
        let s = tonic::Status::not_found("session 7 not found");
        assert!(matches!(
            Error::from_status(&s, Some(7), None),
            Error::Server { .. }
        ));
        let s = tonic::Status::deadline_exceeded("Timeout expired");
        assert!(matches!(
            Error::from_status(&s, None, Some("l")),
            Error::Unavailable(_)
        ));
    }
}
