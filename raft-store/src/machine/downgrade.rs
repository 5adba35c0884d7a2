//! Downgrade: a holder of an exclusive lock keeps it as a shared hold, as
//! a read-write lock's writer becomes a reader without letting go (Java's
//! `ReentrantReadWriteLock`, Curator's `InterProcessReadWriteLock`). Its
//! token stays: it still names the same hold. The shared waiters at the
//! front of the queue that now fit are granted in the same entry, so they
//! read what the writer wrote, and no other writer can come between.

use super::error::LeaseError;
use super::lock::UNLIMITED;
use super::outcome::{Event, Reply};
use super::types::{FencingToken, LogIndex, Mode, SessionId};
use super::{validate, Apply, LeaseMachine};
use serde::{Deserialize, Serialize};

/// Turns `session`'s exclusive hold of `name` (granted with `token`) into
/// a shared hold of one permit. A hold that is already shared is left as
/// it is (a retried downgrade gets the same answer). The hold loses its
/// lock-delay, which protects exclusive holds only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Downgrade {
    /// The holding session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The hold's token.
    pub token: FencingToken,
}

impl Apply for Downgrade {
    fn kind(&self) -> &'static str {
        "downgrade"
    }

    fn apply(
        &self,
        m: &mut LeaseMachine,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        validate::name(&self.name)?;
        m.check_holder(self.session, &self.name, self.token)?;
        let hold = m
            .locks
            .get_mut(&self.name)
            .and_then(|l| l.holder_mut(self.session))
            .ok_or_else(|| LeaseError::NotHolder {
                name: self.name.clone(),
                session: self.session,
            })?;
        if hold.mode == Mode::Shared {
            return Ok(Reply::Downgraded {
                hold: hold.clone(),
                granted: Vec::new(),
            });
        }
        hold.mode = Mode::Shared;
        hold.terms.count = 1;
        hold.terms.lock_delay_ms = 0;
        let hold = hold.clone();
        // A lock taken exclusively has no capacity yet: it gets the one a
        // first shared acquisition without a count would give it.
        if let Some(lock) = m.locks.get_mut(&self.name) {
            lock.permits = lock.permits.or(Some(UNLIMITED));
        }
        let granted = m.grant_collecting(&self.name, index, at_ms, events);
        Ok(Reply::Downgraded { hold, granted })
    }
}
