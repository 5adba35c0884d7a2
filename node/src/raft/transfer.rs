//! Leadership transfer. openraft 0.9 has no transfer call, and followers
//! refuse to vote while the leader's lease (the longest election timeout)
//! is fresh. So the leader stops heartbeats and refuses new writes (they
//! would refresh the lease too), waits out the lease, and asks the target
//! to campaign (`trigger().elect()`); the target wins with an up-to-date log.

use crate::raft::node::{Node, NodeError};
use openraft::ServerState;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::TransferLeaderRequest;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{info, warn};

/// Hands leadership to `to` (0 = the most caught-up other voter), or, when
/// `to` is this node, campaigns. Returns the new leader's id.
pub async fn transfer_leadership(node: &Node, to: u64) -> Result<u64, NodeError> {
    if to == node.id {
        if node.is_leader() {
            return Ok(node.id);
        }
        node.raft
            .trigger()
            .elect()
            .await
            .map_err(|e| NodeError::Stopped(e.to_string()))?;
        return wait_for_leader(node, |l| l == node.id, Duration::from_secs(5)).await;
    }
    if !node.is_leader() {
        return Err(node.not_leader());
    }
    let m = node.raft.metrics().borrow().clone();
    let membership = m.membership_config.membership().clone();
    let target = if to != 0 {
        if !membership.voter_ids().any(|v| v == to) {
            return Err(NodeError::InvalidArgument(format!(
                "node {to} is not a voter"
            )));
        }
        to
    } else {
        // The follower with the most log replicated is the quickest to win.
        let repl = m.replication.clone().unwrap_or_default();
        membership
            .voter_ids()
            .filter(|v| *v != node.id)
            .max_by_key(|v| repl.get(v).cloned().flatten().map(|l| l.index))
            .ok_or_else(|| {
                NodeError::InvalidArgument("no other voter to hand leadership to".into())
            })?
    };
    let addr = membership
        .get_node(&target)
        // The peer port: node-to-node control stays on the peer network,
        // whose addresses every node can reach (client addresses may be
        // ones only clients can).
        .map(|n| n.peer_addr.clone())
        .ok_or_else(|| NodeError::InvalidArgument(format!("node {target} has no address")))?;
    info!(node = node.id, target, "transferring leadership");
    node.transferring.store(true, Ordering::SeqCst);
    node.raft.runtime_config().heartbeat(false);
    let result = async {
        tokio::time::sleep(node.leader_lease + Duration::from_millis(50)).await;
        ask_to_campaign(target, &addr, node.peer_tls.clone()).await?;
        wait_for_leader(node, |l| l != node.id, Duration::from_secs(5)).await
    }
    .await;
    node.raft.runtime_config().heartbeat(true);
    node.transferring.store(false, Ordering::SeqCst);
    if let Err(e) = &result {
        warn!(node = node.id, target, error = %e, "leadership transfer failed");
    }
    result
}

async fn wait_for_leader(
    node: &Node,
    ok: impl Fn(u64) -> bool,
    within: Duration,
) -> Result<u64, NodeError> {
    let deadline = Instant::now() + within;
    let mut metrics = node.raft.metrics();
    loop {
        {
            let m = metrics.borrow_and_update();
            if let Some(l) = m.current_leader {
                if ok(l) && (l != node.id || m.state == ServerState::Leader) {
                    return Ok(l);
                }
            }
        }
        if tokio::time::timeout_at(deadline, metrics.changed())
            .await
            .is_err()
        {
            return Err(NodeError::Unavailable(format!(
                "no new leader within {within:?}"
            )));
        }
    }
}

/// Asks node `to` (at its peer address `addr`) to campaign now, over the
/// peer port (with the cluster's mutual TLS when it is on).
pub async fn ask_to_campaign(
    to: u64,
    addr: &str,
    tls: Option<tonic::transport::ClientTlsConfig>,
) -> Result<(), NodeError> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| NodeError::InvalidArgument(format!("bad address {addr:?}: {e}")))?
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(5));
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| NodeError::InvalidArgument(format!("peer TLS: {e}")))?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| NodeError::Unavailable(format!("cannot reach node {to} at {addr}: {e}")))?;
    ClusterClient::new(channel)
        .transfer_leader(TransferLeaderRequest { to_node_id: to })
        .await
        .map_err(|s| {
            NodeError::Unavailable(format!("node {to} refused to campaign: {}", s.message()))
        })?;
    Ok(())
}

/// While this node leads with its data dir below the reserve, hands
/// leadership to a full member that has room (asked with `Probe`), the
/// most caught-up first: a leader short of space would otherwise refuse
/// every new session and acquire while its followers could serve them. It
/// refuses (`NO_SPACE`) only while no other voter has room. Runs until
/// `stop`.
pub async fn move_leadership_when_low(
    node: std::sync::Arc<Node>,
    network: crate::raft::network::PeerNetwork,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut said = std::time::Instant::now() - Duration::from_secs(60);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if !node.is_leader() || !node.space().is_low() {
            continue;
        }
        let m = node.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let repl = m.replication.clone().unwrap_or_default();
        let mut with_room = Vec::new();
        for v in membership.voter_ids().filter(|v| *v != node.id()) {
            let Some(info) = membership.get_node(&v) else {
                continue;
            };
            if let Ok(a) = network.probe(v, &info.peer_addr).await {
                if a.space_low == Some(false)
                    && a.standing == raftlock_store::data_dir::Standing::Member
                {
                    with_room.push((repl.get(&v).cloned().flatten().map(|l| l.index), v));
                }
            }
        }
        let Some((_, target)) = with_room.into_iter().max() else {
            if said.elapsed() >= Duration::from_secs(30) {
                tracing::warn!(
                    node = node.id(),
                    "NO_SPACE: this leader is below its free-space reserve and no other voter reports room: refusing new sessions, acquires and takes until space is freed"
                );
                said = std::time::Instant::now();
            }
            continue;
        };
        tracing::warn!(
            node = node.id(),
            target,
            "this leader's data dir is below its free-space reserve: handing leadership to node {target}, which has room"
        );
        metrics::counter!("raftlock_space_leadership_handoffs_total").increment(1);
        if let Err(e) = transfer_leadership(&node, target).await {
            tracing::warn!(node = node.id(), target, error = %e, "could not hand leadership over; trying again");
        }
    }
}
