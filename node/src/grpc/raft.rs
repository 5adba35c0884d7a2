//! The peer-facing Raft service: decodes openraft messages (binary or the
//! JSON of older releases, `peer_codec.rs`), hands them to the local Raft,
//! and encodes `Result<response, error>` back in the request's format.

use crate::peer_codec;
use raftlock_proto::reason::{self, Reason};
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

/// A request and whether it came binary (the reply goes back the same way).
fn decode<T: serde::de::DeserializeOwned>(req: Request<RaftPayload>) -> Result<(T, bool), Status> {
    peer_codec::decode_request(&req.into_inner().data).map_err(|e| {
        reason::status(
            Reason::InvalidArgument,
            format!("undecodable raft message: {e}"),
        )
    })
}

fn encode<T: Serialize, E: Serialize>(
    value: &Result<T, E>,
    binary: bool,
) -> Result<Response<RaftPayload>, Status> {
    peer_codec::encode_reply(value, binary)
        .map(|data| Response::new(RaftPayload { data }))
        .map_err(|e| reason::status(Reason::Internal, format!("cannot encode raft reply: {e}")))
}

#[tonic::async_trait]
impl RaftService for PeerService {
    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let (req, binary) = decode(req)?;
        let res = self.raft.vote(req).await;
        encode(&res, binary)
    }

    async fn append_entries(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let (req, binary) = decode(req)?;
        let res = self.raft.append_entries(req).await;
        encode(&res, binary)
    }

    async fn install_snapshot(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let (req, binary) = decode(req)?;
        let res = self.raft.install_snapshot(req).await;
        encode(&res, binary)
    }
}
