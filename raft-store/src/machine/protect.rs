//! The protections a holder may ask for beyond a plain hold, and semaphore
//! sizes that change while held.
//!
//! - A **hold cap** ends a hold after `max_hold_ms` on the leader's clock,
//!   though its session lives: the leader proposes `EndHold`.
//! - A **lock-delay** (Chubby's, Consul's) keeps an exclusive lock from
//!   being granted for `lock_delay_ms` after its holder lost it without
//!   releasing it (session expired, forced, hold cap), so that a holder that
//!   did not notice has time to stop before anyone else writes. The leader
//!   proposes `EndLockDelay` when it runs out. A clean release or close
//!   starts no delay.
//! - **Resize** sets a semaphore's size for good (until resized again). It
//!   may shrink below what is held (holders keep their permits), but not
//!   below what a waiter asks for, which could then never be granted.
//!
//! Time is the leader's: apply never looks at a clock, so a new leader that
//! counts a cap or a delay afresh can only make it last longer, never end it
//! early.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::{FencingToken, Finished, Grant, LogIndex, Mode, SessionId};
use super::{validate, LeaseMachine};
use raftlock_proto::limits;

impl LeaseMachine {
    /// Starts `grant`'s lock-delay, if it asked for one: called when a hold
    /// ends without its holder releasing it.
    pub(super) fn start_lock_delay(
        &mut self,
        grant: &Grant,
        index: LogIndex,
        events: &mut Vec<Event>,
    ) {
        let delay = grant.terms.lock_delay_ms;
        if delay == 0 || grant.mode != Mode::Exclusive {
            return;
        }
        // A delay started while another runs replaces it, as long as the
        // longer of the two: the leader times it from now, and ends it by
        // this start, so a late end of the earlier one changes nothing.
        let d = self.delayed.entry(grant.name.clone()).or_default();
        d.ms = d.ms.max(delay);
        d.started = index;
        events.push(Event::LockDelayed {
            name: grant.name.clone(),
            delay_ms: delay,
        });
    }

    /// The leader's end of a hold whose cap ran out. Housekeeping, like an
    /// expiry: a hold that already ended (or never had a cap) is skipped,
    /// not refused.
    pub(super) fn end_hold(
        &mut self,
        name: &str,
        session: SessionId,
        token: FencingToken,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Reply {
        let current = self
            .locks
            .get(name)
            .and_then(|l| l.holder(session))
            // Only a hold that has a cap can run out of it.
            .is_some_and(|g| g.token == token && g.terms.max_hold_ms != 0);
        if !current {
            return Reply::HoldEnded {
                released: None,
                granted: Vec::new(),
            };
        }
        let Some(grant) = self
            .locks
            .get_mut(name)
            .and_then(|l| l.remove_holder(session))
        else {
            return Reply::HoldEnded {
                released: None,
                granted: Vec::new(),
            };
        };
        if let Some(s) = self.sessions.get_mut(&session) {
            s.held.remove(name);
        }
        self.finish(
            session,
            name,
            grant.request_id,
            Finished::Released(grant.token),
        );
        events.push(Event::Released {
            name: name.to_owned(),
            session,
            token,
        });
        self.start_lock_delay(&grant, index, events);
        let granted = self.grant_collecting(name, index, at_ms, events);
        Reply::HoldEnded {
            released: Some(grant),
            granted,
        }
    }

    /// The leader's end of a lock-delay whose time ran out: the one that
    /// started at `started`, or (entries written before delays were named)
    /// whichever runs.
    pub(super) fn end_lock_delay(
        &mut self,
        name: &str,
        started: Option<LogIndex>,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Reply {
        let current = self
            .delayed
            .get(name)
            .is_some_and(|d| started.is_none_or(|s| s == d.started));
        if !current {
            return Reply::LockDelayEnded {
                granted: Vec::new(),
            };
        }
        self.delayed.remove(name);
        events.push(Event::LockDelayEnded {
            name: name.to_owned(),
        });
        let granted = self.grant_collecting(name, index, at_ms, events);
        Reply::LockDelayEnded { granted }
    }

    pub(super) fn resize(
        &mut self,
        name: &str,
        permits: u32,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        validate::name(name)?;
        if permits == 0 {
            // The lock keeps its size while held, but never below what its
            // holders took under a smaller resize: stated sizes count again.
            if self.sizes.remove(name).is_some() {
                if let Some(lock) = self.locks.get_mut(name) {
                    let taken =
                        u32::try_from(super::lock::taken(&lock.holders)).unwrap_or(u32::MAX);
                    lock.permits = lock.permits.map(|p| p.max(taken));
                }
            }
            return Ok(Reply::Resized {
                granted: Vec::new(),
            });
        }
        // A waiter that asks for more than the new size could never be
        // granted, and would hold up everyone queued behind it.
        let most_asked = self
            .locks
            .get(name)
            .and_then(|l| l.waiters.iter().map(|w| w.terms.count).max());
        if let Some(count) = most_asked.filter(|c| *c > permits) {
            return Err(LeaseError::PermitsExceeded {
                name: name.to_owned(),
                count,
                permits,
            });
        }
        if !self.sizes.contains_key(name) && self.sizes.len() >= limits::MAX_SIZED_LOCKS {
            return Err(LeaseError::TooManySizes {
                max: limits::MAX_SIZED_LOCKS,
            });
        }
        self.sizes.insert(name.to_owned(), permits);
        if let Some(lock) = self.locks.get_mut(name) {
            lock.permits = Some(permits);
        }
        let granted = self.grant_collecting(name, index, at_ms, events);
        Ok(Reply::Resized { granted })
    }

    /// Grants the waiters nothing blocks any more and returns their grants.
    pub(super) fn grant_collecting(
        &mut self,
        name: &str,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Vec<Grant> {
        let before = events.len();
        self.grant_waiters(name, index, at_ms, events);
        events[before..]
            .iter()
            .filter_map(|e| match e {
                Event::Granted(g) => Some(g.clone()),
                _ => None,
            })
            .collect()
    }

    /// The lock-delay in force on `name`, in ms, if any.
    pub fn lock_delay(&self, name: &str) -> Option<u64> {
        self.delayed.get(name).map(|d| d.ms)
    }

    /// Every lock in lock-delay, with the delay's length in ms and the
    /// index that started it (what `EndLockDelayAt` names).
    pub fn lock_delays(&self) -> impl Iterator<Item = (&str, u64, LogIndex)> {
        self.delayed
            .iter()
            .map(|(n, d)| (n.as_str(), d.ms, d.started))
    }

    /// The size Resize set for `name`, if any.
    pub fn size(&self, name: &str) -> Option<u32> {
        self.sizes.get(name).copied()
    }
}
