//! `raftlock bench --workload ratelimit`: tokens admitted per second by a
//! rate limit whose rate is far above what the cluster can write, so the
//! figure is the cluster's: one Raft write per take, or (with `--block N`)
//! one per block of N tokens reserved and spent locally.

use super::{summarize, Args, RunResult};
use crate::cli::Cli;
use hdrhistogram::Histogram;
use raftlock_client::Client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A rate no cluster reaches, so the bench measures the cluster.
const UNLIMITED_RATE: u64 = 1_000_000_000;

pub async fn ratelimit(
    cli: &Cli,
    endpoints: &[String],
    a: &Args,
    run: usize,
) -> anyhow::Result<RunResult> {
    let options = crate::cli::bench_options(cli)?;
    let mut connections = Vec::new();
    for _ in 0..a
        .connections
        .unwrap_or(a.clients)
        .clamp(1, a.clients.max(1))
    {
        connections.push(Client::connect_with(endpoints, options.clone()).await?);
    }
    // Its own limit per run, clients and block size: a limit keeps the
    // burst it was created with.
    let name = format!("bench/rate/{}x{}/{run}", a.clients, a.block);
    // Every client may take its block in the same log entry, at one
    // instant of the rate clock: the burst must hold them all.
    let burst = a.block.max(1) * a.clients.max(1) as u64 * 4;
    let start = Arc::new(tokio::sync::Barrier::new(a.clients + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..a.clients {
        let limit = connections[w % connections.len()]
            .rate_limit(&name)
            .rate(UNLIMITED_RATE, Duration::from_secs(1))
            .burst(burst);
        let (start, stop, block) = (start.clone(), stop.clone(), a.block);
        workers.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
            let mut errors = 0;
            start.wait().await;
            let mut lease = None;
            while !stop.load(Ordering::SeqCst) {
                let t = Instant::now();
                if block == 0 {
                    match limit.try_take(1).await {
                        Ok(r) if r.admitted => {
                            let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                        }
                        _ => errors += 1,
                    }
                    continue;
                }
                // A token from the block, reserving the next when it runs
                // out: the reserve's time is the wait of the token it gives.
                let spent = lease
                    .as_ref()
                    .is_some_and(|l: &raftlock_client::TokenLease| l.try_spend());
                if !spent {
                    if let Some(l) = lease.take() {
                        let _ = l.finish().await;
                    }
                    match limit.reserve(block, Duration::from_secs(1)).await {
                        Ok(Some(l)) if l.try_spend() => lease = Some(l),
                        _ => {
                            errors += 1;
                            continue;
                        }
                    }
                }
                let _ = h.record(t.elapsed().as_micros().max(1) as u64);
            }
            if let Some(l) = lease {
                let _ = l.finish().await;
            }
            (h, errors, 0u64)
        }));
    }
    let began = Instant::now();
    start.wait().await;
    tokio::time::sleep(a.duration).await;
    stop.store(true, Ordering::SeqCst);
    summarize(a, run, workers, began.into_std(), 0).await
}
