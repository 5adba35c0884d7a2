//! The soak benchmark's short form: two minutes of what a fleet of
//! services does (sessions that end and start again, short locks, waits
//! given up at random, campaigns, rate-limit takes, watch streams), with
//! leadership moved every 30 s and handed back to minute 1's leader for the
//! last 15 s. The bench itself fails when a node's memory at minute 2 is
//! more than 10 % above its own at minute 1, or when
//! descriptors, runtime tasks, sessions, waiters, recorded answers or
//! registered waits are not back to their count before the load (after a
//! 30-second warm-up of it) once it stops; this checks that it passed and that the load did what it says.
//! The 30-minute form and its figures are in docs/performance.md.

use raftlock_tests::run_bench;

#[tokio::test]
async fn two_minutes_of_churn_leave_nothing_behind_on_the_nodes() {
    let json = run_bench(
        &[
            "--workload",
            "soak",
            "--duration",
            "2m",
            "--reference-at",
            "60s",
            "--sessions",
            "400",
            "--watchers",
            "10",
            "--transfer-every",
            "30s",
            "--sample-every",
            "15s",
            "--runs",
            "1",
        ],
        // A snapshot (and with it a purge of the log held in memory) every
        // few seconds of this load, as every 10,000 entries does under a
        // production one: what stays in memory is then what the load keeps.
        &[("RAFTLOCK_SNAPSHOT_EVERY", "2000")],
    )
    .await;
    let m = &json["median"];
    let s = &m["soak"];
    assert_eq!(s["failures"].as_array().map(Vec::len), Some(0), "{m}");
    assert_eq!(m["errors"].as_u64(), Some(0), "{m}");
    assert_eq!(m["lost_sessions"].as_u64(), Some(0), "{m}");
    assert!(s["leader_changes"].as_u64() >= Some(3), "{m}");
    for call in [
        "session closed",
        "short lock held",
        "wait cancelled",
        "wait held",
        "campaign elected",
        "rate take admitted",
        "watch opened",
    ] {
        assert!(s["calls"][call].as_u64() > Some(0), "no {call}: {m}");
    }
    let samples = s["samples"].as_array().expect("samples");
    let settled = samples
        .iter()
        .find(|x| x["label"] == "settled")
        .unwrap_or_else(|| panic!("no settled sample: {m}"));
    for node in settled["nodes"].as_array().expect("nodes") {
        assert_eq!(node["sessions"].as_u64(), Some(0), "{node}");
        assert_eq!(node["waits_registered"].as_u64(), Some(0), "{node}");
    }
}
