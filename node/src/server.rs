//! Starting and stopping a node: open and check the data dir, start Raft,
//! bootstrap on a first start, serve peers and clients, and on shutdown
//! hand leadership over before stopping.

use crate::auth::{Authenticate, Authenticator};
use crate::config::{cluster_id, NodeConfig};
use crate::confirm::Confirmer;
use crate::grpc::{cluster::ClusterService, election::ElectionService, lock::LockService};
use crate::grpc::{raft::PeerService, session::SessionService};
use crate::limits::ConnectionLimitLayer;
use crate::locks::{lease::LeaseDriver, waits::Waits, Locks};
use crate::network::PeerNetwork;
use crate::node::Node;
use raftlock_proto::v1::{
    cluster_server::ClusterServer, election_server::ElectionServer, lock_server::LockServer,
    raft_server::RaftServer, rate_limit_server::RateLimitServer, session_server::SessionServer,
};
use raftlock_store::data_dir::{DataDir, DataDirError};
use raftlock_store::{open_storage_with, NodeInfo, Raft};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tracing::{info, warn};

/// Why a node could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory is unusable.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// Storage failed.
    #[error("storage: {0}")]
    Storage(String),
    /// Raft could not start.
    #[error("raft: {0}")]
    Raft(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// A server failed.
    #[error("server: {0}")]
    Serve(String),
    /// The auth file is unusable.
    #[error("{0}")]
    Auth(String),
    /// The TLS material is unusable.
    #[error("tls: {0}")]
    Tls(String),
}

/// A started node.
pub struct RunningNode {
    /// The node's shared handle.
    pub node: Arc<Node>,
    log: raftlock_store::wal::Wal,
    /// Holds the data dir's lock for as long as the node runs.
    _data: Arc<std::sync::Mutex<DataDir>>,
    stop: watch::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
}

/// Opens the data dir, starts Raft and the listeners.
pub async fn start(config: NodeConfig) -> Result<RunningNode, StartError> {
    // Before the storage opens: loading the snapshot records how long it took.
    crate::admin::recorder();
    let cluster = (!config.initial_cluster.is_empty()).then(|| cluster_id(&config.initial_cluster));
    let data = DataDir::open(&config.data_dir, config.id, cluster.as_deref())?;
    if let Some(delay) = config.fault_sync_delay {
        warn!(
            node = config.id,
            ?delay,
            "FAULT INJECTION: every sync of the log is delayed"
        );
    }
    if config.fault_lose_unsynced {
        warn!(
            node = config.id,
            "FAULT INJECTION: log writes stay in memory until synced; a crash of this node loses them as a power loss would"
        );
    }
    #[cfg(feature = "planted-bugs")]
    let planted = plant_from_env()?;
    #[allow(unused_mut)]
    let (mut log, mut sm) = open_storage_with(
        &data,
        raftlock_store::Faults {
            lose_unsynced: config.fault_lose_unsynced,
            sync_delay: config.fault_sync_delay,
        },
        config.wal_segment_bytes,
    )
    .map_err(|e| StartError::Storage(e.to_string()))?;
    #[cfg(feature = "planted-bugs")]
    if planted {
        use openraft::storage::RaftLogStorage;
        let state = log
            .get_log_state()
            .await
            .map_err(|e| StartError::Storage(e.to_string()))?;
        raftlock_store::planted::set_restart_index(state.last_log_id.map(|l| l.index).unwrap_or(0));
    }
    let log_stats = log.stats();
    let shared = sm.shared();
    let joining = data.identity().joining;
    let data = Arc::new(std::sync::Mutex::new(data));
    let cluster_identity = crate::cluster_identity::ClusterIdentity::new(config.id, data.clone());
    let auth = crate::auth::shared(match &config.auth_file {
        Some(path) => Authenticator::load(path).map_err(|e| StartError::Auth(e.to_string()))?,
        None => Authenticator::disabled(),
    });

    let raft_config = openraft::Config {
        cluster_name: "raftlock".into(),
        heartbeat_interval: config.heartbeat.as_millis() as u64,
        election_timeout_min: config.election_timeout.as_millis() as u64,
        election_timeout_max: config.election_timeout.as_millis() as u64 * 2,
        install_snapshot_timeout: 10_000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(config.snapshot_every),
        // Keep at most one snapshot interval of log behind a snapshot: a
        // follower further behind than that gets the snapshot instead.
        max_in_snapshot_log_to_keep: config.snapshot_every.min(1_000),
        // An AppendEntries must arrive within a heartbeat interval (openraft
        // times it out after that). A follower catching up after a restart
        // got 300 entries per request by default, which with 4 KiB of
        // metadata per grant took longer than that to encode, send and
        // decode, so catching up never finished.
        max_payload_entries: 32,
        ..Default::default()
    }
    .validate()
    .map_err(|e| StartError::Raft(e.to_string()))?;
    let leader_lease = Duration::from_millis(raft_config.election_timeout_max);
    // Nothing is applied before this node's log holds it durably: needed
    // once a leader replicates while it writes, harmless otherwise.
    sm.apply_after_flush(log.flushed());
    if config.leader_flush == crate::config::LeaderFlush::Parallel {
        log.flush_leader_appends_in_parallel(config.id);
    }
    if config.follower_flush == crate::config::FollowerFlush::Inline {
        log.flush_follower_appends_inline(config.id);
    }
    let network = PeerNetwork::new(&config.listen_peer, config.tls.peer_client())
        .cluster(cluster_identity.clone())
        .commit_at_most(log.flushed())
        .defer_commit_heartbeats(log.appended());
    let raft = Raft::new(
        config.id,
        Arc::new(raft_config),
        network.clone(),
        log.clone(),
        sm,
    )
    .await
    .map_err(|e| StartError::Raft(e.to_string()))?;

    let me = NodeInfo {
        peer_addr: config.advertise_peer.clone(),
        client_addr: config.advertise_client.clone(),
    };
    if joining {
        info!(
            node = config.id,
            "this data dir was set up to rejoin its cluster: waiting to be added as a learner (--initial-cluster is ignored)"
        );
    } else {
        bootstrap(&raft, &config, &me).await?;
    }

    let transferring = Arc::new(AtomicBool::new(false));
    let confirmer = Confirmer::start(
        config.id,
        raft.clone(),
        Duration::from_secs(3),
        transferring.clone(),
    );
    let (stop, stopped) = watch::channel(false);
    let write_timeout = Duration::from_secs(5);
    let batcher = crate::batch::Batcher::start(
        config.id,
        raft.clone(),
        write_timeout,
        config.proposals_in_flight,
        config.max_batch_commands,
    );
    let (cut_off_tx, cut_off_rx) = tokio::sync::watch::channel(false);
    let shutting_down = Arc::new(AtomicBool::new(false));
    let node = Arc::new(Node {
        id: config.id,
        raft: raft.clone(),
        state: shared.clone(),
        confirmer,
        write_timeout,
        leader_lease,
        transferring: transferring.clone(),
        shutting_down: shutting_down.clone(),
        stopping: stopped.clone(),
        cluster_id: cluster_identity.clone(),
        limits: config.limits.clone(),
        connections: Default::default(),
        peer_tls: config.tls.peer_client(),
        batcher,
        log_stats,
        space: Default::default(),
        cut_off: cut_off_rx,
    });
    tokio::spawn(crate::node::watch_quorum(
        raft.clone(),
        config.id,
        leader_lease,
        config.heartbeat,
        [transferring.clone(), shutting_down],
        cut_off_tx,
        stop.subscribe(),
    ));
    tokio::spawn(node.space.clone().watch(
        config.data_dir.clone(),
        config.space_reserve,
        Duration::from_secs(1),
        stop.subscribe(),
    ));
    let waits = Arc::new(Waits::default());
    {
        let waits = waits.clone();
        shared.observe(move |batch| waits.on_changes(batch));
    }
    let leases = LeaseDriver::new(node.clone());
    {
        // Weak: the state (through its observers) must not keep the driver,
        // and with it the node, alive.
        let leases = Arc::downgrade(&leases);
        shared.observe(move |batch| {
            if let Some(leases) = leases.upgrade() {
                leases.on_changes(batch);
            }
        });
    }
    tokio::spawn(leases.clone().run());
    let watches = crate::locks::watch::WatchHub::start(shared.clone(), config.watch_history);
    let locks = Locks::new(node.clone(), waits.clone(), leases, watches);

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
            RaftServer::new(PeerService::new(
                raft.clone(),
                stopped.clone(),
                cluster_identity.clone(),
            ))
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20),
        )
        // Also on the peer port, so a leader handing over can ask its
        // successor to campaign at an address it is sure to reach.
        .add_service(InterceptedService::new(
            ClusterServer::new(ClusterService::new(node.clone())),
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
    tokio::spawn(crate::reload::run(
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
    let routes =
        tonic::service::Routes::from(crate::http::router(locks.clone(), auth.clone(), max))
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(InterceptedService::new(
                SessionServer::new(SessionService::new(locks.clone()))
                    .max_decoding_message_size(max),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                LockServer::new(LockService::new(locks.clone())).max_decoding_message_size(max),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                ElectionServer::new(ElectionService::new(locks.clone()))
                    .max_decoding_message_size(max),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                RateLimitServer::new(crate::grpc::ratelimit::RateLimitService::new(locks.clone()))
                    .max_decoding_message_size(max),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                ClusterServer::new(ClusterService::new(node.clone()))
                    .max_decoding_message_size(max),
                authenticate,
            ));
    let client_router = client_builder
        .accept_http1(true)
        .layer(crate::grpc::metrics::GrpcMetricsLayer)
        .layer(ConnectionLimitLayer {
            counts: node.connections.clone(),
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
    let servers = vec![peer_server, client_server];
    let handle = crate::admin::recorder();
    tokio::spawn(crate::admin::track(node.clone(), waits));
    for (port, expiry) in config.tls.expiries() {
        metrics::gauge!("raftlock_tls_cert_expiry_timestamp_seconds", "port" => port)
            .set(expiry as f64);
    }
    if let Some(addr) = &config.listen_metrics {
        let listener = bind(addr).await?;
        let (node, stopped) = (node.clone(), stop.subscribe());
        let addr = addr.clone();
        let ui = crate::ui::Ui {
            locks: locks.clone(),
            auth: auth.clone(),
        };
        tokio::spawn(async move {
            if let Err(e) = crate::admin::serve(listener, node, handle, ui, stopped).await {
                warn!(addr = %addr, error = %e, "admin listener failed");
            }
        });
    }
    info!(
        node = config.id,
        client = %config.listen_client,
        peer = %config.listen_peer,
        metrics = config.listen_metrics.as_deref().unwrap_or("off"),
        client_tls = config.tls.client_enabled(),
        peer_tls = config.tls.peer_client().is_some(),
        auth = auth.load().enabled(),
        data_dir = %config.data_dir.display(),
        "raftlockd serving"
    );
    Ok(RunningNode {
        node,
        log,
        _data: data,
        stop,
        servers,
    })
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

async fn bind(addr: &str) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen {
            addr: addr.to_owned(),
            source,
        })
}

/// Initializes the cluster on a first start: only when this node's Raft
/// state is empty (no log, no vote) and `--initial-cluster` names members.
/// Every member may do this with the same list; openraft accepts the same
/// initial membership from each. Later starts recover from the data dir.
async fn bootstrap(raft: &Raft, config: &NodeConfig, me: &NodeInfo) -> Result<(), StartError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
    if initialized || config.initial_cluster.is_empty() {
        if initialized && !config.initial_cluster.is_empty() {
            info!(
                node = config.id,
                "recovering from data dir; --initial-cluster is ignored"
            );
        }
        return Ok(());
    }
    let members = crate::config::member_nodes(&config.initial_cluster);
    if members.get(&config.id) != Some(me) {
        warn!(node = config.id, advertised = %me, "--initial-cluster gives this node other addresses than it advertises");
    }
    info!(
        node = config.id,
        members = members.len(),
        "bootstrapping a new cluster"
    );
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        Err(openraft::error::RaftError::APIError(e)) => {
            // Another member's initial entry reached us first: same cluster.
            info!(node = config.id, reason = %e, "cluster already initialized");
            Ok(())
        }
        Err(e) => Err(StartError::Raft(e.to_string())),
    }
}

impl RunningNode {
    /// The log failed a write or a sync: this node can no longer make
    /// anything durable, so it stops at once, as etcd does. A leader that
    /// stayed up would keep its followers from electing another (its
    /// heartbeats go on) while no write could commit; stopped, it lets them
    /// elect a leader within an election timeout. Its data dir is read back
    /// on the next start, never written again by this process (a failed
    /// `fdatasync` may have dropped pages the file no longer holds).
    async fn stop_on_disk_failure(&self) -> StartError {
        let why = self.log.failed().borrow().clone().unwrap_or_default();
        tracing::error!(
            node = self.node.id,
            error = %why,
            "the write-ahead log failed: stopping this node so that the others elect a leader; fix the disk (docs/operations.md, \"When a disk fails\") and start it again"
        );
        self.node.raft.runtime_config().elect(false);
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.node.raft.shutdown()).await;
        StartError::Storage(format!(
            "the write-ahead log failed ({why}); the node stopped so that the others elect a leader"
        ))
    }

    /// Serves until `signal` resolves, then shuts down gracefully: a leader
    /// hands leadership to a caught-up follower first, then listeners stop,
    /// Raft stops, and the database is flushed.
    /// A failed write or sync of the log ends it at once with an error.
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), StartError> {
        let mut servers = std::mem::take(&mut self.servers);
        let first_to_end = futures::future::select_all(servers.iter_mut());
        let mut failed = self.log.failed();
        tokio::select! {
            _ = signal => {}
            (res, i, _) = first_to_end => {
                let which = if i == 0 { "peer" } else { "client" };
                return Err(StartError::Serve(format!("{which} server ended: {res:?}")));
            }
            Ok(_) = failed.wait_for(|f| f.is_some()) => {
                return Err(self.stop_on_disk_failure().await);
            }
        }
        info!(node = self.node.id, "shutting down");
        self.node.shutting_down.store(true, Ordering::SeqCst);
        if self.node.is_leader() {
            let voters = self
                .node
                .raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .voter_ids()
                .count();
            if voters > 1 {
                match tokio::time::timeout(
                    Duration::from_secs(8),
                    crate::transfer::transfer_leadership(&self.node, 0),
                )
                .await
                {
                    Ok(Ok(l)) => info!(
                        node = self.node.id,
                        new_leader = l,
                        "handed leadership over"
                    ),
                    Ok(Err(e)) => {
                        warn!(node = self.node.id, error = %e, "could not hand leadership over")
                    }
                    Err(_) => warn!(node = self.node.id, "leadership handover timed out"),
                }
            }
        }
        // A node on its way out must not campaign again: with its listeners
        // closing it would stop hearing the new leader and win an election
        // it cannot serve.
        self.node.raft.runtime_config().elect(false);
        let _ = self.stop.send(true);
        // Keep-alive streams end themselves on `stop` with the new leader's
        // address, so the drain can be short; a call still in flight when
        // it ends is retried by its client elsewhere under the same
        // request id.
        for s in servers {
            let _ = tokio::time::timeout(Duration::from_millis(500), s).await;
        }
        if let Err(e) = self.node.raft.shutdown().await {
            warn!(node = self.node.id, error = %e, "raft shutdown");
        }
        self.log
            .sync()
            .await
            .map_err(|e| StartError::Storage(e.to_string()))?;
        info!(node = self.node.id, "stopped");
        Ok(())
    }
}

/// Plants the bug `RAFTLOCK_PLANT` names (a build with the `planted-bugs`
/// feature only, for the harness's own tests).
#[cfg(feature = "planted-bugs")]
fn plant_from_env() -> Result<bool, StartError> {
    use raftlock_store::planted::{self, Bug};
    let Ok(name) = std::env::var("RAFTLOCK_PLANT") else {
        return Ok(false);
    };
    let bug = Bug::parse(&name).ok_or_else(|| {
        StartError::Storage(format!(
            "RAFTLOCK_PLANT={name:?} is not one of {}",
            Bug::names().collect::<Vec<_>>().join(", ")
        ))
    })?;
    // Before the storage opens: some bugs live in its recovery.
    planted::plant(bug);
    warn!(bug = %name, "PLANTED BUG: this node is deliberately broken for a harness test");
    Ok(true)
}
