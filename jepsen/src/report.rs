//! A run's folder: the history, the checkers' results with statistics, a
//! short summary for a person, and two plots (latency over time and
//! throughput over time, with the nemesis windows shaded and named).

use crate::history::{FaultWindow, Op, Type, F};
use plotters::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

/// What was run.
#[derive(Clone, Debug, Serialize)]
pub struct RunMeta {
    /// Workload name.
    pub workload: String,
    /// Nemesis name.
    pub nemesis: String,
    /// Nodes in the cluster (0 for the fake backend).
    pub nodes: u64,
    /// Concurrent client processes.
    pub concurrency: usize,
    /// Workload duration in seconds.
    pub duration_s: f64,
    /// Random seed.
    pub seed: u64,
    /// How network faults were injected (`iptables`, `not used`, or why
    /// none could be).
    pub network_faults: String,
    /// What was tested: `raftlockd` or `fake (...)`.
    pub backend: String,
    /// The client nemesis's client processes, when not
    /// `raftlock-jepsen worker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_worker: Option<String>,
}

/// The outcome of a run, as the caller prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// `invalid` if any checker found a violation, else `unknown` if any
    /// could not decide (or none applied), else `valid`; checkers skipped
    /// for want of ops of their kind do not count.
    pub verdict: String,
    /// Operations invoked.
    pub ops: usize,
    /// Completions by type.
    pub ok: usize,
    /// Definite failures.
    pub fail: usize,
    /// Unknown outcomes.
    pub info: usize,
}

/// One completed operation with its latency.
struct Done {
    f: F,
    kind: Type,
    at_s: f64,
    latency_ms: f64,
}

fn f_name(f: F) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{f:?}"))
}

/// Pairs each completion with its process's open invocation.
fn completions(history: &[Op]) -> Vec<Done> {
    let mut open: HashMap<u64, &Op> = HashMap::new();
    let mut done = Vec::new();
    for op in history {
        match op.kind {
            Type::Invoke => {
                open.insert(op.process, op);
            }
            _ => {
                if let Some(inv) = open.remove(&op.process) {
                    done.push(Done {
                        f: op.f,
                        kind: op.kind,
                        at_s: op.time_ns as f64 / 1e9,
                        latency_ms: op.time_ns.saturating_sub(inv.time_ns) as f64 / 1e6,
                    });
                }
            }
        }
    }
    done
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Writes `history.jsonl`, `results.json`, `summary.txt`, `latency.svg` and
/// `throughput.svg` into `dir`.
pub fn write_report(
    dir: &Path,
    meta: &RunMeta,
    history: &[Op],
    faults: &[FaultWindow],
    results: &serde_json::Value,
) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(dir)?;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("history.jsonl"))?);
        for op in history {
            serde_json::to_writer(&mut f, op)?;
            f.write_all(b"\n")?;
        }
        f.flush()?;
    }
    let done = completions(history);
    let count = |k: Type| history.iter().filter(|o| o.kind == k).count();
    let summary = Summary {
        verdict: verdict(results),
        ops: count(Type::Invoke),
        ok: count(Type::Ok),
        fail: count(Type::Fail),
        info: count(Type::Info),
    };
    let mut by_f: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let mut latencies: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for d in &done {
        let name = f_name(d.f);
        let entry = by_f
            .entry(name.clone())
            .or_insert_with(|| serde_json::json!({"ok": 0, "fail": 0, "info": 0}));
        let key = match d.kind {
            Type::Ok => "ok",
            Type::Fail => "fail",
            _ => "info",
        };
        entry[key] = serde_json::json!(entry[key].as_u64().unwrap_or(0) + 1);
        if d.kind == Type::Ok {
            latencies.entry(name).or_default().push(d.latency_ms);
        }
    }
    let latency_stats: BTreeMap<String, serde_json::Value> = latencies
        .iter_mut()
        .map(|(k, v)| {
            v.sort_by(f64::total_cmp);
            (
                k.clone(),
                serde_json::json!({
                    "p50_ms": percentile(v, 0.5),
                    "p99_ms": percentile(v, 0.99),
                    "max_ms": v.last().copied().unwrap_or(0.0),
                }),
            )
        })
        .collect();
    let doc = serde_json::json!({
        "meta": meta,
        "verdict": summary.verdict,
        "checks": results,
        "stats": {
            "invocations": summary.ops,
            "ok": summary.ok,
            "fail": summary.fail,
            "info": summary.info,
            "by_f": by_f,
            "latency_ok": latency_stats,
        },
        "faults": faults,
    });
    std::fs::write(dir.join("results.json"), serde_json::to_vec_pretty(&doc)?)?;

    let mut text = String::new();
    text.push_str(&format!(
        "raftlock-jepsen: {} under {} on {} ({} nodes, {} clients, {:.0} s, seed {}; network faults: {})\n",
        meta.workload, meta.nemesis, meta.backend, meta.nodes, meta.concurrency, meta.duration_s, meta.seed, meta.network_faults
    ));
    text.push_str(&format!(
        "verdict: {}\nops: {} invoked, {} ok, {} fail, {} info\n",
        summary.verdict.to_uppercase(),
        summary.ops,
        summary.ok,
        summary.fail,
        summary.info
    ));
    for c in results.as_array().into_iter().flatten() {
        text.push_str(&format!(
            "  {:<18} {:<8} {}\n",
            c["checker"].as_str().unwrap_or("?"),
            c["verdict"].as_str().unwrap_or("?"),
            c["explanation"].as_str().unwrap_or("")
        ));
    }
    if !faults.is_empty() {
        text.push_str("faults:\n");
        for w in faults {
            text.push_str(&format!(
                "  {:>7.1}s - {:>7.1}s  {}{}\n",
                w.start_ns as f64 / 1e9,
                w.end_ns as f64 / 1e9,
                w.name,
                if w.majority_down {
                    " [majority down]"
                } else {
                    ""
                }
            ));
            for o in &w.observations {
                text.push_str(&format!(
                    "  {:>22}{} {}\n",
                    "",
                    if o.as_required { "ok:" } else { "VIOLATION:" },
                    o.what
                ));
            }
        }
    }
    std::fs::write(dir.join("summary.txt"), text)?;

    let end_s = history
        .last()
        .map(|o| o.time_ns as f64 / 1e9)
        .unwrap_or(1.0)
        .max(1.0);
    latency_plot(&dir.join("latency.svg"), meta, &done, faults, end_s)?;
    throughput_plot(&dir.join("throughput.svg"), meta, &done, faults, end_s)?;
    Ok(summary)
}

fn verdict(results: &serde_json::Value) -> String {
    let verdicts: Vec<&str> = results
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["verdict"].as_str())
        .collect();
    if verdicts.contains(&"invalid") {
        "invalid"
    } else if verdicts.contains(&"unknown") || !verdicts.contains(&"valid") {
        "unknown"
    } else {
        "valid"
    }
    .into()
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn fs_in(done: &[Done]) -> Vec<F> {
    let mut fs: Vec<F> = Vec::new();
    for d in done {
        if !fs.contains(&d.f) {
            fs.push(d.f);
        }
    }
    fs
}

type PlotResult = anyhow::Result<()>;

/// The nemesis windows as shaded bands spanning `y` with their names
/// written at height `label_y`.
fn fault_bands<DB: DrawingBackend>(
    faults: &[FaultWindow],
    y: (f64, f64),
    label_y: f64,
) -> Vec<DynElement<'static, DB, (f64, f64)>> {
    let mut out = Vec::new();
    for w in faults {
        let (a, b) = (w.start_ns as f64 / 1e9, w.end_ns as f64 / 1e9);
        out.push(
            Rectangle::new(
                [(a, y.0), (b, y.1)],
                RGBColor(255, 160, 160).mix(0.25).filled(),
            )
            .into_dyn(),
        );
        out.push(
            Text::new(
                w.name.clone(),
                (a, label_y),
                ("sans-serif", 12).into_font().color(&RGBColor(150, 30, 30)),
            )
            .into_dyn(),
        );
    }
    out
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plot: {e:?}")
}

fn latency_plot(
    path: &Path,
    meta: &RunMeta,
    done: &[Done],
    faults: &[FaultWindow],
    end_s: f64,
) -> PlotResult {
    let root = SVGBackend::new(path, (1200, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let max_ms = done.iter().map(|d| d.latency_ms).fold(10.0f64, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Latency: {} under {}", meta.workload, meta.nemesis),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0f64..end_s, (0.05f64..max_ms).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("latency (ms, log scale)")
        .draw()
        .map_err(plot_err)?;
    fault_bands(faults, (0.05, max_ms), max_ms / 1.6)
        .into_iter()
        .try_for_each(|e| chart.draw_series(std::iter::once(e)).map(|_| ()))
        .map_err(plot_err)?;
    for (i, f) in fs_in(done).into_iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let ok: Vec<(f64, f64)> = done
            .iter()
            .filter(|d| d.f == f && d.kind == Type::Ok)
            .map(|d| (d.at_s, d.latency_ms.max(0.05)))
            .collect();
        let bad: Vec<(f64, f64)> = done
            .iter()
            .filter(|d| d.f == f && d.kind != Type::Ok)
            .map(|d| (d.at_s, d.latency_ms.max(0.05)))
            .collect();
        chart
            .draw_series(ok.into_iter().map(|p| Circle::new(p, 2, color.filled())))
            .map_err(plot_err)?
            .label(format!("{} ok", f_name(f)))
            .legend(move |(x, y)| Circle::new((x, y), 3, color.filled()));
        chart
            .draw_series(
                bad.into_iter()
                    .map(|p| Cross::new(p, 3, color.stroke_width(1))),
            )
            .map_err(plot_err)?
            .label(format!("{} fail/info", f_name(f)))
            .legend(move |(x, y)| Cross::new((x, y), 3, color.stroke_width(1)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

fn throughput_plot(
    path: &Path,
    meta: &RunMeta,
    done: &[Done],
    faults: &[FaultWindow],
    end_s: f64,
) -> PlotResult {
    let buckets = end_s.ceil() as usize + 1;
    let fs = fs_in(done);
    let mut series: Vec<Vec<u32>> = vec![vec![0; buckets]; fs.len()];
    for d in done.iter().filter(|d| d.kind == Type::Ok) {
        if let Some(i) = fs.iter().position(|f| *f == d.f) {
            let b = (d.at_s as usize).min(buckets - 1);
            series[i][b] += 1;
        }
    }
    let max = series
        .iter()
        .flat_map(|s| s.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.2;
    let root = SVGBackend::new(path, (1200, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Throughput: {} under {}", meta.workload, meta.nemesis),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0f64..end_s, 0f64..max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("ok operations per second")
        .draw()
        .map_err(plot_err)?;
    fault_bands(faults, (0.0, max), max * 0.95)
        .into_iter()
        .try_for_each(|e| chart.draw_series(std::iter::once(e)).map(|_| ()))
        .map_err(plot_err)?;
    for (i, f) in fs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                series[i]
                    .iter()
                    .enumerate()
                    .map(|(s, n)| (s as f64 + 0.5, f64::from(*n))),
                color.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(f_name(*f))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 15, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
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
            lock: "l".into(),
            session: Some(1),
            token: Some(3),
            valid_until_ns: None,
            value: None,
            error: None,
        }
    }

    #[test]
    fn writes_every_file_and_the_history_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let history = vec![
            op(0, 0, 1, Type::Invoke, F::Acquire),
            op(1, 5, 1, Type::Ok, F::Acquire),
            op(2, 1200, 1, Type::Invoke, F::Release),
            op(3, 1250, 1, Type::Fail, F::Release),
        ];
        let faults = vec![FaultWindow {
            name: "kill [2]".into(),
            start_ns: 300_000_000,
            end_ns: 900_000_000,
            majority_down: false,
            observations: Vec::new(),
            clock_rate: None,
        }];
        let meta = RunMeta {
            workload: "mutex".into(),
            nemesis: "kill".into(),
            nodes: 3,
            concurrency: 1,
            duration_s: 1.0,
            seed: 1,
            network_faults: "not used".into(),
            backend: "test".into(),
            client_worker: None,
        };
        let results =
            serde_json::json!([{"checker": "x", "verdict": "valid", "explanation": "fine"}]);
        let s = write_report(dir.path(), &meta, &history, &faults, &results).unwrap();
        assert_eq!(
            (s.verdict.as_str(), s.ops, s.ok, s.fail),
            ("valid", 2, 1, 1)
        );
        let text = std::fs::read_to_string(dir.path().join("history.jsonl")).unwrap();
        let back: Vec<Op> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, history);
        for (file, label) in [
            ("latency.svg", "latency (ms"),
            ("throughput.svg", "ok operations per second"),
        ] {
            let svg = std::fs::read_to_string(dir.path().join(file)).unwrap();
            assert!(svg.contains(label), "{file} lacks its axis label");
            assert!(svg.contains("time since start (s)"));
            assert!(
                svg.contains("kill [2]"),
                "{file} lacks the nemesis band label"
            );
        }
        let summary = std::fs::read_to_string(dir.path().join("summary.txt")).unwrap();
        assert!(summary.contains("verdict: VALID"));
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap())
                .unwrap();
        assert_eq!(results["stats"]["by_f"]["release"]["fail"], 1);
    }
}
