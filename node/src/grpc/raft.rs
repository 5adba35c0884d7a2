//! The peer-facing Raft service: decodes openraft messages, hands them to
//! the local Raft, and encodes `Result<response, error>` back.

use raftlock_proto::v1::raft_server::Raft as RaftService;
use raftlock_proto::v1::RaftPayload;
use raftlock_store::Raft;
use serde::Serialize;
use tonic::{Request, Response, Status};

/// Serves Raft RPCs from peers.
pub struct PeerService {
    raft: Raft,
}

impl PeerService {
    /// Serves `raft`.
    pub fn new(raft: Raft) -> Self {
        PeerService { raft }
    }
}

fn decode<T: serde::de::DeserializeOwned>(req: Request<RaftPayload>) -> Result<T, Status> {
    serde_json::from_slice(&req.into_inner().data)
        .map_err(|e| Status::invalid_argument(format!("undecodable raft message: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    serde_json::to_vec(value)
        .map(|data| Response::new(RaftPayload { data }))
        .map_err(|e| Status::internal(format!("cannot encode raft reply: {e}")))
}

#[tonic::async_trait]
impl RaftService for PeerService {
    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let res = self.raft.vote(decode(req)?).await;
        encode(&res)
    }

    async fn append_entries(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let res = self.raft.append_entries(decode(req)?).await;
        encode(&res)
    }

    async fn install_snapshot(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let res = self.raft.install_snapshot(decode(req)?).await;
        encode(&res)
    }
}
