//! Storage faults a node cannot repair by itself, on real processes: a
//! storage error outside the log stops the process, not just its Raft core;
//! a leader whose disk hangs instead of failing stops, so that the others
//! elect another.

use super::disk::{churn, log_of, wait_exit};
use super::lost_state::grant;
use raftlock_tests::Cluster;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_follower_that_cannot_write_its_snapshot_exits_naming_the_file() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "100"]).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    // The snapshot is written to snapshot.tmp and renamed: a directory in
    // its place makes every snapshot write fail.
    let tmp = cluster.node(follower).data_dir.join("snapshot.tmp");
    std::fs::create_dir(&tmp).unwrap();
    churn(&cluster, 120).await;
    let status = wait_exit(&mut cluster, follower, Duration::from_secs(30)).await;
    assert!(!status.success(), "exited {status}");
    let log = log_of(&cluster, follower);
    assert!(log.contains("raft's core stopped"), "{log}");
    assert!(
        log.contains("snapshot.tmp"),
        "the message names the file: {log}"
    );
    // The other two go on.
    churn(&cluster, 3).await;
    std::fs::remove_dir(&tmp).unwrap();
}

/// Each of a cluster's data dirs on a FUSE passthrough of its own
/// (`raftlock-jepsen faultfs`): after SIGUSR1 its writes, fsyncs and
/// fallocates hang until SIGUSR2, while reads and `stat` still answer, as
/// on a disk whose write queue is stuck.
struct HangableDisks {
    mounts: Vec<(PathBuf, std::process::Child)>,
}

impl HangableDisks {
    /// Moves the data dirs of `cluster`'s stopped nodes onto faultfs
    /// mounts; `None` where FUSE cannot mount.
    fn mount(cluster: &Cluster) -> Option<HangableDisks> {
        let base = tempfile::tempdir().unwrap().keep();
        let mut disks = HangableDisks { mounts: Vec::new() };
        for node in cluster.nodes() {
            let back = base.join(format!("back-{}", node.id));
            let mnt = base.join(format!("disk-{}", node.id));
            std::fs::create_dir_all(&back).unwrap();
            std::fs::create_dir_all(&mnt).unwrap();
            let mut child = Command::new(raftlock_tests::binary("raftlock-jepsen"))
                .arg("faultfs")
                .arg(&back)
                .arg(&mnt)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let mut line = String::new();
            let stdout = child.stdout.take().unwrap();
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
            disks.mounts.push((mnt.clone(), child));
            if line.trim() != "mounted" {
                return None;
            }
            let to = mnt.join("node");
            let ok = Command::new("cp")
                .arg("-a")
                .arg(&node.data_dir)
                .arg(&to)
                .status()
                .unwrap();
            assert!(ok.success());
            std::fs::remove_dir_all(&node.data_dir).unwrap();
            std::os::unix::fs::symlink(&to, &node.data_dir).unwrap();
        }
        Some(disks)
    }

    fn signal(&self, id: u64, sig: nix::sys::signal::Signal) {
        let pid = self.mounts[id as usize - 1].1.id() as i32;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
    }

    /// Hangs (`true`) or frees the disk of node `id`.
    fn hang(&self, id: u64, on: bool) {
        use nix::sys::signal::Signal;
        self.signal(id, if on { Signal::SIGUSR1 } else { Signal::SIGUSR2 });
    }
}

impl Drop for HangableDisks {
    fn drop(&mut self) {
        for (mnt, child) in &mut self.mounts {
            // It answers what it parked and unmounts on SIGTERM; a lazy
            // unmount covers one that cannot.
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(&*mnt)
                .stderr(std::process::Stdio::null())
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test]
async fn a_leader_whose_disk_hangs_gives_way_and_the_others_serve() {
    let mut cluster = Cluster::start(3).await;
    for id in 1..=3 {
        cluster.kill(id);
    }
    let Some(disks) = HangableDisks::mount(&cluster) else {
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_FUSE").is_none(),
            "FUSE cannot mount here, and RAFTLOCK_REQUIRE_FUSE is set"
        );
        eprintln!("skipped: needs FUSE (/dev/fuse, fusermount3, root)");
        return;
    };
    for id in 1..=3 {
        cluster.start_node(id);
    }
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let before = grant(&cluster, Duration::from_secs(10))
        .await
        .expect("the cluster grants before the disk hangs");
    disks.hang(leader, true);
    let hung = Instant::now();
    // The next grant comes from another leader, within the stall limit
    // (2 s) and an election.
    let after = grant(&cluster, Duration::from_secs(20)).await;
    let took = hung.elapsed();
    eprintln!("a grant {took:?} after node {leader}'s disk hung: {after:?}");
    let now = cluster.wait_for_leader(Duration::from_secs(5)).await;
    disks.hang(leader, false);
    let after = after.unwrap_or_else(|| {
        panic!(
            "no grant in {took:?} after node {leader}'s disk hung\n{}",
            log_of(&cluster, leader)
        )
    });
    assert!(after > before);
    assert_ne!(now, leader);
    assert!(took < Duration::from_secs(15), "{took:?}");
    let status = wait_exit(&mut cluster, leader, Duration::from_secs(10)).await;
    assert!(!status.success());
    let log = log_of(&cluster, leader);
    assert!(log.contains("the disk hangs"), "{log}");
}

/// A node stopped in the middle of a sync (SIGSTOP here; a paused virtual
/// machine or a starved process alike) is not a node whose disk hangs. The
/// stall watch counted the wall clock, so a node paused for longer than
/// the limit (2 s) while a sync was under way took its own pause for a
/// hung disk and stopped the moment it woke.
#[tokio::test]
async fn a_node_paused_in_the_middle_of_a_sync_keeps_running_when_it_wakes() {
    // Every sync takes 150 ms more: a node under load is nearly always in
    // one (elections wait longer to match).
    let mut cluster = Cluster::start_with(
        3,
        &[
            "--fault-sync-delay-ms",
            "150",
            "--election-timeout-ms",
            "2000",
        ],
    )
    .await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let client = cluster.client().await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let session = client.session(Duration::from_secs(30)).await.unwrap();
            let mut grants = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(Some(g)) = session.lock("pause/l").try_acquire().await {
                    grants += 1;
                    let _ = g.release().await;
                }
            }
            grants
        })
    };
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        cluster.pause(follower);
        tokio::time::sleep(Duration::from_secs(4)).await;
        cluster.resume(follower);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            cluster.exited(follower).is_none(),
            "node {follower} stopped after a pause:\n{}",
            log_of(&cluster, follower)
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let grants = load.await.unwrap();
    assert!(grants > 0, "no load ran while the node was paused");
    let log = log_of(&cluster, follower);
    assert!(!log.contains("the disk hangs"), "{log}");
}
