//! The Rust client for raftlock: sessions with keep-alive and a local
//! validity deadline, locks with fencing tokens, try-lock and fair waiting,
//! semaphores, leader election, and cluster administration.
//!
//! # Quick start
//!
//! ```no_run
//! # async fn f() -> Result<(), raftlock_client::Error> {
//! use raftlock_client::Client;
//! use std::time::Duration;
//!
//! let client = Client::connect(["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]).await?;
//! let session = client.session(Duration::from_secs(10)).await?;
//! let guard = session.lock("payments/settle").timeout(Duration::from_secs(5)).acquire().await?;
//! // Every write to the protected resource carries the token; the resource
//! // refuses any token lower than the highest it has seen.
//! println!("holding {} with token {}", guard.name(), guard.token());
//! guard.release().await?;
//! session.close().await?;
//! # Ok(()) }
//! ```
//!
//! # Sessions
//!
//! A [`Session`] is a lease with a TTL, kept alive in the background at
//! about TTL/3 over one stream to the leader. Everything a session holds is
//! released when it ends: closed, expired by the leader after a TTL without
//! keep-alives, or gone with the client. The client also keeps a *local
//! validity deadline*: the send time of the last acknowledged keep-alive
//! plus the TTL minus a safety margin. Past it, [`Session::is_valid`] is
//! false and [`Session::lost`] resolves, before the leader can have expired
//! the session, so a holder that stops in time never overlaps the next one.
//!
//! # Locks and fencing tokens
//!
//! [`Session::lock`] builds an acquisition: exclusive by default,
//! [`LockBuilder::shared`] for read locks, [`LockBuilder::permits`] for a
//! counting semaphore; [`LockBuilder::try_acquire`] tries once,
//! [`LockBuilder::acquire`] waits in the lock's FIFO queue on the server (no
//! polling). A [`LockGuard`] carries the fencing token, drawn from the Raft
//! log index of the entry that granted it, strictly increasing per lock. A lease can
//! end while its holder is paused and still believes it holds the lock;
//! the token is what lets the protected resource refuse that holder's late
//! writes. See `examples/fenced_writer.rs`.
//!
//! ```no_run
//! # async fn f(session: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
//! match session.lock("cron/nightly").try_acquire().await? {
//!     Some(guard) => { /* run the job, passing guard.token() along */ guard.release().await? }
//!     None => println!("another instance runs it"),
//! }
//! # Ok(()) }
//! ```
//!
//! # Leader election
//!
//! [`Session::election`] campaigns: candidates are elected in the order they
//! started, and a [`Leadership`] publishes a value ([`Leadership::proclaim`])
//! and has a token like a lock. [`Client::election`] reads the current
//! leader or [`Election::observe`]s every change, through failovers.
//!
//! ```no_run
//! # async fn f(client: raftlock_client::Client, session: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
//! let leadership = session.election("scheduler").campaign("host-7:8080").await?;
//! while leadership.is_valid() {
//!     // schedule work, stamped with leadership.token()
//! #   break;
//! }
//! let who = client.election("scheduler").leader().await?;
//! # Ok(()) }
//! ```
//!
//! # Failures and retries
//!
//! Every call finds the leader itself (following the `raftlock-leader` hint
//! a follower returns), retries on unavailability with exponential backoff
//! and jitter until [`Options::deadline`], and reuses one request id across
//! the retries of one acquisition or campaign, so a retry never produces a
//! second grant. Errors are typed ([`Error`]): a wait that timed out, a lost
//! or gone session, a conflict (not the holder, stale token) or an
//! unavailable cluster are different variants.
//!
//! # Many workers, one client
//!
//! Clone one [`Client`] into every worker of a process and give each worker
//! its own [`Session`]: the clones share one HTTP/2 connection per node,
//! one keep-alive stream for all sessions, and one `Pipeline` stream that
//! carries every acquire and release (each a single message each way, with
//! calls made at the same moment sent in the same write). That costs the
//! client and the leader much less CPU per call than one unary call each,
//! and behaves the same: [`Options::pipeline`] turns it off.
//!
//! ```no_run
//! # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
//! use std::time::Duration;
//! let mut workers = Vec::new();
//! for w in 0..32 {
//!     let client = client.clone();
//!     workers.push(tokio::spawn(async move {
//!         let session = client.session(Duration::from_secs(10)).await?;
//!         let guard = session.lock(format!("invoices/{w}")).acquire().await?;
//!         guard.release().await
//!     }));
//! }
//! # Ok(()) }
//! ```
//!
//! # Examples
//!
//! `examples/` has runnable programs (`cargo run --example NAME` with
//! `RAFTLOCK_ENDPOINTS` set to what `raftlockd dev` printed):
//! `cron_singleton` (a job that runs once across instances),
//! `leader_scheduler` (a leader-elected loop with an observer) and
//! `fenced_writer` (a resource refusing a stale holder's write).
#![deny(missing_docs)]

mod admin;
mod client;
mod election;
mod error;
mod keepalive;
mod lease;
mod lock;
mod lock_all;
mod pipeline;
mod ratelimit;
mod session;
mod transport;
mod types;
mod watch;

pub use admin::{Backup, Membership};
pub use client::Client;
pub use election::{Candidate, Election, Leadership};
pub use error::Error;
pub use lease::safety_margin;
pub use lock::{Attempt, LockBuilder, LockGuard};
pub use lock_all::{LockAllBuilder, LockSet};
pub use ratelimit::{Admission, LimitInfo, RateLimit, TokenLease};
pub use session::Session;
pub use transport::{env, Options, Tls};
pub use types::{
    Grant, LockInfo, Member, Mode, ServerLimits, SessionInfo, Status, Validation, WaiterInfo,
};
pub use watch::{LockEvent, LockEventKind, WatchBatch};
