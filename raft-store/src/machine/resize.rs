//! Resize: sets a semaphore's size for good (until resized again). It may
//! shrink below what is held (holders keep their permits), but not below
//! what a waiter asks for, which could then never be granted.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::LogIndex;
use super::{validate, LeaseMachine};
use raftlock_proto::limits;

impl LeaseMachine {
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

    /// The size Resize set for `name`, if any.
    pub fn size(&self, name: &str) -> Option<u32> {
        self.sizes.get(name).copied()
    }
}
