//! Property tests: random command sequences applied to the lease machine and
//! to a deliberately naive reference model (vectors and linear scans, written
//! from DESIGN.md) must agree on every reply and every holder and waiter,
//! while the machine keeps the invariants the contract promises.
//!
//! Exactly-once requests (sequenced acquires and keyed session creation)
//! are sent by a simulated client that numbers its requests, loses answers,
//! retries, and whose old packets the network delivers late; the model
//! keeps the server's side of the rule, and a separate property checks the
//! promise itself from the outcomes alone: no sequenced request runs twice.
//!
//! This file is longer than 800 lines because the reference model is the
//! specification the properties check against: model, generators of command
//! sequences and properties are read together, and the model's value is that
//! it is small and naive, not spread across modules.

use proptest::prelude::*;
use raftlock_proto::limits::MAX_UNACKED_REQUESTS_PER_SESSION;
use raftlock_store::machine::{
    Command, Downgrade, LeaseError, LeaseMachine, Mode, Outcome, Reply, RequestId, Terms,
};
use std::collections::{BTreeMap, BTreeSet};

const LOCKS: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Op {
    Create(usize),
    /// A creation under the owner's session limit.
    CreateLimited {
        owner: usize,
        max: u64,
    },
    Close(usize),
    Expire(Vec<usize>),
    Acquire {
        s: usize,
        lock: usize,
        req: u8,
        shared: bool,
        permits: Option<u32>,
        wait: bool,
        /// Permits taken (shared), a hold cap, a lock-delay.
        terms: Terms,
    },
    Release {
        s: usize,
        lock: usize,
        right_token: bool,
    },
    Cancel {
        s: usize,
        lock: usize,
        req: u8,
    },
    Proclaim {
        s: usize,
        lock: usize,
    },
    /// A holder makes its hold shared.
    Downgrade {
        s: usize,
        lock: usize,
    },
    ForceRelease(usize),
    /// A sequenced acquire from the session's client.
    Seq {
        s: usize,
        lock: usize,
        shared: bool,
        permits: Option<u32>,
        wait: bool,
        packet: Packet,
        /// Whether the answer reaches the client, which then acknowledges
        /// it in its next requests.
        delivered: bool,
        /// Whether the client also lists its calls in flight
        /// (`SequencedAcks`), acknowledging answers one by one.
        acks: bool,
        /// A lock set (AcquireAll) of the locks whose bits this has,
        /// instead of `lock` alone.
        set: Option<u8>,
    },
    CreateOnce {
        owner: usize,
        key: usize,
    },
    /// A semaphore resized (0: its size forgotten).
    Resize {
        lock: usize,
        permits: u32,
    },
    /// The leader ends a holder's hold cap (right or wrong token).
    EndHold {
        s: usize,
        lock: usize,
        right_token: bool,
    },
    /// The leader ends a lock's lock-delay.
    /// End lock `usize`'s delay: 0 the old unnamed way, 1 by the current
    /// delay's start, 2 by an earlier start (a late end).
    EndDelay(usize, u8),
    /// AcquireAll of the locks whose bits `mask` has (two or three).
    All {
        s: usize,
        mask: u8,
        req: u8,
        wait: bool,
    },
}

fn terms() -> impl Strategy<Value = Terms> {
    prop_oneof![
        3 => Just(Terms::default()),
        1 => (1u32..4, prop::option::of(Just(1_000u64)), prop::option::of(Just(2_000u64)))
            .prop_map(|(count, cap, delay)| Terms {
                count,
                max_hold_ms: cap.unwrap_or(0),
                lock_delay_ms: delay.unwrap_or(0),
            }),
    ]
}

/// Which packet a sequenced acquire is.
#[derive(Clone, Debug)]
enum Packet {
    /// The client's next logical request.
    Fresh,
    /// The client's retry of a request it has no answer to.
    Retry(usize),
    /// An earlier packet of the client, verbatim (its old `acked_below`
    /// included), that the network delayed or duplicated.
    Late(usize),
    /// A new request whose `acked_below` is behind what the client sent
    /// before, as if reordered with a later one.
    StaleAck(u8),
    /// An earlier sequence number reused for another request (a client
    /// bug).
    Reused(usize),
    /// Sequence number 0, with an `acked_below` ahead of the client's.
    Zero,
}

/// Creation keys: few, so that retries (and other owners' same keys) are
/// common; the largest checks the key is not truncated.
const KEYS: [u128; 3] = [1, 2, u128::MAX];

/// Request ids of sequenced requests start here, above the plain ops'
/// `0..6`, and are unique per session, so each names one logical request.
const SEQUENCED_IDS: u128 = 1_000;

/// Session owners: the empty one (no authentication) and two identities.
const OWNERS: [&str; 3] = ["", "team-a", "team-b"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..OWNERS.len()).prop_map(Op::Create),
        1 => (0..OWNERS.len(), 0u64..6).prop_map(|(owner, max)| Op::CreateLimited { owner, max }),
        1 => any::<usize>().prop_map(Op::Close),
        1 => prop::collection::vec(any::<usize>(), 1..3).prop_map(Op::Expire),
        8 => (any::<usize>(), 0..LOCKS.len(), 0u8..6, any::<bool>(),
              prop::option::weighted(0.3, 1u32..4), prop::bool::weighted(0.7), terms())
            .prop_map(|(s, lock, req, shared, permits, wait, terms)| Op::Acquire { s, lock, req, shared, permits, wait, terms }),
        5 => (any::<usize>(), 0..LOCKS.len(), prop::bool::weighted(0.9))
            .prop_map(|(s, lock, right_token)| Op::Release { s, lock, right_token }),
        // From 6 up: one of the lock's waiters, so that sequenced requests'
        // waits (with their own request ids) are cancelled too.
        3 => (any::<usize>(), 0..LOCKS.len(), 0u8..10).prop_map(|(s, lock, req)| Op::Cancel { s, lock, req }),
        1 => (any::<usize>(), 0..LOCKS.len()).prop_map(|(s, lock)| Op::Proclaim { s, lock }),
        2 => (any::<usize>(), 0..LOCKS.len()).prop_map(|(s, lock)| Op::Downgrade { s, lock }),
        1 => (0..LOCKS.len()).prop_map(Op::ForceRelease),
        7 => (any::<usize>(), 0..LOCKS.len(), any::<bool>(), prop::option::weighted(0.2, 1u32..4),
              prop::bool::weighted(0.6), packet(), prop::bool::weighted(0.6), any::<bool>(),
              prop::option::weighted(0.25, prop::sample::select(vec![3u8, 5, 6, 7])))
            .prop_map(|(s, lock, shared, permits, wait, packet, delivered, acks, set)| Op::Seq { s, lock, shared, permits, wait, packet, delivered, acks, set }),
        2 => (0..OWNERS.len(), 0..KEYS.len()).prop_map(|(owner, key)| Op::CreateOnce { owner, key }),
        1 => (0..LOCKS.len(), 0u32..5).prop_map(|(lock, permits)| Op::Resize { lock, permits }),
        2 => (any::<usize>(), 0..LOCKS.len(), prop::bool::weighted(0.8))
            .prop_map(|(s, lock, right_token)| Op::EndHold { s, lock, right_token }),
        2 => (0..LOCKS.len(), 0u8..3).prop_map(|(lock, how)| Op::EndDelay(lock, how)),
        4 => (any::<usize>(), prop::sample::select(vec![3u8, 5, 6, 7]), 0u8..6, prop::bool::weighted(0.7))
            .prop_map(|(s, mask, req, wait)| Op::All { s, mask, req, wait }),
    ]
}

fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        4 => Just(Packet::Fresh),
        3 => any::<usize>().prop_map(Packet::Retry),
        3 => any::<usize>().prop_map(Packet::Late),
        1 => (0u8..3).prop_map(Packet::StaleAck),
        1 => any::<usize>().prop_map(Packet::Reused),
        1 => Just(Packet::Zero),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Holder {
    session: u64,
    mode: Mode,
    token: u64,
    req: u128,
    terms: Terms,
}

#[derive(Clone, Debug, Default)]
struct MLock {
    permits: Option<u32>,
    holders: Vec<Holder>,
    queue: Vec<(u64, Mode, u128, Terms)>,
}

/// The first answer to a sequenced request, as the model keeps it.
#[derive(Clone, Debug)]
struct Kept {
    req: u128,
    /// The lock, or every lock of a set.
    names: Vec<String>,
    set: bool,
    first: Answer,
}

/// The server's exactly-once bookkeeping of one session.
#[derive(Clone, Debug, Default)]
struct MOnce {
    /// The highest `acked_below` seen.
    acked: u64,
    /// Numbers above `acked` acknowledged one by one (`in_flight`).
    acked_one_by_one: BTreeSet<u64>,
    /// First answers of sequence numbers not yet acknowledged.
    kept: BTreeMap<u64, Kept>,
}

/// A session's client, on the generator's side (not part of the reference
/// model): the requests it numbered and which answers it has not had.
#[derive(Default)]
struct Client {
    last_seq: u64,
    unanswered: BTreeSet<u64>,
    requests: BTreeMap<u64, Command>,
    sent: Vec<Command>,
}

impl Client {
    /// What a client acknowledges: everything below the lowest request it
    /// still waits for an answer to.
    fn acked_below(&self) -> u64 {
        self.unanswered
            .first()
            .copied()
            .unwrap_or(self.last_seq + 1)
    }
}

/// The reference model: what DESIGN.md says, as plainly as possible.
#[derive(Default)]
struct Model {
    created: Vec<u64>,
    alive: BTreeSet<u64>,
    owner: BTreeMap<u64, &'static str>,
    locks: BTreeMap<String, MLock>,
    finished: BTreeMap<(u64, u128), &'static str>,
    /// Numbered acquisitions granted or queued and not yet ended; when one
    /// ends, how is kept by (session, request, lock) with its answer, not in
    /// `finished` (which unnumbered acquisitions consult).
    numbered: BTreeSet<(u64, u128, String)>,
    numbered_finished: BTreeMap<(u64, u128, String), &'static str>,
    once: BTreeMap<u64, MOnce>,
    keys: BTreeMap<(&'static str, u128), u64>,
    clients: BTreeMap<u64, Client>,
    /// Locks in lock-delay, with its length.
    delayed: BTreeMap<String, u64>,
    /// The index that started each delay (the latest of those that ran
    /// into each other).
    delay_started: BTreeMap<String, u64>,
    /// Sizes set by Resize.
    sizes: BTreeMap<String, u32>,
    /// Lock sets waiting (AcquireAll), by session and request.
    sets: BTreeMap<(u64, u128), Vec<String>>,
}

/// A reply reduced to what the model predicts.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    Created(u64),
    Acquired(u64, u64),
    /// A set held: its session and each lock's token, in name order.
    AcquiredAll(u64, Vec<u64>),
    Queued(usize),
    /// Refused at once: the session and token of each holder named.
    Busy(Vec<(u64, u64)>),
    Ok,
    Err(&'static str),
}

/// An acquire as a sequenced command carries it.
struct Request {
    session: u64,
    name: String,
    /// A lock set (AcquireAll) instead of `name` alone.
    set: Option<Vec<String>>,
    req: u128,
    mode: Mode,
    permits: Option<u32>,
    wait: bool,
}

/// The holders a try-lock refused by `l` names: the oldest grants.
fn busy(l: &MLock) -> Vec<(u64, u64)> {
    l.holders
        .iter()
        .take(raftlock_proto::limits::MAX_BUSY_HOLDERS)
        .map(|h| (h.session, h.token))
        .collect()
}

fn fits(l: &MLock, mode: Mode, permits: Option<u32>, count: u32) -> bool {
    let taken: u64 = l.holders.iter().map(|h| u64::from(h.terms.count)).sum();
    match mode {
        Mode::Exclusive => l.holders.is_empty(),
        Mode::Shared => {
            l.holders.iter().all(|h| h.mode == Mode::Shared)
                && taken + u64::from(count) <= u64::from(permits.unwrap_or(u32::MAX))
        }
    }
}

impl Model {
    fn pick(&self, s: usize) -> u64 {
        if self.created.is_empty() {
            999_999
        } else {
            self.created[s % self.created.len()]
        }
    }

    fn create(&mut self, owner: &'static str, index: u64) {
        self.created.push(index);
        self.alive.insert(index);
        self.owner.insert(index, owner);
    }

    /// The exactly-once rule: a sequence number is answered once, by running
    /// the request; a duplicate gets that answer (for a grant or a wait,
    /// where it stands now or how it ended) and runs nothing; numbers below
    /// the highest `acked_below` seen are refused, their answers forgotten.
    ///
    /// With `in_flight`, every number from the acknowledged mark up to the
    /// highest listed that is neither listed nor `seq` is acknowledged too.
    fn sequenced(
        &mut self,
        seq: u64,
        acked_below: u64,
        in_flight: Option<&[u64]>,
        r: Request,
        index: u64,
    ) -> Answer {
        if seq == 0 {
            return Answer::Err("invalid-argument");
        }
        if !self.alive.contains(&r.session) {
            return Answer::Err("session-not-found");
        }
        let once = self.once.entry(r.session).or_default();
        once.acked = once.acked.max(acked_below);
        let acked = once.acked;
        once.kept.retain(|s, _| *s >= acked);
        once.acked_one_by_one.retain(|s| *s >= acked);
        while once.acked_one_by_one.remove(&once.acked) {
            once.acked += 1;
        }
        if let Some(highest) = in_flight.and_then(|l| l.iter().max().copied()) {
            let listed = in_flight.unwrap_or_default();
            for n in once.acked..highest {
                if n != seq && !listed.contains(&n) {
                    once.acked_one_by_one.insert(n);
                }
            }
            let acked_now = once.acked_one_by_one.clone();
            once.kept.retain(|s, _| !acked_now.contains(s));
            while once.acked_one_by_one.remove(&once.acked) {
                once.acked += 1;
            }
        }
        if seq < once.acked || once.acked_one_by_one.contains(&seq) {
            return Answer::Err("request-acknowledged");
        }
        if let Some(kept) = once.kept.get(&seq).cloned() {
            if kept.req != r.req {
                return Answer::Err("invalid-argument");
            }
            return match kept.first {
                Answer::Acquired(..) | Answer::Queued(_) if !kept.set => {
                    self.standing(r.session, &kept.names[0], kept.req)
                }
                Answer::AcquiredAll(..) | Answer::Queued(_) => {
                    self.set_standing(r.session, &kept.names, kept.req)
                }
                first => first,
            };
        }
        if once.kept.len() >= MAX_UNACKED_REQUESTS_PER_SESSION {
            return Answer::Err("too-many-unacknowledged");
        }
        let (first, names) = match r.set {
            Some(names) => (
                self.acquire_all(r.session, &names, r.req, r.wait, index),
                names,
            ),
            None => (
                self.acquire(
                    r.session,
                    &r.name,
                    r.req,
                    r.mode,
                    r.permits,
                    r.wait,
                    Terms::default(),
                    index,
                ),
                vec![r.name],
            ),
        };
        let set = names.len() > 1;
        if matches!(
            first,
            Answer::Acquired(..) | Answer::AcquiredAll(..) | Answer::Queued(_)
        ) {
            for name in &names {
                self.numbered.insert((r.session, r.req, name.clone()));
            }
        }
        let kept = Kept {
            req: r.req,
            names,
            set,
            first: first.clone(),
        };
        if let Some(once) = self.once.get_mut(&r.session) {
            once.kept.insert(seq, kept);
        }
        first
    }

    /// Where a request that was granted or queued stands now, or how it
    /// ended.
    fn standing(&self, session: u64, name: &str, req: u128) -> Answer {
        let l = self.locks.get(name).cloned().unwrap_or_default();
        if let Some(h) = l
            .holders
            .iter()
            .find(|h| h.session == session && h.req == req)
        {
            return Answer::Acquired(session, h.token);
        }
        if let Some(pos) = l.queue.iter().position(|w| w.0 == session && w.2 == req) {
            return Answer::Queued(pos);
        }
        Answer::Err(
            self.numbered_finished
                .get(&(session, req, name.to_owned()))
                .or_else(|| self.finished.get(&(session, req)))
                .copied()
                .unwrap_or("request-finished"),
        )
    }

    /// Where a numbered set that was granted or queued stands now: held
    /// whole, waiting whole, or how it ended (every lock of a set ends the
    /// same way: released with its one token, or its wait cancelled).
    fn set_standing(&self, session: u64, names: &[String], req: u128) -> Answer {
        let mut tokens = Vec::new();
        let mut places = Vec::new();
        for name in names {
            let l = self.locks.get(name).cloned().unwrap_or_default();
            if let Some(h) = l
                .holders
                .iter()
                .find(|h| h.session == session && h.req == req)
            {
                tokens.push(h.token);
            }
            if let Some(pos) = l.queue.iter().position(|w| w.0 == session && w.2 == req) {
                places.push(pos);
            }
        }
        if tokens.len() == names.len() {
            return Answer::AcquiredAll(session, tokens);
        }
        if places.len() == names.len() {
            return Answer::Queued(places.into_iter().max().unwrap_or(0));
        }
        Answer::Err(
            names
                .iter()
                .find_map(|n| self.numbered_finished.get(&(session, req, n.clone())))
                .or_else(|| self.finished.get(&(session, req)))
                .copied()
                .unwrap_or("request-finished"),
        )
    }

    /// Records how acquisition `req` of `session` for `name` ended.
    fn finish(&mut self, session: u64, name: &str, req: u128, how: &'static str) {
        let key = (session, req, name.to_owned());
        if self.numbered.remove(&key) {
            self.numbered_finished.insert(key, how);
        } else {
            self.finished.insert((session, req), how);
        }
    }

    /// Mostly a live session: exactly-once answers matter while it lives.
    fn pick_live(&self, s: usize) -> u64 {
        if self.alive.is_empty() || s.is_multiple_of(5) {
            return self.pick(s);
        }
        let n = self.alive.len();
        *self.alive.iter().nth(s % n).expect("in range")
    }

    /// The set the waiter `(session, req)` of `name` belongs to, if any.
    fn set_of(&self, name: &str, session: u64, req: u128) -> Option<Vec<String>> {
        self.sets
            .get(&(session, req))
            .filter(|names| names.iter().any(|n| n == name))
            .cloned()
    }

    fn grant_queue(&mut self, name: &str, index: u64) {
        let delayed = self.delayed.contains_key(name);
        let front_set = |m: &Model| {
            let w = m.locks.get(name)?.queue.first()?;
            m.set_of(name, w.0, w.2).map(|_| (w.0, w.2))
        };
        while !delayed && front_set(self).is_none() {
            let Some(l) = self.locks.get_mut(name) else {
                return;
            };
            if l.queue.is_empty() || !fits(l, l.queue[0].1, l.permits, l.queue[0].3.count) {
                break;
            }
            let (session, mode, req, terms) = l.queue.remove(0);
            l.holders.push(Holder {
                session,
                mode,
                token: index,
                req,
                terms,
            });
        }
        // A set at the front: granted whole if it is at the front of each
        // of its queues and each of its locks is free, else it waits.
        if let Some(key) = front_set(self) {
            let names = self.sets[&key].clone();
            let ready = names.iter().all(|n| {
                self.locks.get(n).is_some_and(|l| {
                    l.holders.is_empty() && l.queue.first().is_some_and(|w| (w.0, w.2) == key)
                }) && !self.delayed.contains_key(n)
            });
            if ready {
                self.sets.remove(&key);
                for n in &names {
                    let l = self.locks.get_mut(n).expect("queued lock exists");
                    let (session, mode, req, terms) = l.queue.remove(0);
                    l.holders.push(Holder {
                        session,
                        mode,
                        token: index,
                        req,
                        terms,
                    });
                }
            }
        }
        if self
            .locks
            .get(name)
            .is_some_and(|l| l.holders.is_empty() && l.queue.is_empty())
        {
            self.locks.remove(name);
        }
    }

    fn acquire_all(
        &mut self,
        session: u64,
        names: &[String],
        req: u128,
        wait: bool,
        index: u64,
    ) -> Answer {
        if !self.alive.contains(&session) {
            return Answer::Err("session-not-found");
        }
        let (mut held, mut waiting) = (Vec::new(), Vec::new());
        for name in names {
            let l = self.locks.get(name).cloned().unwrap_or_default();
            if let Some(h) = l.holders.iter().find(|h| h.session == session) {
                if h.req != req {
                    return Answer::Err("already-held");
                }
                held.push(h.token);
            } else if let Some(pos) = l.queue.iter().position(|w| w.0 == session) {
                if l.queue[pos].2 != req {
                    return Answer::Err("already-waiting");
                }
                waiting.push(pos);
            }
        }
        if held.len() == names.len() {
            return Answer::AcquiredAll(session, held);
        }
        if waiting.len() == names.len() {
            return Answer::Queued(waiting.into_iter().max().unwrap_or(0));
        }
        if let Some(code) = self.finished.get(&(session, req)) {
            return Answer::Err(code);
        }
        if !held.is_empty() || !waiting.is_empty() {
            return Answer::Err("request-finished");
        }
        let free = names.iter().all(|n| {
            let l = self.locks.get(n).cloned().unwrap_or_default();
            l.queue.is_empty() && l.holders.is_empty() && !self.delayed.contains_key(n)
        });
        if free {
            for n in names {
                let size = self.sizes.get(n).copied();
                let e = self.locks.entry(n.clone()).or_default();
                e.permits = size.or(e.permits);
                e.holders.push(Holder {
                    session,
                    mode: Mode::Exclusive,
                    token: index,
                    req,
                    terms: Terms::default(),
                });
            }
            return Answer::AcquiredAll(session, vec![index; names.len()]);
        }
        if !wait {
            // The first lock of the set in the way, in name order.
            let blocking = names
                .iter()
                .find(|n| {
                    let l = self.locks.get(*n).cloned().unwrap_or_default();
                    !l.queue.is_empty() || !l.holders.is_empty() || self.delayed.contains_key(*n)
                })
                .and_then(|n| self.locks.get(n).cloned())
                .unwrap_or_default();
            return Answer::Busy(busy(&blocking));
        }
        let mut position = 0;
        for n in names {
            let size = self.sizes.get(n).copied();
            let e = self.locks.entry(n.clone()).or_default();
            e.permits = size.or(e.permits);
            e.queue
                .push((session, Mode::Exclusive, req, Terms::default()));
            position = position.max(e.queue.len() - 1);
        }
        self.sets.insert((session, req), names.to_vec());
        Answer::Queued(position)
    }

    /// Turns an abstract op into a command (using the model's view to pick
    /// sensible arguments) and predicts its answer.
    fn step(&mut self, op: &Op, index: u64) -> (Command, Answer) {
        match op {
            Op::Create(o) => {
                self.create(OWNERS[*o], index);
                (
                    Command::CreateSession {
                        ttl_ms: 5_000,
                        client_name: String::new(),
                        owner: OWNERS[*o].into(),
                    },
                    Answer::Created(index),
                )
            }
            Op::CreateLimited { owner, max } => {
                let owner = OWNERS[*owner];
                let cmd = Command::WithinSessionLimit {
                    max_sessions: *max,
                    command: Box::new(Command::CreateSession {
                        ttl_ms: 5_000,
                        client_name: String::new(),
                        owner: owner.into(),
                    }),
                };
                // The empty owner is every caller: all sessions count.
                let live = self
                    .alive
                    .iter()
                    .filter(|s| owner.is_empty() || self.owner.get(*s) == Some(&owner))
                    .count() as u64;
                if live >= *max {
                    return (cmd, Answer::Err("too-many-sessions"));
                }
                self.create(owner, index);
                (cmd, Answer::Created(index))
            }
            Op::CreateOnce { owner, key } => {
                let (owner, key) = (OWNERS[*owner], KEYS[*key]);
                let cmd = Command::CreateSessionOnce {
                    ttl_ms: 5_000,
                    client_name: String::new(),
                    owner: owner.into(),
                    key,
                };
                if let Some(s) = self.keys.get(&(owner, key)) {
                    return (cmd, Answer::Created(*s));
                }
                self.create(owner, index);
                self.keys.insert((owner, key), index);
                (cmd, Answer::Created(index))
            }
            Op::Seq {
                s,
                lock,
                shared,
                permits,
                wait,
                packet,
                delivered,
                acks,
                set,
            } => {
                let session = self.pick_live(*s);
                let set_names: Option<Vec<String>> = set.map(|mask| {
                    LOCKS
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, n)| (*n).to_owned())
                        .collect()
                });
                let mode = if *shared {
                    Mode::Shared
                } else {
                    Mode::Exclusive
                };
                let acquire = |req: u128| match &set_names {
                    Some(names) => Command::AcquireAll {
                        session,
                        names: names.clone(),
                        request_id: RequestId(req),
                        wait_ms: wait.then_some(1_000),
                        metadata: vec![],
                    },
                    None => Command::Acquire {
                        session,
                        name: LOCKS[*lock].into(),
                        request_id: RequestId(req),
                        mode,
                        permits: *permits,
                        wait_ms: wait.then_some(1_000),
                        metadata: vec![],
                    },
                };
                let client = self.clients.entry(session).or_default();
                let fresh = |client: &mut Client| {
                    client.last_seq += 1;
                    let seq = client.last_seq;
                    client.unanswered.insert(seq);
                    client
                        .requests
                        .insert(seq, acquire(SEQUENCED_IDS + seq as u128));
                    seq
                };
                let (seq, acked_below, inner) = match packet {
                    Packet::Retry(i) if !client.unanswered.is_empty() => {
                        let n = client.unanswered.len();
                        let seq = *client.unanswered.iter().nth(i % n).expect("in range");
                        (seq, client.acked_below(), client.requests[&seq].clone())
                    }
                    Packet::Late(i) if !client.sent.is_empty() => {
                        let n = client.sent.len();
                        let late = client.sent[i % n].clone();
                        let (seq, acked_below, command) = match late {
                            Command::Sequenced {
                                seq,
                                acked_below,
                                command,
                            }
                            | Command::SequencedAcks {
                                seq,
                                acked_below,
                                command,
                                ..
                            }
                            | Command::SequencedSet {
                                seq,
                                acked_below,
                                command,
                                ..
                            } => (seq, acked_below, command),
                            _ => unreachable!("the client sends only sequenced commands"),
                        };
                        (seq, acked_below, *command)
                    }
                    Packet::StaleAck(behind) => {
                        let acked = client.acked_below();
                        let seq = fresh(client);
                        let stale = acked.saturating_sub(u64::from(*behind) + 1);
                        (seq, stale, client.requests[&seq].clone())
                    }
                    Packet::Reused(i) if !client.requests.is_empty() => {
                        let n = client.requests.len();
                        let seq = *client.requests.keys().nth(i % n).expect("in range");
                        (
                            seq,
                            client.acked_below(),
                            acquire(2_000_000 + index as u128),
                        )
                    }
                    Packet::Zero => (
                        0,
                        client.acked_below() + 1,
                        acquire(3_000_000 + index as u128),
                    ),
                    _ => {
                        let seq = fresh(client);
                        (seq, client.acked_below(), client.requests[&seq].clone())
                    }
                };
                // What the client still waits for, as it would list it now
                // (a late packet carries the list it was sent with).
                let listed: Vec<u64> = client.unanswered.iter().copied().collect();
                let cmd = match packet {
                    Packet::Late(i) if !client.sent.is_empty() => {
                        client.sent[i % client.sent.len()].clone()
                    }
                    _ if matches!(inner, Command::AcquireAll { .. }) => Command::SequencedSet {
                        seq,
                        acked_below,
                        in_flight: if *acks { listed } else { Vec::new() },
                        command: Box::new(inner.clone()),
                    },
                    _ if *acks && !listed.is_empty() => Command::SequencedAcks {
                        seq,
                        acked_below,
                        in_flight: listed,
                        command: Box::new(inner.clone()),
                    },
                    _ => Command::Sequenced {
                        seq,
                        acked_below,
                        command: Box::new(inner.clone()),
                    },
                };
                let in_flight = match &cmd {
                    Command::SequencedAcks { in_flight, .. }
                    | Command::SequencedSet { in_flight, .. } => Some(in_flight.clone()),
                    _ => None,
                };
                // A late packet is the network's copy: the client neither
                // sent it anew nor gets its answer.
                if !matches!(packet, Packet::Late(_)) {
                    client.sent.push(cmd.clone());
                    if *delivered {
                        client.unanswered.remove(&seq);
                    }
                }
                // A retried or late packet may be for another lock than
                // this op's: the model reads what the packet says.
                let request = match inner {
                    Command::Acquire {
                        name,
                        request_id,
                        mode,
                        permits,
                        wait_ms,
                        ..
                    } => Request {
                        session,
                        name,
                        set: None,
                        req: request_id.0,
                        mode,
                        permits,
                        wait: wait_ms.is_some(),
                    },
                    Command::AcquireAll {
                        names,
                        request_id,
                        wait_ms,
                        ..
                    } => Request {
                        session,
                        name: String::new(),
                        set: Some(names),
                        req: request_id.0,
                        mode: Mode::Exclusive,
                        permits: None,
                        wait: wait_ms.is_some(),
                    },
                    _ => unreachable!("the client sequences only acquires and lock sets"),
                };
                let answer = self.sequenced(seq, acked_below, in_flight.as_deref(), request, index);
                (cmd, answer)
            }
            Op::Close(s) => {
                let s = self.pick(*s);
                let answer = if self.alive.contains(&s) {
                    Answer::Ok
                } else {
                    Answer::Err("session-not-found")
                };
                self.end(&[s], false, index);
                (Command::CloseSession { session: s }, answer)
            }
            Op::Expire(ss) => {
                let ids: Vec<u64> = ss.iter().map(|s| self.pick(*s)).collect();
                self.end(&ids, true, index);
                (Command::ExpireSessions { sessions: ids }, Answer::Ok)
            }
            Op::Acquire {
                s,
                lock,
                req,
                shared,
                permits,
                wait,
                terms,
            } => {
                let session = self.pick(*s);
                let name = LOCKS[*lock];
                let mode = if *shared {
                    Mode::Shared
                } else {
                    Mode::Exclusive
                };
                let req = *req as u128;
                let mut cmd = Command::Acquire {
                    session,
                    name: name.into(),
                    request_id: RequestId(req),
                    mode,
                    permits: *permits,
                    wait_ms: wait.then_some(1_000),
                    metadata: vec![],
                };
                if !terms.is_plain() {
                    cmd = Command::WithTerms {
                        terms: *terms,
                        command: Box::new(cmd),
                    };
                }
                (
                    cmd,
                    self.acquire(session, name, req, mode, *permits, *wait, *terms, index),
                )
            }
            Op::Release {
                s,
                lock,
                right_token,
            } => {
                let session = self.pick(*s);
                let name = LOCKS[*lock];
                let held = self
                    .locks
                    .get(name)
                    .and_then(|l| l.holders.iter().find(|h| h.session == session))
                    .cloned();
                let token = match (&held, right_token) {
                    (Some(h), true) => h.token,
                    (Some(h), false) => h.token + 1,
                    (None, _) => index,
                };
                let answer = if !self.alive.contains(&session) {
                    Answer::Err("session-not-found")
                } else if let Some(h) = held {
                    if h.token != token {
                        Answer::Err("stale-token")
                    } else {
                        let l = self.locks.get_mut(name).expect("held lock exists");
                        l.holders.retain(|x| x.session != session);
                        self.finish(session, name, h.req, "request-released");
                        self.grant_queue(name, index);
                        Answer::Ok
                    }
                } else {
                    Answer::Err("not-holder")
                };
                (
                    Command::Release {
                        session,
                        name: name.into(),
                        token,
                    },
                    answer,
                )
            }
            Op::Cancel { s, lock, req } => {
                let name = LOCKS[*lock];
                let waiters: Vec<(u64, u128)> = self
                    .locks
                    .get(name)
                    .map(|l| l.queue.iter().map(|w| (w.0, w.2)).collect())
                    .unwrap_or_default();
                let (session, req) = match *req {
                    6.. if !waiters.is_empty() => waiters[*s % waiters.len()],
                    r => (self.pick(*s), r as u128),
                };
                let cmd = Command::CancelWait {
                    session,
                    name: name.into(),
                    request_id: RequestId(req),
                };
                let answer = if !self.alive.contains(&session) {
                    Answer::Err("session-not-found")
                } else {
                    let l = self.locks.get(name).cloned().unwrap_or_default();
                    let all_held: Vec<u64> = self
                        .locks
                        .values()
                        .flat_map(|l| &l.holders)
                        .filter(|h| h.session == session && h.req == req)
                        .map(|h| h.token)
                        .collect();
                    if let Some(h) = l
                        .holders
                        .iter()
                        .find(|h| h.session == session && h.req == req)
                    {
                        // A set granted together comes back whole.
                        if all_held.len() > 1 {
                            Answer::AcquiredAll(session, all_held)
                        } else {
                            Answer::Acquired(h.session, h.token)
                        }
                    } else if let Some(names) = self.set_of(name, session, req) {
                        self.sets.remove(&(session, req));
                        for n in &names {
                            if let Some(l) = self.locks.get_mut(n.as_str()) {
                                l.queue.retain(|w| (w.0, w.2) != (session, req));
                            }
                            self.finish(session, n, req, "wait-cancelled");
                        }
                        for n in &names {
                            self.grant_queue(n, index);
                        }
                        Answer::Ok
                    } else if l.queue.iter().any(|w| w.0 == session && w.2 == req) {
                        let l = self.locks.get_mut(name).expect("queued lock exists");
                        l.queue.retain(|w| w.0 != session);
                        self.finish(session, name, req, "wait-cancelled");
                        self.grant_queue(name, index);
                        Answer::Ok
                    } else if !self.finished.contains_key(&(session, req))
                        && !self
                            .once
                            .get(&session)
                            .is_some_and(|o| o.kept.values().any(|k| k.req == req))
                    {
                        // Cancelled before it arrived: it is refused when
                        // it does.
                        self.finished.insert((session, req), "wait-cancelled");
                        Answer::Ok
                    } else {
                        Answer::Err("wait-not-found")
                    }
                };
                (cmd, answer)
            }
            Op::Proclaim { s, lock } => {
                let session = self.pick(*s);
                let name = LOCKS[*lock];
                let token = self
                    .locks
                    .get(name)
                    .and_then(|l| l.holders.iter().find(|h| h.session == session))
                    .map(|h| h.token);
                let answer = match (self.alive.contains(&session), token) {
                    (false, _) => Answer::Err("session-not-found"),
                    (true, Some(t)) => Answer::Acquired(session, t),
                    (true, None) => Answer::Err("not-holder"),
                };
                (
                    Command::Proclaim {
                        session,
                        name: name.into(),
                        token: token.unwrap_or(1),
                        value: b"v".to_vec(),
                    },
                    answer,
                )
            }
            Op::Downgrade { s, lock } => {
                let session = self.pick(*s);
                let name = LOCKS[*lock];
                let held = self
                    .locks
                    .get(name)
                    .and_then(|l| l.holders.iter().find(|h| h.session == session))
                    .map(|h| (h.token, h.mode));
                let answer = match (self.alive.contains(&session), held) {
                    (false, _) => Answer::Err("session-not-found"),
                    (true, None) => Answer::Err("not-holder"),
                    (true, Some((token, mode))) => {
                        if mode == Mode::Exclusive {
                            let l = self.locks.get_mut(name).expect("held lock exists");
                            l.permits = l.permits.or(Some(u32::MAX));
                            for h in l.holders.iter_mut().filter(|h| h.session == session) {
                                h.mode = Mode::Shared;
                                h.terms.count = 1;
                                h.terms.lock_delay_ms = 0;
                            }
                            self.grant_queue(name, index);
                        }
                        Answer::Acquired(session, token)
                    }
                };
                let token = match answer {
                    Answer::Acquired(_, t) => t,
                    _ => 1,
                };
                let cmd = Command::Downgrade(Downgrade {
                    session,
                    name: name.into(),
                    token,
                });
                (cmd, answer)
            }
            Op::ForceRelease(lock) => {
                let name = LOCKS[*lock];
                if let Some(l) = self.locks.get_mut(name) {
                    let taken = std::mem::take(&mut l.holders);
                    for h in taken {
                        self.finish(h.session, name, h.req, "request-released");
                        self.lose(name, &h, index);
                    }
                    self.grant_queue(name, index);
                }
                (Command::ForceRelease { name: name.into() }, Answer::Ok)
            }
            Op::Resize { lock, permits } => {
                let name = LOCKS[*lock];
                let most_asked = self
                    .locks
                    .get(name)
                    .and_then(|l| l.queue.iter().map(|w| w.3.count).max())
                    .unwrap_or(0);
                let mut answer = Answer::Ok;
                if *permits == 0 {
                    if self.sizes.remove(name).is_some() {
                        if let Some(l) = self.locks.get_mut(name) {
                            let taken: u32 = l.holders.iter().map(|h| h.terms.count).sum();
                            l.permits = l.permits.map(|p| p.max(taken));
                        }
                    }
                } else if most_asked > *permits {
                    answer = Answer::Err("permits-exceeded");
                } else {
                    self.sizes.insert(name.into(), *permits);
                    if let Some(l) = self.locks.get_mut(name) {
                        l.permits = Some(*permits);
                    }
                    self.grant_queue(name, index);
                }
                let cmd = Command::Resize {
                    name: name.into(),
                    permits: *permits,
                };
                (cmd, answer)
            }
            Op::EndHold {
                s,
                lock,
                right_token,
            } => {
                let name = LOCKS[*lock];
                let holders = self
                    .locks
                    .get(name)
                    .map(|l| l.holders.clone())
                    .unwrap_or_default();
                let (session, token) = match holders.get(*s % holders.len().max(1)) {
                    Some(h) if *right_token => (h.session, h.token),
                    Some(h) => (h.session, h.token + 1),
                    None => (self.pick(*s), index),
                };
                let ended = holders
                    .iter()
                    .find(|h| h.session == session && h.token == token && h.terms.max_hold_ms > 0)
                    .cloned();
                if let Some(h) = ended {
                    let l = self.locks.get_mut(name).expect("held lock exists");
                    l.holders.retain(|x| x.session != session);
                    self.finish(session, name, h.req, "request-released");
                    self.lose(name, &h, index);
                    self.grant_queue(name, index);
                }
                let cmd = Command::EndHold {
                    name: name.into(),
                    session,
                    token,
                };
                (cmd, Answer::Ok)
            }
            Op::All { s, mask, req, wait } => {
                let session = self.pick(*s);
                let names: Vec<String> = LOCKS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, n)| (*n).to_owned())
                    .collect();
                let req = *req as u128;
                let cmd = Command::AcquireAll {
                    session,
                    names: names.clone(),
                    request_id: RequestId(req),
                    wait_ms: wait.then_some(1_000),
                    metadata: vec![],
                };
                (cmd, self.acquire_all(session, &names, req, *wait, index))
            }
            Op::EndDelay(lock, how) => {
                let name = LOCKS[*lock];
                let current = self.delay_started.get(name).copied().unwrap_or(0);
                let (cmd, started) = match how {
                    0 => (Command::EndLockDelay { name: name.into() }, None),
                    1 => (
                        Command::EndLockDelayAt {
                            name: name.into(),
                            started: current,
                        },
                        Some(current),
                    ),
                    _ => {
                        let stale = current.saturating_sub(1);
                        let cmd = Command::EndLockDelayAt {
                            name: name.into(),
                            started: stale,
                        };
                        (cmd, Some(stale))
                    }
                };
                // A named end ends only the delay it names.
                if started.is_none_or(|s| s == current) && self.delayed.remove(name).is_some() {
                    self.delay_started.remove(name);
                    self.grant_queue(name, index);
                }
                (cmd, Answer::Ok)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        session: u64,
        name: &str,
        req: u128,
        mode: Mode,
        permits: Option<u32>,
        wait: bool,
        terms: Terms,
        index: u64,
    ) -> Answer {
        let bad_terms = terms.count == 0
            || (mode == Mode::Exclusive && terms.count > 1)
            || (mode == Mode::Shared && terms.lock_delay_ms > 0);
        if bad_terms {
            return Answer::Err("invalid-argument");
        }
        if !self.alive.contains(&session) {
            return Answer::Err("session-not-found");
        }
        let l = self.locks.get(name).cloned().unwrap_or_default();
        if let Some(h) = l.holders.iter().find(|h| h.session == session) {
            return if h.req == req {
                Answer::Acquired(session, h.token)
            } else {
                Answer::Err("already-held")
            };
        }
        if let Some(pos) = l.queue.iter().position(|w| w.0 == session) {
            return if l.queue[pos].2 == req {
                Answer::Queued(pos)
            } else {
                Answer::Err("already-waiting")
            };
        }
        if let Some(code) = self.finished.get(&(session, req)) {
            return Answer::Err(code);
        }
        let size = self.sizes.get(name).copied();
        if let (Some(p), Some(q), None) = (permits, l.permits, size) {
            if p != q {
                return Answer::Err("permits-mismatch");
            }
        }
        let cap = size
            .or(l.permits)
            .or(permits)
            .or((mode == Mode::Shared).then_some(u32::MAX));
        if mode == Mode::Shared && terms.count > cap.unwrap_or(u32::MAX) {
            return Answer::Err("permits-exceeded");
        }
        let delayed = self.delayed.contains_key(name);
        if l.queue.is_empty() && !delayed && fits(&l, mode, cap, terms.count) {
            let e = self.locks.entry(name.to_owned()).or_default();
            e.permits = cap;
            e.holders.push(Holder {
                session,
                mode,
                token: index,
                req,
                terms,
            });
            Answer::Acquired(session, index)
        } else if !wait {
            Answer::Busy(busy(&l))
        } else {
            let e = self.locks.entry(name.to_owned()).or_default();
            e.permits = cap;
            e.queue.push((session, mode, req, terms));
            Answer::Queued(e.queue.len() - 1)
        }
    }

    /// A holder lost `name` without releasing it: its lock-delay starts.
    fn lose(&mut self, name: &str, h: &Holder, index: u64) {
        if h.mode == Mode::Exclusive && h.terms.lock_delay_ms > 0 {
            let d = self.delayed.entry(name.to_owned()).or_default();
            *d = (*d).max(h.terms.lock_delay_ms);
            self.delay_started.insert(name.to_owned(), index);
        }
    }

    fn end(&mut self, ids: &[u64], expired: bool, index: u64) {
        let mut touched = BTreeSet::new();
        for id in ids {
            if !self.alive.remove(id) {
                continue;
            }
            self.once.remove(id);
            self.keys.retain(|_, s| s != id);
            self.sets.retain(|(s, _), _| s != id);
            let mut lost = Vec::new();
            for (name, l) in self.locks.iter_mut() {
                let before = l.holders.len() + l.queue.len();
                lost.extend(
                    l.holders
                        .iter()
                        .filter(|h| h.session == *id)
                        .map(|h| (name.clone(), h.clone())),
                );
                l.holders.retain(|h| h.session != *id);
                l.queue.retain(|w| w.0 != *id);
                if l.holders.len() + l.queue.len() != before {
                    touched.insert(name.clone());
                }
            }
            if expired {
                for (name, h) in lost {
                    self.lose(&name, &h, index);
                }
            }
        }
        for name in touched {
            self.grant_queue(&name, index);
        }
    }
}

fn answer_of(o: &Outcome) -> Answer {
    match &o.reply {
        Err(e) => Answer::Err(LeaseError::code(e)),
        Ok(Reply::SessionCreated { session, .. }) => Answer::Created(*session),
        Ok(Reply::Acquired(g)) | Ok(Reply::Proclaimed(g)) => Answer::Acquired(g.session, g.token),
        Ok(Reply::Downgraded { hold, .. }) => Answer::Acquired(hold.session, hold.token),
        Ok(Reply::Queued { position }) => Answer::Queued(*position),
        Ok(Reply::Busy { holders }) => {
            Answer::Busy(holders.iter().map(|h| (h.session, h.token)).collect())
        }
        Ok(Reply::AcquiredAll(grants)) => Answer::AcquiredAll(
            grants.first().map_or(0, |g| g.session),
            grants.iter().map(|g| g.token).collect(),
        ),
        Ok(_) => Answer::Ok,
    }
}

/// Checks that the machine agrees with the model and keeps the contract's
/// invariants. `last_exclusive` and `issued` carry token history per lock.
fn check(
    m: &LeaseMachine,
    model: &Model,
    outcome: &Outcome,
    last_exclusive: &mut BTreeMap<String, u64>,
    issued: &mut BTreeMap<String, BTreeSet<u64>>,
) -> Result<(), TestCaseError> {
    for e in &outcome.events {
        if let Some(g) = e.grant() {
            let seen = issued.entry(g.name.clone()).or_default();
            if g.mode == Mode::Exclusive {
                let last = last_exclusive.entry(g.name.clone()).or_default();
                prop_assert!(
                    g.token > *last,
                    "exclusive token {} of {} not above {}",
                    g.token,
                    g.name,
                    last
                );
                prop_assert!(
                    !seen.contains(&g.token),
                    "token {} of {} reissued",
                    g.token,
                    g.name
                );
                *last = g.token;
            }
            seen.insert(g.token);
            prop_assert!(
                model.alive.contains(&g.session),
                "grant to ended session {}",
                g.session
            );
        }
    }
    let live: BTreeSet<u64> = m.sessions().map(|s| s.id).collect();
    prop_assert_eq!(&live, &model.alive);
    for owner in OWNERS.iter().filter(|o| !o.is_empty()) {
        let expected = model
            .alive
            .iter()
            .filter(|s| model.owner.get(*s) == Some(owner))
            .count() as u64;
        prop_assert_eq!(
            m.sessions_owned_by(owner),
            expected,
            "sessions of {}",
            owner
        );
    }
    for s in &model.created {
        let expected = model
            .once
            .get(s)
            .map(|o| (o.acked, o.kept.keys().copied().collect()))
            .unwrap_or_default();
        prop_assert_eq!(
            m.exactly_once(*s),
            expected,
            "acknowledged mark and kept answers of session {}",
            s
        );
    }
    for owner in OWNERS {
        for key in KEYS {
            prop_assert_eq!(
                m.session_by_key(owner, key),
                model.keys.get(&(owner, key)).copied(),
                "session of key {} of {:?}",
                key,
                owner
            );
        }
    }
    for name in LOCKS {
        prop_assert_eq!(
            m.lock_delay(name),
            model.delayed.get(name).copied(),
            "lock-delay of {}",
            name
        );
        prop_assert_eq!(
            m.size(name),
            model.sizes.get(name).copied(),
            "size of {}",
            name
        );
    }
    let names: Vec<&str> = m.locks().map(|(n, _)| n).collect();
    let model_names: Vec<&str> = model.locks.keys().map(|s| s.as_str()).collect();
    prop_assert_eq!(names, model_names);
    // A listing shows every lock held or waited for and every sized
    // semaphore, once each, in name order, with the size that rules it.
    let listed: Vec<(String, bool, usize)> = m
        .list("", "", usize::MAX)
        .into_iter()
        .map(|l| (l.name, l.resized, l.holders.len()))
        .collect();
    let model_listed: Vec<(String, bool, usize)> = model
        .locks
        .keys()
        .chain(model.sizes.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|n| {
            let holders = model.locks.get(n).map_or(0, |l| l.holders.len());
            (n.clone(), model.sizes.contains_key(n), holders)
        })
        .collect();
    prop_assert_eq!(listed, model_listed, "list()");
    for (name, l) in m.locks() {
        let ml = &model.locks[name];
        let holders: Vec<(u64, Mode, u64, Terms)> = l
            .holders
            .iter()
            .map(|h| (h.session, h.mode, h.token, h.terms))
            .collect();
        let model_holders: Vec<(u64, Mode, u64, Terms)> = ml
            .holders
            .iter()
            .map(|h| (h.session, h.mode, h.token, h.terms))
            .collect();
        prop_assert_eq!(holders, model_holders, "holders of {}", name);
        let waiters: Vec<(u64, Mode)> = l.waiters.iter().map(|w| (w.session, w.mode)).collect();
        let model_waiters: Vec<(u64, Mode)> = ml.queue.iter().map(|w| (w.0, w.1)).collect();
        prop_assert_eq!(waiters, model_waiters, "waiters of {}", name);
        // The contract's invariants, checked on the machine directly.
        // A resize may shrink a semaphore below what is held, so the count
        // is checked where it matters: whenever this step granted on it.
        let granted_here = outcome
            .events
            .iter()
            .any(|e| e.grant().is_some_and(|g| g.name == name));
        if l.holders.iter().any(|h| h.mode == Mode::Shared) && granted_here {
            let permits = u64::from(l.permits.unwrap_or(0));
            let taken: u64 = l.holders.iter().map(|h| u64::from(h.terms.count)).sum();
            prop_assert!(
                taken <= permits,
                "{} has holders taking {} permits of {}",
                name,
                taken,
                permits
            );
        }
        if l.holders.iter().any(|h| h.mode == Mode::Exclusive) {
            prop_assert_eq!(
                l.holders.len(),
                1,
                "exclusive holder beside another on {}",
                name
            );
        }
        // Or a lock set at the front, waiting for another of its locks.
        let set_at_front = l
            .waiters
            .front()
            .and_then(|w| m.lock_set(w.session, w.request_id))
            .is_some_and(|names| names.iter().any(|n| n == name));
        prop_assert!(
            l.waiters.is_empty()
                || !l.holders.is_empty()
                || m.lock_delay(name).is_some()
                || set_at_front,
            "{} has waiters but no holder, no lock-delay and no set at the front",
            name
        );
        for h in &l.holders {
            let s = m.session(h.session);
            prop_assert!(
                s.is_some_and(|s| s.held.get(name) == Some(&h.request_id)),
                "holder of {} not in its session",
                name
            );
        }
        for w in &l.waiters {
            let s = m.session(w.session);
            prop_assert!(
                s.is_some_and(|s| s.waiting.get(name) == Some(&w.request_id)),
                "waiter of {} not in its session",
                name
            );
        }
    }
    Ok(())
}

fn commands(ops: &[Op]) -> Result<Vec<Command>, TestCaseError> {
    let mut m = LeaseMachine::default();
    let mut model = Model::default();
    let (mut last_exclusive, mut issued) = (BTreeMap::new(), BTreeMap::new());
    let mut cmds = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let index = i as u64 + 1;
        let (cmd, expected) = model.step(op, index);
        let outcome = m.apply(&cmd, index, index);
        prop_assert_eq!(
            answer_of(&outcome),
            expected,
            "at index {} applying {:?}",
            index,
            cmd
        );
        check(&m, &model, &outcome, &mut last_exclusive, &mut issued)?;
        cmds.push(cmd);
    }
    Ok(cmds)
}

/// The commands the ops make, without applying them to the machine.
fn generated(ops: &[Op]) -> Vec<Command> {
    let mut model = Model::default();
    ops.iter()
        .enumerate()
        .map(|(i, op)| model.step(op, i as u64 + 1).0)
        .collect()
}

/// Refusals that run nothing, after which a later attempt may still be the
/// one that runs the request.
fn runs_nothing(a: &Answer) -> bool {
    matches!(
        a,
        Answer::Err(
            "session-not-found"
                | "request-acknowledged"
                | "invalid-argument"
                | "too-many-unacknowledged"
        )
    )
}

/// What the exactly-once property remembers of one sequenced request.
#[derive(Default)]
struct Life {
    /// The answer of the attempt that ran it, once one has.
    first: Option<Answer>,
    /// It has been in a lock, as holder or waiter.
    entered: bool,
    /// The locks it was granted (a set is granted each of its locks once).
    granted: BTreeSet<String>,
}

/// Every (session, request id) in a lock, holding or waiting.
fn members(m: &LeaseMachine) -> BTreeSet<(u64, u128)> {
    m.locks()
        .flat_map(|(_, l)| {
            l.holders
                .iter()
                .map(|h| (h.session, h.request_id.0))
                .chain(l.waiters.iter().map(|w| (w.session, w.request_id.0)))
        })
        .collect()
}

/// The exactly-once promise, judged from the commands and what the machine
/// did alone (not from the model's predictions): a sequenced request runs
/// at most once. Every attempt after the one that ran it (and every attempt
/// refused unexecuted) changes no lock and no session and produces no
/// event; its request id enters a lock at most once, only through the
/// attempt that ran it, and only if that attempt answered Acquired or
/// Queued, so a request first answered Busy or refused is never granted
/// later; and it is granted at most once.
fn sequenced_requests_run_at_most_once(cmds: &[Command]) -> Result<(), TestCaseError> {
    let mut m = LeaseMachine::default();
    let mut lives: BTreeMap<(u64, u128), Life> = BTreeMap::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let index = i as u64 + 1;
        let before = m.clone();
        let outcome = m.apply(cmd, index, index);
        let answer = answer_of(&outcome);
        let mut ran = None;
        if let Command::Sequenced { seq, command, .. }
        | Command::SequencedAcks { seq, command, .. }
        | Command::SequencedSet { seq, command, .. } = cmd
        {
            let (Command::Acquire {
                session,
                request_id,
                ..
            }
            | Command::AcquireAll {
                session,
                request_id,
                ..
            }) = &**command
            else {
                unreachable!("the model sequences only acquires and lock sets")
            };
            let key = (*session, request_id.0);
            let life = lives.entry(key).or_default();
            match &life.first {
                None if !runs_nothing(&answer) => {
                    life.first = Some(answer.clone());
                    ran = Some(key);
                }
                first => {
                    prop_assert!(
                        outcome.events.is_empty(),
                        "seq {} of session {} ran again at index {}: {}",
                        seq,
                        session,
                        index,
                        outcome
                    );
                    prop_assert!(
                        before.locks().eq(m.locks()) && before.sessions().eq(m.sessions()),
                        "seq {} of session {} changed locks or sessions at index {} without running",
                        seq,
                        session,
                        index
                    );
                    match first {
                        Some(
                            Answer::Acquired(..) | Answer::AcquiredAll(..) | Answer::Queued(_),
                        ) => prop_assert!(
                            runs_nothing(&answer)
                                || matches!(
                                    answer,
                                    Answer::Acquired(..)
                                        | Answer::AcquiredAll(..)
                                        | Answer::Queued(_)
                                        | Answer::Err(
                                            "request-released"
                                                | "wait-cancelled"
                                                | "request-finished"
                                        )
                                ),
                            "a duplicate of a granted or queued request answered {:?}",
                            answer
                        ),
                        Some(first) => prop_assert!(
                            runs_nothing(&answer) || answer == *first,
                            "a duplicate answered {:?}, the first answer was {:?}",
                            answer,
                            first
                        ),
                        None => {}
                    }
                    if let Answer::Acquired(s, token) = answer {
                        let holds = m.locks().any(|(_, l)| {
                            l.holders.iter().any(|h| {
                                h.session == s && h.token == token && h.request_id == *request_id
                            })
                        });
                        prop_assert!(holds, "a duplicate answered a grant that is not held");
                    }
                }
            }
        }
        for e in &outcome.events {
            if let Some(g) = e.grant() {
                if g.request_id.0 >= SEQUENCED_IDS {
                    let life = lives.entry((g.session, g.request_id.0)).or_default();
                    prop_assert!(life.granted.insert(g.name.clone()), "{:?} granted twice", g);
                }
            }
        }
        for key in members(&m).difference(&members(&before)) {
            if key.1 < SEQUENCED_IDS {
                continue;
            }
            prop_assert_eq!(
                ran,
                Some(*key),
                "request {:?} entered a lock at index {} other than by the attempt that ran it",
                key,
                index
            );
            prop_assert!(
                matches!(
                    answer,
                    Answer::Acquired(..) | Answer::AcquiredAll(..) | Answer::Queued(_)
                ),
                "request {:?} entered a lock but answered {:?}",
                key,
                answer
            );
            let life = lives.entry(*key).or_default();
            prop_assert!(!life.entered, "request {:?} entered a lock twice", key);
            life.entered = true;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_sequenced_request_runs_twice(ops in prop::collection::vec(op(), 1..120)) {
        sequenced_requests_run_at_most_once(&generated(&ops))?;
    }

    #[test]
    fn machine_agrees_with_model_and_keeps_invariants(ops in prop::collection::vec(op(), 1..120)) {
        commands(&ops)?;
    }

    #[test]
    fn snapshot_restore_continue_is_the_same_as_never_snapshotting(
        ops in prop::collection::vec(op(), 1..120),
        cut in any::<prop::sample::Index>(),
    ) {
        let cmds = commands(&ops)?;
        let cut = cut.index(cmds.len());
        let mut straight = LeaseMachine::default();
        let mut restored = LeaseMachine::default();
        for (i, c) in cmds.iter().enumerate() {
            let index = i as u64 + 1;
            if i == cut {
                restored = LeaseMachine::from_snapshot(&restored.to_snapshot()).expect("own snapshot restores");
            }
            prop_assert_eq!(straight.apply(c, index, index), restored.apply(c, index, index));
        }
        prop_assert_eq!(straight.to_snapshot(), restored.to_snapshot());
    }

    #[test]
    fn same_commands_give_same_snapshot_bytes(ops in prop::collection::vec(op(), 1..80)) {
        let cmds = commands(&ops)?;
        let run = || {
            let mut m = LeaseMachine::default();
            for (i, c) in cmds.iter().enumerate() {
                m.apply(c, i as u64 + 1, 7);
            }
            m.to_snapshot()
        };
        prop_assert_eq!(run(), run());
    }
}
