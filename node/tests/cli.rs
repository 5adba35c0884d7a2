//! The `raftlockd` binary's own checks: bad configuration and bad data
//! directories are refused at start with a message that says what is wrong.

use std::process::Command;

fn raftlockd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_raftlockd"))
}

#[test]
fn missing_id_is_refused_with_a_message() {
    let out = raftlockd()
        .args(["--data-dir", "/nonexistent"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--id is required"), "{err}");
}

#[test]
fn data_dir_of_another_cluster_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("raftlock.json"),
        r#"{"format_version":1,"node_id":1,"cluster_id":"0000000000000001"}"#,
    )
    .unwrap();
    let out = raftlockd()
        .arg("--id")
        .arg("1")
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--listen-client",
            "127.0.0.1:0",
            "--listen-peer",
            "127.0.0.1:0",
        ])
        .args(["--initial-cluster", "1=127.0.0.1:7101"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("belongs to cluster 0000000000000001"), "{err}");
}

#[test]
fn corrupt_or_foreign_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("raftlock.json"), b"{not json").unwrap();
    let out = raftlockd()
        .arg("--id")
        .arg("1")
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("damaged"));

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("somefile"), b"x").unwrap();
    let out = raftlockd()
        .arg("--id")
        .arg("1")
        .arg("--data-dir")
        .arg(other.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a raftlock data directory"));

    let node2 = tempfile::tempdir().unwrap();
    std::fs::write(
        node2.path().join("raftlock.json"),
        br#"{"format_version":1,"node_id":2,"cluster_id":null}"#,
    )
    .unwrap();
    let out = raftlockd()
        .arg("--id")
        .arg("1")
        .arg("--data-dir")
        .arg(node2.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("belongs to node 2"));

    let newer = tempfile::tempdir().unwrap();
    std::fs::write(
        newer.path().join("raftlock.json"),
        br#"{"format_version":99,"node_id":1,"cluster_id":null}"#,
    )
    .unwrap();
    let out = raftlockd()
        .arg("--id")
        .arg("1")
        .arg("--data-dir")
        .arg(newer.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("newer than this build"));
}
