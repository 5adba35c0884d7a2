//! The process's metrics: the Prometheus recorder every `metrics` macro
//! writes to, and the description (help text and unit) of every series
//! raftlock exports, so `/metrics` documents itself. Series with bounded
//! labels are created at zero here, so a dashboard shows them before the
//! first event.

use metrics::{counter, gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

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
