//! The connection to a cluster: leader discovery, a cached leader, and
//! retries that follow the leader with exponential backoff and jitter.

use crate::error::Error;
use crate::types::{Grant, LockInfo, Status, Validation};
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::LEADER_METADATA_KEY;
use rand::Rng;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

/// Tuning for a [`Client`].
///
/// ```
/// use std::time::Duration;
/// let opts = raftlock_client::Options { deadline: Duration::from_secs(30), ..Default::default() };
/// assert!(opts.attempt_timeout < opts.deadline);
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// How long one logical call may take, retries included.
    pub deadline: Duration,
    /// How long one attempt may take (a waiting Acquire gets its wait on top).
    pub attempt_timeout: Duration,
    /// First retry delay; doubles up to `max_backoff`, with jitter.
    pub initial_backoff: Duration,
    /// Longest retry delay.
    pub max_backoff: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            deadline: Duration::from_secs(15),
            attempt_timeout: Duration::from_secs(6),
            initial_backoff: Duration::from_millis(25),
            max_backoff: Duration::from_millis(800),
        }
    }
}

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
    endpoints: Mutex<Vec<String>>,
    channels: Mutex<HashMap<String, Channel>>,
    leader: Mutex<Option<String>>,
    next: Mutex<usize>,
    pub(crate) options: Options,
}

fn normalize(endpoint: &str) -> String {
    endpoint
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

/// Whether a failed attempt should be retried elsewhere.
fn retryable(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    ) || (s.code() == tonic::Code::DeadlineExceeded && s.message().contains("Timeout expired"))
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
        let endpoints: Vec<String> = endpoints
            .into_iter()
            .map(|e| normalize(e.as_ref()))
            .filter(|e| !e.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(Error::NoEndpoints);
        }
        for e in &endpoints {
            Endpoint::from_shared(format!("http://{e}"))
                .map_err(|err| Error::BadEndpoint(e.clone(), err.to_string()))?;
        }
        let client = Client {
            inner: Arc::new(Inner {
                endpoints: Mutex::new(endpoints),
                channels: Mutex::new(HashMap::new()),
                leader: Mutex::new(None),
                next: Mutex::new(0),
                options,
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
        &self.inner.options
    }

    pub(crate) fn channel(&self, addr: &str) -> Result<Channel, Error> {
        let mut channels = self
            .inner
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Error::BadEndpoint(addr.to_owned(), e.to_string()))?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            // Frequent pings find a frozen or vanished node in about three
            // seconds, so calls stop waiting on it and go elsewhere.
            .http2_keep_alive_interval(Duration::from_secs(1))
            .keep_alive_timeout(Duration::from_secs(2))
            .keep_alive_while_idle(true)
            .connect_lazy();
        channels.insert(addr.to_owned(), channel.clone());
        Ok(channel)
    }

    /// The node to try next: the cached leader, else the endpoints in turn.
    pub(crate) fn target(&self) -> String {
        if let Some(l) = self
            .inner
            .leader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return l;
        }
        let endpoints = self
            .inner
            .endpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut next = self.inner.next.lock().unwrap_or_else(|p| p.into_inner());
        *next = (*next + 1) % endpoints.len();
        endpoints[*next].clone()
    }

    /// Learns from a failed attempt at `addr`: follow a leader hint, or
    /// forget `addr` as leader.
    pub(crate) fn learn(&self, addr: &str, status: &tonic::Status) -> bool {
        let hint = status
            .metadata()
            .get(LEADER_METADATA_KEY)
            .and_then(|v| v.to_str().ok())
            .map(normalize)
            .filter(|h| h != addr);
        let mut leader = self.inner.leader.lock().unwrap_or_else(|p| p.into_inner());
        match hint {
            Some(h) => {
                let mut endpoints = self
                    .inner
                    .endpoints
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                if !endpoints.contains(&h) {
                    endpoints.push(h.clone());
                }
                *leader = Some(h);
                true
            }
            None => {
                if leader.as_deref() == Some(addr) {
                    *leader = None;
                }
                false
            }
        }
    }

    /// Stops treating `addr` as the leader (it failed or timed out), so the
    /// next attempt tries another node.
    pub(crate) fn forget_leader(&self, addr: &str) {
        let mut leader = self.inner.leader.lock().unwrap_or_else(|p| p.into_inner());
        if leader.as_deref() == Some(addr) {
            *leader = None;
        }
    }

    pub(crate) fn remember_leader(&self, addr: &str) {
        *self.inner.leader.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr.to_owned());
    }

    /// Runs one logical call, retrying on other nodes until it succeeds, fails
    /// for good, or `deadline` passes. `f` gets a channel to the node to try.
    pub(crate) async fn retry<T, F, Fut>(
        &self,
        deadline: Duration,
        mut f: F,
    ) -> Result<T, tonic::Status>
    where
        F: FnMut(Channel, u32) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        let give_up = Instant::now() + deadline;
        let mut backoff = self.inner.options.initial_backoff;
        let mut attempt = 0u32;
        loop {
            let addr = self.target();
            let channel = self
                .channel(&addr)
                .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
            match f(channel, attempt).await {
                Ok(v) => {
                    self.remember_leader(&addr);
                    return Ok(v);
                }
                Err(s) if retryable(&s) => {
                    attempt += 1;
                    let hinted = self.learn(&addr, &s);
                    let now = Instant::now();
                    if now >= give_up {
                        return Err(s);
                    }
                    if !hinted {
                        let jitter = rand::thread_rng().gen_range(0.5..1.5);
                        let pause = backoff.mul_f64(jitter).min(give_up - now);
                        tokio::time::sleep(pause).await;
                        backoff = (backoff * 2).min(self.inner.options.max_backoff);
                    }
                }
                Err(s) => return Err(s),
            }
        }
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
        let t = self.inner.options.attempt_timeout;
        let resp = self
            .retry(self.inner.options.deadline, |ch, _| async move {
                let mut req = tonic::Request::new(pb::StatusRequest {
                    linearizable_counts: true,
                });
                req.set_timeout(t);
                ClusterClient::new(ch).status(req).await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        Ok(Status::from(resp.into_inner()))
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
        let t = self.inner.options.attempt_timeout;
        let resp = self
            .retry(self.inner.options.deadline, |ch, _| async move {
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

    /// Locks whose names start with `prefix`, in name order (all pages).
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
            let t = self.inner.options.attempt_timeout;
            let token = page_token.clone();
            let resp = self
                .retry(self.inner.options.deadline, |ch, _| {
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

    /// Whether `token` belongs to a current holder of `name` (Chubby's
    /// CheckSequencer): a linearizable read on the leader.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// if !client.validate("payments/settle", 4711).await?.valid { println!("stale holder"); }
    /// # Ok(()) }
    /// ```
    pub async fn validate(&self, name: &str, token: u64) -> Result<Validation, Error> {
        let t = self.inner.options.attempt_timeout;
        let resp = self
            .retry(self.inner.options.deadline, |ch, _| async move {
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

pub(crate) fn grant_from(g: pb::Grant) -> Grant {
    Grant::from(g)
}
