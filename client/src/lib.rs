//! The Rust client for raftlock: sessions with keep-alive and a local
//! validity deadline, locks with fencing tokens, try-lock and fair waiting.
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
//! Every call finds the leader itself (following the `raftlock-leader` hint
//! a follower returns), retries on unavailability with exponential backoff
//! and jitter, and reuses one request id across the retries of one
//! acquisition, so a retry never produces a second grant.
#![deny(missing_docs)]

mod client;
mod error;
mod lock;
mod session;
mod types;

pub use client::{Client, Options};
pub use error::Error;
pub use lock::{LockBuilder, LockGuard};
pub use session::Session;
pub use types::{Grant, LockInfo, Member, Mode, Status, Validation, WaiterInfo};
