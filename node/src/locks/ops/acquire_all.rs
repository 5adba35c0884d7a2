//! Acquire several locks together: one log entry grants them all, or none
//! (`raft-store`'s `acquire_all.rs` says how a set waits). The call
//! registers a wait for each lock of the set before proposing, as a single
//! acquire does, and answers when the entry that grants the set, or ends
//! its wait, is applied.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::waits::{Registration, WaitResult};
use super::super::{unexpected, Locks};
use super::acquire::Sequence;
use super::cancel_wait::{guarded, queued, wait_ended, AbandonGuard, Withdraw, Withdrawn};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::{grant, request_id};
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{
    validate, Command, FencingToken, Grant, LeaseError, Reply, RequestId, SessionId,
};
use std::time::Duration;
use tokio::time::Instant;

/// Acquire every lock of a set exclusively, together or not at all.
#[derive(Clone, Debug)]
pub struct AcquireAll {
    /// The acquiring session.
    pub session: SessionId,
    /// Lock names; put in ascending order, without repeats, before anything
    /// else looks at them.
    pub names: Vec<String>,
    /// The client's id for this acquisition: a retry with the same id is
    /// the same acquisition.
    pub request_id: RequestId,
    /// How long to wait in the queues; `None` answers at once.
    pub wait: Option<Duration>,
    /// Stored with each grant.
    pub metadata: Vec<u8>,
    /// Its place in the session's exactly-once sequence, if numbered.
    pub sequence: Option<Sequence>,
}

/// The result of an [`AcquireAll`].
#[derive(Clone, Debug)]
pub enum AcquiredAll {
    /// Every lock held, one grant each, in name order.
    Granted(Vec<Grant>),
    /// A try found these holders on the first lock that was not free.
    Busy(Vec<Grant>),
}

/// A waiting set between its proposal and its answer.
pub struct Pending {
    registrations: Vec<Registration>,
    /// Cancels the set's wait if the call goes away before its answer
    /// (see [`AbandonGuard`]); for a set that may wait.
    guard: Option<AbandonGuard>,
    started: Instant,
}

impl Operation for AcquireAll {
    type Output = AcquiredAll;
    type Pending = Pending;
    const NAME: &'static str = "lock.acquire_all";
    const GROWS: bool = true;

    fn name(&self) -> Option<&str> {
        self.names.first().map(String::as_str)
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::Each(Access::Lock, &self.names)
    }

    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError> {
        self.names.sort_unstable();
        self.names.dedup();
        validate::lock_set(&self.names)?;
        validate::metadata("metadata", &self.metadata)?;
        // A set's grants have no hold cap: a lock the operator caps is
        // taken on its own, where the cap applies.
        for name in &self.names {
            if limits.hold_cap(name, 0)? != 0 {
                return Err(NodeError::InvalidArgument(format!(
                    "lock {name:?} has a hold cap on this cluster, which AcquireAll does not \
                     apply: acquire it on its own"
                )));
            }
        }
        if let Some(w) = self.wait {
            limits.check_wait(w.as_millis() as u64)?;
        }
        Ok(())
    }

    /// The operator's limits on locks per session and waiters per lock, as
    /// for a single acquire; a retry the session already holds or waits
    /// with passes.
    fn admit(&self, cx: Context<'_>) -> Result<(), NodeError> {
        let node = cx.locks.replica();
        let state = node.state().read();
        let Some(s) = state.machine.session(self.session) else {
            return Ok(());
        };
        let new = self
            .names
            .iter()
            .filter(|n| !s.held.contains_key(*n) && !s.waiting.contains_key(*n))
            .count();
        if new == 0 {
            return Ok(());
        }
        let limits = node.limits();
        if s.held.len() + s.waiting.len() + new > limits.max_locks_per_session {
            return Err(NodeError::Lease(LeaseError::TooManyLocks {
                session: self.session,
                max: limits.max_locks_per_session,
            }));
        }
        if self.wait.is_some() {
            for name in &self.names {
                if let Some(lock) = state.machine.lock(name) {
                    if lock.waiters.len() >= limits.max_waiters_per_lock {
                        return Err(NodeError::Lease(LeaseError::TooManyWaiters {
                            name: name.clone(),
                            max: limits.max_waiters_per_lock,
                        }));
                    }
                }
            }
        }
        Ok(())
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, Pending), NodeError> {
        let registrations = match self.wait {
            Some(_) => self
                .names
                .iter()
                .map(|n| cx.locks.waits.register(self.session, n, self.request_id))
                .collect(),
            None => Vec::new(),
        };
        let mut cmd = Command::AcquireAll {
            session: self.session,
            names: self.names.clone(),
            request_id: self.request_id,
            wait_ms: self.wait.map(|d| d.as_millis() as u64),
            metadata: self.metadata.clone(),
        };
        if let Some(s) = self.sequence.clone() {
            cmd = s.wrap_set(cmd);
        }
        // Armed before proposing, as an acquire's (see `acquire.rs`): a
        // cancel of one lock of a set cancels (or releases) the set.
        let guard = self
            .wait
            .map(|_| AbandonGuard::new(cx.locks, self.session, &self.names[0], self.request_id));
        let pending = Pending {
            registrations,
            guard,
            started: Instant::now(),
        };
        Ok((Some(cmd), pending))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        pending: Pending,
        reply: Option<(u64, Reply)>,
    ) -> Result<AcquiredAll, NodeError> {
        let Pending {
            registrations,
            guard,
            started,
        } = pending;
        let guard = match (proposed(reply), guard) {
            (Ok((_, Reply::Queued { position })), Some(guard)) if !registrations.is_empty() => {
                queued(position);
                guard
            }
            (reply, guard) => {
                if let Some(guard) = guard {
                    guard.disarm();
                }
                return match reply? {
                    (_, Reply::AcquiredAll(grants)) => Ok(AcquiredAll::Granted(grants)),
                    (_, Reply::Busy { holders }) => Ok(AcquiredAll::Busy(holders)),
                    // The state machine queues only a set that asked to
                    // wait.
                    (_, other) => Err(unexpected(other)),
                };
            }
        };
        let wait = self.wait_in_queues(cx.locks, cx.caller, registrations, started);
        let granted = |a: &AcquiredAll| matches!(a, AcquiredAll::Granted(_));
        guarded(guard, started, granted, wait).await
    }

    fn let_go(pending: Pending) {
        if let Some(guard) = pending.guard {
            guard.disarm();
        }
    }

    fn token(out: &AcquiredAll) -> Option<FencingToken> {
        match out {
            AcquiredAll::Granted(grants) => grants.first().map(|g| g.token),
            AcquiredAll::Busy(_) => None,
        }
    }
}

impl AcquireAll {
    /// Waits for the entry that grants or ends this queued set. The set is
    /// granted in one entry, so every registration resolves from it.
    async fn wait_in_queues(
        &self,
        locks: &Locks,
        caller: &Caller,
        registrations: Vec<Registration>,
        started: Instant,
    ) -> Result<AcquiredAll, NodeError> {
        let node = locks.replica();
        let deadline = started + self.wait.unwrap_or_default();
        let mut grants = Vec::with_capacity(registrations.len());
        for mut registration in registrations {
            let woke = tokio::select! {
                r = &mut registration.rx => r.unwrap_or(WaitResult::Recheck),
                e = node.cut_off() => return Err(e),
                _ = tokio::time::sleep_until(deadline) => {
                    let withdraw = Withdraw {
                        session: self.session,
                        name: self.names[0].clone(),
                        request_id: self.request_id,
                    };
                    return match withdraw.run(locks, caller).await? {
                        Withdrawn::Granted(grants) => Ok(AcquiredAll::Granted(grants)),
                        Withdrawn::Removed | Withdrawn::NotWaiting => self
                            .recheck(locks)
                            .map(AcquiredAll::Granted)
                            .ok_or(NodeError::WaitTimedOut(self.names[0].clone())),
                    };
                }
            };
            match woke {
                WaitResult::Granted(g) => grants.push(g),
                WaitResult::Ended(reason) => {
                    let call = (self.session, self.names[0].as_str(), self.request_id);
                    return Err(wait_ended(reason, deadline, call));
                }
                // The state was replaced by a snapshot: read it. Still
                // waiting means waiting again, from the start.
                WaitResult::Recheck => return self.rewait(locks, caller, started).await,
            }
        }
        Ok(AcquiredAll::Granted(grants))
    }

    /// Registers again after a snapshot replaced the state, and waits.
    async fn rewait(
        &self,
        locks: &Locks,
        caller: &Caller,
        started: Instant,
    ) -> Result<AcquiredAll, NodeError> {
        let registrations: Vec<_> = self
            .names
            .iter()
            .map(|n| locks.waits.register(self.session, n, self.request_id))
            .collect();
        if let Some(grants) = self.recheck(locks) {
            return Ok(AcquiredAll::Granted(grants));
        }
        let still_waiting = {
            let state = locks.replica().state().read();
            state.machine.session(self.session).is_some_and(|s| {
                self.names
                    .iter()
                    .all(|n| s.waiting.get(n) == Some(&self.request_id))
            })
        };
        if !still_waiting {
            return Err(NodeError::WaitTimedOut(self.names[0].clone()));
        }
        Box::pin(self.wait_in_queues(locks, caller, registrations, started)).await
    }

    /// The set's grants if the session holds all of them now.
    fn recheck(&self, locks: &Locks) -> Option<Vec<Grant>> {
        let state = locks.replica().state().read();
        self.names
            .iter()
            .map(|n| {
                state
                    .machine
                    .describe(n)
                    .holders
                    .into_iter()
                    .find(|h| h.session == self.session && h.request_id == self.request_id)
            })
            .collect()
    }
}

impl OpCall for pb::AcquireAllRequest {
    type Op = crate::locks::AcquireAll;
    type Response = pb::AcquireAllResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(crate::locks::AcquireAll {
            session: self.session_id,
            names: self.names,
            request_id: request_id(&self.request_id)?,
            wait: self.wait_timeout_ms.map(std::time::Duration::from_millis),
            metadata: self.metadata,
            sequence: super::acquire::sequence(self.seq, self.acked_below, self.in_flight)?,
        })
    }
    fn response(out: crate::locks::AcquiredAll) -> pb::AcquireAllResponse {
        match out {
            crate::locks::AcquiredAll::Granted(grants) => pb::AcquireAllResponse {
                acquired: true,
                grants: grants.iter().map(grant).collect(),
                holders: vec![],
            },
            crate::locks::AcquiredAll::Busy(holders) => pb::AcquireAllResponse {
                acquired: false,
                grants: vec![],
                holders: holders.iter().map(grant).collect(),
            },
        }
    }
}
