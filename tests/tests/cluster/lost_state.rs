//! A member that lost what it stored never votes or acknowledges with it.
//! Node 2 is down while nodes 1 and 3 grant locks; then 1 and 3 go down and
//! node 3 loses its state (its data dir, a block of its log, its log's
//! segments). Nodes 2 (stale) and 3 (lost) together must never serve: on
//! node 2's log they would issue tokens already issued. Once node 1 is
//! back, node 3 catches up and votes again by itself, so that 2 and 3
//! carry on without node 1.

use super::disk::{churn, log_of, wal_files};
use raftlock_client::{Client, Options};
use raftlock_tests::Cluster;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Loss {
    /// The data dir is gone (a replaced disk, a lost volume); the node is
    /// started with its usual flags, `--initial-cluster` among them.
    DataDir,
    /// The data dir is gone and the node is started without
    /// `--initial-cluster`, as a node rebuilt by hand and added back with
    /// `members add-learner` runs from then on.
    DataDirWithoutInitialCluster,
    /// The first 4 KiB of its newest log segment are zeros (a lost block).
    ZeroedBlock,
    /// Its log segments are gone and `wal/` is empty (fsck moved them).
    Segments,
}

fn lose(data_dir: &Path, loss: Loss) {
    match loss {
        Loss::DataDir | Loss::DataDirWithoutInitialCluster => {
            std::fs::remove_dir_all(data_dir).unwrap()
        }
        Loss::ZeroedBlock => {
            let newest = wal_files(data_dir).pop().expect("a segment");
            let mut bytes = std::fs::read(&newest).unwrap();
            bytes[..4096].fill(0);
            std::fs::write(&newest, bytes).unwrap();
        }
        Loss::Segments => {
            for f in wal_files(data_dir) {
                std::fs::remove_file(f).unwrap();
            }
        }
    }
}

/// The token of one new grant, if the cluster makes one within `within`.
pub(crate) async fn grant(cluster: &Cluster, within: Duration) -> Option<u64> {
    let attempt = async {
        let options = Options {
            deadline: within,
            attempt_timeout: Duration::from_millis(800),
            ..Options::default()
        };
        let client = Client::connect_with(cluster.endpoints(), options)
            .await
            .ok()?;
        let session = client.session(Duration::from_secs(10)).await.ok()?;
        let guard = session.lock("lost/probe").try_acquire().await.ok()??;
        let token = guard.token();
        let _ = guard.release().await;
        Some(token)
    };
    tokio::time::timeout(within, attempt).await.ok().flatten()
}

async fn a_lost_member_and_a_stale_one_never_reissue_a_token(loss: Loss) {
    let mut cluster = Cluster::start(3).await;
    cluster.kill(2);
    let highest = churn(&cluster, 20).await;
    cluster.kill(1);
    cluster.kill(3);
    let dir = cluster.node(3).data_dir.clone();
    lose(&dir, loss);
    if !matches!(loss, Loss::DataDir | Loss::DataDirWithoutInitialCluster) {
        // Offline, the damage is reported, not read as a clean end.
        let out = std::process::Command::new(raftlock_tests::binary("raftlockd"))
            .arg("check")
            .arg("--data-dir")
            .arg(&dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{loss:?}: {text}");
        assert!(
            text.contains("DAMAGED") && text.contains("the log ends early"),
            "{loss:?}: {text}"
        );
    }
    if matches!(loss, Loss::DataDirWithoutInitialCluster) {
        cluster.detach_from_initial_cluster(3);
    }
    cluster.start_node(2);
    cluster.start_node(3);

    // Node 2's log ends before most of those grants: whatever 2 and 3 do
    // together must not grant again below them.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if let Some(token) = grant(&cluster, Duration::from_secs(1)).await {
            panic!(
                "{loss:?}: the stale and the lost member granted token {token}; {highest} had been issued\n{}",
                log_of(&cluster, 3)
            );
        }
    }

    cluster.start_node(1);
    let token = grant(&cluster, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| {
            panic!(
                "{loss:?}: no grant with node 1 back\n{}",
                log_of(&cluster, 3)
            )
        });
    assert!(token > highest, "{loss:?}: token {token} after {highest}");

    // Node 3 votes again once it holds everything: 2 and 3 then serve
    // without node 1. (Its warning at the start says it will vote again
    // once caught up: only the line that says it caught up counts.)
    let until = Instant::now() + Duration::from_secs(20);
    while !log_of(&cluster, 3).contains("this node votes again") {
        assert!(
            Instant::now() < until,
            "{loss:?}: node 3 did not catch up\n{}",
            log_of(&cluster, 3)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.kill(1);
    let after = grant(&cluster, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("{loss:?}: 2 and 3 do not serve\n{}", log_of(&cluster, 3)));
    assert!(after > token, "{loss:?}: token {after} after {token}");
}

#[tokio::test]
async fn a_member_whose_data_dir_was_lost() {
    a_lost_member_and_a_stale_one_never_reissue_a_token(Loss::DataDir).await;
}

#[tokio::test]
async fn a_member_whose_data_dir_was_lost_started_without_initial_cluster() {
    a_lost_member_and_a_stale_one_never_reissue_a_token(Loss::DataDirWithoutInitialCluster).await;
}

#[tokio::test]
async fn a_member_with_a_zeroed_block_in_its_log() {
    a_lost_member_and_a_stale_one_never_reissue_a_token(Loss::ZeroedBlock).await;
}

#[tokio::test]
async fn a_member_whose_log_segments_are_gone() {
    a_lost_member_and_a_stale_one_never_reissue_a_token(Loss::Segments).await;
}

/// A follower that comes back with less than its leader saw it acknowledge
/// (its data dir replaced while the leader stayed up) is caught up, not
/// taken for a bug: the leader goes on, the follower votes again, and the
/// two of them serve without the third.
#[tokio::test]
async fn a_follower_that_lost_its_data_dir_under_a_running_leader() {
    let mut cluster = Cluster::start(3).await;
    let before = churn(&cluster, 50).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let mut followers = (1..=3).filter(|n| *n != leader);
    let (lost, other) = (followers.next().unwrap(), followers.next().unwrap());
    cluster.kill(lost);
    let dir = cluster.node(lost).data_dir.clone();
    lose(&dir, Loss::DataDir);
    cluster.start_node(lost);
    let until = Instant::now() + Duration::from_secs(20);
    while !log_of(&cluster, lost).contains("this node votes again") {
        assert!(
            Instant::now() < until,
            "node {lost} did not catch up\nleader {leader}:\n{}\nnode {lost}:\n{}",
            log_of(&cluster, leader),
            log_of(&cluster, lost)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.kill(other);
    let token = grant(&cluster, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| {
            panic!(
                "nodes {leader} and {lost} do not serve\n{}",
                log_of(&cluster, leader)
            )
        });
    assert!(token > before, "token {token} after {before}");
}
