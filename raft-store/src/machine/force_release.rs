//! ForceRelease: an administrator takes a lock from every holder, and the
//! waiters this frees are granted in the same entry.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::{HoldEnd, LogIndex};
use super::LeaseMachine;

impl LeaseMachine {
    /// Takes the lock from every holder, whoever they are, and grants the
    /// waiters this frees. The holders' sessions live on; a later Release
    /// by one of them is refused as from a non-holder.
    pub(super) fn force_release(
        &mut self,
        name: &str,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        super::validate::name(name)?;
        let released = match self.locks.get_mut(name) {
            Some(lock) => std::mem::take(&mut lock.holders),
            None => Vec::new(),
        };
        for g in &released {
            self.hold_ended(g, HoldEnd::ForceReleased, events);
            self.start_lock_delay(g, index, events);
        }
        let granted = self.grant_collecting(name, index, at_ms, events);
        Ok(Reply::ForceReleased { released, granted })
    }
}
