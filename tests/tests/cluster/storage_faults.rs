//! Storage faults a node cannot repair by itself, on real processes: a
//! storage error outside the log stops the process, not just its Raft core.

use super::disk::{churn, log_of, wait_exit};
use raftlock_tests::Cluster;
use std::time::Duration;

#[tokio::test]
async fn a_follower_that_cannot_write_its_snapshot_exits_naming_the_file() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "100"]).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    // The snapshot is written to snapshot.tmp and renamed: a directory in
    // its place makes every snapshot write fail.
    let tmp = cluster.node(follower).data_dir.join("snapshot.tmp");
    std::fs::create_dir(&tmp).unwrap();
    churn(&cluster, 120).await;
    let status = wait_exit(&mut cluster, follower, Duration::from_secs(30)).await;
    assert!(!status.success(), "exited {status}");
    let log = log_of(&cluster, follower);
    assert!(log.contains("raft's core stopped"), "{log}");
    assert!(
        log.contains("snapshot.tmp"),
        "the message names the file: {log}"
    );
    // The other two go on.
    churn(&cluster, 3).await;
    std::fs::remove_dir(&tmp).unwrap();
}
