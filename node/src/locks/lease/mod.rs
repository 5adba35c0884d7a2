//! The leader-side lease driver (DESIGN.md rule 2). Session deadlines live
//! on the leader's monotonic clock, outside the replicated state: a
//! keep-alive moves a deadline without writing the log, and only an expiry
//! is written (`ExpireSessions`). Wait deadlines work the same way and end
//! with `CancelWait`.
//!
//! Safety rules, each because a lock freed early breaks mutual exclusion:
//! - A node that becomes leader gives every session a full TTL, and every
//!   wait its full timeout, from that moment: it cannot know when the old
//!   leader last renewed them.
//! - Before proposing an expiry the leader has a quorum confirm its
//!   leadership in a round that started after the deadlines passed; a
//!   deposed leader's proposal fails there instead of revoking leases the
//!   new leader is renewing.
//! - If the driver itself was stalled (the process paused, the machine
//!   starved), nobody could have renewed in the meantime, so every deadline
//!   is pushed to a full TTL from the moment it runs again.
//!
//! Hold caps and lock-delays are timed here too, and end with `EndHold`
//! and `EndLockDelay`. Both only ever end late, never early: a cap is
//! counted from when this leader applied the grant (after the client sent
//! its request, from which the client counts), and a new leader counts
//! every cap and delay afresh from its election.

mod deadlines;
mod ending;

use crate::error::NodeError;
use crate::replica::Replica;
use deadlines::{of_session, Deadlines, Refused};
use parking_lot::Mutex;
use raftlock_store::machine::{Command, Event, Reply, SessionId};
use raftlock_store::planted::{planted, Bug};
use raftlock_store::state_machine::Change;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{info, warn};

/// How often the driver checks deadlines.
const TICK: Duration = Duration::from_millis(50);
/// A tick this late means the driver was stalled.
const STALL: Duration = Duration::from_millis(500);

/// A live session's TTL in the applied state.
fn session_ttl(
    machine: &raftlock_store::machine::LeaseMachine,
    session: SessionId,
) -> Option<Duration> {
    machine
        .session(session)
        .map(|s| Duration::from_millis(s.ttl_ms))
}

/// Session and wait deadlines, kept while this node leads.
pub struct LeaseDriver {
    replica: Arc<dyn Replica>,
    deadlines: Mutex<Deadlines>,
}

impl LeaseDriver {
    /// A driver for `replica`; call [`LeaseDriver::run`] to start it.
    pub fn new(replica: Arc<dyn Replica>) -> Arc<Self> {
        Arc::new(LeaseDriver {
            replica,
            deadlines: Mutex::new(Deadlines::default()),
        })
    }

    /// The term this driver keeps deadlines for: the one this node leads
    /// in, once the driver has seen it lead.
    pub fn leading_term(&self) -> Option<u64> {
        self.lock().term
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Deadlines> {
        self.deadlines.lock()
    }

    /// Renews `session` from now and returns its TTL, once a quorum has
    /// confirmed this node still leads and the session is still alive.
    pub async fn renew(&self, session: SessionId) -> Result<Duration, NodeError> {
        let received = Instant::now();
        let not_found = || {
            NodeError::from(raftlock_store::machine::LeaseError::SessionNotFound(
                session,
            ))
        };
        if session_ttl(&self.replica.state().read().machine, session).is_none() {
            // A new leader may not have applied the entry that created
            // the session yet; "not found" ends the client's session
            // for good, so say it only once this node has caught up.
            self.replica.confirmed_after(received).await?;
        }
        {
            // The applied state is read under the deadlines' lock (state
            // first, as everywhere), so an expiry cannot be applied between
            // the check and the update.
            let state = self.replica.state().read();
            let ttl = session_ttl(&state.machine, session);
            let mut d = self.lock();
            let res = d.renew(
                session,
                received,
                ttl.unwrap_or_default(),
                Instant::now(),
                ttl.is_some(),
            );
            drop(d);
            drop(state);
            if planted(Bug::LateKeepAlive) && res == Err(Refused::Expired) {
                return Ok(ttl.unwrap_or(Duration::from_secs(10)));
            }
            match res {
                Ok(()) => {}
                Err(Refused::NotLeader) => return Err(self.replica.not_leader()),
                Err(Refused::Expired) => return Err(not_found()),
            }
        }
        self.replica.confirmed_after(received).await?;
        // The acknowledgement promises the session lives: check again after
        // the wait, in which an expiry could have been decided and applied.
        let state = self.replica.state().read();
        let ttl = session_ttl(&state.machine, session);
        let d = self.lock();
        if planted(Bug::LateKeepAlive) && d.term.is_some() {
            return Ok(ttl.unwrap_or(Duration::from_secs(10)));
        }
        match ttl {
            Some(ttl) if d.live(session, Instant::now()) => Ok(ttl),
            _ if d.term.is_none() => {
                drop(d);
                drop(state);
                Err(self.replica.not_leader())
            }
            _ => Err(not_found()),
        }
    }

    /// Time left for `session` on this leader.
    pub fn remaining(&self, session: SessionId) -> Option<Duration> {
        let d = self.lock();
        d.sessions
            .get(&session)
            .map(|(deadline, _)| deadline.saturating_duration_since(Instant::now()))
    }

    /// When this node began to lead in `term`, as this driver saw it;
    /// `None` if it does not lead in `term` (or has not noticed yet).
    pub fn leading_since(&self, term: u64) -> Option<Instant> {
        let d = self.lock();
        (d.term == Some(term)).then_some(d.leading_since).flatten()
    }

    /// Resets every deadline to a full TTL / timeout from now.
    fn rebuild(&self, term: Option<u64>) {
        let now = Instant::now();
        let state = self.replica.state().read();
        let mut d = self.lock();
        d.leading_since = term.map(|_| now);
        if planted(Bug::UnconfirmedExpiry) {
            // Keeps the deadlines of an earlier term instead of a full TTL.
            d.term = term;
            if term.is_none() {
                return;
            }
            for s in state.machine.sessions() {
                let ttl = Duration::from_millis(s.ttl_ms);
                d.sessions.insert_if_absent(s.id, (now + ttl, ttl));
            }
            return;
        }
        d.term = term;
        d.sessions.clear();
        d.waits.clear();
        d.holds.clear();
        d.delays.clear();
        if term.is_none() {
            return;
        }
        for (name, lock) in state.machine.locks() {
            for h in lock.holders.iter().filter(|h| h.terms.max_hold_ms > 0) {
                let cap = Duration::from_millis(h.terms.max_hold_ms);
                d.holds
                    .insert((h.session, name.to_owned()), (now + cap, h.token));
            }
        }
        for (name, delay_ms, started) in state.machine.lock_delays() {
            d.delays.insert(
                name.to_owned(),
                (now + Duration::from_millis(delay_ms), started),
            );
        }
        for s in state.machine.sessions() {
            let ttl = Duration::from_millis(s.ttl_ms);
            d.sessions.insert(s.id, (now + ttl, ttl));
        }
        for (name, lock) in state.machine.locks() {
            for w in &lock.waiters {
                d.waits.insert(
                    (w.session, name.to_owned()),
                    (now + Duration::from_millis(w.timeout_ms), w.request_id),
                );
            }
        }
    }

    /// Takes in a batch of applied changes: an observer of the state
    /// (`SharedState::observe`), run as each batch is applied. A change
    /// applied between a rebuild's read of the state and this call is
    /// taken in twice, which every case below allows: removals of what is
    /// gone do nothing, and inserts keep what is there or, for a hold cap,
    /// move its deadline by the moments between the two.
    ///
    /// It used to drain a broadcast subscription on its tick; falling 4,096
    /// batches behind between two ticks made it rebuild, giving every
    /// session a fresh TTL. An observer cannot fall behind.
    pub fn on_changes(&self, batch: &[Change]) {
        for c in batch {
            match c {
                Change::Restored => {
                    let term = self.lock().term;
                    self.rebuild(term);
                }
                applied => self.observe(applied),
            }
        }
    }

    fn observe(&self, change: &Change) {
        let mut d = self.lock();
        // A follower keeps no deadlines: not even the clock is read.
        if d.term.is_none() {
            return;
        }
        let now = Instant::now();
        let Change::Applied {
            command,
            outcome,
            index,
            ..
        } = change
        else {
            return;
        };
        match (command.unwrapped(), &outcome.reply) {
            (
                Command::CreateSession { .. }
                | Command::CreateSessionOnce { .. }
                | Command::CreateSessionAt { .. },
                Ok(Reply::SessionCreated { session, ttl_ms }),
            ) => {
                let ttl = Duration::from_millis(*ttl_ms);
                d.sessions.insert_if_absent(*session, (now + ttl, ttl));
            }
            (
                Command::Acquire {
                    session,
                    name,
                    request_id,
                    wait_ms: Some(ms),
                    ..
                },
                Ok(Reply::Queued { .. }),
            ) => {
                d.waits.insert_if_absent(
                    (*session, name.clone()),
                    (now + Duration::from_millis(*ms), *request_id),
                );
            }
            // A waiting set waits on each of its locks; a cancel of any one
            // ends the set.
            (
                Command::AcquireAll {
                    session,
                    names,
                    request_id,
                    wait_ms: Some(ms),
                    ..
                },
                Ok(Reply::Queued { .. }),
            ) => {
                for name in names {
                    d.waits.insert_if_absent(
                        (*session, name.clone()),
                        (now + Duration::from_millis(*ms), *request_id),
                    );
                }
            }
            _ => {}
        }
        for e in &outcome.events {
            match e {
                Event::SessionEnded { session, .. } => {
                    d.sessions.remove(session);
                    d.waits.remove_range(of_session(*session));
                    d.holds.remove_range(of_session(*session));
                }
                Event::Granted(g) | Event::HandedOver(g) => {
                    d.waits.remove(&(g.session, g.name.clone()));
                    if g.terms.max_hold_ms > 0 {
                        let cap = Duration::from_millis(g.terms.max_hold_ms);
                        d.holds
                            .insert((g.session, g.name.clone()), (now + cap, g.token));
                    }
                }
                Event::WaitEnded { session, name, .. } => {
                    d.waits.remove(&(*session, name.clone()));
                }
                Event::Released { name, session, .. } => {
                    d.holds.remove(&(*session, name.clone()));
                }
                Event::LockDelayed { name, delay_ms } => {
                    // The machine names the delay by this index from now
                    // on, as long as the longer of the two.
                    let end = now + Duration::from_millis(*delay_ms);
                    let end = d.delays.get(name).map_or(end, |(e, _)| (*e).max(end));
                    d.delays.insert(name.clone(), (end, *index));
                }
                Event::LockDelayEnded { name } => {
                    d.delays.remove(name);
                }
                _ => {}
            }
        }
    }

    /// This node leads in `term` from now: every deadline afresh, from
    /// the applied state.
    fn promote(&self, term: u64) {
        info!(
            node = self.replica.id(),
            term, "became leader: every session gets a full TTL from now"
        );
        self.rebuild(Some(term));
    }

    /// This node no longer leads: it keeps no deadlines.
    fn demote(&self) {
        self.rebuild(None);
    }

    /// Runs until the replica stops taking part (its Raft stopped).
    pub async fn run(self: Arc<Self>) {
        let mut roles = self.replica.roles();
        let mut last_tick = Instant::now();
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                // Told at once when this node gains or loses leadership,
                // rather than at its next tick; closed once Raft stopped.
                changed = roles.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            let leading = roles.borrow_and_update().leading_term();
            let now = Instant::now();
            let stalled = now.duration_since(last_tick) > TICK + STALL;
            last_tick = now;
            if leading != self.lock().term {
                match leading {
                    Some(term) => self.promote(term),
                    None => self.demote(),
                }
                continue;
            }
            if leading.is_none() {
                continue;
            }
            if stalled {
                warn!(
                    node = self.replica.id(),
                    "lease driver was stalled: extending every lease by a full TTL"
                );
                self.lock()
                    .sessions
                    .update_all(|deadline, ttl| *deadline = (*deadline).max(now + *ttl));
                continue;
            }
            self.expire_sessions(now).await;
            self.cancel_waits(now).await;
            self.end_holds(now).await;
            self.end_lock_delays(now).await;
        }
    }
}

#[cfg(test)]
mod tests;
