//! The 3-node cluster the bench starts itself (`failover`, `scale`,
//! `--start-cluster`), so it can kill a node by PID and restart it on the
//! same data dir: a [`raftlock_local`] cluster on loopback, free ports and a
//! temporary directory, every process it started killed when it is dropped
//! (or when the bench dies).

use anyhow::{bail, Context};
pub use raftlock_local::LocalCluster;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `raftlockd` beside this executable (where cargo and packages put both),
/// unless `explicit` names one.
pub fn find_raftlockd(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let me = std::env::current_exe().context("cannot find this executable")?;
    let beside = me.with_file_name("raftlockd");
    if beside.exists() {
        return Ok(beside);
    }
    bail!(
        "no raftlockd beside {}; pass --raftlockd PATH",
        me.display()
    )
}

/// Starts 3 nodes of `exe` and waits for a leader.
pub async fn start(exe: PathBuf) -> anyhow::Result<LocalCluster> {
    Ok(LocalCluster::start(raftlock_local::Options::new(exe, 3)).await?)
}

/// Bytes in MiB, to one decimal.
pub fn mib(bytes: f64) -> f64 {
    (bytes / (1024.0 * 1024.0) * 10.0).round() / 10.0
}

/// `VmRSS` and `VmHWM` of `pid`, in bytes (Linux; zeros elsewhere).
pub fn rss(pid: Option<u32>) -> (f64, f64) {
    proc_sizes(pid, "status", ["VmRSS:", "VmHWM:"])
}

/// `Anonymous` and `AnonHugePages` of `pid` in bytes (Linux; zeros
/// elsewhere): the resident memory that is the process's own (heap,
/// stacks), without the pages of its binary, and how much of it the kernel
/// backs with transparent huge pages.
pub fn rss_anon(pid: Option<u32>) -> (f64, f64) {
    proc_sizes(pid, "smaps_rollup", ["Anonymous:", "AnonHugePages:"])
}

/// Two `Name: N kB` lines of `/proc/PID/FILE`, in bytes.
fn proc_sizes(pid: Option<u32>, file: &str, names: [&str; 2]) -> (f64, f64) {
    let Some(text) = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/{file}")).ok())
    else {
        return (0.0, 0.0);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb * 1024.0)
            .unwrap_or(0.0)
    };
    (field(names[0]), field(names[1]))
}

/// The node's Prometheus text, by a plain HTTP/1.0 GET.
pub async fn scrape(addr: &str) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut body)).await??;
    Ok(body)
}

/// The value of the first sample named exactly `name` (no labels).
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (n, v) = l.split_once(' ')?;
        (n == name).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Open file descriptors of `pid` (Linux; 0 elsewhere).
pub fn open_fds(pid: Option<u32>) -> u64 {
    pid.and_then(|p| std::fs::read_dir(format!("/proc/{p}/fd")).ok())
        .map_or(0, |d| d.count() as u64)
}
