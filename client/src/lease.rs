//! A session's lease as this client judges it (DESIGN.md rule 4): the
//! session counts as valid only until the send time of the last
//! acknowledged keep-alive plus the TTL minus a safety margin. Past that,
//! the client reports it lost and never calls it valid again, even if a late
//! acknowledgement arrives: the leader may already have expired it.
//!
//! Kept apart from the session so that the keep-alive task, which records
//! acknowledgements and losses here, needs nothing else of a session.

use crate::error::Error;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The safety margin this library takes off a session's TTL (DESIGN.md
/// rule 4): it covers the leader's and client's clocks running at slightly
/// different rates, and scheduling delays. A session counts as valid until
/// the send time of its last acknowledged keep-alive + TTL − this margin.
///
/// ```
/// use std::time::Duration;
/// let ttl = Duration::from_secs(10);
/// assert_eq!(raftlock_client::safety_margin(ttl), Duration::from_secs(1));
/// assert_eq!(raftlock_client::safety_margin(Duration::from_secs(1)), Duration::from_millis(100));
/// ```
pub fn safety_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(100))
}

#[derive(Clone, Debug)]
enum State {
    Valid {
        until: Instant,
    },
    /// Why it ended, and the deadline it had then.
    Ended(Error, Instant),
}

/// Shared by the session and the keep-alive task; only acknowledged
/// keep-alives move its deadline, and only forward.
pub(crate) struct Lease {
    pub(crate) id: u64,
    pub(crate) ttl: Duration,
    state: watch::Sender<State>,
}

impl Lease {
    /// The lease of a session created by a request sent at `sent`.
    pub(crate) fn new(id: u64, ttl: Duration, sent: Instant) -> Lease {
        let (state, _) = watch::channel(State::Valid {
            until: sent + ttl - safety_margin(ttl),
        });
        Lease { id, ttl, state }
    }

    pub(crate) fn until(&self) -> Result<Instant, Error> {
        match &*self.state.borrow() {
            State::Valid { until } if Instant::now() < *until => Ok(*until),
            State::Valid { .. } => Err(Error::SessionLost(self.id)),
            State::Ended(e, _) => Err(e.clone()),
        }
    }

    /// The last deadline computed, passed or not.
    pub(crate) fn last_until(&self) -> Instant {
        match &*self.state.borrow() {
            State::Valid { until } | State::Ended(_, until) => *until,
        }
    }

    /// Records an acknowledged keep-alive sent at `sent`, unless the session
    /// already counted as lost.
    pub(crate) fn acknowledged(&self, sent: Instant) {
        let now = Instant::now();
        self.state.send_modify(|s| {
            if let State::Valid { until } = s {
                if now >= *until {
                    *s = State::Ended(Error::SessionLost(self.id), *until);
                } else {
                    *until = (*until).max(sent + self.ttl - safety_margin(self.ttl));
                }
            }
        });
    }

    pub(crate) fn end(&self, e: Error) {
        self.state.send_modify(|s| {
            if let State::Valid { until } = s {
                *s = State::Ended(e, *until);
            }
        });
    }

    /// Resolves when the lease is lost or ended, with the reason.
    pub(crate) async fn lost(&self) -> Error {
        let mut rx = self.state.subscribe();
        loop {
            let until = match self.until() {
                Ok(u) => u,
                Err(e) => return e,
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                r = rx.changed() => if r.is_err() { return Error::SessionLost(self.id) },
            }
        }
    }
}
