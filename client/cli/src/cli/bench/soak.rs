//! `raftlock bench --workload soak`: what a service fleet does to a cluster
//! over weeks, compressed: `--sessions` sessions over `--connections`
//! clients taking short locks, waiting on hot locks and giving up at
//! random (waits cancelled by dropping the acquire), campaigning in
//! elections, taking rate-limit tokens, a tenth of them ending and starting
//! afresh, and `--watchers` watch streams opened and dropped; the cluster
//! (3 nodes of its own) hands leadership on every `--transfer-every`.
//!
//! Every `--sample-every` it prints each node's resident memory, open
//! descriptors and runtime tasks, and the state it keeps (sessions, locks,
//! waiters, recorded answers, registered waits). When the load stops and
//! the clients close, it waits for the nodes to let go of what the load
//! held. The run fails when a node's memory at the end is more than
//! `--max-rss-growth` percent above its own at `--reference-at` (by default
//! a sixth of the way in: minute 5 of 30), or when descriptors,
//! tasks or state are not back to where they were before the load (read
//! after 30 s of the same load, stopped, so that what a node starts once,
//! such as its links to the others when it first leads, is not counted as
//! growth).

use super::cluster::{find_raftlockd, mib, open_fds, rss, rss_anon, sample, scrape, start};
use super::{Args, RunResult};
use anyhow::Context;
use futures::StreamExt;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use raftlock_client::{Client, Error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Names each kind of call spreads over: enough that most short locks are
/// free, few enough that hot locks always have a queue.
const SHORT_LOCKS: u64 = 1_000;
const HOT_LOCKS: u64 = 8;
const ELECTIONS: u64 = 10;
const LIMITS: u64 = 5;
/// Every this many sessions, one campaigns instead of locking.
const CAMPAIGNER_EVERY: usize = 20;
/// Every this many sessions, one ends after 10–60 s and starts afresh.
const CHURN_EVERY: usize = 10;
/// Mean pause between one session's calls: 2,000 sessions make about
/// 800 calls a second, a load the cluster carries with room to spare, so
/// what grows is what the calls leave behind, not a queue.
const MEAN_THINK: Duration = Duration::from_millis(2_500);
/// The load run before the baseline is taken.
const WARM_UP: Duration = Duration::from_secs(30);
/// How long the nodes get to let go of what the load held once it stops.
const SETTLE: Duration = Duration::from_secs(60);

/// One node, as sampled.
#[derive(Serialize, Clone, Debug, Default)]
pub struct NodeSample {
    node: u64,
    /// Whether it led when sampled: a leader holds more (the waits it
    /// answers, the streams it serves), so memory is compared by role.
    leader: bool,
    rss_mib: f64,
    /// The anonymous part of `rss_mib` (heap and stacks, not the binary's
    /// pages), and how much of that is in transparent huge pages, which
    /// count 2 MiB resident however little of them is in use.
    anon_mib: f64,
    huge_mib: f64,
    fds: u64,
    tasks: u64,
    sessions: u64,
    locks: u64,
    waiters: u64,
    recorded_answers: u64,
    waits_registered: u64,
    /// The last snapshot this node wrote or installed: the replicated
    /// state's size, which per-session bookkeeping would make grow.
    snapshot_kib: u64,
}

/// Every node at one moment of the run.
#[derive(Serialize, Clone, Debug)]
pub struct Sample {
    /// Seconds since the load started (negative: before it).
    at_s: f64,
    /// `idle` (before the load), `load`, `reference` (a sixth of the way
    /// in), `end` (as the load stops), `settled` (after it).
    label: &'static str,
    nodes: Vec<NodeSample>,
}

/// What `soak` measured.
#[derive(Serialize, Clone)]
pub struct SoakFigures {
    sessions: usize,
    connections: usize,
    watchers: usize,
    /// Calls made, by what they were and how they ended.
    calls: BTreeMap<String, u64>,
    leader_changes: u64,
    samples: Vec<Sample>,
    /// What grew or was not given back; empty when the run passed.
    failures: Vec<String>,
}

impl SoakFigures {
    /// One line per node for the samples that tell the story.
    pub fn print(&self) {
        for s in &self.samples {
            if !matches!(s.label, "idle" | "reference" | "end" | "settled") {
                continue;
            }
            for n in &s.nodes {
                println!(
                    "    {:<9} {:>7.0}s node {} rss {:>6.1} MiB (anon {:>6.1}, huge {:>6.1}) fds {:>4} tasks {:>5} sessions {:>5} locks {:>5} waiters {:>4} answers {:>5} waits {:>4}",
                    s.label, s.at_s, n.node, n.rss_mib, n.anon_mib, n.huge_mib, n.fds, n.tasks, n.sessions, n.locks, n.waiters, n.recorded_answers, n.waits_registered
                );
            }
        }
        for f in &self.failures {
            println!("    GROWTH: {f}");
        }
    }
}

/// Counts of calls by kind and outcome, shared by the workers.
#[derive(Default)]
struct Calls {
    counts: Mutex<BTreeMap<String, u64>>,
    latency: Mutex<Option<Histogram<u64>>>,
}

impl Calls {
    fn count(&self, what: &str, outcome: &str) {
        *self
            .counts
            .lock()
            .entry(format!("{what} {outcome}"))
            .or_default() += 1;
    }

    fn error(&self, what: &str, e: &Error) {
        // The variant's name: a kind of outcome, not a message.
        let name = format!("{e:?}");
        let kind = name.split(['(', ' ', '{']).next().unwrap_or("error");
        self.count(what, &format!("error:{kind}"));
    }

    fn took(&self, t: Instant) {
        let mut h = self.latency.lock();
        if let Some(h) = h.as_mut() {
            let _ = h.record(t.elapsed().as_micros().max(1) as u64);
        }
    }

    /// Calls that ended in an error no live caller should see.
    fn errors(&self) -> u64 {
        self.counts
            .lock()
            .iter()
            .filter(|(k, _)| k.contains("error:"))
            .map(|(_, v)| v)
            .sum()
    }
}

/// Sleeps `d` unless the run stops first; whether it stopped.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    let stopped = tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    stopped || *stop.borrow()
}

fn think(rng: &mut StdRng) -> Duration {
    MEAN_THINK.mul_f64(rng.gen_range(0.0..2.0))
}

/// One session's life (or, for a churning one, a series of lives).
async fn worker(
    client: Client,
    i: usize,
    ttl: Duration,
    calls: Arc<Calls>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = StdRng::seed_from_u64(i as u64);
    let campaigner = i.is_multiple_of(CAMPAIGNER_EVERY);
    let churns = i % CHURN_EVERY == 1;
    // Sessions start over the first ten seconds, not in one burst.
    if pause(&mut stop, Duration::from_millis(rng.gen_range(0..10_000))).await {
        return;
    }
    loop {
        let session = match client.session(ttl).await {
            Ok(s) => s,
            Err(e) => {
                calls.error("session", &e);
                if pause(&mut stop, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
        };
        calls.count("session", "created");
        let ends = churns.then(|| Instant::now() + Duration::from_secs(rng.gen_range(10..60)));
        loop {
            if pause(&mut stop, think(&mut rng)).await {
                break;
            }
            if ends.is_some_and(|e| Instant::now() > e) {
                break;
            }
            if !session.is_valid() {
                calls.count("session", "lost");
                break;
            }
            if campaigner {
                campaign(&session, &mut rng, &calls, &mut stop).await;
                continue;
            }
            match rng.gen_range(0..100) {
                0..=44 => short_lock(&session, &mut rng, &calls).await,
                45..=69 => cancelled_wait(&session, &mut rng, &calls).await,
                _ => rate_take(&client, &mut rng, &calls).await,
            }
        }
        match session.close().await {
            Ok(()) => calls.count("session", "closed"),
            Err(e) => calls.error("session close", &e),
        }
        if *stop.borrow() {
            return;
        }
    }
}

async fn short_lock(session: &raftlock_client::Session, rng: &mut StdRng, calls: &Calls) {
    let name = format!("soak/short/{}", rng.gen_range(0..SHORT_LOCKS));
    let t = Instant::now();
    match session.lock(name).try_acquire().await {
        Ok(Some(g)) => {
            calls.took(t);
            calls.count("short lock", "held");
            tokio::time::sleep(Duration::from_millis(rng.gen_range(0..20))).await;
            if let Err(e) = g.release().await {
                calls.error("release", &e);
            }
        }
        Ok(None) => calls.count("short lock", "busy"),
        Err(e) => calls.error("short lock", &e),
    }
}

/// A wait on a lock with a queue, given up after a random while: the
/// acquire future is dropped, which cancels the wait on the server.
async fn cancelled_wait(session: &raftlock_client::Session, rng: &mut StdRng, calls: &Calls) {
    let name = format!("soak/hot/{}", rng.gen_range(0..HOT_LOCKS));
    let patience = Duration::from_millis(rng.gen_range(20..600));
    let acquire = session.lock(name).timeout(Duration::from_secs(5)).acquire();
    match tokio::time::timeout(patience, acquire).await {
        Err(_) => calls.count("wait", "cancelled"),
        Ok(Ok(g)) => {
            calls.count("wait", "held");
            tokio::time::sleep(Duration::from_millis(10)).await;
            if let Err(e) = g.release().await {
                calls.error("release", &e);
            }
        }
        Ok(Err(Error::WaitTimedOut(_))) => calls.count("wait", "timed out"),
        Ok(Err(e)) => calls.error("wait", &e),
    }
}

async fn rate_take(client: &Client, rng: &mut StdRng, calls: &Calls) {
    let limit = client
        .rate_limit(format!("soak/rate/{}", rng.gen_range(0..LIMITS)))
        .rate(50, Duration::from_secs(1))
        .burst(20);
    match limit.try_take(1).await {
        Ok(a) if a.admitted => calls.count("rate take", "admitted"),
        Ok(_) => calls.count("rate take", "refused"),
        Err(e) => calls.error("rate take", &e),
    }
}

/// Stands in an election, sometimes giving up the wait; a leader proclaims,
/// leads a while and resigns.
async fn campaign(
    session: &raftlock_client::Session,
    rng: &mut StdRng,
    calls: &Calls,
    stop: &mut watch::Receiver<bool>,
) {
    let name = format!("soak/election/{}", rng.gen_range(0..ELECTIONS));
    let patience = Duration::from_millis(rng.gen_range(500..8_000));
    let candidate = session
        .election(name)
        .timeout(Duration::from_secs(10))
        .campaign(format!("candidate {}", session.id()));
    match tokio::time::timeout(patience, candidate).await {
        Err(_) => calls.count("campaign", "cancelled"),
        Ok(Ok(leading)) => {
            calls.count("campaign", "elected");
            if let Err(e) = leading.proclaim("leading").await {
                calls.error("proclaim", &e);
            }
            pause(stop, Duration::from_millis(rng.gen_range(500..5_000))).await;
            if let Err(e) = leading.resign().await {
                calls.error("resign", &e);
            }
        }
        Ok(Err(Error::WaitTimedOut(_))) => calls.count("campaign", "timed out"),
        Ok(Err(e)) => calls.error("campaign", &e),
    }
}

/// A watch stream read for a few seconds, dropped, and opened again.
async fn watcher(client: Client, i: usize, calls: Arc<Calls>, mut stop: watch::Receiver<bool>) {
    let mut rng = StdRng::seed_from_u64(1_000_000 + i as u64);
    while !*stop.borrow() {
        let mut events = Box::pin(client.watch("soak/"));
        calls.count("watch", "opened");
        let until = tokio::time::sleep(Duration::from_millis(rng.gen_range(1_000..20_000)));
        tokio::pin!(until);
        loop {
            tokio::select! {
                _ = &mut until => break,
                _ = stop.wait_for(|s| *s) => return,
                batch = events.next() => match batch {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => { calls.error("watch", &e); break; }
                    None => break,
                },
            }
        }
    }
}

/// The load: its clients, and a task per session and per watcher.
struct Load {
    clients: Vec<Client>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    async fn start(endpoints: &[String], a: &Args, calls: Arc<Calls>) -> anyhow::Result<Load> {
        let connections = a.connections.unwrap_or(8).max(1);
        let mut clients = Vec::new();
        for _ in 0..connections {
            clients.push(Client::connect(endpoints).await?);
        }
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        for i in 0..a.sessions {
            tasks.push(tokio::spawn(worker(
                clients[i % connections].clone(),
                i,
                a.ttl,
                calls.clone(),
                stopped.clone(),
            )));
        }
        for i in 0..a.watchers {
            tasks.push(tokio::spawn(watcher(
                clients[i % connections].clone(),
                i,
                calls.clone(),
                stopped.clone(),
            )));
        }
        Ok(Load {
            clients,
            stop,
            tasks,
        })
    }

    /// Every worker closes its session, every watch is dropped, and the
    /// clients go with them.
    async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        drop(self.clients);
    }
}

async fn sample_nodes(cluster: &super::cluster::LocalCluster) -> Vec<NodeSample> {
    let mut out = Vec::new();
    for id in 1..=cluster.nodes().len() as u64 {
        let node = cluster.node(id);
        let text = match node.metrics_addr.as_deref() {
            Some(addr) => scrape(addr).await.unwrap_or_default(),
            None => String::new(),
        };
        let m = |name: &str| sample(&text, name).unwrap_or(0.0) as u64;
        let anon = rss_anon(node.pid());
        out.push(NodeSample {
            node: id,
            leader: m("raftlock_raft_is_leader") == 1,
            rss_mib: mib(rss(node.pid()).0),
            anon_mib: mib(anon.0),
            huge_mib: mib(anon.1),
            fds: open_fds(node.pid()),
            tasks: m("raftlock_runtime_tasks"),
            sessions: m("raftlock_sessions"),
            locks: m("raftlock_locks"),
            waiters: m("raftlock_waiters"),
            recorded_answers: m("raftlock_recorded_answers"),
            waits_registered: m("raftlock_waits_registered"),
            snapshot_kib: m("raftlock_snapshot_bytes") / 1024,
        });
    }
    out
}

fn print_sample(s: &Sample) {
    let nodes: Vec<String> = s
        .nodes
        .iter()
        .map(|n| {
            format!(
                "n{}{} {:.0}MiB (anon {:.0} huge {:.0}) {}fd {}t s{} l{} w{} a{} r{} snap {}KiB",
                n.node,
                if n.leader { "*" } else { "" },
                n.rss_mib,
                n.anon_mib,
                n.huge_mib,
                n.fds,
                n.tasks,
                n.sessions,
                n.locks,
                n.waiters,
                n.recorded_answers,
                n.waits_registered,
                n.snapshot_kib
            )
        })
        .collect();
    eprintln!("soak {:>6.0}s {:<9} {}", s.at_s, s.label, nodes.join(" | "));
}

/// What grew or was not given back, comparing the samples.
fn failures(samples: &[Sample], max_rss_growth: f64) -> Vec<String> {
    let find = |label: &str| samples.iter().find(|s| s.label == label);
    let mut out = Vec::new();
    let (Some(idle), Some(reference), Some(end), Some(settled)) = (
        find("idle"),
        find("reference"),
        find("end"),
        find("settled"),
    ) else {
        return vec!["the run ended before its samples were taken".into()];
    };
    // Each node against itself. The run hands leadership back to the
    // reference's leader for its last interval, so each node ends in the
    // role it had then: a leader holds more than a follower (the waits it
    // answers, the streams it serves), which is not growth.
    for e in &end.nodes {
        let Some(r) = reference.nodes.iter().find(|n| n.node == e.node) else {
            continue;
        };
        if e.rss_mib > r.rss_mib * (1.0 + max_rss_growth / 100.0) {
            let role = |leader: bool| if leader { "leading" } else { "following" };
            out.push(format!(
                "node {} ({}): RSS {:.1} MiB at the end, {:.1} MiB ({}) at {:.0} s (more than {max_rss_growth}% up)",
                e.node,
                role(e.leader),
                e.rss_mib,
                r.rss_mib,
                role(r.leader),
                reference.at_s
            ));
        }
    }
    for i in &idle.nodes {
        let Some(s) = settled.nodes.iter().find(|n| n.node == i.node) else {
            continue;
        };
        let mut back = |what: &str, before: u64, after: u64| {
            if after > before {
                out.push(format!(
                    "node {}: {what} {after} after the load, {before} before it",
                    i.node
                ));
            }
        };
        back("open descriptors", i.fds, s.fds);
        back("runtime tasks", i.tasks, s.tasks);
        back("sessions", i.sessions, s.sessions);
        back("waiters", i.waiters, s.waiters);
        back("recorded answers", i.recorded_answers, s.recorded_answers);
        back("registered waits", i.waits_registered, s.waits_registered);
    }
    out
}

/// Whether `after` is back to `before` on every count that must return.
fn given_back(before: &[NodeSample], after: &[NodeSample]) -> bool {
    before.iter().all(|b| {
        after.iter().any(|a| {
            a.node == b.node
                && a.fds <= b.fds
                && a.tasks <= b.tasks
                && a.sessions <= b.sessions
                && a.waiters <= b.waiters
                && a.recorded_answers <= b.recorded_answers
                && a.waits_registered <= b.waits_registered
        })
    })
}

pub async fn soak(a: &Args, run: usize) -> anyhow::Result<RunResult> {
    let exe = find_raftlockd(a.raftlockd.as_deref())?;
    let cluster = start(exe).await?;
    let endpoints = cluster.endpoints();
    let logs = cluster.dir().display().to_string();
    let began = Instant::now();
    // The baseline is taken after a short run of the same load, stopped: a
    // node starts some things once and keeps them (its links to the others
    // the first time it leads, their tasks), and those are not growth. The
    // bench's own connections count on the nodes too, so none stays open
    // across the baseline.
    let warm_up = Load::start(&endpoints, a, Arc::new(Calls::default())).await?;
    for to in [2, 3, 1] {
        tokio::time::sleep(WARM_UP / 3).await;
        let admin = Client::connect(&endpoints).await?;
        admin
            .transfer_leader(to)
            .await
            .with_context(|| format!("moving leadership to n{to}; node logs in {logs}"))?;
    }
    warm_up.stop().await;
    // Once it holds still: the gauges are refreshed every second, and
    // sessions, links and their tasks take a moment to end.
    let mut idle = sample_nodes(&cluster).await;
    let mut still = 0;
    let settling = Instant::now();
    while still < 3 && settling.elapsed() < SETTLE {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let next = sample_nodes(&cluster).await;
        still = if given_back(&idle, &next) && given_back(&next, &idle) {
            still + 1
        } else {
            0
        };
        idle = next;
    }
    let mut samples = vec![Sample {
        at_s: 0.0,
        label: "idle",
        nodes: idle,
    }];
    print_sample(&samples[0]);

    let calls = Arc::new(Calls {
        latency: Mutex::new(Some(Histogram::new_with_bounds(1, 60_000_000, 3)?)),
        ..Default::default()
    });
    let load_run = Load::start(&endpoints, a, calls.clone()).await?;
    let connections = load_run.clients.len();
    let load = Instant::now();
    let reference_at = a.reference_at.unwrap_or(a.duration / 6);
    let every = a
        .sample_every
        .min(a.duration / 4)
        .max(Duration::from_secs(1));
    let mut next_sample = load + every;
    let mut reference_taken = false;
    let mut next_transfer = load + a.transfer_every;
    let mut leader_changes = 0u64;
    let mut transfers = 0u64;
    // The node that led at the reference, given leadership back for the
    // last interval so that every node ends in the role it had then.
    let mut reference_leader = None;
    let mut handed_back = false;
    while load.elapsed() < a.duration {
        tokio::time::sleep(Duration::from_millis(200)).await;
        // No other transfer in the last sample interval: the end sample
        // then sees a leader settled in its role, not one handing over.
        let last_interval = load.elapsed() + every >= a.duration;
        let hand_back = last_interval && !handed_back && reference_leader.is_some();
        if hand_back || (Instant::now() >= next_transfer && !last_interval) {
            handed_back |= hand_back;
            next_transfer += a.transfer_every;
            let admin = Client::connect(&endpoints).await?;
            let leader = admin.status().await.map(|s| s.leader_id).unwrap_or(0);
            let to = match reference_leader {
                Some(r) if hand_back => r,
                _ => (leader % 3) + 1,
            };
            if to == leader {
                continue;
            }
            transfers += 1;
            match admin.transfer_leader(to).await {
                Ok(now) => {
                    leader_changes += u64::from(now != leader);
                    eprintln!("soak: leadership n{leader} -> n{now}");
                }
                Err(e) => eprintln!("soak: transfer {transfers} to n{to} failed: {e}"),
            }
        }
        let reference_due = !reference_taken && load.elapsed() >= reference_at;
        if Instant::now() >= next_sample || reference_due {
            if Instant::now() >= next_sample {
                next_sample += every;
            }
            let label = if reference_due {
                reference_taken = true;
                "reference"
            } else {
                "load"
            };
            let s = Sample {
                at_s: load.elapsed().as_secs_f64().round(),
                label,
                nodes: sample_nodes(&cluster).await,
            };
            if label == "reference" {
                reference_leader = s.nodes.iter().find(|n| n.leader).map(|n| n.node);
            }
            print_sample(&s);
            samples.push(s);
        }
    }
    let end = Sample {
        at_s: load.elapsed().as_secs_f64().round(),
        label: "end",
        nodes: sample_nodes(&cluster).await,
    };
    print_sample(&end);
    samples.push(end);

    load_run.stop().await;
    let stopped = Instant::now();
    let idle = samples[0].nodes.clone();
    let mut settled = sample_nodes(&cluster).await;
    while !given_back(&idle, &settled) && stopped.elapsed() < SETTLE {
        tokio::time::sleep(Duration::from_secs(1)).await;
        settled = sample_nodes(&cluster).await;
    }
    let s = Sample {
        at_s: load.elapsed().as_secs_f64().round(),
        label: "settled",
        nodes: settled,
    };
    print_sample(&s);
    samples.push(s);
    let failures = failures(&samples, a.max_rss_growth);
    let counts = calls.counts.lock().clone();
    let lost = counts.get("session lost").copied().unwrap_or(0);
    let calls_made: u64 = counts.values().sum();
    // A call may fail while leadership moves (a retry that runs out of
    // time on a starved machine); more than one in a thousand is a fault.
    let call_errors = calls.errors();
    let mut failures = failures;
    if call_errors * 1_000 > calls_made {
        failures.push(format!(
            "{call_errors} of {calls_made} calls failed (more than 1 in 1,000)"
        ));
    }
    let errors = failures.len() as u64;
    let h = calls.latency.lock().take().context("latency histogram")?;
    eprintln!(
        "soak: {calls_made} calls in {:.0} s; node logs in {logs}",
        began.elapsed().as_secs_f64()
    );
    Ok(RunResult {
        ops_per_sec: calls_made as f64 / a.duration.as_secs_f64(),
        lost_sessions: lost,
        soak: Some(SoakFigures {
            sessions: a.sessions,
            connections,
            watchers: a.watchers,
            calls: counts,
            leader_changes,
            samples,
            failures,
        }),
        ..RunResult::new(a, run, &h, errors)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(rss_mib: f64, fds: u64, tasks: u64, answers: u64) -> NodeSample {
        NodeSample {
            node: 1,
            rss_mib,
            fds,
            tasks,
            recorded_answers: answers,
            ..Default::default()
        }
    }

    fn run(reference: f64, end: f64, settled: NodeSample) -> Vec<String> {
        let s = |label, n: NodeSample| Sample {
            at_s: 0.0,
            label,
            nodes: vec![n],
        };
        failures(
            &[
                s("idle", node(20.0, 40, 30, 0)),
                s("reference", node(reference, 90, 400, 50)),
                s("end", node(end, 90, 400, 50)),
                s("settled", settled),
            ],
            10.0,
        )
    }

    #[test]
    fn growth_and_what_is_not_given_back_fail_the_run() {
        assert!(run(100.0, 109.0, node(60.0, 40, 30, 0)).is_empty());
        let grown = run(100.0, 111.0, node(60.0, 40, 30, 0));
        assert_eq!(grown.len(), 1, "{grown:?}");
        assert!(grown[0].contains("RSS"));
        let kept = run(100.0, 100.0, node(60.0, 41, 31, 2));
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(!given_back(
            &[node(0.0, 40, 30, 0)],
            &[node(0.0, 41, 30, 0)]
        ));
        assert!(given_back(&[node(0.0, 40, 30, 0)], &[node(9.0, 39, 30, 0)]));
    }

    #[test]
    fn each_node_is_compared_with_itself_at_the_reference() {
        let nodes = |n: [f64; 3]| {
            n.iter()
                .enumerate()
                .map(|(i, &rss_mib)| NodeSample {
                    node: i as u64 + 1,
                    leader: i == 1,
                    rss_mib,
                    ..Default::default()
                })
                .collect()
        };
        let run = |end: [f64; 3]| {
            let s = |label, n| Sample {
                at_s: 300.0,
                label,
                nodes: n,
            };
            let idle = [64.1, 64.7, 58.1];
            failures(
                &[
                    s("idle", nodes(idle)),
                    s("reference", nodes([63.6, 69.2, 61.3])),
                    s("end", nodes(end)),
                    s("settled", nodes(idle)),
                ],
                10.0,
            )
        };
        // Node 3 ends above node 1's reference figure, but within 10 % of
        // its own.
        assert!(run([69.9, 76.1, 67.4]).is_empty());
        let grown = run([70.1, 76.1, 61.3]);
        assert_eq!(grown.len(), 1, "{grown:?}");
        assert!(
            grown[0].starts_with("node 1 (following)") && grown[0].contains("63.6"),
            "{grown:?}"
        );
        let leader = run([63.6, 76.2, 61.3]);
        assert_eq!(leader.len(), 1, "{leader:?}");
        assert!(leader[0].starts_with("node 2 (leading)"), "{leader:?}");
    }
}
