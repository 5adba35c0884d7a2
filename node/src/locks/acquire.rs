//! Acquire, release and force-release. Acquire waits server-side: the call
//! registers its wait before proposing, so the grant made by a later
//! release or expiry reaches it in the same entry, with no polling.

use super::waits::WaitResult;
use super::{session_id, unexpected, Acquire, Locks, Release, Resize};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use raftlock_store::machine::{validate, Command, Grant, LeaseError, Reply, WaitEnd};
use tracing::Instrument;

/// The result of an acquisition.
#[derive(Clone, Debug)]
pub enum Acquired {
    /// Held.
    Granted(Grant),
    /// A try-lock found these holders.
    Busy(Vec<Grant>),
}

/// What a force-release did.
#[derive(Clone, Debug)]
pub struct ForceReleased {
    /// The grants taken away.
    pub released: Vec<Grant>,
    /// The waiters granted in their place.
    pub granted: Vec<Grant>,
}

impl Locks {
    /// Acquires a lock for `caller`, waiting in the lock's queue when asked
    /// to.
    pub async fn acquire(&self, caller: &Caller, mut a: Acquire) -> Result<Acquired, NodeError> {
        let span = tracing::debug_span!("lock.acquire", node = self.node.id(), term = self.term(), lock = %a.name, session = a.session, identity = caller.name(), token = tracing::field::Empty);
        async {
            validate::name(&a.name)?;
            session_id(a.session)?;
            validate::metadata("metadata", &a.metadata)?;
            a.terms.max_hold_ms = self.node.limits().hold_cap(&a.name, a.terms.max_hold_ms)?;
            validate::terms(a.mode, &a.terms)?;
            caller.check(Access::Lock, &a.name)?;
            if let Some(w) = a.wait {
                self.node.limits().check_wait(w.as_millis() as u64)?;
            }
            self.node.check_session_owner(a.session, caller).await?;
            let acquired = self.acquire_checked(a).await?;
            if let Acquired::Granted(g) = &acquired {
                tracing::Span::current().record("token", g.token);
            }
            Ok(acquired)
        }
        .instrument(span)
        .await
    }

    /// An acquisition whose caller has been checked: limits, the proposal,
    /// and the wait. Shared with campaigns (a campaign is an acquire that
    /// waits).
    pub(super) async fn acquire_checked(&self, a: Acquire) -> Result<Acquired, NodeError> {
        let node = &self.node;
        self.check_acquire_limits(&a)?;
        node.check_space()?;
        let started = tokio::time::Instant::now();
        // Only a call that may wait registers (before proposing, so the
        // grant of a later entry cannot be missed): a try-lock is answered
        // by its own entry.
        let registration = a
            .wait
            .map(|_| self.waits.register(a.session, &a.name, a.request_id));
        let mut cmd = Command::Acquire {
            session: a.session,
            name: a.name.clone(),
            request_id: a.request_id,
            mode: a.mode,
            permits: a.permits,
            wait_ms: a.wait.map(|d| d.as_millis() as u64),
            metadata: a.metadata.clone(),
        };
        if !a.terms.is_plain() {
            cmd = Command::Termed {
                terms: a.terms,
                command: Box::new(cmd),
            };
        }
        if let Some(s) = a.sequence.clone() {
            cmd = if s.in_flight.is_empty() {
                Command::Sequenced {
                    seq: s.seq,
                    acked_below: s.acked_below,
                    command: Box::new(cmd),
                }
            } else {
                Command::SequencedAcks {
                    seq: s.seq,
                    acked_below: s.acked_below,
                    in_flight: s.in_flight,
                    command: Box::new(cmd),
                }
            };
        }
        match node.propose_reply(cmd).await? {
            (_, Reply::Acquired(g)) => return Ok(Acquired::Granted(g)),
            (_, Reply::Busy { holders }) => return Ok(Acquired::Busy(holders)),
            (_, Reply::Queued { position }) => {
                metrics::histogram!("raftlock_lock_queue_position").record(position as f64);
                tracing::debug!(position, "queued");
            }
            (_, other) => return Err(unexpected(other)),
        }
        let Some(mut registration) = registration else {
            // The state machine queues only a call that asked to wait.
            return Err(unexpected(Reply::Queued { position: 0 }));
        };
        let deadline = started + a.wait.unwrap_or_default();
        // Dropped with this future if the caller goes away mid-wait.
        let guard = super::cancel::AbandonGuard::new(self, a.session, &a.name, a.request_id);
        let waited = async {
            loop {
                let woke = tokio::select! {
                    r = &mut registration.rx => r.unwrap_or(WaitResult::Recheck),
                    // A leader cut off from the others cannot grant or end
                    // this wait: the client retries the same request on the
                    // node that leads now, and rejoins its place there.
                    _ = node.lost_quorum() => return Err(node.cut_off_error()),
                    _ = tokio::time::sleep_until(deadline) => {
                        // The leader's driver cancels overdue waits too;
                        // cancelling here as well answers the caller on
                        // time. A grant that won the race comes back as the
                        // cancel's reply.
                        return match node.propose_reply(Command::CancelWait {
                            session: a.session, name: a.name.clone(), request_id: a.request_id,
                        }).await {
                            Ok((_, Reply::Acquired(g))) => Ok(Acquired::Granted(g)),
                            Ok(_) | Err(NodeError::Lease(LeaseError::WaitNotFound { .. })) => {
                                self.recheck(&a).map(Acquired::Granted).ok_or(NodeError::WaitTimedOut(a.name.clone()))
                            }
                            Err(e) => Err(e),
                        };
                    }
                };
                match woke {
                    WaitResult::Granted(g) => return Ok(Acquired::Granted(g)),
                    // Before its deadline, only a CancelWait ends a wait.
                    WaitResult::Ended(WaitEnd::Cancelled)
                        if tokio::time::Instant::now() < deadline =>
                    {
                        return Err(LeaseError::WaitCancelled {
                            request_id: a.request_id,
                        }
                        .into())
                    }
                    WaitResult::Ended(WaitEnd::Cancelled) => {
                        return Err(NodeError::WaitTimedOut(a.name.clone()))
                    }
                    WaitResult::Ended(WaitEnd::SessionEnded) => {
                        return Err(LeaseError::SessionNotFound(a.session).into())
                    }
                    WaitResult::Recheck => {
                        registration = self.waits.register(a.session, &a.name, a.request_id);
                        if let Some(g) = self.recheck(&a) {
                            return Ok(Acquired::Granted(g));
                        }
                        let state = node.state().read();
                        let still_waiting = state
                            .machine
                            .session(a.session)
                            .is_some_and(|s| s.waiting.get(&a.name) == Some(&a.request_id));
                        if !still_waiting {
                            return Err(NodeError::WaitTimedOut(a.name.clone()));
                        }
                    }
                }
            }
        }
        .await;
        guard.disarm();
        if let Ok(Acquired::Granted(_)) = &waited {
            metrics::histogram!("raftlock_wait_seconds").record(started.elapsed().as_secs_f64());
        }
        waited
    }

    /// The operator's limits on locks per session and waiters per lock. A
    /// retry of an acquisition the session already holds or waits with
    /// passes, so that limits never break idempotent retries.
    fn check_acquire_limits(&self, a: &Acquire) -> Result<(), NodeError> {
        let state = self.node.state().read();
        let Some(s) = state.machine.session(a.session) else {
            return Ok(()); // the state machine answers NOT_FOUND
        };
        if s.held.contains_key(&a.name) || s.waiting.contains_key(&a.name) {
            return Ok(());
        }
        let limits = &self.node.limits();
        if s.held.len() + s.waiting.len() >= limits.max_locks_per_session {
            // The same refusal the state machine gives at its own bound.
            return Err(NodeError::Lease(LeaseError::TooManyLocks {
                session: a.session,
                max: limits.max_locks_per_session,
            }));
        }
        if a.wait.is_some() {
            if let Some(lock) = state.machine.lock(&a.name) {
                if lock.waiters.len() >= limits.max_waiters_per_lock {
                    return Err(NodeError::Lease(LeaseError::TooManyWaiters {
                        name: a.name.clone(),
                        max: limits.max_waiters_per_lock,
                    }));
                }
            }
        }
        Ok(())
    }

    /// The grant this acquisition holds now, if any.
    fn recheck(&self, a: &Acquire) -> Option<Grant> {
        let state = self.node.state().read();
        state
            .machine
            .describe(&a.name)
            .holders
            .into_iter()
            .find(|h| h.session == a.session && h.request_id == a.request_id)
    }

    /// Releases a lock; returns the waiters granted in its place.
    pub async fn release(&self, caller: &Caller, r: Release) -> Result<Vec<Grant>, NodeError> {
        let span = tracing::debug_span!("lock.release", node = self.node.id(), term = self.term(), lock = %r.name, session = r.session, identity = caller.name(), token = r.token);
        async {
            validate::name(&r.name)?;
            caller.check(Access::Lock, &r.name)?;
            self.node.check_session_owner(r.session, caller).await?;
            let cmd = Command::Release {
                session: session_id(r.session)?,
                name: r.name,
                token: r.token,
            };
            match self.node.propose_reply(cmd).await? {
                (_, Reply::Released { granted }) => Ok(granted),
                (_, other) => Err(unexpected(other)),
            }
        }
        .instrument(span)
        .await
    }

    /// Sets the size of semaphore `name` (0 forgets it), granting the
    /// waiters a larger size lets in.
    pub async fn resize(&self, caller: &Caller, r: Resize) -> Result<Vec<Grant>, NodeError> {
        let span = tracing::info_span!("lock.resize", node = self.node.id(), term = self.term(), lock = %r.name, identity = caller.name(), permits = r.permits);
        async {
            validate::name(&r.name)?;
            caller.check(Access::Lock, &r.name)?;
            let cmd = Command::Resize {
                name: r.name.clone(),
                permits: r.permits,
            };
            match self.node.propose_reply(cmd).await? {
                (_, Reply::Resized { granted }) => {
                    tracing::info!(lock = %r.name, permits = r.permits, granted = granted.len(), identity = caller.name(), "semaphore resized");
                    Ok(granted)
                }
                (_, other) => Err(unexpected(other)),
            }
        }
        .instrument(span)
        .await
    }

    /// Takes a lock away from its holders (an administrator's action,
    /// logged with who did it).
    pub async fn force_release(
        &self,
        caller: &Caller,
        name: String,
    ) -> Result<ForceReleased, NodeError> {
        let span = tracing::info_span!("lock.force_release", node = self.node.id(), term = self.term(), lock = %name, identity = caller.name(), token = tracing::field::Empty);
        async {
            validate::name(&name)?;
            caller.check(Access::Admin, &name)?;
            let cmd = Command::ForceRelease { name: name.clone() };
            match self.node.propose_reply(cmd).await? {
                (index, Reply::ForceReleased { released, granted }) => {
                    metrics::counter!("raftlock_force_releases_total").increment(1);
                    for g in &released {
                        tracing::warn!(
                            lock = %name,
                            session = g.session,
                            token = g.token,
                            identity = caller.name(),
                            log_index = index,
                            "lock force-released by an administrator"
                        );
                    }
                    if let Some(g) = granted.first() {
                        tracing::Span::current().record("token", g.token);
                    }
                    Ok(ForceReleased { released, granted })
                }
                (_, other) => Err(unexpected(other)),
            }
        }
        .instrument(span)
        .await
    }
}
