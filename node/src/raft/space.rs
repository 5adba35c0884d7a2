//! The free-space reserve of the data dir, like etcd's NOSPACE alarm: below
//! it, calls that grow the replicated state (new sessions, acquires,
//! campaigns, rate-limit takes) are refused with `NO_SPACE`, while
//! everything that shrinks it (keep-alives, releases, closes, expiries,
//! snapshots) goes on, so that locks drain and a snapshot can free log
//! segments. The alarm clears by itself when space returns. Only the
//! leader's disk decides what is refused, since every write goes through
//! it, and a leader below its reserve hands leadership to a voter with
//! room (`transfer::move_leadership_when_low`), so the cluster refuses only while
//! no voter has room; each node publishes its own
//! `raftlock_data_dir_free_bytes` and `raftlock_no_space_alarm` so an
//! alert says which node is short.

use crate::error::NodeError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The reserve when none is configured: 256 MiB, or 5 % of a smaller
/// file system (a 1 GiB volume keeps 51 MiB), enough for a new log
/// segment and a snapshot to be written.
const DEFAULT_RESERVE: u64 = 256 << 20;

/// Whether the data dir is below its reserve.
#[derive(Debug, Default)]
pub struct SpaceAlarm {
    low: AtomicBool,
    free: AtomicU64,
    reserve: AtomicU64,
}

impl SpaceAlarm {
    /// Refuses with `NO_SPACE` while the alarm is raised.
    pub fn check(&self) -> Result<(), NodeError> {
        if !self.low.load(Ordering::Relaxed) {
            return Ok(());
        }
        Err(NodeError::NoSpace(format!(
            "the leader's data dir has {} bytes free, below its reserve of {}: new sessions, acquires and takes are refused until space is freed (releases and keep-alives go on; docs/operations.md, \"When a disk fails\")",
            self.free.load(Ordering::Relaxed),
            self.reserve.load(Ordering::Relaxed)
        )))
    }

    /// Measures `dir` every `every` until `stop`: `configured` is the
    /// reserve in bytes (`Some(0)` turns the alarm off), `None` the
    /// default.
    pub async fn watch(
        self: Arc<Self>,
        dir: PathBuf,
        configured: Option<u64>,
        every: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let free_gauge = metrics::gauge!("raftlock_data_dir_free_bytes");
        let size_gauge = metrics::gauge!("raftlock_data_dir_size_bytes");
        let alarm_gauge = metrics::gauge!("raftlock_no_space_alarm");
        loop {
            match free_and_total(&dir) {
                Ok((free, total)) => {
                    let reserve = configured.unwrap_or(DEFAULT_RESERVE.min(total / 20));
                    self.reserve.store(reserve, Ordering::Relaxed);
                    self.free.store(free, Ordering::Relaxed);
                    free_gauge.set(free as f64);
                    size_gauge.set(total as f64);
                    let low = free < reserve;
                    let was = self.low.swap(low, Ordering::Relaxed);
                    alarm_gauge.set(if low { 1.0 } else { 0.0 });
                    if low && !was {
                        tracing::warn!(
                            data_dir = %dir.display(),
                            free,
                            reserve,
                            "NO_SPACE: the data dir is below its free-space reserve; refusing new sessions, acquires and takes until space is freed"
                        );
                    } else if was && !low {
                        tracing::info!(data_dir = %dir.display(), free, reserve, "space is back above the reserve; serving every call again");
                    }
                }
                Err(e) => {
                    tracing::warn!(data_dir = %dir.display(), error = %e, "cannot read the data dir's free space")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

impl SpaceAlarm {
    /// Whether the data dir is below its reserve now.
    pub fn is_low(&self) -> bool {
        self.low.load(Ordering::Relaxed)
    }
}

/// Bytes free to this process, and the file system's size.
fn free_and_total(dir: &Path) -> nix::Result<(u64, u64)> {
    let s = nix::sys::statvfs::statvfs(dir)?;
    let unit = s.fragment_size() as u64;
    Ok((
        (s.blocks_available() as u64).saturating_mul(unit),
        (s.blocks() as u64).saturating_mul(unit),
    ))
}
