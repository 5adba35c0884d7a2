//! The Grafana dashboard (`deploy/grafana/raftlock.json`) and the alert
//! rules (`deploy/prometheus/raftlock-alerts.yaml`) name only metrics a live
//! node exports: a renamed metric breaks this test, not a dashboard nobody
//! looks at until an incident.

use raftlock_tests::{http_call, http_get, raw, Cluster};
use std::collections::BTreeSet;
use std::time::Duration;

/// The metric names (`raftlock_*`, `grpc_*`) a PromQL text mentions, not
/// its label names (in `by (...)`, `without (...)` and matchers).
fn metric_names(promql: &str) -> BTreeSet<String> {
    let mut text = promql.to_owned();
    for clause in ["by (", "without ("] {
        while let Some(start) = text.find(clause) {
            let end = text[start..]
                .find(')')
                .map_or(text.len(), |e| start + e + 1);
            text.replace_range(start..end, " ");
        }
    }
    let promql = text.as_str();
    let mut out = BTreeSet::new();
    let mut word = String::new();
    for c in promql.chars().chain([' ']) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        if (word.starts_with("raftlock_") || word.starts_with("grpc_")) && c != '=' && c != '~' {
            out.insert(word.clone());
        }
        word.clear();
    }
    out
}

/// The series names a `/metrics` exposition has, histograms by their
/// `_bucket`, `_sum` and `_count` series.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

fn workspace_file(path: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(path),
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_name_finder_reads_promql() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, grpc_method) (rate(raftlock_fsync_seconds_bucket{job="raftlock",grpc_type="unary"}[5m]))) / grpc_server_handled_total"#,
    );
    assert_eq!(
        names,
        ["grpc_server_handled_total", "raftlock_fsync_seconds_bucket"]
            .map(String::from)
            .into()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_dashboard_and_alerts_query_is_exported() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    // Load that makes every histogram observe something: a hold, a wait in
    // the queue, gRPC and HTTP calls.
    let client = cluster.client().await;
    let (a, b) = (
        client.session(Duration::from_secs(10)).await.unwrap(),
        client.session(Duration::from_secs(10)).await.unwrap(),
    );
    let held = a.lock("dash/x").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        let g = b
            .lock("dash/x")
            .timeout(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        g.release().await.unwrap();
    });
    // Queued for real, so the queue's metrics exist.
    let leader_addr = cluster.node(leader).client_addr.clone();
    raw::wait_for_waiters(&leader_addr, "dash/x", 1).await;
    held.release().await.unwrap();
    waiter.await.unwrap();
    let status = http_call(
        &cluster.node(leader).client_addr,
        "GET",
        "/v1/cluster/status",
        &[],
        "",
    )
    .await
    .unwrap();
    assert_eq!(status.status, 200);
    // Gauges refresh every second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let metrics_addr = cluster
        .node(leader)
        .metrics_addr
        .clone()
        .expect("a metrics listener");
    let (code, text) = http_get(&metrics_addr, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    let have = exported(&text);

    let dashboard: serde_json::Value =
        serde_json::from_str(&workspace_file("deploy/grafana/raftlock.json")).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().expect("targets") {
            queries.push((
                format!(
                    "dashboard panel {:?}",
                    panel["title"].as_str().unwrap_or("?")
                ),
                t["expr"].as_str().expect("expr").to_owned(),
            ));
        }
    }
    for line in workspace_file("deploy/prometheus/raftlock-alerts.yaml").lines() {
        if let Some(expr) = line.trim().strip_prefix("expr:") {
            queries.push(("alert rule".into(), expr.trim().to_owned()));
        }
    }
    assert!(queries.len() > 20, "found the queries: {queries:?}");
    let mut missing = Vec::new();
    for (place, q) in &queries {
        for name in metric_names(q) {
            // The certificate gauge exists only on a node serving TLS.
            if name == "raftlock_tls_cert_expiry_timestamp_seconds" {
                continue;
            }
            if !have.contains(&name) {
                missing.push(format!("{place}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "queried but not exported by a live node:\n{}\n\nexported:\n{}",
        missing.join("\n"),
        have.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}
