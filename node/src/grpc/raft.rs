//! The peer-facing Raft service: decodes openraft messages (binary or the
//! JSON of older releases, `peer_codec.rs`), hands them to the local Raft,
//! and encodes `Result<response, error>` back in the request's format.

use crate::raft::peer_codec;
use crate::raft::standing::Gate;
use futures::Stream;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::raft_server::Raft as RaftService;
use raftlock_proto::v1::RaftPayload;
use raftlock_store::{Raft, TypeConfig};
use serde::Serialize;
use std::pin::Pin;
use tonic::{Request, Response, Status, Streaming};

/// Serves Raft RPCs from peers.
pub struct PeerService {
    raft: Raft,
    /// Turns true when the node stops: append streams end then, so that
    /// they do not hold the listener's drain open.
    stopping: tokio::sync::watch::Receiver<bool>,
    /// Calls from another cluster are refused; a joining node learns its
    /// cluster from the first leader's call.
    cluster: crate::raft::cluster_identity::ClusterIdentity,
    /// While this node may not vote with what it holds, votes and entries
    /// of older terms are refused (`raft/standing.rs`).
    gate: Gate,
    /// Said in probe answers, so a leader short of space finds a voter
    /// with room.
    space: Option<std::sync::Arc<crate::raft::space::SpaceAlarm>>,
}

impl PeerService {
    /// Serves `raft` for members of `cluster` until `stopping` turns true,
    /// letting through what `gate` admits.
    pub fn new(
        raft: Raft,
        stopping: tokio::sync::watch::Receiver<bool>,
        cluster: crate::raft::cluster_identity::ClusterIdentity,
        gate: Gate,
    ) -> Self {
        PeerService {
            raft,
            stopping,
            cluster,
            gate,
            space: None,
        }
    }

    /// Says in probe answers whether `space` is below its reserve.
    pub fn with_space(mut self, space: std::sync::Arc<crate::raft::space::SpaceAlarm>) -> Self {
        self.space = Some(space);
        self
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

/// Answers of an `AppendEntriesStream`, one per request, in order.
pub type AppendStream = Pin<Box<dyn Stream<Item = Result<RaftPayload, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl RaftService for PeerService {
    type AppendEntriesStreamStream = AppendStream;

    async fn append_entries_stream(
        &self,
        req: Request<Streaming<RaftPayload>>,
    ) -> Result<Response<AppendStream>, Status> {
        self.cluster.admit_request(&req)?;
        let inbound = req.into_inner();
        let state = (
            inbound,
            self.raft.clone(),
            self.stopping.clone(),
            self.gate.clone(),
        );
        // One request at a time, as the leader's replication of this peer
        // sends them: each answer goes out before the next is read.
        let answers =
            futures::stream::try_unfold(state, |(mut inbound, raft, mut stopping, gate)| async {
                let msg = tokio::select! {
                    msg = inbound.message() => msg?,
                    _ = stopping.wait_for(|s| *s) => None,
                };
                let Some(msg) = msg else {
                    return Ok(None);
                };
                let (req, binary) =
                    decode::<openraft::raft::AppendEntriesRequest<TypeConfig>>(Request::new(msg))?;
                if !binary {
                    return Err(reason::status(
                        Reason::InvalidArgument,
                        "AppendEntriesStream carries binary messages only",
                    ));
                }
                gate.admit_entries(req.vote.leader_id.term)?;
                let res = raft.append_entries(req).await;
                let data = encode(&res, true)?.into_inner();
                Ok(Some((data, (inbound, raft, stopping, gate))))
            });
        Ok(Response::new(Box::pin(answers)))
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.cluster.admit_request(&req)?;
        self.gate.admit_vote()?;
        let (req, binary) = decode(req)?;
        let res = self.raft.vote(req).await;
        encode(&res, binary)
    }

    async fn append_entries(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        self.cluster.admit_request(&req)?;
        let (req, binary) = decode::<openraft::raft::AppendEntriesRequest<TypeConfig>>(req)?;
        self.gate.admit_entries(req.vote.leader_id.term)?;
        let res = self.raft.append_entries(req).await;
        encode(&res, binary)
    }

    async fn install_snapshot(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        self.cluster.admit_request(&req)?;
        let (req, binary) = decode::<openraft::raft::InstallSnapshotRequest<TypeConfig>>(req)?;
        self.gate.admit_entries(req.vote.leader_id.term)?;
        let res = self.raft.install_snapshot(req).await;
        encode(&res, binary)
    }

    async fn probe(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.cluster.admit_request(&req)?;
        let data = serde_json::to_vec(
            &self
                .gate
                .answer(&self.raft, self.space.as_ref().map(|s| s.is_low())),
        )
        .map_err(|e| {
            reason::status(
                Reason::Internal,
                format!("cannot encode a probe answer: {e}"),
            )
        })?;
        Ok(Response::new(RaftPayload { data }))
    }
}
