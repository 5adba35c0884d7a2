//! `raftlock bench --workload scale`: a cluster of its own loaded with
//! `--locks` held locks over `--sessions` live sessions, then measured: RSS
//! per node, snapshot size and build time, and the time from restarting
//! every node (SIGKILL, then start on the same data dirs) to serving again.

use super::cluster::{find_raftlockd, mib, rss, sample, scrape, start, LocalCluster};
use super::{Args, RunResult};
use anyhow::Context;
use futures::StreamExt;
use hdrhistogram::Histogram;
use raftlock_client::{Client, Session};
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::cluster_client::ClusterClient;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Requests each bench client keeps in flight while loading: enough to
/// fill the leader's group commit.
const IN_FLIGHT_PER_CLIENT: usize = 16;

/// What `scale` measured.
#[derive(Serialize, Clone)]
pub struct ScaleFigures {
    sessions: u64,
    locks: u64,
    sessions_per_sec: f64,
    acquires_per_sec: f64,
    /// Per node, after loading: resident set and its peak.
    rss_mib: Vec<f64>,
    peak_rss_mib: Vec<f64>,
    /// Per node: the last snapshot written (built or installed), and the
    /// mean and last time to build one (serialize + write + fsync). A
    /// follower fed by the leader's snapshots may never build one: 0 then.
    snapshot_mib: Vec<f64>,
    snapshot_build_mean_ms: Vec<f64>,
    snapshot_build_last_ms: Vec<f64>,
    /// Per node: snapshots received from the leader.
    snapshots_installed: Vec<f64>,
    /// Every node SIGKILLed and restarted: until a new acquire succeeds.
    restart_to_serving_ms: f64,
    /// ... and until every node reports every lock.
    restart_to_all_caught_up_ms: f64,
    /// Per node, time its restart spent loading its snapshot.
    snapshot_load_ms: Vec<f64>,
    rss_after_restart_mib: Vec<f64>,
}

/// Polls `f` every 50 ms until it is true or `within` passes.
async fn until<F, Fut>(within: Duration, what: &str, mut f: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t = Instant::now();
    while !f().await {
        if t.elapsed() > within {
            anyhow::bail!("{what}: not within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(t.elapsed())
}

/// How far the node at `addr` itself has applied the log, if it answers.
async fn applied_on(addr: &str) -> Option<u64> {
    let mut c = ClusterClient::connect(format!("http://{addr}"))
        .await
        .ok()?;
    let req = pb::StatusRequest {
        linearizable_counts: false,
    };
    c.status(req)
        .await
        .ok()
        .map(|s| s.into_inner().applied_index)
}

/// Waits until every node has applied the log up to `index`.
async fn all_applied(cluster: &LocalCluster, index: u64, what: &str) -> anyhow::Result<()> {
    for id in 1..=cluster.nodes().len() as u64 {
        let addr = cluster.node(id).client_addr.clone();
        until(Duration::from_secs(120), what, || {
            let addr = addr.clone();
            async move { applied_on(&addr).await.is_some_and(|n| n >= index) }
        })
        .await?;
    }
    Ok(())
}

pub async fn scale(a: &Args, run: usize) -> anyhow::Result<RunResult> {
    let exe = find_raftlockd(a.raftlockd.as_deref())?;
    let mut cluster = start(exe).await?;
    let endpoints = cluster.endpoints();
    let logs = cluster.dir().display().to_string();
    let admin = Client::connect(&endpoints).await?;
    until(Duration::from_secs(30), "a leader", || async {
        admin
            .status()
            .await
            .map(|s| s.leader_id != 0)
            .unwrap_or(false)
    })
    .await
    .with_context(|| format!("node logs in {logs}"))?;

    let clients = a.clients.max(1);
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        conns.push(Client::connect(&endpoints).await?);
    }

    // Sessions, spread over the clients (each client renews its own over
    // one stream).
    let began = Instant::now();
    let mut created: Vec<Session> = futures::stream::iter(0..a.sessions)
        .map(|i| {
            let c = conns[i % clients].clone();
            let ttl = a.ttl;
            async move { c.session(ttl).await }
        })
        .buffer_unordered(clients * IN_FLIGHT_PER_CLIENT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .context("creating sessions")?;
    created.sort_by_key(|s| s.id());
    let sessions_per_sec = created.len() as f64 / began.elapsed().as_secs_f64();
    eprintln!(
        "scale: {} sessions in {:.1} s",
        created.len(),
        began.elapsed().as_secs_f64()
    );

    // Locks: lock i is held by session i mod S, and kept held (detached
    // guards: no guard objects, released when the session ends).
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut errors = 0u64;
    let began = Instant::now();
    let mut acquires = futures::stream::iter(0..a.locks)
        .map(|i| {
            let s = created[i % created.len()].clone();
            async move {
                let t = Instant::now();
                let r = s.lock(format!("scale/{run}/{i}")).try_acquire().await;
                (t.elapsed(), r)
            }
        })
        .buffer_unordered(clients * IN_FLIGHT_PER_CLIENT);
    let mut reported = Instant::now();
    while let Some((took, r)) = acquires.next().await {
        match r {
            Ok(Some(g)) => {
                g.detach();
                let _ = h.record(took.as_micros().max(1) as u64);
            }
            Ok(None) => errors += 1,
            Err(e) => {
                errors += 1;
                if errors <= 3 {
                    eprintln!("acquire: {e}");
                }
            }
        }
        if reported.elapsed() > Duration::from_secs(10) {
            reported = Instant::now();
            eprintln!(
                "scale: {} locks held after {:.0} s",
                h.len(),
                began.elapsed().as_secs_f64()
            );
        }
    }
    drop(acquires);
    let acquires_per_sec = h.len() as f64 / began.elapsed().as_secs_f64();
    let held = h.len();
    eprintln!(
        "scale: {held} locks in {:.1} s",
        began.elapsed().as_secs_f64()
    );

    // Every node has applied everything; the leader has snapshotted along
    // the way (every `--snapshot-every` entries).
    let status = admin.status().await?;
    anyhow::ensure!(
        status.locks >= held,
        "the leader counts {} locks, {held} were granted",
        status.locks
    );
    let loaded = status.commit_index;
    all_applied(&cluster, loaded, "every lock applied").await?;
    let mut f = ScaleFigures {
        sessions: created.len() as u64,
        locks: held,
        sessions_per_sec,
        acquires_per_sec,
        rss_mib: vec![],
        peak_rss_mib: vec![],
        snapshot_mib: vec![],
        snapshot_build_mean_ms: vec![],
        snapshot_build_last_ms: vec![],
        snapshots_installed: vec![],
        restart_to_serving_ms: 0.0,
        restart_to_all_caught_up_ms: 0.0,
        snapshot_load_ms: vec![],
        rss_after_restart_mib: vec![],
    };
    for id in 1..=cluster.nodes().len() as u64 {
        let (now, peak) = rss(cluster.node(id).pid());
        f.rss_mib.push(mib(now));
        f.peak_rss_mib.push(mib(peak));
        // A node that cannot be scraped is an error, not a row of zeros.
        let text = scrape(cluster.node(id).metrics_addr.as_deref().unwrap_or_default())
            .await
            .with_context(|| format!("metrics of node {id}"))?;
        let sum = sample(&text, "raftlock_snapshot_build_seconds_sum").unwrap_or(0.0);
        let count = sample(&text, "raftlock_snapshot_build_seconds_count").unwrap_or(0.0);
        f.snapshot_mib
            .push(mib(sample(&text, "raftlock_snapshot_bytes").unwrap_or(0.0)));
        f.snapshot_build_mean_ms.push(if count > 0.0 {
            sum / count * 1000.0
        } else {
            0.0
        });
        f.snapshot_build_last_ms
            .push(sample(&text, "raftlock_snapshot_build_last_seconds").unwrap_or(0.0) * 1000.0);
        f.snapshots_installed
            .push(sample(&text, "raftlock_snapshots_installed_total").unwrap_or(0.0));
    }

    // The whole cluster crashes and comes back on its data dirs.
    for id in 1..=cluster.nodes().len() as u64 {
        cluster.kill(id);
    }
    let restarted = Instant::now();
    for id in 1..=cluster.nodes().len() as u64 {
        cluster.start_node(id)?;
    }
    let probe = created[0].clone();
    let serving = until(Duration::from_secs(120), "an acquire after restart", || {
        let probe = probe.clone();
        async move {
            matches!(
                probe.lock(format!("scale/{run}/probe")).try_acquire().await,
                Ok(Some(_))
            )
        }
    })
    .await?;
    f.restart_to_serving_ms = restarted.elapsed().as_secs_f64() * 1000.0;
    eprintln!("scale: serving {serving:?} after the restart began");
    all_applied(&cluster, loaded, "every lock after restart").await?;
    let after = admin.status().await?;
    anyhow::ensure!(
        after.locks >= held,
        "after the restart the leader counts {} locks, {held} were held",
        after.locks
    );
    f.restart_to_all_caught_up_ms = restarted.elapsed().as_secs_f64() * 1000.0;
    for id in 1..=cluster.nodes().len() as u64 {
        f.rss_after_restart_mib
            .push(mib(rss(cluster.node(id).pid()).0));
        let text = scrape(cluster.node(id).metrics_addr.as_deref().unwrap_or_default())
            .await
            .with_context(|| format!("metrics of node {id} after the restart"))?;
        f.snapshot_load_ms
            .push(sample(&text, "raftlock_snapshot_load_seconds").unwrap_or(0.0) * 1000.0);
    }
    // Sessions ride out the restart on keep-alives (their TTL outlasts it).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lost = created.iter().filter(|s| !s.is_valid()).count() as u64;
    Ok(RunResult {
        ops_per_sec: acquires_per_sec,
        lost_sessions: lost,
        scale: Some(f),
        ..RunResult::new(a, run, &h, errors)
    })
}
