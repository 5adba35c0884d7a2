//! Reads of the state. They are only linearizable when the caller has
//! confirmed leadership (read index) and waited for this state to catch up.

use super::lock::LockState;
use super::types::{FencingToken, Grant, RequestId, Session, SessionId, Waiter};
use super::LeaseMachine;
use std::ops::Bound;

/// Holders and waiters of one lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockView {
    /// Shared capacity, if fixed.
    pub permits: Option<u32>,
    /// Holders in grant order.
    pub holders: Vec<Grant>,
    /// Waiters in FIFO order.
    pub waiters: Vec<Waiter>,
    /// The lock-delay in force, in ms: nobody is granted the lock until the
    /// leader ends it.
    pub lock_delay_ms: Option<u64>,
}

/// One lock of a listing: a name somebody holds or waits for, or a
/// semaphore whose size `Resize` set (which exists, held or not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockSummary {
    /// Lock name.
    pub name: String,
    /// Shared capacity: the size `Resize` set, else the holders' if fixed.
    pub permits: Option<u32>,
    /// `permits` was set by `Resize`.
    pub resized: bool,
    /// Holders in grant order.
    pub holders: Vec<Grant>,
    /// Queue length.
    pub waiters: usize,
    /// The lock-delay in force, in ms.
    pub lock_delay_ms: Option<u64>,
}

/// Whether a token is current.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    /// A current holder has this token.
    pub valid: bool,
    /// Highest token among current holders (0 if none).
    pub current_token: FencingToken,
}

impl LeaseMachine {
    /// Holders and waiters of `name` (empty if nobody holds or waits).
    pub fn describe(&self, name: &str) -> LockView {
        let mut view = self
            .locks
            .get(name)
            .map(|l| LockView {
                permits: l.permits,
                holders: l.holders.clone(),
                waiters: l.waiters.iter().cloned().collect(),
                lock_delay_ms: None,
            })
            .unwrap_or_default();
        view.permits = self.size(name).or(view.permits);
        view.lock_delay_ms = self.lock_delay(name);
        view
    }

    /// One lock's state, if anyone holds or waits for it.
    pub fn lock(&self, name: &str) -> Option<&LockState> {
        self.locks.get(name)
    }

    /// Up to `limit` locks whose names start with `prefix`, after `after`
    /// (exclusive), in name order: those held or waited for and the
    /// semaphores with a size, so that a sized semaphore nobody holds (a
    /// group with no members, say) can be found.
    pub fn list(&self, prefix: &str, after: &str, limit: usize) -> Vec<LockSummary> {
        let start = if after.is_empty() || after < prefix {
            Bound::Included(prefix.to_owned())
        } else {
            Bound::Excluded(after.to_owned())
        };
        let in_prefix = |name: &&String| name.starts_with(prefix);
        let mut held = self
            .locks
            .range((start.clone(), Bound::Unbounded))
            .map(|(n, _)| n)
            .take_while(in_prefix)
            .peekable();
        let mut sized = self
            .sizes
            .range((start, Bound::Unbounded))
            .map(|(n, _)| n)
            .take_while(in_prefix)
            .peekable();
        let mut out = Vec::new();
        while out.len() < limit {
            // Merge the two name-ordered walks, each name once.
            let name = match (held.peek(), sized.peek()) {
                (None, None) => break,
                (Some(h), Some(z)) if h == z => {
                    sized.next();
                    held.next()
                }
                (Some(h), Some(z)) if z < h => sized.next(),
                (Some(_), _) => held.next(),
                (None, Some(_)) => sized.next(),
            };
            let Some(name) = name else { break };
            let lock = self.locks.get(name);
            let size = self.sizes.get(name).copied();
            out.push(LockSummary {
                name: name.clone(),
                permits: size.or_else(|| lock.and_then(|l| l.permits)),
                resized: size.is_some(),
                holders: lock.map(|l| l.holders.clone()).unwrap_or_default(),
                waiters: lock.map_or(0, |l| l.waiters.len()),
                lock_delay_ms: self.delayed.get(name).map(|d| d.ms),
            });
        }
        out
    }

    /// Whether `token` is held by a current holder of `name`.
    pub fn validate(&self, name: &str, token: FencingToken) -> Validation {
        match self.locks.get(name) {
            Some(l) => Validation {
                valid: l.holders.iter().any(|h| h.token == token),
                current_token: l.current_token(),
            },
            None => Validation {
                valid: false,
                current_token: 0,
            },
        }
    }

    /// How many live sessions `owner` created (0 for the empty owner).
    pub fn sessions_owned_by(&self, owner: &str) -> u64 {
        self.owners.get(owner).copied().unwrap_or(0)
    }

    /// The live sessions that count against `owner`'s session limit: its
    /// own, or for the empty owner (every caller of a cluster without
    /// authentication) all of them.
    pub fn sessions_within_limit_of(&self, owner: &str) -> u64 {
        if owner.is_empty() {
            return self.sessions.len() as u64;
        }
        self.sessions_owned_by(owner)
    }

    /// A session by id.
    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// The exactly-once bookkeeping of `session` (`exactly_once.rs`): the highest
    /// `acked_below` it has sent, and the sequence numbers whose first
    /// answers are kept for duplicates, ascending. `(0, [])` when it keeps
    /// none, and for a session that does not exist.
    pub fn exactly_once(&self, session: SessionId) -> (u64, Vec<u64>) {
        self.once
            .get(&session)
            .map(|o| (o.acked_below, o.answers.keys().copied().collect()))
            .unwrap_or_default()
    }

    /// The numbered acquisitions of `session` that still hold or wait, as
    /// (request id, lock, sequence number): how each ends is kept with its
    /// exactly-once answer.
    pub fn numbered_standing(
        &self,
        session: SessionId,
    ) -> impl Iterator<Item = (super::RequestId, &str, u64)> {
        self.once
            .get(&session)
            .into_iter()
            .flat_map(|o| o.standing.iter())
            .map(|(name, (id, seq))| (*id, name.as_str(), *seq))
    }

    /// All live sessions, by id.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    /// Where `session`'s client runs, if it said.
    pub fn origin(&self, session: SessionId) -> Option<&super::Origin> {
        self.origins.get(&session)
    }

    /// All locks with a holder or a waiter, by name.
    pub fn locks(&self) -> impl Iterator<Item = (&str, &LockState)> {
        self.locks.iter().map(|(n, l)| (n.as_str(), l))
    }

    /// Held or awaited locks whose names start with `prefix`, in name
    /// order, from the first such name on (no scan of the names before).
    pub fn locks_under<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a LockState)> + 'a {
        self.locks
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(n, _)| n.starts_with(prefix))
            .map(|(n, l)| (n.as_str(), l))
    }

    /// The locks of the set `session` waits for through `request_id`
    /// (`AcquireAll`), if it waits for one that way.
    pub fn lock_set(&self, session: SessionId, request_id: RequestId) -> Option<&[String]> {
        self.sets.get(&session)?.get(&request_id).map(Vec::as_slice)
    }

    /// Every waiting lock set: session, request id and names.
    pub fn lock_sets(&self) -> impl Iterator<Item = (SessionId, RequestId, &[String])> {
        self.sets.iter().flat_map(|(s, sets)| {
            sets.iter()
                .map(move |(r, names)| (*s, *r, names.as_slice()))
        })
    }

    /// Live sessions, locks held or waited for, and queued waiters.
    pub fn counts(&self) -> (usize, usize, usize) {
        let waiters = self.locks.values().map(|l| l.waiters.len()).sum();
        (self.sessions.len(), self.locks.len(), waiters)
    }

    /// Answers kept for exactly-once retries, over every session: bounded
    /// by each session's calls in flight, not by its age.
    pub fn recorded_answers(&self) -> usize {
        self.once.values().map(|o| o.answers.len()).sum()
    }
}
