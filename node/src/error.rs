//! The node's errors, below every other module: what a request or a
//! configuration can fail with, and the machine-readable reason each
//! refusal carries on any transport.

use raftlock_proto::reason::Reason;
use raftlock_store::machine::LeaseError;
use raftlock_store::NodeId;
use std::path::PathBuf;

/// Why a node could not serve a request.
#[derive(Clone, Debug, thiserror::Error)]
pub enum NodeError {
    /// This node does not lead; the client should go to the leader.
    #[error("node {node} is not the leader{}", leader_addr.as_deref().map(|a| format!("; the leader is at {a}")).unwrap_or_else(|| "; no leader is known yet".into()))]
    NotLeader {
        /// This node.
        node: NodeId,
        /// The leader's client address, if known.
        leader_addr: Option<String>,
    },
    /// The state machine refused the command.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// No quorum answered in time.
    #[error("no quorum: {0}")]
    Unavailable(String),
    /// A wait for a lock timed out.
    #[error("gave up waiting for lock {0:?}: the wait timed out")]
    WaitTimedOut(String),
    /// The request is malformed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Raft stopped (shutdown or a fatal storage error).
    #[error("raft stopped: {0}")]
    Stopped(String),
    /// The caller may not do this.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The caller's credentials no longer name an identity (an auth file
    /// reloaded under an open stream).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// A limit was reached.
    #[error("limit reached: {0}")]
    ResourceExhausted(String),
    /// The data dir is below its free-space reserve.
    #[error("{0}")]
    NoSpace(String),
    /// A session TTL outside this cluster's configured range (the state
    /// machine's own range is wider).
    #[error("ttl_ms {ttl_ms} is out of this cluster's range {min_ms}..={max_ms} ms")]
    TtlOutOfRange {
        /// Requested TTL.
        ttl_ms: u64,
        /// Lowest allowed here.
        min_ms: u64,
        /// Highest allowed here.
        max_ms: u64,
    },
    /// A watch cannot resume after the index it asked for.
    #[error("{0}")]
    WatchCompacted(String),
    /// A fault of the server's own (a reply that does not fit its command).
    #[error("internal error: {0}")]
    Internal(String),
}

impl NodeError {
    /// Why, for clients to read: every transport sends this, never a
    /// message to be parsed.
    pub fn reason(&self) -> Reason {
        match self {
            NodeError::NotLeader { .. } => Reason::NotLeader,
            NodeError::Lease(l) => lease_reason(l),
            NodeError::Unavailable(_) => Reason::NoQuorum,
            NodeError::WaitTimedOut(_) => Reason::WaitTimedOut,
            NodeError::InvalidArgument(_) => Reason::InvalidArgument,
            NodeError::Stopped(_) => Reason::Stopping,
            NodeError::PermissionDenied(_) => Reason::PermissionDenied,
            NodeError::Unauthenticated(_) => Reason::Unauthenticated,
            NodeError::ResourceExhausted(_) => Reason::LimitExceeded,
            NodeError::NoSpace(_) => Reason::NoSpace,
            NodeError::TtlOutOfRange { .. } => Reason::TtlOutOfRange,
            NodeError::WatchCompacted(_) => Reason::WatchCompacted,
            NodeError::Internal(_) => Reason::Internal,
        }
    }

    /// The human message. Refusals whose code already says what they are
    /// (invalid, denied, exhausted) carry their message without a prefix.
    pub fn message(&self) -> String {
        match self {
            NodeError::PermissionDenied(m)
            | NodeError::ResourceExhausted(m)
            | NodeError::InvalidArgument(m) => m.clone(),
            other => other.to_string(),
        }
    }

    /// The leader's client address, for a not-leader answer.
    pub fn leader_addr(&self) -> Option<&str> {
        match self {
            NodeError::NotLeader { leader_addr, .. } => leader_addr.as_deref(),
            _ => None,
        }
    }
}

/// Why the state machine refused, for clients to read.
pub fn lease_reason(e: &LeaseError) -> Reason {
    match e {
        LeaseError::InvalidName { .. } => Reason::InvalidName,
        LeaseError::TtlOutOfRange { .. } => Reason::TtlOutOfRange,
        LeaseError::InvalidArgument(_) => Reason::InvalidArgument,
        LeaseError::SessionNotFound(_) => Reason::SessionNotFound,
        LeaseError::WaitNotFound { .. } => Reason::WaitNotFound,
        LeaseError::NotHolder { .. } => Reason::NotHolder,
        LeaseError::StaleToken { .. } => Reason::StaleToken,
        LeaseError::PermitsMismatch { .. } => Reason::PermitsMismatch,
        LeaseError::RequestReleased { .. } => Reason::RequestReleased,
        LeaseError::RequestFinished { .. } => Reason::RequestFinished,
        LeaseError::RequestAcknowledged { .. } => Reason::RequestAcknowledged,
        LeaseError::AlreadyHeld { .. } => Reason::AlreadyHeld,
        LeaseError::AlreadyWaiting { .. } => Reason::AlreadyWaiting,
        LeaseError::WaitCancelled { .. } => Reason::WaitCancelled,
        LeaseError::TooManyWaiters { .. } => Reason::TooManyWaiters,
        LeaseError::TooManyLocks { .. } => Reason::TooManyLocks,
        LeaseError::TooManyUnacknowledged { .. } => Reason::TooManyUnacknowledged,
        LeaseError::PermitsExceeded { .. } => Reason::PermitsMismatch,
        LeaseError::TooManySizes { .. } => Reason::TooManyLocks,
        LeaseError::LimitNotFound { .. } => Reason::LimitNotFound,
        LeaseError::LimitConflict { .. } | LeaseError::MoreThanBurst { .. } => {
            Reason::LimitConflict
        }
        LeaseError::TooManyLimits { .. } | LeaseError::TooManySessions { .. } => {
            Reason::LimitExceeded
        }
        LeaseError::NotLeaseOwner { .. } => Reason::PermissionDenied,
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A required setting is missing.
    #[error("{0} is required (flag, RAFTLOCK_* variable, or config file)")]
    Missing(&'static str),
    /// A setting has a bad value.
    #[error("{setting}: {reason}")]
    Invalid {
        /// Which setting.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The layers (file, environment, flags) do not merge into settings:
    /// a value of the wrong type, an unknown key.
    #[error("{0}")]
    Layers(String),
    /// The config file cannot be read.
    #[error("config file {path}: {reason}")]
    File {
        /// Path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
