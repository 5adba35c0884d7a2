//! The Cluster service: status and membership.

use super::status;
use crate::auth::caller;
use crate::error::NodeError;
use crate::raft::admin::Admin;
use openraft::ServerState;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::cluster_server::Cluster as ClusterApi;
use raftlock_proto::v1::*;
use raftlock_store::NodeInfo;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tonic::{Request, Response, Status};
use tracing::Instrument;

/// Serves cluster status and membership changes.
#[derive(Clone)]
pub struct ClusterService {
    node: Admin,
}

impl ClusterService {
    /// Serves the administration of a node.
    pub fn new(node: Admin) -> Self {
        ClusterService { node }
    }

    /// This node's view of the cluster (see [`status_of`]).
    pub async fn status(&self, want_counts: bool) -> Result<StatusResponse, NodeError> {
        status_of(&self.node, want_counts).await
    }
}

fn members(node: &Admin) -> (Vec<Member>, Vec<Member>) {
    let m = node.metrics().borrow().clone();
    let membership = m.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let mut members = Vec::new();
    let mut learners = Vec::new();
    for (id, n) in membership.nodes() {
        let member = Member {
            id: *id,
            peer_addr: n.peer_addr.clone(),
            client_addr: n.client_addr.clone(),
        };
        if voters.contains(id) {
            members.push(member);
        } else {
            learners.push(member);
        }
    }
    (members, learners)
}

fn membership_response(node: &Admin, log_index: u64) -> MembershipResponse {
    let (members, learners) = members(node);
    MembershipResponse {
        log_index,
        members,
        learners,
    }
}

fn raft_err<E: std::error::Error>(node: &Admin, e: openraft::error::RaftError<u64, E>) -> Status {
    let text = e.to_string();
    match e {
        openraft::error::RaftError::APIError(_) if !node.is_leader() => status(node.not_leader()),
        openraft::error::RaftError::APIError(_) => {
            reason::status(Reason::MembershipChangeRefused, text)
        }
        openraft::error::RaftError::Fatal(_) => reason::status(Reason::Stopping, text),
    }
}

/// This node's view of the cluster; with `want_counts`, the applied
/// state's sizes, read linearizably. Shared by gRPC and HTTP.
pub async fn status_of(node: &Admin, want_counts: bool) -> Result<StatusResponse, NodeError> {
    let m = node.metrics().borrow().clone();
    let role = match m.state {
        ServerState::Leader => Role::Leader,
        ServerState::Follower => Role::Follower,
        ServerState::Candidate => Role::Candidate,
        ServerState::Learner => Role::Learner,
        ServerState::Shutdown => Role::Shutdown,
    };
    let (members, learners) = members(node);
    let mut resp = StatusResponse {
        node_id: node.id(),
        role: role as i32,
        term: m.current_term,
        leader_id: m.current_leader.unwrap_or(0),
        leader_addr: node.leader_addr().unwrap_or_default(),
        commit_index: m.last_applied.map(|l| l.index).unwrap_or(0),
        applied_index: m.last_applied.map(|l| l.index).unwrap_or(0),
        members,
        learners,
        sessions: 0,
        locks: 0,
        waiters: 0,
        log_fsyncs: node.log_stats().fsyncs.load(Ordering::Relaxed),
        log_entries_flushed: node.log_stats().entries.load(Ordering::Relaxed),
        proposed_commands: node.proposal_stats().commands.load(Ordering::Relaxed),
        proposed_entries: node.proposal_stats().entries.load(Ordering::Relaxed),
        process_cpu_micros: process_cpu_micros(),
        limits: Some(ServerLimits {
            max_wait_ms: node.limits().max_wait_ms,
            min_ttl_ms: node.limits().min_ttl_ms,
            max_ttl_ms: node.limits().max_ttl_ms,
            max_name_bytes: raftlock_proto::limits::MAX_NAME_LEN as u32,
            max_metadata_bytes: raftlock_proto::limits::MAX_METADATA_LEN as u32,
            max_hold_ms: raftlock_proto::limits::MAX_HOLD_MS,
            max_lock_delay_ms: raftlock_proto::limits::MAX_LOCK_DELAY_MS,
            hold_caps: node
                .limits()
                .hold_caps
                .iter()
                .map(|r| raftlock_proto::v1::HoldCapRule {
                    prefix: r.prefix.clone(),
                    default_ms: r.default_ms,
                    max_ms: r.max_ms,
                })
                .collect(),
        }),
    };
    if let Some(c) = node.committed_index().await {
        resp.commit_index = c;
    }
    if want_counts {
        node.linearizable().await?;
        let (sessions, locks, waiters) = node.state().read().machine.counts();
        resp.sessions = sessions as u64;
        resp.locks = locks as u64;
        resp.waiters = waiters as u64;
    }
    Ok(resp)
}

#[tonic::async_trait]
impl ClusterApi for ClusterService {
    #[tracing::instrument(name = "cluster.status", level = "debug", skip_all, fields(node = self.node.id()))]
    async fn status(
        &self,
        req: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        Ok(Response::new(
            status_of(&self.node, req.into_inner().linearizable_counts).await?,
        ))
    }

    #[tracing::instrument(name = "cluster.add_learner", skip_all, fields(node = self.node.id()))]
    async fn add_learner(
        &self,
        req: Request<AddLearnerRequest>,
    ) -> Result<Response<MembershipResponse>, Status> {
        caller(&req)?.check_cluster_admin("add a learner")?;
        let r = req.into_inner();
        if r.node_id == 0 || r.peer_addr.is_empty() || r.client_addr.is_empty() {
            return Err(reason::status(
                Reason::InvalidArgument,
                "node_id, peer_addr and client_addr are required",
            ));
        }
        let info = NodeInfo {
            peer_addr: r.peer_addr,
            client_addr: r.client_addr,
        };
        let resp = self
            .node
            .add_learner(r.node_id, info)
            .await
            .map_err(|e| raft_err(&self.node, e))?;
        if r.wait_caught_up {
            // openraft's own blocking add returns early when the learner is
            // unreachable; this waits for what the caller asked: the
            // learner holding every entry the leader had when it was added.
            let target = resp.log_id.index;
            let learner = r.node_id;
            let wait = Duration::from_millis(self.node.limits().max_learner_wait_ms);
            let deadline = tokio::time::Instant::now() + wait;
            let mut metrics = self.node.metrics();
            loop {
                let matched = metrics
                    .borrow()
                    .replication
                    .as_ref()
                    .and_then(|rep| rep.get(&learner).cloned().flatten())
                    .map(|l| l.index);
                if matched.is_some_and(|m| m >= target) {
                    break;
                }
                if !self.node.is_leader() {
                    return Err(status(self.node.not_leader()));
                }
                match tokio::time::timeout_at(deadline, metrics.changed()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return Err(reason::status(Reason::Stopping, "raft is shutting down")),
                    Err(_) => {
                        return Err(reason::status(Reason::LearnerNotCaughtUp, format!(
                            "learner {learner} has not caught up to index {target} within {} ms (--max-learner-wait-ms; matched {matched:?}); is it running and reachable at its peer address?",
                            wait.as_millis()
                        )))
                    }
                }
            }
            tracing::info!(learner, index = target, "learner caught up");
        }
        Ok(Response::new(membership_response(
            &self.node,
            resp.log_id.index,
        )))
    }

    async fn change_membership(
        &self,
        req: Request<ChangeMembershipRequest>,
    ) -> Result<Response<MembershipResponse>, Status> {
        caller(&req)?.check_cluster_admin("change the membership")?;
        let r = req.into_inner();
        let voters: BTreeSet<u64> = r.voters.into_iter().collect();
        let drop: BTreeSet<u64> = r.remove_learners.into_iter().collect();
        let span = tracing::info_span!("cluster.change_membership", node = self.node.id(), voters = ?voters, remove_learners = ?drop);
        async {
            if voters.is_empty() && drop.is_empty() {
                return Err(reason::status(
                    Reason::InvalidArgument,
                    "give the new voters, learners to remove, or both",
                ));
            }
            let mut index = 0;
            if !voters.is_empty() {
                let resp = self
                    .node
                    .change_voters(voters, r.retain_as_learners)
                    .await
                    .map_err(|e| raft_err(&self.node, e))?;
                index = resp.log_id.index;
            }
            if !drop.is_empty() {
                let resp = self
                    .node
                    .remove_learners(drop)
                    .await
                    .map_err(|e| raft_err(&self.node, e))?;
                index = resp.log_id.index;
            }
            tracing::info!(log_index = index, "membership changed");
            Ok(Response::new(membership_response(&self.node, index)))
        }
        .instrument(span)
        .await
    }

    type BackupStream =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<BackupChunk, Status>> + Send>>;

    async fn backup(
        &self,
        req: Request<BackupRequest>,
    ) -> Result<Response<Self::BackupStream>, Status> {
        caller(&req)?.check_cluster_admin("take a backup")?;
        let span = tracing::info_span!("cluster.backup", node = self.node.id());
        let (bytes, last_index) = async {
            // Everything acknowledged before this call is in the copy.
            self.node.linearizable().await.map_err(status)?;
            let state = self.node.state().read();
            let last_index = state.last_applied.map(|l| l.index).unwrap_or(0);
            let bytes = raftlock_store::backup::encode(
                &state.machine,
                last_index,
                crate::raft::batch::now_ms(),
                &self.node.cluster_id().get(),
            );
            tracing::info!(last_index, bytes = bytes.len(), "backup taken");
            Ok::<_, Status>((bytes, last_index))
        }
        .instrument(span)
        .await?;
        let chunks: Vec<Result<BackupChunk, Status>> = bytes
            .chunks(1 << 20)
            .map(|c| {
                Ok(BackupChunk {
                    data: c.to_vec(),
                    last_index,
                })
            })
            .collect();
        Ok(Response::new(Box::pin(futures::stream::iter(chunks))))
    }

    #[tracing::instrument(name = "cluster.transfer_leader", skip_all, fields(node = self.node.id()))]
    async fn transfer_leader(
        &self,
        req: Request<TransferLeaderRequest>,
    ) -> Result<Response<TransferLeaderResponse>, Status> {
        caller(&req)?.check_cluster_admin("transfer leadership")?;
        let to = req.into_inner().to_node_id;
        let leader = self.node.transfer_leadership(to).await.map_err(status)?;
        Ok(Response::new(TransferLeaderResponse { leader_id: leader }))
    }
}

/// CPU time this process has used, user and system, in µs.
fn process_cpu_micros() -> u64 {
    // SAFETY: getrusage writes only into the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    micros(usage.ru_utime) + micros(usage.ru_stime)
}
