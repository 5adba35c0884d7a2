//! openraft's side of the peer network: the three calls it makes of a
//! peer (append, snapshot, vote), and how a failed call is reported to it.

use super::PeerConnection;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{Backoff, RPCOption, RaftNetwork};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use raftlock_store::types::LogId;
use raftlock_store::{NodeId, NodeInfo, TypeConfig};

/// The commit index a leader may tell a follower: openraft's, but never
/// past `flushed`, the last entry durable in the leader's own log.
pub(super) fn commit_to_send(commit: Option<LogId>, flushed: Option<LogId>) -> Option<LogId> {
    match commit {
        Some(c) if flushed.is_none_or(|f| f.index < c.index) => flushed,
        other => other,
    }
}

/// The openraft error for a failed call.
pub(super) fn rpc_error<E: std::error::Error>(
    status: tonic::Status,
) -> RPCError<NodeId, NodeInfo, E> {
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => {
            RPCError::Unreachable(Unreachable::new(&status))
        }
        _ => RPCError::Network(NetworkError::new(&status)),
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    fn backoff(&self) -> Backoff {
        Backoff::new(super::retry::unreachable_retries(self.retry))
    }

    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        if let Some(flushed) = &self.flushed {
            rpc.leader_commit = commit_to_send(rpc.leader_commit, *flushed.borrow());
        }
        if self.superseded(&rpc).await {
            return Ok(AppendEntriesResponse::Success);
        }
        let answer = self.append_sent(&rpc, &option).await;
        self.note_answer(&rpc, &answer);
        answer
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, NodeInfo, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        self.call("vote", &rpc, &option).await
    }
}
