//! (a') Linearizability of each semaphore's history, by the same search as
//! the fenced mutex's (`search.rs`), against a model that counts permits.
//!
//! The model of one semaphore: its holders (session, token, permits taken;
//! a session holds a lock through one acquisition at a time), its size,
//! and the highest token granted.
//! - acquire ok(t, n): needs `t` at least every earlier grant's token
//!   (grants made by one entry share it), the session not holding already,
//!   and `n` permits free under the size: holders whose lease may have
//!   ended by this op's completion may be counted gone (then they are).
//! - release(t) ok: needs the session to hold `t`; then it does not.
//! - release(t) fail: the session does not hold `t`, or its lease may have
//!   ended (then it does not).
//! - release(t) info: may take effect or not.
//! - `Validate(t)` valid: some holder has token `t` (holders granted by one
//!   entry share it); not valid: every holder with `t` may be gone (then
//!   they are).
//! - `Describe` naming holders: exactly those hold, apart from holders
//!   whose lease may have ended (then they do not).
//! - resize(n) ok: the size is `n`; info: it may be; refused: left out.
//! - an acquire info is left out (its grant, if any, ended with its
//!   session) unless a Describe names a grant to its session: then it was
//!   granted that token, taking the permits it asked for, some time after
//!   its call, and its hold may end from the first answer naming it.
//!
//! The queue is not modelled (a grant that FIFO order would have made wait
//! still fits), so this judges counts and answers, not fairness.

use super::search::{search, Entry, Model, Search};
use super::{pairs, CheckResult, Holds, Pair, Verdict};
use crate::history::{Op, Type, F};
use std::collections::{BTreeMap, HashMap};

const NAME: &str = "semaphore_linearizable";
/// The size of a semaphore no resize has touched, when its acquires do not
/// say.
const DEFAULT_SIZE: u64 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    /// (session, token, permits), sorted by session.
    holders: Vec<(u64, u64, u64)>,
    size: u64,
    max: u64,
}

#[derive(Clone, Debug)]
enum Kind {
    /// A grant: session, token, permits taken.
    Grant(u64, u64, u64),
    ReleaseOk(u64, u64),
    ReleaseFail(u64, u64),
    ReleaseInfo(u64, u64),
    /// `Validate(token)` and its verdict.
    Validate(u64, bool),
    /// `Describe`: the (session, token) pairs named, sorted.
    Describe(Vec<(u64, u64)>),
    ResizeOk(u64),
    ResizeInfo(u64),
}

/// For each (session, token): the time after which its lease may be gone.
type Expiry = HashMap<(u64, u64), u64>;

struct Semaphore<'a> {
    expiry: &'a Expiry,
}

impl Semaphore<'_> {
    /// Whether holder `(session, token)` may be gone by `latest`.
    fn expirable(&self, h: &(u64, u64, u64), latest: u64) -> bool {
        self.expiry.get(&(h.0, h.1)).is_some_and(|&x| x < latest)
    }
}

impl Model for Semaphore<'_> {
    type State = State;
    type Op = Kind;

    fn step(&self, s: &State, e: &Entry<Kind>) -> Vec<State> {
        let latest = e.ret.unwrap_or(u64::MAX);
        let holds = |session: u64, token: u64| {
            s.holders
                .iter()
                .position(|h| h.0 == session && h.1 == token)
        };
        let without = |i: usize| {
            let mut s2 = s.clone();
            s2.holders.remove(i);
            s2
        };
        match &e.op {
            &Kind::Grant(session, token, n) => {
                if token < s.max || s.holders.iter().any(|h| h.0 == session) {
                    return vec![];
                }
                // Each way of counting gone some holders whose lease may
                // have ended, that leaves `n` permits free.
                let gone: Vec<usize> = (0..s.holders.len())
                    .filter(|&i| self.expirable(&s.holders[i], latest))
                    .collect();
                let subsets = 1usize << gone.len().min(6);
                let mut out = Vec::new();
                for mask in 0..subsets {
                    let dropped: Vec<usize> = gone
                        .iter()
                        .enumerate()
                        .filter(|(b, _)| mask & (1 << b) != 0)
                        .map(|(_, &i)| i)
                        .collect();
                    let mut s2 = s.clone();
                    for &i in dropped.iter().rev() {
                        s2.holders.remove(i);
                    }
                    let taken: u64 = s2.holders.iter().map(|h| h.2).sum();
                    if taken + n <= s.size {
                        s2.holders.push((session, token, n));
                        s2.holders.sort_unstable();
                        s2.max = token;
                        out.push(s2);
                    }
                }
                out
            }
            &Kind::ReleaseOk(session, token) => match holds(session, token) {
                Some(i) => vec![without(i)],
                None => vec![],
            },
            &Kind::ReleaseFail(session, token) => match holds(session, token) {
                None => vec![s.clone()],
                Some(i) if self.expirable(&s.holders[i], latest) => vec![without(i)],
                Some(_) => vec![],
            },
            // Validate asks about a token, whoever holds it: the holders
            // granted by one entry share theirs.
            &Kind::Validate(token, true) => {
                if s.holders.iter().any(|h| h.1 == token) {
                    vec![s.clone()]
                } else {
                    vec![]
                }
            }
            &Kind::Validate(token, false) => {
                let with = |h: &&(u64, u64, u64)| h.1 == token;
                if s.holders
                    .iter()
                    .filter(with)
                    .all(|h| self.expirable(h, latest))
                {
                    let mut s2 = s.clone();
                    s2.holders.retain(|h| h.1 != token);
                    vec![s2]
                } else {
                    vec![]
                }
            }
            &Kind::ReleaseInfo(session, token) => match holds(session, token) {
                Some(i) => vec![without(i), s.clone()],
                None => vec![s.clone()],
            },
            Kind::Describe(named) => {
                // Everyone named holds; everyone else holding may be gone.
                let all_named = named.iter().all(|&(session, token)| {
                    s.holders.iter().any(|h| h.0 == session && h.1 == token)
                });
                let rest_may_go = s
                    .holders
                    .iter()
                    .all(|h| named.contains(&(h.0, h.1)) || self.expirable(h, latest));
                if !all_named || !rest_may_go {
                    return vec![];
                }
                let mut s2 = s.clone();
                s2.holders.retain(|h| named.contains(&(h.0, h.1)));
                vec![s2]
            }
            &Kind::ResizeOk(n) => vec![State {
                size: n,
                ..s.clone()
            }],
            &Kind::ResizeInfo(n) => vec![
                State {
                    size: n,
                    ..s.clone()
                },
                s.clone(),
            ],
        }
    }
}

/// How many answers of each kind the model judged.
#[derive(Default, serde::Serialize)]
struct Judged {
    grants: usize,
    releases: usize,
    resizes: usize,
    validates: usize,
    describes: usize,
    /// Grants whose answer was lost, revealed by a Describe.
    unseen_grants: usize,
}

fn entry(p: &Pair<'_>, op: Kind) -> Entry<Kind> {
    let ret = match p.kind() {
        Type::Info | Type::Invoke => None,
        _ => p.done.map(|d| d.time_ns),
    };
    Entry {
        op,
        call: p.invoke.time_ns,
        ret,
        ops: std::iter::once(p.invoke.clone())
            .chain(p.done.cloned())
            .collect(),
    }
}

/// The permits an acquire asked for (1 if it did not say).
fn count_of(invoke: &Op) -> u64 {
    invoke
        .value
        .as_ref()
        .and_then(|v| v.get("count"))
        .and_then(|v| v.as_u64())
        .unwrap_or(1)
}

/// Checks every semaphore (a lock acquired with `SemAcquire`).
pub(super) fn check(history: &[Op], holds: &Holds) -> CheckResult {
    let ps = pairs(history);
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for p in ps.iter().filter(|p| p.invoke.f == F::SemAcquire) {
        let stated = p
            .invoke
            .value
            .as_ref()
            .and_then(|v| v.get("permits"))
            .and_then(|v| v.as_u64())
            .unwrap_or(DEFAULT_SIZE);
        sizes.entry(p.invoke.lock.as_str()).or_insert(stated);
    }
    if sizes.is_empty() {
        return CheckResult::new(NAME, Verdict::Skipped, "no semaphores in this workload");
    }
    let mut expiry: BTreeMap<&str, Expiry> = BTreeMap::new();
    for h in holds.0.iter().filter(|h| h.f == F::SemAcquire) {
        let mut at = h.lease_deadline;
        if let Some(c) = h.closed_at {
            at = Some(at.map_or(c, |d| d.min(c)));
        }
        if h.release == Some(Type::Info) {
            at = Some(at.map_or(h.end, |d| d.min(h.release_done.unwrap_or(h.end))));
        }
        if let (Some(at), Some(session)) = (at, h.session) {
            expiry
                .entry(h.lock.as_str())
                .or_default()
                .insert((session, h.token), at);
        }
    }
    let mut by_lock: BTreeMap<&str, Vec<Entry<Kind>>> = BTreeMap::new();
    let mut judged = Judged::default();
    let mut named_grants: Vec<(&str, u64, u64, &Op)> = Vec::new();
    for p in &ps {
        let lock = p.invoke.lock.as_str();
        if !sizes.contains_key(lock) {
            continue;
        }
        let session = p.invoke.session.unwrap_or(0);
        let done = p.done.filter(|d| d.kind != Type::Info);
        let op = match (p.invoke.f, p.kind()) {
            (F::SemAcquire, Type::Ok) => {
                let Some(token) = done.and_then(|d| d.token) else {
                    continue;
                };
                judged.grants += 1;
                Kind::Grant(session, token, count_of(p.invoke))
            }
            (F::SemRelease, kind) => {
                let Some(token) = p.invoke.token else {
                    continue;
                };
                match kind {
                    Type::Ok => {
                        judged.releases += 1;
                        Kind::ReleaseOk(session, token)
                    }
                    Type::Fail => Kind::ReleaseFail(session, token),
                    _ => Kind::ReleaseInfo(session, token),
                }
            }
            (F::Resize, kind) => {
                let Some(n) = p
                    .invoke
                    .value
                    .as_ref()
                    .and_then(|v| v.get("permits"))
                    .and_then(|v| v.as_u64())
                else {
                    continue;
                };
                match kind {
                    Type::Ok => {
                        judged.resizes += 1;
                        Kind::ResizeOk(n)
                    }
                    Type::Fail => continue,
                    _ => Kind::ResizeInfo(n),
                }
            }
            (F::Validate, Type::Ok) => {
                let (Some(token), Some(valid)) = (
                    p.invoke.token,
                    done.and_then(|d| d.value.as_ref()?.get("valid")?.as_bool()),
                ) else {
                    continue;
                };
                judged.validates += 1;
                Kind::Validate(token, valid)
            }
            (F::Describe, Type::Ok) => {
                let Some(mut named) = done.and_then(|d| super::linearizable::named(d, "holders"))
                else {
                    continue;
                };
                named.sort_unstable();
                judged.describes += 1;
                for &(s, t) in &named {
                    named_grants.push((lock, s, t, p.invoke));
                }
                Kind::Describe(named)
            }
            _ => continue,
        };
        by_lock.entry(lock).or_default().push(entry(p, op));
    }
    // A named grant the history does not show was got by an acquire of the
    // same session whose answer was lost; any other is invented.
    for (lock, session, token, answer) in named_grants {
        let entries = by_lock.entry(lock).or_default();
        let known = entries
            .iter()
            .any(|e| matches!(e.op, Kind::Grant(s, t, _) if s == session && t == token));
        if known {
            continue;
        }
        let lost = ps.iter().find(|p| {
            p.invoke.f == F::SemAcquire
                && p.invoke.lock == lock
                && p.invoke.session == Some(session)
                && matches!(p.kind(), Type::Info | Type::Invoke)
        });
        let Some(lost) = lost else {
            return CheckResult::invalid(
                NAME,
                format!("{lock}: a Describe names token {token} of session {session}, which no acquire of this semaphore in that session was granted"),
                vec![answer.clone()],
            );
        };
        judged.unseen_grants += 1;
        let at = answer.time_ns;
        let e = expiry
            .entry(lock)
            .or_default()
            .entry((session, token))
            .or_insert(at);
        *e = (*e).min(at);
        entries.push(Entry {
            op: Kind::Grant(session, token, count_of(lost.invoke)),
            call: lost.invoke.time_ns,
            ret: None,
            ops: std::iter::once(lost.invoke.clone())
                .chain(lost.done.cloned())
                .collect(),
        });
    }
    let empty = Expiry::new();
    let mut total_ops = 0;
    let mut states = 0;
    let mut gave_up = Vec::new();
    for (lock, entries) in &by_lock {
        total_ops += entries.len();
        let model = Semaphore {
            expiry: expiry.get(lock).unwrap_or(&empty),
        };
        let init = State {
            holders: Vec::new(),
            size: sizes[lock],
            max: 0,
        };
        match search(&model, init, entries) {
            Search::Ok(v) => states += v,
            Search::GaveUp => gave_up.push(lock.to_string()),
            Search::Fail(ops) => {
                return CheckResult::invalid(
                    NAME,
                    format!("{lock}: no linearization of its {} ops fits a semaphore of counted permits; the counterexample ends with the op that cannot be placed", entries.len()),
                    ops,
                );
            }
        }
    }
    let stats = serde_json::json!({
        "names": by_lock.len(),
        "ops": total_ops,
        "states": states,
        "judged": judged,
    });
    if !gave_up.is_empty() {
        return CheckResult::new(
            NAME,
            Verdict::Unknown,
            format!("search budget exhausted on {}", gave_up.join(", ")),
        )
        .with_stats(stats);
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{total_ops} ops on {} semaphore(s) linearize with counted permits ({} grants, {} releases, {} resizes, {} Validate and {} Describe answers judged)",
            by_lock.len(),
            judged.grants,
            judged.releases,
            judged.resizes,
            judged.validates,
            judged.describes,
        ),
    )
    .with_stats(stats)
}
