//! Group commit above openraft: commands that arrive while earlier
//! proposals are in flight go into one log entry.
//!
//! openraft 0.9 appends each `client_write` on its own and waits for that
//! append's flush before it looks at the next, so the leader would pay one
//! fdatasync per command. Here at most `in_flight` entries are proposed at
//! a time; whatever queues meanwhile becomes the next entry (up to
//! `max_batch` commands). One command alone goes out at once, so an idle
//! cluster pays no batching delay. Command `i` of the entry at log index
//! `n` applies at `raftlock_store::batch_index(n, i)` (DESIGN.md), which is
//! its fencing token or session id.

use crate::error::NodeError;
use futures::stream::{FuturesUnordered, StreamExt};
use openraft::error::{ClientWriteError, RaftError};
use raftlock_store::machine::{Command, Outcome};
use raftlock_store::{Proposal, Raft};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// Entries proposed at once by default (`--proposals-in-flight`): while one
/// is being appended and fsynced the next can already be proposed. More
/// does not pay: openraft 0.9 appends, fsyncs and replicates each entry
/// with a fixed cost, so under load fewer, larger entries win. Measured at
/// 64 clients on 2 cores, every entry free to take a slot: 1 in flight
/// 4,363-4,700 ops/s, 2 3,920-4,413, 4 3,627-3,837, 8 2,696-2,963; but 16
/// clients on one lock ran 12% slower with 1 than with 2 (the performance history in CHANGELOG.md).
pub const IN_FLIGHT: usize = 2;
/// Entries of at most this many commands take any free slot; larger ones
/// wait until no other entry is in flight (see `run`).
const SMALL_BATCH: usize = 4;
/// Most entries in flight a node accepts as a setting.
pub const MAX_IN_FLIGHT: usize = 64;
/// Default commands per entry (`--max-batch-commands`), well under
/// `MAX_BATCH_COMMANDS`: keeps entries (and the append-entries messages that
/// carry them) a bounded size.
pub const MAX_BATCH: usize = 1024;

type Reply = oneshot::Sender<Result<(u64, Outcome), NodeError>>;

/// The queue in front of Raft.
#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::UnboundedSender<(Command, Reply)>,
    stats: Arc<BatchStats>,
}

/// What the batcher has proposed, and seen committed, since the node started.
#[derive(Debug, Default)]
pub struct BatchStats {
    /// Commands proposed and committed.
    pub commands: AtomicU64,
    /// Log entries they were grouped into.
    pub entries: AtomicU64,
}

impl Batcher {
    /// Starts the batching task for `raft` on node `id`.
    pub fn start(
        id: u64,
        raft: Raft,
        write_timeout: Duration,
        in_flight: usize,
        max_batch: usize,
    ) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(BatchStats::default());
        tokio::spawn(run(
            id,
            raft,
            rx,
            write_timeout,
            in_flight.max(1),
            max_batch.max(1),
            stats.clone(),
        ));
        Batcher { tx, stats }
    }

    /// Commands and entries proposed so far.
    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }

    /// Proposes `command` in the next entry; returns the index it applied
    /// at and its outcome.
    pub async fn propose(&self, command: Command) -> Result<(u64, Outcome), NodeError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((command, tx))
            .map_err(|_| NodeError::Stopped("the proposal queue is closed".into()))?;
        rx.await
            .map_err(|_| NodeError::Stopped("the proposal was dropped".into()))?
    }
}

async fn run(
    id: u64,
    raft: Raft,
    mut rx: mpsc::UnboundedReceiver<(Command, Reply)>,
    write_timeout: Duration,
    in_flight: usize,
    max_batch: usize,
    stats: Arc<BatchStats>,
) {
    let drain = |batch: &mut Vec<(Command, Reply)>, rx: &mut mpsc::UnboundedReceiver<_>| {
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
    };
    // The entries in flight are polled here, in this task: a task spawned
    // per entry cost a spawn, a schedule and a wake-up of its own for every
    // commit.
    // Looked up once, not per entry: `histogram!` hashes its key each call.
    let batch_commands = metrics::histogram!("raftlock_proposal_batch_commands");
    let proposal_seconds = metrics::histogram!("raftlock_proposal_seconds");
    let mut writes = FuturesUnordered::new();
    // The next entry, waiting for room in flight.
    let mut next: Option<Vec<(Command, Reply)>> = None;
    let mut closed = false;
    loop {
        if let Some(batch) = next.as_mut() {
            // What arrived while it waited joins it.
            drain(batch, &mut rx);
            // A few commands take any free slot: a lock handoff (a release
            // whose grant the next holder is waiting on) must not wait
            // behind another entry. Many commands mean load: they wait
            // until nothing else is in flight, so they form fewer, larger
            // entries, since openraft 0.9 pays a fixed cost per entry (the
            // leader's core waits for its own fsync of each).
            let wanted = if batch.len() <= SMALL_BATCH {
                1
            } else {
                in_flight
            };
            if writes.len() + wanted <= in_flight {
                let batch = next.take().unwrap_or_default();
                batch_commands.record(batch.len() as f64);
                let (commands, replies): (Vec<Command>, Vec<Reply>) = batch.into_iter().unzip();
                let (raft, proposal_seconds) = (&raft, &proposal_seconds);
                writes.push(async move {
                    let result = write(id, raft, commands, write_timeout, proposal_seconds).await;
                    (result, replies)
                });
            }
        }
        if closed && next.is_none() && writes.is_empty() {
            return;
        }
        tokio::select! {
            Some((result, replies)) = writes.next(), if !writes.is_empty() => {
                answer(&stats, result, replies);
            }
            item = rx.recv(), if next.is_none() && !closed => match item {
                Some(first) => {
                    let mut batch = vec![first];
                    drain(&mut batch, &mut rx);
                    next = Some(batch);
                }
                None => closed = true,
            },
        }
    }
}

/// Answers the commands of one entry.
fn answer(stats: &BatchStats, result: Result<Vec<(u64, Outcome)>, NodeError>, replies: Vec<Reply>) {
    match result {
        Ok(outcomes) => {
            // Counted once committed: a node that lost leadership
            // proposed nothing.
            stats
                .commands
                .fetch_add(outcomes.len() as u64, Ordering::Relaxed);
            stats.entries.fetch_add(1, Ordering::Relaxed);
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

async fn write(
    id: u64,
    raft: &Raft,
    commands: Vec<Command>,
    write_timeout: Duration,
    proposal_seconds: &metrics::Histogram,
) -> Result<Vec<(u64, Outcome)>, NodeError> {
    let n = commands.len();
    let proposal = Proposal::batch(now_ms(), commands);
    let started = std::time::Instant::now();
    let res = tokio::time::timeout(write_timeout, raft.client_write(proposal)).await;
    proposal_seconds.record(started.elapsed().as_secs_f64());
    let resp = match res {
        Err(_) => {
            return Err(NodeError::Unavailable(format!(
                "proposal not committed within {write_timeout:?}"
            )))
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
            return Err(NodeError::NotLeader {
                node: id,
                leader_addr: f.leader_node.map(|n| n.client_addr),
            })
        }
        Ok(Err(RaftError::APIError(e))) => return Err(NodeError::Unavailable(e.to_string())),
        Ok(Err(RaftError::Fatal(f))) => return Err(NodeError::Stopped(f.to_string())),
        Ok(Ok(resp)) => resp,
    };
    if resp.data.outcomes.len() != n {
        return Err(NodeError::Stopped(format!(
            "entry {} applied {} outcomes for {n} commands",
            resp.data.index,
            resp.data.outcomes.len()
        )));
    }
    Ok(resp.data.outcomes)
}

/// Wall-clock Unix ms, proposed as data with every command.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
