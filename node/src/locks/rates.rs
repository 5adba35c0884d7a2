//! Rate limits: take, return, define, describe, delete.
//!
//! The leader stamps each rate-limit command with its **rate clock**: the
//! replicated clock it found in the state when it took over, plus what its
//! own monotonic clock has measured since (see
//! `raft-store/src/machine/ratelimit.rs`). A leader change re-bases it, so
//! no wall clock, and no difference between two leaders' clocks, ever
//! adds time a bucket refills by.
//!
//! Take, return, define and delete are operations, in `ops/`; this is
//! what they share on one node, and the read of a limit.

use super::Locks;
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use parking_lot::Mutex;
use raftlock_store::machine::{validate, Bucket, Command};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::Instant;

/// The per-node part of rate limiting.
#[derive(Default)]
pub struct Rates {
    /// (term, rate clock at the start of the term, when it was read).
    clock: Mutex<Option<(u64, u64, Instant)>>,
    /// Waiting takes queue here, one fair lock per limit.
    queues: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A limit as `describe` shows it.
#[derive(Clone, Debug)]
pub struct LimitView {
    /// Its state.
    pub bucket: Bucket,
    /// Tokens available now.
    pub available: u64,
    /// The log index the read saw.
    pub applied_index: u64,
}

/// `command` on behalf of `caller`: with authentication, a lease is
/// returned only by the identity that took it.
pub(super) fn owned(caller: &Caller, command: Command) -> Command {
    if caller.checks_ownership() {
        Command::ByOwner {
            owner: caller.name().to_owned(),
            command: Box::new(command),
        }
    } else {
        command
    }
}

impl Locks {
    /// This leader's rate clock now, ns.
    pub(super) fn rate_now(&self) -> u64 {
        let term = self.term();
        let mut clock = self.rates.clock.lock();
        let (_, base, at) = match *clock {
            Some(c) if c.0 == term => c,
            _ => {
                // A new term: carry on from the replicated clock, not from
                // whatever this node measured under another leader, and
                // count from when the term began, not from this term's first
                // rate-limit call: every entry the base comes from was made
                // before this node led, so the time since is real time the
                // bucket refills by. Counting from the first call instead
                // stopped the clock for as long as a new leader went without
                // one, and a limit left idle across a failover refused takes
                // its tokens had long refilled for.
                let base = self.replica.state().read().machine.rate_clock_ns();
                let since = self.leases.leading_since(term).unwrap_or_else(Instant::now);
                let c = (term, base, since);
                *clock = Some(c);
                c
            }
        };
        base.saturating_add(u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    pub(super) fn queue(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = self.rates.queues.lock();
        // Forget the queues nobody waits in, so names do not pile up.
        if queues.len() > 1_024 {
            queues.retain(|_, q| Arc::strong_count(q) > 1);
        }
        queues.entry(name.to_owned()).or_default().clone()
    }

    /// A limit now (a linearizable read on the leader).
    pub async fn describe_limit(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<LimitView, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.linearizable_read("ratelimit.describe", Some(name), caller)
            .await?;
        let now = self.rate_now();
        let state = self.replica.state().read();
        let bucket = state.machine.rate_limit(name).cloned().ok_or_else(|| {
            NodeError::Lease(raftlock_store::machine::LeaseError::LimitNotFound {
                name: name.to_owned(),
            })
        })?;
        Ok(LimitView {
            available: bucket.available(now.max(state.machine.rate_clock_ns())),
            bucket,
            applied_index: state.last_applied.map(|l| l.index).unwrap_or(0),
        })
    }
}
