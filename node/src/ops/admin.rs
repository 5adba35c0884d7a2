//! The HTTP admin listener (`--listen-metrics`): `/metrics` in Prometheus
//! text format, `/health` (the process serves) and `/ready` (a member with a
//! known leader, caught up; on the leader, confirmed by a quorum), both
//! usable as Kubernetes probes. Also the gauges and counters that are read
//! off Raft and the state machine rather than measured on a request path.

use crate::raft::admin::Admin;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use metrics::{counter, gauge};
use metrics_exporter_prometheus::PrometheusHandle;
use openraft::ServerState;
use parking_lot::Mutex;
use raftlock_store::machine::{EndReason, Event};
use raftlock_store::state_machine::{Change, SharedState};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How far (in entries) a follower's applied index may trail its log and
/// still count as ready.
const READY_LAG: u64 = 1_000;

/// The `state` label of `raftlock_raft_state` for each Raft role.
const RAFT_STATES: [(ServerState, &str); 4] = [
    (ServerState::Leader, "leader"),
    (ServerState::Follower, "follower"),
    (ServerState::Candidate, "candidate"),
    (ServerState::Learner, "learner"),
];

/// How often, at most, the Raft gauges are updated.
const METRICS_EVERY: Duration = Duration::from_millis(50);

/// Keeps the Raft and state-machine gauges current, and counts grants and
/// session ends as entries are applied. Runs until the Raft stops.
pub async fn track(node: Admin, waits: Arc<crate::locks::waits::Waits>) {
    let mut raft = node.metrics();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut leader = None;
    let holds = Arc::new(Mutex::new(Holds::default()));
    holds.lock().reload(node.state());
    count_applied(node.state(), holds.clone());
    // Handles made once: Raft's metrics change several times per entry, and
    // each `gauge!` with a name looks the series up in the registry.
    let term = gauge!("raftlock_raft_term");
    let is_leader = gauge!("raftlock_raft_is_leader");
    let states = RAFT_STATES.map(|(s, name)| (s, gauge!("raftlock_raft_state", "state" => name)));
    let last_log = gauge!("raftlock_raft_last_log_index");
    let applied = gauge!("raftlock_raft_applied_index");
    let leader_changes = counter!("raftlock_raft_leader_changes_total");
    loop {
        tokio::select! {
            r = raft.changed() => {
                if r.is_err() {
                    return;
                }
                {
                    // Read in place: no clone of openraft's metrics on this path.
                    let m = raft.borrow_and_update();
                    term.set(m.current_term as f64);
                    is_leader.set(f64::from(u8::from(m.state == ServerState::Leader)));
                    for (s, gauge) in &states {
                        gauge.set(f64::from(u8::from(m.state == *s)));
                    }
                    last_log.set(m.last_log_index.unwrap_or(0) as f64);
                    applied.set(m.last_applied.map(|l| l.index).unwrap_or(0) as f64);
                    if m.current_leader != leader {
                        if m.current_leader.is_some() {
                            leader_changes.increment(1);
                        }
                        leader = m.current_leader;
                    }
                }
                // Raft's metrics change several times per entry, and a
                // scrape reads them every few seconds: look again in a
                // while, at whatever they are then. An election takes at
                // least an election timeout, longer than this, so no
                // change of leader is missed.
                tokio::time::sleep(METRICS_EVERY).await;
            }
            _ = tick.tick() => {
                let ((sessions, locks, waiters), answers) = {
                    let state = node.state().read();
                    (state.machine.counts(), state.machine.recorded_answers())
                };
                gauge!("raftlock_sessions").set(sessions as f64);
                gauge!("raftlock_locks").set(locks as f64);
                gauge!("raftlock_waiters").set(waiters as f64);
                gauge!("raftlock_recorded_answers").set(answers as f64);
                gauge!("raftlock_waits_registered").set(waits.len() as f64);
                gauge!("raftlock_runtime_tasks")
                    .set(tokio::runtime::Handle::current().metrics().num_alive_tasks() as f64);
                let oldest = holds.lock().oldest_age_seconds();
                gauge!("raftlock_lock_oldest_hold_seconds").set(oldest);
            }
        }
    }
}

/// Counts grants and session ends, and keeps `holds` current, as entries
/// are applied: an observer of the applied state, so no task wakes for it.
fn count_applied(state: &Arc<SharedState>, holds: Arc<Mutex<Holds>>) {
    let grants = counter!("raftlock_grants_total");
    let closed = counter!("raftlock_sessions_ended_total", "reason" => "closed");
    let expired = counter!("raftlock_sessions_ended_total", "reason" => "expired");
    // Weak: the state owns its observers.
    let weak = Arc::downgrade(state);
    state.observe(move |batch| {
        let mut holds = holds.lock();
        for c in batch {
            match c {
                Change::Applied { outcome, .. } => {
                    for e in &outcome.events {
                        match e {
                            Event::Granted(g) | Event::HandedOver(g) => {
                                grants.increment(1);
                                holds.granted(g.token, g.granted_at_ms);
                            }
                            Event::Released { token, .. } => holds.released(*token),
                            Event::SessionEnded { reason, .. } => match reason {
                                EndReason::Closed => closed.increment(1),
                                EndReason::Expired => expired.increment(1),
                            },
                            _ => {}
                        }
                    }
                }
                Change::Restored => {
                    if let Some(state) = weak.upgrade() {
                        holds.reload(&state);
                    }
                }
            }
        }
    });
}

/// The grants held now, by token, with when each was granted: for the
/// hold-time histogram and the age of the oldest hold. One map, ordered by
/// token: tokens grow with the log, so the smallest is the hold granted
/// first, and a second index by grant time (as this kept before) cost
/// about 35 MB per million held locks on every node.
struct Holds {
    by_token: std::collections::BTreeMap<u64, u64>,
    hold_seconds: metrics::Histogram,
}

impl Default for Holds {
    fn default() -> Holds {
        Holds {
            by_token: Default::default(),
            hold_seconds: metrics::histogram!("raftlock_lock_hold_seconds"),
        }
    }
}

impl Holds {
    fn granted(&mut self, token: u64, at_ms: u64) {
        self.by_token.entry(token).or_insert(at_ms);
    }

    fn released(&mut self, token: u64) {
        if let Some(at_ms) = self.by_token.remove(&token) {
            let held_ms = crate::raft::batch::now_ms().saturating_sub(at_ms);
            self.hold_seconds.record(held_ms as f64 / 1000.0);
        }
    }

    /// Of the hold granted first in log order: with leaders' wall clocks
    /// apart, not always the smallest grant time, but the hold that has
    /// been held longest.
    fn oldest_age_seconds(&self) -> f64 {
        self.by_token.first_key_value().map_or(0.0, |(_, at_ms)| {
            crate::raft::batch::now_ms().saturating_sub(*at_ms) as f64 / 1000.0
        })
    }

    /// Starts over from the applied state (at start, after a snapshot is
    /// installed, or when events were missed).
    fn reload(&mut self, state: &SharedState) {
        self.by_token.clear();
        let state = state.read();
        // In place: listing would copy every grant, metadata and all.
        for (_, lock) in state.machine.locks() {
            for g in &lock.holders {
                self.granted(g.token, g.granted_at_ms);
            }
        }
    }
}

#[derive(Clone)]
struct AdminState {
    node: Admin,
    handle: PrometheusHandle,
}

/// Serves the admin endpoints on `listener` until `stop`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    node: Admin,
    handle: PrometheusHandle,
    ui: crate::ops::ui::Ui,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let inspector = Router::new()
        .route("/ui", get(crate::ops::ui::page))
        .route("/ui/state", get(crate::ops::ui::state))
        .with_state(ui);
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(AdminState { node, handle })
        .merge(inspector);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

/// The process serves and its Raft core runs. A core stopped by a storage
/// error leaves the process up but the node useless: it must fail the
/// probe so that Kubernetes or systemd restarts it (the process also exits
/// on it, `RunningNode::run_until`; this covers the moments between).
async fn health(State(s): State<AdminState>) -> (StatusCode, String) {
    match s.node.core_stopped() {
        None => (StatusCode::OK, "ok\n".into()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("raft core stopped: {why}\n"),
        ),
    }
}

async fn metrics_text(State(s): State<AdminState>) -> String {
    let mut text = s.handle.render();
    limit_series(&s.node.state().read().machine, &mut text);
    text
}

/// Most rate limits given series of their own; the rest are summed under
/// `limit="_other"`, so a cluster with many limits keeps a bounded label set.
pub const LIMIT_SERIES: usize = 100;

/// Per-limit counts as of the applied state, appended to a scrape: each
/// limit's tokens admitted and takes refused since it was defined (the same
/// on every node). Read at scrape time, so a deleted limit's series is gone
/// from the next scrape, and the first `LIMIT_SERIES` names (in name order)
/// get series of their own.
fn limit_series(machine: &raftlock_store::machine::LeaseMachine, out: &mut String) {
    use std::fmt::Write;
    let limits = machine.rate_limits();
    let mut own = Vec::new();
    let (mut other_admitted, mut other_refused, mut others) = (0u64, 0u64, 0usize);
    for (name, b) in limits {
        if own.len() < LIMIT_SERIES {
            own.push((name, b.admitted, b.refused));
        } else {
            other_admitted = other_admitted.saturating_add(b.admitted);
            other_refused = other_refused.saturating_add(b.refused);
            others += 1;
        }
    }
    let label = |name: &str| {
        name.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    for (metric, help, pick) in [
        (
            "raftlock_ratelimit_limit_admitted_total",
            "Tokens a rate limit admitted since it was defined (replicated state; the same on every node)",
            0,
        ),
        (
            "raftlock_ratelimit_limit_refused_total",
            "Takes a rate limit refused since it was defined (replicated state; the same on every node)",
            1,
        ),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for (name, admitted, refused) in &own {
            let v = if pick == 0 { admitted } else { refused };
            let _ = writeln!(out, "{metric}{{limit=\"{}\"}} {v}", label(name));
        }
        if others > 0 {
            let v = if pick == 0 { other_admitted } else { other_refused };
            let _ = writeln!(out, "{metric}{{limit=\"_other\"}} {v}");
        }
    }
}

/// Ready: this node is a member of a cluster with a known leader and has
/// applied what it has; the leader itself must also have a quorum confirm
/// it still leads, so a leader cut off from the others is not ready.
async fn ready(State(s): State<AdminState>) -> (StatusCode, String) {
    let m = s.node.metrics().borrow().clone();
    let member = m
        .membership_config
        .membership()
        .get_node(&s.node.id())
        .is_some();
    if !member {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not a member of the cluster\n".into(),
        );
    }
    let Some(leader) = m.current_leader else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no known leader\n".into());
    };
    let applied = m.last_applied.map(|l| l.index).unwrap_or(0);
    let last = m.last_log_index.unwrap_or(0);
    if applied + READY_LAG < last {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("catching up: applied {applied} of {last}\n"),
        );
    }
    if leader == s.node.id() {
        match tokio::time::timeout(Duration::from_secs(2), s.node.linearizable()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("leader without quorum: {e}\n"),
                )
            }
            Err(_) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "leader without quorum: no confirmation within 2s\n".into(),
                )
            }
        }
    } else if m.state != ServerState::Follower && m.state != ServerState::Learner {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{:?}, not following\n", m.state),
        );
    }
    (
        StatusCode::OK,
        format!("ready: leader {leader}, applied {applied}\n"),
    )
}
