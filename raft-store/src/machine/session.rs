//! CreateSession, CloseSession and ExpireSessions. Ending a session releases
//! every lock it holds and cancels every wait it queued in the same entry,
//! and only then grants the waiters this frees, so no grant goes to a
//! session that ends in the same entry.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::request::NewSession;
use super::types::{EndReason, HoldEnd, LogIndex, Session, SessionId, WaitEnd};
use super::{validate, LeaseMachine};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

impl LeaseMachine {
    pub(super) fn create_plain_session(
        &mut self,
        new: &NewSession<'_>,
        index: LogIndex,
        at_ms: u64,
    ) -> Result<Reply, LeaseError> {
        let (ttl_ms, client_name, owner) = (new.ttl_ms, new.client_name, new.owner);
        validate::ttl(ttl_ms)?;
        validate::client_name(client_name)?;
        validate::client_name(owner)?;
        if let Some(max) = new.max_sessions {
            let live = self.sessions_within_limit_of(owner);
            if live >= max {
                return Err(LeaseError::TooManySessions {
                    owner: owner.to_owned(),
                    max,
                });
            }
        }
        if !owner.is_empty() {
            *self.owners.entry(owner.to_owned()).or_default() += 1;
        }
        self.sessions.insert(
            index,
            Session {
                id: index,
                ttl_ms,
                client_name: client_name.to_owned(),
                owner: owner.to_owned(),
                created_at_ms: at_ms,
                held: BTreeMap::new(),
                waiting: BTreeMap::new(),
                finished: VecDeque::new(),
            },
        );
        Ok(Reply::SessionCreated {
            session: index,
            ttl_ms,
        })
    }

    /// Creates a session, or with a `key` finds the one a first attempt
    /// created (whose origin is the first attempt's).
    pub(super) fn create_session(
        &mut self,
        new: NewSession<'_>,
        index: LogIndex,
        at_ms: u64,
    ) -> Result<Reply, LeaseError> {
        if let Some(origin) = new.origin {
            validate::host(&origin.host)?;
        }
        let reply = match new.key {
            Some(key) => self.create_session_once(&new, key, index, at_ms)?,
            None => self.create_plain_session(&new, index, at_ms)?,
        };
        if let (Some(origin), Reply::SessionCreated { session, .. }) = (new.origin, &reply) {
            if *session == index {
                self.origins.insert(index, origin.clone());
            }
        }
        Ok(reply)
    }

    pub(super) fn close_session(
        &mut self,
        session: SessionId,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        let Some(s) = self.sessions.get(&session) else {
            return Err(LeaseError::SessionNotFound(session));
        };
        let released: Vec<String> = s.held.keys().cloned().collect();
        self.end_sessions(&[session], EndReason::Closed, index, at_ms, events);
        Ok(Reply::SessionClosed { released })
    }

    pub(super) fn expire_sessions(
        &mut self,
        sessions: &[SessionId],
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Reply {
        let expired = self.end_sessions(sessions, EndReason::Expired, index, at_ms, events);
        Reply::SessionsExpired { expired }
    }

    fn end_sessions(
        &mut self,
        ids: &[SessionId],
        reason: EndReason,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Vec<SessionId> {
        let mut ended = Vec::new();
        let mut touched = BTreeSet::new();
        for id in ids {
            let Some(s) = self.sessions.remove(id) else {
                continue;
            };
            self.forget_once(s.id, &s.owner);
            self.origins.remove(&s.id);
            if let Some(n) = self.owners.get_mut(&s.owner) {
                *n -= 1;
                if *n == 0 {
                    self.owners.remove(&s.owner);
                }
            }
            for name in s.held.keys() {
                if let Some(lock) = self.locks.get_mut(name) {
                    if let Some(g) = lock.remove_holder(s.id) {
                        events.push(Event::Released {
                            name: name.clone(),
                            session: s.id,
                            token: g.token,
                            why: HoldEnd::of_session(reason),
                        });
                        // A closed session let go; an expired one may not
                        // know it lost the lock.
                        if reason == EndReason::Expired {
                            self.start_lock_delay(&g, index, events);
                        }
                    }
                }
                touched.insert(name.clone());
            }
            // Its waiting sets leave every queue below, with its waiters.
            self.sets.remove(&s.id);
            for (name, request_id) in &s.waiting {
                if let Some(lock) = self.locks.get_mut(name) {
                    if lock.remove_waiter(s.id).is_some() {
                        events.push(Event::WaitEnded {
                            name: name.clone(),
                            session: s.id,
                            request_id: *request_id,
                            reason: WaitEnd::SessionEnded,
                        });
                    }
                }
                touched.insert(name.clone());
            }
            events.push(Event::SessionEnded {
                session: s.id,
                reason,
            });
            ended.push(s.id);
        }
        for name in touched {
            self.grant_waiters(&name, index, at_ms, events);
        }
        ended
    }
}
