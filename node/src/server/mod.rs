//! Starting and stopping a node. [`start`] opens the storage
//! (`storage`: the data dir, locked for this process, the log and the state
//! machine), starts Raft on it (`crate::raft::start`), bootstraps on a first
//! start, starts the lock service on the node ([`Locks::start`]) and serves
//! peers and clients (`listen`) and the admin port. [`RunningNode`] runs
//! until a signal or a disk failure, and on shutdown hands leadership over
//! before stopping.

mod listen;
mod storage;

use crate::auth::Authenticator;
use crate::config::NodeConfig;
use crate::locks::Locks;
use crate::raft::node::Node;
use raftlock_store::data_dir::{DataDir, DataDirError};
use raftlock_store::NodeInfo;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
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
    _data: Arc<parking_lot::Mutex<DataDir>>,
    stop: watch::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
}

/// Opens the data dir, starts Raft and the listeners.
pub async fn start(config: NodeConfig) -> Result<RunningNode, StartError> {
    // Before the storage opens: loading the snapshot records how long it took.
    crate::ops::metrics::recorder();
    let (data, log, sm) = storage::open(&config).await?;
    if let Some(limit) = config.disk_stall_timeout {
        log.end_on_stall(limit);
    }
    let joining = data.identity().joining;
    let data = Arc::new(parking_lot::Mutex::new(data));
    let gate = crate::raft::standing::Gate::new(config.id, data.clone());
    let cluster_identity =
        crate::raft::cluster_identity::ClusterIdentity::new(config.id, data.clone());
    let auth = crate::auth::shared(match &config.auth_file {
        Some(path) => Authenticator::load(path).map_err(|e| StartError::Auth(e.to_string()))?,
        None => Authenticator::disabled(),
    });

    let (stop, stopped) = watch::channel(false);
    let started = crate::raft::start::start(
        crate::raft::start::Settings {
            id: config.id,
            heartbeat: config.heartbeat,
            election_timeout: config.election_timeout,
            snapshot_every: config.snapshot_every,
            proposals_in_flight: config.proposals_in_flight,
            max_batch_commands: config.max_batch_commands,
            leader_flushes_in_parallel: config.leader_flush == crate::config::LeaderFlush::Parallel,
            follower_flushes_inline: config.follower_flush == crate::config::FollowerFlush::Inline,
            listen_peer: config.listen_peer.clone(),
            peer_tls: config.tls.peer_client(),
            limits: config.limits.clone(),
            data_dir: config.data_dir.clone(),
            space_reserve: config.space_reserve,
        },
        log.clone(),
        sm,
        cluster_identity.clone(),
        stopped.clone(),
    )
    .await
    .map_err(|e| StartError::Raft(e.to_string()))?;
    let (node, raft, network) = (started.node, started.raft, started.network);

    let me = NodeInfo {
        peer_addr: config.advertise_peer.clone(),
        client_addr: config.advertise_client.clone(),
    };
    if joining {
        info!(
            node = config.id,
            "this data dir was set up to rejoin its cluster: waiting to be added as a learner (--initial-cluster is ignored)"
        );
    } else if gate.is_member() {
        storage::bootstrap(&raft, &config, &me).await?;
    } else {
        // Not a vote before its peers have said what they hold; set here,
        // before the peer port opens, not in the task that lifts it.
        raft.runtime_config().elect(false);
        let earn = crate::raft::standing::earn(
            gate.clone(),
            raft.clone(),
            crate::config::member_nodes(&config.initial_cluster),
            network.clone(),
            log.flushed(),
            stopped.clone(),
        );
        let (raft, config, me) = (raft.clone(), config.clone(), me.clone());
        tokio::spawn(async move {
            if earn.await == crate::raft::standing::Earned::Formed {
                if let Err(e) = storage::bootstrap(&raft, &config, &me).await {
                    tracing::error!(node = config.id, error = %e, "could not form the cluster");
                }
            }
        });
    }

    let locks = Locks::start(node.clone(), config.watch_history);

    let servers = listen::serve(
        &config,
        &node,
        raft,
        &locks,
        &auth,
        network,
        cluster_identity,
        gate,
        &stop,
    )
    .await?;
    let handle = crate::ops::metrics::recorder();
    let admin = crate::raft::admin::Admin::new(node.clone());
    tokio::spawn(crate::ops::admin::track(
        admin.clone(),
        locks.waits().clone(),
    ));
    for (port, expiry) in config.tls.expiries() {
        metrics::gauge!("raftlock_tls_cert_expiry_timestamp_seconds", "port" => port)
            .set(expiry as f64);
    }
    if let Some(addr) = &config.listen_metrics {
        let listener = listen::bind(addr).await?;
        let (admin, stopped) = (admin.clone(), stop.subscribe());
        let addr = addr.clone();
        let ui = crate::ops::ui::Ui {
            locks: locks.clone(),
            node: admin.clone(),
            auth: auth.clone(),
        };
        tokio::spawn(async move {
            if let Err(e) = crate::ops::admin::serve(listener, admin, handle, ui, stopped).await {
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
            node = self.node.id(),
            error = %why,
            "the write-ahead log failed: stopping this node so that the others elect a leader; fix the disk (docs/operations.md, \"When a disk fails\") and start it again"
        );
        self.node.stop_campaigning();
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.node.shutdown_raft()).await;
        StartError::Storage(format!(
            "the write-ahead log failed ({why}); the node stopped so that the others elect a leader"
        ))
    }

    /// Raft's core stopped by itself: stop the rest and report why.
    async fn stop_on_core_failure(&self) -> StartError {
        let why = self.node.core_stopped().unwrap_or_default();
        tracing::error!(
            node = self.node.id(),
            error = %why,
            "raft's core stopped on an error: stopping this node; fix the cause and start it again (docs/operations.md, \"When a disk fails\")"
        );
        let _ = self.stop.send(true);
        StartError::Storage(format!("raft's core stopped: {why}"))
    }

    /// Serves until `signal` resolves, then shuts down gracefully: a leader
    /// hands leadership to a caught-up follower first, then listeners stop,
    /// Raft stops, and the database is flushed.
    /// A failed write or sync of the log ends it at once with an error.
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), StartError> {
        let mut servers = std::mem::take(&mut self.servers);
        let first_to_end = futures::future::select_all(servers.iter_mut());
        let mut failed = self.log.failed();
        // Looked at once a second: Raft's metrics change with every entry,
        // and a watch of them would wake this task for each.
        let core_stopped = async {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            while self.node.core_stopped().is_none() {
                every.tick().await;
            }
        };
        tokio::select! {
            _ = signal => {}
            (res, i, _) = first_to_end => {
                let which = if i == 0 { "peer" } else { "client" };
                return Err(StartError::Serve(format!("{which} server ended: {res:?}")));
            }
            Ok(_) = failed.wait_for(|f| f.is_some()) => {
                return Err(self.stop_on_disk_failure().await);
            }
            // openraft stops its core on a storage error outside the log
            // (a snapshot that cannot be written, say) and leaves the
            // process up; a node that can no longer apply or vote must
            // exit, so that its supervisor restarts it.
            _ = core_stopped => {
                return Err(self.stop_on_core_failure().await);
            }
        }
        info!(node = self.node.id(), "shutting down");
        self.node.begin_shutdown();
        if self.node.is_leader() {
            let voters = self
                .node
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .voter_ids()
                .count();
            if voters > 1 {
                match tokio::time::timeout(
                    Duration::from_secs(8),
                    crate::raft::transfer::transfer_leadership(&self.node, 0),
                )
                .await
                {
                    Ok(Ok(l)) => info!(
                        node = self.node.id(),
                        new_leader = l,
                        "handed leadership over"
                    ),
                    Ok(Err(e)) => {
                        warn!(node = self.node.id(), error = %e, "could not hand leadership over")
                    }
                    Err(_) => warn!(node = self.node.id(), "leadership handover timed out"),
                }
            }
        }
        // A node on its way out must not campaign again: with its listeners
        // closing it would stop hearing the new leader and win an election
        // it cannot serve.
        self.node.stop_campaigning();
        let _ = self.stop.send(true);
        // Keep-alive streams end themselves on `stop` with the new leader's
        // address, so the drain can be short; a call still in flight when
        // it ends is retried by its client elsewhere under the same
        // request id.
        for s in servers {
            let _ = tokio::time::timeout(Duration::from_millis(500), s).await;
        }
        if let Err(e) = self.node.shutdown_raft().await {
            warn!(node = self.node.id(), error = %e, "raft shutdown");
        }
        self.log
            .sync()
            .await
            .map_err(|e| StartError::Storage(e.to_string()))?;
        info!(node = self.node.id(), "stopped");
        Ok(())
    }
}
