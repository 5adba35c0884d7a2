//! The node's listeners: the peer port (Raft, and the cluster calls a
//! leader handing over makes) and the client port (gRPC and HTTP/JSON on
//! one port, with health and reflection), each with its own TLS that a
//! reload can replace.

use super::StartError;
use crate::auth::{Authenticate, Authenticator};
use crate::config::NodeConfig;
use crate::grpc::{cluster::ClusterService, election::ElectionService, lock::LockService};
use crate::grpc::{raft::PeerService, session::SessionService};
use crate::limits::ConnectionLimitLayer;
use crate::locks::Locks;
use crate::raft::cluster_identity::ClusterIdentity;
use crate::raft::network::PeerNetwork;
use crate::raft::node::Node;
use raftlock_proto::v1::{
    cluster_server::ClusterServer, election_server::ElectionServer, lock_server::LockServer,
    raft_server::RaftServer, rate_limit_server::RateLimitServer, session_server::SessionServer,
};
use raftlock_store::Raft;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tracing::warn;

/// The servers that run until `stop` is sent: the peer port's, then the
/// client port's. Also starts the reload of certificates and the auth file.
#[allow(clippy::too_many_arguments)]
pub(super) async fn serve(
    config: &NodeConfig,
    node: &Arc<Node>,
    raft: Raft,
    locks: &Locks,
    auth: &crate::auth::SharedAuth,
    network: PeerNetwork,
    cluster_identity: ClusterIdentity,
    gate: crate::raft::standing::Gate,
    stop: &watch::Sender<bool>,
) -> Result<Vec<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>, StartError> {
    let stopped = stop.subscribe();
    let peer_listener = bind(&config.listen_peer).await?;
    let client_listener = bind(&config.listen_client).await?;
    let shutdown = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    // HTTP/2 pings find connections whose peer vanished without a FIN (a
    // crashed host, a dropped NAT entry) so their streams and slots are freed.
    let keepalive = |b: tonic::transport::Server| {
        b.http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)))
    };
    // Mutual TLS on the peer port is ours too, so that its certificates
    // can be replaced without a restart (reload.rs).
    let peer_tls = config
        .tls
        .peer_server_config()
        .map_err(|e| StartError::Tls(format!("peer port: {e}")))?
        .map(|c| Arc::new(arc_swap::ArcSwap::new(c)));
    let mut peer_builder = keepalive(tonic::transport::Server::builder());
    // Peers are trusted as a whole (their Raft messages could do anything):
    // the peer port is protected by mutual TLS with the cluster CA, or by
    // the network. Cluster calls arriving there act with full rights.
    let peer_caller = Authenticate(crate::auth::shared(Authenticator::disabled()));
    let peer_router = peer_builder
        .add_service(
            RaftServer::new(
                PeerService::new(
                    raft.clone(),
                    stopped.clone(),
                    cluster_identity.clone(),
                    gate,
                )
                .with_space(node.space().clone()),
            )
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20),
        )
        // Also on the peer port, so a leader handing over can ask its
        // successor to campaign at an address it is sure to reach.
        .add_service(InterceptedService::new(
            ClusterServer::new(ClusterService::new(crate::raft::admin::Admin::new(
                node.clone(),
            ))),
            peer_caller,
        ));
    let peer_server = match peer_tls.clone() {
        Some(tls) => tokio::spawn(peer_router.serve_with_incoming_shutdown(
            tls_incoming(peer_listener, tls),
            shutdown(stopped.clone()),
        )),
        None => tokio::spawn(
            peer_router
                .serve_with_incoming_shutdown(incoming(peer_listener), shutdown(stopped.clone())),
        ),
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<SessionServer<SessionService>>().await;
    health.set_serving::<LockServer<LockService>>().await;
    health
        .set_serving::<ElectionServer<ElectionService>>()
        .await;
    health.set_serving::<ClusterServer<ClusterService>>().await;
    health
        .set_serving::<RateLimitServer<crate::grpc::ratelimit::RateLimitService>>()
        .await;
    // Both reflection versions: grpcurl speaks v1, many libraries
    // (Python's grpcio-reflection among them) still v1alpha.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(raftlock_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection()
        .build_v1()
        .map_err(|e| StartError::Serve(format!("reflection: {e}")))?;
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .map_err(|e| StartError::Serve(format!("reflection: {e}")))?;
    let limits = &config.limits;
    let client_builder = keepalive(tonic::transport::Server::builder())
        .http2_max_header_list_size(limits.max_metadata_bytes)
        // The protocol's own bound sits above ours (calls plus keep-alive
        // and observe streams, which stay open), so the per-connection
        // limits answer first, with a status that says what happened.
        .max_concurrent_streams(
            (limits.max_concurrent_requests_per_connection as u32)
                .saturating_add(limits.max_keepalive_streams_per_connection as u32)
                .saturating_add(64),
        );
    // TLS on the client port is ours rather than tonic's, so that it can
    // offer HTTP/1.1 beside h2 (see Tls::client_server_config), and so
    // that its certificates can be replaced without a restart.
    let client_tls = config
        .tls
        .client_server_config()
        .map_err(|e| StartError::Tls(format!("client port: {e}")))?
        .map(|c| Arc::new(arc_swap::ArcSwap::new(c)));
    tokio::spawn(crate::ops::reload::run(
        config.clone(),
        auth.clone(),
        client_tls.clone(),
        peer_tls.map(|t| (t, network)),
        stop.subscribe(),
    ));
    let authenticate = Authenticate(auth.clone());
    let max = limits.max_request_bytes;
    // One port for gRPC and the HTTP/JSON API: requests are routed by path
    // (gRPC's are /package.Service/Method), so a leader's client address is
    // where both kinds of client retry.
    let routes = tonic::service::Routes::from(crate::http::router(
        locks.clone(),
        ClusterService::new(crate::raft::admin::Admin::new(node.clone())),
        auth.clone(),
        max,
    ))
    .add_service(health_service)
    .add_service(reflection_v1)
    .add_service(reflection_v1alpha)
    .add_service(InterceptedService::new(
        SessionServer::new(SessionService::new(
            locks.clone(),
            node.connections().clone(),
        ))
        .max_decoding_message_size(max),
        authenticate.clone(),
    ))
    .add_service(InterceptedService::new(
        LockServer::new(LockService::new(locks.clone(), node.connections().clone()))
            .max_decoding_message_size(max),
        authenticate.clone(),
    ))
    .add_service(InterceptedService::new(
        ElectionServer::new(ElectionService::new(
            locks.clone(),
            node.connections().clone(),
        ))
        .max_decoding_message_size(max),
        authenticate.clone(),
    ))
    .add_service(InterceptedService::new(
        RateLimitServer::new(crate::grpc::ratelimit::RateLimitService::new(locks.clone()))
            .max_decoding_message_size(max),
        authenticate.clone(),
    ))
    .add_service(InterceptedService::new(
        ClusterServer::new(ClusterService::new(crate::raft::admin::Admin::new(
            node.clone(),
        )))
        .max_decoding_message_size(max),
        authenticate,
    ));
    let client_router = client_builder
        .accept_http1(true)
        .layer(crate::grpc::metrics::GrpcMetricsLayer)
        .layer(ConnectionLimitLayer {
            counts: node.connections().clone(),
            limit: limits.max_concurrent_requests_per_connection,
        })
        .add_routes(routes);
    let client_server =
        match client_tls {
            Some(tls) => tokio::spawn(client_router.serve_with_incoming_shutdown(
                tls_incoming(client_listener, tls),
                shutdown(stopped),
            )),
            None => tokio::spawn(
                client_router
                    .serve_with_incoming_shutdown(incoming(client_listener), shutdown(stopped)),
            ),
        };
    Ok(vec![peer_server, client_server])
}

/// Accepted connections with `TCP_NODELAY` set. tonic applies
/// `Server::tcp_nodelay` only to listeners it binds itself, not to an
/// incoming stream: without this, Nagle's algorithm held a response's
/// trailing frames until the client's delayed ACK, about 40 ms, on roughly
/// one call in a hundred (the 1-client p99 was 47 ms while every proposal
/// committed in under 5 ms).
fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Connections of the client port through TLS, handshakes done off the
/// accept loop (a slow or silent client delays only itself) and bounded
/// in time. Ends when the server stops taking connections.
fn tls_incoming(
    listener: TcpListener,
    tls: Arc<arc_swap::ArcSwap<tokio_rustls::rustls::ServerConfig>>,
) -> impl futures::Stream<
    Item = Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>, std::io::Error>,
> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tx.closed() => return,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, say: wait rather than spin.
                    warn!(error = %e, "client port: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            // The configuration in force now: a reload applies to the
            // connections that come after it.
            let (acceptor, tx) = (tokio_rustls::TlsAcceptor::from(tls.load_full()), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(%remote, error = %e, "client port: TLS handshake failed")
                    }
                    Err(_) => tracing::debug!(%remote, "client port: TLS handshake timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

pub(super) async fn bind(addr: &str) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen {
            addr: addr.to_owned(),
            source,
        })
}
