//! CancelWait: the leader's answer to a wait whose deadline passed. If the
//! grant won the race, the cancel returns it instead of dropping it, so a
//! grant is never leaked to a client that stopped listening. A lock set
//! (`acquire_all.rs`) is cancelled, or returned, whole.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::{Finished, LogIndex, RequestId, SessionId, WaitEnd};
use super::LeaseMachine;

impl LeaseMachine {
    pub(super) fn cancel_wait(
        &mut self,
        session: SessionId,
        name: &str,
        request_id: RequestId,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        let s = self
            .sessions
            .get(&session)
            .ok_or(LeaseError::SessionNotFound(session))?;
        if s.held.get(name) == Some(&request_id) {
            // A set granted together comes back whole, so that the whole
            // set is released.
            let mut grants = self.grants_of(session, request_id);
            if grants.len() > 1 {
                return Ok(Reply::AcquiredAll(grants));
            }
            if let Some(g) = grants.pop() {
                return Ok(Reply::Acquired(g));
            }
        }
        if s.waiting.get(name) != Some(&request_id) {
            // A cancel can reach the log before the acquisition it cancels:
            // the client gave up while its acquire was still on the way, and
            // sent the cancel by another path. Remembered as cancelled, the
            // acquisition is refused when it arrives instead of being
            // granted to a caller that is gone (and held by its session
            // until that session ends). One that already ended keeps how
            // it ended.
            if !s.finished.iter().any(|(id, _)| *id == request_id)
                && !self.answered(session, request_id)
            {
                self.finish(session, name, request_id, Finished::WaitCancelled);
                return Ok(Reply::WaitCancelled);
            }
            return Err(LeaseError::WaitNotFound {
                name: name.to_owned(),
                session,
                request_id,
            });
        }
        // Cancelling one lock of a waiting set cancels the set.
        let in_set = self
            .lock_set(session, request_id)
            .is_some_and(|names| names.iter().any(|n| n == name));
        let mut ended = if in_set {
            self.unqueue_set((session, request_id), events, WaitEnd::Cancelled)
        } else {
            Vec::new()
        };
        if ended.is_empty() {
            if let Some(s) = self.sessions.get_mut(&session) {
                s.waiting.remove(name);
            }
            if let Some(lock) = self.locks.get_mut(name) {
                lock.remove_waiter(session);
            }
            events.push(Event::WaitEnded {
                name: name.to_owned(),
                session,
                request_id,
                reason: WaitEnd::Cancelled,
            });
            ended.push(name.to_owned());
        }
        for name in &ended {
            self.finish(session, name, request_id, Finished::WaitCancelled);
        }
        // The cancelled waiter may have been the one blocking those behind it
        // (an exclusive waiter ahead of shared ones).
        for name in &ended {
            self.grant_waiters(name, index, at_ms, events);
        }
        Ok(Reply::WaitCancelled)
    }
}
