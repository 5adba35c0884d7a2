//! The HTTP admin listener (`--listen-metrics`): `/metrics` in Prometheus
//! text format, `/health` (the process serves) and `/ready` (a member with a
//! known leader, caught up; on the leader, confirmed by a quorum), both
//! usable as Kubernetes probes. Also the gauges and counters that are read
//! off Raft and the state machine rather than measured on a request path.

use crate::node::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use metrics::{counter, gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use openraft::ServerState;
use raftlock_store::machine::{EndReason, Event};
use raftlock_store::state_machine::{Change, SharedState};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// How far (in entries) a follower's applied index may trail its log and
/// still count as ready.
const READY_LAG: u64 = 1_000;

/// Installs the process-wide Prometheus recorder (once) and returns its
/// handle. Without this call the `metrics` macros are no-ops.
pub fn recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Buckets sized for what is measured: sub-millisecond fsyncs and
            // proposals up to multi-second waits.
            let latency = [
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ];
            let sizes = [
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
            ];
            let builder = PrometheusBuilder::new()
                .set_buckets(&latency)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        metrics_exporter_prometheus::Matcher::Suffix("_entries".into()),
                        &sizes,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        metrics_exporter_prometheus::Matcher::Full(
                            "raftlock_lock_queue_position".into(),
                        ),
                        &sizes,
                    )
                })
                .and_then(|b| {
                    // Holds last from milliseconds to hours.
                    b.set_buckets_for_metric(
                        metrics_exporter_prometheus::Matcher::Full(
                            "raftlock_lock_hold_seconds".into(),
                        ),
                        &[
                            0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 14400.0,
                            86400.0,
                        ],
                    )
                });
            let recorder = match builder {
                Ok(b) => b.build_recorder(),
                Err(_) => PrometheusBuilder::new().build_recorder(),
            };
            let handle = recorder.handle();
            // Another recorder may already be installed (tests embedding a
            // node); the handle still renders what this one records.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            gauge!("raftlock_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            // Counters of rare events exist from the start, at 0, so that
            // dashboards and alerts read a series rather than nothing.
            counter!("raftlock_auth_failures_total").increment(0);
            for reason in ["closed", "expired"] {
                counter!("raftlock_sessions_ended_total", "reason" => reason).increment(0);
            }
            for limit in [
                "concurrent requests",
                "open streams (keep-alive and observe)",
            ] {
                counter!("raftlock_limit_refusals_total", "limit" => limit).increment(0);
            }
            handle
        })
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!("raftlock_raft_term", "Current Raft term");
    describe_gauge!("raftlock_raft_is_leader", "1 on the leader, 0 elsewhere");
    describe_gauge!(
        "raftlock_leader_cut_off",
        "1 while this node leads but no quorum has acknowledged it for longer than the leader lease: it refuses requests as unavailable until one does"
    );
    describe_gauge!(
        "raftlock_raft_state",
        "1 for the node's current Raft state (label state)"
    );
    describe_gauge!(
        "raftlock_raft_last_log_index",
        "Index of the last log entry"
    );
    describe_gauge!(
        "raftlock_raft_applied_index",
        "Index of the last applied entry"
    );
    describe_counter!(
        "raftlock_raft_leader_changes_total",
        "Times the known leader changed"
    );
    describe_histogram!(
        "raftlock_proposal_seconds",
        Unit::Seconds,
        "Time from proposing a command to its being applied"
    );
    describe_counter!(
        "raftlock_commit_heartbeats_total",
        "Commit-only heartbeats to followers: sent=with_append (the next append carried the commit) or alone"
    );
    describe_histogram!(
        "raftlock_append_batch_entries",
        Unit::Count,
        "Entries written per log append batch (group commit)"
    );
    describe_histogram!(
        "raftlock_fsync_seconds",
        Unit::Seconds,
        "Duration of one fdatasync of the log"
    );
    describe_gauge!("raftlock_sessions", "Live sessions");
    describe_gauge!("raftlock_locks", "Locks held or waited for");
    describe_gauge!("raftlock_waiters", "Queued acquisitions");
    describe_gauge!(
        "raftlock_recorded_answers",
        "Answers kept for exactly-once retries, over all sessions"
    );
    describe_gauge!(
        "raftlock_waits_registered",
        "Waiting calls this node is answering (its own callers)"
    );
    describe_gauge!(
        "raftlock_runtime_tasks",
        "Tasks alive in this process's async runtime"
    );
    describe_counter!(
        "raftlock_grants_total",
        "Grants applied (direct and handoff)"
    );
    describe_counter!("raftlock_sessions_ended_total", "Sessions ended, by reason");
    describe_histogram!(
        "raftlock_wait_seconds",
        Unit::Seconds,
        "Time a granted acquisition waited in the queue"
    );
    describe_counter!(
        "grpc_server_started_total",
        "gRPC calls started, by grpc_type, grpc_service and grpc_method"
    );
    describe_counter!(
        "grpc_server_handled_total",
        "gRPC calls completed, by grpc_type, grpc_service, grpc_method and grpc_code (a client that went away counts as Canceled)"
    );
    describe_histogram!(
        "grpc_server_handling_seconds",
        Unit::Seconds,
        "Time from a gRPC call's start to the end of its answer (a stream's whole life)"
    );
    describe_counter!(
        "raftlock_http_requests_total",
        "HTTP/JSON API calls by route and HTTP status"
    );
    describe_gauge!(
        "raftlock_build_info",
        "Always 1; the labels say which build runs (version)"
    );
    describe_histogram!(
        "raftlock_lock_hold_seconds",
        Unit::Seconds,
        "How long a grant was held, from its grant to its release (or its session's end)"
    );
    describe_gauge!(
        "raftlock_lock_oldest_hold_seconds",
        Unit::Seconds,
        "Age of the oldest grant held now (0 when none)"
    );
    describe_histogram!(
        "raftlock_lock_queue_position",
        Unit::Count,
        "Place in its lock's queue of each acquisition that had to wait (1 = first in line)"
    );
    describe_gauge!(
        "raftlock_no_space_alarm",
        Unit::Count,
        "1 while the data dir is below its free-space reserve (the leader then refuses new sessions, acquires and takes with NO_SPACE)"
    );
    describe_gauge!(
        "raftlock_data_dir_free_bytes",
        Unit::Bytes,
        "Space left for unprivileged writes on the data dir's file system"
    );
    describe_gauge!(
        "raftlock_data_dir_size_bytes",
        Unit::Bytes,
        "Size of the data dir's file system"
    );
    describe_gauge!(
        "raftlock_tls_cert_expiry_timestamp_seconds",
        Unit::Seconds,
        "When the certificate served on a port (label port: client, peer) expires, Unix seconds"
    );
    describe_counter!(
        "raftlock_reloads_total",
        "Certificate and auth file reloads, by what (auth, client_tls) and result (ok, refused)"
    );
    describe_counter!(
        "raftlock_grpc_requests_total",
        "Client gRPC requests by method and status code (a call on a Lock/Pipeline stream counts under its own method)"
    );
    describe_histogram!(
        "raftlock_snapshot_build_seconds",
        Unit::Seconds,
        "Time to build a snapshot: serialize the state, write and fsync it"
    );
    describe_gauge!(
        "raftlock_snapshot_build_last_seconds",
        Unit::Seconds,
        "Time the last snapshot build took"
    );
    describe_gauge!(
        "raftlock_snapshot_bytes",
        Unit::Bytes,
        "Size of the last snapshot written or loaded"
    );
    describe_gauge!(
        "raftlock_snapshot_index",
        "Log index the last snapshot covers"
    );
    describe_gauge!(
        "raftlock_snapshot_load_seconds",
        Unit::Seconds,
        "Time this process spent loading its snapshot at start"
    );
}

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
pub async fn track(node: Arc<Node>, waits: Arc<crate::locks::waits::Waits>) {
    let mut raft = node.raft.metrics();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut leader = None;
    let holds = Arc::new(Mutex::new(Holds::default()));
    lock(&holds).reload(&node.state);
    count_applied(&node.state, holds.clone());
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
                    let state = node.state.read();
                    (state.machine.counts(), state.machine.recorded_answers())
                };
                gauge!("raftlock_sessions").set(sessions as f64);
                gauge!("raftlock_locks").set(locks as f64);
                gauge!("raftlock_waiters").set(waiters as f64);
                gauge!("raftlock_recorded_answers").set(answers as f64);
                gauge!("raftlock_waits_registered").set(waits.len() as f64);
                gauge!("raftlock_runtime_tasks")
                    .set(tokio::runtime::Handle::current().metrics().num_alive_tasks() as f64);
                let oldest = lock(&holds).oldest_age_seconds();
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
        let mut holds = lock(&holds);
        for c in batch {
            match c {
                Change::Applied { outcome, .. } => {
                    for e in &outcome.events {
                        match e {
                            Event::Granted(g) => {
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

fn lock(holds: &Mutex<Holds>) -> std::sync::MutexGuard<'_, Holds> {
    holds.lock().unwrap_or_else(|p| p.into_inner())
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
            let held_ms = crate::batch::now_ms().saturating_sub(at_ms);
            self.hold_seconds.record(held_ms as f64 / 1000.0);
        }
    }

    /// Of the hold granted first in log order: with leaders' wall clocks
    /// apart, not always the smallest grant time, but the hold that has
    /// been held longest.
    fn oldest_age_seconds(&self) -> f64 {
        self.by_token.first_key_value().map_or(0.0, |(_, at_ms)| {
            crate::batch::now_ms().saturating_sub(*at_ms) as f64 / 1000.0
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
    node: Arc<Node>,
    handle: PrometheusHandle,
}

/// Serves the admin endpoints on `listener` until `stop`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    node: Arc<Node>,
    handle: PrometheusHandle,
    ui: crate::ui::Ui,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let inspector = Router::new()
        .route("/ui", get(crate::ui::page))
        .route("/ui/state", get(crate::ui::state))
        .with_state(ui);
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/health", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .with_state(AdminState { node, handle })
        .merge(inspector);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

async fn metrics_text(State(s): State<AdminState>) -> String {
    let mut text = s.handle.render();
    limit_series(&s.node.state.read().machine, &mut text);
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
    let m = s.node.raft.metrics().borrow().clone();
    let member = m
        .membership_config
        .membership()
        .get_node(&s.node.id)
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
    if leader == s.node.id {
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
