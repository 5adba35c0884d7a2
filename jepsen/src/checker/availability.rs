//! Availability: while a majority of the nodes is healthy the cluster
//! answers. The longest stretch of the workload without an operation the
//! cluster completed, leaving out the windows in which the nemesis took a
//! majority down on purpose, must stay under [`BOUND`].

use super::{CheckResult, Verdict};
use crate::history::{FaultWindow, Op, Type, F};
use std::time::Duration;

/// The longest the cluster may go without completing an operation while a
/// majority is healthy. What one fault of a minority costs, at the
/// defaults: a dead, paused or cut-off leader is replaced after 3 to 4
/// election timeouts of 300 ms (about 1.2 s); a request already sent to it
/// waits out the client's 6 s attempt timeout before it is sent elsewhere,
/// then up to 0.8 s of backoff; a restarted node reads its log back in
/// well under a second. That is about 8 s at worst; 10 s leaves a margin
/// for a loaded machine, and is still far below what a cluster stuck
/// without a leader, or one waiting on a node that should have stopped,
/// would show.
pub const BOUND: Duration = Duration::from_secs(10);

const NAME: &str = "availability";

/// Ops the cluster answered (not the harness's register, nor what the
/// client library answers from its own state).
fn served(f: F) -> bool {
    !matches!(f, F::Write | F::Act | F::Lost | F::Spend | F::FinalRead)
}

/// [`check_with`] at [`BOUND`].
pub(crate) fn check(history: &[Op], faults: &[FaultWindow]) -> CheckResult {
    check_with(history, faults, BOUND)
}

/// The longest stretch without a completed operation, from the first
/// operation to the last one of the workload (the final reads follow a
/// restart of the whole cluster and are not counted), minus the time
/// inside windows with a majority down.
pub(crate) fn check_with(history: &[Op], faults: &[FaultWindow], bound: Duration) -> CheckResult {
    let end = history
        .iter()
        .find(|o| o.f == F::FinalRead)
        .map_or(u64::MAX, |o| o.time_ns);
    let ops: Vec<&Op> = history
        .iter()
        .filter(|o| o.f != F::FinalRead && o.time_ns < end)
        .collect();
    let (Some(first), Some(last)) = (ops.first().copied(), ops.last().copied()) else {
        return CheckResult::new(NAME, Verdict::Skipped, "no operations");
    };
    let down = merged(
        faults
            .iter()
            .filter(|w| w.majority_down)
            .map(|w| (w.start_ns, w.end_ns))
            .collect(),
    );
    let successes: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|o| o.kind == Type::Ok && served(o.f))
        .collect();
    let mut marks = vec![first];
    marks.extend(successes.iter().copied());
    marks.push(last);
    let mut longest = 0u64;
    let mut between: (&Op, &Op) = (first, first);
    for pair in marks.windows(2) {
        let (a, b) = (pair[0].time_ns, pair[1].time_ns.max(pair[0].time_ns));
        let gap = (b - a) - overlap(a, b, &down);
        if gap > longest {
            longest = gap;
            between = (pair[0], pair[1]);
        }
    }
    let excluded = overlap(first.time_ns, last.time_ns, &down);
    let stats = serde_json::json!({
        "longest_gap_ms": longest / 1_000_000,
        "bound_ms": bound.as_millis() as u64,
        "majority_down_ms": excluded / 1_000_000,
        "successes": successes.len(),
    });
    let secs = |ns: u64| ns as f64 / 1e9;
    if longest > bound.as_nanos() as u64 {
        let mut ops = vec![between.0.clone()];
        if between.1.index != between.0.index {
            ops.push(between.1.clone());
        }
        return CheckResult::invalid(
            NAME,
            format!(
                "no operation completed for {:.1}s between {:.3}s and {:.3}s while a majority was up (bound {}s)",
                secs(longest),
                secs(between.0.time_ns),
                secs(between.1.time_ns),
                bound.as_secs()
            ),
            ops,
        )
        .with_stats(stats);
    }
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "longest stretch without a completed operation while a majority was up: {:.1}s (bound {}s; {:.1}s with a majority down on purpose not counted)",
            secs(longest),
            bound.as_secs(),
            secs(excluded)
        ),
    )
    .with_stats(stats)
}

/// Sorted, disjoint intervals covering the same time as `spans`.
fn merged(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// How much of `[a, b]` the disjoint `spans` cover.
fn overlap(a: u64, b: u64, spans: &[(u64, u64)]) -> u64 {
    spans
        .iter()
        .map(|&(s, e)| b.min(e).saturating_sub(a.max(s)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(index: usize, ms: u64, process: u64, kind: Type, f: F) -> Op {
        Op {
            index,
            time_ns: ms * 1_000_000,
            process,
            kind,
            f,
            lock: "mutex/0".into(),
            session: Some(process + 100),
            token: None,
            valid_until_ns: None,
            value: None,
            error: None,
        }
    }

    /// Acquires every 200 ms from 0 to 30 s, except in `[from, to)` ms,
    /// where each one fails; then a final read.
    fn history(from: u64, to: u64) -> Vec<Op> {
        let mut h = Vec::new();
        let mut t = 0;
        while t < 30_000 {
            let kind = if (from..to).contains(&t) {
                Type::Fail
            } else {
                Type::Ok
            };
            h.push(op(h.len(), t, 1, Type::Invoke, F::Acquire));
            h.push(op(h.len(), t + 5, 1, kind, F::Acquire));
            t += 200;
        }
        // A local answer of the library is no sign the cluster serves.
        h.push(op(h.len(), 30_000, 1, Type::Invoke, F::Act));
        h.push(op(h.len(), 30_001, 1, Type::Ok, F::Act));
        // Well after the workload: a restart of the whole cluster.
        h.push(op(h.len(), 60_000, 2, Type::Invoke, F::FinalRead));
        h.push(op(h.len(), 60_100, 2, Type::Ok, F::FinalRead));
        h
    }

    fn window(from_ms: u64, to_ms: u64, majority_down: bool) -> FaultWindow {
        FaultWindow {
            name: "test".into(),
            start_ns: from_ms * 1_000_000,
            end_ns: to_ms * 1_000_000,
            majority_down,
            observations: Vec::new(),
            clock_rate: None,
        }
    }

    #[test]
    fn a_cluster_that_keeps_answering_is_available() {
        let r = check(&history(0, 0), &[window(1000, 5000, false)]);
        assert_eq!(r.verdict, Verdict::Valid, "{}", r.explanation);
        assert!(r.stats["longest_gap_ms"].as_u64().unwrap() < 300);
    }

    #[test]
    fn a_planted_gap_while_a_majority_is_up_is_invalid() {
        // 12 s of failures under a fault of a minority.
        let h = history(8000, 20_000);
        let r = check(&h, &[window(7000, 21_000, false)]);
        assert_eq!(r.verdict, Verdict::Invalid, "{}", r.explanation);
        assert_eq!(r.counterexample.len(), 2);
        assert_eq!(r.counterexample[0].time_ns, 7_805_000_000);
        assert_eq!(r.counterexample[1].time_ns, 20_005_000_000);
        assert!(r.explanation.contains("12.2s"), "{}", r.explanation);
        // A gap at the end of the workload counts too.
        let r = check(&history(18_000, 40_000), &[]);
        assert_eq!(r.verdict, Verdict::Invalid, "{}", r.explanation);
    }

    #[test]
    fn a_gap_inside_a_window_with_a_majority_down_is_not_counted() {
        let h = history(8000, 20_000);
        let r = check(&h, &[window(7500, 19_000, true)]);
        assert_eq!(r.verdict, Verdict::Valid, "{}", r.explanation);
        // Only the part outside the window counts: 1 s after it.
        let gap = r.stats["longest_gap_ms"].as_u64().unwrap();
        assert!((1000..1300).contains(&gap), "{gap}");
        // Two windows that overlap are not subtracted twice: 6.2 s of
        // the 12.2 s are inside them, not 10.2 s.
        let r = check_with(
            &h,
            &[window(7500, 14_000, true), window(9000, 13_000, true)],
            Duration::from_secs(5),
        );
        assert_eq!(r.verdict, Verdict::Invalid, "{}", r.explanation);
        assert!(r.explanation.contains("6.0s"), "{}", r.explanation);
    }

    #[test]
    fn nothing_to_judge_without_operations() {
        assert_eq!(check(&[], &[]).verdict, Verdict::Skipped);
    }
}
