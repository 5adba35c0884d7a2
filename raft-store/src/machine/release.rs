//! Release: the holder lets go, and the waiters this frees are granted in
//! the same entry, with this entry's index as their token.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::{FencingToken, Finished, HoldEnd, LogIndex, SessionId};
use super::LeaseMachine;
use raftlock_proto::limits;

impl LeaseMachine {
    pub(super) fn release(
        &mut self,
        session: SessionId,
        name: &str,
        token: FencingToken,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        self.check_holder(session, name, token)?;
        let grant = self
            .locks
            .get_mut(name)
            .and_then(|l| l.remove_holder(session))
            .ok_or_else(|| LeaseError::NotHolder {
                name: name.to_owned(),
                session,
            })?;
        self.hold_ended(&grant, HoldEnd::Released, events);
        let granted = self.grant_collecting(name, index, at_ms, events);
        Ok(Reply::Released { granted })
    }

    /// The session exists and holds `name` with exactly `token`.
    pub(super) fn check_holder(
        &self,
        session: SessionId,
        name: &str,
        token: FencingToken,
    ) -> Result<(), LeaseError> {
        if !self.sessions.contains_key(&session) {
            return Err(LeaseError::SessionNotFound(session));
        }
        let holder = self
            .locks
            .get(name)
            .and_then(|l| l.holder(session))
            .ok_or_else(|| LeaseError::NotHolder {
                name: name.to_owned(),
                session,
            })?;
        if holder.token != token {
            return Err(LeaseError::StaleToken {
                name: name.to_owned(),
                token,
                current: holder.token,
            });
        }
        Ok(())
    }
}

impl super::Session {
    /// Remembers how an acquisition ended, forgetting the oldest beyond the
    /// bound so a long-lived session does not grow without limit.
    pub(super) fn remember_finished(&mut self, id: super::RequestId, how: Finished) {
        if self.finished.len() >= limits::FINISHED_REQUESTS_PER_SESSION {
            self.finished.pop_front();
        }
        self.finished.push_back((id, how));
    }
}
