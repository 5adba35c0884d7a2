//! AcquireAll: several locks granted together in one entry, or none.
//!
//! A set that cannot be granted at once waits in the queue of each of its
//! locks, entered in this one entry, and is recorded in `sets`. It is
//! granted when it is at the front of every one of those queues and every
//! one of its locks is free: then all at once, each lock its own grant
//! with the granting entry's index as token. Until then it blocks each
//! queue it is at the front of (strict FIFO, as any waiter does), so a set
//! is never starved by single acquisitions that keep one of its locks busy.
//!
//! Waiting this way cannot deadlock: a waiter only ever waits for holders
//! and for waiters queued before it, and a set enters all its queues in one
//! entry, so "queued before" is one order over every queue (the log's) and
//! no cycle of waiters can form. (A session that holds a lock and then
//! waits for another can still deadlock with anyone, as it can without
//! sets; taking every lock in one AcquireAll is how to avoid it.)

use super::error::LeaseError;
use super::lock::{fits, LockState};
use super::outcome::{Event, Reply};
use super::types::{Grant, LogIndex, Mode, RequestId, SessionId, Terms, Waiter};
use super::{validate, LeaseMachine};
use raftlock_proto::limits;
use std::collections::BTreeMap;

/// What an [`super::Command::AcquireAll`] asks.
pub(super) struct Request<'a> {
    pub session: SessionId,
    pub names: &'a [String],
    pub request_id: RequestId,
    pub wait_ms: Option<u64>,
    pub metadata: &'a [u8],
}

/// The set `waiter`, queued for `name`, belongs to, if it is one.
pub(super) fn set_of<'s>(sets: &'s Sets, waiter: &Waiter, name: &str) -> Option<&'s [String]> {
    sets.get(&waiter.session)?
        .get(&waiter.request_id)
        .filter(|names| names.iter().any(|n| n == name))
        .map(Vec::as_slice)
}

/// Waiting sets by session and request id.
pub(super) type Sets = BTreeMap<SessionId, BTreeMap<RequestId, Vec<String>>>;

/// Where a set's request stands on one of its locks.
enum Standing {
    Held,
    Waiting,
    New,
}

impl LeaseMachine {
    pub(super) fn acquire_all(
        &mut self,
        req: Request<'_>,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        validate::lock_set(req.names)?;
        validate::metadata("metadata", req.metadata)?;
        validate::wait(req.wait_ms)?;
        let session = self
            .sessions
            .get(&req.session)
            .ok_or(LeaseError::SessionNotFound(req.session))?;
        if let Some(reply) = self.set_retry_answer(&req)? {
            return Ok(reply);
        }
        if session.held.len() + session.waiting.len() + req.names.len()
            > limits::MAX_LOCKS_PER_SESSION
        {
            return Err(LeaseError::TooManyLocks {
                session: req.session,
                max: limits::MAX_LOCKS_PER_SESSION,
            });
        }
        let empty = LockState::default();
        let mut blocked = None;
        for name in req.names {
            let lock = self.locks.get(name.as_str()).unwrap_or(&empty);
            let free = lock.waiters.is_empty()
                && !self.delayed.contains_key(name.as_str())
                && fits(&lock.holders, lock.permits, Mode::Exclusive, 1);
            if !free {
                blocked = Some(lock);
                break;
            }
        }
        if let Some(lock) = blocked {
            if req.wait_ms.is_none() {
                return Ok(Reply::Busy {
                    holders: super::lock::busy_holders(&lock.holders),
                });
            }
            if let Some(name) = req.names.iter().find(|n| {
                self.locks
                    .get(n.as_str())
                    .is_some_and(|l| l.waiters.len() >= limits::MAX_WAITERS_PER_LOCK)
            }) {
                return Err(LeaseError::TooManyWaiters {
                    name: name.clone(),
                    max: limits::MAX_WAITERS_PER_LOCK,
                });
            }
            return Ok(self.queue_set(&req, at_ms));
        }
        let mut grants = Vec::with_capacity(req.names.len());
        for name in req.names {
            let sized = self.sizes.get(name.as_str()).copied();
            let lock = self.locks.entry(name.clone()).or_default();
            lock.permits = sized.or(lock.permits);
            let grant = Grant {
                name: name.clone(),
                session: req.session,
                request_id: req.request_id,
                mode: Mode::Exclusive,
                token: index,
                granted_at_ms: at_ms,
                metadata: req.metadata.to_vec(),
                terms: Terms::default(),
            };
            lock.push_holder(grant.clone());
            if let Some(s) = self.sessions.get_mut(&req.session) {
                s.held.insert(name.clone(), req.request_id);
            }
            events.push(Event::Granted(grant.clone()));
            grants.push(grant);
        }
        Ok(Reply::AcquiredAll(grants))
    }

    /// Enters the set in the queue of each of its locks.
    fn queue_set(&mut self, req: &Request<'_>, at_ms: u64) -> Reply {
        let mut position = 0;
        for name in req.names {
            let sized = self.sizes.get(name.as_str()).copied();
            let lock = self.locks.entry(name.clone()).or_default();
            lock.permits = sized.or(lock.permits);
            lock.waiters.push_back(Waiter {
                session: req.session,
                request_id: req.request_id,
                mode: Mode::Exclusive,
                enqueued_at_ms: at_ms,
                timeout_ms: req.wait_ms.unwrap_or(0),
                metadata: req.metadata.to_vec(),
                terms: Terms::default(),
            });
            position = position.max(lock.waiters.len() - 1);
            if let Some(s) = self.sessions.get_mut(&req.session) {
                s.waiting.insert(name.clone(), req.request_id);
            }
        }
        self.sets
            .entry(req.session)
            .or_default()
            .insert(req.request_id, req.names.to_vec());
        Reply::Queued { position }
    }

    /// What a retry of a set the session already asked for gets: the same
    /// grants, its places in the queues, or how it ended.
    fn set_retry_answer(&self, req: &Request<'_>) -> Result<Option<Reply>, LeaseError> {
        let session = &self.sessions[&req.session];
        let mut standings = Vec::with_capacity(req.names.len());
        for name in req.names {
            let standing = match (session.held.get(name), session.waiting.get(name)) {
                (Some(id), _) if *id == req.request_id => Standing::Held,
                (Some(_), _) => {
                    let token = self
                        .locks
                        .get(name.as_str())
                        .and_then(|l| l.holder(req.session))
                        .map_or(0, |g| g.token);
                    return Err(LeaseError::AlreadyHeld {
                        name: name.clone(),
                        token,
                    });
                }
                (None, Some(id)) if *id == req.request_id => Standing::Waiting,
                (None, Some(_)) => {
                    return Err(LeaseError::AlreadyWaiting { name: name.clone() });
                }
                (None, None) => Standing::New,
            };
            standings.push(standing);
        }
        if standings.iter().all(|s| matches!(s, Standing::Held))
            || standings.iter().all(|s| matches!(s, Standing::Waiting))
        {
            return Ok(self.set_stands(req.session, req.names, req.request_id));
        }
        // Newest first, as a single acquisition's retry is answered.
        match session
            .finished
            .iter()
            .rev()
            .find(|(id, _)| *id == req.request_id)
        {
            Some((_, how)) => Err(how.error(req.request_id)),
            None if standings.iter().all(|s| matches!(s, Standing::New)) => Ok(None),
            // Part of the set let go of, and its end forgotten since.
            None => Err(LeaseError::RequestFinished {
                request_id: req.request_id,
            }),
        }
    }

    /// Where set `request_id` of `session` stands now, if it still stands
    /// whole: the grants of every lock, or its place in the queues (the
    /// furthest back).
    pub(super) fn set_stands(
        &self,
        session: SessionId,
        names: &[String],
        request_id: RequestId,
    ) -> Option<Reply> {
        let s = self.sessions.get(&session)?;
        if names.iter().all(|n| s.held.get(n) == Some(&request_id)) {
            let grants = names
                .iter()
                .filter_map(|n| self.locks.get(n.as_str())?.holder(session).cloned())
                .collect();
            return Some(Reply::AcquiredAll(grants));
        }
        if names.iter().all(|n| s.waiting.get(n) == Some(&request_id)) {
            let position = names
                .iter()
                .filter_map(|n| self.locks.get(n.as_str())?.queue_position(session))
                .max()
                .unwrap_or(0);
            return Some(Reply::Queued { position });
        }
        None
    }

    /// Grants the waiting set `key` if it is at the front of each of its
    /// queues and each of its locks is free; false if something blocks it.
    pub(super) fn grant_set(
        &mut self,
        key: (SessionId, RequestId),
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> bool {
        let Some(names) = self.sets.get(&key.0).and_then(|s| s.get(&key.1)) else {
            return false;
        };
        let ready = |name: &String| {
            self.locks.get(name.as_str()).is_some_and(|lock| {
                lock.waiters
                    .front()
                    .is_some_and(|w| (w.session, w.request_id) == key)
                    && !self.delayed.contains_key(name.as_str())
                    && lock.fits(Mode::Exclusive, 1)
            })
        };
        if !names.iter().all(ready) {
            return false;
        }
        let names = self.take_set(key);
        for name in &names {
            let Some(grant) = self
                .locks
                .get_mut(name.as_str())
                .and_then(|l| l.grant_first(name, index, at_ms))
            else {
                continue;
            };
            if let Some(s) = self.sessions.get_mut(&key.0) {
                s.waiting.remove(name.as_str());
                s.held.insert(name.clone(), key.1);
            }
            events.push(Event::HandedOver(grant));
        }
        true
    }

    /// [`crate::planted::Bug::SetGrantsEarly`]: grants `name` alone to the
    /// set at the front of its queue if it is free, and leaves the rest of
    /// the set waiting.
    pub(super) fn grant_one_of_set(
        &mut self,
        key: (SessionId, RequestId),
        name: &str,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) {
        let free = self
            .locks
            .get(name)
            .is_some_and(|l| l.fits(Mode::Exclusive, 1));
        if !free || self.delayed.contains_key(name) {
            return;
        }
        let Some(grant) = self
            .locks
            .get_mut(name)
            .and_then(|l| l.grant_first(name, index, at_ms))
        else {
            return;
        };
        if let Some(names) = self.sets.get_mut(&key.0).and_then(|s| s.get_mut(&key.1)) {
            names.retain(|n| n != name);
        }
        if let Some(s) = self.sessions.get_mut(&key.0) {
            s.waiting.remove(name);
            s.held.insert(name.to_owned(), key.1);
        }
        events.push(Event::HandedOver(grant));
    }

    /// Takes the waiting set `key` out of every queue it is in; the names
    /// of its locks, which the caller must let grant again. Nothing if it
    /// is not a waiting set.
    pub(super) fn unqueue_set(
        &mut self,
        key: (SessionId, RequestId),
        events: &mut Vec<Event>,
        reason: super::WaitEnd,
    ) -> Vec<String> {
        let names = self.take_set(key);
        for name in &names {
            if let Some(s) = self.sessions.get_mut(&key.0) {
                s.waiting.remove(name.as_str());
            }
            if let Some(lock) = self.locks.get_mut(name.as_str()) {
                if let Some(pos) = lock
                    .waiters
                    .iter()
                    .position(|w| (w.session, w.request_id) == key)
                {
                    lock.waiters.remove(pos);
                }
            }
            events.push(Event::WaitEnded {
                name: name.clone(),
                session: key.0,
                request_id: key.1,
                reason,
            });
        }
        names
    }

    /// Forgets the waiting set `key`; its names (none if it is not one).
    fn take_set(&mut self, key: (SessionId, RequestId)) -> Vec<String> {
        let Some(of_session) = self.sets.get_mut(&key.0) else {
            return Vec::new();
        };
        let names = of_session.remove(&key.1).unwrap_or_default();
        if of_session.is_empty() {
            self.sets.remove(&key.0);
        }
        names
    }

    /// The grants session `session` holds through request `request_id`:
    /// every lock of a set granted together, or the one lock otherwise.
    pub(super) fn grants_of(&self, session: SessionId, request_id: RequestId) -> Vec<Grant> {
        let Some(s) = self.sessions.get(&session) else {
            return Vec::new();
        };
        s.held
            .iter()
            .filter(|(_, id)| **id == request_id)
            .filter_map(|(name, _)| self.locks.get(name.as_str())?.holder(session).cloned())
            .collect()
    }
}
