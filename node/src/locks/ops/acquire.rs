//! Acquire a lock, at once or waiting in its queue. The call registers its
//! wait before proposing, so the grant made by a later release or expiry
//! reaches it in the same entry, with no polling.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::waits::{Registration, WaitResult};
use super::super::{unexpected, Locks};
use super::cancel_wait::{guarded, queued, wait_ended, AbandonGuard, Withdraw, Withdrawn};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::{grant, mode, request_id};
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{
    validate, Command, FencingToken, Grant, LeaseError, Mode, Reply, RequestId, SessionId, Terms,
};
use std::time::Duration;
use tokio::time::Instant;

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

impl Sequence {
    /// Lock set `command` numbered in its session's sequence (a command of
    /// its own, which nodes of older releases cannot misapply).
    pub(crate) fn wrap_set(self, command: Command) -> Command {
        Command::SequencedSet {
            seq: self.seq,
            acked_below: self.acked_below,
            in_flight: self.in_flight,
            command: Box::new(command),
        }
    }

    /// `command` numbered in its session's sequence.
    pub(crate) fn wrap(self, command: Command) -> Command {
        if self.in_flight.is_empty() {
            Command::Sequenced {
                seq: self.seq,
                acked_below: self.acked_below,
                command: Box::new(command),
            }
        } else {
            Command::SequencedAcks {
                seq: self.seq,
                acked_below: self.acked_below,
                in_flight: self.in_flight,
                command: Box::new(command),
            }
        }
    }
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

/// The result of an acquisition.
#[derive(Clone, Debug)]
pub enum Acquired {
    /// Held.
    Granted(Grant),
    /// A try-lock found these holders.
    Busy(Vec<Grant>),
}

/// A waiting acquisition between its proposal and its answer.
pub struct Pending {
    /// For a call that may wait: where its grant will be sent, and the
    /// guard that cancels the wait if the call goes away.
    waiting: Option<(Registration, AbandonGuard)>,
    started: Instant,
}

impl Pending {
    /// The call has its answer from its own entry, or an error.
    fn answered(self) {
        if let Some((_, guard)) = self.waiting {
            guard.disarm();
        }
    }
}

impl Operation for Acquire {
    type Output = Acquired;
    type Pending = Pending;
    const NAME: &'static str = "lock.acquire";
    const GROWS: bool = true;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        validate::metadata("metadata", &self.metadata)?;
        self.terms.max_hold_ms = limits.hold_cap(&self.name, self.terms.max_hold_ms)?;
        validate::terms(self.mode, &self.terms)?;
        if let Some(w) = self.wait {
            limits.check_wait(w.as_millis() as u64)?;
        }
        Ok(())
    }

    /// The operator's limits on locks per session and waiters per lock. A
    /// retry of an acquisition the session already holds or waits with
    /// passes, so that limits never break idempotent retries.
    fn admit(&self, cx: Context<'_>) -> Result<(), NodeError> {
        let node = cx.locks.replica();
        let state = node.state().read();
        let Some(s) = state.machine.session(self.session) else {
            return Ok(()); // the state machine answers NOT_FOUND
        };
        if s.held.contains_key(&self.name) || s.waiting.contains_key(&self.name) {
            return Ok(());
        }
        let limits = node.limits();
        if s.held.len() + s.waiting.len() >= limits.max_locks_per_session {
            // The same refusal the state machine gives at its own bound.
            return Err(NodeError::Lease(LeaseError::TooManyLocks {
                session: self.session,
                max: limits.max_locks_per_session,
            }));
        }
        if self.wait.is_some() {
            if let Some(lock) = state.machine.lock(&self.name) {
                if lock.waiters.len() >= limits.max_waiters_per_lock {
                    return Err(NodeError::Lease(LeaseError::TooManyWaiters {
                        name: self.name.clone(),
                        max: limits.max_waiters_per_lock,
                    }));
                }
            }
        }
        Ok(())
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, Pending), NodeError> {
        // Only a call that may wait registers (before proposing, so the
        // grant of a later entry cannot be missed): a try-lock is answered
        // by its own entry. Its guard is armed before proposing too: a
        // caller gone while the acquire commits would otherwise leave it
        // queued, and later granted, for nobody.
        let waiting = self.wait.map(|_| {
            let registration = cx
                .locks
                .waits
                .register(self.session, &self.name, self.request_id);
            let guard = AbandonGuard::new(cx.locks, self.session, &self.name, self.request_id);
            (registration, guard)
        });
        let mut cmd = Command::Acquire {
            session: self.session,
            name: self.name.clone(),
            request_id: self.request_id,
            mode: self.mode,
            permits: self.permits,
            wait_ms: self.wait.map(|d| d.as_millis() as u64),
            metadata: self.metadata.clone(),
        };
        if !self.terms.is_plain() {
            cmd = Command::WithTerms {
                terms: self.terms,
                command: Box::new(cmd),
            };
        }
        if let Some(s) = self.sequence.clone() {
            cmd = s.wrap(cmd);
        }
        let pending = Pending {
            waiting,
            started: Instant::now(),
        };
        Ok((Some(cmd), pending))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        pending: Pending,
        reply: Option<(u64, Reply)>,
    ) -> Result<Acquired, NodeError> {
        let started = pending.started;
        let (registration, guard) = match (proposed(reply), pending.waiting) {
            (Ok((_, Reply::Queued { position })), Some(waiting)) => {
                queued(position);
                waiting
            }
            (reply, waiting) => {
                Pending { waiting, started }.answered();
                return match reply? {
                    (_, Reply::Acquired(g)) => Ok(Acquired::Granted(g)),
                    (_, Reply::Busy { holders }) => Ok(Acquired::Busy(holders)),
                    // The state machine queues only a call that asked to
                    // wait.
                    (_, other) => Err(unexpected(other)),
                };
            }
        };
        let wait = self.wait_in_queue(cx.locks, cx.caller, registration, started);
        let granted = |a: &Acquired| matches!(a, Acquired::Granted(_));
        guarded(guard, started, granted, wait).await
    }

    fn let_go(pending: Pending) {
        pending.answered();
    }

    fn token(out: &Acquired) -> Option<FencingToken> {
        match out {
            Acquired::Granted(g) => Some(g.token),
            Acquired::Busy(_) => None,
        }
    }
}

impl Acquire {
    /// Waits for the entry that grants or ends this queued acquisition.
    async fn wait_in_queue(
        &self,
        locks: &Locks,
        caller: &Caller,
        mut registration: Registration,
        started: Instant,
    ) -> Result<Acquired, NodeError> {
        let node = locks.replica();
        let deadline = started + self.wait.unwrap_or_default();
        loop {
            let woke = tokio::select! {
                r = &mut registration.rx => r.unwrap_or(WaitResult::Recheck),
                // A leader cut off from the others cannot grant or end
                // this wait: the client retries the same request on the
                // node that leads now, and rejoins its place there.
                e = node.cut_off() => return Err(e),
                _ = tokio::time::sleep_until(deadline) => {
                    // The leader's driver cancels overdue waits too;
                    // cancelling here as well answers the caller on time. A
                    // grant that won the race comes back as the cancel's
                    // reply, and is the caller's: it is still listening.
                    let withdraw = Withdraw {
                        session: self.session,
                        name: self.name.clone(),
                        request_id: self.request_id,
                    };
                    return match withdraw.run(locks, caller).await? {
                        Withdrawn::Granted(grants) => grants
                            .into_iter()
                            .find(|g| g.name == self.name)
                            .map(Acquired::Granted)
                            .ok_or(NodeError::WaitTimedOut(self.name.clone())),
                        Withdrawn::Removed | Withdrawn::NotWaiting => self
                            .recheck(locks)
                            .map(Acquired::Granted)
                            .ok_or(NodeError::WaitTimedOut(self.name.clone())),
                    };
                }
            };
            match woke {
                WaitResult::Granted(g) => return Ok(Acquired::Granted(g)),
                WaitResult::Ended(reason) => {
                    let call = (self.session, self.name.as_str(), self.request_id);
                    return Err(wait_ended(reason, deadline, call));
                }
                WaitResult::Recheck => {
                    registration = locks
                        .waits
                        .register(self.session, &self.name, self.request_id);
                    if let Some(g) = self.recheck(locks) {
                        return Ok(Acquired::Granted(g));
                    }
                    let state = node.state().read();
                    let still_waiting = state
                        .machine
                        .session(self.session)
                        .is_some_and(|s| s.waiting.get(&self.name) == Some(&self.request_id));
                    if !still_waiting {
                        return Err(NodeError::WaitTimedOut(self.name.clone()));
                    }
                }
            }
        }
    }

    /// The grant this acquisition holds now, if any.
    fn recheck(&self, locks: &Locks) -> Option<Grant> {
        let state = locks.replica().state().read();
        state
            .machine
            .describe(&self.name)
            .holders
            .into_iter()
            .find(|h| h.session == self.session && h.request_id == self.request_id)
    }
}

impl TryFrom<pb::AcquireRequest> for Acquire {
    type Error = NodeError;
    fn try_from(r: pb::AcquireRequest) -> Result<Self, NodeError> {
        Ok(Acquire {
            request_id: request_id(&r.request_id)?,
            mode: mode(r.mode)?,
            permits: (r.permits > 0).then_some(r.permits),
            wait: r.wait_timeout_ms.map(std::time::Duration::from_millis),
            sequence: sequence(r.seq, r.acked_below, r.in_flight)?,
            terms: Terms {
                count: r.count.max(1),
                max_hold_ms: r.max_hold_ms,
                lock_delay_ms: r.lock_delay_ms,
            },
            session: r.session_id,
            name: r.name,
            metadata: r.metadata,
        })
    }
}

impl OpCall for pb::AcquireRequest {
    type Op = crate::locks::Acquire;
    type Response = pb::AcquireResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        self.try_into()
    }
    fn response(out: Acquired) -> pb::AcquireResponse {
        match out {
            Acquired::Granted(g) => pb::AcquireResponse {
                grant: Some(grant(&g)),
                acquired: true,
                holders: vec![],
            },
            Acquired::Busy(holders) => pb::AcquireResponse {
                grant: None,
                acquired: false,
                holders: holders.iter().map(grant).collect(),
            },
        }
    }
}

/// Reads an acquisition's exactly-once fields: `None` when the client does
/// not number its requests (`seq` 0).
pub fn sequence(
    seq: u64,
    acked_below: u64,
    in_flight: Vec<u64>,
) -> Result<Option<Sequence>, NodeError> {
    if seq == 0 {
        if acked_below != 0 || !in_flight.is_empty() {
            return Err(NodeError::InvalidArgument(
                "acked_below or in_flight is set but seq is not: number the request too".into(),
            ));
        }
        return Ok(None);
    }
    if in_flight.len() > raftlock_proto::limits::MAX_IN_FLIGHT_LISTED {
        return Err(NodeError::InvalidArgument(format!(
            "in_flight lists {} sequence numbers; at most {} (the lowest ones)",
            in_flight.len(),
            raftlock_proto::limits::MAX_IN_FLIGHT_LISTED
        )));
    }
    if acked_below > seq {
        return Err(NodeError::InvalidArgument(format!(
            "acked_below {acked_below} is above the request's own seq {seq}, which still waits for its answer"
        )));
    }
    Ok(Some(Sequence {
        seq,
        acked_below,
        in_flight,
    }))
}
