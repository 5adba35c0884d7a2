//! One run: start a cluster, drive a workload while a nemesis injects
//! faults, heal, restart the whole cluster, read the final state, check the
//! history, and write the report.

use crate::backend::{Backend, Fake, Fault, Real};
use crate::checker;
use crate::clients::ClientProcs;
use crate::cluster::Cluster;
use crate::history::Op;
use crate::nemesis::{self, Nemesis};
use crate::net::Net;
use crate::report::{self, RunMeta};
use crate::workload::{self, Recorder};
use anyhow::Context;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The share of the harness's own workers' grants held past the TTL (the
/// rest are held for milliseconds, for throughput).
pub const IN_PROCESS_LONG_HOLDS: f64 = 0.1;
/// The same for workers in client processes, which the client nemesis
/// pauses and cuts off while they hold.
pub const CLIENT_PROCESS_LONG_HOLDS: f64 = 0.7;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The `raftlockd` binary.
    pub raftlockd: PathBuf,
    /// Workload.
    pub workload: workload::Kind,
    /// Nemesis.
    pub nemesis: nemesis::Kind,
    /// Nodes (3 or 5).
    pub nodes: u64,
    /// Concurrent client processes.
    pub concurrency: usize,
    /// How long the workload runs.
    pub time: Duration,
    /// Random seed (workload and nemesis choices).
    pub seed: u64,
    /// Where the run's folder goes.
    pub out: PathBuf,
    /// Run the nodes as containers of this image instead of processes.
    pub docker: Option<String>,
    /// Rates for the clock nemesis (empty: [`nemesis::CLOCK_RATES`]).
    pub clock_rates: Vec<f64>,
    /// The client processes' program (default: this executable's
    /// `worker`); when given, half the workers run in it under any
    /// nemesis.
    pub client_worker: Option<PathBuf>,
}

/// The outcome of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Outcome {
    /// `valid`, `invalid` or `unknown`.
    pub verdict: String,
    /// The run's folder.
    pub dir: PathBuf,
    /// Operations recorded (invocations).
    pub ops: usize,
    /// Each checker's result.
    pub checks: serde_json::Value,
}

/// Runs against a real cluster.
pub async fn run(cfg: &RunConfig) -> anyhow::Result<Outcome> {
    let dir = cfg.out.join(format!(
        "{}{}-{}-n{}-s{}",
        if cfg.docker.is_some() { "docker-" } else { "" },
        serde_plain(&cfg.workload),
        serde_plain(&cfg.nemesis),
        cfg.nodes,
        cfg.seed
    ));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    let cluster_dir = dir.join("cluster");
    std::fs::create_dir_all(&cluster_dir)?;
    let cluster = match &cfg.docker {
        Some(image) => Cluster::start_docker(image, cfg.nodes, &cluster_dir).await?,
        None => {
            Cluster::start(
                &cfg.raftlockd,
                cfg.nodes,
                &cluster_dir,
                cfg.nemesis == nemesis::Kind::Disk,
            )
            .await?
        }
    };
    let endpoints = cluster.endpoints();
    let needs_net = matches!(
        cfg.nemesis,
        nemesis::Kind::Partition | nemesis::Kind::Chaos | nemesis::Kind::Client
    );
    if cluster.is_docker()
        && matches!(
            cfg.nemesis,
            nemesis::Kind::Client | nemesis::Kind::Clock | nemesis::Kind::Disk
        )
    {
        anyhow::bail!(
            "the {:?} nemesis needs process nodes, not containers",
            cfg.nemesis
        );
    }
    let (net, net_mode) = if needs_net {
        let net = if cluster.is_docker() {
            let names = (1..=cfg.nodes)
                .map(|id| cluster.container(id).unwrap_or_default().to_owned())
                .collect();
            Net::docker(names)
        } else {
            Net::new(
                (1..=cluster.node_count())
                    .map(|id| cluster.ip(id))
                    .collect(),
            )
        };
        match net {
            Ok(n) => {
                let mode = n.mode().to_owned();
                (Some(n), mode)
            }
            // A partition run without partitions would pass having tested
            // nothing it claims.
            Err(e) => anyhow::bail!(
                "the {:?} nemesis needs iptables, which is unusable here: {e:#}",
                cfg.nemesis
            ),
        }
    } else {
        (None, "not used".to_owned())
    };
    let backend: Arc<dyn Backend> = Arc::new(Real::connect(endpoints.clone()).await?);
    let admin = raftlock_client::Client::connect(&endpoints).await?;
    let members = admin.status().await?.members;
    let rec = Recorder::new();
    // The client nemesis needs clients it can stop and cut off: half the
    // workers run in processes of their own. So do they when another
    // client library's worker is given, whatever the nemesis: that library
    // is then judged under every fault, not only under the client's own.
    let (in_process, clients) = if cfg.nemesis == nemesis::Kind::Client
        || cfg.client_worker.is_some()
    {
        let n = (cfg.concurrency / 2).max(1);
        let exe = match &cfg.client_worker {
            Some(w) => w.clone(),
            None => std::env::current_exe().context("cannot locate raftlock-jepsen")?,
        };
        let procs = ClientProcs::start(&exe, n, &endpoints, cfg.workload, cfg.seed, &rec, &dir)?;
        (
            cfg.concurrency.saturating_sub(n),
            Some(Arc::new(tokio::sync::Mutex::new(procs))),
        )
    } else {
        (cfg.concurrency, None)
    };
    let windows = Arc::new(Mutex::new(Vec::new()));
    let nem = Arc::new(Nemesis {
        clients: clients.clone(),
        clock_rates: if cfg.clock_rates.is_empty() {
            nemesis::CLOCK_RATES.to_vec()
        } else {
            cfg.clock_rates.clone()
        },
        cluster: Arc::new(tokio::sync::Mutex::new(cluster)),
        net,
        admin,
        windows: windows.clone(),
        rec: rec.clone(),
        members,
        failures: Arc::default(),
        disk: Default::default(),
        clock_rate: Mutex::default(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let work = tokio::spawn(workload::run(
        backend.clone(),
        rec.clone(),
        cfg.workload,
        in_process,
        cfg.seed,
        IN_PROCESS_LONG_HOLDS,
        stop_rx.clone(),
    ));
    let faults = tokio::spawn({
        let nem = nem.clone();
        let kind = cfg.nemesis;
        let seed = cfg.seed;
        async move { nem.run(kind, seed, stop_rx).await }
    });
    tokio::time::sleep(cfg.time).await;
    let _ = stop_tx.send(true);
    let _ = faults.await;
    if tokio::time::timeout(Duration::from_secs(60), work)
        .await
        .is_err()
    {
        tracing::warn!("workers did not stop within 60 s");
    }
    if let Some(c) = &clients {
        c.lock().await.stop().await;
    }

    // Durability: the whole cluster dies at once and comes back from disk.
    {
        let mut c = nem.cluster.lock().await;
        for id in 1..=cfg.nodes {
            c.kill(id);
        }
        c.heal_processes()?;
        c.wait_for_leader(Duration::from_secs(30)).await?;
    }
    workload::final_reads(backend.as_ref(), &rec, cfg.workload).await;

    let history = rec.history();
    let faults = windows.lock().clone();
    let meta = RunMeta {
        workload: serde_plain(&cfg.workload),
        nemesis: serde_plain(&cfg.nemesis),
        nodes: cfg.nodes,
        concurrency: cfg.concurrency,
        duration_s: cfg.time.as_secs_f64(),
        seed: cfg.seed,
        network_faults: net_mode,
        backend: match &cfg.docker {
            Some(image) => format!("raftlockd in containers of {image}"),
            None => "raftlockd processes".into(),
        },
        client_worker: cfg
            .client_worker
            .as_ref()
            .filter(|_| cfg.nemesis == nemesis::Kind::Client)
            .map(|w| w.display().to_string()),
    };
    let outcome = finish(&dir, &meta, &history, &faults)?;
    let failures = nem.failures.lock().clone();
    anyhow::ensure!(
        failures.is_empty(),
        "the nemesis could not act, so this run tested less than it says ({}): {}",
        dir.display(),
        failures.join("; ")
    );
    // Keep node logs with the run; drop the data dirs (they can be large).
    for n in 1..=cfg.nodes {
        let _ = std::fs::remove_dir_all(cluster_dir.join(format!("n{n}")));
    }
    Ok(outcome)
}

/// Runs a workload against the in-memory fake with `fault` planted.
pub async fn run_fake(
    workload: workload::Kind,
    fault: Fault,
    concurrency: usize,
    time: Duration,
    seed: u64,
    out: &Path,
) -> anyhow::Result<Outcome> {
    let dir = out.join(format!("fake-{}-{:?}", serde_plain(&workload), fault).to_lowercase());
    std::fs::create_dir_all(&dir)?;
    let backend: Arc<dyn Backend> = Arc::new(Fake::new(fault));
    let rec = Recorder::new();
    let (stop_tx, stop_rx) = watch::channel(false);
    let work = tokio::spawn(workload::run(
        backend.clone(),
        rec.clone(),
        workload,
        concurrency,
        seed,
        IN_PROCESS_LONG_HOLDS,
        stop_rx,
    ));
    tokio::time::sleep(time).await;
    let _ = stop_tx.send(true);
    let _ = work.await;
    workload::final_reads(backend.as_ref(), &rec, workload).await;
    let meta = RunMeta {
        workload: serde_plain(&workload),
        nemesis: "none".into(),
        nodes: 0,
        concurrency,
        duration_s: time.as_secs_f64(),
        seed,
        network_faults: "not used".into(),
        backend: format!("fake ({fault:?})"),
        client_worker: None,
    };
    finish(&dir, &meta, &rec.history(), &[])
}

fn finish(
    dir: &Path,
    meta: &RunMeta,
    history: &[Op],
    faults: &[crate::history::FaultWindow],
) -> anyhow::Result<Outcome> {
    let results = checker::check_run(history, faults);
    let results_json = serde_json::to_value(&results)?;
    let summary = report::write_report(dir, meta, history, faults, &results_json)?;
    Ok(Outcome {
        verdict: summary.verdict.clone(),
        dir: dir.to_owned(),
        ops: history
            .iter()
            .filter(|o| o.kind == crate::history::Type::Invoke)
            .count(),
        checks: results_json,
    })
}

/// A unit enum's serde name (`mutex`, `kill`).
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
