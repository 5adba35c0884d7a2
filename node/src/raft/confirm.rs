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
            let mut floor = None;
            loop {
                notified.notified().await;
                let started = Instant::now();
                let round = async {
                    raft.ensure_linearizable()
                        .await
                        .map_err(|e| check_leader_error(id, e))?;
                    floor = leader_floor(floor, &raft.metrics().borrow());
                    if let Some((_, index)) = floor {
                        raft.wait(None)
                            .applied_index_at_least(Some(index), "leader floor")
                            .await
                            .map_err(|e| NodeError::Unavailable(e.to_string()))?;
                    }
                    Ok(())
                };
                let result = match tokio::time::timeout(timeout, round).await {
                    Ok(r) => r,
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

/// The (term, log index) a leader's reads must have applied: its whole log
/// as of the moment it was first seen leading in this term.
///
/// openraft 0.9's read index is max(the leader's first entry of its term,
/// the committed index). A node that led before a restart resumes leading
/// in the same term with no new entry (`Engine::startup`), its first entry
/// of the term long applied and its committed index as last saved, which
/// may be behind entries that were committed, applied and read before the
/// crash. Those entries are in its log (a leader holds every committed
/// entry), so waiting for its log to be applied makes such a read see them.
/// A freshly elected leader's floor is its no-op entry, which openraft's
/// read index covers already; the wait then costs nothing.
fn leader_floor(
    floor: Option<(u64, u64)>,
    m: &openraft::RaftMetrics<NodeId, raftlock_store::NodeInfo>,
) -> Option<(u64, u64)> {
    if m.state != openraft::ServerState::Leader {
        return floor;
    }
    match floor {
        Some((term, _)) if term == m.current_term => floor,
        _ => Some((m.current_term, m.last_log_index.unwrap_or(0))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{RaftMetrics, ServerState};

    fn metrics(
        state: ServerState,
        term: u64,
        last: u64,
    ) -> RaftMetrics<NodeId, raftlock_store::NodeInfo> {
        let mut m = RaftMetrics::new_initial(1);
        m.state = state;
        m.current_term = term;
        m.last_log_index = Some(last);
        m
    }

    #[test]
    fn the_floor_is_the_log_as_first_seen_leading_in_a_term() {
        let f = leader_floor(None, &metrics(ServerState::Leader, 3, 40));
        assert_eq!(f, Some((3, 40)));
        // Later entries of the same term need no wait of their own: the
        // read index covers them once one of them commits.
        assert_eq!(leader_floor(f, &metrics(ServerState::Leader, 3, 90)), f);
        // A new term takes the log as it is then.
        assert_eq!(
            leader_floor(f, &metrics(ServerState::Leader, 4, 95)),
            Some((4, 95))
        );
    }

    #[test]
    fn a_node_that_does_not_lead_keeps_its_floor() {
        assert_eq!(
            leader_floor(None, &metrics(ServerState::Follower, 3, 40)),
            None
        );
        let f = Some((3, 40));
        assert_eq!(leader_floor(f, &metrics(ServerState::Candidate, 4, 41)), f);
    }
}
