//! The 3-node cluster the bench starts itself (`failover`, `scale`,
//! `--start-cluster`), so it can kill a node by PID and restart it on the
//! same data dir: a [`raftlock_local`] cluster on loopback, free ports and a
//! temporary directory, every process it started killed when it is dropped
//! (or when the bench dies).

use anyhow::{bail, Context};
pub use raftlock_local::LocalCluster;
use std::path::{Path, PathBuf};

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
