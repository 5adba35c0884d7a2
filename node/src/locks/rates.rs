//! Rate limits: take, return, define, describe, delete.
//!
//! The leader stamps each rate-limit command with its **rate clock**: the
//! replicated clock it found in the state when it took over, plus what its
//! own monotonic clock has measured since (see
//! `raft-store/src/machine/ratelimit.rs`). A leader change re-bases it, so
//! no wall clock, and no difference between two leaders' clocks, ever
//! adds time a bucket refills by.
//!
//! A take that waits is served in FIFO order with the other waiting takes
//! of its limit on this leader: they queue on a fair lock per limit, and
//! the one at the front sleeps until its tokens would fit and asks again.

use super::Locks;
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use parking_lot::Mutex;
use raftlock_store::machine::{validate, Bucket, Command, LimitSpec, Reply};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

/// The per-node part of rate limiting.
#[derive(Default)]
pub struct Rates {
    /// (term, rate clock at the start of the term, when it was read).
    clock: Mutex<Option<(u64, u64, Instant)>>,
    /// Waiting takes queue here, one fair lock per limit.
    queues: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A take.
#[derive(Clone, Debug)]
pub struct Take {
    /// Limit name.
    pub name: String,
    /// Tokens.
    pub n: u64,
    /// Creates the limit with this on first use.
    pub spec: Option<LimitSpec>,
    /// Wait up to this long for the tokens.
    pub wait: Option<Duration>,
    /// Reserve them as a lease of this many ms (0: spend now).
    pub lease_ms: u64,
}

/// What a take got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Admitted.
    pub admitted: bool,
    /// Tokens admitted.
    pub n: u64,
    /// Tokens that could be taken at once after this.
    pub remaining: u64,
    /// When refused: the wait after which they would fit.
    pub retry_after: Duration,
    /// The lease, with `lease_ms`.
    pub lease: Option<u64>,
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
fn owned(caller: &Caller, command: Command) -> Command {
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
    fn rate_now(&self) -> u64 {
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
                let base = self.node.state().read().machine.rate_clock_ns();
                let since = self.leases.leading_since(term).unwrap_or_else(Instant::now);
                let c = (term, base, since);
                *clock = Some(c);
                c
            }
        };
        base.saturating_add(u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn queue(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = self.rates.queues.lock();
        // Forget the queues nobody waits in, so names do not pile up.
        if queues.len() > 1_024 {
            queues.retain(|_, q| Arc::strong_count(q) > 1);
        }
        queues.entry(name.to_owned()).or_default().clone()
    }

    async fn take_once(&self, caller: &Caller, t: &Take) -> Result<Taken, NodeError> {
        self.node.check_space()?;
        let cmd = owned(
            caller,
            Command::Take {
                name: t.name.clone(),
                n: t.n,
                spec: t.spec,
                lease_ms: t.lease_ms,
                now_ns: self.rate_now(),
            },
        );
        match self.node.propose_reply(cmd).await? {
            (
                _,
                Reply::Taken {
                    n,
                    remaining,
                    lease,
                },
            ) => Ok(Taken {
                admitted: true,
                n,
                remaining,
                retry_after: Duration::ZERO,
                lease,
            }),
            (_, Reply::TakeRefused { retry_after_ns }) => Ok(Taken {
                admitted: false,
                n: 0,
                remaining: 0,
                retry_after: Duration::from_nanos(retry_after_ns),
                lease: None,
            }),
            (_, other) => Err(super::unexpected(other)),
        }
    }

    /// Takes tokens for `caller`, waiting for them if asked to.
    pub async fn take(&self, caller: &Caller, t: Take) -> Result<Taken, NodeError> {
        let span = tracing::debug_span!("ratelimit.take", node = self.node.id(), term = self.term(), limit = %t.name, identity = caller.name(), n = t.n);
        async {
            validate::name(&t.name)?;
            if let Some(s) = &t.spec {
                validate::limit_spec(s)?;
            }
            if let Some(w) = t.wait {
                self.node.limits().check_wait(w.as_millis() as u64)?;
            }
            caller.check(Access::Lock, &t.name)?;
            let started = Instant::now();
            let taken = match t.wait {
                None => self.take_once(caller, &t).await?,
                Some(wait) => {
                    let deadline = started + wait;
                    let queue = self.queue(&t.name);
                    let _turn = match tokio::time::timeout_at(deadline, queue.lock()).await {
                        Ok(turn) => turn,
                        // Never reached the front: the limit is busy with
                        // waiters ahead; say so with a try's answer.
                        Err(_) => {
                            return self
                                .take_once(
                                    caller,
                                    &Take {
                                        wait: None,
                                        ..t.clone()
                                    },
                                )
                                .await
                        }
                    };
                    loop {
                        let taken = self.take_once(caller, &t).await?;
                        if taken.admitted || Instant::now() + taken.retry_after > deadline {
                            break taken;
                        }
                        tokio::time::sleep(taken.retry_after).await;
                    }
                }
            };
            // No limit label here: the registry never forgets a series,
            // so labels by name grew without bound as limits came and went.
            // Per-limit counts are read from the replicated state at
            // scrape time instead (`admin::limit_series`).
            if taken.admitted {
                metrics::counter!("raftlock_ratelimit_admitted_total").increment(taken.n);
                metrics::histogram!("raftlock_ratelimit_wait_seconds")
                    .record(started.elapsed().as_secs_f64());
            } else {
                metrics::counter!("raftlock_ratelimit_refused_total").increment(1);
            }
            Ok(taken)
        }
        .instrument(span)
        .await
    }

    /// Credits back the tokens of `lease` its holder did not spend.
    pub async fn return_tokens(
        &self,
        caller: &Caller,
        name: &str,
        lease: u64,
        unused: u64,
    ) -> Result<u64, NodeError> {
        validate::name(name)?;
        caller.check(Access::Lock, name)?;
        let cmd = owned(
            caller,
            Command::ReturnTokens {
                name: name.to_owned(),
                lease,
                unused,
                now_ns: self.rate_now(),
            },
        );
        match self.node.propose_reply(cmd).await? {
            (_, Reply::Returned { credited }) => Ok(credited),
            (_, other) => Err(super::unexpected(other)),
        }
    }

    /// Creates a limit, or checks an existing one has `spec`; true if
    /// this call created it.
    pub async fn define_limit(
        &self,
        caller: &Caller,
        name: &str,
        spec: LimitSpec,
    ) -> Result<bool, NodeError> {
        validate::name(name)?;
        validate::limit_spec(&spec)?;
        caller.check(Access::Lock, name)?;
        let cmd = Command::DefineLimit {
            name: name.to_owned(),
            spec,
            now_ns: self.rate_now(),
        };
        match self.node.propose_reply(cmd).await? {
            (_, Reply::LimitDefined { created }) => Ok(created),
            (_, other) => Err(super::unexpected(other)),
        }
    }

    /// A limit now (a linearizable read on the leader).
    pub async fn describe_limit(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<LimitView, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.node.linearizable().await?;
        let now = self.rate_now();
        let state = self.node.state().read();
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

    /// Forgets a limit (an administrator's action); true if it existed.
    pub async fn delete_limit(&self, caller: &Caller, name: &str) -> Result<bool, NodeError> {
        validate::name(name)?;
        caller.check(Access::Admin, name)?;
        match self
            .node
            .propose_reply(Command::DeleteLimit {
                name: name.to_owned(),
            })
            .await?
        {
            (_, Reply::LimitDeleted { existed }) => {
                tracing::warn!(limit = %name, identity = caller.name(), existed, "rate limit deleted");
                Ok(existed)
            }
            (_, other) => Err(super::unexpected(other)),
        }
    }
}
