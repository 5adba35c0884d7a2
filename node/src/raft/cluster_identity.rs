//! Which cluster a node belongs to, as every peer call says.
//!
//! A node that bootstraps knows its cluster's id (a digest of its initial
//! members) from the start and keeps it in its data dir. A node that joins
//! without `--initial-cluster` does not: it learns the id from the first
//! leader that replicates to it, and records it, so that its backups carry
//! it and a later call from another cluster is refused. Every Raft call
//! carries the sender's id in `raftlock-cluster-id`; one from another
//! cluster is refused, so a node added to the wrong cluster by mistake (or
//! a data dir copied between clusters) never takes its entries.

use parking_lot::{Mutex, RwLock};
use raftlock_proto::reason::{self, Reason};
use raftlock_store::data_dir::DataDir;
use std::sync::Arc;

/// The metadata key that carries the sender's cluster id on peer calls.
pub const CLUSTER_ID_METADATA_KEY: &str = "raftlock-cluster-id";

/// This node's cluster id, shared by its peer client and server and
/// recorded in its data dir once known.
#[derive(Clone)]
pub struct ClusterIdentity {
    node: u64,
    id: Arc<RwLock<String>>,
    data: Option<Arc<Mutex<DataDir>>>,
}

impl ClusterIdentity {
    /// The identity of node `node`, as `data` records it (empty if it
    /// joined and has not heard from a leader yet).
    pub fn new(node: u64, data: Arc<Mutex<DataDir>>) -> Self {
        let id = data
            .lock()
            .identity()
            .cluster_id
            .clone()
            .unwrap_or_default();
        ClusterIdentity {
            node,
            id: Arc::new(RwLock::new(id)),
            data: Some(data),
        }
    }

    /// An identity that records nothing (tests, tools).
    pub fn fixed(node: u64, id: &str) -> Self {
        ClusterIdentity {
            node,
            id: Arc::new(RwLock::new(id.to_owned())),
            data: None,
        }
    }

    /// The cluster id, or "" while a joining node has not learned it.
    pub fn get(&self) -> String {
        self.id.read().clone()
    }

    /// Admits a peer call from cluster `theirs`: the same cluster, or a
    /// node of an older release that sends none. A node that does not know
    /// its cluster yet takes `theirs` as its own and records it. A call
    /// from another cluster is refused.
    pub fn admit(&self, theirs: &str) -> Result<(), tonic::Status> {
        if theirs.is_empty() {
            return Ok(());
        }
        let mut ours = self.id.write();
        if *ours == theirs {
            return Ok(());
        }
        if !ours.is_empty() {
            tracing::warn!(node = self.node, ours = %ours, theirs, "refused a peer call from another cluster");
            return Err(reason::status(
                Reason::PermissionDenied,
                format!(
                    "node {} belongs to cluster {ours}, not to the caller's cluster {theirs}",
                    self.node
                ),
            ));
        }
        if let Some(data) = &self.data {
            let mut data = data.lock();
            if let Err(e) = data.set_cluster_id(theirs) {
                // Served all the same; recorded at the next call.
                tracing::error!(node = self.node, error = %e, "cannot record the cluster id in the data dir");
                return Err(reason::status(
                    Reason::Internal,
                    format!("cannot record cluster id {theirs}: {e}"),
                ));
            }
        }
        tracing::info!(
            node = self.node,
            cluster = theirs,
            "joined cluster: its id is recorded in the data dir"
        );
        *ours = theirs.to_owned();
        Ok(())
    }

    /// Admits the peer call `req` (see [`ClusterIdentity::admit`]).
    pub fn admit_request<T>(&self, req: &tonic::Request<T>) -> Result<(), tonic::Status> {
        let theirs = req
            .metadata()
            .get(CLUSTER_ID_METADATA_KEY)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        self.admit(theirs)
    }
}

/// Adds this node's cluster id to each outgoing peer call.
#[derive(Clone)]
pub struct SendClusterId(pub ClusterIdentity);

impl tonic::service::Interceptor for SendClusterId {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let id = self.0.get();
        if !id.is_empty() {
            if let Ok(v) = id.parse() {
                req.metadata_mut().insert(CLUSTER_ID_METADATA_KEY, v);
            }
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_admits_its_own_cluster_learns_one_and_refuses_another() {
        let known = ClusterIdentity::fixed(1, "c-a");
        assert!(known.admit("c-a").is_ok());
        assert!(known.admit("").is_ok(), "older releases send none");
        let e = known.admit("c-b").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.message().contains("c-a") && e.message().contains("c-b"));

        let joiner = ClusterIdentity::fixed(4, "");
        assert!(joiner.admit("").is_ok());
        assert_eq!(joiner.get(), "");
        assert!(joiner.admit("c-a").is_ok());
        assert_eq!(joiner.get(), "c-a");
        assert!(joiner.admit("c-b").is_err(), "learned once, kept");
    }
}
