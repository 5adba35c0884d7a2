//! Property tests: random command sequences applied to the lease machine and
//! to a deliberately naive reference model (vectors and linear scans, written
//! from DESIGN.md) must agree on every reply and every holder and waiter,
//! while the machine keeps the invariants the contract promises.

use proptest::prelude::*;
use raftlock_store::machine::{
    Command, Event, LeaseError, LeaseMachine, Mode, Outcome, Reply, RequestId,
};
use std::collections::{BTreeMap, BTreeSet};

const LOCKS: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Op {
    Create(usize),
    Close(usize),
    Expire(Vec<usize>),
    Acquire {
        s: usize,
        lock: usize,
        req: u8,
        shared: bool,
        permits: Option<u32>,
        wait: bool,
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
    ForceRelease(usize),
}

/// Session owners: the empty one (no authentication) and two identities.
const OWNERS: [&str; 3] = ["", "team-a", "team-b"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..OWNERS.len()).prop_map(Op::Create),
        1 => any::<usize>().prop_map(Op::Close),
        1 => prop::collection::vec(any::<usize>(), 1..3).prop_map(Op::Expire),
        8 => (any::<usize>(), 0..LOCKS.len(), 0u8..6, any::<bool>(),
              prop::option::weighted(0.3, 1u32..4), prop::bool::weighted(0.7))
            .prop_map(|(s, lock, req, shared, permits, wait)| Op::Acquire { s, lock, req, shared, permits, wait }),
        5 => (any::<usize>(), 0..LOCKS.len(), prop::bool::weighted(0.9))
            .prop_map(|(s, lock, right_token)| Op::Release { s, lock, right_token }),
        2 => (any::<usize>(), 0..LOCKS.len(), 0u8..6).prop_map(|(s, lock, req)| Op::Cancel { s, lock, req }),
        1 => (any::<usize>(), 0..LOCKS.len()).prop_map(|(s, lock)| Op::Proclaim { s, lock }),
        1 => (0..LOCKS.len()).prop_map(Op::ForceRelease),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Holder {
    session: u64,
    mode: Mode,
    token: u64,
    req: u128,
}

#[derive(Clone, Debug, Default)]
struct MLock {
    permits: Option<u32>,
    holders: Vec<Holder>,
    queue: Vec<(u64, Mode, u128)>,
}

/// The reference model: what DESIGN.md says, as plainly as possible.
#[derive(Default)]
struct Model {
    created: Vec<u64>,
    alive: BTreeSet<u64>,
    owner: BTreeMap<u64, &'static str>,
    locks: BTreeMap<String, MLock>,
    finished: BTreeMap<(u64, u128), &'static str>,
}

/// A reply reduced to what the model predicts.
#[derive(Debug, PartialEq)]
enum Answer {
    Created(u64),
    Acquired(u64, u64),
    Queued(usize),
    Busy,
    Ok,
    Err(&'static str),
}

fn fits(l: &MLock, mode: Mode, permits: Option<u32>) -> bool {
    match mode {
        Mode::Exclusive => l.holders.is_empty(),
        Mode::Shared => {
            l.holders.iter().all(|h| h.mode == Mode::Shared)
                && (l.holders.len() as u64) < permits.unwrap_or(u32::MAX) as u64
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

    fn grant_queue(&mut self, name: &str, index: u64) {
        let Some(l) = self.locks.get_mut(name) else {
            return;
        };
        while !l.queue.is_empty() && fits(l, l.queue[0].1, l.permits) {
            let (session, mode, req) = l.queue.remove(0);
            l.holders.push(Holder {
                session,
                mode,
                token: index,
                req,
            });
        }
        if l.holders.is_empty() && l.queue.is_empty() {
            self.locks.remove(name);
        }
    }

    /// Turns an abstract op into a command (using the model's view to pick
    /// sensible arguments) and predicts its answer.
    fn step(&mut self, op: &Op, index: u64) -> (Command, Answer) {
        match op {
            Op::Create(o) => {
                self.created.push(index);
                self.alive.insert(index);
                self.owner.insert(index, OWNERS[*o]);
                (
                    Command::CreateSession {
                        ttl_ms: 5_000,
                        client_name: String::new(),
                        owner: OWNERS[*o].into(),
                    },
                    Answer::Created(index),
                )
            }
            Op::Close(s) => {
                let s = self.pick(*s);
                let answer = if self.alive.contains(&s) {
                    Answer::Ok
                } else {
                    Answer::Err("session-not-found")
                };
                self.end(&[s], index);
                (Command::CloseSession { session: s }, answer)
            }
            Op::Expire(ss) => {
                let ids: Vec<u64> = ss.iter().map(|s| self.pick(*s)).collect();
                self.end(&ids, index);
                (Command::ExpireSessions { sessions: ids }, Answer::Ok)
            }
            Op::Acquire {
                s,
                lock,
                req,
                shared,
                permits,
                wait,
            } => {
                let session = self.pick(*s);
                let name = LOCKS[*lock];
                let mode = if *shared {
                    Mode::Shared
                } else {
                    Mode::Exclusive
                };
                let req = *req as u128;
                let cmd = Command::Acquire {
                    session,
                    name: name.into(),
                    request_id: RequestId(req),
                    mode,
                    permits: *permits,
                    wait_ms: wait.then_some(1_000),
                    metadata: vec![],
                };
                (
                    cmd,
                    self.acquire(session, name, req, mode, *permits, *wait, index),
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
                        self.finished.insert((session, h.req), "request-released");
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
                let session = self.pick(*s);
                let name = LOCKS[*lock];
                let req = *req as u128;
                let cmd = Command::CancelWait {
                    session,
                    name: name.into(),
                    request_id: RequestId(req),
                };
                let answer = if !self.alive.contains(&session) {
                    Answer::Err("session-not-found")
                } else {
                    let l = self.locks.get(name).cloned().unwrap_or_default();
                    if let Some(h) = l
                        .holders
                        .iter()
                        .find(|h| h.session == session && h.req == req)
                    {
                        Answer::Acquired(h.session, h.token)
                    } else if l.queue.iter().any(|w| w.0 == session && w.2 == req) {
                        let l = self.locks.get_mut(name).expect("queued lock exists");
                        l.queue.retain(|w| w.0 != session);
                        self.finished.insert((session, req), "wait-cancelled");
                        self.grant_queue(name, index);
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
            Op::ForceRelease(lock) => {
                let name = LOCKS[*lock];
                if let Some(l) = self.locks.get_mut(name) {
                    for h in std::mem::take(&mut l.holders) {
                        self.finished.insert((h.session, h.req), "request-released");
                    }
                    self.grant_queue(name, index);
                }
                (Command::ForceRelease { name: name.into() }, Answer::Ok)
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
        index: u64,
    ) -> Answer {
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
        if let (Some(p), Some(q)) = (permits, l.permits) {
            if p != q {
                return Answer::Err("permits-mismatch");
            }
        }
        let cap = l
            .permits
            .or(permits)
            .or((mode == Mode::Shared).then_some(u32::MAX));
        if l.queue.is_empty() && fits(&l, mode, cap) {
            let e = self.locks.entry(name.to_owned()).or_default();
            e.permits = cap;
            e.holders.push(Holder {
                session,
                mode,
                token: index,
                req,
            });
            Answer::Acquired(session, index)
        } else if !wait {
            Answer::Busy
        } else {
            let e = self.locks.entry(name.to_owned()).or_default();
            e.permits = cap;
            e.queue.push((session, mode, req));
            Answer::Queued(e.queue.len() - 1)
        }
    }

    fn end(&mut self, ids: &[u64], index: u64) {
        let mut touched = BTreeSet::new();
        for id in ids {
            if !self.alive.remove(id) {
                continue;
            }
            for (name, l) in self.locks.iter_mut() {
                let before = l.holders.len() + l.queue.len();
                l.holders.retain(|h| h.session != *id);
                l.queue.retain(|w| w.0 != *id);
                if l.holders.len() + l.queue.len() != before {
                    touched.insert(name.clone());
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
        Ok(Reply::Queued { position }) => Answer::Queued(*position),
        Ok(Reply::Busy { .. }) => Answer::Busy,
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
        if let Event::Granted(g) = e {
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
    let names: Vec<&str> = m.locks().map(|(n, _)| n).collect();
    let model_names: Vec<&str> = model.locks.keys().map(|s| s.as_str()).collect();
    prop_assert_eq!(names, model_names);
    for (name, l) in m.locks() {
        let ml = &model.locks[name];
        let holders: Vec<(u64, Mode, u64)> = l
            .holders
            .iter()
            .map(|h| (h.session, h.mode, h.token))
            .collect();
        let model_holders: Vec<(u64, Mode, u64)> = ml
            .holders
            .iter()
            .map(|h| (h.session, h.mode, h.token))
            .collect();
        prop_assert_eq!(holders, model_holders, "holders of {}", name);
        let waiters: Vec<(u64, Mode)> = l.waiters.iter().map(|w| (w.session, w.mode)).collect();
        let model_waiters: Vec<(u64, Mode)> = ml.queue.iter().map(|w| (w.0, w.1)).collect();
        prop_assert_eq!(waiters, model_waiters, "waiters of {}", name);
        // The contract's invariants, checked on the machine directly.
        if l.holders.iter().any(|h| h.mode == Mode::Shared) {
            let permits = l.permits.unwrap_or(0) as usize;
            prop_assert!(
                l.holders.len() <= permits,
                "{} has {} holders for {} permits",
                name,
                l.holders.len(),
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
        prop_assert!(
            l.waiters.is_empty() || !l.holders.is_empty(),
            "{} has waiters but no holder",
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

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
