//! Operations: the admin listener's /metrics, /health and /ready, and
//! gRPC reflection as a client that is not ours sees it.

use raftlock_tests::{http_get, metric, Cluster};
use std::time::{Duration, Instant};

#[tokio::test]
async fn metrics_have_real_values_after_load() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    // Held through the checks: the age of the oldest hold must show it.
    let _held = session
        .lock("metrics/held")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    for i in 0..10 {
        let g = session
            .lock(format!("metrics/{}", i % 3))
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        g.release().await.unwrap();
    }
    let leader = cluster.leader().await.unwrap();
    // Gauges refresh every second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for n in cluster.nodes() {
        let (code, health) = http_get(
            n.metrics_addr.as_deref().expect("a metrics listener"),
            "/health",
        )
        .await
        .unwrap();
        assert_eq!((code, health.trim()), (200, "ok"));
        let (code, text) = http_get(
            n.metrics_addr.as_deref().expect("a metrics listener"),
            "/metrics",
        )
        .await
        .unwrap();
        assert_eq!(code, 200);
        let m = |k: &str| {
            metric(&text, k).unwrap_or_else(|| panic!("node {}: no {k} in\n{text}", n.id))
        };
        assert!(
            m("raftlock_grants_total") >= 10.0,
            "every node applies the grants"
        );
        assert!(m("raftlock_raft_term") >= 1.0);
        assert!(m("raftlock_raft_applied_index") >= 20.0);
        assert!(m("raftlock_fsync_seconds_count") > 0.0);
        assert!(m("raftlock_append_batch_entries_count") > 0.0);
        assert_eq!(m("raftlock_sessions"), 1.0);
        assert!(
            m("raftlock_lock_hold_seconds_count") >= 10.0,
            "every node times the released holds"
        );
        let oldest = m("raftlock_lock_oldest_hold_seconds");
        assert!(
            (0.3..30.0).contains(&oldest),
            "node {}: the held lock's age is {oldest} s",
            n.id
        );
        assert_eq!(
            m("raftlock_raft_is_leader"),
            f64::from(u8::from(n.id == leader))
        );
        if n.id == leader {
            assert!(m("raftlock_proposal_seconds_count") >= 20.0);
            assert!(m(r#"raftlock_grpc_requests_total{method="Lock/Acquire",code="Ok"}"#) >= 10.0);
            assert!(m(r#"raftlock_raft_state{state="leader"}"#) == 1.0);
            // Each commit's heartbeat either rode with the next append or
            // went alone; which one depends on timing.
            let heartbeats = ["with_append", "alone"]
                .map(|s| {
                    metric(
                        &text,
                        &format!(r#"raftlock_commit_heartbeats_total{{sent="{s}"}}"#),
                    )
                    .unwrap_or(0.0)
                })
                .iter()
                .sum::<f64>();
            assert!(heartbeats >= 1.0, "no commit heartbeat counted in\n{text}");
        }
    }
}

async fn ready(addr: &str) -> u16 {
    http_get(addr, "/ready").await.map(|(c, _)| c).unwrap_or(0)
}

#[tokio::test]
async fn ready_is_false_on_a_node_cut_off_from_the_quorum() {
    let mut cluster = Cluster::start(3).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    for n in cluster.nodes() {
        while ready(n.metrics_addr.as_deref().expect("a metrics listener")).await != 200 {
            assert!(Instant::now() < deadline, "node {} never ready", n.id);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Cut off the leader (the others frozen): it must stop saying ready.
    let leader = cluster.leader().await.unwrap();
    let others: Vec<u64> = (1..=3).filter(|&i| i != leader).collect();
    for &o in &others {
        cluster.pause(o);
    }
    let addr = cluster.nodes()[(leader - 1) as usize]
        .metrics_addr
        .clone()
        .expect("a metrics listener");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ready(&addr).await == 200 {
        assert!(
            Instant::now() < deadline,
            "a leader without quorum stays ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, body) = http_get(&addr, "/ready").await.unwrap();
    assert_eq!(code, 503, "{body}");
    // A follower cut off likewise, once it notices.
    for &o in &others {
        cluster.resume(o);
    }
    cluster.wait_for_leader(Duration::from_secs(10)).await;
    let follower = (1..=3).find(|&i| Some(i) != Some(leader)).unwrap();
    let faddr = cluster.nodes()[(follower - 1) as usize]
        .metrics_addr
        .clone()
        .expect("a metrics listener");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ready(&faddr).await != 200 {
        assert!(Instant::now() < deadline, "follower never ready again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in (1..=3).filter(|&i| i != follower) {
        cluster.pause(i);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while ready(&faddr).await == 200 {
        assert!(
            Instant::now() < deadline,
            "a follower without a leader stays ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 1..=3 {
        cluster.resume(i);
    }
}

const REFLECT: &str = r#"
import sys, grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
ch = grpc.insecure_channel(sys.argv[1])
stub = reflection_pb2_grpc.ServerReflectionStub(ch)
def ask(**kw):
    return next(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(**kw)]), timeout=10))
services = [s.name for s in ask(list_services="").list_services_response.service]
print("services:", " ".join(sorted(services)))
from google.protobuf import descriptor_pb2
fds = ask(file_containing_symbol="raftlock.v1.Lock").file_descriptor_response.file_descriptor_proto
for raw in fds:
    f = descriptor_pb2.FileDescriptorProto.FromString(raw)
    for s in f.service:
        if s.name == "Lock":
            print("Lock methods:", " ".join(m.name for m in s.method))
"#;

#[tokio::test]
async fn python_grpc_reflection_lists_and_describes_the_services() {
    // The README promises `cargo test` on a machine with only the Rust
    // toolchain, where Python's grpcio may be missing; CI installs it and sets
    // RAFTLOCK_REQUIRE_PYTHON_GRPC=1 so that there this test cannot be skipped.
    let have_grpc = std::process::Command::new("python3")
        .args(["-c", "import grpc, grpc_reflection"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !have_grpc {
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_PYTHON_GRPC").is_none(),
            "RAFTLOCK_REQUIRE_PYTHON_GRPC is set but python3 cannot import grpc and grpc_reflection"
        );
        eprintln!("SKIPPED: python3 with grpcio and grpcio-reflection is not installed");
        return;
    }
    let cluster = Cluster::start(3).await;
    let addr = cluster.endpoints()[0].clone();
    let out = tokio::process::Command::new("python3")
        .args(["-c", REFLECT, &addr])
        .output()
        .await
        .expect("python3 runs (CI installs grpcio and grpcio-reflection)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python reflection client failed (pip install grpcio grpcio-reflection):\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in [
        "raftlock.v1.Lock",
        "raftlock.v1.Session",
        "raftlock.v1.Election",
        "raftlock.v1.Cluster",
        "grpc.health.v1.Health",
    ] {
        assert!(text.contains(s), "{s} not listed:\n{text}");
    }
    assert!(
        text.contains("Lock methods: Acquire Release Describe List Validate"),
        "{text}"
    );
}
