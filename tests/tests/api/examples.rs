//! The client's examples run against a real cluster and succeed (each
//! asserts its own outcome: one cron run, two scheduler terms in order, the
//! stale write refused).

use raftlock_tests::{binary, Cluster};
use std::time::Duration;

async fn run_example(cluster: &Cluster, name: &str) -> String {
    // `cargo test --workspace` builds examples next to the binaries.
    let path = binary(&format!("examples/{name}"));
    let endpoints = cluster.endpoints().join(",");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(path)
            .env("RAFTLOCK_ENDPOINTS", endpoints)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("example {name} did not finish"))
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "example {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn examples_run_against_a_cluster() {
    let cluster = Cluster::start(3).await;
    let cron = run_example(&cluster, "cron_singleton").await;
    assert!(cron.contains("the job ran 1 time(s)"), "{cron}");
    let sched = run_example(&cluster, "leader_scheduler").await;
    assert!(
        sched.contains("replica-a:8080: stepping down")
            || sched.contains("replica-b:8080: stepping down"),
        "{sched}"
    );
    let fenced = run_example(&cluster, "fenced_writer").await;
    assert!(fenced.contains("A's late write: refused"), "{fenced}");
}
