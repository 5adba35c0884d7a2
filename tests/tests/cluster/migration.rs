//! Upgrading a node whose data dir an earlier release wrote: it starts and
//! serves the same locks, sessions and tokens, and new tokens continue
//! above the old ones.
//!
//! - `tests/fixtures/sled-data-dir/`, written by the last release that kept
//!   the Raft log in sled (commit 23eca82) with `make_sled_fixture`: the
//!   first start migrates the log, vote, committed index and snapshot into
//!   the write-ahead log.
//! - `tests/fixtures/wal-data-dir/`, written with `make_wal_fixture` by the
//!   release its `expected.json` names (write-ahead log format 2, postcard
//!   log entries and snapshot): a node must start on it as it is, so a
//!   change to an on-disk or in-log encoding that forgets old bytes fails
//!   here.

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
        Node::start_with(raftlockd, dir, initial, log, &[])
    }

    fn start_with(raftlockd: &Path, dir: &Path, initial: bool, log: &Path, flags: &[&str]) -> Node {
        let (peer, client) = (free_port(), free_port());
        let mut cmd = Command::new(raftlockd);
        cmd.args(["--id", "1", "--data-dir"])
            .arg(dir)
            .args(["--listen-client", &format!("127.0.0.1:{client}")])
            .args(["--listen-peer", &format!("127.0.0.1:{peer}")])
            .args(["--snapshot-every", "20"])
            .args(flags);
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

fn wal_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/wal-data-dir")
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Expected {
    session: u64,
    held: Vec<(String, u64, String)>,
    churn_token: u64,
    /// The release (commit) that wrote the data dir, where recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    written_by: String,
}

/// Holds a session's locks as the fixtures do: two with metadata, a lock
/// taken and released until snapshots were made and log purged below the
/// last one, then one more with binary metadata.
async fn write_fixture_state(node: &Node) -> Expected {
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
    Expected {
        session: session.id(),
        held,
        churn_token,
        written_by: String::new(),
    }
}

/// The node serves what `expected` says the fixture holds, and new tokens
/// continue above the old ones.
async fn serves_the_fixture(node: &Node, expected: &Expected) {
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
}

/// 1 MiB segments keep the fixture small (a segment is preallocated).
const FIXTURE_SEGMENT: [&str; 2] = ["--wal-segment-mb", "1"];

/// Writes the WAL fixture with the raftlockd of a release, whose commit is
/// recorded beside it:
/// `RAFTLOCK_OLD_RAFTLOCKD=/path/to/raftlockd RAFTLOCK_OLD_COMMIT=abc1234
/// cargo test -p raftlock-tests --test cluster migration::make_wal_fixture
/// -- --ignored`.
#[tokio::test]
#[ignore]
async fn make_wal_fixture() {
    let _serial = raftlock_tests::exclusive();
    let old = PathBuf::from(std::env::var("RAFTLOCK_OLD_RAFTLOCKD").unwrap());
    let out = wal_fixture();
    let _ = std::fs::remove_dir_all(&out);
    let work = tempfile::tempdir().unwrap();
    let node = Node::start_with(
        &old,
        &out.join("node"),
        true,
        &work.path().join("log"),
        &FIXTURE_SEGMENT,
    );
    let mut expected = write_fixture_state(&node).await;
    expected.written_by = std::env::var("RAFTLOCK_OLD_COMMIT").unwrap();
    std::fs::write(
        out.join("expected.json"),
        serde_json::to_vec_pretty(&expected).unwrap(),
    )
    .unwrap();
    node.stop();
}

#[tokio::test]
async fn a_data_dir_written_by_the_previous_release_starts_and_serves_its_locks() {
    let _serial = raftlock_tests::exclusive();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("node");
    copy_dir(&wal_fixture().join("node"), &dir);
    let expected: Expected =
        serde_json::from_slice(&std::fs::read(wal_fixture().join("expected.json")).unwrap())
            .unwrap();
    assert!(
        !expected.written_by.is_empty(),
        "expected.json names its writer"
    );
    for start in 0..2 {
        let log = work.path().join(format!("log-{start}"));
        let node = Node::start_with(&binary("raftlockd"), &dir, false, &log, &FIXTURE_SEGMENT);
        serves_the_fixture(&node, &expected).await;
        node.stop();
    }
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
    let expected = write_fixture_state(&node).await;
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
        serves_the_fixture(&node, &expected).await;
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
