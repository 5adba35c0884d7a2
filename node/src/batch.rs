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

use crate::node::NodeError;
use openraft::error::{ClientWriteError, RaftError};
use raftlock_store::machine::{Command, Outcome};
use raftlock_store::{Proposal, Raft};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Entries proposed at once: while one is being appended and fsynced the
/// next can already be replicating, and whatever arrives meanwhile waits to
/// form the entry after.
pub const IN_FLIGHT: usize = 2;
/// Default commands per entry (`--max-batch-commands`), well under
/// `MAX_BATCH_COMMANDS`: keeps entries (and the append-entries messages that
/// carry them) a bounded size.
pub const MAX_BATCH: usize = 1024;

type Reply = oneshot::Sender<Result<(u64, Outcome), NodeError>>;

/// The queue in front of Raft.
#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::UnboundedSender<(Command, Reply)>,
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
        tokio::spawn(run(
            id,
            raft,
            rx,
            write_timeout,
            in_flight.max(1),
            max_batch.max(1),
        ));
        Batcher { tx }
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
) {
    let slots = Arc::new(Semaphore::new(in_flight));
    while let Some(first) = rx.recv().await {
        // Wait for a free slot first: what arrives meanwhile joins this
        // entry instead of becoming one of its own.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        metrics::histogram!("raftlock_proposal_batch_commands").record(batch.len() as f64);
        let raft = raft.clone();
        tokio::spawn(async move {
            let (commands, replies): (Vec<Command>, Vec<Reply>) = batch.into_iter().unzip();
            let result = write(id, &raft, commands, write_timeout).await;
            drop(slot);
            match result {
                Ok(outcomes) => {
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
        });
    }
}

async fn write(
    id: u64,
    raft: &Raft,
    commands: Vec<Command>,
    write_timeout: Duration,
) -> Result<Vec<(u64, Outcome)>, NodeError> {
    let n = commands.len();
    let proposal = Proposal::batch(crate::node::now_ms(), commands);
    let started = std::time::Instant::now();
    let res = tokio::time::timeout(write_timeout, raft.client_write(proposal)).await;
    metrics::histogram!("raftlock_proposal_seconds").record(started.elapsed().as_secs_f64());
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
