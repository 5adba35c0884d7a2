//! Waits that end because their caller no longer wants them: asked for
//! ([`CancelWait`]), or abandoned (the call, its HTTP connection or the
//! future that awaited it went away while it waited).
//!
//! A cancel races the grant: the entry that hands the lock to the waiter
//! may be applied just before the cancel. Then the cancel releases that
//! grant, so that a lock is never held for a caller that stopped
//! listening, and everyone behind it is served.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::{unexpected, Locks};
use super::release::Release;
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::request_id;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{
    validate, Command, FencingToken, Grant, LeaseError, Reply, RequestId, SessionId, WaitEnd,
};
use std::time::Duration;

/// Cancel a waiting acquisition (or campaign).
#[derive(Clone, Debug)]
pub struct CancelWait {
    /// The waiting session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The acquisition's request id.
    pub request_id: RequestId,
}

/// What a cancel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// The wait was in the queue and is gone from it.
    Removed,
    /// The grant had won the race; it is released.
    Released(FencingToken),
    /// Neither waiting nor holding: it ended before (timed out, cancelled,
    /// released) or never existed. Nothing changed.
    NotWaiting,
}

/// How long an abandoned wait is kept for a retry of the same call: a
/// client whose connection broke retries the same request id on the same
/// leader within a few round trips, and that retry rejoins the wait.
const ABANDON_GRACE: Duration = Duration::from_millis(250);

impl Operation for CancelWait {
    type Output = Cancelled;
    type Pending = ();
    const NAME: &'static str = "lock.cancel_wait";
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, _: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        Ok(())
    }

    /// Idempotent: a retry finds nothing to do, and says so.
    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        Ok((None, ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        _: Option<(u64, Reply)>,
    ) -> Result<Cancelled, NodeError> {
        let withdraw = Withdraw {
            session: self.session,
            name: self.name.clone(),
            request_id: self.request_id,
        };
        match withdraw.run(cx.locks, cx.caller).await? {
            Withdrawn::Removed => Ok(Cancelled::Removed),
            Withdrawn::NotWaiting => Ok(Cancelled::NotWaiting),
            // Every grant of the acquisition: a lock set's, or the one.
            Withdrawn::Granted(grants) => {
                let mut token = 0;
                for g in grants {
                    token = g.token;
                    let release = Release {
                        session: self.session,
                        name: g.name,
                        token: g.token,
                    };
                    match cx.locks.run_checked(cx.caller, release).await {
                        Ok(_)
                        // Gone meanwhile (its session ended, an operator
                        // took it): released all the same.
                        | Err(NodeError::Lease(
                            LeaseError::SessionNotFound(_) | LeaseError::NotHolder { .. },
                        )) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(Cancelled::Released(token))
            }
        }
    }

    fn token(out: &Cancelled) -> Option<FencingToken> {
        match out {
            Cancelled::Released(token) => Some(*token),
            _ => None,
        }
    }
}

/// Take a wait out of its queue, whoever asks: the step under a cancel
/// and under an acquire that reached its deadline, which differ in what
/// they do with a grant that won the race.
#[derive(Clone, Debug)]
pub(in crate::locks) struct Withdraw {
    pub session: SessionId,
    pub name: String,
    pub request_id: RequestId,
}

/// What withdrawing a wait found.
pub(in crate::locks) enum Withdrawn {
    /// It was waiting, and no longer is.
    Removed,
    /// It had been granted: its grant, or every grant of its lock set.
    Granted(Vec<Grant>),
    /// It was neither waiting nor holding.
    NotWaiting,
}

impl Withdraw {
    /// Runs the step; a wait that is not there is an answer, not a fault.
    pub(in crate::locks) async fn run(
        self,
        locks: &Locks,
        caller: &Caller,
    ) -> Result<Withdrawn, NodeError> {
        match locks.run_checked(caller, self).await {
            Err(NodeError::Lease(LeaseError::WaitNotFound { .. })) => Ok(Withdrawn::NotWaiting),
            done => done,
        }
    }
}

impl Operation for Withdraw {
    type Output = Withdrawn;
    type Pending = ();
    const NAME: &'static str = "lock.withdraw";
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, _: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        Ok(())
    }

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::CancelWait {
            session: self.session,
            name: self.name.clone(),
            request_id: self.request_id,
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<Withdrawn, NodeError> {
        match reply {
            Some((_, Reply::WaitCancelled)) => Ok(Withdrawn::Removed),
            Some((_, Reply::Acquired(g))) => Ok(Withdrawn::Granted(vec![g])),
            Some((_, Reply::AcquiredAll(grants))) => Ok(Withdrawn::Granted(grants)),
            other => Err(unexpected(proposed(other)?.1)),
        }
    }
}

impl Locks {
    /// Cancels a wait whose call went away, unless a retry of the same
    /// call has taken it up meanwhile. Runs on its own task: the call's
    /// future is gone.
    async fn abandon(self, session: SessionId, name: String, request_id: RequestId) {
        tokio::time::sleep(ABANDON_GRACE).await;
        if self.waits.is_waiting(session, &name, request_id) {
            return;
        }
        let cancel = CancelWait {
            session,
            name: name.clone(),
            request_id,
        };
        // The caller was checked when the wait began; this is the
        // service's own step on its behalf.
        match self.run_checked(&Caller::unrestricted(), cancel).await {
            Ok(Cancelled::NotWaiting) => {}
            Ok(done) => {
                metrics::counter!("raftlock_waits_abandoned_total").increment(1);
                tracing::info!(node = self.replica.id(), lock = %name, session, ?done, "wait cancelled: its caller went away");
            }
            // Not the leader any more: the new leader's deadline ends it.
            Err(e) => {
                tracing::debug!(node = self.replica.id(), lock = %name, session, error = %e, "abandoned wait left to its deadline")
            }
        }
    }
}

/// Notes a queued acquisition's place (a metric and a debug line).
pub(in crate::locks) fn queued(position: usize) {
    metrics::histogram!("raftlock_lock_queue_position").record(position as f64);
    tracing::debug!(position, "queued");
}

/// Runs `wait`, a queue wait `guard` watches (armed before the call
/// proposed its acquire), so that if this future is dropped first, the
/// wait is cancelled on the server; records how long a wait that ended
/// `granted` took since `started`.
pub(in crate::locks) async fn guarded<T>(
    guard: AbandonGuard,
    started: tokio::time::Instant,
    granted: impl Fn(&T) -> bool,
    wait: impl std::future::Future<Output = Result<T, NodeError>>,
) -> Result<T, NodeError> {
    let waited = wait.await;
    guard.disarm();
    if waited.as_ref().is_ok_and(granted) {
        metrics::histogram!("raftlock_wait_seconds").record(started.elapsed().as_secs_f64());
    }
    waited
}

/// What a queued call answers when its wait ended without a grant: a
/// cancel before its `deadline` was asked for (`WAIT_CANCELLED`), one at or
/// after it is the deadline's (the wait timed out), and the session's end
/// leaves nothing to wait for.
pub(in crate::locks) fn wait_ended(
    reason: WaitEnd,
    deadline: tokio::time::Instant,
    (session, name, request_id): (SessionId, &str, RequestId),
) -> NodeError {
    match reason {
        WaitEnd::Cancelled if tokio::time::Instant::now() < deadline => {
            LeaseError::WaitCancelled { request_id }.into()
        }
        WaitEnd::Cancelled => NodeError::WaitTimedOut(name.to_owned()),
        WaitEnd::SessionEnded => LeaseError::SessionNotFound(session).into(),
    }
}

/// Held by a call that may wait, from before it proposes its acquire: if
/// the call's future is dropped before it has its answer (while the
/// acquire commits, or while it waits in the queue), the wait is cancelled
/// on the server's own task. A cancel that reaches the log before its
/// acquire is kept by the state machine and refuses it, and one that finds
/// the lock already granted releases it: nobody holds a lock for a caller
/// that went away.
pub(in crate::locks) struct AbandonGuard {
    locks: Option<Locks>,
    session: SessionId,
    name: String,
    request_id: RequestId,
}

impl AbandonGuard {
    /// Armed for acquisition `request_id` of `session` for `name` (for a
    /// lock set, any of its locks).
    pub(in crate::locks) fn new(
        locks: &Locks,
        session: SessionId,
        name: &str,
        request_id: RequestId,
    ) -> Self {
        AbandonGuard {
            locks: Some(locks.clone()),
            session,
            name: name.to_owned(),
            request_id,
        }
    }

    /// The caller has its answer: nothing to cancel.
    pub(in crate::locks) fn disarm(mut self) {
        self.locks = None;
    }
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(locks) = self.locks.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(locks.abandon(
                self.session,
                std::mem::take(&mut self.name),
                self.request_id,
            ));
        }
    }
}

impl OpCall for pb::CancelWaitRequest {
    type Op = CancelWait;
    type Response = pb::CancelWaitResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(CancelWait {
            session: self.session_id,
            name: self.name,
            request_id: request_id(&self.request_id)?,
        })
    }
    fn response(done: Cancelled) -> pb::CancelWaitResponse {
        match done {
            Cancelled::Removed => pb::CancelWaitResponse {
                cancelled: true,
                ..Default::default()
            },
            Cancelled::Released(token) => pb::CancelWaitResponse {
                released: true,
                token,
                ..Default::default()
            },
            Cancelled::NotWaiting => pb::CancelWaitResponse::default(),
        }
    }
}
