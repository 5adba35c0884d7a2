//! Protobuf forms of what the lock service reads: sessions, descriptions,
//! lists, watches and limits.

use crate::locks::rates::LimitView;
use crate::locks::watch::Watched;
use crate::locks::{Description, ListPage, ListQuery, SessionPage, SessionQuery, SessionView};
use crate::messages::{grant, mode_to_pb, spec_to_pb, waiter};
use raftlock_proto::v1 as pb;
use raftlock_store::machine::LockSummary;

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
