//! The inspector page on the admin listener: `/ui` (one HTML file with
//! its script inline, no external assets, so it works offline) and
//! `/ui/state`, the JSON it polls: this node's view of cluster health,
//! locks with holders and waiters, sessions, and the last lock events.
//!
//! Read-only. With authentication on, `/ui/state` wants the same bearer
//! token as the client port, as `Authorization: Bearer` or as the password
//! of HTTP basic auth (what a browser asks for), and shows only the locks
//! and sessions the identity may read.

use crate::auth::{Access, Caller, SharedAuth};
use crate::locks::Locks;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use openraft::ServerState;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The page.
const PAGE: &str = include_str!("ui.html");

/// Locks and sessions shown at most; the page says when there are more.
const MAX_ROWS: usize = 500;
/// Most locks or sessions one request looks at.
const MAX_SCANNED: usize = 4 * MAX_ROWS;

/// The first [`MAX_ROWS`] items of `all` that `keep`, looking at no more
/// than [`MAX_SCANNED`]; and whether any were left unshown or unseen.
fn first_page<T>(all: impl Iterator<Item = T>, keep: impl Fn(&T) -> bool) -> (Vec<T>, bool) {
    let mut rows = Vec::new();
    let mut all = all.fuse();
    for item in all.by_ref().take(MAX_SCANNED) {
        if keep(&item) {
            if rows.len() == MAX_ROWS {
                return (rows, true);
            }
            rows.push(item);
        }
    }
    let more = all.next().is_some();
    (rows, more)
}

/// Lock events shown.
const RECENT_EVENTS: usize = 50;

/// What the UI handlers need.
#[derive(Clone)]
pub struct Ui {
    /// The lock service of this node.
    pub locks: Locks,
    /// The node's Raft view (role, log, members).
    pub node: crate::raft::admin::Admin,
    /// The client port's authenticator.
    pub auth: SharedAuth,
}

/// `GET /ui`. With auth on, the page itself asks for the token, so that
/// the browser prompts once and sends it with every `/ui/state` after.
pub async fn page(State(ui): State<Ui>, headers: HeaderMap) -> Response {
    if let Err(r) = caller(&ui, &headers) {
        return *r;
    }
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            // The page loads nothing from elsewhere, and nothing may frame it.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'",
                ),
            ),
        ],
        PAGE,
    )
        .into_response()
}

/// `/ui/state?prefix=P`.
#[derive(Deserialize)]
pub struct StateQuery {
    #[serde(default)]
    prefix: String,
}

#[derive(Serialize)]
struct View {
    now_ms: u64,
    node: NodeView,
    members: Vec<MemberView>,
    prefix: String,
    locks: Vec<LockRow>,
    /// More locks under the prefix than shown, or some not looked at.
    locks_more: bool,
    sessions: Vec<SessionRow>,
    /// More sessions than shown, or some not looked at.
    sessions_more: bool,
    events: Vec<EventRow>,
}

#[derive(Serialize)]
struct NodeView {
    id: u64,
    role: String,
    term: u64,
    leader_id: Option<u64>,
    commit_index: u64,
    applied_index: u64,
    last_log_index: u64,
}

#[derive(Serialize)]
struct MemberView {
    id: u64,
    client_addr: String,
    voter: bool,
    /// Log index the leader knows this member holds (only on the leader).
    matched: Option<u64>,
    lag: Option<u64>,
}

#[derive(Serialize)]
struct LockRow {
    name: String,
    permits: Option<u32>,
    holders: Vec<HolderRow>,
    waiters: Vec<WaiterRow>,
    /// The lock-delay in force, ms.
    lock_delay_ms: Option<u64>,
}

#[derive(Serialize)]
struct HolderRow {
    session: u64,
    token: u64,
    mode: String,
    granted_at_ms: u64,
    who: String,
    metadata: String,
    /// Permits taken.
    count: u32,
    /// Hold cap, ms (0: none).
    max_hold_ms: u64,
}

#[derive(Serialize)]
struct WaiterRow {
    session: u64,
    mode: String,
    enqueued_at_ms: u64,
    timeout_ms: u64,
    who: String,
}

#[derive(Serialize)]
struct SessionRow {
    id: u64,
    client_name: String,
    identity: String,
    host: String,
    pid: u32,
    created_at_ms: u64,
    ttl_ms: u64,
    /// Time left on this node's lease clock (only on the leader).
    expires_in_ms: Option<u64>,
    held: Vec<String>,
    waiting: Vec<String>,
}

#[derive(Serialize)]
struct EventRow {
    index: u64,
    at_ms: u64,
    kind: String,
    name: String,
    session: u64,
    token: u64,
}

/// The caller the request's credentials name: the client port's bearer
/// token, given as a bearer or as a basic-auth password.
fn caller(ui: &Ui, headers: &HeaderMap) -> Result<Arc<Caller>, Box<Response>> {
    let mut req = tonic::Request::new(());
    if let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let bearer = match value.strip_prefix("Basic ") {
            Some(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
                .and_then(|raw| String::from_utf8(raw).ok())
                .and_then(|pair| pair.split_once(':').map(|(_, token)| token.to_owned()))
                .map(|token| format!("Bearer {token}")),
            None => Some(value.to_owned()),
        };
        if let Some(v) = bearer.and_then(|b| b.parse().ok()) {
            req.metadata_mut().insert("authorization", v);
        }
    }
    ui.auth.load().authenticate(&req).map_err(|s| {
        metrics::counter!("raftlock_auth_failures_total").increment(1);
        Box::new(
            (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(
                    "Basic realm=\"raftlock (any user name; the password is your bearer token)\"",
                ),
            )],
            format!("{}\n", s.message()),
        )
            .into_response(),
        )
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn mode(m: raftlock_store::machine::Mode) -> String {
    format!("{m:?}").to_lowercase()
}

/// `GET /ui/state`.
pub async fn state(
    State(ui): State<Ui>,
    headers: HeaderMap,
    Query(q): Query<StateQuery>,
) -> Response {
    let caller = match caller(&ui, &headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    if !caller.may_any(Access::Read) {
        return (StatusCode::FORBIDDEN, "this identity may read no lock\n").into_response();
    }
    let node = &ui.node;
    let commit_index = node.committed_index().await.unwrap_or(0);
    let m = node.metrics().borrow().clone();
    let leading = m.state == ServerState::Leader;
    let last_log_index = m.last_log_index.unwrap_or(0);
    let membership = m.membership_config.membership();
    let members = membership
        .nodes()
        .map(|(id, info)| {
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(id))
                .map(|l| l.map_or(0, |l| l.index));
            MemberView {
                id: *id,
                client_addr: info.client_addr.clone(),
                voter: membership.voter_ids().any(|v| v == *id),
                matched,
                lag: matched.map(|i| last_log_index.saturating_sub(i)),
            }
        })
        .collect();
    let view = {
        let state = node.state().read();
        let machine = &state.machine;
        let who = |session: u64| -> String {
            let Some(s) = machine.session(session) else {
                return format!("session {session}");
            };
            let origin = machine.origin(session).cloned().unwrap_or_default();
            let mut out = if s.client_name.is_empty() {
                format!("session {session}")
            } else {
                s.client_name.clone()
            };
            if !s.owner.is_empty() {
                out += &format!(" ({})", s.owner);
            }
            if !origin.host.is_empty() {
                out += &format!(" on {}", origin.host);
            }
            if origin.pid != 0 {
                out += &format!(" pid {}", origin.pid);
            }
            out
        };
        // A page, not the table: the applied state is held for this read,
        // and applies wait behind it, so at most MAX_SCANNED names are
        // looked at, from the prefix on, for at most MAX_ROWS rows.
        let (readable, locks_more) = first_page(machine.locks_under(&q.prefix), |(name, _)| {
            caller.may(Access::Read, name)
        });
        let locks = readable
            .into_iter()
            .map(|(name, l)| LockRow {
                name: name.to_owned(),
                permits: l.permits,
                holders: l
                    .holders
                    .iter()
                    .map(|g| HolderRow {
                        session: g.session,
                        token: g.token,
                        mode: mode(g.mode),
                        granted_at_ms: g.granted_at_ms,
                        who: who(g.session),
                        metadata: match std::str::from_utf8(&g.metadata) {
                            Ok(text) => text.to_owned(),
                            Err(_) => format!("({} bytes, not UTF-8)", g.metadata.len()),
                        },
                        count: g.terms.count,
                        max_hold_ms: g.terms.max_hold_ms,
                    })
                    .collect(),
                waiters: l
                    .waiters
                    .iter()
                    .map(|w| WaiterRow {
                        session: w.session,
                        mode: mode(w.mode),
                        enqueued_at_ms: w.enqueued_at_ms,
                        timeout_ms: w.timeout_ms,
                        who: who(w.session),
                    })
                    .collect(),
                lock_delay_ms: machine.lock_delay(name),
            })
            .collect();
        // An identity sees every session if it may read every lock, else
        // its own, as Session.List does.
        let everyone = !caller.checks_ownership() || caller.may(Access::Read, "");
        let (visible, sessions_more) =
            first_page(machine.sessions(), |s| everyone || s.owner == caller.name());
        let sessions = visible
            .into_iter()
            .map(|s| {
                let origin = machine.origin(s.id).cloned().unwrap_or_default();
                SessionRow {
                    id: s.id,
                    client_name: s.client_name.clone(),
                    identity: s.owner.clone(),
                    host: origin.host,
                    pid: origin.pid,
                    created_at_ms: s.created_at_ms,
                    ttl_ms: s.ttl_ms,
                    expires_in_ms: leading
                        .then(|| ui.locks.session_time_left(s.id))
                        .flatten()
                        .map(|d| d.as_millis() as u64),
                    held: s.held.keys().cloned().collect(),
                    waiting: s.waiting.keys().cloned().collect(),
                }
            })
            .collect();
        View {
            now_ms: now_ms(),
            node: NodeView {
                id: node.id(),
                role: format!("{:?}", m.state),
                term: m.current_term,
                leader_id: m.current_leader,
                commit_index,
                applied_index: state.last_applied.map_or(0, |l| l.index),
                last_log_index,
            },
            members,
            prefix: q.prefix.clone(),
            locks,
            locks_more,
            sessions,
            sessions_more,
            events: Vec::new(),
        }
    };
    let mut view = view;
    view.events = ui
        .locks
        .recent_events(RECENT_EVENTS)
        .iter()
        .rev()
        .filter_map(|w| w.visible(&q.prefix, &caller))
        .flat_map(|w| {
            w.events.into_iter().map(move |e| EventRow {
                index: w.index,
                at_ms: w.at_ms,
                kind: format!("{:?}", e.kind).to_lowercase(),
                name: e.name,
                session: e.session,
                token: e.token,
            })
        })
        .collect();
    match serde_json::to_vec(&view) {
        Ok(body) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
