//! How soon a peer that could not be reached is called again.

use super::PeerNetwork;
use std::time::Duration;

impl PeerNetwork {
    /// Tries a peer that could not be reached again after `heartbeat`
    /// for the first 3 s of an outage, then every 500 ms.
    pub fn retry_unreachable_every(mut self, heartbeat: Duration) -> Self {
        self.retry = heartbeat;
        self
    }
}

/// How long into an outage a peer is tried again every heartbeat rather
/// than every [`SLOW_RETRY`].
///
/// A member of a new cluster that starts after the others elected a leader
/// waits one election timeout (300 ms by default) for that leader to reach
/// it before it initializes and stands for election itself
/// (`server/storage.rs`); openraft's own retry, every 500 ms, would often
/// come too late. A node restarting from its data dir after following a
/// leader waits a lease and a timeout (900 ms or more) before it campaigns,
/// longer than `SLOW_RETRY`. So once the window has passed the slower retry
/// keeps a peer that stays down from filling the log (openraft writes four
/// lines per failed call).
pub(super) const FAST_RETRY_WINDOW: Duration = Duration::from_secs(3);

/// openraft's retry interval for a peer that could not be reached.
const SLOW_RETRY: Duration = Duration::from_millis(500);

/// The waits before each retry of a peer that could not be reached: every
/// `heartbeat` for [`FAST_RETRY_WINDOW`], then every [`SLOW_RETRY`].
pub(super) fn unreachable_retries(
    heartbeat: Duration,
) -> impl Iterator<Item = Duration> + Send + 'static {
    // A heartbeat of a few ms would retry a dead peer hundreds of times.
    let heartbeat = heartbeat.clamp(Duration::from_millis(50), SLOW_RETRY);
    let fast = (FAST_RETRY_WINDOW.as_nanos() / heartbeat.as_nanos()) as usize;
    std::iter::repeat_n(heartbeat, fast).chain(std::iter::repeat(SLOW_RETRY))
}
