//! The `raftlock` CLI against a real cluster.

use raftlock_tests::{binary, Cluster};
use std::process::Command;
use std::time::Duration;

fn raftlock(cluster: &Cluster) -> Command {
    let mut c = Command::new(binary("raftlock"));
    c.env("RAFTLOCK_ENDPOINTS", cluster.endpoints().join(","));
    c
}

#[tokio::test]
async fn lock_runs_a_command_with_the_token_and_releases_after() {
    let cluster = Cluster::start(3).await;
    let out = tokio::task::spawn_blocking({
        let mut cmd = raftlock(&cluster);
        move || {
            cmd.args([
                "lock",
                "--ttl",
                "5s",
                "cli/job",
                "--",
                "sh",
                "-c",
                "echo token=$RAFTLOCK_TOKEN; exit 7",
            ])
            .output()
            .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "the command's exit code is passed on"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let token: u64 = text
        .trim()
        .strip_prefix("token=")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(token > 0);

    let client = cluster.client().await;
    assert!(
        client.describe("cli/job").await.unwrap().holders.is_empty(),
        "released after the command"
    );
    let v = raftlock(&cluster)
        .args(["validate", "cli/job", &token.to_string()])
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(3), "a released token is stale");

    // Held by someone else: a try (--timeout 0) exits 2 without running the command.
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let _g = session
        .lock("cli/job")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let busy = tokio::task::spawn_blocking({
        let mut cmd = raftlock(&cluster);
        move || {
            cmd.args(["lock", "--timeout", "0s", "cli/job", "--", "true"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(busy.status.code(), Some(2));

    let json = raftlock(&cluster)
        .args(["describe", "cli/job", "--output", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("describe prints JSON");
    assert_eq!(v["holders"][0]["session_id"], session.id());
    let status = raftlock(&cluster).args(["status"]).output().unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("leader: node"));
}
