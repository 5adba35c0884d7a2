//! Acquire: grant at once if the queue is empty and the lock has room,
//! otherwise queue (or, for a try-lock, answer busy). A retry with the same
//! request id finds what the first attempt got, never a second grant.

use super::error::LeaseError;
use super::lock::{busy_holders, fits, LockState, UNLIMITED};
use super::outcome::{Event, Reply};
use super::types::{Finished, Grant, LogIndex, Mode, RequestId, SessionId, Terms, Waiter};
use super::{validate, Command, LeaseMachine};
use raftlock_proto::limits;

pub(super) struct Request<'a> {
    pub session: SessionId,
    pub name: &'a str,
    pub request_id: RequestId,
    pub mode: Mode,
    pub permits: Option<u32>,
    pub wait_ms: Option<u64>,
    pub metadata: &'a [u8],
    pub terms: Terms,
}

impl<'a> Request<'a> {
    /// The request an [`Command::Acquire`] (or a [`Command::WithTerms`] one)
    /// makes; `None` for any other command.
    pub(super) fn of(command: &'a Command) -> Option<Self> {
        if let Command::WithTerms { terms, command } = command {
            return match &**command {
                Command::Acquire { .. } => {
                    Self::of(command).map(|r| Request { terms: *terms, ..r })
                }
                _ => None,
            };
        }
        let Command::Acquire {
            session,
            name,
            request_id,
            mode,
            permits,
            wait_ms,
            metadata,
        } = command
        else {
            return None;
        };
        Some(Request {
            session: *session,
            name,
            request_id: *request_id,
            mode: *mode,
            permits: *permits,
            wait_ms: *wait_ms,
            metadata,
            terms: Terms::default(),
        })
    }
}

impl LeaseMachine {
    pub(super) fn acquire(
        &mut self,
        req: Request<'_>,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        validate::name(req.name)?;
        validate::metadata("metadata", req.metadata)?;
        validate::permits(req.permits)?;
        validate::wait(req.wait_ms)?;
        validate::terms(req.mode, &req.terms)?;
        let session = self
            .sessions
            .get(&req.session)
            .ok_or(LeaseError::SessionNotFound(req.session))?;
        if let Some(reply) = self.retry_answer(&req)? {
            return Ok(reply);
        }
        if session.held.len() + session.waiting.len() >= limits::MAX_LOCKS_PER_SESSION {
            return Err(LeaseError::TooManyLocks {
                session: req.session,
                max: limits::MAX_LOCKS_PER_SESSION,
            });
        }

        let empty = LockState::default();
        let lock = self.locks.get(req.name).unwrap_or(&empty);
        let sized = self.sizes.get(req.name).copied();
        // A size set by Resize wins over what acquisitions state, so that
        // clients need not all learn of a resize.
        if let (Some(requested), Some(current), None) = (req.permits, lock.permits, sized) {
            if requested != current {
                return Err(LeaseError::PermitsMismatch {
                    name: req.name.to_owned(),
                    requested,
                    current,
                });
            }
        }
        // The capacity this request fixes, if the lock has none yet.
        let permits = sized.or(lock.permits).or(req.permits).or(match req.mode {
            Mode::Shared => Some(UNLIMITED),
            Mode::Exclusive => None,
        });
        if req.mode == Mode::Shared && req.terms.count > permits.unwrap_or(UNLIMITED) {
            return Err(LeaseError::PermitsExceeded {
                name: req.name.to_owned(),
                count: req.terms.count,
                permits: permits.unwrap_or(UNLIMITED),
            });
        }
        // Strict FIFO: nobody overtakes a waiter, even one whose own request
        // is blocked for a reason (capacity) that would not block this one.
        // A lock in lock-delay grants nobody until the leader ends it.
        let grant_now = lock.waiters.is_empty()
            && !self.delayed.contains_key(req.name)
            && fits(&lock.holders, permits, req.mode, req.terms.count);

        if !grant_now && req.wait_ms.is_none() {
            return Ok(Reply::Busy {
                holders: busy_holders(&lock.holders),
            });
        }
        if !grant_now && lock.waiters.len() >= limits::MAX_WAITERS_PER_LOCK {
            return Err(LeaseError::TooManyWaiters {
                name: req.name.to_owned(),
                max: limits::MAX_WAITERS_PER_LOCK,
            });
        }

        let lock = self.locks.entry(req.name.to_owned()).or_default();
        lock.permits = permits;
        let session = self
            .sessions
            .get_mut(&req.session)
            .ok_or(LeaseError::SessionNotFound(req.session))?;
        if grant_now {
            let grant = Grant {
                name: req.name.to_owned(),
                session: req.session,
                request_id: req.request_id,
                mode: req.mode,
                token: index,
                granted_at_ms: at_ms,
                metadata: req.metadata.to_vec(),
                terms: req.terms,
            };
            lock.push_holder(grant.clone());
            session.held.insert(req.name.to_owned(), req.request_id);
            events.push(Event::Granted(grant.clone()));
            Ok(Reply::Acquired(grant))
        } else {
            lock.waiters.push_back(Waiter {
                session: req.session,
                request_id: req.request_id,
                mode: req.mode,
                enqueued_at_ms: at_ms,
                timeout_ms: req.wait_ms.unwrap_or(0),
                metadata: req.metadata.to_vec(),
                terms: req.terms,
            });
            session.waiting.insert(req.name.to_owned(), req.request_id);
            Ok(Reply::Queued {
                position: lock.waiters.len() - 1,
            })
        }
    }

    /// What a retry of an acquisition the session already made gets: the
    /// same grant, the same place in the queue, or the news that it is over.
    fn retry_answer(&self, req: &Request<'_>) -> Result<Option<Reply>, LeaseError> {
        let session = &self.sessions[&req.session];
        if let Some(held_by) = session.held.get(req.name) {
            let grant = self
                .locks
                .get(req.name)
                .and_then(|l| l.holder(req.session))
                .cloned();
            return match grant {
                Some(g) if *held_by == req.request_id => Ok(Some(Reply::Acquired(g))),
                Some(g) => Err(LeaseError::AlreadyHeld {
                    name: req.name.to_owned(),
                    token: g.token,
                }),
                None => Ok(None),
            };
        }
        if let Some(waiting_as) = session.waiting.get(req.name) {
            if *waiting_as != req.request_id {
                return Err(LeaseError::AlreadyWaiting {
                    name: req.name.to_owned(),
                });
            }
            let position = self
                .locks
                .get(req.name)
                .and_then(|l| l.queue_position(req.session))
                .unwrap_or(0);
            return Ok(Some(Reply::Queued { position }));
        }
        // Newest first: a request id reused after it finished (a client bug,
        // but a possible one) is answered by how it finished last.
        match session
            .finished
            .iter()
            .rev()
            .find(|(id, _)| *id == req.request_id)
        {
            Some((_, Finished::Released(token))) => Err(LeaseError::RequestReleased {
                request_id: req.request_id,
                token: *token,
            }),
            Some((_, Finished::WaitCancelled)) => Err(LeaseError::WaitCancelled {
                request_id: req.request_id,
            }),
            None => Ok(None),
        }
    }
}
