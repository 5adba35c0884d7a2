//! `raftlock bench --workload failover` starts its own cluster, kills its
//! leader by PID, and reports recovery: the feature works end to end. The
//! figures themselves are for the benchmark to print, not for a test to
//! time; this checks only what must hold on any machine.

use raftlock_tests::run_bench;

#[tokio::test]
async fn failover_bench_kills_leaders_and_reports_every_recovery() {
    let json = run_bench(
        &[
            "--workload",
            "failover",
            "--clients",
            "2",
            "--duration",
            "9s",
            "--kill-every",
            "2s",
            "--runs",
            "1",
        ],
        &[],
    )
    .await;
    let stdout = json["stdout"].as_str().unwrap_or_default();
    let m = &json["median"];
    let f = &m["failover"];
    let kills = f["kills"].as_u64().expect("kills");
    assert!(kills >= 1, "no leader was killed: {m}");
    assert_eq!(
        f["recovered"].as_u64(),
        Some(kills),
        "every kill recovered: {m}"
    );
    assert!(f["recovery_p50_ms"].as_f64().unwrap() > 0.0, "{m}");
    assert_eq!(m["lost_sessions"].as_u64(), Some(0), "{m}");
    assert!(m["ops"].as_u64().unwrap() > 0, "{m}");
    assert!(
        stdout.contains("leader killed"),
        "the table reports the kills:\n{stdout}"
    );
}
