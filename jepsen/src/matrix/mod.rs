//! The storage fault matrix: protocol-aware recovery's method (Alagappan
//! et al., FAST 2018) on raftlock's own files. A 3-node cluster runs under
//! load; for each case one follower is stopped, one file of its data dir
//! is damaged at one 4 KiB block (zeroed, a bit flipped, the file cut
//! there, or reads of it failing with EIO through the FUSE layer every
//! data dir is on), or removed, or the whole dir is lost, and the node is
//! started again. Each case runs alone, and crossed with a second
//! failure: another member crashed and stale, so that the damaged node
//! and the stale one are the only two up until the third comes back.
//!
//! Judged: no token issued twice (every grant's token is above every token
//! acknowledged before its request), no acknowledged grant lost (a lock
//! taken at the start stays held), the damaged node either refuses to
//! start with a message or rejoins and catches up, and, alone, the healthy
//! pair never stops granting for longer than two election timeouts.

pub mod fault;
mod load;
pub mod table;

use crate::faultfs::{FaultFs, Mounted, Switches};
use fault::{Kind, Target};
use load::Load;
use raftlock_local::{LocalCluster, Options};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Two election timeouts at their longest (`--election-timeout-ms` 300,
/// randomised up to twice that): the longest the healthy pair may go
/// without a grant while the damaged node is down or rejoining.
pub const UNAVAILABLE_LIMIT: Duration = Duration::from_millis(1200);

/// Offsets per file in the full form.
pub const FULL_SLOTS: usize = 16;

/// One case: a fault on a file of the target node, with or without a
/// stale peer.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Case {
    /// Which file.
    pub target: Target,
    /// Which fault.
    pub kind: Kind,
    /// Which of the file's sampled offsets.
    pub slot: usize,
    /// Another member is down and stale while this one is damaged.
    pub stale_peer: bool,
}

/// What the damaged node did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reaction {
    /// Started and caught up as a full member.
    Restarted,
    /// Started, set what it lost aside, and rejoined.
    Rejoined,
    /// Refused to start with a message; rebuilt by removing its data dir.
    Refused,
    /// The fault had nothing to act on (an offset past a short file, a
    /// file this data dir does not have yet).
    NotApplicable,
}

/// One case's result.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// What was done to the file.
    pub fault: String,
    /// What the node did.
    pub reaction: Reaction,
    /// The node's message when it refused.
    pub message: Option<String>,
    /// What went wrong: tokens reissued, grants lost, a node stuck, the
    /// healthy pair unavailable too long.
    pub violations: Vec<String>,
    /// Alone: the longest the healthy pair went without a grant.
    pub longest_gap_ms: Option<u64>,
    /// How long the case took.
    pub took_ms: u64,
}

/// Every case of the full form.
pub fn full_plan() -> Vec<Case> {
    let mut plan = Vec::new();
    for stale_peer in [false, true] {
        for target in Target::FILES {
            for kind in Kind::AT_OFFSETS {
                for slot in 0..FULL_SLOTS {
                    plan.push(Case {
                        target,
                        kind,
                        slot,
                        stale_peer,
                    });
                }
            }
            plan.push(Case {
                target,
                kind: Kind::Remove,
                slot: 0,
                stale_peer,
            });
        }
        plan.push(Case {
            target: Target::DataDir,
            kind: Kind::Lost,
            slot: 0,
            stale_peer,
        });
    }
    plan
}

/// The full form's cases in an order drawn by `seed`, beginning with the
/// whole data dir lost beside a stale peer (the case of a blank node that
/// votes): run until `n` of them apply ([`Config::want`]).
pub fn sampled_plan(seed: u64) -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(seed);
    let first = Case {
        target: Target::DataDir,
        kind: Kind::Lost,
        slot: 0,
        stale_peer: true,
    };
    let mut rest: Vec<Case> = full_plan()
        .into_iter()
        .filter(|c| !(c.kind == Kind::Lost && c.stale_peer))
        .collect();
    rest.shuffle(&mut rng);
    std::iter::once(first).chain(rest).collect()
}

/// The matrix's settings.
pub struct Config {
    /// The `raftlockd` binary.
    pub raftlockd: PathBuf,
    /// Where the run's folder goes.
    pub out: PathBuf,
    /// The cases, in order.
    pub plan: Vec<Case>,
    /// Stop once this many cases applied (`None`: run them all).
    pub want: Option<usize>,
    /// Seeds the bytes flipped.
    pub seed: u64,
}

/// Runs every case of `cfg.plan` on one cluster; writes `cases.jsonl` and
/// `table.txt` into the run's folder and returns it with the results.
pub async fn run(cfg: &Config) -> anyhow::Result<(PathBuf, Vec<CaseResult>)> {
    let dir = cfg.out.join(format!(
        "matrix-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    ));
    std::fs::create_dir_all(&dir)?;
    // Each data dir on a FUSE passthrough of its own, for read errors;
    // unmounted after the nodes are gone (locals drop in reverse order).
    let disks = match mount_disks(&dir) {
        Ok(d) => Some(d),
        Err(e) if std::env::var_os("RAFTLOCK_REQUIRE_FUSE").is_some() => {
            anyhow::bail!("FUSE cannot mount here, and RAFTLOCK_REQUIRE_FUSE is set: {e:#}")
        }
        Err(e) => {
            eprintln!("read errors are not injected: {e:#}");
            None
        }
    };
    let switches: Option<Vec<Arc<Switches>>> = disks
        .as_ref()
        .map(|d| d.iter().map(|(s, _)| s.clone()).collect());
    let mut options = Options::new(&cfg.raftlockd, 3);
    options.dir = Some(dir.join("cluster"));
    options.metrics = false;
    options.log_filter = "info,openraft=warn".into();
    // A stopped node is a crashed process, not a power loss: the page
    // cache keeps what it wrote, as in protocol-aware recovery's model of
    // one fault at a time (the disk nemesis of `run` combines the two).
    // Small segments and frequent snapshots: within seconds of load a
    // data dir has several segments, a snapshot and a purged log.
    // A snapshot every 8000 entries keeps two to five segments, so that
    // there is usually a middle one.
    for a in ["--wal-segment-mb", "1", "--snapshot-every", "8000"] {
        options.args.push(a.into());
    }
    let mut cluster = LocalCluster::start(options).await?;
    let load = Load::start(cluster.endpoints(), 4).await?;
    // Enough log for four segments and a snapshot before the first case.
    load.wait_for_grants(0, 4500, Duration::from_secs(180))
        .await;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut results = Vec::new();
    let mut lines = String::new();
    for (i, case) in cfg.plan.iter().enumerate() {
        let r = run_case(&mut cluster, &load, switches.as_deref(), *case, &mut rng).await;
        let r = match r {
            Ok(r) => r,
            Err(e) => CaseResult {
                case: *case,
                fault: String::new(),
                reaction: Reaction::NotApplicable,
                message: None,
                violations: vec![format!("the case could not run: {e:#}")],
                longest_gap_ms: None,
                took_ms: 0,
            },
        };
        if r.reaction == Reaction::NotApplicable && r.violations.is_empty() {
            results.push(r);
            continue;
        }
        eprintln!(
            "case {}: {} {} slot {}{}: {:?}{}",
            i + 1,
            case.target.label(),
            case.kind.label(),
            case.slot,
            if case.stale_peer {
                " beside a stale peer"
            } else {
                ""
            },
            r.reaction,
            if r.violations.is_empty() {
                String::new()
            } else {
                format!(" VIOLATION: {}", r.violations.join("; "))
            }
        );
        lines.push_str(&serde_json::to_string(&r)?);
        lines.push('\n');
        std::fs::write(dir.join("cases.jsonl"), &lines)?;
        let stuck = r.violations.iter().any(|v| v.contains("could not run"));
        results.push(r);
        if stuck {
            // A cluster the matrix could not bring back judges nothing
            // more.
            break;
        }
        let applied = results
            .iter()
            .filter(|r| r.reaction != Reaction::NotApplicable)
            .count();
        if cfg.want.is_some_and(|n| applied >= n) {
            break;
        }
    }
    load.stop().await;
    std::fs::write(dir.join("table.txt"), table::render(&results))?;
    Ok((dir, results))
}

/// Mounts a [`FaultFs`] on each node's data dir (`cluster/node-N`, the
/// files in `backing/node-N`).
fn mount_disks(dir: &Path) -> anyhow::Result<Vec<(Arc<Switches>, Mounted)>> {
    let mut disks = Vec::new();
    for id in 1..=3 {
        let backing = dir.join("backing").join(format!("node-{id}"));
        let mnt = dir.join("cluster").join(format!("node-{id}"));
        std::fs::create_dir_all(&backing)?;
        std::fs::create_dir_all(&mnt)?;
        let switches = Arc::new(Switches::default());
        let session = FaultFs::mount(&backing, &mnt, switches.clone()).map_err(|e| {
            anyhow::anyhow!("cannot mount a FUSE file system on {}: {e}", mnt.display())
        })?;
        disks.push((switches, session));
    }
    Ok(disks)
}

/// Node `id`'s standing, from its data dir (`None` while it has none).
fn standing(data_dir: &Path) -> Option<String> {
    let bytes = std::fs::read(data_dir.join("raftlock.json")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(
        v.get("standing")
            .and_then(|s| s.as_str())
            .unwrap_or("member")
            .to_owned(),
    )
}

/// Waits until every node runs, one leads, and every node is a full
/// member that has applied what the leader had committed when the wait
/// began. `focus` is the node the message is about.
async fn wait_healthy(
    cluster: &mut LocalCluster,
    focus: u64,
    within: Duration,
) -> anyhow::Result<()> {
    let until = Instant::now() + within;
    let mut target_commit = None;
    loop {
        if let Some((n, status)) = cluster.any_exited() {
            anyhow::bail!(
                "node {n} exited ({status})\n{}",
                tail(&cluster.log_of(n), 5)
            );
        }
        if target_commit.is_none() {
            if let Some(l) = cluster.leader().await {
                target_commit = cluster.status(l).await.ok().map(|s| s.commit_index);
            }
        }
        if let Some(commit) = target_commit {
            let mut ready = true;
            for n in 1..=3 {
                ready &= standing(&cluster.node(n).data_dir).as_deref() == Some("member")
                    && cluster
                        .status(n)
                        .await
                        .is_ok_and(|s| s.applied_index >= commit);
            }
            if ready {
                return Ok(());
            }
        }
        if Instant::now() >= until {
            anyhow::bail!(
                "node {focus} did not catch up within {within:?} (standing {:?})\n{}",
                standing(&cluster.node(focus).data_dir),
                tail(&cluster.log_of(focus), 8)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The line of a node's log that says why it would not run.
fn refusal(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    // anyhow's report: "Error: ..." and its causes, up to the backtrace.
    let text = match lines.iter().rposition(|l| l.starts_with("Error: ")) {
        Some(at) => lines[at..]
            .iter()
            .take_while(|l| !l.starts_with("Stack backtrace"))
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && *l != "Caused by:")
            .collect::<Vec<_>>()
            .join(" / "),
        None => lines
            .iter()
            .rev()
            .find(|l| {
                let lower = l.to_lowercase();
                !l.starts_with(char::is_whitespace)
                    && (lower.contains("error")
                        || lower.contains("refus")
                        || lower.contains("damaged"))
            })
            .or(lines.last())
            .map_or("(no message)".to_owned(), |l| l.to_string()),
    };
    text.chars().take(400).collect()
}

/// Starts the damaged node and follows it until it caught up or exited.
/// Returns whether it refused, with its message.
async fn follow_restart(
    cluster: &mut LocalCluster,
    id: u64,
    log_from: usize,
    within: Duration,
    peers_up: bool,
) -> anyhow::Result<Option<String>> {
    let until = Instant::now() + within;
    loop {
        if cluster.exited(id).is_some() {
            return Ok(Some(refusal(
                cluster.log_of(id).get(log_from..).unwrap_or(""),
            )));
        }
        if !peers_up || Instant::now() >= until {
            return Ok(None);
        }
        if standing(&cluster.node(id).data_dir).as_deref() == Some("member") {
            if let Some(l) = cluster.leader().await {
                let commit = cluster
                    .status(l)
                    .await
                    .map(|s| s.commit_index)
                    .unwrap_or(u64::MAX);
                if cluster
                    .status(id)
                    .await
                    .is_ok_and(|s| s.applied_index >= commit)
                {
                    return Ok(None);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run_case(
    cluster: &mut LocalCluster,
    load: &Load,
    switches: Option<&[Arc<Switches>]>,
    case: Case,
    rng: &mut StdRng,
) -> anyhow::Result<CaseResult> {
    let started = Instant::now();
    // Every case starts from a whole, caught-up cluster.
    for n in 1..=3 {
        cluster.start_node(n)?;
    }
    wait_healthy(cluster, 1, Duration::from_secs(60)).await?;
    let leader = cluster
        .wait_for_leader(Duration::from_secs(20))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let followers: Vec<u64> = (1..=3).filter(|n| *n != leader).collect();
    // The damaged node and the stale one vary with the case.
    let (target, stale) = if case.slot.is_multiple_of(2) {
        (followers[0], followers[1])
    } else {
        (followers[1], followers[0])
    };
    let data_dir = cluster.node(target).data_dir.clone();
    let mut result = CaseResult {
        case,
        fault: String::new(),
        reaction: Reaction::NotApplicable,
        message: None,
        violations: Vec::new(),
        longest_gap_ms: None,
        took_ms: 0,
    };
    // Where the fault goes, looked up before anything stops: a case whose
    // file or offset does not exist is skipped. A node rebuilt by an
    // earlier case starts its log at a snapshot, with one segment: the
    // load gives it a middle one within seconds.
    let mut path = case.target.resolve(&data_dir);
    if case.target == Target::MiddleSegment {
        let until = Instant::now() + Duration::from_secs(60);
        while path.is_none() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(500)).await;
            path = case.target.resolve(&data_dir);
        }
    }
    let Some(path) = path else {
        return Ok(result);
    };
    let disk = switches.map(|s| s[target as usize - 1].clone());
    if case.kind == Kind::ReadError && disk.is_none() {
        return Ok(result);
    }
    let offset = match case.kind {
        Kind::Zero | Kind::Flip | Kind::Truncate | Kind::ReadError => {
            let written = fault::written_len(&path)?;
            match fault::offsets(written, FULL_SLOTS).get(case.slot) {
                Some(o) => *o,
                None => return Ok(result),
            }
        }
        _ => 0,
    };
    let reissued_before = load.reissued().len();

    if case.stale_peer {
        cluster.kill(stale);
        let g = load.grants();
        if !load.wait_for_grants(g, 20, Duration::from_secs(15)).await {
            result.violations.push(format!(
                "nodes {leader} and {target} made no 20 grants with node {stale} down"
            ));
        }
        cluster.kill(leader);
    }
    let down = Instant::now();
    cluster.kill(target);
    // The file may have changed since it was looked up: look again.
    let path = case.target.resolve(&data_dir).unwrap_or(path);
    result.fault = fault::apply(case.kind, &path, offset, rng)?;
    if let (Kind::ReadError, Some(disk)) = (case.kind, &disk) {
        let rel = path.strip_prefix(&data_dir).unwrap_or(&path).to_owned();
        disk.set_eio(Some((rel, offset)));
    }
    let log_from = cluster.log_of(target).len();
    cluster.start_node(target)?;
    let mut refused = None;
    if case.stale_peer {
        cluster.start_node(stale)?;
        // The damaged node and the stale one alone: whatever they grant
        // must be above everything acknowledged. The workers' sessions may
        // be unknown to them, so new sessions ask too.
        let alone_until = Instant::now() + Duration::from_secs(4);
        let endpoints = cluster.endpoints();
        while Instant::now() < alone_until {
            let left = alone_until.saturating_duration_since(Instant::now());
            if !load
                .probe(&endpoints, left.min(Duration::from_secs(1)))
                .await
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        refused = follow_restart(cluster, target, log_from, Duration::ZERO, false).await?;
        cluster.start_node(leader)?;
        let g = load.grants();
        if !load.wait_for_grants(g, 1, Duration::from_secs(20)).await {
            result.violations.push(format!(
                "no grant within 20 s of all three nodes running ({})",
                load.why_stalled()
            ));
        }
    }
    if refused.is_none() {
        refused = follow_restart(cluster, target, log_from, Duration::from_secs(30), true).await?;
    }
    // The sector error is a moment of the disk's, not a lasting one: the
    // rebuilt node reads its new files.
    if let Some(disk) = &disk {
        disk.set_eio(None);
    }
    let new_log = cluster
        .log_of(target)
        .get(log_from..)
        .unwrap_or("")
        .to_owned();
    result.reaction = match &refused {
        Some(_) => Reaction::Refused,
        None if new_log.contains("rejoin") => Reaction::Rejoined,
        None => Reaction::Restarted,
    };
    result.message = refused.clone();
    if refused.is_some() {
        // The operator's way back for a node that refuses its data dir
        // (docs/operations.md): remove it and start the node with its
        // usual flags; it rejoins as one whose disk was replaced.
        let _ = fault::empty_dir(&data_dir);
        cluster.start_node(target)?;
    }
    if let Err(e) = wait_healthy(cluster, target, Duration::from_secs(40)).await {
        result.violations.push(format!("{e:#}"));
    }
    if !case.stale_peer {
        let gap = load.longest_gap(down, Instant::now());
        result.longest_gap_ms = Some(gap.as_millis() as u64);
        if gap > UNAVAILABLE_LIMIT {
            result.violations.push(format!(
                "nodes {leader} and {stale} granted nothing for {} ms while node {target} was down or rejoining ({})",
                gap.as_millis(),
                load.why_stalled()
            ));
        }
    }
    result
        .violations
        .extend(load.reissued().into_iter().skip(reissued_before));
    match load.held_is_valid().await {
        Some(Ok(())) => {}
        Some(Err(e)) => result.violations.push(e),
        None => result
            .violations
            .push("the cluster did not answer a Validate after the case".into()),
    }
    result.took_ms = started.elapsed().as_millis() as u64;
    Ok(result)
}
