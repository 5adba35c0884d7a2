//! Disks that fail, on real processes: a damaged byte in a durable part of
//! the log, a full disk on the leader, a crash loop, two processes on one
//! data dir, a data dir whose log is gone.

use raftlock_tests::{binary, Cluster};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// Waits for node `id` to exit by itself; panics with its log if it has
/// not within `within`.
pub(crate) async fn wait_exit(cluster: &mut Cluster, id: u64, within: Duration) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = cluster.exited(id) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "node {id} is still running after {within:?}:\n{}",
            log_of(cluster, id)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `cmd` to its end, or kills it after `within` (a process that should
/// have been refused but serves instead): its output, and whether it ended
/// by itself.
fn run_bounded(cmd: &mut Command, within: Duration) -> (std::process::Output, bool) {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + within;
    let mut ended = true;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            ended = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child.wait_with_output().unwrap(), ended)
}

pub(crate) fn log_of(cluster: &Cluster, id: u64) -> String {
    std::fs::read_to_string(&cluster.node(id).log).unwrap_or_default()
}

pub(crate) fn wal_files(data_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir.join("wal"))
        .expect("the data dir has a wal/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    files.sort();
    files
}

/// Offsets of the batches in a format 2 segment, in order (of the records
/// in a format 1 segment, which releases before batches wrote).
fn batches(segment: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 16usize;
    if segment[8..12] == 1u32.to_le_bytes() {
        loop {
            let len = u32::from_le_bytes(segment[at..at + 4].try_into().unwrap()) as usize;
            if len == 0 {
                return out;
            }
            out.push(at as u64);
            at += 8 + len;
        }
    }
    while at + 32 <= segment.len() && segment[at..at + 32].iter().any(|b| *b != 0) {
        assert_eq!(&segment[at..at + 4], b"RLB\x02", "a batch header at {at}");
        out.push(at as u64);
        let len = u32::from_le_bytes(segment[at + 24..at + 28].try_into().unwrap()) as usize;
        at += (32 + len).div_ceil(8) * 8;
    }
    out
}

/// Flips a byte inside the records of a batch a third of the way into the
/// node's newest segment: durable long ago, with many batches after it.
fn damage_the_middle_of_the_log(data_dir: &Path) -> (PathBuf, u64) {
    let file = wal_files(data_dir).pop().expect("a segment");
    let mut bytes = std::fs::read(&file).unwrap();
    let offsets = batches(&bytes);
    assert!(offsets.len() > 60, "{} batches", offsets.len());
    let at = offsets[offsets.len() / 3] as usize + 20;
    bytes[at] ^= 0x5a;
    std::fs::write(&file, &bytes).unwrap();
    (file, offsets[offsets.len() / 3])
}

/// Acquires and releases `n` locks: at least `n` log entries.
pub(crate) async fn churn(cluster: &Cluster, n: usize) -> u64 {
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(30)).await.unwrap();
    let mut token = 0;
    for i in 0..n {
        let guard = session
            .lock(format!("disk/{}", i % 7))
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        token = token.max(guard.token());
        guard.release().await.unwrap();
    }
    token
}

#[tokio::test]
async fn a_damaged_durable_record_stops_the_node_instead_of_shortening_its_log() {
    let mut cluster = Cluster::start(3).await;
    let highest = churn(&cluster, 150).await;
    for id in 1..=3 {
        cluster.kill(id);
    }
    // Damaged on two of three nodes: a majority that would elect a leader
    // on a shortened log and issue tokens again.
    let (file, offset) = damage_the_middle_of_the_log(&cluster.node(1).data_dir.clone());
    damage_the_middle_of_the_log(&cluster.node(2).data_dir.clone());
    for id in [1, 2] {
        cluster.start_node(id);
    }
    for id in [1, 2] {
        let status = wait_exit(&mut cluster, id, Duration::from_secs(20)).await;
        assert!(!status.success(), "node {id} must refuse to start");
        let log = log_of(&cluster, id);
        assert!(
            log.contains("the write-ahead log is damaged"),
            "node {id}:\n{log}"
        );
        assert!(log.contains("The last good entry is index"), "{log}");
    }
    let log = log_of(&cluster, 1);
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        log.contains(&format!("{name} at offset {offset}")),
        "the message names the file and offset ({name} at {offset}):\n{log}"
    );
    // The offline check says the same, and exits 1.
    let out = Command::new(binary("raftlockd"))
        .args(["check", "--data-dir"])
        .arg(&cluster.node(1).data_dir)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("DAMAGED"), "{report}");
    // The undamaged node checks clean.
    let out = Command::new(binary("raftlockd"))
        .args(["check", "--data-dir"])
        .arg(&cluster.node(3).data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(highest > 0);
}

#[tokio::test]
async fn restarts_do_not_grow_the_log() {
    let mut cluster = Cluster::start(3).await;
    churn(&cluster, 20).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let id = if leader == 3 { 2 } else { 3 };
    let dir = cluster.node(id).data_dir.clone();
    let before = wal_files(&dir);
    for _ in 0..12 {
        cluster.kill(id);
        cluster.start_node(id);
        cluster.wait_for_listeners(Duration::from_secs(20)).await;
    }
    let after = wal_files(&dir);
    assert_eq!(after, before, "12 restarts added segments");
    let bytes: u64 = after
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(bytes <= 64 << 20, "{bytes} bytes of log");
}

#[tokio::test]
async fn a_second_process_on_a_live_data_dir_is_refused_before_it_writes() {
    let cluster = Cluster::start(3).await;
    churn(&cluster, 10).await;
    let node = cluster.node(2);
    let (dir, pid) = (node.data_dir.clone(), node.pid().unwrap());
    let snapshot = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        wal_files(dir)
            .into_iter()
            .map(|f| (f.clone(), std::fs::read(&f).unwrap()))
            .collect()
    };
    // The node writes on its own (heartbeats do not, but an entry might):
    // compare only what a second process could have written, its header.
    let before = snapshot(&dir);
    let free = |n| {
        (0..n)
            .map(|_| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                format!("127.0.0.1:{}", l.local_addr().unwrap().port())
            })
            .collect::<Vec<_>>()
    };
    let ports = free(2);
    let (second, ended) = run_bounded(
        Command::new(binary("raftlockd"))
            .args(["--id", "2", "--data-dir"])
            .arg(&dir)
            .args(["--listen-client", &ports[0], "--listen-peer", &ports[1]])
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        ended,
        "a second raftlockd served on a live data dir:\n{err}"
    );
    assert!(!second.status.success(), "{err}");
    assert!(
        err.contains(&format!("in use by another process (pid {pid})")),
        "{err}"
    );
    let (recover, _) = run_bounded(
        Command::new(binary("raftlockd"))
            .args(["recover", "--force-new-cluster", "--id", "2", "--data-dir"])
            .arg(&dir)
            .args(["--initial-cluster", &format!("2={}/{}", ports[1], ports[0])])
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&recover.stderr);
    assert!(!recover.status.success(), "{err}");
    assert!(err.contains("in use by another process"), "{err}");
    assert!(dir.exists(), "recover moved a live data dir aside");
    let after = snapshot(&dir);
    assert_eq!(
        before.iter().map(|(f, _)| f).collect::<Vec<_>>(),
        after.iter().map(|(f, _)| f).collect::<Vec<_>>(),
        "segments changed"
    );
    // The first node still serves.
    assert!(cluster.node(2).is_running());
    churn(&cluster, 3).await;
}

#[tokio::test]
async fn a_data_dir_whose_log_is_gone_refuses_to_start() {
    let mut cluster = Cluster::start(3).await;
    churn(&cluster, 10).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let id = if leader == 1 { 2 } else { 1 };
    cluster.kill(id);
    let dir = cluster.node(id).data_dir.clone();
    std::fs::remove_dir_all(dir.join("wal")).unwrap();
    cluster.start_node(id);
    let status = wait_exit(&mut cluster, id, Duration::from_secs(20)).await;
    assert!(!status.success());
    let log = log_of(&cluster, id);
    assert!(log.contains("no write-ahead log (wal/)"), "{log}");
    assert!(!dir.join("wal").exists(), "an empty log was created");
}

/// A tmpfs of `mb` MiB mounted at each of `dirs` for as long as it lives.
struct Mounts(Vec<PathBuf>);

impl Mounts {
    fn new(dirs: &[PathBuf], mb: u64) -> Option<Mounts> {
        let mut mounts = Mounts(Vec::new());
        for d in dirs {
            std::fs::create_dir_all(d).unwrap();
            let ok = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
                .arg(d)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return None;
            }
            mounts.0.push(d.clone());
        }
        Some(mounts)
    }
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = Command::new("umount").arg("-l").arg(d).status();
            let _ = std::fs::remove_dir(d);
        }
        if let Some(base) = self.0.first().and_then(|d| d.parent()) {
            let _ = std::fs::remove_dir(base);
        }
    }
}

/// Fills the file system of `dir` to the last byte.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0xaau8; 64 << 10];
    while f.write_all(&chunk).is_ok() {}
    let mut small = vec![0xaau8; 512];
    while !small.is_empty() {
        if f.write_all(&small).is_err() {
            small.truncate(small.len() / 2);
        }
    }
    let _ = f.sync_all();
}

/// Starts 3 nodes with `args`, each with its data dir on a tmpfs of `mb`
/// MiB of its own; `None` (and no cluster) where tmpfs cannot be mounted.
async fn cluster_on_tmpfs(mb: u64, args: &[&str]) -> Option<(Cluster, Vec<PathBuf>, Mounts)> {
    let base = tempfile::tempdir().unwrap().keep();
    let dirs: Vec<PathBuf> = (1..=3).map(|i| base.join(format!("d{i}"))).collect();
    let Some(mounts) = Mounts::new(&dirs, mb) else {
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_ROOT").is_none(),
            "tmpfs cannot be mounted here, and RAFTLOCK_REQUIRE_ROOT is set"
        );
        eprintln!("skipped: mounting a tmpfs needs root");
        return None;
    };
    let mut cluster = Cluster::start_with(3, args).await;
    // The nodes' data dirs are the launcher's; move each onto its tmpfs.
    for id in 1..=3 {
        cluster.kill(id);
    }
    for id in 1..=3 {
        let from = cluster.node(id).data_dir.clone();
        let to = dirs[id as usize - 1].join("node");
        let ok = Command::new("cp")
            .arg("-a")
            .arg(&from)
            .arg(&to)
            .status()
            .unwrap();
        assert!(ok.success());
        std::fs::remove_dir_all(&from).unwrap();
        std::os::unix::fs::symlink(&to, &from).unwrap();
    }
    for id in 1..=3 {
        cluster.start_node(id);
    }
    Some((cluster, dirs, mounts))
}

#[tokio::test]
async fn a_full_disk_on_the_leader_ends_its_leadership_not_the_service() {
    // 1 MiB segments, so that the log needs new space after a few hundred
    // grants; no reserve, so the disk really fills (another process may
    // fill it faster than the reserve is measured).
    let Some((mut cluster, dirs, _mounts)) =
        cluster_on_tmpfs(24, &["--wal-segment-mb", "1", "--space-reserve-mb", "0"]).await
    else {
        return;
    };
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    fill(&dirs[leader as usize - 1]);
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(30)).await.unwrap();
    let metadata = vec![7u8; 4096];
    let started = Instant::now();
    let mut exited = None;
    let mut last_ok = Instant::now();
    let mut longest_gap = Duration::ZERO;
    let mut grants_after = 0;
    while started.elapsed() < Duration::from_secs(60) {
        let name = format!("full/{}", grants_after % 5);
        let result = session
            .lock(&name)
            .metadata(metadata.clone())
            .try_acquire()
            .await;
        if let Ok(Some(guard)) = result {
            let _ = guard.release().await;
            longest_gap = longest_gap.max(last_ok.elapsed());
            last_ok = Instant::now();
            if exited.is_some() {
                grants_after += 1;
                if grants_after >= 20 {
                    break;
                }
            }
        }
        if exited.is_none() {
            exited = cluster.exited(leader).map(|s| (s, Instant::now()));
        }
    }
    let (status, stopped_at) = exited.unwrap_or_else(|| {
        panic!(
            "the leader with a full disk is still running:\n{}",
            log_of(&cluster, leader)
        )
    });
    assert!(!status.success());
    let log = log_of(&cluster, leader);
    assert!(
        log.contains("the write-ahead log failed"),
        "the leader says why it stopped:\n{log}"
    );
    assert!(
        grants_after >= 20,
        "the two healthy nodes serve: {grants_after} grants after the leader stopped"
    );
    let new = cluster
        .wait_for_new_leader(leader, Duration::from_secs(20))
        .await;
    assert_ne!(new, leader);
    eprintln!(
        "leader {leader} stopped {:?} after its disk filled; node {new} leads; longest gap between grants {longest_gap:?}; {grants_after} grants after",
        stopped_at - started
    );
    // Election timeouts are 300-600 ms; a follower waits its lease first.
    assert!(
        longest_gap < Duration::from_secs(10),
        "no grant for {longest_gap:?}"
    );
    for id in 1..=3 {
        if id != leader {
            cluster.kill(id);
        }
    }
}

/// A 3-node cluster with one lock held and 150 grants in its log, one of
/// its followers stopped with the middle of its log damaged: the cluster,
/// a session, the held lock's token, the leader, the damaged node.
async fn with_a_damaged_follower(lock: &str) -> (Cluster, raftlock_client::Session, u64, u64, u64) {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(60)).await.unwrap();
    let held = session.lock(lock).try_acquire().await.unwrap().unwrap();
    let token = held.token();
    std::mem::forget(held);
    churn(&cluster, 150).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let damaged = (1..=3).find(|&i| i != leader).unwrap();
    cluster.kill(damaged);
    damage_the_middle_of_the_log(&cluster.node(damaged).data_dir.clone());
    (cluster, session, token, leader, damaged)
}

/// The runbook of `docs/operations.md`, "When a disk fails", step by step
/// with the CLI: a node whose log is damaged is rebuilt from the majority
/// under a new id, and serves as a voter again.
#[tokio::test]
async fn the_runbook_rebuilds_a_damaged_node_from_the_majority() {
    let (mut cluster, session, held, leader, damaged) = with_a_damaged_follower("disk/held").await;
    let client = cluster.client().await;
    let dir = cluster.node(damaged).data_dir.clone();
    cluster.start_node(damaged);
    assert!(!wait_exit(&mut cluster, damaged, Duration::from_secs(20))
        .await
        .success());
    // 1. check reads the damage.
    let out = Command::new(binary("raftlockd"))
        .args(["check", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // 3. remove it from the voters.
    cluster.cli(&["members", "remove", &damaged.to_string()]);
    // 4. set its data dir aside.
    std::fs::rename(&dir, dir.with_extension("damaged")).unwrap();
    // 5. a new id, empty, added as a learner.
    let id = cluster.start_new_node();
    let (peer, addr) = {
        let n = cluster.node(id);
        (n.peer_addr.clone(), n.client_addr.clone())
    };
    cluster.cli(&["members", "add-learner", &id.to_string(), &peer, &addr]);
    // 6. promoted once caught up (promote waits for that).
    cluster.cli(&["members", "promote", &id.to_string()]);
    // The rebuilt node is a voter with the state: with the other healthy
    // follower gone, the leader and it still commit.
    let other = (1..=3).find(|&i| i != leader && i != damaged).unwrap();
    cluster.kill(other);
    let d = client.describe("disk/held").await.unwrap();
    assert_eq!(d.holders.len(), 1);
    assert_eq!(d.holders[0].token, held);
    let g = session
        .lock("disk/after")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(g.token() > held);
}

/// `raftlockd repair`: refused while no healthy majority can remove the
/// node; with one, the node rejoins under its own id and with its usual
/// flags (`--initial-cluster` included, which it must not bootstrap from).
#[tokio::test]
async fn raftlockd_repair_rebuilds_a_damaged_node_under_its_own_id() {
    let (mut cluster, session, held, leader, damaged) =
        with_a_damaged_follower("repair/held").await;
    let client = cluster.client().await;
    let other = (1..=3).find(|&i| i != leader && i != damaged).unwrap();
    let dir = cluster.node(damaged).data_dir.clone();
    let repair = |endpoints: String| {
        run_bounded(
            Command::new(binary("raftlockd"))
                .args(["repair", "--id", &damaged.to_string(), "--data-dir"])
                .arg(&dir)
                .args(["--endpoints", &endpoints])
                .env("RUST_BACKTRACE", "0"),
            Duration::from_secs(60),
        )
        .0
    };
    // No healthy majority: the leader alone cannot remove anyone.
    cluster.kill(other);
    let out = repair(cluster.node(leader).client_addr.clone());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("majority"), "{err}");
    assert!(
        !dir.with_extension("damaged").exists() && dir.join("wal").exists(),
        "a refused repair changed the data dir"
    );
    cluster.start_node(other);
    cluster.wait_for_listeners(Duration::from_secs(20)).await;
    let endpoints = [leader, other]
        .map(|i| cluster.node(i).client_addr.clone())
        .join(",");
    let out = repair(endpoints);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("damaged: "), "{said}");
    assert!(said.contains("removed node"), "{said}");
    // Started as before, with --initial-cluster: it waits to be added.
    cluster.start_node(damaged);
    let (peer, addr) = {
        let n = cluster.node(damaged);
        (n.peer_addr.clone(), n.client_addr.clone())
    };
    cluster.cli(&["members", "add-learner", &damaged.to_string(), &peer, &addr]);
    cluster.cli(&["members", "promote", &damaged.to_string()]);
    assert!(
        log_of(&cluster, damaged).contains("set up to rejoin its cluster"),
        "{}",
        log_of(&cluster, damaged)
    );
    cluster.kill(other);
    let d = client.describe("repair/held").await.unwrap();
    assert_eq!(d.holders.len(), 1);
    assert_eq!(d.holders[0].token, held);
    let g = session
        .lock("repair/after")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(g.token() > held);
}

/// With every voter below the free-space reserve the leader refuses what
/// grows the state with NO_SPACE (gRPC and HTTP 507), keeps what shrinks
/// it, and serves everything again once space returns.
#[tokio::test(flavor = "multi_thread")]
async fn with_no_voter_above_the_space_reserve_the_leader_refuses_growth_and_lets_locks_drain() {
    let Some((cluster, dirs, _mounts)) = cluster_with_a_16_mib_reserve().await else {
        return;
    };
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(3)).await.unwrap();
    let held = session
        .lock("space/held")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    // Every node short of space: no voter has room to take the lead.
    for dir in &dirs {
        leave_8_mib(dir);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match session.lock("space/new").try_acquire().await {
            Err(e @ raftlock_client::Error::NoSpace(_)) => break e,
            Ok(Some(g)) => {
                g.release().await.unwrap();
            }
            Ok(None) => panic!("space/new is held"),
            Err(e) => panic!("{e}"),
        }
        assert!(Instant::now() < deadline, "no NO_SPACE within 10 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(refused.to_string().contains("reserve"), "{refused}");
    assert!(matches!(
        client.session(Duration::from_secs(5)).await,
        Err(raftlock_client::Error::NoSpace(_))
    ));
    // The HTTP API says 507 with the same reason.
    let addr = cluster.node(leader).client_addr.clone();
    let http = raftlock_tests::http_call(
        &addr,
        "POST",
        "/v1/session/create",
        &[],
        &serde_json::json!({"ttl_ms": 5000}).to_string(),
    )
    .await
    .unwrap();
    assert_eq!(http.status, 507, "{}", http.body);
    assert_eq!(http.json()["reason"], "NO_SPACE", "{}", http.body);
    // Keep-alives go on (the session outlives three TTLs), and a release
    // frees the lock.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(
        session.is_valid(),
        "the session was lost while short of space"
    );
    held.release().await.unwrap();
    assert!(client
        .describe("space/held")
        .await
        .unwrap()
        .holders
        .is_empty());
    let free = metric_of(&cluster, leader, "raftlock_data_dir_free_bytes");
    assert!(
        free < (16 << 20) as f64,
        "raftlock_data_dir_free_bytes {free}"
    );
    assert_eq!(metric_of(&cluster, leader, "raftlock_no_space_alarm"), 1.0);
    // Space returns: the alarm clears by itself.
    for dir in &dirs {
        std::fs::remove_file(dir.join("filler")).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match session.lock("space/new").try_acquire().await {
            Ok(Some(_)) => break,
            Err(raftlock_client::Error::NoSpace(_)) => {}
            Ok(None) => panic!("space/new is held"),
            Err(e) => panic!("{e}"),
        }
        assert!(
            Instant::now() < deadline,
            "still NO_SPACE 10 s after space returned"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(metric_of(&cluster, leader, "raftlock_no_space_alarm"), 0.0);
}

/// Three nodes, each on a 48 MiB tmpfs of its own with a 16 MiB reserve.
async fn cluster_with_a_16_mib_reserve() -> Option<(Cluster, Vec<PathBuf>, Mounts)> {
    cluster_on_tmpfs(48, &["--wal-segment-mb", "1", "--space-reserve-mb", "16"]).await
}

/// Fills the file system of `dir` but for 8 MiB: under a 16 MiB reserve,
/// with room for what still gets written.
fn leave_8_mib(dir: &Path) {
    fill(dir);
    let filler = dir.join("filler");
    let len = std::fs::metadata(&filler).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(len.saturating_sub(8 << 20))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_below_the_space_reserve_hands_leadership_to_a_voter_with_room() {
    let Some((cluster, dirs, _mounts)) = cluster_with_a_16_mib_reserve().await else {
        return;
    };
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(10)).await.unwrap();
    leave_8_mib(&dirs[leader as usize - 1]);
    // Within a few seconds another node leads and grants; at most a few
    // refusals while leadership moves.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut refused = 0;
    loop {
        match session.lock("space/moved").try_acquire().await {
            Ok(Some(g)) => {
                g.release().await.unwrap();
                let now = cluster.wait_for_leader(Duration::from_secs(5)).await;
                if now != leader {
                    break;
                }
            }
            Err(raftlock_client::Error::NoSpace(_)) => refused += 1,
            Ok(None) => panic!("space/moved is held"),
            Err(e) => panic!("{e}"),
        }
        assert!(
            Instant::now() < deadline,
            "node {leader} still leads 15 s after its disk fell below the reserve ({refused} calls refused NO_SPACE)\n{}",
            log_of(&cluster, leader)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The new leader serves new sessions too; the short node says it is.
    let fresh = client.session(Duration::from_secs(5)).await.unwrap();
    let g = fresh
        .lock("space/after")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    g.release().await.unwrap();
    assert_eq!(metric_of(&cluster, leader, "raftlock_no_space_alarm"), 1.0);
    assert!(log_of(&cluster, leader).contains("handing leadership to node"));
    std::fs::remove_file(dirs[leader as usize - 1].join("filler")).unwrap();
}

/// A gauge from node `id`'s admin listener.
fn metric_of(cluster: &Cluster, id: u64, name: &str) -> f64 {
    let addr = cluster
        .node(id)
        .metrics_addr
        .clone()
        .expect("nodes have an admin listener");
    let text = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current()
            .block_on(raftlock_tests::http_get(&addr, "/metrics"))
            .unwrap()
            .1
    });
    raftlock_tests::metric(&text, name).unwrap_or_else(|| panic!("no {name} in /metrics"))
}
