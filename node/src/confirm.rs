//! Batched leadership confirmation. A keep-alive may only be acknowledged,
//! and a read only answered, after a quorum has confirmed this node's
//! leadership in a round that started after the request arrived; otherwise
//! a deposed leader could acknowledge renewals the real leader never saw.
//! One round (openraft's read index) serves every request that arrived
//! before it started, so a thousand keep-alives cost one heartbeat round.

use crate::error::NodeError;
use openraft::error::{CheckIsLeaderError, RaftError};
use raftlock_store::{NodeId, Raft};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// One finished confirmation round.
#[derive(Clone, Debug)]
struct Round {
    started: Instant,
    result: Result<(), NodeError>,
}

/// Runs confirmation rounds on demand.
#[derive(Clone)]
pub struct Confirmer {
    rounds: watch::Receiver<Option<Round>>,
    demand: Arc<Notify>,
    timeout: Duration,
    /// Set while leadership is handed over: a round's appends would keep
    /// the followers' leader lease fresh and make them refuse the
    /// successor's vote.
    paused: Arc<AtomicBool>,
}

impl Confirmer {
    /// Starts the round loop for `raft`.
    pub fn start(id: NodeId, raft: Raft, timeout: Duration, paused: Arc<AtomicBool>) -> Self {
        let (tx, rx) = watch::channel(None);
        let demand = Arc::new(Notify::new());
        let notified = demand.clone();
        tokio::spawn(async move {
            loop {
                notified.notified().await;
                let started = Instant::now();
                let result = match tokio::time::timeout(timeout, raft.ensure_linearizable()).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(check_leader_error(id, e)),
                    Err(_) => Err(NodeError::Unavailable(format!(
                        "leadership not confirmed by a quorum within {timeout:?}"
                    ))),
                };
                if tx.send(Some(Round { started, result })).is_err() {
                    return;
                }
            }
        });
        Confirmer {
            rounds: rx,
            demand,
            timeout,
            paused,
        }
    }

    /// Waits for a round that started at or after `t` and returns its result.
    pub async fn confirmed_after(&self, t: Instant) -> Result<(), NodeError> {
        if self.paused.load(Ordering::SeqCst) {
            return Err(NodeError::Unavailable(
                "leadership is being handed over; retry shortly".into(),
            ));
        }
        let mut rx = self.rounds.clone();
        let give_up = t + self.timeout * 2;
        loop {
            if let Some(round) = rx.borrow_and_update().as_ref() {
                if round.started >= t {
                    return round.result.clone();
                }
            }
            self.demand.notify_one();
            match tokio::time::timeout_at(give_up, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(NodeError::Stopped("confirmation loop ended".into())),
                Err(_) => {
                    return Err(NodeError::Unavailable(
                        "leadership not confirmed in time".into(),
                    ))
                }
            }
        }
    }
}

/// Maps openraft's read-index errors.
fn check_leader_error(
    node: NodeId,
    e: RaftError<NodeId, CheckIsLeaderError<NodeId, raftlock_store::NodeInfo>>,
) -> NodeError {
    match e {
        RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => NodeError::NotLeader {
            node,
            leader_addr: f.leader_node.map(|n| n.client_addr),
        },
        RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q)) => {
            NodeError::Unavailable(q.to_string())
        }
        RaftError::Fatal(f) => NodeError::Stopped(f.to_string()),
    }
}
