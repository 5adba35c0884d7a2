//! `raftlock bench`: load against a cluster, with latency percentiles from
//! an HDR histogram. Several runs per invocation; the summary gives the
//! median run, since a shared machine's figures vary run to run.
//! The other workloads are submodules (`failover`, `scale`, `soak`, `rate`,
//! `http` for the lock loop over HTTP/JSON): they take this module's `Args`
//! and give back its `RunResult`, and `cluster` starts the local clusters
//! some of them need; none of them imports another workload.
//! It is longer than 800 lines because it holds the flags of every workload
//! (one `Args`, as `raftlock bench --help` shows them) beside the lock
//! workloads' own loop.

mod cluster;
mod failover;
mod http;
mod rate;
mod scale;
mod soak;

use super::{connect, Cli};
use anyhow::Context;
use futures::StreamExt;
use hdrhistogram::Histogram;
use raftlock_client::Client;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Acquire + release over many keys (keys ≫ clients).
    Uncontended,
    /// Acquire + release, every client on one key: FIFO handoff.
    Contended,
    /// Acquire, hold `--hold`, release.
    Hold,
    /// `--sessions` sessions kept alive, no locks; counts lost sessions.
    Keepalive,
    /// Uncontended load on a 3-node cluster the bench starts itself, whose
    /// leader it SIGKILLs every `--kill-every` (and restarts): time from each
    /// kill to the next successful acquire, and lost sessions.
    Failover,
    /// A cluster the bench starts itself, loaded with `--locks` held locks
    /// over `--sessions` sessions: RSS per node, snapshot size and build
    /// time, and time from restarting every node to serving again.
    Scale,
    /// Takes of a rate limit whose rate is far above the cluster's: tokens
    /// admitted per second, one Raft write per take, or per `--block` of
    /// tokens reserved and spent locally.
    Ratelimit,
    /// A cluster the bench starts itself, under `--duration` of what a
    /// fleet of services does for weeks (`--sessions` sessions taking short
    /// locks, cancelling waits, campaigning, taking rate-limit tokens,
    /// `--watchers` watch streams, leadership moved every
    /// `--transfer-every`): each node's memory, descriptors, tasks and kept
    /// state over time. Fails when they grow.
    Soak,
}

/// How lock names are drawn.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Every name equally likely.
    Uniform,
    /// A few names hot, most cold (Zipf with `--zipf-exponent`; name 0 the
    /// hottest), as real lock traffic often is.
    Zipfian,
}

#[derive(clap::Args)]
pub struct Args {
    /// What to do.
    #[arg(long, value_enum, default_value = "uncontended")]
    pub(super) workload: Workload,
    /// Concurrent clients (each with its own session and, unless
    /// `--connections` says otherwise, its own connection).
    #[arg(long, default_value_t = 16)]
    pub(super) clients: usize,
    /// Lock workloads: HTTP/2 connections the clients share, round robin
    /// (as `etcd benchmark --conns`); default one per client. Clients of one
    /// connection are like the workers of one service instance: one
    /// `raftlock_client::Client`, each worker with its own session.
    #[arg(long)]
    pub(super) connections: Option<usize>,
    /// Lock workloads and `failover`: each acquire and release as its own
    /// unary call, not over the client's pipeline stream (the client
    /// library's default); for comparing the two.
    #[arg(long)]
    pub(super) unary: bool,
    /// Lock workloads: go over the HTTP/JSON API (one HTTP/1.1 connection
    /// per client, to the leader) instead of gRPC; for comparing the two.
    #[arg(long)]
    pub(super) http: bool,
    /// Lock names to spread over (contended uses 1).
    #[arg(long, default_value_t = 10_000)]
    pub(super) keys: usize,
    /// How names are drawn from the `--keys`.
    #[arg(long, value_enum, default_value = "uniform")]
    pub(super) distribution: Distribution,
    /// Exponent of the zipfian distribution (YCSB uses 0.99; higher is
    /// more skewed).
    #[arg(long, default_value_t = 0.99)]
    pub(super) zipf_exponent: f64,
    /// Length of each run.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(super) duration: Duration,
    /// Lock workloads: end each run after this many ops (acquire + release)
    /// instead of after `--duration`.
    #[arg(long)]
    pub(super) ops: Option<u64>,
    /// Lock and keepalive workloads: start a 3-node cluster of `raftlockd`
    /// (see `--raftlockd`) for this invocation instead of using
    /// `--endpoints`. (`failover` and `scale` always start their own.)
    #[arg(long)]
    pub(super) start_cluster: bool,
    /// Runs; the summary is their median.
    #[arg(long, default_value_t = 3)]
    pub(super) runs: usize,
    /// Hold time for `hold`.
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub(super) hold: Duration,
    /// Lock workloads over gRPC: bytes of metadata each acquire attaches
    /// (at most 4096, the server's limit), to load the log and the lock
    /// table as grants that say who holds them do.
    #[arg(long, default_value_t = 0)]
    pub(super) metadata_bytes: usize,
    /// Sessions for `keepalive` and `scale`.
    #[arg(long, default_value_t = 1_000)]
    pub(super) sessions: usize,
    /// `scale`: locks to hold (spread over the sessions).
    #[arg(long, default_value_t = 100_000)]
    pub(super) locks: usize,
    /// Session TTL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(super) ttl: Duration,
    /// `failover`: how often to kill the leader.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub(super) kill_every: Duration,
    /// `ratelimit`: reserve tokens in blocks of this many (token leases,
    /// spent locally) instead of one take per token (0).
    #[arg(long, default_value_t = 0)]
    pub(super) block: u64,
    /// `soak`: watch streams opened and dropped over the run.
    #[arg(long, default_value_t = 20)]
    pub(super) watchers: usize,
    /// `soak`: how often leadership is handed to another node.
    #[arg(long, default_value = "3m", value_parser = humantime::parse_duration)]
    pub(super) transfer_every: Duration,
    /// `soak`: how often every node is sampled.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub(super) sample_every: Duration,
    /// `soak`: the run fails when a node's resident memory at the end is
    /// more than this many percent above its value at `--reference-at`.
    #[arg(long, default_value_t = 10.0)]
    pub(super) max_rss_growth: f64,
    /// `soak`: when the memory the end is compared with is read (default:
    /// a sixth of `--duration`, once the sessions, queues and the log
    /// between snapshots have filled).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(super) reference_at: Option<Duration>,
    /// `failover`, `scale`, `--start-cluster`: the server binary to start (default: `raftlockd` beside
    /// this executable).
    #[arg(long)]
    pub(super) raftlockd: Option<std::path::PathBuf>,
}

#[derive(Serialize, Clone)]
pub struct RunResult {
    pub(super) workload: Workload,
    pub(super) run: usize,
    pub(super) clients: usize,
    /// Lock workloads: connections the clients shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) connections: Option<usize>,
    /// Lock workloads: whether calls were unary rather than pipelined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) unary: Option<bool>,
    pub(super) ops: u64,
    pub(super) errors: u64,
    pub(super) ops_per_sec: f64,
    pub(super) p50_ms: f64,
    pub(super) p90_ms: f64,
    pub(super) p99_ms: f64,
    pub(super) p999_ms: f64,
    pub(super) max_ms: f64,
    pub(super) lost_sessions: u64,
    /// `failover`: leaders killed, and the time from each kill to the next
    /// successful acquire (median, max; a kill never followed by one within
    /// 30 s counts as an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) failover: Option<FailoverFigures>,
    /// `scale`: memory, snapshot and restart figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) scale: Option<scale::ScaleFigures>,
    /// `soak`: the nodes sampled over the run, and what grew.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) soak: Option<soak::SoakFigures>,
    /// Lock workloads: the servers' own counters over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) server: Option<ServerFigures>,
}

/// What the servers did during a run, from their status counters: how
/// many commands the leader grouped into each log entry, and how often the
/// logs were fsynced. These explain a throughput figure (one fsync per
/// command is a different bottleneck from one per hundred).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ServerFigures {
    /// The node that proposed the most entries during the run.
    pub leader: u64,
    /// Commands it proposed.
    pub commands: u64,
    /// Log entries it grouped them into.
    pub entries: u64,
    /// `commands / entries`.
    pub commands_per_entry: f64,
    /// Its log fsyncs per second.
    pub leader_fsyncs_per_sec: f64,
    /// Entries each of its fsyncs made durable.
    pub leader_entries_per_fsync: f64,
    /// Mean log fsyncs per second of the other nodes.
    pub follower_fsyncs_per_sec: f64,
    /// The leader's process CPU time per log entry, µs.
    pub leader_cpu_us_per_entry: f64,
    /// The followers' mean process CPU time per log entry, µs.
    pub follower_cpu_us_per_entry: f64,
}

/// Every member's counters (as each node reports itself), by node id.
async fn counters(client: &Client) -> Option<Vec<raftlock_client::Status>> {
    let cluster = client.status().await.ok()?;
    let mut out = Vec::new();
    for m in &cluster.members {
        out.push(client.node_status(&m.client_addr).await.ok()?);
    }
    Some(out)
}

/// The change in counters between two readings `secs` apart; None when a
/// node is missing from either or nothing was proposed (a server too old
/// to report counters answers zeros).
fn server_figures(
    before: &[raftlock_client::Status],
    after: &[raftlock_client::Status],
    secs: f64,
) -> Option<ServerFigures> {
    let deltas: Vec<(u64, u64, u64, u64, u64, u64)> = after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.node_id == a.node_id)?;
            Some((
                a.node_id,
                a.proposed_commands.saturating_sub(b.proposed_commands),
                a.proposed_entries.saturating_sub(b.proposed_entries),
                a.log_fsyncs.saturating_sub(b.log_fsyncs),
                a.log_entries_flushed.saturating_sub(b.log_entries_flushed),
                a.process_cpu_micros.saturating_sub(b.process_cpu_micros),
            ))
        })
        .collect::<Option<_>>()?;
    let &(leader, commands, entries, fsyncs, flushed, cpu) = deltas.iter().max_by_key(|d| d.2)?;
    if entries == 0 || secs <= 0.0 {
        return None;
    }
    let followers: Vec<u64> = deltas
        .iter()
        .filter(|d| d.0 != leader)
        .map(|d| d.3)
        .collect();
    let follower_cpu: Vec<u64> = deltas
        .iter()
        .filter(|d| d.0 != leader)
        .map(|d| d.5)
        .collect();
    Some(ServerFigures {
        leader,
        commands,
        entries,
        commands_per_entry: commands as f64 / entries as f64,
        leader_fsyncs_per_sec: fsyncs as f64 / secs,
        leader_entries_per_fsync: flushed as f64 / fsyncs.max(1) as f64,
        follower_fsyncs_per_sec: followers.iter().sum::<u64>() as f64
            / followers.len().max(1) as f64
            / secs,
        // Every node writes every entry: the leader's count is the log's.
        leader_cpu_us_per_entry: cpu as f64 / entries as f64,
        follower_cpu_us_per_entry: follower_cpu.iter().sum::<u64>() as f64
            / follower_cpu.len().max(1) as f64
            / entries as f64,
    })
}

#[derive(Serialize, Clone)]
pub struct FailoverFigures {
    pub(super) kills: u64,
    pub(super) recovered: u64,
    pub(super) recovery_p50_ms: f64,
    pub(super) recovery_max_ms: f64,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    // Fail early with the usual message if the cluster is unreachable
    // (failover starts its own).
    let own_cluster = matches!(
        a.workload,
        Workload::Failover | Workload::Scale | Workload::Soak
    );
    // Kept until the end of the invocation; dropping it stops the nodes.
    let mut started = None;
    let endpoints = if a.start_cluster && !own_cluster {
        let exe = cluster::find_raftlockd(a.raftlockd.as_deref())?;
        let cluster = cluster::start(exe).await?;
        let endpoints = cluster.endpoints();
        wait_for_leader(&Client::connect(&endpoints).await?)
            .await
            .with_context(|| format!("node logs in {}", cluster.dir().display()))?;
        eprintln!("started a 3-node cluster: {}", endpoints.join(","));
        started = Some(cluster);
        endpoints
    } else {
        if !own_cluster {
            connect(cli).await?;
        }
        cli.endpoints.clone()
    };
    let mut results = Vec::new();
    println!(
        "{:<12} {:>3} {:>8} {:>7} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>5}",
        "workload",
        "run",
        "ops",
        "errors",
        "ops/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p999 ms",
        "max ms",
        "lost"
    );
    for run in 1..=a.runs.max(1) {
        let r = match a.workload {
            Workload::Keepalive => keepalive(cli, &endpoints, a, run).await?,
            Workload::Failover => failover::failover(a, run).await?,
            Workload::Scale => scale::scale(a, run).await?,
            Workload::Soak => soak::soak(a, run).await?,
            Workload::Ratelimit => rate::ratelimit(cli, &endpoints, a, run).await?,
            _ => locks(cli, &endpoints, a, run).await?,
        };
        println!(
            "{:<12} {:>3} {:>8} {:>7} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>5}",
            format!("{:?}", r.workload).to_lowercase(),
            r.run,
            r.ops,
            r.errors,
            r.ops_per_sec,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.p999_ms,
            r.max_ms,
            r.lost_sessions
        );
        if let Some(f) = &r.scale {
            println!("    {}", serde_json::to_string(f)?);
        }
        if let Some(f) = &r.soak {
            f.print();
        }
        if let Some(s) = &r.server {
            println!(
                "    leader (node {}): {} commands in {} log entries ({:.1} per entry), {:.0} fsyncs/s ({:.2} entries per fsync); followers {:.0} fsyncs/s",
                s.leader,
                s.commands,
                s.entries,
                s.commands_per_entry,
                s.leader_fsyncs_per_sec,
                s.leader_entries_per_fsync,
                s.follower_fsyncs_per_sec
            );
            println!(
                "    process CPU per log entry: leader {:.0} µs, followers {:.0} µs (mean)",
                s.leader_cpu_us_per_entry, s.follower_cpu_us_per_entry
            );
        }
        if let Some(f) = &r.failover {
            println!(
                "    leader killed {} times, next acquire after p50 {:.0} ms, max {:.0} ms ({} recovered)",
                f.kills, f.recovery_p50_ms, f.recovery_max_ms, f.recovered
            );
        }
        results.push(r);
    }
    let mut by_rate = results.clone();
    by_rate.sort_by(|x, y| x.ops_per_sec.total_cmp(&y.ops_per_sec));
    let median = &by_rate[by_rate.len() / 2];
    println!(
        "median of {} run(s): {:.0} ops/s, p50 {:.2} ms, p99 {:.2} ms",
        results.len(),
        median.ops_per_sec,
        median.p50_ms,
        median.p99_ms
    );
    println!(
        "{}",
        serde_json::to_string(&serde_json::json!({ "median": median, "runs": results }))?
    );
    drop(started);
    // Errors while a leader is down are expected of a failover run; a lost
    // session or a kill never recovered from is not.
    let failed = results.iter().any(|r| match &r.failover {
        Some(f) => r.lost_sessions > 0 || f.recovered < f.kills,
        None => r.errors > 0 || r.lost_sessions > 0,
    });
    Ok(if failed { 1 } else { 0 })
}

pub(super) fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

impl RunResult {
    /// A result with `h`'s latencies and count, no rate and nothing lost.
    pub(super) fn new(a: &Args, run: usize, h: &Histogram<u64>, errors: u64) -> RunResult {
        RunResult {
            workload: a.workload,
            run,
            clients: a.clients,
            connections: matches!(
                a.workload,
                Workload::Uncontended | Workload::Contended | Workload::Hold
            )
            .then(|| {
                a.connections
                    .unwrap_or(a.clients)
                    .clamp(1, a.clients.max(1))
            }),
            unary: matches!(
                a.workload,
                Workload::Uncontended | Workload::Contended | Workload::Hold
            )
            .then_some(a.unary),
            ops: h.len(),
            errors,
            ops_per_sec: 0.0,
            p50_ms: ms(h, 0.5),
            p90_ms: ms(h, 0.9),
            p99_ms: ms(h, 0.99),
            p999_ms: ms(h, 0.999),
            max_ms: h.max() as f64 / 1000.0,
            lost_sessions: 0,
            failover: None,
            scale: None,
            soak: None,
            server: None,
        }
    }
}

/// How a lock workload's worker reaches the cluster.
enum Via {
    /// Its session, over gRPC.
    Grpc(raftlock_client::Session),
    /// The leader's address, over the HTTP/JSON API.
    Http(String),
}

async fn locks(cli: &Cli, endpoints: &[String], a: &Args, run: usize) -> anyhow::Result<RunResult> {
    let keys = if a.workload == Workload::Contended {
        1
    } else {
        a.keys.max(1)
    };
    let picker = match a.distribution {
        Distribution::Uniform => Picker::Uniform(keys),
        Distribution::Zipfian => Picker::Zipf(
            rand_distr::Zipf::new(keys as u64, a.zipf_exponent)
                .map_err(|e| anyhow::anyhow!("--zipf-exponent {}: {e}", a.zipf_exponent))?,
        ),
    };
    let mut workers = Vec::new();
    let start = Arc::new(tokio::sync::Barrier::new(a.clients + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let budget = a.ops.map(|n| Arc::new(AtomicU64::new(n)));
    // By default one client per worker: its own HTTP/2 connection, as
    // separate service instances would have.
    let mut connections = Vec::new();
    let options = raftlock_client::Options {
        pipeline: !a.unary,
        ..super::bench_options(cli)?
    };
    for _ in 0..a
        .connections
        .unwrap_or(a.clients)
        .clamp(1, a.clients.max(1))
    {
        connections.push(Client::connect_with(endpoints, options.clone()).await?);
    }
    let http_leader = match a.http {
        true => Some(connections[0].status().await?.leader_addr),
        false => None,
    };
    for w in 0..a.clients {
        let client = &connections[w % connections.len()];
        let via = match &http_leader {
            Some(addr) => Via::Http(addr.clone()),
            None => Via::Grpc(client.session(a.ttl).await?),
        };
        let worker = Worker {
            id: w,
            prefix: format!("bench/{run}"),
            keys: picker,
            hold: (a.workload == Workload::Hold).then_some(a.hold),
            metadata: vec![b'm'; a.metadata_bytes],
            stop: stop.clone(),
            budget: budget.clone(),
            acquired: None,
        };
        let start = start.clone();
        let ttl = a.ttl;
        workers.push(tokio::spawn(async move {
            start.wait().await;
            match via {
                Via::Grpc(session) => worker.run(session).await,
                Via::Http(addr) => http::run(worker, addr, ttl).await,
            }
        }));
    }
    let admin = Client::connect_with(endpoints, super::bench_options(cli)?).await?;
    let before = counters(&admin).await;
    let began = Instant::now();
    start.wait().await;
    match &budget {
        // Workers stop by themselves once every op is taken; those still
        // in flight finish as after `--duration`.
        Some(left) => {
            while left.load(Ordering::SeqCst) > 0 && workers.iter().any(|w| !w.is_finished()) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        None => tokio::time::sleep(a.duration).await,
    }
    stop.store(true, Ordering::SeqCst);
    let after = counters(&admin).await;
    let secs = began.elapsed().as_secs_f64();
    Ok(RunResult {
        server: before
            .zip(after)
            .and_then(|(b, a)| server_figures(&b, &a, secs)),
        ..summarize(a, run, workers, began, 0).await?
    })
}

/// The result of a run from its workers' results.
pub(super) async fn summarize(
    a: &Args,
    run: usize,
    workers: Vec<tokio::task::JoinHandle<(Histogram<u64>, u64, u64)>>,
    began: Instant,
    more_errors: u64,
) -> anyhow::Result<RunResult> {
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut errors, mut lost) = (more_errors, 0);
    for w in workers {
        let (h, e, l) = w.await?;
        all.add(&h)?;
        errors += e;
        lost += l;
    }
    let secs = match a.ops {
        Some(_) if a.workload != Workload::Failover => began.elapsed().as_secs_f64(),
        _ => began.elapsed().as_secs_f64().max(a.duration.as_secs_f64()),
    };
    Ok(RunResult {
        ops_per_sec: all.len() as f64 / secs,
        lost_sessions: lost,
        ..RunResult::new(a, run, &all, errors)
    })
}

async fn keepalive(
    cli: &Cli,
    endpoints: &[String],
    a: &Args,
    run: usize,
) -> anyhow::Result<RunResult> {
    let clients: Vec<Client> = {
        let mut v = Vec::new();
        for _ in 0..a.clients.max(1) {
            v.push(Client::connect_with(endpoints, super::bench_options(cli)?).await?);
        }
        v
    };
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut sessions = Vec::with_capacity(a.sessions);
    let mut errors = 0;
    // Each client creates its sessions one at a time, all clients at once.
    let mut created = futures::stream::iter(0..a.sessions)
        .map(|i| {
            let c = clients[i % clients.len()].clone();
            async move {
                let t = Instant::now();
                (i, t, c.session(a.ttl).await)
            }
        })
        .buffer_unordered(clients.len());
    while let Some((i, t, r)) = created.next().await {
        match r {
            Ok(s) => {
                let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                sessions.push(s);
            }
            Err(e) => {
                errors += 1;
                if errors <= 3 {
                    eprintln!("session {i}: {e}");
                }
            }
        }
    }
    drop(created);
    tokio::time::sleep(a.duration).await;
    let lost = sessions.iter().filter(|s| !s.is_valid()).count() as u64;
    futures::stream::iter(&sessions)
        .for_each_concurrent(clients.len(), |s| async move {
            let _ = s.close().await;
        })
        .await;
    Ok(RunResult {
        clients: clients.len(),
        lost_sessions: lost,
        ..RunResult::new(a, run, &h, errors)
    })
}

/// The leader's id, once the cluster has one (within 30 s).
pub(super) async fn wait_for_leader(admin: &Client) -> anyhow::Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = admin.status().await {
            if s.leader_id != 0 {
                return Ok(s.leader_id);
            }
        }
        if Instant::now() > deadline {
            anyhow::bail!("no leader within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Draws lock names (as numbers `0..keys`).
#[derive(Clone, Copy)]
pub(super) enum Picker {
    Uniform(usize),
    Zipf(rand_distr::Zipf<f64>),
}

impl Picker {
    pub(super) fn pick(&self, rng: &mut impl Rng) -> u64 {
        match self {
            Picker::Uniform(keys) => rng.gen_range(0..*keys as u64),
            // Zipf draws 1..=keys; name 0 is the most likely.
            Picker::Zipf(z) => rng.sample(z) as u64 - 1,
        }
    }
}

/// One bench client: acquire + release (holding `hold` between) on random
/// names `prefix/0..keys` until `stop`.
pub(super) struct Worker {
    pub(super) id: usize,
    pub(super) prefix: String,
    pub(super) keys: Picker,
    pub(super) hold: Option<Duration>,
    /// Attached to every acquire.
    pub(super) metadata: Vec<u8>,
    pub(super) stop: Arc<AtomicBool>,
    /// `--ops`: ops not yet taken by any worker.
    pub(super) budget: Option<Arc<AtomicU64>>,
    /// For failover: records, as microseconds since the `Instant`, when the
    /// latest-sent acquire that succeeded was sent.
    pub(super) acquired: Option<(Instant, Arc<AtomicU64>)>,
}

impl Worker {
    /// Runs until stopped; the latency histogram, errors, and whether the
    /// session was lost.
    pub(super) async fn run(self, session: raftlock_client::Session) -> (Histogram<u64>, u64, u64) {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
        let mut errors = 0u64;
        let mut rng = rand::rngs::StdRng::from_entropy();
        while !self.stop.load(Ordering::SeqCst) {
            if let Some(left) = &self.budget {
                if left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_err()
                {
                    break;
                }
            }
            let key = format!("{}/{}", self.prefix, self.keys.pick(&mut rng));
            let t = Instant::now();
            let res = async {
                let g = session
                    .lock(&key)
                    .timeout(Duration::from_secs(30))
                    .metadata(self.metadata.clone())
                    .acquire()
                    .await?;
                if let Some((base, last)) = &self.acquired {
                    last.fetch_max(t.duration_since(*base).as_micros() as u64, Ordering::SeqCst);
                }
                if let Some(hold) = self.hold {
                    tokio::time::sleep(hold).await;
                }
                g.release().await
            }
            .await;
            match res {
                Ok(()) => {
                    let _ = h.record(t.elapsed().as_micros().max(1) as u64);
                }
                Err(e) => {
                    errors += 1;
                    if errors <= 3 {
                        eprintln!("worker {}: {e}", self.id);
                    }
                }
            }
        }
        let lost = u64::from(!session.is_valid());
        let _ = session.close().await;
        (h, errors, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        id: u64,
        commands: u64,
        entries: u64,
        fsyncs: u64,
        flushed: u64,
        cpu: u64,
    ) -> raftlock_client::Status {
        raftlock_client::Status {
            node_id: id,
            role: "follower".into(),
            term: 1,
            leader_id: 1,
            leader_addr: String::new(),
            commit_index: 0,
            applied_index: 0,
            members: vec![],
            learners: vec![],
            sessions: 0,
            locks: 0,
            waiters: 0,
            log_fsyncs: fsyncs,
            log_entries_flushed: flushed,
            proposed_commands: commands,
            proposed_entries: entries,
            process_cpu_micros: cpu,
            limits: None,
        }
    }

    #[test]
    fn zipfian_names_are_in_range_and_skewed() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let z = Picker::Zipf(rand_distr::Zipf::new(1000, 0.99).unwrap());
        let mut hits = vec![0u32; 1000];
        for _ in 0..100_000 {
            hits[z.pick(&mut rng) as usize] += 1;
        }
        // Name 0 is drawn far more often than a uniform draw's 100, and
        // more than name 999.
        assert!(hits[0] > 5_000, "name 0 drawn {} times", hits[0]);
        assert!(hits[0] > 10 * hits[999], "{} vs {}", hits[0], hits[999]);
        let u = Picker::Uniform(3);
        assert!((0..1000).all(|_| u.pick(&mut rng) < 3));
    }

    #[test]
    fn server_figures_are_the_leaders_change_over_the_run() {
        let before = [
            node(1, 10, 5, 100, 100, 1_000),
            node(2, 0, 0, 50, 50, 500),
            node(3, 0, 0, 60, 60, 500),
        ];
        let after = [
            node(1, 1010, 105, 200, 210, 31_000),
            node(2, 0, 0, 250, 160, 10_500),
            node(3, 0, 0, 160, 170, 20_500),
        ];
        let f = server_figures(&before, &after, 2.0).expect("figures");
        assert_eq!(
            f,
            ServerFigures {
                leader: 1,
                commands: 1000,
                entries: 100,
                commands_per_entry: 10.0,
                leader_fsyncs_per_sec: 50.0,
                leader_entries_per_fsync: 1.1,
                follower_fsyncs_per_sec: 75.0,
                leader_cpu_us_per_entry: 300.0,
                follower_cpu_us_per_entry: 150.0,
            }
        );
        // A node missing from a reading, or nothing proposed: no figures.
        assert_eq!(server_figures(&before[..2], &after, 2.0), None);
        assert_eq!(server_figures(&before, &before, 2.0), None);
    }
}
