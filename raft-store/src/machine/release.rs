//! Release: the holder lets go, and the waiters this frees are granted in
//! the same entry, with this entry's index as their token.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::types::{FencingToken, Finished, LogIndex, SessionId};
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
        let before = events.len();
        self.grant_waiters(name, index, at_ms, events);
        let granted = events[before..]
            .iter()
            .filter_map(|e| match e {
                Event::Granted(g) => Some(g.clone()),
                _ => None,
            })
            .collect();
        Ok(Reply::Released { granted })
    }

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
            if let Some(s) = self.sessions.get_mut(&g.session) {
                s.held.remove(name);
            }
            self.finish(g.session, name, g.request_id, Finished::Released(g.token));
            events.push(Event::Released {
                name: name.to_owned(),
                session: g.session,
                token: g.token,
            });
            self.start_lock_delay(g, index, events);
        }
        let before = events.len();
        self.grant_waiters(name, index, at_ms, events);
        let granted = events[before..]
            .iter()
            .filter_map(|e| match e {
                Event::Granted(g) => Some(g.clone()),
                _ => None,
            })
            .collect();
        Ok(Reply::ForceReleased { released, granted })
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
