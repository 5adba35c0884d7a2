//! A new cluster elects one leader as its members come up, whatever order
//! they start in: a member that starts after the others elected a leader
//! joins under that leader instead of standing for election itself.

use raftlock_tests::{binary, exclusive, LocalCluster, Options};
use std::time::Duration;

/// The late member is the highest id, whose vote of the same term would
/// outrank the leader's. Before a member other than the lowest waited to
/// be reached before it initialized, it stood for election as soon as it
/// started and the leader stepped down in about one start in five.
#[tokio::test]
async fn a_member_started_after_a_leader_was_elected_joins_without_an_election() {
    let _serial = exclusive();
    for attempt in 1..=5 {
        let mut c = LocalCluster::create(Options::new(binary("raftlockd"), 3)).unwrap();
        c.start_node(1).unwrap();
        c.start_node(2).unwrap();
        let leader = c.wait_for_leader(Duration::from_secs(20)).await.unwrap();
        let term = c.status(leader).await.unwrap().term;
        // Long enough that the leader has given up its first calls to the
        // absent member and retries it.
        tokio::time::sleep(Duration::from_millis(800)).await;
        c.start_node(3).unwrap();
        c.wait_for_followers(Duration::from_secs(20)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        for id in 1..=3 {
            let s = c.status(id).await.unwrap();
            assert_eq!(
                (s.term, s.leader_id),
                (term, leader),
                "attempt {attempt}: node {id} is in term {} under leader {}, not term {term} under {leader}\n{}",
                s.term,
                s.leader_id,
                c.logs()
            );
        }
    }
}

/// With the lowest member down, the others still form the cluster.
#[tokio::test]
async fn the_others_form_the_cluster_without_the_lowest_member() {
    let _serial = exclusive();
    let mut c = LocalCluster::create(Options::new(binary("raftlockd"), 3)).unwrap();
    c.start_node(2).unwrap();
    c.start_node(3).unwrap();
    let leader = c.wait_for_leader(Duration::from_secs(20)).await.unwrap();
    assert_ne!(leader, 1);
    c.start_node(1).unwrap();
    c.wait_for_followers(Duration::from_secs(20)).await.unwrap();
    let s = c.status(1).await.unwrap();
    assert_eq!(s.leader_id, leader, "{}", c.logs());
}
