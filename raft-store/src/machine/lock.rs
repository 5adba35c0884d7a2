//! One lock: its holders, its FIFO queue and its capacity rule. Exclusive,
//! shared and N-permit semaphore locks are this one structure: an exclusive
//! holder takes the whole lock, each shared holder one of `permits`.

use super::types::{FencingToken, Grant, LogIndex, Mode, SessionId, Waiter};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Capacity of a shared lock nobody stated a permit count for.
pub(crate) const UNLIMITED: u32 = u32::MAX;

/// Whether a new holder of `mode` taking `count` permits fits beside
/// `holders` under `permits`.
pub(crate) fn fits(holders: &[Grant], permits: Option<u32>, mode: Mode, count: u32) -> bool {
    match mode {
        Mode::Exclusive => holders.is_empty(),
        Mode::Shared => {
            let capacity = u64::from(permits.unwrap_or(UNLIMITED));
            holders.iter().all(|h| h.mode == Mode::Shared)
                && taken(holders) + u64::from(count.max(1)) <= capacity
        }
    }
}

/// The holders a BUSY answer names: the oldest
/// [`MAX_BUSY_HOLDERS`](raftlock_proto::limits::MAX_BUSY_HOLDERS).
pub(crate) fn busy_holders(holders: &[Grant]) -> Vec<Grant> {
    if crate::planted::planted(crate::planted::Bug::BusyNamesNobody) {
        return Vec::new();
    }
    holders
        .iter()
        .take(raftlock_proto::limits::MAX_BUSY_HOLDERS)
        .cloned()
        .collect()
}

/// Permits the holders take between them.
pub(crate) fn taken(holders: &[Grant]) -> u64 {
    if crate::planted::planted(crate::planted::Bug::OnePermitEach) {
        return holders.len() as u64;
    }
    holders
        .iter()
        .map(|h| u64::from(h.terms.count.max(1)))
        .sum()
}

impl Waiter {
    /// The grant this waiter gets from the entry at `index`.
    fn into_grant(self, name: &str, index: LogIndex, at_ms: u64) -> Grant {
        Grant {
            name: name.to_owned(),
            session: self.session,
            request_id: self.request_id,
            mode: self.mode,
            token: index,
            granted_at_ms: at_ms,
            metadata: self.metadata,
            terms: self.terms,
        }
    }
}

/// Holders and waiters of one lock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockState {
    /// Shared capacity, fixed by the first request that states it (or by the
    /// first shared request, as unlimited) and forgotten when the lock empties.
    pub permits: Option<u32>,
    /// Holders in grant order.
    pub holders: Vec<Grant>,
    /// Waiters in FIFO order.
    pub waiters: VecDeque<Waiter>,
}

impl LockState {
    /// Whether a new holder of `mode` fits beside the current holders,
    /// ignoring the queue.
    pub fn fits(&self, mode: Mode, count: u32) -> bool {
        fits(&self.holders, self.permits, mode, count)
    }

    /// The holder that is `session`, if any.
    pub fn holder(&self, session: SessionId) -> Option<&Grant> {
        self.holders.iter().find(|h| h.session == session)
    }

    pub(crate) fn holder_mut(&mut self, session: SessionId) -> Option<&mut Grant> {
        self.holders.iter_mut().find(|h| h.session == session)
    }

    pub(crate) fn remove_holder(&mut self, session: SessionId) -> Option<Grant> {
        let pos = self.holders.iter().position(|h| h.session == session)?;
        Some(self.holders.remove(pos))
    }

    pub(crate) fn remove_waiter(&mut self, session: SessionId) -> Option<Waiter> {
        let pos = self.waiters.iter().position(|w| w.session == session)?;
        self.waiters.remove(pos)
    }

    /// Position of `session` in the queue (0 = next).
    pub fn queue_position(&self, session: SessionId) -> Option<usize> {
        self.waiters.iter().position(|w| w.session == session)
    }

    /// Adds a holder. Most locks only ever have one, and a `Vec`'s first
    /// push reserves room for four: a 128-byte grant would then take 512
    /// bytes, which is most of a lock's memory when a node holds millions.
    pub(crate) fn push_holder(&mut self, grant: Grant) {
        if self.holders.capacity() == 0 {
            self.holders.reserve_exact(1);
        }
        self.holders.push(grant);
    }

    /// Nobody holds or waits.
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }

    /// Highest token among the holders.
    pub fn current_token(&self) -> FencingToken {
        self.holders.iter().map(|h| h.token).max().unwrap_or(0)
    }

    /// Moves waiters from the front of the queue to the holders while they
    /// fit. Strict FIFO: a waiter that does not fit stops the scan, so a
    /// shared waiter never overtakes an exclusive one queued before it.
    /// A waiter for which `stop` holds ends the scan too, fitting or not.
    pub(crate) fn grant_front(
        &mut self,
        name: &str,
        index: LogIndex,
        at_ms: u64,
        stop: impl Fn(&Waiter) -> bool,
    ) -> Vec<Grant> {
        let mut granted = Vec::new();
        while let Some(front) = self.waiters.front() {
            if stop(front) || !self.fits(front.mode, front.terms.count) {
                break;
            }
            let Some(w) = self.waiters.pop_front() else {
                break;
            };
            let grant = w.into_grant(name, index, at_ms);
            self.push_holder(grant.clone());
            granted.push(grant);
        }
        if !granted.is_empty() && crate::planted::planted(crate::planted::Bug::DoubleGrant) {
            if let Some(w) = self.waiters.pop_front() {
                let grant = w.into_grant(name, index, at_ms);
                self.push_holder(grant.clone());
                granted.push(grant);
            }
        }
        granted
    }

    /// Grants the front waiter, whatever blocks it (the caller checked).
    pub(crate) fn grant_first(&mut self, name: &str, index: LogIndex, at_ms: u64) -> Option<Grant> {
        let grant = self.waiters.pop_front()?.into_grant(name, index, at_ms);
        self.push_holder(grant.clone());
        Some(grant)
    }
}
