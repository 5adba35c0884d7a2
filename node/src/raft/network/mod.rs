//! Raft traffic between nodes over tonic: one reused HTTP/2 channel per
//! peer, openraft messages encoded binary inside `RaftPayload.data` (JSON
//! to a peer of an older release, `peer_codec.rs`), every call bounded by
//! the deadline openraft gives it. Appends (and the heartbeats that carry
//! the commit index) go over one long-lived `AppendEntriesStream` per
//! peer; votes and snapshots are unary calls.
//!
//! A heartbeat whose only news is a higher commit index is not sent when
//! an append to the same follower is about to follow it: the append carries
//! that commit index anyway (see `PeerConnection::superseded`).

pub mod probe;
mod retry;
mod rpc;

use crate::raft::peer_codec;
use openraft::error::{NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::Vote;
use parking_lot::Mutex;
use raftlock_proto::v1::raft_client::RaftClient;
use raftlock_proto::v1::RaftPayload;
use raftlock_store::types::LogId;
use raftlock_store::{NodeId, NodeInfo, TypeConfig};
use rpc::rpc_error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// A Raft client that says which cluster it calls from.
type PeerClient = RaftClient<
    tonic::service::interceptor::InterceptedService<
        Channel,
        crate::raft::cluster_identity::SendClusterId,
    >,
>;

/// Makes connections to peers, caching one channel per (node, address).
#[derive(Clone, Default)]
pub struct PeerNetwork {
    channels: Arc<Mutex<HashMap<(NodeId, String), Channel>>>,
    /// What each peer was found to lack (older releases), by node.
    lacks: Arc<Mutex<HashMap<NodeId, Arc<PeerLacks>>>>,
    /// Source address of outgoing peer connections: the peer listen IP when
    /// it is a specific one, so that a node's Raft traffic comes from the
    /// address it serves on. Firewall rules (and the fault-injection
    /// harness, which partitions nodes bound to 127.0.0.11, .12, ...) can
    /// then tell nodes apart; on loopback the kernel would otherwise pick
    /// 127.0.0.1 for every node.
    local_ip: Option<std::net::IpAddr>,
    /// Mutual TLS with the cluster CA, when the peer port uses it;
    /// replaced whole on a reload.
    tls: Option<Arc<arc_swap::ArcSwap<tonic::transport::ClientTlsConfig>>>,
    /// This node's durable log point: the commit index sent to followers
    /// never passes it (see `Wal::flush_leader_appends_in_parallel`).
    flushed: Option<tokio::sync::watch::Receiver<Option<LogId>>>,
    /// This node's log as appended: a commit-only heartbeat is dropped when
    /// it shows an append on its way (see `PeerConnection::superseded`).
    appended: Option<tokio::sync::watch::Receiver<Option<LogId>>>,
    /// This node's cluster id, sent with every call.
    cluster: Option<crate::raft::cluster_identity::ClusterIdentity>,
    /// How soon an unreachable peer is tried again early in an outage.
    retry: Duration,
}

/// How long a commit-only heartbeat waits for an append to carry its
/// commit index before it goes out alone. Under load the next append comes
/// well within it; on an idle cluster followers learn the last commit this
/// much later, which nobody waits for (they serve no reads of their own).
const COMMIT_HEARTBEAT_DEFER: Duration = Duration::from_millis(5);

impl PeerNetwork {
    /// Peer connections that originate from `listen_peer`'s IP (if it is a
    /// specific address, not 0.0.0.0 or ::), over TLS when `tls` is given.
    pub fn new(listen_peer: &str, tls: Option<tonic::transport::ClientTlsConfig>) -> Self {
        let local_ip = listen_peer
            .parse::<std::net::SocketAddr>()
            .ok()
            .map(|a| a.ip())
            .filter(|ip| !ip.is_unspecified());
        PeerNetwork {
            local_ip,
            tls: tls.map(|t| Arc::new(arc_swap::ArcSwap::from_pointee(t))),
            ..Default::default()
        }
    }

    /// Sends `cluster`'s id with every call, so that a node of another
    /// cluster refuses them and a joining node learns it.
    pub fn cluster(mut self, cluster: crate::raft::cluster_identity::ClusterIdentity) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Uses `tls` for the connections made from now on (a reload of the
    /// peer certificates). The cached channels are dropped so the next
    /// call to each peer connects again with it; calls in flight finish on
    /// their old connection. Does nothing when the peer port has no TLS.
    pub fn replace_tls(&self, tls: tonic::transport::ClientTlsConfig) {
        if let Some(current) = &self.tls {
            current.store(Arc::new(tls));
            self.channels.lock().clear();
        }
    }

    /// Caps the commit index sent to followers at `flushed`, the last
    /// entry durable in this node's log. A leader that replicates entries
    /// while it writes them is counted by openraft as holding them before
    /// it does; a follower told of such a commit could apply an entry that
    /// a power loss of the leader then takes from the majority.
    pub fn commit_at_most(mut self, flushed: tokio::sync::watch::Receiver<Option<LogId>>) -> Self {
        self.flushed = Some(flushed);
        self
    }

    /// Lets commit-only heartbeats ride with the next append to the same
    /// follower when `appended`, this node's log, shows one coming.
    pub fn defer_commit_heartbeats(
        mut self,
        appended: tokio::sync::watch::Receiver<Option<LogId>>,
    ) -> Self {
        self.appended = Some(appended);
        self
    }

    fn channel(&self, target: NodeId, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut channels = self.channels.lock();
        if let Some(c) = channels.get(&(target, addr.to_owned())) {
            return Ok(c.clone());
        }
        // Lazy: connecting happens on first use and again after a failure,
        // so a peer that is down now does not block this node's start.
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))?;
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.load().as_ref().clone())?;
        }
        let channel = endpoint
            .connect_timeout(Duration::from_millis(500))
            .local_address(self.local_ip)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5))
            .connect_lazy();
        channels.insert((target, addr.to_owned()), channel.clone());
        Ok(channel)
    }
}

/// What a peer of an older release was found not to read.
#[derive(Default)]
struct PeerLacks {
    /// Binary messages: it is sent JSON.
    binary: AtomicBool,
    /// `AppendEntriesStream`: it is sent unary `AppendEntries`.
    append_stream: AtomicBool,
}

/// A connection to one peer.
pub struct PeerConnection {
    target: NodeId,
    client: Result<PeerClient, String>,
    lacks: Arc<PeerLacks>,
    flushed: Option<tokio::sync::watch::Receiver<Option<LogId>>>,
    /// The open `AppendEntriesStream`, if any: opened on the first append
    /// and again after it breaks.
    append_stream: Option<AppendStream>,
    appended: Option<tokio::sync::watch::Receiver<Option<LogId>>>,
    /// The vote and log point the follower confirmed in its last answer on
    /// this connection, if that answer was a success.
    confirmed: Option<(Vote<NodeId>, Option<LogId>)>,
    /// The highest commit index the follower has acknowledged hearing.
    commit_heard: Option<LogId>,
    /// See [`PeerNetwork::retry_unreachable_every`].
    retry: Duration,
}

/// An open `AppendEntriesStream`: requests go in `tx`, answers come back
/// on `rx` in the same order.
struct AppendStream {
    tx: tokio::sync::mpsc::Sender<RaftPayload>,
    rx: tonic::Streaming<RaftPayload>,
}

/// How an append over the stream went.
enum Streamed {
    /// The peer's encoded answer.
    Answer(RaftPayload),
    /// The peer has no such method (an older release).
    Unsupported,
    /// The stream failed; it is closed and reopened by the next append.
    Failed(tonic::Status),
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> Self::Network {
        let client = self
            .channel(target, &node.peer_addr)
            .map(|c| {
                let cluster = self.cluster.clone().unwrap_or_else(|| {
                    crate::raft::cluster_identity::ClusterIdentity::fixed(target, "")
                });
                RaftClient::with_interceptor(
                    c,
                    crate::raft::cluster_identity::SendClusterId(cluster),
                )
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20)
            })
            .map_err(|e| format!("bad peer address {:?}: {e}", node.peer_addr));
        let lacks = self.lacks.lock().entry(target).or_default().clone();
        PeerConnection {
            target,
            client,
            lacks,
            flushed: self.flushed.clone(),
            append_stream: None,
            appended: self.appended.clone(),
            confirmed: None,
            commit_heard: None,
            retry: self.retry,
        }
    }
}

/// Why a call to a peer failed, in the error type openraft's
/// `Unreachable` and `NetworkError` wrap.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct PeerCallFailed(String);

impl PeerConnection {
    /// Whether `rpc` is a heartbeat that only carries a higher commit index
    /// to a follower that already holds everything it names, while this
    /// node's log shows an append to the follower on its way: waits up to
    /// [`COMMIT_HEARTBEAT_DEFER`] for that.
    ///
    /// openraft 0.9 sends such a heartbeat to every follower after every
    /// commit, then the next append right behind it: two messages each way
    /// per entry instead of one, on every node the costliest part of an
    /// entry (socket writes, reads and thread wake-ups). The append that
    /// follows carries the same commit index (openraft puts its latest in
    /// every request), so the heartbeat is answered here as the follower
    /// answered the last append on this connection: success at the same
    /// log point, which openraft already counts. Nothing it learns is new
    /// or false but the time of the answer, which it uses only for a
    /// metric; its leadership checks (`ensure_linearizable`) open a
    /// connection of their own and are always sent. A heartbeat that
    /// carries no new commit (a follower's timer depends on those) or
    /// follows a failure is always sent, as is this one if no append comes.
    async fn superseded(&mut self, rpc: &AppendEntriesRequest<TypeConfig>) -> bool {
        let Some(appended) = &mut self.appended else {
            return false;
        };
        if !rpc.entries.is_empty()
            || self.confirmed != Some((rpc.vote, rpc.prev_log_id))
            || rpc.leader_commit <= self.commit_heard
        {
            return false;
        }
        let held = rpc.prev_log_id.map(|l| l.index);
        let coming = |last: &Option<LogId>| last.map(|l| l.index) > held;
        let superseded = matches!(
            tokio::time::timeout(COMMIT_HEARTBEAT_DEFER, appended.wait_for(coming)).await,
            Ok(Ok(_))
        );
        heartbeats(superseded).increment(1);
        superseded
    }

    /// Remembers what the follower confirmed with its answer to `rpc`.
    fn note_answer(
        &mut self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        answer: &Result<AppendEntriesResponse<NodeId>, impl Sized>,
    ) {
        let held = match answer {
            Ok(AppendEntriesResponse::Success) => {
                Some(rpc.entries.last().map(|e| e.log_id).or(rpc.prev_log_id))
            }
            Ok(AppendEntriesResponse::PartialSuccess(matching)) => Some(*matching),
            _ => None,
        };
        self.confirmed = held.map(|h| (rpc.vote, h));
        if held.is_some() && rpc.leader_commit > self.commit_heard {
            self.commit_heard = rpc.leader_commit;
        }
    }

    /// One attempt: encodes `req` in the chosen format and sends it.
    async fn send<Req: Serialize>(
        client: &mut PeerClient,
        method: &'static str,
        req: &Req,
        option: &RPCOption,
        binary: bool,
    ) -> Result<RaftPayload, tonic::Status> {
        let data = peer_codec::encode_request(req, binary).map_err(tonic::Status::internal)?;
        let mut request = tonic::Request::new(RaftPayload { data });
        request.set_timeout(option.hard_ttl());
        let call = async {
            match method {
                "vote" => client.vote(request).await,
                "append" => client.append_entries(request).await,
                _ => client.install_snapshot(request).await,
            }
        };
        match tokio::time::timeout(option.hard_ttl(), call).await {
            Ok(r) => r.map(|r| r.into_inner()),
            Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                "no answer within {:?}",
                option.hard_ttl()
            ))),
        }
    }

    /// Sends one request and decodes `Result<Resp, Err>` from the peer.
    async fn call<Req, Resp, Err>(
        &mut self,
        method: &'static str,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, NodeInfo, Err>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        Err: std::error::Error + DeserializeOwned,
    {
        let client = match &mut self.client {
            Ok(c) => c,
            Err(e) => {
                return Err(RPCError::Unreachable(Unreachable::new(&PeerCallFailed(
                    e.clone(),
                ))))
            }
        };
        let binary = !self.lacks.binary.load(Ordering::Relaxed);
        let reply = match Self::send(client, method, req, option, binary).await {
            // Only a node of an older release fails to decode a binary
            // request: speak JSON to it from now on.
            Err(status) if binary && status.code() == tonic::Code::InvalidArgument => {
                tracing::info!(
                    peer = self.target,
                    "peer reads only JSON (an older release): sending it JSON"
                );
                self.lacks.binary.store(true, Ordering::Relaxed);
                Self::send(client, method, req, option, false).await
            }
            other => other,
        };
        match reply {
            Ok(r) => self.decode(r),
            Err(status) => Err(rpc_error(status)),
        }
    }

    /// Decodes a peer's `Result<Resp, Err>`.
    // openraft's RaftNetwork fixes the error type; boxing it here would
    // only be undone by the caller.
    #[allow(clippy::result_large_err)]
    fn decode<Resp, Err>(&self, reply: RaftPayload) -> Result<Resp, RPCError<NodeId, NodeInfo, Err>>
    where
        Resp: DeserializeOwned,
        Err: std::error::Error + DeserializeOwned,
    {
        let result: Result<Resp, Err> = peer_codec::decode_reply(&reply.data)
            .map_err(|e| RPCError::Network(NetworkError::new(&PeerCallFailed(e))))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    /// Sends one append over the peer's `AppendEntriesStream`, opening it
    /// first if needed. A stream found broken before it answered (the peer
    /// restarted, the connection dropped) is reopened once: appends are
    /// idempotent, so sending one twice is harmless.
    async fn append_streamed(
        &mut self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        option: &RPCOption,
    ) -> Streamed {
        let client = match &mut self.client {
            Ok(c) => c,
            Err(e) => return Streamed::Failed(tonic::Status::unavailable(e.clone())),
        };
        // Moved into the first send; encoded again only for a retry.
        let mut data = match peer_codec::encode_request(rpc, true) {
            Ok(d) => Some(d),
            Err(e) => return Streamed::Failed(tonic::Status::internal(e)),
        };
        let stream = &mut self.append_stream;
        let attempt = async {
            for attempt in 0..2 {
                if stream.is_none() {
                    let (tx, rx) = tokio::sync::mpsc::channel(1);
                    let out = tokio_stream::wrappers::ReceiverStream::new(rx);
                    match client.append_entries_stream(out).await {
                        Ok(answers) => {
                            *stream = Some(AppendStream {
                                tx,
                                rx: answers.into_inner(),
                            })
                        }
                        Err(s) if s.code() == tonic::Code::Unimplemented => {
                            return Streamed::Unsupported
                        }
                        Err(s) => return Streamed::Failed(s),
                    }
                }
                let Some(open) = stream.as_mut() else {
                    continue;
                };
                let data = match data.take() {
                    Some(d) => d,
                    None => match peer_codec::encode_request(rpc, true) {
                        Ok(d) => d,
                        Err(e) => return Streamed::Failed(tonic::Status::internal(e)),
                    },
                };
                let payload = RaftPayload { data };
                if open.tx.send(payload).await.is_err() {
                    *stream = None;
                    continue;
                }
                match open.rx.message().await {
                    Ok(Some(answer)) => return Streamed::Answer(answer),
                    Ok(None) if attempt == 0 => *stream = None,
                    Ok(None) => {
                        *stream = None;
                        return Streamed::Failed(tonic::Status::unavailable(
                            "the peer ended the append stream",
                        ));
                    }
                    Err(s) => {
                        *stream = None;
                        return Streamed::Failed(s);
                    }
                }
            }
            Streamed::Failed(tonic::Status::unavailable("the append stream broke twice"))
        };
        match tokio::time::timeout(option.hard_ttl(), attempt).await {
            Ok(r) => r,
            Err(_) => {
                // Its answer may still come: it would pair with the next
                // request.
                self.append_stream = None;
                Streamed::Failed(tonic::Status::deadline_exceeded(format!(
                    "no answer within {:?}",
                    option.hard_ttl()
                )))
            }
        }
    }
}

impl PeerConnection {
    /// Sends `rpc` over the append stream, or as a unary call to a peer
    /// without one.
    async fn append_sent(
        &mut self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        option: &RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        let binary = !self.lacks.binary.load(Ordering::Relaxed);
        if binary && !self.lacks.append_stream.load(Ordering::Relaxed) {
            match self.append_streamed(rpc, option).await {
                Streamed::Answer(reply) => return self.decode(reply),
                Streamed::Failed(status) => return Err(rpc_error(status)),
                Streamed::Unsupported => {
                    tracing::info!(
                        peer = self.target,
                        "peer has no append stream (an older release): sending it unary appends"
                    );
                    self.lacks.append_stream.store(true, Ordering::Relaxed);
                }
            }
        }
        self.call("append", rpc, option).await
    }
}

/// `raftlock_commit_heartbeats_total`, by whether the heartbeat rode with
/// an append; registered once rather than looked up per heartbeat.
fn heartbeats(with_append: bool) -> &'static metrics::Counter {
    static COUNTERS: [std::sync::OnceLock<metrics::Counter>; 2] =
        [const { std::sync::OnceLock::new() }; 2];
    COUNTERS[usize::from(with_append)].get_or_init(|| {
        let sent = if with_append { "with_append" } else { "alone" };
        metrics::counter!("raftlock_commit_heartbeats_total", "sent" => sent)
    })
}

#[cfg(test)]
mod tests;
