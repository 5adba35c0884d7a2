//! The disk nemesis: disks that fail under a running cluster, each node on
//! a tmpfs of its own with 1 MiB log segments. A round is one of:
//!
//! - damage a minority: a byte of a durable batch of a follower's log
//!   flipped while it is down; it must refuse to start, and it comes back
//!   by the repair of `docs/operations.md` ("When a disk fails"): removed
//!   from the voters, emptied, started as a node waiting to be added,
//!   added as a learner, promoted.
//! - damage a majority: every node killed, the same damage in a majority of
//!   them, every node restarted. The damaged ones must refuse (the cluster
//!   is down, on purpose); then their bytes are put back, as a disk that is
//!   reseated, and they restart. A node that served on a damaged majority
//!   would elect a leader on a shortened log, which reissues tokens.
//! - a full disk on the leader: its tmpfs filled to the last byte and
//!   large grants written until its log needs a new segment; it must stop,
//!   and the others go on. The filler is then deleted and it restarts.
//! - a slow disk: a node (sometimes the leader, which gets the leadership
//!   back) restarted with 50 to 500 ms added to every fdatasync, then
//!   restarted without; both restarts graceful.
//! - a lost member beside a stale one: a follower is killed and goes
//!   stale while the others grant; then they go down too, one of them
//!   loses everything in its data dir (a replaced disk), and it and the
//!   stale one are started alone with their usual flags. Together they are
//!   a majority that holds only the stale log: serving, they would reissue
//!   tokens and lose grants, which the workload's checkers find. Then the
//!   third is started and the lost one must rejoin.
//!
//! What a node does with a damaged log or a full disk is recorded as an
//! observation of the round, which the `disk` checker judges.

use super::Nemesis;
use crate::disk::{self, Damage};
use crate::history::{Observation, Type, F};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Batches the newest segment holds before one is damaged: the damaged
/// batch (a third of the way in) has many after it, which prove it was
/// synced, not torn.
const MIN_BATCHES: usize = 30;
/// How long a damaged node has to refuse to start.
const REFUSE_WITHIN: Duration = Duration::from_secs(15);
/// How long a node whose disk is full has to stop once writes need space.
const STOP_WITHIN: Duration = Duration::from_secs(20);
/// The metadata of each grant that fills a log: the most a grant carries.
const FILL_METADATA: usize = raftlock_proto::limits::MAX_METADATA_LEN;
/// Logged by a node once it serves.
const SERVING: &str = "raftlockd serving";
/// Logged by a node that refuses a damaged log.
const DAMAGED: &str = "the write-ahead log is damaged";
/// Logged by a node whose log could not be written.
const FAILED: &str = "the write-ahead log failed";

/// What the disk nemesis has to undo, and what it saw in this round.
#[derive(Default)]
pub struct DiskState {
    undo: tokio::sync::Mutex<Vec<Undo>>,
    round: Mutex<Round>,
    /// The next round damages a majority, whatever the draw says.
    majority_next: AtomicBool,
    /// The next round loses a member beside a stale one.
    lost_next: AtomicBool,
}

#[derive(Default)]
struct Round {
    observations: Vec<Observation>,
    majority_down: bool,
}

enum Undo {
    /// Rebuild these damaged nodes from the majority.
    Repair(Vec<u64>),
    /// Put these bytes back and restart the nodes that refused them.
    Restore(Vec<(u64, Damage)>),
    /// Delete the filler and restart the node.
    Unfill { id: u64, filler: PathBuf },
    /// Restart the node without the sync delay.
    Unslow(u64),
}

impl DiskState {
    /// Odd seeds begin with a damaged majority, the round that a server
    /// reading damage as a torn tail fails, while the run is young enough
    /// that a short run (`jepsen/planted.sh`) gets to it.
    pub(super) fn begin(&self, seed: u64) {
        self.majority_next.store(seed % 2 == 1, Ordering::Relaxed);
        self.lost_next.store(seed % 4 == 2, Ordering::Relaxed);
    }

    /// This round's observations, and whether it took a majority down.
    pub(super) fn take_round(&self) -> (Vec<Observation>, bool) {
        let mut r = self.round.lock();
        let r = std::mem::take(&mut *r);
        (r.observations, r.majority_down)
    }

    fn observe(&self, node: u64, as_required: bool, what: String) {
        if !as_required {
            tracing::error!(node, %what, "a node broke a storage rule");
        }
        self.round.lock().observations.push(Observation {
            node,
            as_required,
            what,
        });
    }

    fn majority_down(&self) {
        self.round.lock().majority_down = true;
    }
}

/// How a node met a damaged log.
enum Answer {
    Refused,
    Served,
    /// Exited, without saying why in the expected words.
    Exited(String),
}

impl Nemesis {
    /// One disk round, chosen at random; its name.
    pub(super) async fn inject_disk(&self, rng: &mut StdRng) -> anyhow::Result<String> {
        let draw = rng.gen_range(0..10);
        let draw = if self.disk.majority_next.swap(false, Ordering::Relaxed) {
            3
        } else if self.disk.lost_next.swap(false, Ordering::Relaxed) {
            9
        } else {
            draw
        };
        match draw {
            0..=1 => self.damage_minority(rng).await,
            2..=4 => self.damage_majority(rng).await,
            5..=6 => self.full_disk().await,
            7 => self.slow_sync(rng).await,
            _ => self.lose_member_beside_stale(rng).await,
        }
    }

    async fn leader_now(&self) -> anyhow::Result<(u64, u64)> {
        let c = self.cluster.lock().await;
        let leader = c.wait_for_leader(Duration::from_secs(20)).await?;
        Ok((c.node_count(), leader))
    }

    async fn damage_minority(&self, rng: &mut StdRng) -> anyhow::Result<String> {
        let (n, leader) = self.leader_now().await?;
        let mut victims: Vec<u64> = (1..=n).filter(|&i| i != leader).collect();
        victims.shuffle(rng);
        victims.truncate(rng.gen_range(1..=((n - 1) / 2).max(1)) as usize);
        victims.sort_unstable();
        self.grow_logs(&victims).await?;
        let mut c = self.cluster.lock().await;
        for &v in &victims {
            c.kill(v);
        }
        // Repaired whatever happens from here: the nodes are down.
        self.disk
            .undo
            .lock()
            .await
            .push(Undo::Repair(victims.clone()));
        let mut parts = Vec::new();
        let mut marks = Vec::new();
        for &v in &victims {
            let d = disk::damage(&c.data_dir(v)?, MIN_BATCHES / 2)?;
            marks.push(log_len(&c.log_of(v)));
            c.start_node(v)?;
            parts.push(format!("n{v} ({})", d.describe()));
        }
        drop(c);
        let mut outcome = Vec::new();
        for (&v, &from) in victims.iter().zip(&marks) {
            outcome.push(self.judge_damaged(v, from).await.0);
        }
        Ok(format!(
            "damage the log of {} (leader n{leader}), restart: {}; repair",
            parts.join(", "),
            outcome.join(", ")
        ))
    }

    async fn damage_majority(&self, rng: &mut StdRng) -> anyhow::Result<String> {
        let (n, _) = self.leader_now().await?;
        let mut ids: Vec<u64> = (1..=n).collect();
        ids.shuffle(rng);
        let (damaged, healthy) = ids.split_at((n / 2 + 1) as usize);
        let (mut damaged, mut healthy) = (damaged.to_vec(), healthy.to_vec());
        damaged.sort_unstable();
        healthy.sort_unstable();
        self.grow_logs(&damaged).await?;
        let mut c = self.cluster.lock().await;
        for id in 1..=n {
            c.kill(id);
        }
        self.disk.majority_down();
        let mut done = Vec::new();
        let mut failure = None;
        for &d in &damaged {
            match c
                .data_dir(d)
                .and_then(|dir| disk::damage(&dir, MIN_BATCHES / 2))
            {
                Ok(x) => done.push((d, x)),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let parts: Vec<String> = done
            .iter()
            .map(|(d, x)| format!("n{d} ({})", x.describe()))
            .collect();
        self.disk.undo.lock().await.push(Undo::Restore(done));
        if let Some(e) = failure {
            return Err(e);
        }
        // The damaged nodes first: should they serve, they elect a leader
        // among themselves, on their shortened logs, before the healthy
        // ones are back to win the election with the whole log.
        let mut marks = Vec::new();
        for &d in &damaged {
            marks.push(log_len(&c.log_of(d)));
            c.start_node(d)?;
        }
        drop(c);
        let mut outcome = Vec::new();
        let mut served = false;
        for (&d, &from) in damaged.iter().zip(&marks) {
            let (what, refused) = self.judge_damaged(d, from).await;
            served |= !refused;
            outcome.push(what);
        }
        let mut c = self.cluster.lock().await;
        if served {
            let _ = c.wait_for_leader(Duration::from_secs(5)).await;
        }
        for &h in &healthy {
            c.start_node(h)?;
        }
        Ok(format!(
            "damage the logs of {} (a majority), restart every node: {}; restore the bytes",
            parts.join(", "),
            outcome.join(", ")
        ))
    }

    async fn lose_member_beside_stale(&self, rng: &mut StdRng) -> anyhow::Result<String> {
        let (n, leader) = self.leader_now().await?;
        let mut others: Vec<u64> = (1..=n).filter(|&i| i != leader).collect();
        others.shuffle(rng);
        let stale = others[0];
        let mut rest: Vec<u64> = (1..=n).filter(|&i| i != stale).collect();
        rest.shuffle(rng);
        let lost = rest[0];
        self.cluster.lock().await.kill(stale);
        // The workload goes on without the stale one: grants it never sees.
        // A fixed pause may see none (every lock held past its TTL by a
        // slow holder), and then a stale member is not stale in any way a
        // checker could notice; so it stays down until grants it missed
        // were acknowledged, within a bound.
        let missed = self
            .grants_acknowledged_for(Duration::from_secs(3), Duration::from_secs(12), 2)
            .await;
        let mut c = self.cluster.lock().await;
        for &id in &rest {
            c.kill(id);
        }
        self.disk.majority_down();
        // Everything in the data dir, not the dir: it may be a mount point.
        let dir = c.data_dir(lost)?;
        for e in std::fs::read_dir(&dir)? {
            let path = e?.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        c.start_node(stale)?;
        c.start_node(lost)?;
        drop(c);
        // Long enough for two nodes to elect and serve, had they a quorum.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut c = self.cluster.lock().await;
        for &id in &rest[1..] {
            c.start_node(id)?;
        }
        Ok(format!(
            "n{stale} down and stale ({missed} grants acknowledged meanwhile), then n{lost} loses its data dir while the rest are down; n{stale} and n{lost} alone for 5 s, then the rest"
        ))
    }

    /// Waits at least `at_least` and then until `grants` grants have been
    /// acknowledged since the call, or `at_most` has passed; how many were.
    async fn grants_acknowledged_for(
        &self,
        at_least: Duration,
        at_most: Duration,
        grants: usize,
    ) -> usize {
        let since = self.rec.now_ns();
        let began = tokio::time::Instant::now();
        tokio::time::sleep(at_least).await;
        loop {
            let seen = self
                .rec
                .history()
                .iter()
                .filter(|o| {
                    o.time_ns >= since
                        && o.kind == Type::Ok
                        && matches!(o.f, F::Acquire | F::SemAcquire | F::Campaign)
                })
                .count();
            if seen >= grants || began.elapsed() >= at_most {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for damaged node `id`, started with its log `from` bytes long,
    /// to refuse or to serve, and records what it did; whether it refused.
    async fn judge_damaged(&self, id: u64, from: u64) -> (String, bool) {
        let (answer, tail) = self.answer(id, from).await;
        match answer {
            Answer::Refused => {
                self.disk
                    .observe(id, true, format!("n{id} refused its damaged log"));
                (format!("n{id} refused"), true)
            }
            Answer::Served => {
                self.disk
                    .observe(id, false, format!("n{id} started on a damaged log"));
                (format!("n{id} served"), false)
            }
            Answer::Exited(how) => {
                self.disk.observe(
                    id,
                    false,
                    format!("n{id} stopped on its damaged log ({how}) without saying \"{DAMAGED}\": {tail}"),
                );
                (format!("n{id} exited"), true)
            }
        }
    }

    async fn answer(&self, id: u64, from: u64) -> (Answer, String) {
        let deadline = Instant::now() + REFUSE_WITHIN;
        loop {
            {
                let mut c = self.cluster.lock().await;
                let text = log_since(&c.log_of(id), from);
                let tail = last_lines(&text, 3);
                if let Some(status) = c.exited(id) {
                    if !status.success() && text.contains(DAMAGED) {
                        return (Answer::Refused, tail);
                    }
                    return (Answer::Exited(status.to_string()), tail);
                }
                if text.contains(SERVING) || Instant::now() > deadline {
                    return (Answer::Served, tail);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Writes small grants until the newest segment of each of `ids` holds
    /// [`MIN_BATCHES`]; the workload alone may not have written that many
    /// yet, or a segment may just have been started.
    async fn grow_logs(&self, ids: &[u64]) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let session = self.admin.session(Duration::from_secs(10)).await?;
        let mut i = 0u64;
        let result = loop {
            let short: Vec<u64> = {
                let c = self.cluster.lock().await;
                let mut short = Vec::new();
                for &id in ids {
                    if disk::newest_batches(&c.data_dir(id)?) < MIN_BATCHES {
                        short.push(id);
                    }
                }
                short
            };
            if short.is_empty() {
                break Ok(());
            }
            if Instant::now() > deadline {
                break Err(anyhow::anyhow!(
                    "the newest log segments of {short:?} hold fewer than {MIN_BATCHES} batches after 30 s"
                ));
            }
            for _ in 0..10 {
                i += 1;
                if let Ok(Some(g)) = session
                    .lock(format!("nemesis/disk/{}", i % 4))
                    .try_acquire()
                    .await
                {
                    let _ = g.release().await;
                }
            }
        };
        let _ = session.close().await;
        result
    }

    async fn full_disk(&self) -> anyhow::Result<String> {
        let (_, leader) = self.leader_now().await?;
        let root = self.cluster.lock().await.own_disk(leader)?.to_owned();
        let (filler, size) = disk::fill(&root)?;
        self.disk
            .undo
            .lock()
            .await
            .push(Undo::Unfill { id: leader, filler });
        let mark = log_len(&self.cluster.lock().await.log_of(leader));
        // The log has room left in its current segment: grants as large as
        // they come until it needs the next one.
        let stop = Arc::new(AtomicBool::new(false));
        let grants = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..4)
            .map(|k| {
                let (admin, stop, grants) = (self.admin.clone(), stop.clone(), grants.clone());
                tokio::spawn(async move {
                    let Ok(session) = admin.session(Duration::from_secs(10)).await else {
                        return;
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let got = session
                            .lock(format!("nemesis/fill/{k}"))
                            .metadata(vec![0x5au8; FILL_METADATA])
                            .try_acquire()
                            .await;
                        match got {
                            Ok(Some(g)) => {
                                grants.fetch_add(1, Ordering::Relaxed);
                                let _ = g.release().await;
                            }
                            _ => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    }
                    let _ = session.close().await;
                })
            })
            .collect();
        let started = Instant::now();
        let exit = loop {
            if let Some(status) = self.cluster.lock().await.exited(leader) {
                break Some(status);
            }
            if started.elapsed() > STOP_WITHIN {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            let _ = w.await;
        }
        let grants = grants.load(Ordering::Relaxed);
        let took = started.elapsed();
        let text = log_since(&self.cluster.lock().await.log_of(leader), mark);
        let name = format!(
            "fill n{leader}'s disk (leader; {} MiB filler), write {grants} grants of 4 KiB",
            size >> 20
        );
        match exit {
            Some(status) if text.contains(FAILED) => {
                self.disk.observe(
                    leader,
                    true,
                    format!("n{leader} stopped on its full disk after {took:.1?} ({status})"),
                );
                Ok(format!("{name}: n{leader} stopped after {took:.1?}"))
            }
            Some(status) => {
                // Stopping is what the rule asks; the words are the
                // runbook's, so a stop without them is reported too.
                self.disk.observe(
                    leader,
                    false,
                    format!(
                        "n{leader} stopped on its full disk ({status}) without saying \"{FAILED}\": {}",
                        last_lines(&text, 3)
                    ),
                );
                Ok(format!("{name}: n{leader} exited ({status})"))
            }
            // Twice a segment's worth went through its log with no room
            // for a new segment.
            None if grants * FILL_METADATA as u64 >= 2 * (disk::SEGMENT_MB << 20) => {
                self.disk.observe(
                    leader,
                    false,
                    format!(
                        "n{leader} kept running on a full disk while {grants} grants of 4 KiB were written"
                    ),
                );
                Ok(format!("{name}: n{leader} still runs"))
            }
            None => anyhow::bail!(
                "{name}: too few to need a new segment on n{leader} within {STOP_WITHIN:?}"
            ),
        }
    }

    async fn slow_sync(&self, rng: &mut StdRng) -> anyhow::Result<String> {
        let (n, leader) = self.leader_now().await?;
        let target = if rng.gen_bool(0.5) {
            leader
        } else {
            rng.gen_range(1..=n)
        };
        let delay = rng.gen_range(50..=500u64);
        // A node hung on a slow disk is killed and restarted at once, as a
        // watchdog would: a leader comes back before anyone else stands,
        // having lost (the nodes lose unsynced writes on a kill) entries it
        // had already sent its followers while it wrote them.
        let mut c = self.cluster.lock().await;
        c.kill(target);
        self.disk.undo.lock().await.push(Undo::Unslow(target));
        c.start_node_with(target, &["--fault-sync-delay-ms".into(), delay.to_string()])?;
        drop(c);
        let mut led = String::new();
        if target == leader {
            // Every commit waits for the leader's sync: give the slow disk
            // back the leadership it handed over.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            led = match self.admin.transfer_leader(target).await {
                Ok(now) if now == target => ", made leader".into(),
                _ => " (leadership not moved back)".into(),
            };
        }
        Ok(format!(
            "slow fsync on n{target}{} (+{delay} ms each){led}",
            if target == leader { " (leader)" } else { "" }
        ))
    }

    /// Undoes what the disk rounds did, newest first.
    pub(super) async fn undo_disk(&self) {
        let undo: Vec<Undo> = std::mem::take(&mut *self.disk.undo.lock().await);
        for u in undo.into_iter().rev() {
            let result = match u {
                Undo::Repair(ids) => self.repair(&ids).await,
                Undo::Restore(damages) => self.restore(damages).await,
                Undo::Unfill { id, filler } => self.unfill(id, &filler).await,
                Undo::Unslow(id) => {
                    let mut c = self.cluster.lock().await;
                    c.terminate(id, Duration::from_secs(10)).await;
                    c.start_node(id)
                }
            };
            if let Err(e) = result {
                self.failed(format!("cannot undo a disk fault: {e:#}"));
            }
        }
    }

    async fn restore(&self, damages: Vec<(u64, Damage)>) -> anyhow::Result<()> {
        let mut c = self.cluster.lock().await;
        for (id, d) in damages {
            // A node that served on its damaged log has written over it
            // since; it is left as it is.
            if c.is_running(id) {
                continue;
            }
            d.undo()?;
            c.start_node(id)?;
        }
        Ok(())
    }

    async fn unfill(&self, id: u64, filler: &std::path::Path) -> anyhow::Result<()> {
        std::fs::remove_file(filler)?;
        let mut c = self.cluster.lock().await;
        if !c.is_running(id) {
            c.start_node(id)?;
        }
        Ok(())
    }

    /// Rebuilds the damaged nodes `ids` from the majority, under their own
    /// ids: removed from the voters (from then on nothing they lost counts
    /// toward a vote or a commit), emptied, started without
    /// `--initial-cluster`, added as learners once caught up, promoted.
    async fn repair(&self, ids: &[u64]) -> anyhow::Result<()> {
        {
            let mut c = self.cluster.lock().await;
            for &id in ids {
                c.kill(id);
            }
        }
        let all: Vec<u64> = self.members.iter().map(|m| m.id).collect();
        let without: Vec<u64> = all.iter().copied().filter(|v| !ids.contains(v)).collect();
        let (all, without) = (&all, &without);
        self.retry(
            "remove the damaged nodes from the voters",
            move || async move {
                let s = self.admin.status().await?;
                if s.members
                    .iter()
                    .chain(&s.learners)
                    .any(|m| ids.contains(&m.id))
                {
                    self.admin.change_membership(without, false).await?;
                }
                Ok(())
            },
        )
        .await?;
        {
            let mut c = self.cluster.lock().await;
            for &id in ids {
                c.wipe(id)?;
                c.start_node(id)?;
            }
        }
        for &id in ids {
            let m = self
                .members
                .iter()
                .find(|m| m.id == id)
                .ok_or_else(|| anyhow::anyhow!("n{id} was never a member"))?;
            self.retry(&format!("add n{id} as a learner"), move || async move {
                self.admin
                    .add_learner(id, &m.peer_addr, &m.client_addr, true)
                    .await?;
                Ok(())
            })
            .await?;
        }
        self.retry("promote the rebuilt nodes", move || async move {
            self.admin.change_membership(all, false).await?;
            Ok(())
        })
        .await
    }

    /// Runs `step` until it succeeds, for up to 30 s: a membership change
    /// can be refused while another is under way or leadership moves.
    async fn retry<F, Fut>(&self, what: &str, mut step: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match step().await {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(e.context(format!("cannot {what}")))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "{what}: trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

fn log_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// What a node logged after the first `from` bytes of its log.
fn log_since(path: &std::path::Path, from: u64) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(bytes.get(from as usize..).unwrap_or_default()).into_owned()
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
