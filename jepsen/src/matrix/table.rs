//! The matrix's table: per file and fault, how many cases ran, what the
//! damaged node did, what was violated, and the longest the healthy pair
//! went without a grant.

use super::fault::{Kind, Target};
use super::{CaseResult, Reaction};
use std::fmt::Write;

#[derive(Default)]
struct Row {
    cases: usize,
    restarted: usize,
    rejoined: usize,
    refused: usize,
    violations: usize,
    reissued: usize,
    lost: usize,
    longest_gap_ms: Option<u64>,
}

impl Row {
    fn add(&mut self, r: &CaseResult) {
        self.cases += 1;
        match r.reaction {
            Reaction::Restarted => self.restarted += 1,
            Reaction::Rejoined => self.rejoined += 1,
            Reaction::Refused => self.refused += 1,
            Reaction::NotApplicable => {}
        }
        self.violations += r.violations.len();
        self.reissued += r
            .violations
            .iter()
            .filter(|v| v.contains("granted with token"))
            .count();
        self.lost += r
            .violations
            .iter()
            .filter(|v| v.contains("was acknowledged and is gone"))
            .count();
        if let Some(g) = r.longest_gap_ms {
            self.longest_gap_ms = Some(self.longest_gap_ms.unwrap_or(0).max(g));
        }
    }

    fn line(&self, out: &mut String, label: &str) {
        let _ = writeln!(
            out,
            "{label:<48} {:>5} {:>9} {:>8} {:>7} {:>6} {:>8} {:>10} {:>12}",
            self.cases,
            self.restarted,
            self.rejoined,
            self.refused,
            self.lost,
            self.reissued,
            self.violations,
            self.longest_gap_ms
                .map_or("-".to_string(), |g| format!("{g} ms")),
        );
    }
}

/// The table, one row per file × fault × (alone, beside a stale peer) that
/// ran at least one case, and a total.
pub fn render(results: &[CaseResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<48} {:>5} {:>9} {:>8} {:>7} {:>6} {:>8} {:>10} {:>12}",
        "file / fault / second failure",
        "cases",
        "restarted",
        "rejoined",
        "refused",
        "lost",
        "reissued",
        "violations",
        "longest gap"
    );
    let mut total = Row::default();
    let mut skipped = 0;
    let targets = Target::FILES.iter().chain([Target::DataDir].iter());
    for target in targets {
        for kind in [
            Kind::Zero,
            Kind::Flip,
            Kind::Truncate,
            Kind::ReadError,
            Kind::Remove,
            Kind::Lost,
        ] {
            for stale in [false, true] {
                let mut row = Row::default();
                for r in results.iter().filter(|r| {
                    r.case.target == *target && r.case.kind == kind && r.case.stale_peer == stale
                }) {
                    if r.reaction == Reaction::NotApplicable && r.violations.is_empty() {
                        skipped += 1;
                        continue;
                    }
                    row.add(r);
                    total.add(r);
                }
                if row.cases > 0 {
                    let label = format!(
                        "{} / {} / {}",
                        target.label(),
                        kind.label(),
                        if stale { "stale peer" } else { "alone" }
                    );
                    row.line(&mut out, &label);
                }
            }
        }
    }
    total.line(&mut out, "total");
    let _ = writeln!(
        out,
        "({skipped} case(s) had nothing to act on: an offset past a short file, or a file not there)"
    );
    out
}
