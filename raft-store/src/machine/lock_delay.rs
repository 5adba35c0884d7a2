//! Lock-delays and EndLockDelay: a **lock-delay** (Chubby's, Consul's)
//! keeps an exclusive lock from being granted for `lock_delay_ms` after its
//! holder lost it without releasing it (session expired, forced, hold
//! cap), so that a holder that did not notice has time to stop before
//! anyone else writes. The leader proposes `EndLockDelayAt` when it runs
//! out. A clean release or close starts no delay.
//!
//! Time is the leader's: apply never looks at a clock, so a new leader that
//! counts it afresh can only make it last longer, never end it early.

use super::outcome::{Event, Reply};
use super::types::{Grant, LogIndex, Mode};
use super::LeaseMachine;

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
}
