//! The store's values as the API's messages and back: grants, waiters,
//! lock modes, request ids, rate-limit specs. Nothing here knows the lock
//! service, so that an operation (`locks/ops/`, which parses its request
//! message and builds its answer) and the transports share them.

use crate::error::NodeError;
use raftlock_proto::limits;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{Grant, LimitSpec, Mode, RequestId, Waiter};

/// A grant as the API shows it.
pub fn grant(g: &Grant) -> pb::Grant {
    pb::Grant {
        token: g.token,
        name: g.name.clone(),
        mode: mode_to_pb(g.mode) as i32,
        session_id: g.session,
        request_id: g.request_id.to_bytes().to_vec(),
        granted_at_ms: g.granted_at_ms,
        metadata: g.metadata.clone(),
        count: g.terms.count,
        max_hold_ms: g.terms.max_hold_ms,
        lock_delay_ms: g.terms.lock_delay_ms,
    }
}

/// A waiter as the API shows it.
pub fn waiter(w: &Waiter) -> pb::Waiter {
    pb::Waiter {
        session_id: w.session,
        mode: mode_to_pb(w.mode) as i32,
        request_id: w.request_id.to_bytes().to_vec(),
        enqueued_at_ms: w.enqueued_at_ms,
        timeout_ms: w.timeout_ms,
        count: w.terms.count,
    }
}

/// A lock mode as the API shows it.
pub fn mode_to_pb(m: Mode) -> pb::LockMode {
    match m {
        Mode::Exclusive => pb::LockMode::Exclusive,
        Mode::Shared => pb::LockMode::Shared,
    }
}

/// Reads a lock mode; unset means exclusive.
pub fn mode(value: i32) -> Result<Mode, NodeError> {
    match pb::LockMode::try_from(value) {
        Ok(pb::LockMode::Unspecified) | Ok(pb::LockMode::Exclusive) => Ok(Mode::Exclusive),
        Ok(pb::LockMode::Shared) => Ok(Mode::Shared),
        Err(_) => Err(NodeError::InvalidArgument(format!(
            "unknown lock mode {value}"
        ))),
    }
}

/// Reads a 16-byte request id.
pub fn request_id(bytes: &[u8]) -> Result<RequestId, NodeError> {
    RequestId::from_bytes(bytes).ok_or_else(|| {
        NodeError::InvalidArgument(format!(
            "request_id must be {} bytes (a UUID), got {}",
            limits::REQUEST_ID_LEN,
            bytes.len()
        ))
    })
}

/// Reads a session creation key: empty for none, else 16 bytes.
pub fn creation_key(bytes: &[u8]) -> Result<Option<u128>, NodeError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    RequestId::from_bytes(bytes)
        .map(|k| Some(k.0))
        .ok_or_else(|| {
            NodeError::InvalidArgument(format!(
                "creation_key must be empty or {} bytes, got {}",
                limits::REQUEST_ID_LEN,
                bytes.len()
            ))
        })
}

/// A limit's parameters from the wire: the period defaults to a second and
/// the burst to one token.
pub fn spec(s: &pb::LimitSpec) -> LimitSpec {
    LimitSpec {
        rate: s.rate,
        per_ms: if s.per_ms == 0 { 1_000 } else { s.per_ms },
        burst: s.burst.max(1),
    }
}

/// A limit's parameters as the wire shows them.
pub fn spec_to_pb(s: &LimitSpec) -> pb::LimitSpec {
    pb::LimitSpec {
        rate: s.rate,
        per_ms: s.per_ms,
        burst: s.burst,
    }
}

/// The limit a define names, which it must.
pub fn required_spec(s: Option<&pb::LimitSpec>) -> Result<LimitSpec, NodeError> {
    s.map(spec)
        .ok_or_else(|| NodeError::InvalidArgument("limit (rate, per_ms, burst) is required".into()))
}
