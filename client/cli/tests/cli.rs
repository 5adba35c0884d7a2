//! The `raftlock` binary without a cluster: help and clear failures.

use std::process::Command;

fn raftlock() -> Command {
    Command::new(env!("CARGO_BIN_EXE_raftlock"))
}

#[test]
fn help_lists_subcommands_and_examples() {
    let out = raftlock().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "status",
        "describe",
        "list",
        "validate",
        "lock",
        "RAFTLOCK_ENDPOINTS",
    ] {
        assert!(text.contains(word), "help lacks {word}:\n{text}");
    }
}

#[test]
fn unreachable_cluster_is_reported_not_panicked() {
    // Port 1 on loopback: nothing listens there.
    let out = raftlock()
        .args(["--endpoints", "127.0.0.1:1", "status"])
        .env_remove("RAFTLOCK_ENDPOINTS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the cluster"), "{err}");
}
