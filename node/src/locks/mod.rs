//! The lock service: sessions, locks and elections as typed operations,
//! with no transport in sight. gRPC (and any other API) parses a request
//! into one of the types below, calls one method of [`Locks`], and turns
//! the typed answer or [`NodeError`] back into its own form; everything a
//! lock service decides — rights, limits, session ownership, waiting in the
//! queue, rechecks after a missed wake-up, the span of the request — is
//! decided here, once.
//!
//! Transports keep what is theirs: credentials into a [`Caller`](crate::auth::Caller),
//! per-connection slots, stream plumbing.

mod acquire;
mod cancel;
mod elections;
pub mod lease;
pub mod rates;
mod reads;
mod sessions;
pub mod waits;
pub mod watch;

pub use acquire::{Acquired, ForceReleased};
pub use cancel::{CancelWait, Cancelled};
pub use reads::{Description, ListPage, SessionPage, SessionQuery, SessionView};

use crate::error::NodeError;
use crate::raft::node::Node;
use lease::LeaseDriver;
use raftlock_store::machine::{FencingToken, Mode, RequestId, SessionId, Terms};
use std::sync::Arc;
use std::time::Duration;
use waits::Waits;

/// The lock, session and election service of one node.
#[derive(Clone)]
pub struct Locks {
    node: Arc<Node>,
    waits: Arc<Waits>,
    leases: Arc<LeaseDriver>,
    watches: Arc<watch::WatchHub>,
    rates: Arc<rates::Rates>,
}

impl Locks {
    /// Starts the lock service on `node`: what the state machine applies
    /// wakes the waits it settles ([`Waits`]) and tells the lease driver
    /// of new sessions and grants ([`LeaseDriver`]), which then runs on
    /// the leader; watchers are fed from the last `watch_history` events.
    pub fn start(node: Arc<Node>, watch_history: usize) -> Self {
        let state = node.state().clone();
        let waits = Arc::new(Waits::default());
        {
            let waits = waits.clone();
            state.observe(move |batch| waits.on_changes(batch));
        }
        let leases = LeaseDriver::new(node.clone());
        {
            // Weak: the state (through its observers) must not keep the
            // driver, and with it the node, alive.
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
            node,
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

    /// The node served.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
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
        self.node.term()
    }
}

/// An acquisition's place in its session's exactly-once sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// The request's number.
    pub seq: u64,
    /// Every lower number is answered and will not be retried.
    pub acked_below: u64,
    /// The numbers still in flight at or above `acked_below`: empty from a
    /// client that acknowledges by `acked_below` alone.
    pub in_flight: Vec<u64>,
}

/// Acquire a lock, at once or waiting in its queue.
#[derive(Clone, Debug)]
pub struct Acquire {
    /// The acquiring session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The client's id for this acquisition: a retry with the same id is
    /// the same acquisition.
    pub request_id: RequestId,
    /// Exclusive or shared.
    pub mode: Mode,
    /// For a shared lock, its number of permits, if the client states one.
    pub permits: Option<u32>,
    /// How long to wait in the queue; `None` answers at once (try-lock).
    pub wait: Option<Duration>,
    /// Stored with the grant, shown to anyone who describes the lock.
    pub metadata: Vec<u8>,
    /// The session's exactly-once numbering, if the client uses it.
    pub sequence: Option<Sequence>,
    /// Permits taken, hold cap and lock-delay (plain: one permit, neither).
    pub terms: Terms,
}

/// Set a semaphore's size.
#[derive(Clone, Debug)]
pub struct Resize {
    /// Lock name.
    pub name: String,
    /// The new size; 0 forgets the size set before.
    pub permits: u32,
}

/// Release a lock held under `token`.
#[derive(Clone, Debug)]
pub struct Release {
    /// The holding session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The grant's fencing token.
    pub token: FencingToken,
}

/// Create a session.
#[derive(Clone, Debug)]
pub struct CreateSession {
    /// Its time to live without a keep-alive.
    pub ttl_ms: u64,
    /// A name for people reading `describe` (may be empty).
    pub client_name: String,
    /// A retried creation with the same key returns the same session.
    pub creation_key: Option<u128>,
    /// Where the client runs, as it says.
    pub origin: raftlock_store::machine::Origin,
}

/// Campaign in an election: wait to become its leader.
#[derive(Clone, Debug)]
pub struct Campaign {
    /// The campaigning session.
    pub session: SessionId,
    /// Election name.
    pub name: String,
    /// The client's id for this campaign (retries reuse it).
    pub request_id: RequestId,
    /// The leader's value once elected.
    pub value: Vec<u8>,
    /// How long to wait; `None` waits as long as the cluster allows.
    pub wait: Option<Duration>,
    /// The session's exactly-once numbering, if the client uses it.
    pub sequence: Option<Sequence>,
}

/// Replace the elected leader's value.
#[derive(Clone, Debug)]
pub struct Proclaim {
    /// The leading session.
    pub session: SessionId,
    /// Election name.
    pub name: String,
    /// The leadership's token.
    pub token: FencingToken,
    /// The new value.
    pub value: Vec<u8>,
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
