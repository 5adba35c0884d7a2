//! SIGTERM on the leader hands leadership over before the node exits, so
//! clients see a short pause and no lost session.

use raftlock_tests::Cluster;
use std::time::{Duration, Instant};

#[tokio::test]
async fn sigterm_on_leader_hands_over_and_exits_cleanly() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    // The handover pauses writes for about the election timeout (1 s).
    let session = client.session(Duration::from_secs(4)).await.unwrap();
    let guard = session
        .lock("graceful")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let old = cluster.leader().await.unwrap();

    let started = Instant::now();
    assert!(
        cluster.terminate(old).await,
        "leader did not exit 0 on SIGTERM:\n{}",
        cluster.logs()
    );
    let stopped_after = started.elapsed();
    let new = cluster
        .wait_for_new_leader(old, Duration::from_secs(5))
        .await;
    assert!(
        cluster.log_of(old).contains("handed leadership over"),
        "no handover:\n{}",
        cluster.log_of(old)
    );
    eprintln!("leader {old} stopped in {stopped_after:?}; node {new} leads");

    tokio::time::sleep(Duration::from_secs(4)).await;
    if !session.is_valid() {
        panic!(
            "session lost across a graceful restart: {}\n{}\n{}",
            session.lost().await,
            cluster.log_of(old),
            cluster.log_of(new)
        );
    }
    let d = client.describe("graceful").await.unwrap();
    assert_eq!(d.holders[0].token, guard.token());

    // The node comes back as a follower with its data.
    cluster.start_node(old);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cluster.leader().await, Some(new));
}
