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

    // Held by someone else: a try (--timeout 0) exits 75 without running the command.
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
    assert_eq!(busy.status.code(), Some(75));

    let json = raftlock(&cluster)
        .args(["describe", "cli/job", "--output", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("describe prints JSON");
    assert_eq!(v["holders"][0]["session_id"], session.id());
    let status = raftlock(&cluster).args(["status"]).output().unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("leader node"));
}

/// A `raftlock` process this test started. Killed (by its PID) and reaped
/// if the test ends first, on a failed assertion too, so no client outlives
/// its test.
struct CliProcess(Option<std::process::Child>);

impl Drop for CliProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `raftlock lock` as a child process.
fn spawn_lock(cluster: &Cluster, args: &[&str]) -> CliProcess {
    CliProcess(Some(
        raftlock(cluster)
            .arg("lock")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ))
}

async fn wait_child(mut process: CliProcess, within: Duration) -> std::process::Output {
    let deadline = std::time::Instant::now() + within;
    while process
        .0
        .as_mut()
        .expect("not waited for yet")
        .try_wait()
        .unwrap()
        .is_none()
    {
        // Panicking drops `process`, which kills it.
        assert!(
            std::time::Instant::now() <= deadline,
            "raftlock did not finish within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let child = process.0.take().expect("not waited for yet");
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn lock_with_several_names_holds_them_all_together_while_the_command_runs() {
    let cluster = Cluster::start(3).await;
    let env_file = cluster.dir().join("env");
    let script = format!(
        "printf '%s\\n%s\\n' \"$RAFTLOCK_TOKEN\" \"$RAFTLOCK_LOCK\" > {}; sleep 1",
        env_file.display()
    );
    let child = spawn_lock(&cluster, &["set/b", "set/a", "--", "sh", "-c", &script]);
    let client = cluster.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !env_file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let env = std::fs::read_to_string(&env_file).unwrap();
    let mut lines = env.lines();
    let token: u64 = lines.next().unwrap().parse().unwrap();
    assert_eq!(lines.collect::<Vec<_>>(), ["set/a", "set/b"], "{env}");
    for name in ["set/a", "set/b"] {
        let d = client.describe(name).await.unwrap();
        assert_eq!(
            d.holders.iter().map(|h| h.token).collect::<Vec<_>>(),
            [token],
            "{name} while the command runs"
        );
    }
    let out = wait_child(child, Duration::from_secs(10)).await;
    assert!(out.status.success(), "{out:?}");
    for name in ["set/a", "set/b"] {
        assert!(client.describe(name).await.unwrap().holders.is_empty());
    }
    // Options that take one lock are refused with several.
    let refused = raftlock(&cluster)
        .args(["lock", "--shared", "x", "y", "--", "true"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("exclusively"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn concurrent_lock_loops_never_interleave_and_tokens_grow() {
    let cluster = Cluster::start(3).await;
    let file = cluster.dir().join("shared.log");
    let script = format!(
        "echo \"begin $RAFTLOCK_TOKEN\" >> {f}; sleep 0.05; echo \"end $RAFTLOCK_TOKEN\" >> {f}",
        f = file.display()
    );
    let mut loops = Vec::new();
    for _ in 0..2 {
        let endpoints = cluster.endpoints().join(",");
        let script = script.clone();
        loops.push(tokio::task::spawn_blocking(move || {
            for _ in 0..5 {
                let out = Command::new(binary("raftlock"))
                    .env("RAFTLOCK_ENDPOINTS", &endpoints)
                    .args([
                        "lock",
                        "--ttl",
                        "5s",
                        "--timeout",
                        "30s",
                        "job",
                        "--",
                        "sh",
                        "-c",
                        &script,
                    ])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }));
    }
    for l in loops {
        l.await.unwrap();
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20, "{text}");
    let mut last = 0u64;
    for pair in lines.chunks(2) {
        let begin: u64 = pair[0].strip_prefix("begin ").unwrap().parse().unwrap();
        let end: u64 = pair[1]
            .strip_prefix("end ")
            .unwrap_or_else(|| panic!("interleaved:\n{text}"))
            .parse()
            .unwrap();
        assert_eq!(begin, end, "interleaved:\n{text}");
        assert!(begin > last, "tokens must strictly increase:\n{text}");
        last = begin;
    }
}

#[tokio::test]
async fn a_lost_lock_stops_the_command_before_the_ttl_and_exits_76() {
    let mut cluster = Cluster::start(3).await;
    let marker = cluster.dir().join("terminated");
    let pid_file = cluster.dir().join("command.pid");
    let script = format!(
        "echo $$ > {}; trap 'echo term > {}; exit 0' TERM; while true; do sleep 0.05; done",
        pid_file.display(),
        marker.display()
    );
    let child = spawn_lock(
        &cluster,
        &["--ttl", "5s", "lost/job", "--", "sh", "-c", &script],
    );
    let client = cluster.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let pid: u32 = loop {
        let held = !client
            .describe("lost/job")
            .await
            .unwrap()
            .holders
            .is_empty();
        let pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok());
        if let (true, Some(pid)) = (held, pid) {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "never acquired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The whole cluster stops answering: from here no keep-alive can be
    // acknowledged, so the server-side TTL is at most 5 s away.
    for id in 1..=3 {
        cluster.pause(id);
    }
    let frozen = std::time::Instant::now();
    // Stopped by SIGTERM (the trap writes the marker) or, on a machine so
    // loaded that the CLI woke only at its own deadline, by SIGKILL: either
    // way before the server could have granted the lock to anyone else.
    while !marker.exists() && !gone(pid) {
        assert!(
            frozen.elapsed() < Duration::from_secs(5),
            "command not stopped within the TTL"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopped_after = frozen.elapsed();
    let out = wait_child(child, Duration::from_secs(10)).await;
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let how = if marker.exists() {
        "SIGTERM"
    } else {
        "SIGKILL"
    };
    eprintln!("command stopped by {how} {stopped_after:?} after the cluster froze (TTL 5 s)");
    for id in 1..=3 {
        cluster.resume(id);
    }
}

/// Whether `pid` is gone (or a zombie nobody reaped yet, which runs no code).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_is_killed_with_its_children_before_the_lease_ends() {
    let mut cluster = Cluster::start(3).await;
    let pid_file = cluster.dir().join("grandchild.pid");
    // The shell and its background child both ignore SIGTERM; the child is
    // not the process `raftlock` spawned.
    let script = format!(
        "trap '' TERM; sleep 1000 & echo $! > {}; wait",
        pid_file.display()
    );
    let ttl = Duration::from_secs(3);
    let child = spawn_lock(
        &cluster,
        &["--ttl", "3s", "lost/stubborn", "--", "sh", "-c", &script],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let grandchild: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // From here no keep-alive is acknowledged: the last acknowledged one was
    // sent before this instant, so the client's local deadline (send time +
    // TTL - margin) is before `frozen` + TTL - margin, and the leader cannot
    // expire the lease before `frozen` + TTL.
    for id in 1..=3 {
        cluster.pause(id);
    }
    let frozen = std::time::Instant::now();
    // The client kills at its local deadline itself, which is only the
    // last acknowledged renewal's round trip before this bound; half the
    // margin more leaves room for the signal, the exit and this poll, and
    // still ends the child well before the lease can end.
    let must_be_dead_by = frozen + ttl - raftlock_client::safety_margin(ttl) / 2;
    // Kill the stray sleep ourselves if the assertion fails, so the test
    // leaves nothing behind.
    struct Reap(u32);
    impl Drop for Reap {
        fn drop(&mut self) {
            if !gone(self.0) {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &self.0.to_string()])
                    .status();
            }
        }
    }
    let _reap = Reap(grandchild);
    while !gone(grandchild) {
        assert!(
            std::time::Instant::now() < must_be_dead_by,
            "the command's child (pid {grandchild}) still runs half a margin past the client's local deadline"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dead_after = frozen.elapsed();
    let out = wait_child(child, Duration::from_secs(10)).await;
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("whole command group dead {dead_after:?} after the cluster froze (TTL 3 s)");
    for id in 1..=3 {
        cluster.resume(id);
    }
}

#[tokio::test]
async fn a_kill_after_longer_than_the_lease_allows_is_refused() {
    let cluster = Cluster::start(1).await;
    let out = raftlock(&cluster)
        .args([
            "lock",
            "--ttl",
            "2s",
            "--kill-after",
            "2s",
            "x",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--kill-after"),
        "{out:?}"
    );
}

#[tokio::test]
async fn leader_kill_while_locked_keeps_the_lock_and_the_command() {
    let mut cluster = Cluster::start(3).await;
    let file = cluster.dir().join("order.log");
    let first_script = format!(
        "sleep 4; echo \"first $RAFTLOCK_TOKEN\" >> {}",
        file.display()
    );
    let first = spawn_lock(
        &cluster,
        &["--ttl", "10s", "kill/job", "--", "sh", "-c", &first_script],
    );
    let client = cluster.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while client
        .describe("kill/job")
        .await
        .unwrap()
        .holders
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "never acquired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second_script = format!("echo \"second $RAFTLOCK_TOKEN\" >> {}", file.display());
    let second = spawn_lock(
        &cluster,
        &[
            "--ttl",
            "10s",
            "--timeout",
            "30s",
            "kill/job",
            "--",
            "sh",
            "-c",
            &second_script,
        ],
    );
    let old = cluster.leader().await.unwrap();
    cluster.kill(old);
    cluster
        .wait_for_new_leader(old, Duration::from_secs(10))
        .await;
    let first = wait_child(first, Duration::from_secs(20)).await;
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = wait_child(second, Duration::from_secs(20)).await;
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let token = |l: &str, p: &str| -> u64 {
        l.strip_prefix(p)
            .unwrap_or_else(|| panic!("order:\n{text}"))
            .parse()
            .unwrap()
    };
    let (t1, t2) = (token(lines[0], "first "), token(lines[1], "second "));
    assert!(t2 > t1, "the second holder's token is larger:\n{text}");
}

#[tokio::test]
async fn elect_leader_observe_and_members_from_the_cli() {
    let cluster = Cluster::start(3).await;
    let leader = raftlock(&cluster)
        .args(["leader", "cli/sched"])
        .output()
        .unwrap();
    assert_eq!(leader.status.code(), Some(3), "no leader yet");
    let elect = CliProcess(Some(
        raftlock(&cluster)
            .args([
                "elect",
                "cli/sched",
                "host-a",
                "--",
                "sh",
                "-c",
                "echo $RAFTLOCK_TOKEN; sleep 2",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let client = cluster.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while client
        .election("cli/sched")
        .leader()
        .await
        .unwrap()
        .is_none()
    {
        assert!(std::time::Instant::now() < deadline, "never elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = raftlock(&cluster)
        .args(["leader", "cli/sched", "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Text is printed as text, with the key saying so.
    assert_eq!(v["metadata"], serde_json::json!({"utf8": "host-a"}));
    let done = wait_child(elect, Duration::from_secs(10)).await;
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let token: u64 = String::from_utf8_lossy(&done.stdout)
        .trim()
        .parse()
        .unwrap();
    assert_eq!(v["token"], token);

    let members = raftlock(&cluster)
        .args(["members", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&members.stdout);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("voter")).count(),
        3,
        "{text}"
    );
    let status = raftlock(&cluster)
        .args(["status", "--output", "json"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 3);
    assert!(
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["health"] == "ok"),
        "{v}"
    );
    let completions = raftlock(&cluster)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&completions.stdout).contains("raftlock"));
}

/// A cluster that is down, or up but frozen (it accepts connections and
/// never answers), is reported in seconds: `--command-timeout` bounds each
/// call, 5 s by default, instead of the client library's 15 s.
#[tokio::test]
async fn a_dead_or_frozen_cluster_is_reported_within_the_command_timeout() {
    // Accepted by the kernel into the backlog, never read: a frozen node.
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let frozen_addr = frozen.local_addr().unwrap().to_string();
    // Bound, then closed: nothing listens there, connections are refused.
    let down_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let run = |endpoint: String, extra: &'static [&'static str]| {
        tokio::task::spawn_blocking(move || {
            let began = std::time::Instant::now();
            let out = Command::new(binary("raftlock"))
                .args(["--endpoints", &endpoint])
                .args(extra)
                .arg("status")
                .output()
                .unwrap();
            (out, began.elapsed())
        })
    };
    for (addr, extra, within) in [
        (&down_addr, &["--command-timeout", "1s"][..], 4),
        (
            &frozen_addr,
            &["--command-timeout", "1s", "--dial-timeout", "500ms"][..],
            4,
        ),
        (&frozen_addr, &[][..], 11),
    ] {
        let (out, took) = run(addr.clone(), extra).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{addr} {extra:?}: {stderr}");
        assert!(
            stderr.contains("cannot reach the cluster"),
            "{addr} {extra:?}: {stderr}"
        );
        assert!(
            took < Duration::from_secs(within),
            "{addr} {extra:?}: gave up after {took:?}, not within {within} s"
        );
    }
    drop(frozen);
}
