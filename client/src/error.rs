//! What can go wrong talking to raftlock.

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
    /// A wait for a lock timed out.
    #[error("timed out waiting for lock {0:?}")]
    WaitTimedOut(String),
    /// The request was refused as malformed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The request conflicts with the lock's state (not the holder, stale
    /// token, mismatched permits, already held).
    #[error("{0}")]
    Conflict(String),
    /// Too many waiters, locks or requests.
    #[error("resource exhausted: {0}")]
    Exhausted(String),
    /// The cluster does not know who this client is (no token or
    /// certificate, or an unknown one).
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// This client's identity may not do this.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
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

    pub(crate) fn from_status(s: &tonic::Status, session: Option<u64>, lock: Option<&str>) -> Self {
        let msg = s.message().to_owned();
        match s.code() {
            Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Aborted => {
                Error::Unavailable(msg)
            }
            Code::NotFound if session.is_some() && msg.contains("session") => {
                Error::SessionGone(session.unwrap_or_default())
            }
            Code::DeadlineExceeded => Error::WaitTimedOut(lock.unwrap_or_default().to_owned()),
            Code::InvalidArgument | Code::OutOfRange => Error::InvalidArgument(msg),
            Code::FailedPrecondition | Code::AlreadyExists => Error::Conflict(msg),
            Code::ResourceExhausted => Error::Exhausted(msg),
            Code::Unauthenticated => Error::Unauthenticated(msg),
            Code::PermissionDenied => Error::PermissionDenied(msg),
            code => Error::Server { code, message: msg },
        }
    }
}
