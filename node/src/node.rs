//! The running node as its services see it: propose a command through Raft,
//! confirm leadership for linearizable reads and keep-alives, and say who
//! the leader is when this node is not.

use crate::confirm::Confirmer;
use openraft::ServerState;
use raftlock_store::machine::{Command, LeaseError, Outcome, Reply};
use raftlock_store::state_machine::SharedState;
use raftlock_store::{NodeId, Raft};

pub use crate::error::NodeError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Shared handle to the node's Raft and state.
pub struct Node {
    /// This node's id.
    pub id: NodeId,
    /// The Raft instance.
    pub raft: Raft,
    /// The applied state.
    pub state: Arc<SharedState>,
    /// Batches leadership confirmations.
    pub confirmer: Confirmer,
    /// How long a proposal may take to commit.
    pub write_timeout: Duration,
    /// The longest election timeout: how long followers refuse to vote
    /// after hearing from a leader.
    pub leader_lease: Duration,
    /// Set while this leader hands leadership over: writes are refused so
    /// they do not keep the followers' leader lease fresh.
    pub transferring: Arc<AtomicBool>,
    /// Becomes true when the node starts shutting down (after any
    /// leadership handover), so long-lived streams can end at once and
    /// send their clients to the new leader instead of stalling while the
    /// listeners drain.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// The cluster this node's data dir belongs to (empty until it joins).
    pub cluster_id: String,
    /// The operator's limits.
    pub limits: crate::limits::Limits,
    /// What each client connection has open.
    pub connections: Arc<crate::limits::ConnectionCounts>,
    /// TLS for calls to peers (mutual, with the cluster CA), if on.
    pub peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// Groups concurrent proposals into shared log entries.
    pub batcher: crate::batch::Batcher,
    /// Log write counters (fsyncs, entries made durable).
    pub log_stats: Arc<raftlock_store::wal::FlushStats>,
}

impl Node {
    /// The leader's client address, if this node knows one.
    pub fn leader_addr(&self) -> Option<String> {
        let m = self.raft.metrics().borrow().clone();
        let leader = m.current_leader?;
        m.membership_config
            .membership()
            .get_node(&leader)
            .map(|n| n.client_addr.clone())
    }

    /// Whether this node currently believes it leads.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
    }

    /// The error for a request this node cannot serve because it does not lead.
    pub fn not_leader(&self) -> NodeError {
        NodeError::NotLeader {
            node: self.id,
            leader_addr: self.leader_addr(),
        }
    }

    /// Proposes `command`, waits until it is committed and applied here, and
    /// returns the index it applied at (its entry's `batch_index`) and its
    /// outcome.
    pub async fn propose(&self, command: Command) -> Result<(u64, Outcome), NodeError> {
        if self.transferring.load(Ordering::SeqCst) {
            return Err(NodeError::Unavailable(
                "leadership is being handed over; retry shortly".into(),
            ));
        }
        self.batcher.propose(command).await
    }

    /// Proposes `command` and returns its reply, or the state machine's
    /// refusal as an error.
    pub async fn propose_reply(&self, command: Command) -> Result<(u64, Reply), NodeError> {
        let (index, outcome) = self.propose(command).await?;
        Ok((index, outcome.reply?))
    }

    /// Checks that `caller` may use `session`: sessions belong to the
    /// identity that created them. Without authentication every session is
    /// everyone's. A session this node has not seen is looked for again
    /// after a linearizable round (a new leader may not have applied it
    /// yet); one still missing then is refused outright.
    pub async fn check_session_owner(
        &self,
        session: u64,
        caller: &crate::auth::Caller,
    ) -> Result<(), NodeError> {
        if !caller.checks_ownership() {
            return Ok(());
        }
        let owner = |node: &Node| {
            let state = node.state.read();
            state.machine.session(session).map(|s| s.owner.clone())
        };
        let found = match owner(self) {
            Some(o) => Some(o),
            None => {
                self.linearizable().await?;
                owner(self)
            }
        };
        match found {
            Some(o) if o == caller.name() => Ok(()),
            Some(_) => Err(NodeError::PermissionDenied(format!(
                "session {session} belongs to another identity than {:?}",
                caller.name()
            ))),
            // Refused here rather than passed to the state machine: an id
            // above everything applied could be created by someone else
            // before this command commits.
            None => Err(LeaseError::SessionNotFound(session).into()),
        }
    }

    /// Waits until a read of the local state is linearizable: leadership
    /// confirmed by a quorum after this call began, and the state applied up
    /// to the commit point known then.
    pub async fn linearizable(&self) -> Result<(), NodeError> {
        self.confirmer
            .confirmed_after(tokio::time::Instant::now())
            .await
    }
}
