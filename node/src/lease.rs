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

use crate::node::{Node, NodeError};
use openraft::ServerState;
use raftlock_store::machine::{Command, Event, Reply, RequestId, SessionId};
use raftlock_store::state_machine::Change;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast::error::TryRecvError;
use tokio::time::Instant;
use tracing::{info, warn};

/// How often the driver checks deadlines.
const TICK: Duration = Duration::from_millis(50);
/// A tick this late means the driver was stalled.
const STALL: Duration = Duration::from_millis(500);

#[derive(Default)]
struct Deadlines {
    /// The term this node leads in, if it leads.
    term: Option<u64>,
    sessions: HashMap<SessionId, (Instant, Duration)>,
    waits: HashMap<(SessionId, String), (Instant, RequestId)>,
}

/// Session and wait deadlines, kept while this node leads.
pub struct LeaseDriver {
    node: Arc<Node>,
    deadlines: Mutex<Deadlines>,
}

impl LeaseDriver {
    /// A driver for `node`; call [`LeaseDriver::run`] to start it.
    pub fn new(node: Arc<Node>) -> Arc<Self> {
        Arc::new(LeaseDriver {
            node,
            deadlines: Mutex::new(Deadlines::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Deadlines> {
        self.deadlines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Renews `session` from now and returns its TTL, once a quorum has
    /// confirmed this node still leads.
    pub async fn renew(&self, session: SessionId) -> Result<Duration, NodeError> {
        let received = Instant::now();
        let ttl_of = |session| {
            let state = self.node.state.read();
            state
                .machine
                .session(session)
                .map(|s| Duration::from_millis(s.ttl_ms))
        };
        let ttl = match ttl_of(session) {
            Some(ttl) => ttl,
            None => {
                // A new leader may not have applied the entry that created
                // the session yet; "not found" ends the client's session
                // for good, so say it only once this node has caught up.
                self.node.confirmer.confirmed_after(received).await?;
                ttl_of(session).ok_or(raftlock_store::machine::LeaseError::SessionNotFound(
                    session,
                ))?
            }
        };
        {
            let mut d = self.lock();
            if d.term.is_none() {
                drop(d);
                return Err(self.node.not_leader());
            }
            d.sessions.insert(session, (received + ttl, ttl));
        }
        self.node.confirmer.confirmed_after(received).await?;
        Ok(ttl)
    }

    /// Time left for `session` on this leader.
    pub fn remaining(&self, session: SessionId) -> Option<Duration> {
        let d = self.lock();
        d.sessions
            .get(&session)
            .map(|(deadline, _)| deadline.saturating_duration_since(Instant::now()))
    }

    /// Resets every deadline to a full TTL / timeout from now.
    fn rebuild(&self, term: Option<u64>) {
        let now = Instant::now();
        let state = self.node.state.read();
        let mut d = self.lock();
        d.term = term;
        d.sessions.clear();
        d.waits.clear();
        if term.is_none() {
            return;
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

    fn observe(&self, change: &Change) {
        let now = Instant::now();
        let mut d = self.lock();
        if d.term.is_none() {
            return;
        }
        let Change::Applied {
            command, outcome, ..
        } = change
        else {
            return;
        };
        match (command, &outcome.reply) {
            (Command::CreateSession { .. }, Ok(Reply::SessionCreated { session, ttl_ms })) => {
                let ttl = Duration::from_millis(*ttl_ms);
                d.sessions.entry(*session).or_insert((now + ttl, ttl));
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
                d.waits
                    .entry((*session, name.clone()))
                    .or_insert((now + Duration::from_millis(*ms), *request_id));
            }
            _ => {}
        }
        for e in &outcome.events {
            match e {
                Event::SessionEnded { session, .. } => {
                    d.sessions.remove(session);
                    d.waits.retain(|(s, _), _| s != session);
                }
                Event::Granted(g) => {
                    d.waits.remove(&(g.session, g.name.clone()));
                }
                Event::WaitEnded { session, name, .. } => {
                    d.waits.remove(&(*session, name.clone()));
                }
                _ => {}
            }
        }
    }

    /// Runs until the Raft stops.
    pub async fn run(self: Arc<Self>) {
        let mut changes = self.node.state.subscribe();
        let mut metrics = self.node.raft.metrics();
        let mut last_tick = Instant::now();
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let m = metrics.borrow_and_update().clone();
            if m.running_state.is_err() {
                return;
            }
            let leading = (m.state == ServerState::Leader).then_some(m.current_term);
            let now = Instant::now();
            let stalled = now.duration_since(last_tick) > TICK + STALL;
            last_tick = now;
            if leading != self.lock().term {
                if leading.is_some() {
                    info!(
                        node = self.node.id,
                        term = m.current_term,
                        "became leader: every session gets a full TTL from now"
                    );
                }
                // Subscribe afresh first, so no change between the state read
                // and the next drain is lost.
                changes = self.node.state.subscribe();
                self.rebuild(leading);
                continue;
            }
            loop {
                match changes.try_recv() {
                    Ok(c) => match &*c {
                        Change::Restored => self.rebuild(leading),
                        applied => self.observe(applied),
                    },
                    Err(TryRecvError::Lagged(_)) => self.rebuild(leading),
                    Err(TryRecvError::Empty) | Err(TryRecvError::Closed) => break,
                }
            }
            if leading.is_none() {
                continue;
            }
            if stalled {
                warn!(
                    node = self.node.id,
                    "lease driver was stalled: extending every lease by a full TTL"
                );
                let mut d = self.lock();
                for (deadline, ttl) in d.sessions.values_mut() {
                    *deadline = (*deadline).max(now + *ttl);
                }
                continue;
            }
            self.expire_sessions(now).await;
            self.cancel_waits(now).await;
        }
    }

    async fn expire_sessions(&self, now: Instant) {
        let due = {
            let d = self.lock();
            d.sessions.values().any(|(deadline, _)| *deadline <= now)
        };
        if !due {
            return;
        }
        let round = Instant::now();
        if let Err(e) = self.node.confirmer.confirmed_after(round).await {
            warn!(node = self.node.id, error = %e, "not expiring sessions: leadership not confirmed");
            return;
        }
        let mut ids: Vec<SessionId> = {
            let d = self.lock();
            d.sessions
                .iter()
                .filter(|(_, (deadline, _))| *deadline <= round)
                .map(|(id, _)| *id)
                .collect()
        };
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        info!(node = self.node.id, sessions = ?ids, "expiring sessions whose TTL passed without keep-alive");
        match self
            .node
            .propose(Command::ExpireSessions {
                sessions: ids.clone(),
            })
            .await
        {
            Ok(_) => {
                let mut d = self.lock();
                for id in ids {
                    d.sessions.remove(&id);
                }
            }
            Err(e) => warn!(node = self.node.id, error = %e, "expiry proposal failed"),
        }
    }

    async fn cancel_waits(&self, now: Instant) {
        let due: Vec<((SessionId, String), RequestId)> = {
            let d = self.lock();
            d.waits
                .iter()
                .filter(|(_, (deadline, _))| *deadline <= now)
                .map(|(k, (_, r))| (k.clone(), *r))
                .collect()
        };
        for ((session, name), request_id) in due {
            let res = self
                .node
                .propose(Command::CancelWait {
                    session,
                    name: name.clone(),
                    request_id,
                })
                .await;
            if let Err(e) = res {
                warn!(node = self.node.id, error = %e, lock = %name, session, "wait cancel failed");
                continue;
            }
            self.lock().waits.remove(&(session, name));
        }
    }
}
