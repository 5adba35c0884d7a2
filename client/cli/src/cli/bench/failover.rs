//! `raftlock bench --workload failover`: clients acquire and release while
//! the bench kills the leader of its own cluster and restarts it, and the
//! figures say how long acquisitions stalled.

use super::{ms, summarize, wait_for_leader, Args, FailoverFigures, Picker, RunResult, Worker};
use anyhow::Context;
use hdrhistogram::Histogram;
use raftlock_client::Client;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub async fn failover(a: &Args, run: usize) -> anyhow::Result<RunResult> {
    let exe = super::cluster::find_raftlockd(a.raftlockd.as_deref())?;
    let mut cluster = super::cluster::start(exe).await?;
    let endpoints = cluster.endpoints();
    let admin = Client::connect(&endpoints).await?;
    wait_for_leader(&admin)
        .await
        .with_context(|| format!("node logs in {}", cluster.dir().display()))?;
    // Microseconds since `base` at which the latest-started acquire that
    // succeeded was sent: an acquire sent after a kill can only be granted
    // by a new leader (a reply already in flight when the leader died
    // cannot pass for a recovery).
    let base = Instant::now();
    let last_ok = Arc::new(AtomicU64::new(0));
    // Workers run until the last kill has been recovered from, even past
    // --duration, so a late kill is not mistaken for an outage.
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    let start = Arc::new(tokio::sync::Barrier::new(a.clients + 1));
    let options = raftlock_client::Options {
        pipeline: !a.unary,
        ..Default::default()
    };
    for w in 0..a.clients {
        let client = Client::connect_with(&endpoints, options.clone()).await?;
        let session = client.session(a.ttl).await?;
        let worker = Worker {
            id: w,
            prefix: format!("failover/{run}"),
            keys: Picker::Uniform(a.keys.max(1)),
            hold: None,
            metadata: Vec::new(),
            stop: stop.clone(),
            budget: None,
            acquired: Some((base, last_ok.clone())),
        };
        let start = start.clone();
        workers.push(tokio::spawn(async move {
            start.wait().await;
            worker.run(session).await
        }));
    }
    let began = Instant::now();
    start.wait().await;
    let end = began + a.duration;
    let mut recoveries = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut kills, mut unrecovered) = (0u64, 0u64);
    while Instant::now() + a.kill_every < end {
        tokio::time::sleep(a.kill_every).await;
        let victim = wait_for_leader(&admin).await?;
        // The kill returns once the process is reaped: dead from here on.
        cluster.kill(victim);
        let killed = Instant::now();
        let killed_at = killed.duration_since(base).as_micros() as u64;
        kills += 1;
        let deadline = killed + Duration::from_secs(30);
        loop {
            if last_ok.load(Ordering::SeqCst) > killed_at {
                let _ = recoveries.record(killed.elapsed().as_micros().max(1) as u64);
                break;
            }
            if Instant::now() > deadline {
                unrecovered += 1;
                eprintln!("no successful acquire within 30 s of killing node {victim}");
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Back on its data dir, as a supervisor would restart it.
        cluster.start_node(victim)?;
    }
    tokio::time::sleep_until(end.into()).await;
    stop.store(true, Ordering::SeqCst);
    Ok(RunResult {
        failover: Some(FailoverFigures {
            kills,
            recovered: recoveries.len(),
            recovery_p50_ms: ms(&recoveries, 0.5),
            recovery_max_ms: recoveries.max() as f64 / 1000.0,
        }),
        ..summarize(a, run, workers, began, unrecovered).await?
    })
}
