//! The handle users hold: the cluster connection, plus the keep-alive and
//! pipeline machinery every clone and every session of one client shares,
//! and the calls that need no session.

use crate::error::Error;
use crate::keepalive::KeepAlives;
use crate::pipeline::Pipelines;
use crate::transport::{Cluster, Options};
use crate::types::{LockInfo, SessionInfo, Status, Validation};
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::session_client::SessionClient;
use std::sync::Arc;

/// A handle to a raftlock cluster. Cheap to clone; clones share connections
/// (one HTTP/2 connection per node, multiplexing every call) and the
/// cached leader.
///
/// ```no_run
/// # async fn f() -> Result<(), raftlock_client::Error> {
/// let client = raftlock_client::Client::connect(["127.0.0.1:7000", "127.0.0.1:7001"]).await?;
/// let status = client.status().await?;
/// println!("leader is node {}", status.leader_id);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) keepalives: Arc<KeepAlives>,
    pub(crate) pipelines: Pipelines,
}

impl Client {
    /// Connects to a cluster given some of its client endpoints
    /// (`host:port`), finding the leader among them.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), raftlock_client::Error> {
    /// let endpoints = std::env::var("RAFTLOCK_ENDPOINTS").unwrap_or("127.0.0.1:7000".into());
    /// let client = raftlock_client::Client::connect(endpoints.split(',')).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect<I, S>(endpoints: I) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::connect_with(endpoints, Options::default()).await
    }

    /// Connects as the `raftlock` CLI would, with the endpoints, TLS files,
    /// token and client name of its environment variables
    /// ([`Options::from_env`]).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), raftlock_client::Error> {
    /// let client = raftlock_client::Client::from_env().await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_env() -> Result<Client, Error> {
        let (endpoints, options) = Options::from_env()?;
        Self::connect_with(endpoints, options).await
    }

    /// [`Client::connect`] with explicit [`Options`].
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), raftlock_client::Error> {
    /// use raftlock_client::{Client, Options};
    /// let client = Client::connect_with(["127.0.0.1:7000"], Options::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with<I, S>(endpoints: I, options: Options) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let cluster = Arc::new(Cluster::new(endpoints, options)?);
        let client = Client {
            inner: Arc::new(Inner {
                keepalives: Arc::new(KeepAlives::new(cluster.clone())),
                pipelines: Pipelines::new(cluster.options.pipeline),
                cluster,
            }),
        };
        // Find the leader now so the first real call goes straight to it;
        // failing here means no node answered at all.
        client.status().await?;
        Ok(client)
    }

    /// The client's options.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) {
    /// println!("calls give up after {:?}", client.options().deadline);
    /// # }
    /// ```
    pub fn options(&self) -> &Options {
        &self.inner.cluster.options
    }

    /// The status of the node that answers (the leader when reachable),
    /// with live session, lock and waiter counts.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let s = client.status().await?;
    /// println!("term {} leader {} applied {}", s.term, s.leader_id, s.applied_index);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<Status, Error> {
        let t = self.options().attempt_timeout;
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                let mut req = tonic::Request::new(pb::StatusRequest {
                    linearizable_counts: true,
                });
                req.set_timeout(t);
                ClusterClient::new(ch).status(req).await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        let status = Status::from(resp.into_inner());
        self.inner.cluster.learn_limits(status.limits.as_ref());
        Ok(status)
    }

    /// Holders and waiters of a lock (a linearizable read on the leader).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let info = client.describe("payments/settle").await?;
    /// for h in &info.holders { println!("held by session {} with token {}", h.session_id, h.token); }
    /// # Ok(()) }
    /// ```
    pub async fn describe(&self, name: &str) -> Result<LockInfo, Error> {
        let t = self.options().attempt_timeout;
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                let mut req = tonic::Request::new(pb::DescribeRequest {
                    name: name.to_owned(),
                });
                req.set_timeout(t);
                LockClient::new(ch).describe(req).await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(name)))?;
        Ok(LockInfo::from(resp.into_inner()))
    }

    /// Locks whose names start with `prefix`, in name order (all pages): those
    /// held or waited for, and the semaphores whose size `resize` set, held
    /// or not (`resized`, with their `permits`).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// for lock in client.list("jobs/").await? { println!("{} {} holder(s)", lock.name, lock.holders.len()); }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>, Error> {
        let mut out = Vec::new();
        let mut page_token = String::new();
        loop {
            let t = self.options().attempt_timeout;
            let token = page_token.clone();
            let resp = self
                .inner
                .cluster
                .retry(self.options().deadline, |ch, _| {
                    let token = token.clone();
                    async move {
                        let mut req = tonic::Request::new(pb::ListRequest {
                            prefix: prefix.to_owned(),
                            page_token: token,
                            limit: raftlock_proto::limits::MAX_LIST_LIMIT,
                        });
                        req.set_timeout(t);
                        LockClient::new(ch).list(req).await
                    }
                })
                .await
                .map_err(|s| Error::from_status(&s, None, None))?
                .into_inner();
            out.extend(resp.locks.into_iter().map(LockInfo::from));
            if resp.next_page_token.is_empty() {
                return Ok(out);
            }
            page_token = resp.next_page_token;
        }
    }

    /// Live sessions whose client names start with `prefix`, in creation
    /// order (all pages): who holds and waits for what, from where, and for
    /// how much longer. With authentication on, an identity that may not
    /// read every lock sees only its own sessions.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// for s in client.sessions("billing").await? {
    ///     println!("{} {}@{} holds {:?}", s.session_id, s.pid, s.host, s.held);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn sessions(&self, prefix: &str) -> Result<Vec<SessionInfo>, Error> {
        let mut out = Vec::new();
        let mut page_token = 0;
        loop {
            let t = self.options().attempt_timeout;
            let resp = self
                .inner
                .cluster
                .retry(self.options().deadline, |ch, _| async move {
                    let mut req = tonic::Request::new(pb::ListSessionsRequest {
                        client_name_prefix: prefix.to_owned(),
                        page_token,
                        limit: raftlock_proto::limits::MAX_LIST_LIMIT,
                    });
                    req.set_timeout(t);
                    SessionClient::new(ch).list(req).await
                })
                .await
                .map_err(|s| Error::from_status(&s, None, None))?
                .into_inner();
            out.extend(resp.sessions.into_iter().map(SessionInfo::from));
            if resp.next_page_token == 0 {
                return Ok(out);
            }
            page_token = resp.next_page_token;
        }
    }

    /// Whether `token` belongs to a current holder of `name` (Chubby's
    /// CheckSequencer): a linearizable read on the leader.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// if !client.validate("payments/settle", 4711).await?.valid { println!("stale holder"); }
    /// # Ok(()) }
    /// ```
    pub async fn validate(&self, name: &str, token: u64) -> Result<Validation, Error> {
        let t = self.options().attempt_timeout;
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                let mut req = tonic::Request::new(pb::ValidateRequest {
                    name: name.to_owned(),
                    token,
                });
                req.set_timeout(t);
                LockClient::new(ch).validate(req).await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(name)))?
            .into_inner();
        Ok(Validation {
            valid: resp.valid,
            current_token: resp.current_token,
        })
    }
}
