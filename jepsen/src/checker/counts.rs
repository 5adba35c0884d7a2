//! The checkers that count: a semaphore's permits held at once against
//! every size it may have had, and a rate limit's admissions against its
//! rate and burst over every span.

use super::{hold_ops, pairs, CheckResult, Hold, Holds, Pair, Verdict};
use crate::history::{Op, Type, F};
use std::collections::BTreeMap;

/// (e): the permits held at once never exceed the semaphore's size.
///
/// Holds may take several permits (`count`), and the size may change while
/// held (`resize`). Of any set of holds the clients had at once, the one
/// granted last was granted while all the others were held on the server
/// (each was released after its holder stopped claiming it), so their
/// permits fit the size in force at that grant. The grant came between its
/// acquire's invoke and ok, so the checker allows the largest size that may
/// have been in force at any time from the earliest invoke of the set to
/// the moment checked: the stated size until a resize is known to have
/// completed, and the size of every resize that was not refused and not
/// known to be superseded by then.
pub(super) fn semaphore(history: &[Op], holds: &Holds) -> CheckResult {
    const NAME: &str = "semaphore";
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds.0.iter().filter(|h| h.f == F::SemAcquire) {
        by_lock.entry(&h.lock).or_default().push(h);
    }
    if by_lock.is_empty() {
        return CheckResult::new(
            NAME,
            Verdict::Skipped,
            "no semaphore grants in this workload",
        );
    }
    let resizes = resizes(history);
    let mut checked = 0;
    let mut resized = 0;
    for (lock, hs) in &by_lock {
        let stated = hs.iter().filter_map(|h| h.permits).max().unwrap_or(1);
        let rs: Vec<&Resize> = resizes.iter().filter(|r| r.lock == *lock).collect();
        resized += rs.len();
        // Sweep: holds active at each start.
        let mut active: Vec<&Hold> = Vec::new();
        for h in hs.iter().filter(|h| h.held()) {
            checked += 1;
            active.retain(|a| a.end > h.start);
            active.push(h);
            let taken: u64 = active.iter().map(|a| a.count).sum();
            let from = active
                .iter()
                .map(|a| a.acquire.0.time_ns)
                .min()
                .unwrap_or(h.start);
            let size = largest_size(stated, &rs, from, h.start);
            if taken > size {
                let ops = active.iter().flat_map(|a| hold_ops(a)).collect();
                return CheckResult::invalid(
                    NAME,
                    format!(
                        "{lock}: {} holders taking {taken} permits at {:.3}s, when the size was at most {size} (tokens {:?})",
                        active.len(),
                        h.start as f64 / 1e9,
                        active.iter().map(|a| a.token).collect::<Vec<_>>()
                    ),
                    ops,
                );
            }
        }
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{checked} holds granted, never more permits held than the size ({resized} resizes)"
        ),
    )
    .with_stats(serde_json::json!({ "holds": checked, "resizes": resized }))
}

/// (f): a rate limit admits at most `rate × span + burst` tokens over any
/// span, and with token leases of validity `V` at most
/// `rate × (span + V) + burst` are spent in it.
///
/// A take answered `admitted` was admitted between its invoke and its ok,
/// so the takes sent at or after `a` and answered by `b` were all admitted
/// within `[a, b]`; a spend of a reserved token happens when it is
/// recorded, at most `V` after its block was admitted. Takes whose outcome
/// is unknown are left out, which can only hide an excess, never invent
/// one. The rate clock may run faster than real time by `clock_rate_error`
/// (the documented 1 %, or what a clock fault of the run set): in real
/// time the bound is `rate × d × (1 + ρ) + burst`.
pub(super) fn ratelimit(history: &[Op], clock_rate_error: f64) -> CheckResult {
    const NAME: &str = "ratelimit";
    let ps = pairs(history);
    let spec = ps
        .iter()
        .find(|p| matches!(p.invoke.f, F::Take | F::Reserve))
        .and_then(|p| p.invoke.value.clone());
    let Some(spec) = spec else {
        return CheckResult::new(
            NAME,
            Verdict::Skipped,
            "no rate-limit takes in this workload",
        );
    };
    let num = |k: &str| spec.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let (rate, per_ms, burst, lease_ms) = (
        num("rate"),
        num("per_ms").max(1),
        num("burst"),
        num("lease_ms"),
    );
    let admitted = |p: &&Pair| {
        p.done.is_some_and(|d| {
            d.kind == Type::Ok
                && d.value
                    .as_ref()
                    .and_then(|v| v.get("admitted"))
                    .and_then(|v| v.as_bool())
                    == Some(true)
        })
    };
    // Each admission: the span it happened in, the ops that show it.
    let mut events: Vec<(u64, u64, Vec<Op>)> = ps
        .iter()
        .filter(|p| p.invoke.f == F::Take)
        .filter(admitted)
        .filter_map(|p| {
            let done = p.done?;
            Some((
                p.invoke.time_ns,
                done.time_ns,
                vec![p.invoke.clone(), done.clone()],
            ))
        })
        .collect();
    let spends: Vec<(u64, u64, Vec<Op>)> = history
        .iter()
        .filter(|o| o.f == F::Spend && o.kind == Type::Ok)
        .map(|o| (o.time_ns, o.time_ns, vec![o.clone()]))
        .collect();
    let slack_ns = if spends.is_empty() {
        0
    } else {
        lease_ms * 1_000_000
    };
    events.extend(spends);
    events.sort_by_key(|e| (e.0, e.1));
    // A span's admissions were all made within it, or (when a spend of a
    // leased token is among them) from a lease's validity before it.
    let allowed = |span_ns: u64, spends: bool| {
        let slack = if spends { slack_ns } else { 0 };
        (span_ns + slack) as f64 / 1e6 / per_ms as f64 * rate as f64 * (1.0 + clock_rate_error)
            + burst as f64
    };
    let is_spend = |e: &(u64, u64, Vec<Op>)| e.2.first().is_some_and(|o| o.f == F::Spend);
    for (i, start) in events.iter().enumerate() {
        // Events that began at or after this one's start, by when they ended.
        let mut inside: Vec<&(u64, u64, Vec<Op>)> = events[i..].iter().collect();
        inside.sort_by_key(|e| e.1);
        let mut spends = false;
        for (k, end) in inside.iter().enumerate() {
            let count = (k + 1) as f64;
            let span = end.1.saturating_sub(start.0);
            spends |= is_spend(end);
            if count > allowed(span, spends) {
                let ops = inside[..=k].iter().flat_map(|e| e.2.clone()).collect();
                return CheckResult::invalid(
                    NAME,
                    format!(
                        "{} tokens admitted within {:.3}s from {:.3}s, more than {rate} per {per_ms} ms allows with burst {burst} and clocks {:.0}% fast{}",
                        k + 1,
                        span as f64 / 1e9,
                        start.0 as f64 / 1e9,
                        clock_rate_error * 100.0,
                        if spends { format!(" and token leases of {lease_ms} ms") } else { String::new() }
                    ),
                    ops,
                );
            }
        }
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{} admissions, never more than {rate} per {per_ms} ms + burst {burst} in any span (clocks up to {:.0}% fast)",
            events.len(),
            clock_rate_error * 100.0
        ),
    )
    .with_stats(serde_json::json!({ "admitted": events.len() }))
}

/// A semaphore resize and what is known of it.
struct Resize<'a> {
    lock: &'a str,
    permits: u64,
    invoke: u64,
    /// When it was acknowledged; `None` if its outcome is unknown.
    ok: Option<u64>,
}

/// Every resize that may have taken effect (refused ones did not).
fn resizes(history: &[Op]) -> Vec<Resize<'_>> {
    pairs(history)
        .into_iter()
        .filter(|p| p.invoke.f == F::Resize)
        .filter(|p| p.done.is_none_or(|d| d.kind != Type::Fail))
        .filter_map(|p| {
            let permits = p.invoke.value.as_ref()?.get("permits")?.as_u64()?;
            Some(Resize {
                lock: &p.invoke.lock,
                permits,
                invoke: p.invoke.time_ns,
                ok: p.done.filter(|d| d.kind == Type::Ok).map(|d| d.time_ns),
            })
        })
        .collect()
}

/// The largest size the semaphore may have had at some moment in
/// `from ..= to`.
fn largest_size(stated: u64, rs: &[&Resize], from: u64, to: u64) -> u64 {
    // A size is out of force by `from` if a later resize began after it
    // was acknowledged and was itself acknowledged before `from`.
    let superseded = |ok: Option<u64>| {
        ok.is_some_and(|done| {
            rs.iter()
                .any(|r2| r2.invoke > done && r2.ok.is_some_and(|d2| d2 < from))
        })
    };
    let initial = (!rs.iter().any(|r| r.ok.is_some_and(|d| d < from))).then_some(stated);
    rs.iter()
        .filter(|r| r.invoke <= to && !superseded(r.ok))
        .map(|r| r.permits)
        .chain(initial)
        .max()
        .unwrap_or(stated)
}
