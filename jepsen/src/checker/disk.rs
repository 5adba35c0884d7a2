//! What nodes did with disk faults, as the nemesis saw them: a node whose
//! durable log bytes were damaged refuses to start (DESIGN.md, rule 7),
//! and one whose disk filled stops (rule 8). A node that served on a
//! damaged log may leave no trace in the history (its lost entries can be
//! copied back from a healthy leader), so the nemesis's observation is the
//! evidence.

use super::{CheckResult, Verdict};
use crate::history::FaultWindow;

const NAME: &str = "disk";

/// Invalid if a node did not do what the rules say with a disk fault.
pub(crate) fn check(faults: &[FaultWindow]) -> CheckResult {
    let seen: Vec<_> = faults.iter().flat_map(|w| &w.observations).collect();
    if seen.is_empty() {
        return CheckResult::new(NAME, Verdict::Skipped, "no disk faults in this run");
    }
    let stats = serde_json::json!({
        "observed": seen.len(),
        "violations": seen.iter().filter(|o| !o.as_required).count(),
    });
    let bad: Vec<&str> = seen
        .iter()
        .filter(|o| !o.as_required)
        .map(|o| o.what.as_str())
        .collect();
    if !bad.is_empty() {
        return CheckResult::new(NAME, Verdict::Invalid, bad.join("; ")).with_stats(stats);
    }
    let shown: Vec<&str> = seen.iter().take(3).map(|o| o.what.as_str()).collect();
    CheckResult::new(
        NAME,
        Verdict::Valid,
        format!(
            "{} disk fault(s), each met as the rules say: {}{}",
            seen.len(),
            shown.join("; "),
            if seen.len() > shown.len() {
                format!("; and {} more", seen.len() - shown.len())
            } else {
                String::new()
            }
        ),
    )
    .with_stats(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Observation;

    fn window(observations: Vec<Observation>) -> FaultWindow {
        FaultWindow {
            name: "damage".into(),
            start_ns: 0,
            end_ns: 1,
            majority_down: false,
            observations,
            clock_rate: None,
        }
    }

    #[test]
    fn a_node_that_served_on_a_damaged_log_is_a_violation() {
        let refused = Observation {
            node: 2,
            as_required: true,
            what: "n2 refused its damaged log".into(),
        };
        let served = Observation {
            node: 3,
            as_required: false,
            what: "n3 started on a damaged log".into(),
        };
        assert_eq!(check(&[]).verdict, Verdict::Skipped);
        assert_eq!(
            check(&[window(vec![refused.clone()])]).verdict,
            Verdict::Valid
        );
        let r = check(&[window(vec![refused]), window(vec![served])]);
        assert_eq!(r.verdict, Verdict::Invalid);
        assert_eq!(r.explanation, "n3 started on a damaged log");
    }
}
