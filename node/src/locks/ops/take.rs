//! Take tokens from a rate limit, at once or waiting for them. A take that
//! waits is served in FIFO order with the other waiting takes of its limit
//! on this leader: they queue on a fair lock per limit, and the one at the
//! front sleeps until its tokens would fit and takes again.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::rates::owned;
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::spec;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, LimitSpec, Reply, SessionId};
use std::time::Duration;
use tokio::time::Instant;

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

impl Operation for Take {
    type Output = Taken;
    type Pending = ();
    const NAME: &'static str = "ratelimit.take";
    // Its single takes are refused when space is short; the wait itself
    // writes nothing.
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        None
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        if let Some(s) = &self.spec {
            validate::limit_spec(s)?;
        }
        if let Some(w) = self.wait {
            limits.check_wait(w.as_millis() as u64)?;
        }
        Ok(())
    }

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        Ok((None, ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        _: Option<(u64, Reply)>,
    ) -> Result<Taken, NodeError> {
        let started = Instant::now();
        let once = |t: &Take| cx.locks.run_checked(cx.caller, TakeOnce(t.clone()));
        let taken = match self.wait {
            None => once(&self).await?,
            Some(wait) => {
                let deadline = started + wait;
                let queue = cx.locks.queue(&self.name);
                let _turn = match tokio::time::timeout_at(deadline, queue.lock()).await {
                    Ok(turn) => turn,
                    // Never reached the front: the limit is busy with
                    // waiters ahead; say so with a try's answer.
                    Err(_) => {
                        return once(&Take {
                            wait: None,
                            ..self.clone()
                        })
                        .await
                    }
                };
                loop {
                    let taken = once(&self).await?;
                    if taken.admitted || Instant::now() + taken.retry_after > deadline {
                        break taken;
                    }
                    tokio::time::sleep(taken.retry_after).await;
                }
            }
        };
        // No limit label here: the registry never forgets a series, so
        // labels by name grew without bound as limits came and went.
        // Per-limit counts are read from the replicated state at scrape
        // time instead (`admin::limit_series`).
        if taken.admitted {
            metrics::counter!("raftlock_ratelimit_admitted_total").increment(taken.n);
            metrics::histogram!("raftlock_ratelimit_wait_seconds")
                .record(started.elapsed().as_secs_f64());
        } else {
            metrics::counter!("raftlock_ratelimit_refused_total").increment(1);
        }
        Ok(taken)
    }
}

/// One take's entry in the log, stamped with the leader's rate clock.
struct TakeOnce(Take);

impl Operation for TakeOnce {
    type Output = Taken;
    type Pending = ();
    const NAME: &'static str = "ratelimit.take_once";
    const GROWS: bool = true;

    fn name(&self) -> Option<&str> {
        Some(&self.0.name)
    }

    fn session(&self) -> Option<SessionId> {
        None
    }

    fn rights(&self) -> Rights<'_> {
        self.0.rights()
    }

    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError> {
        self.0.validate(limits)
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let t = &self.0;
        let cmd = Command::Take {
            name: t.name.clone(),
            n: t.n,
            spec: t.spec,
            lease_ms: t.lease_ms,
            now_ns: cx.locks.rate_now(),
        };
        Ok((Some(owned(cx.caller, cmd)), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<Taken, NodeError> {
        match proposed(reply)? {
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
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl From<pb::TakeRequest> for Take {
    fn from(r: pb::TakeRequest) -> Self {
        Take {
            n: r.n.max(1),
            spec: r.limit.as_ref().map(spec),
            wait: r.wait_timeout_ms.map(std::time::Duration::from_millis),
            lease_ms: r.lease_ms,
            name: r.name,
        }
    }
}

impl OpCall for pb::TakeRequest {
    type Op = crate::locks::Take;
    type Response = pb::TakeResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response(t: crate::locks::Taken) -> pb::TakeResponse {
        take_response(&t)
    }
}

/// A take's answer as the API shows it.
pub fn take_response(t: &Taken) -> pb::TakeResponse {
    pb::TakeResponse {
        admitted: t.admitted,
        n: t.n,
        remaining: t.remaining,
        retry_after_ms: t.retry_after.as_nanos().div_ceil(1_000_000) as u64,
        lease_id: t.lease.unwrap_or(0),
    }
}
