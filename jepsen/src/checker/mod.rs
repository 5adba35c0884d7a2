//! Checkers: each reads the history and says valid, invalid (with a small
//! counterexample: the ops that show the violation) or unknown.
//!
//! How long a holder may act on a lock matters to several of them. A
//! holder's *hold* runs from its acquire's `ok` until it invokes the
//! release, and never past the lease deadline the client recorded with
//! its later ops (`valid_until_ns`): a correct client stops acting there,
//! and a correct server never lets the lease go before it. A holder that
//! asked its client library and was told its lease still held (an `act`
//! op) did act then, whatever deadline it recorded: a library that says
//! "valid" too late shows up as an overlap, as a server that grants too
//! early does.

mod availability;
mod counts;
mod disk;
mod holds;
mod linearizable;
mod multilock;
mod search;
mod semaphores;

use holds::{hold_ops, releases};
pub(crate) use holds::{pairs, Hold, Holds, Pair};

use crate::history::{FaultWindow, Op, Type, F};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A checker's verdict.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// No violation.
    Valid,
    /// A violation, shown by the counterexample.
    Invalid,
    /// Could not decide (the search gave up, a final read failed).
    Unknown,
    /// Nothing of its kind in this history (another workload's checker).
    Skipped,
}

/// Whether the history tested anything: at least `min_ok` completed
/// operations and at least one grant. Otherwise the run is `unknown`, never
/// `valid`: every safety checker passes an empty history.
fn coverage(history: &[Op], min_ok: usize) -> CheckResult {
    let ok = history.iter().filter(|o| o.kind == Type::Ok).count();
    // A grant, or a rate limit's admission (a take admitted, a token of a
    // reserved block spent).
    let admitted = |o: &Op| {
        o.value
            .as_ref()
            .and_then(|v| v.get("admitted"))
            .and_then(|v| v.as_bool())
            == Some(true)
    };
    let grants = history
        .iter()
        .filter(|o| o.kind == Type::Ok)
        .filter(|o| match o.f {
            F::Acquire | F::Campaign | F::SemAcquire | F::Spend | F::AcquireAll => true,
            F::Take => admitted(o),
            _ => false,
        })
        .count();
    let stats = serde_json::json!({"ok": ok, "grants": grants, "min_ok": min_ok});
    let (verdict, explanation) = if grants == 0 {
        (
            Verdict::Unknown,
            format!("no grant in {ok} completed ops: nothing was tested"),
        )
    } else if ok < min_ok {
        (
            Verdict::Unknown,
            format!(
                "only {ok} completed ops ({grants} grants), fewer than the {min_ok} a run needs"
            ),
        )
    } else {
        (
            Verdict::Valid,
            format!("{ok} completed ops, {grants} grants"),
        )
    };
    CheckResult::new("coverage", verdict, explanation).with_stats(stats)
}

/// What one checker found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// Checker name.
    pub checker: String,
    /// Verdict.
    pub verdict: Verdict,
    /// One line for a person.
    pub explanation: String,
    /// The ops that show the violation (empty unless invalid).
    pub counterexample: Vec<Op>,
    /// Figures (ops checked, ...).
    pub stats: serde_json::Value,
}

impl CheckResult {
    fn new(checker: &str, verdict: Verdict, explanation: impl Into<String>) -> Self {
        CheckResult {
            checker: checker.into(),
            verdict,
            explanation: explanation.into(),
            counterexample: vec![],
            stats: serde_json::Value::Null,
        }
    }

    fn invalid(checker: &str, explanation: impl Into<String>, ops: Vec<Op>) -> Self {
        CheckResult {
            counterexample: ops,
            ..Self::new(checker, Verdict::Invalid, explanation)
        }
    }

    fn with_stats(mut self, stats: serde_json::Value) -> Self {
        self.stats = stats;
        self
    }
}

/// Fewest completed (`ok`) operations a run needs before its verdict can
/// be `valid`: a run that did almost nothing tested almost nothing.
pub const MIN_OK_OPS: usize = 50;

/// Runs every checker, and judges whether the run did enough to count.
pub fn check_all(history: &[Op]) -> Vec<CheckResult> {
    check_all_with(history, MIN_OK_OPS)
}

/// The rate error of real clocks the rate-limit bound allows for when no
/// fault made a clock run faster (docs/design.md: parts per million in
/// practice; 1 % leaves room for a throttled virtual machine).
pub const CLOCK_RATE_ERROR: f64 = 0.01;

/// How much faster than real time any node's clock ran in this run: the
/// documented error, or what the clock nemesis set, if more.
pub fn clock_rate_error(faults: &[FaultWindow]) -> f64 {
    faults
        .iter()
        .filter_map(|w| w.clock_rate)
        .map(|r| r - 1.0)
        .fold(CLOCK_RATE_ERROR, f64::max)
}

/// Every checker of a run: those of [`check_all`], and those that read
/// what the nemesis did as well (availability while a majority was up,
/// what nodes did with disk faults).
pub fn check_run(history: &[Op], faults: &[FaultWindow]) -> Vec<CheckResult> {
    let mut results = checks(history, MIN_OK_OPS, clock_rate_error(faults));
    results.push(availability::check(history, faults));
    results.push(disk::check(faults));
    results
}

/// [`check_all`] with another floor of completed operations.
pub fn check_all_with(history: &[Op], min_ok_ops: usize) -> Vec<CheckResult> {
    checks(history, min_ok_ops, CLOCK_RATE_ERROR)
}

fn checks(history: &[Op], min_ok_ops: usize, clock_rate_error: f64) -> Vec<CheckResult> {
    let holds = Holds::from(history);
    vec![
        coverage(history, min_ok_ops),
        linearizable::check(history, &holds),
        semaphores::check(history, &holds),
        fencing(history),
        exclusion("mutual_exclusion", &holds, F::Acquire),
        exclusion("election", &holds, F::Campaign),
        counts::semaphore(history, &holds),
        counts::ratelimit(history, clock_rate_error),
        lease(history, &holds),
        durability(history),
        multilock::check(history, &holds),
    ]
}

/// (c)/(d): among holds of one name, no two overlap.
fn exclusion(name: &str, holds: &Holds, f: F) -> CheckResult {
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds.0.iter().filter(|h| h.f == f) {
        by_lock.entry(&h.lock).or_default().push(h);
    }
    if by_lock.is_empty() {
        return CheckResult::new(
            name,
            Verdict::Skipped,
            "no grants of this kind in this workload",
        );
    }
    let mut checked = 0;
    for (lock, hs) in &by_lock {
        // Sorted by start; the hold reaching furthest so far is the one a
        // new hold could overlap.
        let mut furthest: Option<&Hold> = None;
        for h in hs.iter().filter(|h| h.held()) {
            checked += 1;
            if let Some(prev) = furthest {
                if h.start < prev.end && prev.token != h.token {
                    let mut ops = hold_ops(prev);
                    ops.extend(hold_ops(h));
                    return CheckResult::invalid(
                        name,
                        format!(
                            "{lock}: token {} (session {:?}) was granted at {:.3}s while token {} (session {:?}) was still held until {:.3}s",
                            h.token, h.session, h.start as f64 / 1e9, prev.token, prev.session, prev.end as f64 / 1e9
                        ),
                        ops,
                    );
                }
            }
            if furthest.is_none_or(|p| h.end > p.end) {
                furthest = Some(h);
            }
        }
    }
    CheckResult::new(
        name,
        Verdict::Valid,
        format!(
            "{checked} holds on {} name(s), none overlapping",
            by_lock.len()
        ),
    )
    .with_stats(serde_json::json!({ "holds": checked, "names": by_lock.len() }))
}

/// (b): exclusive tokens unique and ordered; the fenced register accepted
/// writes in token order and only with granted tokens.
fn fencing(history: &[Op]) -> CheckResult {
    const NAME: &str = "fencing";
    let ps = pairs(history);
    let grants: Vec<Pair> = ps
        .iter()
        .copied()
        .filter(|p| matches!(p.invoke.f, F::Acquire | F::Campaign) && p.kind() == Type::Ok)
        .filter(|p| p.done.and_then(|d| d.token).is_some())
        .collect();
    if grants.is_empty() {
        return CheckResult::new(
            NAME,
            Verdict::Skipped,
            "no exclusive grants in this workload",
        );
    }
    let token = |p: &Pair| p.done.and_then(|d| d.token).unwrap_or(0);
    let ops = |a: &Pair, b: &Pair| -> Vec<Op> {
        [a, b]
            .iter()
            .flat_map(|p| std::iter::once(p.invoke.clone()).chain(p.done.cloned()))
            .collect()
    };
    let mut by_lock: BTreeMap<&str, Vec<Pair>> = BTreeMap::new();
    for g in &grants {
        by_lock.entry(&g.invoke.lock).or_default().push(*g);
    }
    for (lock, gs) in &by_lock {
        let mut seen: HashMap<u64, &Pair> = HashMap::new();
        for g in gs {
            if let Some(other) = seen.insert(token(g), g) {
                return CheckResult::invalid(
                    NAME,
                    format!("{lock}: token {} granted twice", token(g)),
                    ops(other, g),
                );
            }
        }
        // A grant that completed before another was invoked must have the
        // smaller token.
        let mut by_done: Vec<&Pair> = gs.iter().collect();
        by_done.sort_by_key(|p| p.done.map(|d| d.time_ns).unwrap_or(0));
        let mut prefix_max: Vec<(u64, usize)> = Vec::with_capacity(by_done.len());
        for (i, p) in by_done.iter().enumerate() {
            let best = match prefix_max.last() {
                Some(&(t, j)) if t >= token(p) => (t, j),
                _ => (token(p), i),
            };
            prefix_max.push(best);
        }
        for g in gs {
            let before = by_done
                .partition_point(|p| p.done.map(|d| d.time_ns).unwrap_or(0) < g.invoke.time_ns);
            if before == 0 {
                continue;
            }
            let (t, j) = prefix_max[before - 1];
            if t >= token(g) {
                return CheckResult::invalid(
                    NAME,
                    format!(
                        "{lock}: token {} was granted after token {t} had already been acknowledged",
                        token(g)
                    ),
                    ops(by_done[j], g),
                );
            }
        }
    }
    // The register keeps the highest token it has accepted and refuses
    // lower ones, as a fenced resource does. Its refusals are what can go
    // wrong: a write refused while its writer's lease still held means a
    // later token reached the register while an earlier grant was live,
    // i.e. two holders at once, seen from the resource's side. And it must
    // never accept a token the cluster did not grant.
    let mut accepted = 0;
    let mut refused_stale = 0;
    for w in ps.iter().filter(|p| p.invoke.f == F::Write) {
        let t = w.invoke.token.unwrap_or(0);
        let one = || -> Vec<Op> {
            std::iter::once(w.invoke.clone())
                .chain(w.done.cloned())
                .collect()
        };
        match w.kind() {
            Type::Ok => {
                accepted += 1;
                let granted = by_lock
                    .get(w.invoke.lock.as_str())
                    .is_some_and(|gs| gs.iter().any(|g| token(g) == t));
                if !granted {
                    return CheckResult::invalid(
                        NAME,
                        format!(
                            "{}: the register accepted token {t}, which was never granted",
                            w.invoke.lock
                        ),
                        one(),
                    );
                }
            }
            Type::Fail => {
                refused_stale += 1;
                let done = w.done.map(|d| d.time_ns).unwrap_or(u64::MAX);
                if w.invoke.valid_until_ns.is_some_and(|v| v > done) {
                    return CheckResult::invalid(
                        NAME,
                        format!(
                            "{}: the register refused token {t} at {:.3}s as stale, while its holder's lease held until {:.3}s: a later token was granted during that lease",
                            w.invoke.lock,
                            done as f64 / 1e9,
                            w.invoke.valid_until_ns.unwrap_or(0) as f64 / 1e9
                        ),
                        one(),
                    );
                }
            }
            _ => {}
        }
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{} exclusive grants: tokens unique and ordered; register accepted {accepted} writes, refused {refused_stale}, none while its writer's lease held",
            grants.len()
        ),
    )
    .with_stats(serde_json::json!({
        "grants": grants.len(), "writes_accepted": accepted, "writes_refused": refused_stale
    }))
}

/// What the server promised about a lease, checked against the grants:
/// a `Validate` that called a token stale before its holder's lease could
/// have ended, or a keep-alive acknowledged for a session whose exclusive
/// lock had already been granted to someone else (the session was gone,
/// so "alive" was a lie a client would act on).
fn lease(history: &[Op], holds: &Holds) -> CheckResult {
    const NAME: &str = "lease";
    let ps = pairs(history);
    let mut validates = 0;
    let mut keepalives = 0;
    for p in &ps {
        match p.invoke.f {
            F::Validate => {
                let Some(done) = p.done.filter(|d| d.kind == Type::Ok) else {
                    continue;
                };
                validates += 1;
                let valid = done
                    .value
                    .as_ref()
                    .and_then(|v| v.get("valid"))
                    .and_then(|v| v.as_bool())
                    .unwrap_or(true);
                if !valid && p.invoke.valid_until_ns.is_some_and(|v| v > done.time_ns) {
                    return CheckResult::invalid(
                        NAME,
                        format!(
                            "{}: Validate called token {} stale at {:.3}s, while its holder's lease held until {:.3}s",
                            p.invoke.lock,
                            p.invoke.token.unwrap_or(0),
                            done.time_ns as f64 / 1e9,
                            p.invoke.valid_until_ns.unwrap_or(0) as f64 / 1e9
                        ),
                        vec![p.invoke.clone(), done.clone()],
                    );
                }
            }
            F::Lost => {
                let Some(done) = p.done.filter(|d| d.kind == Type::Ok) else {
                    continue;
                };
                let by_server = done
                    .value
                    .as_ref()
                    .and_then(|v| v.get("by_server"))
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                if by_server
                    && p.invoke
                        .valid_until_ns
                        .is_some_and(|v| v > p.invoke.time_ns)
                {
                    return CheckResult::invalid(
                        NAME,
                        format!(
                            "session {:?}: the server said it was gone by {:.3}s, before the client's lease deadline {:.3}s",
                            p.invoke.session,
                            p.invoke.time_ns as f64 / 1e9,
                            p.invoke.valid_until_ns.unwrap_or(0) as f64 / 1e9
                        ),
                        vec![p.invoke.clone(), done.clone()],
                    );
                }
            }
            F::KeepAlive => {
                let Some(done) = p.done.filter(|d| d.kind == Type::Ok) else {
                    continue;
                };
                keepalives += 1;
                let sent = p.invoke.time_ns;
                // The session's exclusive holds still open when it sent.
                for mine in holds.0.iter().filter(|h| {
                    h.session.is_some()
                        && h.session == p.invoke.session
                        && matches!(h.f, F::Acquire | F::Campaign)
                        && h.start < sent
                        && h.ended_by.as_ref().is_none_or(|e| e.time_ns > sent)
                }) {
                    let taken = holds.0.iter().find(|o| {
                        o.f == mine.f
                            && o.lock == mine.lock
                            && o.token > mine.token
                            && o.start < sent
                    });
                    if let Some(o) = taken {
                        let mut ops = hold_ops(mine);
                        ops.extend(hold_ops(o));
                        ops.push(p.invoke.clone());
                        ops.push(done.clone());
                        return CheckResult::invalid(
                            NAME,
                            format!(
                                "{}: a keep-alive of session {:?} sent at {:.3}s was acknowledged, but its lock (token {}) had been granted to token {} at {:.3}s: the session was already gone",
                                mine.lock,
                                mine.session,
                                sent as f64 / 1e9,
                                mine.token,
                                o.token,
                                o.start as f64 / 1e9
                            ),
                            ops,
                        );
                    }
                }
            }
            _ => {}
        }
    }
    if validates == 0 && keepalives == 0 {
        return CheckResult::new(
            NAME,
            Verdict::Skipped,
            "no Validate or out-of-band keep-alive in this history",
        );
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{validates} Validate answers and {keepalives} acknowledged keep-alives, none contradicting a live lease or a later grant"
        ),
    )
    .with_stats(serde_json::json!({ "validates": validates, "keepalives": keepalives }))
}

/// (f): after the final restart, nothing acknowledged is gone.
fn durability(history: &[Op]) -> CheckResult {
    const NAME: &str = "durability";
    let ps = pairs(history);
    let finals: Vec<Pair> = ps
        .iter()
        .copied()
        .filter(|p| p.invoke.f == F::FinalRead)
        .collect();
    let locks = history
        .iter()
        .any(|o| matches!(o.f, F::Acquire | F::Campaign | F::SemAcquire));
    if finals.is_empty() && !locks {
        return CheckResult::new(NAME, Verdict::Skipped, "no locks in this workload");
    }
    if finals.is_empty() {
        return CheckResult::new(NAME, Verdict::Unknown, "no final reads in the history");
    }
    let mut unknown = Vec::new();
    for fr in &finals {
        let lock = fr.invoke.lock.as_str();
        let Some(done) = fr.done.filter(|d| d.kind == Type::Ok) else {
            unknown.push(lock.to_owned());
            continue;
        };
        let value = done.value.clone().unwrap_or_default();
        let fresh = value
            .get("fresh_token")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        let holders: Vec<u64> = value
            .get("holders")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|t| t.as_u64()).collect())
            .unwrap_or_default();
        let acked: Vec<Pair> = ps
            .iter()
            .copied()
            .filter(|p| {
                p.invoke.lock == lock && releases(p.invoke.f).is_some() && p.kind() == Type::Ok
            })
            .collect();
        if let Some(g) = acked
            .iter()
            .find(|g| g.done.and_then(|d| d.token).unwrap_or(0) >= fresh)
        {
            return CheckResult::invalid(
                NAME,
                format!(
                    "{lock}: after the restart a new grant got token {fresh}, not above the acknowledged token {}",
                    g.done.and_then(|d| d.token).unwrap_or(0)
                ),
                vec![g.invoke.clone(), g.done.cloned().unwrap_or_else(|| g.invoke.clone()), done.clone()],
            );
        }
        // A release that was acknowledged cannot come back as a holder.
        let released: Option<Pair> = ps.iter().copied().find(|p| {
            p.invoke.lock == lock
                && matches!(p.invoke.f, F::Release | F::Resign | F::SemRelease)
                && p.kind() == Type::Ok
                && p.invoke.token.is_some_and(|t| holders.contains(&t))
        });
        if let Some(r) = released {
            return CheckResult::invalid(
                NAME,
                format!(
                    "{lock}: token {} is a holder after the restart although its release was acknowledged",
                    r.invoke.token.unwrap_or(0)
                ),
                vec![r.invoke.clone(), r.done.cloned().unwrap_or_else(|| r.invoke.clone()), done.clone()],
            );
        }
    }
    if unknown.len() == finals.len() {
        return CheckResult::new(
            NAME,
            Verdict::Unknown,
            format!("no final read completed ({})", unknown.join(", ")),
        );
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{} name(s) read after the restart: fresh tokens above every acknowledged one, no acknowledged release undone{}",
            finals.len() - unknown.len(),
            if unknown.is_empty() { String::new() } else { format!(" ({} unread: {})", unknown.len(), unknown.join(", ")) }
        ),
    )
}

#[cfg(test)]
mod tests;
