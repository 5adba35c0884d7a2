//! EndHold: a **hold cap** ends a hold after `max_hold_ms` on the leader's
//! clock, though its session lives: the leader proposes `EndHold` when it
//! runs out.
//!
//! Time is the leader's: apply never looks at a clock, so a new leader that
//! counts it afresh can only make it last longer, never end it early.

use super::outcome::{Event, Reply};
use super::types::{FencingToken, HoldEnd, LogIndex, SessionId};
use super::LeaseMachine;

impl LeaseMachine {
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
        self.hold_ended(&grant, HoldEnd::CapRanOut, events);
        self.start_lock_delay(&grant, index, events);
        let granted = self.grant_collecting(name, index, at_ms, events);
        Reply::HoldEnded {
            released: Some(grant),
            granted,
        }
    }
}
