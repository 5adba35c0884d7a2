//! Upgrading a node whose data dir was written by a release that kept the
//! Raft log in sled: the first start migrates the log, vote, committed
//! index and snapshot into the write-ahead log, and the node serves the
//! same locks, sessions and tokens.
//!
//! The fixture under `tests/fixtures/sled-data-dir/` was written by the
//! last sled release (commit 23eca82) with `make_sled_fixture` below.

use raftlock_client::Client;
use raftlock_tests::binary;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// A one-node raftlockd this test started; killed by PID when dropped.
struct Node {
    child: Child,
    client_addr: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    fn start(raftlockd: &Path, dir: &Path, initial: bool, log: &Path) -> Node {
        let (peer, client) = (free_port(), free_port());
        let mut cmd = Command::new(raftlockd);
        cmd.args(["--id", "1", "--data-dir"])
            .arg(dir)
            .args(["--listen-client", &format!("127.0.0.1:{client}")])
            .args(["--listen-peer", &format!("127.0.0.1:{peer}")])
            .args(["--snapshot-every", "20"]);
        if initial {
            cmd.args([
                "--initial-cluster",
                &format!("1=127.0.0.1:{peer}/127.0.0.1:{client}"),
            ]);
        }
        let out = std::fs::File::create(log).unwrap();
        cmd.stdout(out.try_clone().unwrap()).stderr(out);
        Node {
            child: cmd.spawn().unwrap(),
            client_addr: format!("127.0.0.1:{client}"),
        }
    }

    async fn client(&self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(c) = Client::connect([self.client_addr.clone()]).await {
                if c.status().await.is_ok_and(|s| s.leader_id == 1) {
                    return c;
                }
            }
            assert!(Instant::now() < deadline, "node never led");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sled-data-dir")
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Expected {
    session: u64,
    held: Vec<(String, u64, String)>,
    churn_token: u64,
}

/// Writes the fixture with an old (sled) raftlockd:
/// `RAFTLOCK_OLD_RAFTLOCKD=/path/to/old/raftlockd cargo test -p raftlock-tests
/// --test cluster migration::make_sled_fixture -- --ignored`.
#[tokio::test]
#[ignore]
async fn make_sled_fixture() {
    let _serial = raftlock_tests::exclusive();
    let old = PathBuf::from(std::env::var("RAFTLOCK_OLD_RAFTLOCKD").unwrap());
    let out = fixture();
    let _ = std::fs::remove_dir_all(&out);
    let work = tempfile::tempdir().unwrap();
    let node = Node::start(&old, &out.join("node"), true, &work.path().join("log"));
    let client = node.client().await;
    let session = client
        .session_named(Duration::from_secs(600), "fixture")
        .await
        .unwrap();
    let mut held = Vec::new();
    for (name, meta) in [("fixture/held-1", "meta-1"), ("fixture/leader", "node-a")] {
        let g = session
            .lock(name)
            .metadata(meta)
            .acquire()
            .await
            .unwrap()
            .detach();
        held.push((name.to_owned(), g.token, meta.to_owned()));
    }
    // Enough entries for snapshots and purged log below the last one.
    let mut churn_token = 0;
    for _ in 0..70 {
        let g = session.lock("fixture/churn").acquire().await.unwrap();
        churn_token = g.token();
        g.release().await.unwrap();
    }
    let g = session
        .lock("fixture/held-2")
        .metadata(vec![0xff, 0x00])
        .acquire()
        .await
        .unwrap()
        .detach();
    held.push(("fixture/held-2".into(), g.token, String::new()));
    let expected = Expected {
        session: session.id(),
        held,
        churn_token,
    };
    std::fs::write(
        out.join("expected.json"),
        serde_json::to_vec_pretty(&expected).unwrap(),
    )
    .unwrap();
    node.stop();
}

#[tokio::test]
async fn a_data_dir_of_the_sled_release_migrates_and_serves_its_locks() {
    let _serial = raftlock_tests::exclusive();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("node");
    copy_dir(&fixture().join("node"), &dir);
    let expected: Expected =
        serde_json::from_slice(&std::fs::read(fixture().join("expected.json")).unwrap()).unwrap();
    for start in 0..2 {
        let log = work.path().join(format!("log-{start}"));
        let node = Node::start(&binary("raftlockd"), &dir, false, &log);
        let client = node.client().await;
        for (name, token, meta) in &expected.held {
            let info = client.describe(name).await.unwrap();
            assert_eq!(info.holders.len(), 1, "{name}: {info:?}");
            let h = &info.holders[0];
            assert_eq!(
                (h.session_id, h.token),
                (expected.session, *token),
                "{name}"
            );
            if !meta.is_empty() {
                assert_eq!(h.metadata, meta.as_bytes(), "{name}");
            }
            assert!(client.validate(name, *token).await.unwrap().valid, "{name}");
        }
        // New tokens continue above everything the old release issued.
        let s = client.session(Duration::from_secs(5)).await.unwrap();
        let g = s
            .lock("fixture/churn")
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        assert!(g.token() > expected.churn_token);
        assert!(expected.held.iter().all(|(_, t, _)| g.token() > *t));
        g.release().await.unwrap();
        s.close().await.unwrap();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if start == 0 {
            assert!(
                text.contains("migrated"),
                "the first start migrates:\n{text}"
            );
        } else {
            assert!(
                !text.contains("migrated"),
                "only the first start migrates:\n{text}"
            );
        }
        node.stop();
        assert!(dir.join("wal").is_dir());
        assert!(!dir.join("raft").exists(), "sled's files are moved aside");
    }
}
