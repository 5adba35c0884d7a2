//! Protobuf ⇄ domain conversions and the one mapping from errors to gRPC
//! statuses. Nothing past this file sees a protobuf type.

use crate::node::NodeError;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1 as pb;
use raftlock_proto::{limits, LEADER_METADATA_KEY};
use raftlock_store::machine::{validate, Grant, LeaseError, Mode, RequestId, Waiter};
use tonic::Status;

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
        Err(_) => Err(reason::status(
            Reason::InvalidArgument,
            format!("unknown lock mode {value}"),
        )),
    }
}

/// Reads a 16-byte request id.
pub fn request_id(bytes: &[u8]) -> Result<RequestId, Status> {
    RequestId::from_bytes(bytes).ok_or_else(|| {
        reason::status(
            Reason::InvalidArgument,
            format!(
                "request_id must be {} bytes (a UUID), got {}",
                limits::REQUEST_ID_LEN,
                bytes.len()
            ),
        )
    })
}

/// Reads an acquisition's exactly-once fields: `None` when the client does
/// not number its requests (`seq` 0).
pub fn sequence(seq: u64, acked_below: u64) -> Result<Option<Sequence>, Status> {
    if seq == 0 {
        if acked_below != 0 {
            return Err(reason::status(
                Reason::InvalidArgument,
                "acked_below is set but seq is not: number the request too",
            ));
        }
        return Ok(None);
    }
    if acked_below > seq {
        return Err(reason::status(Reason::InvalidArgument, format!(
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
            reason::status(
                Reason::InvalidArgument,
                format!(
                    "creation_key must be empty or {} bytes, got {}",
                    limits::REQUEST_ID_LEN,
                    bytes.len()
                ),
            )
        })
}

/// Checks a session id is plausible (ids come from log indexes, never 0).
pub fn session_id(id: u64) -> Result<u64, Status> {
    if id == 0 {
        return Err(reason::status(
            Reason::InvalidArgument,
            "session_id is required",
        ));
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
    reason::status(lease_reason(&e), e.to_string())
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
    }
}

/// The one mapping from node errors to gRPC statuses. A not-leader answer
/// is UNAVAILABLE (retry elsewhere) and names the leader's client address
/// in the `raftlock-leader` metadata key when it is known.
pub fn status(e: NodeError) -> Status {
    match &e {
        NodeError::NotLeader { leader_addr, .. } => {
            let mut metadata = tonic::metadata::MetadataMap::new();
            if let Some(addr) = leader_addr {
                if let Ok(v) = addr.parse() {
                    metadata.insert(LEADER_METADATA_KEY, v);
                }
            }
            reason::status_with_metadata(Reason::NotLeader, e.to_string(), metadata)
        }
        NodeError::Lease(l) => lease_status(l.clone()),
        NodeError::Unavailable(_) => reason::status(Reason::NoQuorum, e.to_string()),
        NodeError::WaitTimedOut(_) => reason::status(Reason::WaitTimedOut, e.to_string()),
        NodeError::InvalidArgument(_) => reason::status(Reason::InvalidArgument, e.to_string()),
        NodeError::Stopped(_) => reason::status(Reason::Stopping, e.to_string()),
        NodeError::PermissionDenied(m) => reason::status(Reason::PermissionDenied, m.clone()),
        NodeError::ResourceExhausted(m) => reason::status(Reason::LimitExceeded, m.clone()),
    }
}
