//! What the cluster's administration may do with Raft, and no more: read
//! its view of the cluster (role, term, leader, membership, indexes, the
//! log's and the batcher's counters), change the membership, hand the
//! leadership over, wait for a quorum's confirmation, read the applied
//! state. The Cluster gRPC service, the admin port (health, readiness,
//! gauges) and the inspector hold an [`Admin`], not the node: nothing in
//! them can propose a command.

use super::node::Node;
use crate::error::NodeError;
use openraft::{ChangeMembers, RaftMetrics};
use raftlock_store::state_machine::SharedState;
use raftlock_store::{NodeId, NodeInfo, Raft};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A membership change's outcome, or openraft's refusal of it.
pub type MembershipResult = Result<
    openraft::raft::ClientWriteResponse<raftlock_store::TypeConfig>,
    openraft::error::RaftError<NodeId, openraft::error::ClientWriteError<NodeId, NodeInfo>>,
>;

/// The cluster's administration's handle on this node's Raft.
#[derive(Clone)]
pub struct Admin {
    node: Arc<Node>,
}

impl Admin {
    /// The administration of `node`.
    pub fn new(node: Arc<Node>) -> Self {
        Admin { node }
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.node.id()
    }

    /// Raft's view of the cluster (state, term, leader, membership,
    /// replication), as it changes.
    pub fn metrics(&self) -> tokio::sync::watch::Receiver<RaftMetrics<NodeId, NodeInfo>> {
        self.node.metrics()
    }

    /// The applied state (read-only use: nothing here proposes).
    pub fn state(&self) -> &Arc<SharedState> {
        self.node.state()
    }

    /// The operator's limits.
    pub fn limits(&self) -> &crate::limits::Limits {
        self.node.limits()
    }

    /// The commit index this node knows.
    pub async fn committed_index(&self) -> Option<u64> {
        self.node.committed_index().await
    }

    /// Resolves once a quorum confirms this node's leadership (or fails
    /// as a read would).
    pub async fn linearizable(&self) -> Result<(), NodeError> {
        self.node.linearizable().await
    }

    /// Why the Raft core stopped, if it did.
    pub fn core_stopped(&self) -> Option<String> {
        self.node.core_stopped()
    }

    /// Whether this node believes it leads.
    pub fn is_leader(&self) -> bool {
        self.node.is_leader()
    }

    /// The refusal a follower answers with, naming the leader it knows.
    pub fn not_leader(&self) -> NodeError {
        self.node.not_leader()
    }

    /// The leader's client address, if known.
    pub fn leader_addr(&self) -> Option<String> {
        self.node.leader_addr()
    }

    /// The write-ahead log's flush counters.
    pub fn log_stats(&self) -> &raftlock_store::wal::FlushStats {
        self.node.log_stats()
    }

    /// The batcher's counters (commands proposed, entries made).
    pub fn proposal_stats(&self) -> &crate::raft::batch::BatchStats {
        self.node.proposal_stats()
    }

    /// The cluster's identity, as a backup records it.
    pub fn cluster_id(&self) -> &crate::raft::cluster_identity::ClusterIdentity {
        self.node.cluster_id()
    }

    /// Adds a learner (returns once the change is committed, not once the
    /// learner caught up).
    pub async fn add_learner(&self, id: NodeId, info: NodeInfo) -> MembershipResult {
        self.raft().add_learner(id, info, false).await
    }

    /// Makes `voters` the voters; the others become learners if
    /// `retain_as_learners`, else leave.
    pub async fn change_voters(
        &self,
        voters: BTreeSet<NodeId>,
        retain_as_learners: bool,
    ) -> MembershipResult {
        self.raft()
            .change_membership(voters, retain_as_learners)
            .await
    }

    /// Removes learners.
    pub async fn remove_learners(&self, learners: BTreeSet<NodeId>) -> MembershipResult {
        self.raft()
            .change_membership(ChangeMembers::RemoveNodes(learners), false)
            .await
    }

    /// Hands the leadership to `to` (see `transfer.rs`); returns the leader.
    pub async fn transfer_leadership(&self, to: NodeId) -> Result<NodeId, NodeError> {
        super::transfer::transfer_leadership(&self.node, to).await
    }

    fn raft(&self) -> &Raft {
        self.node.membership_admin()
    }
}
