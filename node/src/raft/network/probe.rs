//! `Probe`: what another node holds and whether it may vote with it
//! (`raft/standing.rs`), and whether its disk has room (`raft/space.rs`).

use super::PeerNetwork;
use raftlock_proto::v1::raft_client::RaftClient;
use raftlock_proto::v1::RaftPayload;
use raftlock_store::data_dir::Standing;
use raftlock_store::NodeId;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a node answers a probe: who it is, whether it may vote, and the
/// term and log it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAnswer {
    /// Its node id.
    pub node: NodeId,
    /// Its data dir's incarnation.
    pub incarnation: u64,
    /// Whether it may vote with what it holds.
    pub standing: Standing,
    /// Its current term.
    pub term: u64,
    /// The index of the last entry of its log.
    pub last_log_index: Option<u64>,
    /// Who formed the cluster with it, by (node, incarnation).
    pub formed_with: Vec<(u64, u64)>,
    /// Whether its data dir is below its free-space reserve (`None` from
    /// a node that does not say).
    #[serde(default)]
    pub space_low: Option<bool>,
}

impl PeerNetwork {
    /// Asks node `target` at `addr` what it holds and whether it may vote
    /// (`standing.rs`), within half a second.
    pub async fn probe(&self, target: NodeId, addr: &str) -> Result<ProbeAnswer, tonic::Status> {
        let channel = self.channel(target, addr).map_err(|e| {
            tonic::Status::invalid_argument(format!("bad peer address {addr:?}: {e}"))
        })?;
        let cluster = self
            .cluster
            .clone()
            .unwrap_or_else(|| crate::raft::cluster_identity::ClusterIdentity::fixed(target, ""));
        let mut client = RaftClient::with_interceptor(
            channel,
            crate::raft::cluster_identity::SendClusterId(cluster),
        );
        let reply = tokio::time::timeout(
            Duration::from_millis(500),
            client.probe(RaftPayload { data: Vec::new() }),
        )
        .await
        .map_err(|_| tonic::Status::deadline_exceeded("no answer within 500 ms"))??;
        serde_json::from_slice(&reply.into_inner().data)
            .map_err(|e| tonic::Status::internal(format!("undecodable probe answer: {e}")))
    }
}
