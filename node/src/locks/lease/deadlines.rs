//! The deadlines the lease driver keeps while its node leads, on the
//! leader's monotonic clock: sessions, waits, capped holds and lock-delays.
//! A session's deadline only ever moves later (see `renew`).
//!
//! Each kind is a [`Due`]: deadlines by key and, beside them, the same keys
//! ordered by deadline, as etcd's lessor keeps its leases in a heap. A tick
//! then looks only at what is due, not at every session, wait and hold,
//! and a session that ends takes its waits and holds out by a range of
//! keys, not by a scan.

use raftlock_store::machine::{FencingToken, RequestId, SessionId};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, RangeBounds};
use std::time::Duration;
use tokio::time::Instant;

/// Deadlines by key, and the keys in deadline order.
pub(super) struct Due<K: Ord + Clone, V> {
    by_key: BTreeMap<K, (Instant, V)>,
    by_time: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Clone, V> Default for Due<K, V> {
    fn default() -> Self {
        Due {
            by_key: BTreeMap::new(),
            by_time: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone, V> Due<K, V> {
    /// Sets `key`'s deadline and value, replacing what it had.
    pub(super) fn insert(&mut self, key: K, entry: (Instant, V)) {
        let at = entry.0;
        if let Some((old, _)) = self.by_key.insert(key.clone(), entry) {
            self.by_time.remove(&(old, key.clone()));
        }
        self.by_time.insert((at, key));
    }

    /// Sets `key`'s deadline and value unless it has one.
    pub(super) fn insert_if_absent(&mut self, key: K, entry: (Instant, V)) {
        if !self.by_key.contains_key(&key) {
            self.insert(key, entry);
        }
    }

    /// Forgets `key`; what it had.
    pub(super) fn remove(&mut self, key: &K) -> Option<(Instant, V)> {
        let entry = self.by_key.remove(key)?;
        self.by_time.remove(&(entry.0, key.clone()));
        Some(entry)
    }

    /// Forgets every key in `range`.
    pub(super) fn remove_range(&mut self, range: impl RangeBounds<K>) {
        let keys: Vec<K> = self.by_key.range(range).map(|(k, _)| k.clone()).collect();
        for k in keys {
            self.remove(&k);
        }
    }

    /// `key`'s deadline and value.
    pub(super) fn get(&self, key: &K) -> Option<&(Instant, V)> {
        self.by_key.get(key)
    }

    /// Whether `key` has a deadline.
    #[cfg(test)]
    pub(super) fn contains_key(&self, key: &K) -> bool {
        self.by_key.contains_key(key)
    }

    /// Whether no key has a deadline.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Forgets every deadline.
    pub(super) fn clear(&mut self) {
        self.by_key.clear();
        self.by_time.clear();
    }

    /// Whether some deadline is at or before `now`.
    pub(super) fn any_due(&self, now: Instant) -> bool {
        self.by_time.first().is_some_and(|(at, _)| *at <= now)
    }

    /// The keys due at or before `now`, earliest first, with their values.
    pub(super) fn due(&self, now: Instant) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.by_time
            .iter()
            .take_while(move |(at, _)| *at <= now)
            .filter_map(|(_, k)| self.by_key.get_key_value(k).map(|(k, (_, v))| (k, v)))
    }

    /// Moves `key`'s deadline with `f` (of its deadline and value).
    pub(super) fn update(&mut self, key: &K, f: impl FnOnce(&mut Instant, &mut V)) {
        let Some((at, v)) = self.by_key.get_mut(key) else {
            return;
        };
        let before = *at;
        f(at, v);
        if *at != before {
            let after = *at;
            self.by_time.remove(&(before, key.clone()));
            self.by_time.insert((after, key.clone()));
        }
    }

    /// Moves every deadline with `f`.
    pub(super) fn update_all(&mut self, mut f: impl FnMut(&mut Instant, &mut V)) {
        self.by_time.clear();
        for (k, (at, v)) in &mut self.by_key {
            f(at, v);
            self.by_time.insert((*at, k.clone()));
        }
    }
}

impl<K: Ord + Clone, V> std::ops::Index<&K> for Due<K, V> {
    type Output = (Instant, V);
    fn index(&self, key: &K) -> &(Instant, V) {
        &self.by_key[key]
    }
}

/// A wait's or a capped hold's key: its session and lock.
pub(super) type NamedKey = (SessionId, String);

/// The keys of one session's waits or holds: `(session, "")` sorts before
/// every name of that session, `(session + 1, "")` after them.
pub(super) fn of_session(session: SessionId) -> (Bound<NamedKey>, Bound<NamedKey>) {
    let end = match session.checked_add(1) {
        Some(next) => Bound::Excluded((next, String::new())),
        None => Bound::Unbounded,
    };
    (Bound::Included((session, String::new())), end)
}

#[derive(Default)]
pub(super) struct Deadlines {
    /// The term this node leads in, if it leads.
    pub(super) term: Option<u64>,
    /// When this driver saw that term begin.
    pub(super) leading_since: Option<Instant>,
    pub(super) sessions: Due<SessionId, Duration>,
    pub(super) waits: Due<NamedKey, RequestId>,
    /// Capped holds: when their cap runs out, and the grant's token.
    pub(super) holds: Due<NamedKey, FencingToken>,
    /// Lock-delays: when each ends, and the index that started it.
    pub(super) delays: Due<String, u64>,
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
        match self.sessions.get(&session) {
            Some((deadline, _)) if *deadline <= now => Err(Refused::Expired),
            Some(_) => {
                self.sessions.update(&session, |deadline, stored_ttl| {
                    *deadline = (*deadline).max(received + ttl);
                    *stored_ttl = ttl;
                });
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
