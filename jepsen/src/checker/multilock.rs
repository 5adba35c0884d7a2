//! Lock sets (`acquire_all`): a set is granted in one log entry, so every
//! lock of it carries the same token; and, per lock, a grant the history
//! shows was acknowledged before another acquisition of the lock was even
//! asked for has the lower token. (That no two holders of one lock overlap
//! is `mutual_exclusion`'s, which reads a set's holds too; that waiting
//! sets never deadlock shows as sets granted throughout the run and each
//! lock granted afresh after it, `durability`'s final reads.)

use super::{pairs, CheckResult, Hold, Holds, Verdict};
use crate::history::{Op, Type, F};
use std::collections::BTreeMap;

const NAME: &str = "multilock";

pub(crate) fn check(history: &[Op], holds: &Holds) -> CheckResult {
    let ps = pairs(history);
    let sets: Vec<_> = ps.iter().filter(|p| p.invoke.f == F::AcquireAll).collect();
    if sets.is_empty() {
        return CheckResult::new(NAME, Verdict::Skipped, "no lock sets in this workload");
    }
    let mut granted = 0;
    for p in &sets {
        let Some(done) = p.done.filter(|d| d.kind == Type::Ok) else {
            continue;
        };
        granted += 1;
        let grants = set_grants(done);
        let asked = p
            .invoke
            .value
            .as_ref()
            .and_then(|v| v.get("locks"))
            .and_then(|l| l.as_array())
            .map_or(0, Vec::len);
        let one_entry = grants.windows(2).all(|w| w[0].1 == w[1].1);
        if grants.len() != asked || !one_entry {
            return CheckResult::invalid(
                NAME,
                format!(
                    "the set {} was granted as {grants:?}: not every lock in one entry",
                    p.invoke.lock
                ),
                vec![p.invoke.clone(), done.clone()],
            );
        }
    }
    // Per lock, the holds of sets by when they were acknowledged.
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds.0.iter().filter(|h| h.acquire.0.f == F::AcquireAll) {
        by_lock.entry(&h.lock).or_default().push(h);
    }
    for (lock, mut hs) in by_lock {
        hs.sort_by_key(|h| h.start);
        for (i, later) in hs.iter().enumerate() {
            let asked = later.acquire.0.time_ns;
            // Granted and acknowledged before `later` was asked for.
            let earlier = hs[..i]
                .iter()
                .filter(|h| h.start < asked)
                .max_by_key(|h| h.token);
            if let Some(e) = earlier {
                if e.token >= later.token {
                    return CheckResult::invalid(
                        NAME,
                        format!(
                            "{lock}: token {} was granted after token {} had been acknowledged, but is not larger",
                            later.token, e.token
                        ),
                        vec![
                            e.acquire.0.clone(),
                            e.acquire.1.clone(),
                            later.acquire.0.clone(),
                            later.acquire.1.clone(),
                        ],
                    );
                }
            }
        }
    }
    if granted == 0 {
        return CheckResult::new(
            NAME,
            Verdict::Unknown,
            format!("none of {} lock sets asked for was granted", sets.len()),
        );
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{granted} of {} lock sets granted, each in one entry, tokens rising per lock",
            sets.len()
        ),
    )
    .with_stats(serde_json::json!({ "sets": sets.len(), "granted": granted }))
}

/// The locks an `acquire_all` ok granted, with each one's token.
pub(crate) fn set_grants(done: &Op) -> Vec<(&str, u64)> {
    let Some(v) = done.value.as_ref() else {
        return Vec::new();
    };
    let locks = v.get("locks").and_then(|l| l.as_array());
    let tokens = v.get("tokens").and_then(|t| t.as_array());
    match (locks, tokens) {
        (Some(l), Some(t)) => l
            .iter()
            .zip(t)
            .filter_map(|(l, t)| Some((l.as_str()?, t.as_u64()?)))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(index: usize, ms: u64, process: u64, kind: Type, f: F, lock: &str) -> Op {
        Op {
            index,
            time_ns: ms * 1_000_000,
            process,
            kind,
            f,
            lock: lock.into(),
            session: Some(process + 100),
            token: None,
            valid_until_ns: None,
            value: None,
            error: None,
        }
    }

    /// Process `p` takes {a, b} at `t0`..`t1` with these tokens and
    /// releases both at `r`.
    fn set(h: &mut Vec<Op>, p: u64, tokens: [u64; 2], t0: u64, t1: u64, r: u64) {
        let mut invoke = op(h.len(), t0, p, Type::Invoke, F::AcquireAll, "a,b");
        invoke.value = Some(json!({"locks": ["a", "b"]}));
        h.push(invoke);
        let mut ok = op(h.len(), t1, p, Type::Ok, F::AcquireAll, "a,b");
        ok.token = Some(tokens[0]);
        ok.value = Some(json!({"locks": ["a", "b"], "tokens": tokens}));
        h.push(ok);
        for (lock, token) in ["a", "b"].into_iter().zip(tokens) {
            for kind in [Type::Invoke, Type::Ok] {
                let mut rel = op(h.len(), r, p, kind, F::Release, lock);
                rel.token = Some(token);
                h.push(rel);
            }
        }
    }

    fn verdict(h: &[Op]) -> Verdict {
        check(h, &Holds::from(h)).verdict
    }

    #[test]
    fn sets_granted_whole_in_order_are_valid() {
        let mut h = Vec::new();
        set(&mut h, 1, [5, 5], 0, 10, 20);
        set(&mut h, 2, [9, 9], 15, 30, 40);
        assert_eq!(verdict(&h), Verdict::Valid);
        // The mutual exclusion checker reads a set's holds too: these two
        // do not overlap.
        let holds = Holds::from(&h[..]);
        assert_eq!(holds.0.len(), 4);
        assert_eq!(
            super::super::exclusion("mutual_exclusion", &holds, F::Acquire).verdict,
            Verdict::Valid
        );
    }

    /// What `set-grants-early` does: one lock of the set granted by an
    /// earlier entry than the rest.
    #[test]
    fn a_set_granted_in_two_entries_is_invalid() {
        let mut h = Vec::new();
        set(&mut h, 1, [5, 7], 0, 10, 20);
        assert_eq!(verdict(&h), Verdict::Invalid);
    }

    #[test]
    fn a_later_set_with_a_lower_token_is_invalid() {
        let mut h = Vec::new();
        set(&mut h, 1, [9, 9], 0, 10, 20);
        set(&mut h, 2, [5, 5], 25, 30, 40);
        assert_eq!(verdict(&h), Verdict::Invalid);
    }

    #[test]
    fn overlapping_sets_on_one_lock_break_mutual_exclusion() {
        let mut h = Vec::new();
        set(&mut h, 1, [5, 5], 0, 10, 50);
        set(&mut h, 2, [9, 9], 5, 20, 60);
        let holds = Holds::from(&h[..]);
        assert_eq!(
            super::super::exclusion("mutual_exclusion", &holds, F::Acquire).verdict,
            Verdict::Invalid
        );
    }

    #[test]
    fn other_workloads_skip_it() {
        let h = vec![op(0, 0, 1, Type::Invoke, F::Acquire, "a")];
        assert_eq!(verdict(&h), Verdict::Skipped);
    }
}
