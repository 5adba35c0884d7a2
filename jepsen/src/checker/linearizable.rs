//! (a) Linearizability of each exclusive lock's history against a fenced,
//! lease-aware mutex, by the Wing–Gong / Lowe search (the algorithm of
//! Knossos and Porcupine) with memoization of (linearized set, state).
//!
//! The model of one lock: `holder` (a token or none) and `max`, the highest
//! token granted.
//! - acquire ok(t): needs `t > max` and no holder, or a holder whose lease
//!   may have ended by this op's completion (its recorded lease deadline is
//!   earlier, or its release already ended `info`); then `holder = t`.
//! - release(t) ok: needs `holder == t`; then no holder.
//! - release(t) fail: needs `holder != t`, or a holder `t` whose lease may
//!   have ended by then (the server expired it); then no holder.
//! - release(t) info: may take effect (as ok) or not, or never linearize.
//! - a close of the holder's session lets the hold end any time after the
//!   close was invoked.
//! - a try-lock's BUSY naming holder `t`: needs `holder == t`. One naming
//!   nobody is never right: the workloads that try locks use no lock-delay
//!   and no lock sets, the only things besides a holder that refuse a try.
//! - `Validate(t)` valid: needs `holder == t`; not valid: needs
//!   `holder != t`, or a holder `t` whose lease may have ended (then none).
//! - `Describe` naming `t`: needs `holder == t`; naming nobody: needs no
//!   holder, or one whose lease may have ended (then none).
//! - any other acquire fail has no effect and is left out. An acquire info
//!   is left out too (its grant, if any, ended with its process's session)
//!   unless a BUSY or Describe names a grant to its session: then it was
//!   granted that token, some time after its call, and its hold may end
//!   from the close of its session.
//!
//! Elections (campaign/resign) are the same model.

use super::search::{search, Entry, Model, Search};
use super::{pairs, CheckResult, Holds, Verdict};
use crate::history::{Op, Type, F};
use std::collections::{BTreeMap, HashMap, HashSet};

const NAME: &str = "linearizable";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct State {
    holder: Option<u64>,
    max: u64,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    AcquireOk(u64),
    ReleaseOk(u64),
    ReleaseFail(u64),
    ReleaseInfo(u64),
    /// A try-lock refused, naming this holder (`None`: nobody).
    Busy(Option<u64>),
    /// `Validate(token)` and its verdict.
    Validate(u64, bool),
    /// `Describe` naming this holder (`None`: nobody).
    Describe(Option<u64>),
}

/// For each token: the time after which its lease may be gone.
type Expiry = HashMap<u64, u64>;

/// The fenced mutex, with the lease ends it may assume.
struct Mutex<'a> {
    expiry: &'a Expiry,
}

impl Model for Mutex<'_> {
    type State = State;
    type Op = Kind;

    fn step(&self, s: &State, e: &Entry<Kind>) -> Vec<State> {
        step(*s, e, self.expiry)
    }
}

fn step(s: State, e: &Entry<Kind>, expiry: &Expiry) -> Vec<State> {
    // The latest moment this op can linearize at.
    let latest = e.ret.unwrap_or(u64::MAX);
    let expirable = |t: u64| expiry.get(&t).is_some_and(|&x| x < latest);
    match e.op {
        Kind::AcquireOk(t) => {
            let free = match s.holder {
                None => true,
                Some(h) => expirable(h),
            };
            if t > s.max && free {
                vec![State {
                    holder: Some(t),
                    max: t,
                }]
            } else {
                vec![]
            }
        }
        Kind::ReleaseOk(t) => {
            if s.holder == Some(t) {
                vec![State { holder: None, ..s }]
            } else {
                vec![]
            }
        }
        // A release refused, or a token called not valid: not the
        // holder's, or its lease may have ended (and the server ended it).
        Kind::ReleaseFail(t) | Kind::Validate(t, false) => {
            if s.holder != Some(t) {
                vec![s]
            } else if expirable(t) {
                vec![State { holder: None, ..s }]
            } else {
                vec![]
            }
        }
        Kind::ReleaseInfo(t) => {
            if s.holder == Some(t) {
                vec![State { holder: None, ..s }, s]
            } else {
                vec![s]
            }
        }
        Kind::Busy(named) | Kind::Describe(named @ Some(_)) => {
            if named.is_some() && s.holder == named {
                vec![s]
            } else {
                vec![]
            }
        }
        Kind::Validate(t, true) => {
            if s.holder == Some(t) {
                vec![s]
            } else {
                vec![]
            }
        }
        Kind::Describe(None) => match s.holder {
            None => vec![s],
            Some(h) if expirable(h) => vec![State { holder: None, ..s }],
            Some(_) => vec![],
        },
    }
}

/// How many answers of each kind the model judged.
#[derive(Default, serde::Serialize)]
struct Judged {
    grants: usize,
    releases: usize,
    busy: usize,
    validates: usize,
    describes: usize,
    /// Grants whose answer was lost, revealed by a BUSY or Describe.
    unseen_grants: usize,
}

impl Judged {
    fn count(&mut self, op: &Kind) {
        match op {
            Kind::Busy(_) => self.busy += 1,
            Kind::Validate(..) => self.validates += 1,
            Kind::Describe(_) => self.describes += 1,
            _ => {}
        }
    }
}

/// The (session, token) pairs of an answer's `key` (`"busy"`, `"holders"`).
pub(super) fn named(done: &Op, key: &str) -> Option<Vec<(u64, u64)>> {
    let list = done.value.as_ref()?.get(key)?.as_array()?;
    list.iter()
        .map(|pair| Some((pair.get(0)?.as_u64()?, pair.get(1)?.as_u64()?)))
        .collect()
}

/// A read-like answer of an exclusive lock the model judges: a try-lock's
/// BUSY, a Validate's verdict, a Describe's holders; with the grants it
/// names. An answer naming several holders of an exclusive lock cannot
/// fit, and is judged as naming an impossible one.
fn read_answer(p: &super::Pair<'_>) -> Option<(Kind, Vec<(u64, u64)>)> {
    let done = p.done.filter(|d| d.kind != Type::Info)?;
    let one = |grants: &[(u64, u64)]| match grants {
        [] => None,
        [(_, t)] => Some(*t),
        _ => Some(u64::MAX),
    };
    match (p.invoke.f, done.kind) {
        (F::Acquire, Type::Fail) => {
            let busy = named(done, "busy")?;
            Some((Kind::Busy(one(&busy)), busy))
        }
        (F::Validate, Type::Ok) => {
            let valid = done.value.as_ref()?.get("valid")?.as_bool()?;
            Some((Kind::Validate(p.invoke.token?, valid), Vec::new()))
        }
        (F::Describe, Type::Ok) => {
            let holders = named(done, "holders")?;
            Some((Kind::Describe(one(&holders)), holders))
        }
        _ => None,
    }
}

/// Checks every exclusive lock and election.
pub(crate) fn check(history: &[Op], holds: &Holds) -> CheckResult {
    let ps = pairs(history);
    // Lease ends the model may assume, per (lock, token).
    let mut expiry: BTreeMap<&str, Expiry> = BTreeMap::new();
    for h in &holds.0 {
        if !matches!(h.f, F::Acquire | F::Campaign) {
            continue;
        }
        let mut at = h.lease_deadline;
        if let Some(c) = h.closed_at {
            // A close releases everything from its invocation on.
            at = Some(at.map_or(c, |d| d.min(c)));
        }
        if h.release == Some(Type::Info) {
            // The retired process's session was closed right after.
            at = Some(at.map_or(h.end, |d| d.min(h.release_done.unwrap_or(h.end))));
        }
        if let Some(at) = at {
            expiry
                .entry(h.lock.as_str())
                .or_default()
                .insert(h.token, at);
        }
    }
    let mut by_lock: BTreeMap<&str, Vec<Entry<Kind>>> = BTreeMap::new();
    let mut judged = Judged::default();
    let semaphores: HashSet<&str> = history
        .iter()
        .filter(|o| matches!(o.f, F::SemAcquire | F::SemRelease | F::Resize))
        .map(|o| o.lock.as_str())
        .collect();
    // Grants that BUSY and Describe answers name, per lock: (session,
    // token, the answer's invocation).
    let mut named_grants: BTreeMap<&str, Vec<(u64, u64, Op)>> = BTreeMap::new();
    for p in &ps {
        if p.invoke.f == F::AcquireAll {
            // Each lock of a granted set is acquired by it, at its times.
            if let Some(done) = p.done.filter(|d| d.kind == Type::Ok) {
                for (lock, token) in super::multilock::set_grants(done) {
                    judged.grants += 1;
                    by_lock.entry(lock).or_default().push(Entry {
                        op: Kind::AcquireOk(token),
                        call: p.invoke.time_ns,
                        ret: Some(done.time_ns),
                        ops: vec![p.invoke.clone(), done.clone()],
                    });
                }
            }
            continue;
        }
        // A semaphore's locks are shared: the counts checker judges them.
        let shared = semaphores.contains(p.invoke.lock.as_str());
        if let Some((op, named)) = read_answer(p).filter(|_| !shared) {
            judged.count(&op);
            let lock = p.invoke.lock.as_str();
            for &(session, token) in &named {
                named_grants
                    .entry(lock)
                    .or_default()
                    .push((session, token, p.invoke.clone()));
            }
            let done = p.done.cloned();
            by_lock.entry(lock).or_default().push(Entry {
                op,
                call: p.invoke.time_ns,
                ret: done.as_ref().map(|d| d.time_ns),
                ops: std::iter::once(p.invoke.clone()).chain(done).collect(),
            });
            continue;
        }
        let (acq, rel) = match p.invoke.f {
            F::Acquire | F::Release => (F::Acquire, F::Release),
            F::Campaign | F::Resign => (F::Campaign, F::Resign),
            _ => continue,
        };
        let kind = p.kind();
        let token = if p.invoke.f == acq {
            p.done.and_then(|d| d.token)
        } else {
            p.invoke.token
        };
        let Some(token) = token else { continue };
        let op = match (p.invoke.f == rel, kind) {
            (false, Type::Ok) => {
                judged.grants += 1;
                Kind::AcquireOk(token)
            }
            (false, _) => continue,
            (true, Type::Ok) => {
                judged.releases += 1;
                Kind::ReleaseOk(token)
            }
            (true, Type::Fail) => Kind::ReleaseFail(token),
            (true, _) => Kind::ReleaseInfo(token),
        };
        let ret = match kind {
            Type::Info | Type::Invoke => None,
            _ => p.done.map(|d| d.time_ns),
        };
        by_lock.entry(&p.invoke.lock).or_default().push(Entry {
            op,
            call: p.invoke.time_ns,
            ret,
            ops: std::iter::once(p.invoke.clone())
                .chain(p.done.cloned())
                .collect(),
        });
    }
    // A named grant the history does not show was got by an acquire of
    // the same session whose answer was lost; any other is invented.
    for (lock, named) in &named_grants {
        let entries = by_lock.entry(lock).or_default();
        // Each granted token's session.
        let mut known: HashMap<u64, Option<u64>> = entries
            .iter()
            .filter_map(|e| match e.op {
                Kind::AcquireOk(t) => Some((t, e.ops.first().and_then(|o| o.session))),
                _ => None,
            })
            .collect();
        for (session, token, answer) in named {
            match known.get(token) {
                Some(s) if *s == Some(*session) => continue,
                Some(s) => {
                    return CheckResult::invalid(
                        NAME,
                        format!("{lock}: an answer names token {token} as session {session}'s, but session {} was granted it", s.unwrap_or(0)),
                        vec![answer.clone()],
                    )
                }
                None => {}
            }
            let lost = ps.iter().find(|p| {
                matches!(p.invoke.f, F::Acquire | F::Campaign)
                    && p.invoke.lock == **lock
                    && p.invoke.session == Some(*session)
                    && matches!(p.kind(), Type::Info | Type::Invoke)
            });
            let Some(lost) = lost else {
                return CheckResult::invalid(
                    NAME,
                    format!("{lock}: an answer names token {token} of session {session}, which no acquire of this lock in that session was granted"),
                    vec![answer.clone()],
                );
            };
            judged.unseen_grants += 1;
            known.insert(*token, Some(*session));
            // Its process never learned of the grant, so nothing says how
            // long its session lived on (a frozen holder's is never
            // closed, only expired): the hold may end any time after the
            // first answer that saw it.
            let at = answer.time_ns;
            let e = expiry.entry(lock).or_default().entry(*token).or_insert(at);
            *e = (*e).min(at);
            entries.push(Entry {
                op: Kind::AcquireOk(*token),
                call: lost.invoke.time_ns,
                ret: None,
                ops: std::iter::once(lost.invoke.clone())
                    .chain(lost.done.cloned())
                    .collect(),
            });
        }
    }
    if by_lock.is_empty() {
        return CheckResult::new(
            NAME,
            Verdict::Skipped,
            "no lock or election ops in this workload",
        );
    }
    let empty = Expiry::new();
    let mut total_ops = 0;
    let mut states = 0;
    let mut gave_up = Vec::new();
    for (lock, entries) in &by_lock {
        total_ops += entries.len();
        let model = Mutex {
            expiry: expiry.get(lock).unwrap_or(&empty),
        };
        let init = State {
            holder: None,
            max: 0,
        };
        match search(&model, init, entries) {
            Search::Ok(v) => states += v,
            Search::GaveUp => gave_up.push(lock.to_string()),
            Search::Fail(ops) => {
                return CheckResult::invalid(
                    NAME,
                    format!("{lock}: no linearization of its {} ops fits a fenced mutex; the counterexample ends with the op that cannot be placed", entries.len()),
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
            "{total_ops} ops on {} name(s) linearize as a fenced mutex ({} grants, {} releases, {} BUSY, {} Validate and {} Describe answers judged)",
            by_lock.len(),
            judged.grants,
            judged.releases,
            judged.busy,
            judged.validates,
            judged.describes,
        ),
    )
    .with_stats(stats)
}
