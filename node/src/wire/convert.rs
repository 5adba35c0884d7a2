//! Protobuf ⇄ lock-service conversions, each request parsed once (with
//! `TryFrom`) and each answer built once, for gRPC and HTTP alike.

use crate::error::NodeError;
use crate::locks::rates::LimitView;
use crate::locks::watch::Watched;
use crate::locks::{
    Acquire, Campaign, CreateSession, Description, ListPage, ListQuery, Proclaim, Release, Resign,
    Resize, Sequence, SessionPage, SessionQuery, SessionView, Take, Taken,
};
use raftlock_proto::limits;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{
    Grant, LimitSpec, LockSummary, Mode, Origin, RequestId, Terms, Waiter,
};
use std::time::Duration;

/// A session as the API shows it.
pub fn session_info(v: &SessionView) -> pb::SessionInfo {
    let s = &v.session;
    pb::SessionInfo {
        session_id: s.id,
        client_name: s.client_name.clone(),
        identity: s.owner.clone(),
        host: v.origin.host.clone(),
        pid: v.origin.pid,
        created_at_ms: s.created_at_ms,
        ttl_ms: s.ttl_ms,
        expires_in_ms: v.expires_in.as_millis() as u64,
        held: s.held.keys().cloned().collect(),
        waiting: s.waiting.keys().cloned().collect(),
    }
}

/// A description as the API shows it.
pub fn describe_response(name: String, d: &Description) -> pb::DescribeResponse {
    pb::DescribeResponse {
        name,
        permits: d.view.permits.unwrap_or(0),
        holders: d.view.holders.iter().map(grant).collect(),
        waiters: d.view.waiters.iter().map(waiter).collect(),
        applied_index: d.applied_index,
        sessions: d.sessions.iter().map(session_info).collect(),
        lock_delay_ms: d.view.lock_delay_ms.unwrap_or(0),
        resized: d.resized,
    }
}

/// A watched command as the API shows it.
pub fn watch_response(w: &Watched) -> pb::WatchResponse {
    use crate::locks::watch::LockEventKind as K;
    pb::WatchResponse {
        index: w.index,
        at_ms: w.at_ms,
        events: w
            .events
            .iter()
            .map(|e| pb::LockEvent {
                kind: match e.kind {
                    K::Granted => pb::LockEventKind::Granted,
                    K::Handoff => pb::LockEventKind::Handoff,
                    K::Released => pb::LockEventKind::Released,
                    K::Expired => pb::LockEventKind::Expired,
                    K::ForceReleased => pb::LockEventKind::ForceReleased,
                    K::HoldExpired => pb::LockEventKind::HoldExpired,
                    K::LockDelayStarted => pb::LockEventKind::LockDelayStarted,
                    K::LockDelayEnded => pb::LockEventKind::LockDelayEnded,
                } as i32,
                name: e.name.clone(),
                session_id: e.session,
                token: e.token,
                mode: mode_to_pb(e.mode) as i32,
                metadata: e.metadata.clone(),
                count: e.count,
                lock_delay_ms: e.lock_delay_ms,
            })
            .collect(),
    }
}

/// A page of sessions as the API shows it.
pub fn sessions_response(p: &SessionPage) -> pb::ListSessionsResponse {
    pb::ListSessionsResponse {
        sessions: p.sessions.iter().map(session_info).collect(),
        next_page_token: p.next_page_token,
    }
}

impl From<pb::ListSessionsRequest> for SessionQuery {
    fn from(r: pb::ListSessionsRequest) -> Self {
        SessionQuery {
            client_name_prefix: r.client_name_prefix,
            after: r.page_token,
            limit: r.limit,
        }
    }
}

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

fn mode_to_pb(m: Mode) -> pb::LockMode {
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

/// Reads an acquisition's exactly-once fields: `None` when the client does
/// not number its requests (`seq` 0).
pub fn sequence(
    seq: u64,
    acked_below: u64,
    in_flight: Vec<u64>,
) -> Result<Option<Sequence>, NodeError> {
    if seq == 0 {
        if acked_below != 0 || !in_flight.is_empty() {
            return Err(NodeError::InvalidArgument(
                "acked_below or in_flight is set but seq is not: number the request too".into(),
            ));
        }
        return Ok(None);
    }
    if in_flight.len() > raftlock_proto::limits::MAX_IN_FLIGHT_LISTED {
        return Err(NodeError::InvalidArgument(format!(
            "in_flight lists {} sequence numbers; at most {} (the lowest ones)",
            in_flight.len(),
            raftlock_proto::limits::MAX_IN_FLIGHT_LISTED
        )));
    }
    if acked_below > seq {
        return Err(NodeError::InvalidArgument(format!(
            "acked_below {acked_below} is above the request's own seq {seq}, which still waits for its answer"
        )));
    }
    Ok(Some(Sequence {
        seq,
        acked_below,
        in_flight,
    }))
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

impl TryFrom<pb::AcquireRequest> for Acquire {
    type Error = NodeError;
    fn try_from(r: pb::AcquireRequest) -> Result<Self, NodeError> {
        Ok(Acquire {
            request_id: request_id(&r.request_id)?,
            mode: mode(r.mode)?,
            permits: (r.permits > 0).then_some(r.permits),
            wait: r.wait_timeout_ms.map(Duration::from_millis),
            sequence: sequence(r.seq, r.acked_below, r.in_flight)?,
            terms: Terms {
                count: r.count.max(1),
                max_hold_ms: r.max_hold_ms,
                lock_delay_ms: r.lock_delay_ms,
            },
            session: r.session_id,
            name: r.name,
            metadata: r.metadata,
        })
    }
}

impl From<pb::ReleaseRequest> for Release {
    fn from(r: pb::ReleaseRequest) -> Self {
        Release {
            session: r.session_id,
            name: r.name,
            token: r.token,
        }
    }
}

impl From<pb::ResignRequest> for Resign {
    fn from(r: pb::ResignRequest) -> Self {
        Resign {
            session: r.session_id,
            name: r.name,
            token: r.token,
        }
    }
}

impl TryFrom<pb::CreateSessionRequest> for CreateSession {
    type Error = NodeError;
    fn try_from(r: pb::CreateSessionRequest) -> Result<Self, NodeError> {
        Ok(CreateSession {
            ttl_ms: r.ttl_ms,
            creation_key: creation_key(&r.creation_key)?,
            client_name: r.client_name,
            origin: Origin {
                host: r.host,
                pid: r.pid,
            },
        })
    }
}

impl TryFrom<pb::CampaignRequest> for Campaign {
    type Error = NodeError;
    fn try_from(r: pb::CampaignRequest) -> Result<Self, NodeError> {
        Ok(Campaign {
            request_id: request_id(&r.request_id)?,
            wait: r.wait_timeout_ms.map(Duration::from_millis),
            sequence: sequence(r.seq, r.acked_below, r.in_flight)?,
            session: r.session_id,
            name: r.name,
            value: r.value,
        })
    }
}

impl From<pb::ProclaimRequest> for Proclaim {
    fn from(r: pb::ProclaimRequest) -> Self {
        Proclaim {
            session: r.session_id,
            name: r.name,
            token: r.token,
            value: r.value,
        }
    }
}

impl From<pb::ListRequest> for ListQuery {
    fn from(r: pb::ListRequest) -> Self {
        ListQuery {
            prefix: r.prefix,
            page_token: r.page_token,
            limit: r.limit,
        }
    }
}

/// A lock summary as `list` shows it, with its holders' sessions.
pub fn summary(l: &LockSummary, page: &ListPage) -> pb::LockSummary {
    pb::LockSummary {
        name: l.name.clone(),
        holders: l.holders.iter().map(grant).collect(),
        waiters: l.waiters as u32,
        sessions: l
            .holders
            .iter()
            .filter_map(|h| page.sessions.get(&h.session))
            .map(session_info)
            .collect(),
        lock_delay_ms: l.lock_delay_ms.unwrap_or(0),
        permits: l.permits.unwrap_or(0),
        resized: l.resized,
    }
}

impl From<pb::ResizeRequest> for Resize {
    fn from(r: pb::ResizeRequest) -> Self {
        Resize {
            name: r.name,
            permits: r.permits,
        }
    }
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

impl From<pb::TakeRequest> for Take {
    fn from(r: pb::TakeRequest) -> Self {
        Take {
            n: r.n.max(1),
            spec: r.limit.as_ref().map(spec),
            wait: r.wait_timeout_ms.map(Duration::from_millis),
            lease_ms: r.lease_ms,
            name: r.name,
        }
    }
}

/// A take's answer as the API shows it.
pub fn take_response(t: &Taken) -> pb::TakeResponse {
    pb::TakeResponse {
        admitted: t.admitted,
        n: t.n,
        remaining: t.remaining,
        retry_after_ms: t.retry_after.as_nanos().div_ceil(1_000_000) as u64,
        lease_id: t.lease.unwrap_or(0),
    }
}

/// A limit as the API shows it.
pub fn describe_limit_response(name: String, v: &LimitView) -> pb::DescribeLimitResponse {
    pb::DescribeLimitResponse {
        name,
        limit: Some(spec_to_pb(&v.bucket.spec)),
        available: v.available,
        admitted: v.bucket.admitted,
        refused: v.bucket.refused,
        leases: v.bucket.leases.len() as u32,
        applied_index: v.applied_index,
    }
}

/// The limit a define names, which it must.
pub fn required_spec(s: Option<&pb::LimitSpec>) -> Result<LimitSpec, NodeError> {
    s.map(spec)
        .ok_or_else(|| NodeError::InvalidArgument("limit (rate, per_ms, burst) is required".into()))
}
