//! The running node as its services see it: propose a command through Raft,
//! confirm leadership for linearizable reads and keep-alives, and say who
//! the leader is when this node is not.

use crate::raft::confirm::Confirmer;
use crate::replica::{Replica, Role};
use futures::future::BoxFuture;
use openraft::ServerState;
use raftlock_store::machine::{Command, Outcome};
use raftlock_store::state_machine::SharedState;
use raftlock_store::{NodeId, Raft};

pub use crate::error::NodeError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Shared handle to the node's Raft and state.
pub struct Node {
    /// This node's id.
    pub(super) id: NodeId,
    /// The Raft instance.
    pub(super) raft: Raft,
    /// The applied state.
    pub(super) state: Arc<SharedState>,
    /// Batches leadership confirmations.
    pub(super) confirmer: Confirmer,
    /// The longest election timeout: how long followers refuse to vote
    /// after hearing from a leader.
    pub(super) leader_lease: Duration,
    /// Set while this leader hands leadership over: writes are refused so
    /// they do not keep the followers' leader lease fresh.
    pub(super) transferring: Arc<AtomicBool>,
    /// Set once the node has begun to shut down (before any handover), for
    /// good.
    pub(super) shutting_down: Arc<AtomicBool>,
    /// Becomes true when the node starts shutting down (after any
    /// leadership handover), so long-lived streams can end at once and
    /// send their clients to the new leader instead of stalling while the
    /// listeners drain.
    pub(super) stopping: tokio::sync::watch::Receiver<bool>,
    /// The cluster this node belongs to (empty until a joining node hears
    /// from a leader).
    pub(super) cluster_id: crate::raft::cluster_identity::ClusterIdentity,
    /// The operator's limits.
    pub(super) limits: crate::limits::Limits,
    /// What each client connection has open.
    pub(super) connections: Arc<crate::limits::ConnectionCounts>,
    /// TLS for calls to peers (mutual, with the cluster CA), if on.
    pub(super) peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// Groups concurrent proposals into shared log entries.
    pub(super) batcher: crate::raft::batch::Batcher,
    /// Log write counters (fsyncs, entries made durable).
    pub(super) log_stats: Arc<raftlock_store::wal::FlushStats>,
    /// Whether the data dir is below its free-space reserve.
    pub(super) space: Arc<crate::raft::space::SpaceAlarm>,
    /// True while this node leads but no quorum has acknowledged it for
    /// longer than `leader_lease` (`watch_quorum`): it is likely cut off,
    /// and a new leader may already serve on the other side.
    pub(super) cut_off: tokio::sync::watch::Receiver<bool>,
    /// This node's role as the lock service sees it (`forward_roles`).
    pub(super) roles: tokio::sync::watch::Receiver<crate::replica::Role>,
}

/// Keeps `cut_off` true while `raft` leads without a quorum's
/// acknowledgement for longer than `lease`, checked every `every`, until
/// `stop`. openraft 0.9 keeps such a leader leading until it hears a higher
/// term, and its proposals never commit: without this, a client whose
/// request reached it waited out its whole attempt timeout (a waiting
/// acquire, its whole wait) while a new leader served the others.
///
/// Not while this node hands its leadership over or shuts down
/// (`handing_over`): it refuses new writes then anyway, and the calls still
/// pending end with STOPPING when it stops, as they should.
pub async fn watch_quorum(
    raft: Raft,
    node: NodeId,
    lease: Duration,
    every: Duration,
    handing_over: [Arc<AtomicBool>; 2],
    cut_off: tokio::sync::watch::Sender<bool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    metrics::gauge!("raftlock_leader_cut_off").set(0.0);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let (now, silent_ms) = {
            let m = raft.metrics().borrow().clone();
            let silent = m.millis_since_quorum_ack.unwrap_or(0);
            (
                m.state == ServerState::Leader
                    && silent > lease.as_millis() as u64
                    && !handing_over.iter().any(|f| f.load(Ordering::SeqCst)),
                silent,
            )
        };
        let changed = cut_off.send_if_modified(|c| std::mem::replace(c, now) != now);
        if changed {
            metrics::gauge!("raftlock_leader_cut_off").set(if now { 1.0 } else { 0.0 });
            if now {
                tracing::warn!(node, silent_ms, "this leader has heard from no quorum for longer than the leader lease: refusing requests as unavailable until it does (it is likely cut off, and another node may lead)");
            } else {
                tracing::info!(
                    node,
                    "a quorum acknowledges this node again, or it no longer leads"
                );
            }
        }
    }
}

impl Node {
    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Raft's view of the cluster (state, term, leader, membership), as it
    /// changes.
    pub fn metrics(
        &self,
    ) -> tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, raftlock_store::NodeInfo>> {
        self.raft.metrics()
    }

    /// This node's role, vote and leader, changing only when they do (not
    /// with every entry, as [`Node::metrics`] does).
    pub fn server_metrics(
        &self,
    ) -> tokio::sync::watch::Receiver<
        openraft::metrics::RaftServerMetrics<NodeId, raftlock_store::NodeInfo>,
    > {
        self.raft.server_metrics()
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// The state machine as applied on this node. What it says is only as
    /// fresh as this node's log: call [`Node::linearizable`] first where an
    /// answer must reflect every write acknowledged before the call.
    pub fn state(&self) -> &Arc<SharedState> {
        &self.state
    }

    /// Waits until a quorum has confirmed this node's leadership in a round
    /// that started after `t` (a keep-alive received at `t` may then be
    /// acknowledged).
    pub async fn confirmed_after(&self, t: tokio::time::Instant) -> Result<(), NodeError> {
        self.confirmer.confirmed_after(t).await
    }

    /// The highest log index this node knows to be committed.
    pub async fn committed_index(&self) -> Option<u64> {
        self.raft
            .with_raft_state(|s| s.committed.map(|l| l.index))
            .await
            .ok()
            .flatten()
    }

    /// The operator's limits.
    pub fn limits(&self) -> &crate::limits::Limits {
        &self.limits
    }

    /// What each client connection has open.
    pub fn connections(&self) -> &Arc<crate::limits::ConnectionCounts> {
        &self.connections
    }

    /// The cluster this node belongs to.
    pub fn cluster_id(&self) -> &crate::raft::cluster_identity::ClusterIdentity {
        &self.cluster_id
    }

    /// Log writes made durable so far (fsyncs, entries).
    pub fn log_stats(&self) -> &raftlock_store::wal::FlushStats {
        &self.log_stats
    }

    /// Commands proposed and the log entries they shared.
    pub fn proposal_stats(&self) -> &crate::raft::batch::BatchStats {
        self.batcher.stats()
    }

    /// Whether the data dir is below its free-space reserve.
    pub fn space(&self) -> &Arc<crate::raft::space::SpaceAlarm> {
        &self.space
    }

    /// Becomes true when the node starts shutting down (after any
    /// leadership handover).
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.clone()
    }

    /// Marks the node as shutting down, for good: writes are refused from
    /// now on.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Why Raft's core stopped, if it did (a storage error, a panic), as
    /// openraft reports it; `None` while it runs. A node whose core has
    /// stopped can neither apply, vote nor acknowledge: it is not healthy.
    pub fn core_stopped(&self) -> Option<String> {
        match &self.raft.metrics().borrow().running_state {
            Ok(()) => None,
            Err(fatal) => Some(fatal.to_string()),
        }
    }

    /// Stops this node from starting elections: a node on its way out
    /// would stop hearing the new leader and win an election it cannot
    /// serve.
    pub fn stop_campaigning(&self) {
        self.raft.runtime_config().elect(false);
    }

    /// Shuts Raft down (after [`Node::stop_campaigning`]). Fails only if
    /// Raft's core task had already failed (panicked) or been cancelled.
    pub async fn shutdown_raft(&self) -> Result<(), tokio::task::JoinError> {
        self.raft.shutdown().await
    }

    /// Raft itself, for cluster administration (membership changes). Lock
    /// operations go through [`Node::propose`] instead.
    pub fn membership_admin(&self) -> &Raft {
        &self.raft
    }

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

    /// Refuses a call that grows the replicated state while this node
    /// leads with its data dir below the free-space reserve. A follower
    /// does not refuse: the call goes to the leader, whose disk decides.
    pub fn check_space(&self) -> Result<(), NodeError> {
        if self.is_leader() {
            self.space.check()
        } else {
            Ok(())
        }
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
        self.check_quorum()?;
        // A proposal already waiting when the leader is cut off is
        // answered as unavailable (it may still commit: the answer is
        // indeterminate, as a client's own timeout is, and exactly-once
        // retries settle it).
        tokio::select! {
            r = self.batcher.propose(command) => r,
            _ = self.lost_quorum() => Err(self.cut_off_error()),
        }
    }

    /// Refuses a request while this node leads without a quorum.
    pub fn check_quorum(&self) -> Result<(), NodeError> {
        if *self.cut_off.borrow() {
            Err(self.cut_off_error())
        } else {
            Ok(())
        }
    }

    /// Resolves when this node is found leading without a quorum; never
    /// once the node stops watching (it is shutting down: what is pending
    /// then ends with STOPPING).
    pub async fn lost_quorum(&self) {
        let mut cut_off = self.cut_off.clone();
        if cut_off.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The error for a request this node cannot serve because it leads
    /// without a quorum.
    pub fn cut_off_error(&self) -> NodeError {
        NodeError::Unavailable(format!(
            "node {} leads but no quorum has acknowledged it for over {} ms: it is likely cut off from the others; try another node",
            self.id,
            self.leader_lease.as_millis()
        ))
    }

    /// Waits until a read of the local state is linearizable: leadership
    /// confirmed by a quorum after this call began, and the state applied up
    /// to the commit point known then.
    pub async fn linearizable(&self) -> Result<(), NodeError> {
        self.check_quorum()?;
        self.confirmer
            .confirmed_after(tokio::time::Instant::now())
            .await
    }
}

/// Keeps `roles` up to date with Raft's view of this node's role, until
/// Raft's core stops (then `roles` closes: the node can no longer act).
pub(super) async fn forward_roles(raft: Raft, roles: tokio::sync::watch::Sender<Role>) {
    let mut server = raft.server_metrics();
    loop {
        let role = {
            let s = server.borrow_and_update();
            Role {
                term: s.vote.leader_id().get_term(),
                leading: s.state == ServerState::Leader,
            }
        };
        roles.send_if_modified(|r| std::mem::replace(r, role) != role);
        if raft.metrics().borrow().running_state.is_err() {
            return;
        }
        tokio::select! {
            changed = server.changed() => if changed.is_err() { return },
            _ = roles.closed() => return,
        }
    }
}

impl Replica for Node {
    fn id(&self) -> NodeId {
        self.id
    }

    fn term(&self) -> u64 {
        Node::term(self)
    }

    fn limits(&self) -> &crate::limits::Limits {
        &self.limits
    }

    fn state(&self) -> &Arc<SharedState> {
        &self.state
    }

    fn propose(&self, command: Command) -> BoxFuture<'_, Result<(u64, Outcome), NodeError>> {
        Box::pin(Node::propose(self, command))
    }

    fn confirmed_after(&self, t: tokio::time::Instant) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(Node::confirmed_after(self, t))
    }

    fn linearizable(&self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(Node::linearizable(self))
    }

    fn cut_off(&self) -> BoxFuture<'_, NodeError> {
        Box::pin(async move {
            self.lost_quorum().await;
            self.cut_off_error()
        })
    }

    fn check_space(&self) -> Result<(), NodeError> {
        Node::check_space(self)
    }

    fn not_leader(&self) -> NodeError {
        Node::not_leader(self)
    }

    fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        Node::stopping(self)
    }

    fn roles(&self) -> tokio::sync::watch::Receiver<Role> {
        // A clone would see every role since the node started as unseen:
        // its first `changed()` must wait for the next change.
        let mut roles = self.roles.clone();
        roles.mark_unchanged();
        roles
    }
}
