//! Protobuf ⇄ domain conversions and the one mapping from errors to gRPC
//! statuses. Nothing past this file sees a protobuf type.

use crate::node::NodeError;
use raftlock_proto::v1 as pb;
use raftlock_proto::{limits, LEADER_METADATA_KEY};
use raftlock_store::machine::{validate, Grant, LeaseError, Mode, RequestId, Waiter};
use tonic::{Code, Status};

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
    }
}

fn mode_to_pb(m: Mode) -> pb::LockMode {
    match m {
        Mode::Exclusive => pb::LockMode::Exclusive,
        Mode::Shared => pb::LockMode::Shared,
    }
}

/// Reads a lock mode; unset means exclusive.
pub fn mode(value: i32) -> Result<Mode, Status> {
    match pb::LockMode::try_from(value) {
        Ok(pb::LockMode::Unspecified) | Ok(pb::LockMode::Exclusive) => Ok(Mode::Exclusive),
        Ok(pb::LockMode::Shared) => Ok(Mode::Shared),
        Err(_) => Err(Status::invalid_argument(format!(
            "unknown lock mode {value}"
        ))),
    }
}

/// Reads a 16-byte request id.
pub fn request_id(bytes: &[u8]) -> Result<RequestId, Status> {
    RequestId::from_bytes(bytes).ok_or_else(|| {
        Status::invalid_argument(format!(
            "request_id must be {} bytes (a UUID), got {}",
            limits::REQUEST_ID_LEN,
            bytes.len()
        ))
    })
}

/// Reads an acquisition's exactly-once fields: `None` when the client does
/// not number its requests (`seq` 0).
pub fn sequence(seq: u64, acked_below: u64) -> Result<Option<Sequence>, Status> {
    if seq == 0 {
        if acked_below != 0 {
            return Err(Status::invalid_argument(
                "acked_below is set but seq is not: number the request too",
            ));
        }
        return Ok(None);
    }
    if acked_below > seq {
        return Err(Status::invalid_argument(format!(
            "acked_below {acked_below} is above the request's own seq {seq}, which still waits for its answer"
        )));
    }
    Ok(Some(Sequence { seq, acked_below }))
}

/// An acquisition's place in its session's exactly-once sequence.
#[derive(Clone, Copy, Debug)]
pub struct Sequence {
    /// The request's number.
    pub seq: u64,
    /// Every lower number is answered and will not be retried.
    pub acked_below: u64,
}

/// Reads a session creation key: empty for none, else 16 bytes.
pub fn creation_key(bytes: &[u8]) -> Result<Option<u128>, Status> {
    if bytes.is_empty() {
        return Ok(None);
    }
    RequestId::from_bytes(bytes)
        .map(|k| Some(k.0))
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "creation_key must be empty or {} bytes, got {}",
                limits::REQUEST_ID_LEN,
                bytes.len()
            ))
        })
}

/// Checks a session id is plausible (ids come from log indexes, never 0).
pub fn session_id(id: u64) -> Result<u64, Status> {
    if id == 0 {
        return Err(Status::invalid_argument("session_id is required"));
    }
    Ok(id)
}

/// Checks a lock name at the edge with the state machine's own rule, so a bad
/// name is refused without costing a log entry.
pub fn lock_name(name: &str) -> Result<(), Status> {
    validate::name(name).map_err(lease_status)
}

/// Checks holder metadata or an election value (`what` names it) at the edge.
pub fn metadata(what: &str, bytes: &[u8]) -> Result<(), Status> {
    validate::metadata(what, bytes).map_err(lease_status)
}

/// Checks a session's client name at the edge.
pub fn client_name(name: &str) -> Result<(), Status> {
    validate::client_name(name).map_err(lease_status)
}

/// A state-machine refusal as a status.
pub fn lease_status(e: LeaseError) -> Status {
    Status::new(lease_code(&e), e.to_string())
}

/// The gRPC code for a state-machine refusal.
pub fn lease_code(e: &LeaseError) -> Code {
    match e {
        LeaseError::InvalidName { .. }
        | LeaseError::TtlOutOfRange { .. }
        | LeaseError::InvalidArgument(_) => Code::InvalidArgument,
        LeaseError::SessionNotFound(_) | LeaseError::WaitNotFound { .. } => Code::NotFound,
        LeaseError::NotHolder { .. }
        | LeaseError::StaleToken { .. }
        | LeaseError::PermitsMismatch { .. }
        | LeaseError::RequestReleased { .. }
        | LeaseError::RequestFinished { .. }
        | LeaseError::RequestAcknowledged { .. } => Code::FailedPrecondition,
        LeaseError::AlreadyHeld { .. } | LeaseError::AlreadyWaiting { .. } => Code::AlreadyExists,
        LeaseError::WaitCancelled { .. } => Code::DeadlineExceeded,
        LeaseError::TooManyWaiters { .. }
        | LeaseError::TooManyLocks { .. }
        | LeaseError::TooManyUnacknowledged { .. } => Code::ResourceExhausted,
    }
}

/// The one mapping from node errors to gRPC statuses. A not-leader answer
/// is UNAVAILABLE (retry elsewhere) and names the leader's client address
/// in the `raftlock-leader` metadata key when it is known.
pub fn status(e: NodeError) -> Status {
    match &e {
        NodeError::NotLeader { leader_addr, .. } => {
            let mut s = Status::unavailable(e.to_string());
            if let Some(addr) = leader_addr {
                if let Ok(v) = addr.parse() {
                    s.metadata_mut().insert(LEADER_METADATA_KEY, v);
                }
            }
            s
        }
        NodeError::Lease(l) => lease_status(l.clone()),
        NodeError::Unavailable(_) => Status::unavailable(e.to_string()),
        NodeError::WaitTimedOut(_) => Status::deadline_exceeded(e.to_string()),
        NodeError::InvalidArgument(_) => Status::invalid_argument(e.to_string()),
        NodeError::Stopped(_) => Status::unavailable(e.to_string()),
        NodeError::PermissionDenied(m) => Status::permission_denied(m.clone()),
        NodeError::ResourceExhausted(m) => Status::resource_exhausted(m.clone()),
    }
}
