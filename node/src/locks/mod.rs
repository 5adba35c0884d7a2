//! The lock service: sessions, locks, elections and rate limits as typed
//! operations, with no transport in sight. gRPC (and any other API) parses
//! a request into one of the operations of `ops/` (one file each), hands it
//! to [`Locks::run`] — the one pipeline, in `pipeline.rs`, that checks it,
//! authorizes it, proposes it and maps the reply — and turns the typed
//! answer or [`NodeError`] back into its own form. Reads (describe, list,
//! leader, observe, watch) are methods of [`Locks`] that read the applied
//! state after a linearizable round. Everything a lock service decides —
//! rights, limits, session ownership, waiting in the queue, rechecks after
//! a missed wake-up, the span of the request — is decided here, once.
//!
//! Transports keep what is theirs: credentials into a [`Caller`](crate::auth::Caller),
//! per-connection slots, stream plumbing.

pub mod call;
mod elections;
#[cfg(test)]
pub mod fake;
pub mod lease;
pub mod ops;
pub mod pipeline;
pub mod rates;
mod reads;
pub mod waits;
pub mod watch;

pub use call::{Call, OpCall};
pub use ops::*;
pub use pipeline::Operation;
pub use reads::{Description, ListPage, SessionPage, SessionQuery, SessionView};

use crate::error::NodeError;
use crate::replica::Replica;
use lease::LeaseDriver;
use raftlock_store::machine::SessionId;
use std::sync::Arc;
use std::time::Duration;
use waits::Waits;

/// The lock, session and election service of one node.
#[derive(Clone)]
pub struct Locks {
    replica: Arc<dyn Replica>,
    waits: Arc<Waits>,
    leases: Arc<LeaseDriver>,
    watches: Arc<watch::WatchHub>,
    rates: Arc<rates::Rates>,
}

impl Locks {
    /// Starts the lock service on `replica`: what the state machine applies
    /// wakes the waits it settles ([`Waits`]) and tells the lease driver
    /// of new sessions and grants ([`LeaseDriver`]), which then runs on
    /// the leader; watchers are fed from the last `watch_history` events.
    pub fn start(replica: Arc<dyn Replica>, watch_history: usize) -> Self {
        let state = replica.state().clone();
        let waits = Arc::new(Waits::default());
        {
            let waits = waits.clone();
            state.observe(move |batch| waits.on_changes(batch));
        }
        let leases = LeaseDriver::new(replica.clone());
        {
            // Weak: the state (through its observers) must not keep the
            // driver, and with it the replica, alive.
            let leases = Arc::downgrade(&leases);
            state.observe(move |batch| {
                if let Some(leases) = leases.upgrade() {
                    leases.on_changes(batch);
                }
            });
        }
        tokio::spawn(leases.clone().run());
        let watches = watch::WatchHub::start(state, watch_history);
        Locks {
            replica,
            waits,
            leases,
            watches,
            rates: Arc::default(),
        }
    }

    /// The waits in progress, for the metrics that count them.
    pub fn waits(&self) -> &Arc<Waits> {
        &self.waits
    }

    /// The replica served.
    pub fn replica(&self) -> &Arc<dyn Replica> {
        &self.replica
    }

    /// The lock events of the last `n` commands this node applied, for
    /// the inspector page (not a watch: no resume, no order promise
    /// beyond these).
    pub fn recent_events(&self, n: usize) -> Vec<Arc<watch::Watched>> {
        self.watches.recent(n)
    }

    /// Time left for `session` on this node if it leads.
    pub fn session_time_left(&self, session: SessionId) -> Option<Duration> {
        self.leases.remaining(session)
    }

    fn term(&self) -> u64 {
        self.replica.term()
    }
}

/// One page of a listing.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    /// Only names starting with this.
    pub prefix: String,
    /// The `next_page_token` of the previous page, or empty.
    pub page_token: String,
    /// At most this many locks (0 for the default).
    pub limit: u32,
}

/// A stream fed by a task through a bounded channel; the task stops when
/// the receiver (the client's stream) goes away.
pub fn stream_from_task<T, F, Fut>(f: F) -> impl futures::Stream<Item = T>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Checks a session id is plausible (ids come from log indexes, never 0).
fn session_id(id: SessionId) -> Result<SessionId, NodeError> {
    if id == 0 {
        return Err(NodeError::InvalidArgument("session_id is required".into()));
    }
    Ok(id)
}

/// A reply that does not fit its command: a fault of the server's own.
fn unexpected(reply: impl std::fmt::Display) -> NodeError {
    NodeError::Internal(format!("unexpected reply {reply}"))
}

#[cfg(test)]
mod tests;
