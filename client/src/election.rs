//! Leader election on top of locks: the leader is the holder of an
//! exclusive lock whose metadata is the leader's published value. Its
//! token identifies the term of office and fences the leader's writes like
//! any lock token.

use crate::client::Client;
use crate::error::Error;
use crate::session::Session;
use crate::types::Grant;
use futures::Stream;
use parking_lot::Mutex;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::election_client::ElectionClient;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// A campaign being set up by [`Session::election`]; finish with
/// [`Candidate::campaign`].
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// let leadership = s.election("scheduler").campaign("host-7:8080").await?;
/// # Ok(()) }
/// ```
#[must_use = "a candidate does nothing until campaign() is awaited"]
pub struct Candidate {
    session: Session,
    name: String,
    timeout: Option<Duration>,
}

impl Session {
    /// Starts a campaign in election `name` with this session. The session
    /// ending (closed, expired, lost) ends the leadership.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let leadership = s.election("scheduler").campaign(b"host-7".to_vec()).await?;
    /// println!("leading with token {}", leadership.token());
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl Into<String>) -> Candidate {
        Candidate {
            session: self.clone(),
            name: name.into(),
            timeout: None,
        }
    }
}

impl Candidate {
    /// Gives up with [`Error::WaitTimedOut`] if not elected within `wait`
    /// (default: campaign for as long as the session lives).
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let r = s.election("scheduler").timeout(std::time::Duration::from_secs(5)).campaign("me").await;
    /// # Ok(()) }
    /// ```
    pub fn timeout(mut self, wait: Duration) -> Self {
        self.timeout = Some(wait);
        self
    }

    /// Waits in line until this session leads, then publishes `value` as
    /// the leader's value. Candidates are elected in the order they started
    /// campaigning.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let leadership = s.election("scheduler").campaign("host-7:8080").await?;
    /// // ... lead, passing leadership.token() with every write ...
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn campaign(self, value: impl Into<Vec<u8>>) -> Result<Leadership, Error> {
        let value = value.into();
        let max_wait = self.session.inner.client.inner.cluster.max_wait();
        let started = Instant::now();
        loop {
            // The server bounds one wait; an unbounded campaign queues again
            // when it ends, keeping its place only for that long.
            let wait = match self.timeout {
                Some(t) => t.saturating_sub(started.elapsed()).min(max_wait),
                None => max_wait,
            };
            match self.once(&value, wait).await {
                Err(Error::WaitTimedOut(_))
                    if self.timeout.is_none() && self.session.is_valid() => {}
                Err(Error::WaitTimedOut(_)) => return Err(Error::WaitTimedOut(self.name)),
                other => return other,
            }
        }
    }

    async fn once(&self, value: &[u8], wait: Duration) -> Result<Leadership, Error> {
        if !self.session.is_valid() {
            return Err(Error::SessionLost(self.session.id()));
        }
        let inner = &self.session.inner;
        inner.giving_back.settled([self.name.as_str()]).await;
        let client = &inner.client;
        let opts = client.options().clone();
        // One id for every retry of this campaign: a retry finds the queue
        // place or the leadership the first attempt got.
        let request_id = uuid::Uuid::now_v7().as_bytes().to_vec();
        let ticket = inner.ticket();
        let started = Instant::now();
        let name = self.name.as_str();
        // Dropped with this future if the caller stops campaigning.
        let cancel = crate::lock::CancelOnDrop::new(
            &self.session,
            std::slice::from_ref(&self.name),
            &request_id,
        );
        let resp = client
            .inner
            .cluster
            .retry(opts.deadline + wait, |ch, _| {
                let left = wait.saturating_sub(started.elapsed());
                let mut req = tonic::Request::new(pb::CampaignRequest {
                    name: name.to_owned(),
                    session_id: inner.lease.id,
                    request_id: request_id.clone(),
                    value: value.to_vec(),
                    wait_timeout_ms: Some(left.as_millis() as u64),
                    seq: ticket.seq,
                    acked_below: ticket.acked_below(),
                    in_flight: ticket.in_flight(),
                });
                req.set_timeout(opts.attempt_timeout + left);
                async move { ElectionClient::new(ch).campaign(req).await }
            })
            .await;
        cancel.disarm();
        let resp = resp
            .map_err(|s| Error::from_status(&s, Some(inner.lease.id), Some(name)))?
            .into_inner();
        let grant = resp.leader.map(Grant::from).ok_or_else(|| Error::Server {
            code: tonic::Code::Internal,
            message: "campaign answered without a leadership".into(),
        })?;
        Ok(Leadership {
            session: self.session.clone(),
            value: Mutex::new(grant.metadata.clone()),
            grant,
            resigned: AtomicBool::new(false),
        })
    }
}

/// Leadership won by [`Candidate::campaign`]. Dropping it resigns in the
/// background; [`Leadership::resign`] resigns and reports the result.
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// let leadership = s.election("scheduler").campaign("host-7").await?;
/// tokio::select! {
///     reason = leadership.lost() => eprintln!("no longer leader: {reason}"),
///     _ = async { /* lead */ } => leadership.resign().await?,
/// }
/// # Ok(()) }
/// ```
pub struct Leadership {
    session: Session,
    grant: Grant,
    value: Mutex<Vec<u8>>,
    resigned: AtomicBool,
}

impl Leadership {
    /// The term-of-office token, drawn from the log entry that elected this
    /// leader (strictly increasing per election). Pass it with writes so a deposed leader's are refused.
    ///
    /// ```no_run
    /// # fn f(l: raftlock_client::Leadership) { println!("term token {}", l.token()); }
    /// ```
    pub fn token(&self) -> u64 {
        self.grant.token
    }

    /// The election's name.
    ///
    /// ```no_run
    /// # fn f(l: raftlock_client::Leadership) { println!("leading {}", l.name()); }
    /// ```
    pub fn name(&self) -> &str {
        &self.grant.name
    }

    /// The value last published by this leader.
    ///
    /// ```no_run
    /// # fn f(l: raftlock_client::Leadership) { println!("{}", String::from_utf8_lossy(&l.value())); }
    /// ```
    pub fn value(&self) -> Vec<u8> {
        self.value.lock().clone()
    }

    /// Whether this client can still act as leader: not resigned, and the
    /// session valid by the local lease rule.
    ///
    /// ```no_run
    /// # fn f(l: raftlock_client::Leadership) { if !l.is_valid() { std::process::exit(1) } }
    /// ```
    pub fn is_valid(&self) -> bool {
        !self.resigned.load(Ordering::SeqCst) && self.session.is_valid()
    }

    /// Resolves when the leadership can no longer be claimed because the
    /// session was lost; returns the reason.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::Leadership) { eprintln!("lost: {}", l.lost().await); }
    /// ```
    pub async fn lost(&self) -> Error {
        self.session.lost().await
    }

    /// Publishes a new value for observers (at most 4 KiB).
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::Leadership) -> Result<(), raftlock_client::Error> {
    /// l.proclaim("host-7:9090").await?;
    /// # Ok(()) }
    /// ```
    pub async fn proclaim(&self, value: impl Into<Vec<u8>>) -> Result<(), Error> {
        let value = value.into();
        let client = &self.session.inner.client;
        let t = client.options().attempt_timeout;
        let (id, name, token) = (
            self.session.id(),
            self.grant.name.as_str(),
            self.grant.token,
        );
        // Setting a value is idempotent, so a retry after a lost answer is
        // harmless.
        client
            .inner
            .cluster
            .retry(client.options().deadline, |ch, _| {
                let mut req = tonic::Request::new(pb::ProclaimRequest {
                    name: name.to_owned(),
                    session_id: id,
                    token,
                    value: value.clone(),
                });
                req.set_timeout(t);
                async move { ElectionClient::new(ch).proclaim(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, Some(id), Some(name)))?;
        *self.value.lock() = value;
        Ok(())
    }

    /// Steps down; the next candidate in line is elected in the same log
    /// entry.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::Leadership) -> Result<(), raftlock_client::Error> {
    /// l.resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resign(self) -> Result<(), Error> {
        self.resigned.store(true, Ordering::SeqCst);
        resign(&self.session, &self.grant).await
    }
}

async fn resign(session: &Session, grant: &Grant) -> Result<(), Error> {
    let client = &session.inner.client;
    let t = client.options().attempt_timeout;
    let (id, name, token) = (session.id(), grant.name.as_str(), grant.token);
    let mut retried = false;
    let res = client
        .inner
        .cluster
        .retry(client.options().deadline, |ch, attempt| {
            retried |= attempt > 0;
            let mut req = tonic::Request::new(pb::ResignRequest {
                name: name.to_owned(),
                session_id: id,
                token,
            });
            req.set_timeout(t);
            async move { ElectionClient::new(ch).resign(req).await }
        })
        .await;
    crate::lock::settle_release(res, retried, id, name)
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if self.resigned.swap(true, Ordering::SeqCst) || !self.session.is_valid() {
            return;
        }
        let session = self.session.clone();
        let grant = self.grant.clone();
        crate::lock::give_back_soon(&self.session, vec![grant.name.clone()], async move {
            if let Err(e) = resign(&session, &grant).await {
                tracing::warn!(lock = %grant.name, token = grant.token, error = %e, "background resign failed");
            }
        });
    }
}

/// Read access to an election, from [`Client::election`]: who leads now,
/// and a stream of every change.
///
/// ```no_run
/// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
/// match client.election("scheduler").leader().await? {
///     Some(l) => println!("led by session {} with {:?}", l.session_id, String::from_utf8_lossy(&l.metadata)),
///     None => println!("no leader"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    client: Client,
    name: String,
}

impl Client {
    /// Reads or observes election `name` (no session needed).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let leader = client.election("scheduler").leader().await?;
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl Into<String>) -> Election {
        Election {
            client: self.clone(),
            name: name.into(),
        }
    }
}

impl Election {
    /// The current leader's grant (its value is `metadata`), or `None`: a
    /// linearizable read on the cluster leader.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// if let Some(l) = client.election("scheduler").leader().await? { println!("token {}", l.token); }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Grant>, Error> {
        let t = self.client.options().attempt_timeout;
        let name = self.name.as_str();
        let resp = self
            .client
            .inner
            .cluster
            .retry(self.client.options().deadline, |ch, _| {
                let mut req = tonic::Request::new(pb::LeaderRequest {
                    name: name.to_owned(),
                });
                req.set_timeout(t);
                async move { ElectionClient::new(ch).leader(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(name)))?;
        Ok(resp.into_inner().leader.map(Grant::from))
    }

    /// The current leader, then every change of leader or value, each once
    /// and in order (`None` = no leader). The stream follows the cluster
    /// through failovers; between two reports it may skip states that lasted
    /// less than a reconnection. It ends with an error only on a bad
    /// election name; drop it to stop observing.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// use futures::StreamExt;
    /// let mut changes = Box::pin(client.election("scheduler").observe());
    /// while let Some(change) = changes.next().await {
    ///     match change? {
    ///         Some(l) => println!("leader: session {} token {}", l.session_id, l.token),
    ///         None => println!("no leader"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn observe(&self) -> impl Stream<Item = Result<Option<Grant>, Error>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(observe(self.client.clone(), self.name.clone(), tx));
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }
}

type Report = Result<Option<Grant>, Error>;

async fn observe(client: Client, name: String, tx: tokio::sync::mpsc::Sender<Report>) {
    let opts = client.options().clone();
    let cluster = &client.inner.cluster;
    let mut last: Option<Option<Grant>> = None;
    let mut backoff = opts.initial_backoff;
    loop {
        let addr = cluster.target();
        let Ok(channel) = cluster.channel(&addr) else {
            return;
        };
        // No grpc-timeout here: it would bound the whole stream, not its
        // opening.
        let req = pb::LeaderRequest { name: name.clone() };
        let mut api = ElectionClient::new(channel);
        let opened = tokio::select! {
            _ = tx.closed() => return,
            r = tokio::time::timeout(opts.attempt_timeout, api.observe(req)) => {
                r.unwrap_or_else(|_| Err(tonic::Status::unavailable(format!("{addr} did not answer in time"))))
            }
        };
        match opened {
            Ok(resp) => {
                let mut inbound = resp.into_inner();
                loop {
                    let msg = tokio::select! {
                        _ = tx.closed() => return,
                        m = inbound.message() => m,
                    };
                    match msg {
                        Ok(Some(r)) => {
                            cluster.remember_leader(&addr);
                            backoff = opts.initial_backoff;
                            // A reconnection starts with the current state,
                            // which the observer may already have.
                            let current = r.leader.map(Grant::from);
                            if last.as_ref() != Some(&current) {
                                last = Some(current.clone());
                                if tx.send(Ok(current)).await.is_err() {
                                    return;
                                }
                            }
                        }
                        Ok(None) => {
                            cluster.forget_leader(&addr);
                            break;
                        }
                        Err(s) => {
                            tracing::debug!(lock = %name, node = %addr, error = %s.message(), "observe stream ended");
                            cluster.learn(&addr, &s);
                            break;
                        }
                    }
                }
            }
            Err(s) if matches!(s.code(), tonic::Code::InvalidArgument) => {
                let _ = tx
                    .send(Err(Error::from_status(&s, None, Some(&name))))
                    .await;
                return;
            }
            Err(s) => {
                tracing::debug!(lock = %name, node = %addr, error = %s.message(), "observe refused");
                cluster.learn(&addr, &s);
            }
        }
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(opts.max_backoff);
    }
}
