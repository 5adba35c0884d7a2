//! The deadlines the lease driver keeps while its node leads, on the
//! leader's monotonic clock: sessions, waits, capped holds and lock-delays.
//! A deadline only ever moves later (see `renew`).

use raftlock_store::machine::{FencingToken, RequestId, SessionId};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Default)]
pub(super) struct Deadlines {
    /// The term this node leads in, if it leads.
    pub(super) term: Option<u64>,
    /// When this driver saw that term begin (a tick after it did).
    pub(super) leading_since: Option<Instant>,
    pub(super) sessions: HashMap<SessionId, (Instant, Duration)>,
    pub(super) waits: HashMap<(SessionId, String), (Instant, RequestId)>,
    /// Capped holds: when their cap runs out, and the grant's token.
    pub(super) holds: HashMap<(SessionId, String), (Instant, FencingToken)>,
    /// Lock-delays: when each ends, and the index that started it.
    pub(super) delays: HashMap<String, (Instant, u64)>,
}

/// Why a keep-alive was not applied to a deadline.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// This node does not lead.
    NotLeader,
    /// The deadline had passed: the session is being expired, and the
    /// client's own (earlier) deadline has passed too, so it already counts
    /// the session as lost.
    Expired,
}

impl Deadlines {
    /// Applies a keep-alive received at `received` to `session`, `now`
    /// being the moment of the call. A deadline only ever grows: a renewal
    /// that was received earlier but gets here later must not pull back a
    /// deadline a later renewal (or a new leader's full-TTL reset) set,
    /// since the client already counts that later acknowledgement.
    /// `exists` is whether the applied state still has the session: an
    /// expiry applied while the renewal waited must not bring it back.
    pub(super) fn renew(
        &mut self,
        session: SessionId,
        received: Instant,
        ttl: Duration,
        now: Instant,
        exists: bool,
    ) -> Result<(), Refused> {
        if self.term.is_none() {
            return Err(Refused::NotLeader);
        }
        if !exists {
            self.sessions.remove(&session);
            return Err(Refused::Expired);
        }
        match self.sessions.get_mut(&session) {
            Some((deadline, _)) if *deadline <= now => Err(Refused::Expired),
            Some((deadline, stored_ttl)) => {
                *deadline = (*deadline).max(received + ttl);
                *stored_ttl = ttl;
                Ok(())
            }
            None => {
                // Applied but not yet seen by the driver (it drains applied
                // changes once per tick).
                self.sessions.insert(session, (received + ttl, ttl));
                Ok(())
            }
        }
    }

    /// Whether `session` still has a deadline that has not passed.
    pub(super) fn live(&self, session: SessionId, now: Instant) -> bool {
        self.term.is_some()
            && self
                .sessions
                .get(&session)
                .is_some_and(|(deadline, _)| *deadline > now)
    }
}
