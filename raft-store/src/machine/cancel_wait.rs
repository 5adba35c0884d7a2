//! CancelWait: the leader's answer to a wait whose deadline passed. If the
//! grant won the race, the cancel returns it instead of dropping it, so a
//! grant is never leaked to a client that stopped listening.

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
            .get_mut(&session)
            .ok_or(LeaseError::SessionNotFound(session))?;
        if s.held.get(name) == Some(&request_id) {
            if let Some(g) = self.locks.get(name).and_then(|l| l.holder(session)) {
                return Ok(Reply::Acquired(g.clone()));
            }
        }
        if s.waiting.get(name) != Some(&request_id) {
            return Err(LeaseError::WaitNotFound {
                name: name.to_owned(),
                session,
                request_id,
            });
        }
        s.waiting.remove(name);
        self.finish(session, name, request_id, Finished::WaitCancelled);
        if let Some(lock) = self.locks.get_mut(name) {
            lock.remove_waiter(session);
        }
        events.push(Event::WaitEnded {
            name: name.to_owned(),
            session,
            request_id,
            reason: WaitEnd::Cancelled,
        });
        // The cancelled waiter may have been the one blocking those behind it
        // (an exclusive waiter ahead of shared ones).
        self.grant_waiters(name, index, at_ms, events);
        Ok(Reply::WaitCancelled)
    }
}
