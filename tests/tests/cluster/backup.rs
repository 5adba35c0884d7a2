//! Backup and restore: a backup taken from a running cluster seeds a new
//! cluster that serves the same holders and only issues larger tokens.

use raftlock_tests::{binary, Cluster};
use std::process::Command;
use std::time::Duration;

#[tokio::test]
async fn a_restored_cluster_serves_the_same_holders_and_larger_tokens() {
    let keep = tempfile::tempdir().unwrap();
    let file = keep.path().join("cluster.backup");
    let (holders, max_token, sid) = {
        let cluster = Cluster::start(3).await;
        let client = cluster.client().await;
        // A long TTL: the restored leader gives every session a full TTL
        // from its election, and nobody renews these there.
        let session = client.session(Duration::from_secs(60)).await.unwrap();
        let mut max = 0;
        for i in 0..6 {
            let g = session
                .lock(format!("backup/{}", i % 3))
                .acquire()
                .await
                .unwrap();
            max = max.max(g.token());
            if i < 3 {
                g.release().await.unwrap();
            } else {
                std::mem::forget(g);
            }
        }
        let holders = by_name(client.list("backup/").await.unwrap());
        assert_eq!(holders.len(), 3);
        let out = Command::new(binary("raftlock"))
            .env("RAFTLOCK_ENDPOINTS", cluster.endpoints().join(","))
            .args(["snapshot", "save"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The old cluster goes on after the backup: every token it issues
        // now is one the restored cluster must never issue again.
        let mut after = max;
        for i in 0..40 {
            let g = session
                .lock(format!("backup/after/{i}"))
                .acquire()
                .await
                .unwrap();
            after = after.max(g.token());
            g.release().await.unwrap();
        }
        (holders, after, session.id())
    };

    // Restoring into a data dir that holds data is refused.
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("junk"), b"x").unwrap();

    let restored = Cluster::start_restored(3, &file).await;
    let client = restored.client().await;
    let again = by_name(client.list("backup/").await.unwrap());
    assert_eq!(again, holders, "the same holders, tokens and metadata");
    assert!(again.iter().all(|l| l.1[0].session_id == sid));
    let status = client.status().await.unwrap();
    // Tokens are entry index × 2^16 + position: the restored log goes on
    // past every entry a restored token came from.
    assert!(status.applied_index > max_token >> 16);
    assert!(
        status.applied_index > 1_000_000,
        "new entries start above the default gap of 1,000,000 past the backup (at {})",
        status.applied_index
    );
    let fresh = client.session(Duration::from_secs(5)).await.unwrap();
    let g = fresh
        .lock("backup/new")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(
        g.token() > max_token,
        "token {} not above the {max_token} the old cluster issued after its backup",
        g.token()
    );
    // The held locks stay held: a try finds them busy.
    assert!(fresh
        .lock("backup/0")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    drop(restored);

    let out = Command::new(binary("raftlockd"))
        .arg("restore")
        .arg("--snapshot")
        .arg(&file)
        .args([
            "--id",
            "1",
            "--initial-cluster",
            "1=127.0.0.1:1/127.0.0.1:2",
        ])
        .arg("--data-dir")
        .arg(busy.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "restore into a used dir must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("data"), "{err}");
}

/// Each lock's holders, by name (a listing's sessions also say how long
/// they have left, which moves).
fn by_name(locks: Vec<raftlock_client::LockInfo>) -> Vec<(String, Vec<raftlock_client::Grant>)> {
    locks.into_iter().map(|l| (l.name, l.holders)).collect()
}
