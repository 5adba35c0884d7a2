//! Quorum loss with real processes: two of three nodes lost for good, the
//! survivor turned into a one-node cluster by `raftlockd recover
//! --force-new-cluster`, the others added back; the locks held before are
//! still held with their tokens, new tokens are above every old one, and no
//! lock is granted twice.

use raftlock_tests::{binary, raw, Cluster};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_survivor_of_a_lost_quorum_becomes_the_cluster_and_grows_back() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let addr = cluster.node(leader).client_addr.clone();
    // Locks held before the loss, by a session that will outlive it.
    let session = raw::create_session(&addr, 600_000).await.unwrap();
    let before_a = raw::acquire(&addr, session, "rec/a", None).await.unwrap();
    let before_b = raw::acquire(&addr, session, "rec/b", None).await.unwrap();
    let (token_a, token_b) = (before_a.grant.unwrap().token, before_b.grant.unwrap().token);
    // The survivor has applied them before the loss (a token's high bits
    // are its entry's log index).
    let survivor = leader % 3 + 1;
    let observer = cluster.client().await;
    let survivor_addr = cluster.node(survivor).client_addr.clone();
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while observer
        .node_status(&survivor_addr)
        .await
        .map_or(0, |s| s.applied_index)
        < token_b >> 16
    {
        assert!(
            std::time::Instant::now() < give_up,
            "the survivor never applied the grants"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(observer);

    // Two nodes lost for good, then the survivor stopped for the tool.
    for id in (1..=3).filter(|id| *id != survivor) {
        cluster.kill(id);
        cluster.wipe(id);
    }
    cluster.kill(survivor);
    let node = cluster.node(survivor);
    let recover = |gap: u64| {
        std::process::Command::new(binary("raftlockd"))
            .arg("recover")
            .arg("--force-new-cluster")
            .args(["--id", &survivor.to_string()])
            .arg("--data-dir")
            .arg(&node.data_dir)
            .args([
                "--initial-cluster",
                &format!("{survivor}={}/{}", node.peer_addr, node.client_addr),
                "--token-gap",
                &gap.to_string(),
            ])
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap()
    };
    // A gap whose tokens (index × 65536) would wrap is refused, and the
    // data dir is left as it was.
    let wrapping = recover(1 << 50);
    let err = String::from_utf8_lossy(&wrapping.stderr);
    assert!(!wrapping.status.success(), "a wrapping gap was accepted");
    assert!(err.contains("would wrap"), "{err}");
    assert!(node.data_dir.join("wal").exists(), "the data dir was moved");
    let out = recover(1000);
    assert!(
        out.status.success(),
        "recover failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("INFO {}", String::from_utf8_lossy(&out.stdout).trim());
    cluster.detach_from_initial_cluster(survivor);
    cluster.start_node(survivor);
    assert_eq!(
        cluster.wait_for_leader(Duration::from_secs(20)).await,
        survivor
    );
    let addr = cluster.node(survivor).client_addr.clone();

    // The state survived: same holders, same tokens.
    for (name, token) in [("rec/a", token_a), ("rec/b", token_b)] {
        let d = raw::describe(&addr, name).await.unwrap();
        assert_eq!(d.holders.len(), 1, "{name}: {d:?}");
        assert_eq!(
            (d.holders[0].session_id, d.holders[0].token),
            (session, token)
        );
    }
    // New tokens start above the gap.
    let s2 = raw::create_session(&addr, 60_000).await.unwrap();
    let c = raw::acquire(&addr, s2, "rec/c", None)
        .await
        .unwrap()
        .grant
        .unwrap();
    assert!(
        c.token > token_a.max(token_b) + 1000 * 65_536,
        "{} vs {token_a}, {token_b}",
        c.token
    );
    // A held lock is not granted again.
    let busy = raw::acquire(&addr, s2, "rec/a", None).await.unwrap();
    assert!(!busy.acquired, "rec/a granted twice: {busy:?}");

    // The others come back empty and are added as learners, then voters.
    let client = cluster.client().await;
    for id in (1..=3).filter(|id| *id != survivor) {
        cluster.start_node(id);
        let n = cluster.node(id);
        client
            .add_learner(id, &n.peer_addr, &n.client_addr, true)
            .await
            .unwrap_or_else(|e| panic!("add learner {id}: {e}"));
    }
    client.change_membership(&[1, 2, 3], false).await.unwrap();
    // The survivor goes away: one of the re-added nodes leads, with every
    // lock and token intact, and tokens still grow.
    cluster.kill(survivor);
    let next = cluster
        .wait_for_new_leader(survivor, Duration::from_secs(20))
        .await;
    let addr = cluster.node(next).client_addr.clone();
    let d = raw::describe(&addr, "rec/a").await.unwrap();
    assert_eq!(
        (d.holders[0].session_id, d.holders[0].token),
        (session, token_a)
    );
    let s3 = raw::create_session(&addr, 60_000).await.unwrap();
    let e = raw::acquire(&addr, s3, "rec/e", None)
        .await
        .unwrap()
        .grant
        .unwrap();
    assert!(
        e.token > c.token,
        "tokens grow: {} after {}",
        e.token,
        c.token
    );
}
