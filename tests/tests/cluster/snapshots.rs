//! Snapshots built and installed at once: a follower that lags and is
//! killed over and over, on a cluster that snapshots every few entries, so
//! that it installs the leader's snapshots while building its own.

use raftlock_tests::Cluster;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_lagging_follower_killed_while_snapshots_are_built_and_installed_recovers() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "5"]).await;
    let client = cluster.client().await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let lagging = (1..=3).find(|&i| i != leader).unwrap();

    // Steady writes: every acquire and release is an entry, so snapshots are
    // built on every node several times a second.
    let stop = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for w in 0..4 {
        let client = client.clone();
        let stop = stop.clone();
        let grants = grants.clone();
        workers.push(tokio::spawn(async move {
            let session = client.session(Duration::from_secs(10)).await.unwrap();
            let mut last = 0;
            while !stop.load(Ordering::SeqCst) {
                let g = session
                    .lock(format!("snap/{w}"))
                    .timeout(Duration::from_secs(5))
                    .acquire()
                    .await
                    .unwrap();
                assert!(g.token() > last, "tokens of one lock must increase");
                last = g.token();
                g.release().await.unwrap();
                grants.fetch_add(1, Ordering::SeqCst);
            }
            session.close().await.ok();
        }));
    }

    let addr = cluster.nodes()[(lagging - 1) as usize].client_addr.clone();
    for round in 0..8u64 {
        cluster.kill(lagging);
        // Let the others move on and purge what the follower missed.
        tokio::time::sleep(Duration::from_millis(300)).await;
        cluster.start_node(lagging);
        // Its catch-up starts once it serves: opening the log reads its
        // whole preallocated segment, a good part of a second in a debug
        // build, and a node killed before it serves tests nothing.
        let serving = std::time::Instant::now() + Duration::from_secs(20);
        while client.node_status(&addr).await.is_err() {
            if std::time::Instant::now() >= serving {
                let log = cluster.log_of(lagging);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "node {lagging} does not serve; the end of its log:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Killed at a different point of its catch-up each round: while it
        // installs the leader's snapshot, or while it builds its own.
        tokio::time::sleep(Duration::from_millis(50 + 60 * round)).await;
    }
    // The log file is appended to by every start.
    let said = cluster.log_of(lagging);
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    assert!(
        grants.load(Ordering::SeqCst) > 50,
        "too little load to exercise snapshots"
    );

    // The follower is alive and catches up to the leader's applied state.
    let target = client
        .node_status(&cluster.nodes()[(leader - 1) as usize].client_addr)
        .await
        .unwrap()
        .applied_index;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match client.node_status(&addr).await {
            Ok(s) if s.applied_index >= target => break,
            other => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "node {lagging} did not catch up to {target}: {other:?}\n{}",
                    cluster.log_of(lagging)
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let logs = cluster.logs();
    assert!(!logs.contains("panicked"), "{logs}");
    // The state it rebuilt from snapshots and log is the cluster's: led by
    // it, the cluster knows no session and no lock (every worker closed).
    client.transfer_leader(lagging).await.unwrap();
    let status = client.status().await.unwrap();
    assert_eq!(status.node_id, lagging, "{status:?}");
    assert_eq!((status.sessions, status.locks), (0, 0), "{status:?}");
    assert!(
        said.contains("installed a snapshot from the leader"),
        "the follower never installed a snapshot: the test did not test the race\n{said}"
    );

    // And a restart of every node, from the snapshots they left, serves on.
    for id in 1..=3 {
        cluster.kill(id);
    }
    for id in 1..=3 {
        cluster.start_node(id);
    }
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let g = session.lock("snap/0").try_acquire().await.unwrap();
    assert!(g.is_some(), "every lock was released before the restart");
}
