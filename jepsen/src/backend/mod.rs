//! What the workloads talk to: the real cluster through `raftlock-client`,
//! or an in-memory fake with planted faults that the checkers must catch.

mod fake;

pub use fake::{Fake, Fault};
use parking_lot::Mutex;
use raftlock_client::{Attempt, Client, Error, LockGuard};
use raftlock_proto::v1 as pb;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How an operation failed.
#[derive(Debug, Clone)]
pub enum OpError {
    /// It certainly did not take effect.
    Fail(String),
    /// It may have taken effect (the answer was lost).
    Unknown(String),
}

/// A connection to a lock service.
#[tonic::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// A session kept alive in the background.
    async fn session(&self, ttl: Duration) -> Result<Box<dyn Session>, OpError>;
    /// A session that is never kept alive: what the cluster sees of a
    /// client frozen by a GC pause right after it got its lock.
    async fn frozen_session(&self, ttl: Duration) -> Result<Box<dyn Session>, OpError>;
    /// `name`'s current holders as (session, token) (`Describe`, a
    /// linearizable read).
    async fn holders(&self, name: &str) -> Result<Vec<(u64, u64)>, OpError>;
    /// Whether `token` belongs to a current holder of `name` (`Validate`).
    async fn validate(&self, name: &str, token: u64) -> Result<bool, OpError>;
    /// Sets semaphore `name`'s size to `permits`.
    async fn resize(&self, name: &str, permits: u32) -> Result<(), OpError>;
    /// Takes one token of rate limit `name` ([`RATE`] per [`RATE_PER`],
    /// burst [`BURST`]), waiting up to `wait`: whether it was admitted,
    /// and if not after how long it would be.
    async fn take(&self, name: &str, wait: Option<Duration>) -> Result<(bool, Duration), OpError>;
    /// Reserves a block of `n` tokens of `name` to spend within `validity`.
    async fn reserve(
        &self,
        name: &str,
        n: u64,
        validity: Duration,
    ) -> Result<Option<Box<dyn TokenBlock>>, OpError>;
}

/// Tokens per [`RATE_PER`] of the rate-limit workload's limit.
pub const RATE: u64 = 20;
/// The period of [`RATE`].
pub const RATE_PER: Duration = Duration::from_secs(1);
/// The burst of the rate-limit workload's limit.
pub const BURST: u64 = 5;

/// A block of reserved tokens, spent locally.
#[tonic::async_trait]
pub trait TokenBlock: Send + Sync {
    /// Spends one token if the block has one and is still valid.
    fn try_spend(&self) -> bool;
    /// Gives back what is left.
    async fn finish(self: Box<Self>);
}

#[tonic::async_trait]
impl TokenBlock for raftlock_client::TokenLease {
    fn try_spend(&self) -> bool {
        raftlock_client::TokenLease::try_spend(self)
    }

    async fn finish(self: Box<Self>) {
        let _ = raftlock_client::TokenLease::finish(*self).await;
    }
}

fn rate_limit(client: &Client, name: &str) -> raftlock_client::RateLimit {
    client.rate_limit(name).rate(RATE, RATE_PER).burst(BURST)
}

/// The answer to a try-lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TryLock {
    /// Granted with this token.
    Granted(u64),
    /// Refused: the holders the answer named, as (session, token).
    Busy(Vec<(u64, u64)>),
}

/// A session of a [`Backend`].
#[tonic::async_trait]
pub trait Session: Send + Sync {
    /// Session id.
    fn id(&self) -> u64;
    /// The local validity deadline (`None`: already lost).
    fn valid_until(&self) -> Option<Instant>;
    /// The latest validity deadline known, even when it has passed: what
    /// the history records as the point the holder had to stop by. Never
    /// later than the real one, so it can only shorten a recorded hold.
    fn lease_deadline(&self) -> Instant;
    /// Acquires `name` exclusively (or `count` of `permits`), waiting up
    /// to `wait`; `Ok(None)` = not granted in time.
    async fn acquire(
        &self,
        name: &str,
        permits: Option<u32>,
        count: u32,
        wait: Duration,
    ) -> Result<Option<u64>, OpError>;
    /// Tries once to acquire `name` exclusively: the grant, or the
    /// holders the refusal named.
    async fn try_acquire(&self, name: &str) -> Result<TryLock, OpError> {
        let _ = name;
        Err(OpError::Fail("this session does not try locks".into()))
    }
    /// Releases the grant `token` of `name`.
    async fn release(&self, name: &str, token: u64) -> Result<(), OpError>;
    /// Acquires every lock of `names` exclusively and together, waiting up
    /// to `wait`: each lock's token, in the order of `names`; `Ok(None)` =
    /// not granted in time.
    async fn acquire_all(
        &self,
        names: &[String],
        wait: Duration,
    ) -> Result<Option<Vec<u64>>, OpError> {
        let _ = (names, wait);
        Err(OpError::Fail(
            "this backend takes one lock at a time".into(),
        ))
    }
    /// Campaigns in election `name`; `Ok(None)` = not elected in time.
    async fn campaign(
        &self,
        name: &str,
        value: &str,
        wait: Duration,
    ) -> Result<Option<u64>, OpError>;
    /// Publishes a value as leader.
    async fn proclaim(&self, name: &str, token: u64, value: &str) -> Result<(), OpError>;
    /// Steps down.
    async fn resign(&self, name: &str, token: u64) -> Result<(), OpError>;
    /// Ends the session.
    async fn close(&self);
    /// Whether the session ended because the server said it is gone (not
    /// because the library's own deadline passed).
    fn ended_by_server(&self) -> bool {
        false
    }
    /// Resolves when the client library reports the session lost (never,
    /// for sessions without a library behind them).
    async fn lost(&self) {
        std::future::pending::<()>().await
    }
    /// One keep-alive sent by hand, outside any library: `Ok` = the server
    /// said the session lives.
    async fn keep_alive(&self) -> Result<(), OpError> {
        Err(OpError::Fail(
            "this session is kept alive by its library".into(),
        ))
    }
}

fn classify(e: Error) -> OpError {
    match e {
        // The client retried until its deadline; an attempt may have landed.
        Error::Unavailable(m) => OpError::Unknown(m),
        // A wait that timed out may have been granted at the last moment
        // (the server returns such a grant to the cancel, but the answer
        // can be lost): indeterminate, never a definite failure.
        Error::WaitTimedOut(_) => OpError::Unknown(e.to_string()),
        Error::SessionLost(_) => OpError::Unknown(e.to_string()),
        // The server no longer knows the session: an earlier attempt of the
        // call may have landed before it expired, and what the session
        // kept of it (its grant, its exactly-once answer) went with it.
        Error::SessionGone(_) => OpError::Unknown(e.to_string()),
        // A fault of the server's own, or an answer this library cannot
        // read: the call may have taken effect.
        Error::Server { .. } | Error::Internal(_) => OpError::Unknown(e.to_string()),
        other => OpError::Fail(other.to_string()),
    }
}

/// The real cluster.
pub struct Real {
    client: Client,
    endpoints: Vec<String>,
}

impl Real {
    /// Connects to `endpoints`.
    pub async fn connect(endpoints: Vec<String>) -> anyhow::Result<Real> {
        Real::connect_from(endpoints, None).await
    }

    /// Connects to `endpoints` from the local address `local`.
    pub async fn connect_from(
        endpoints: Vec<String>,
        local: Option<std::net::IpAddr>,
    ) -> anyhow::Result<Real> {
        let options = raftlock_client::Options {
            deadline: Duration::from_secs(5),
            local_address: local,
            ..Default::default()
        };
        let client = Client::connect_with(&endpoints, options).await?;
        Ok(Real { client, endpoints })
    }
}

#[tonic::async_trait]
impl Backend for Real {
    async fn session(&self, ttl: Duration) -> Result<Box<dyn Session>, OpError> {
        let s = self.client.session(ttl).await.map_err(classify)?;
        Ok(Box::new(RealSession {
            session: s,
            guards: Mutex::new(HashMap::new()),
            leaderships: Mutex::new(HashMap::new()),
        }))
    }

    async fn frozen_session(&self, ttl: Duration) -> Result<Box<dyn Session>, OpError> {
        Frozen::create(&self.endpoints, ttl).await
    }

    async fn holders(&self, name: &str) -> Result<Vec<(u64, u64)>, OpError> {
        let d = self.client.describe(name).await.map_err(classify)?;
        Ok(d.holders.iter().map(|h| (h.session_id, h.token)).collect())
    }

    async fn validate(&self, name: &str, token: u64) -> Result<bool, OpError> {
        let v = self.client.validate(name, token).await.map_err(classify)?;
        Ok(v.valid)
    }

    async fn resize(&self, name: &str, permits: u32) -> Result<(), OpError> {
        self.client
            .resize(name, permits)
            .await
            .map(|_| ())
            .map_err(classify)
    }

    async fn take(&self, name: &str, wait: Option<Duration>) -> Result<(bool, Duration), OpError> {
        let l = rate_limit(&self.client, name);
        let a = match wait {
            Some(w) => l.take(1, w).await,
            None => l.try_take(1).await,
        }
        .map_err(classify)?;
        Ok((a.admitted, a.retry_after))
    }

    async fn reserve(
        &self,
        name: &str,
        n: u64,
        validity: Duration,
    ) -> Result<Option<Box<dyn TokenBlock>>, OpError> {
        let lease = rate_limit(&self.client, name)
            .reserve(n, validity)
            .await
            .map_err(classify)?;
        Ok(lease.map(|l| Box::new(l) as Box<dyn TokenBlock>))
    }
}

struct RealSession {
    session: raftlock_client::Session,
    /// The last deadline seen while the session was valid.
    guards: Mutex<HashMap<(String, u64), LockGuard>>,
    leaderships: Mutex<HashMap<(String, u64), raftlock_client::Leadership>>,
}

#[tonic::async_trait]
impl Session for RealSession {
    fn id(&self) -> u64 {
        self.session.id()
    }

    fn valid_until(&self) -> Option<Instant> {
        self.session.valid_until().ok()
    }

    fn lease_deadline(&self) -> Instant {
        // The library's own last deadline, not one sampled earlier here: a
        // stale sample would end recorded holds early and hide an expiry
        // that came before the client's deadline.
        self.session.lease_deadline()
    }

    async fn acquire(
        &self,
        name: &str,
        permits: Option<u32>,
        count: u32,
        wait: Duration,
    ) -> Result<Option<u64>, OpError> {
        let mut b = self.session.lock(name).timeout(wait);
        if let Some(p) = permits {
            b = b.permits(p);
        }
        if count > 1 {
            b = b.count(count);
        }
        match b.acquire().await {
            Ok(g) => {
                let token = g.token();
                self.guards.lock().insert((name.to_owned(), token), g);
                Ok(Some(token))
            }
            Err(Error::WaitTimedOut(_)) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    async fn try_acquire(&self, name: &str) -> Result<TryLock, OpError> {
        match self.session.lock(name).attempt().await {
            Ok(Attempt::Acquired(g)) => {
                let token = g.token();
                self.guards.lock().insert((name.to_owned(), token), g);
                Ok(TryLock::Granted(token))
            }
            Ok(Attempt::Busy(holders)) => Ok(TryLock::Busy(
                holders.iter().map(|h| (h.session_id, h.token)).collect(),
            )),
            Err(e) => Err(classify(e)),
        }
    }

    async fn acquire_all(
        &self,
        names: &[String],
        wait: Duration,
    ) -> Result<Option<Vec<u64>>, OpError> {
        match self.session.lock_all(names).timeout(wait).acquire().await {
            Ok(set) => {
                let mut guards = self.guards.lock();
                let mut tokens = std::collections::HashMap::new();
                for g in set.into_guards() {
                    tokens.insert(g.name().to_owned(), g.token());
                    guards.insert((g.name().to_owned(), g.token()), g);
                }
                Ok(Some(
                    names
                        .iter()
                        .map(|n| tokens.get(n).copied().unwrap_or(0))
                        .collect(),
                ))
            }
            Err(Error::WaitTimedOut(_)) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    async fn release(&self, name: &str, token: u64) -> Result<(), OpError> {
        let g = self.guards.lock().remove(&(name.to_owned(), token));
        match g {
            Some(g) => g.release().await.map_err(classify),
            None => Err(OpError::Fail(format!("no guard for {name} token {token}"))),
        }
    }

    async fn campaign(
        &self,
        name: &str,
        value: &str,
        wait: Duration,
    ) -> Result<Option<u64>, OpError> {
        match self
            .session
            .election(name)
            .timeout(wait)
            .campaign(value)
            .await
        {
            Ok(l) => {
                let token = l.token();
                self.leaderships.lock().insert((name.to_owned(), token), l);
                Ok(Some(token))
            }
            Err(Error::WaitTimedOut(_)) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    async fn proclaim(&self, name: &str, token: u64, value: &str) -> Result<(), OpError> {
        // Take the leadership out while awaiting: a std mutex guard cannot be
        // held across an await.
        let l = self.leaderships.lock().remove(&(name.to_owned(), token));
        let Some(l) = l else {
            return Err(OpError::Fail(format!("not leading {name} with {token}")));
        };
        let r = l.proclaim(value).await.map_err(classify);
        self.leaderships.lock().insert((name.to_owned(), token), l);
        r
    }

    async fn resign(&self, name: &str, token: u64) -> Result<(), OpError> {
        let l = self.leaderships.lock().remove(&(name.to_owned(), token));
        match l {
            Some(l) => l.resign().await.map_err(classify),
            None => Err(OpError::Fail(format!("not leading {name} with {token}"))),
        }
    }

    async fn close(&self) {
        // Guards must not release in the background after the session is
        // closed (the close releases everything at once).
        let guards: Vec<LockGuard> = self.guards.lock().drain().map(|(_, g)| g).collect();
        let leaderships: Vec<_> = self.leaderships.lock().drain().map(|(_, l)| l).collect();
        let _ = self.session.close().await;
        drop(guards);
        drop(leaderships);
    }

    async fn lost(&self) {
        self.session.lost().await;
    }

    fn ended_by_server(&self) -> bool {
        matches!(self.session.valid_until(), Err(Error::SessionGone(_)))
    }
}

/// A session created over raw gRPC and never renewed.
struct Frozen {
    endpoints: Vec<String>,
    id: u64,
    valid_until: Instant,
}

impl Frozen {
    async fn create(endpoints: &[String], ttl: Duration) -> Result<Box<dyn Session>, OpError> {
        let sent = Instant::now();
        let id = raw_call(endpoints, |ch| async move {
            pb::session_client::SessionClient::new(ch)
                .create(pb::CreateSessionRequest {
                    ttl_ms: ttl.as_millis() as u64,
                    client_name: "jepsen-frozen".into(),
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().session_id)
        })
        .await?;
        // The same rule the client library applies (DESIGN.md rule 4).
        let margin = (ttl / 10).max(Duration::from_millis(200));
        Ok(Box::new(Frozen {
            endpoints: endpoints.to_vec(),
            id,
            valid_until: sent + ttl - margin,
        }))
    }
}

/// One call on whichever node leads, following leader hints.
async fn raw_call<T, F, Fut>(endpoints: &[String], f: F) -> Result<T, OpError>
where
    F: Fn(tonic::transport::Channel) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut targets: Vec<String> = endpoints.to_vec();
    let mut last = String::from("no endpoints");
    for _ in 0..12 {
        for addr in targets.clone() {
            let Ok(ep) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
                continue;
            };
            let Ok(ch) = ep
                .connect_timeout(Duration::from_millis(300))
                .timeout(Duration::from_secs(2))
                .connect()
                .await
            else {
                continue;
            };
            match f(ch).await {
                Ok(v) => return Ok(v),
                Err(s) if s.code() == tonic::Code::Unavailable => {
                    if let Some(hint) = s
                        .metadata()
                        .get(raftlock_proto::LEADER_METADATA_KEY)
                        .and_then(|v| v.to_str().ok())
                    {
                        targets.retain(|t| t != hint);
                        targets.insert(0, hint.to_owned());
                    }
                    last = s.message().to_owned();
                }
                Err(s) => {
                    return Err(match s.code() {
                        tonic::Code::DeadlineExceeded | tonic::Code::Unknown => {
                            OpError::Unknown(s.message().to_owned())
                        }
                        _ => OpError::Fail(s.message().to_owned()),
                    })
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(OpError::Unknown(last))
}

#[tonic::async_trait]
impl Session for Frozen {
    fn id(&self) -> u64 {
        self.id
    }

    fn valid_until(&self) -> Option<Instant> {
        (Instant::now() < self.valid_until).then_some(self.valid_until)
    }

    fn lease_deadline(&self) -> Instant {
        self.valid_until
    }

    async fn acquire(
        &self,
        name: &str,
        _permits: Option<u32>,
        _count: u32,
        wait: Duration,
    ) -> Result<Option<u64>, OpError> {
        let id = self.id;
        let request_id = uuid_bytes();
        let r = raw_call(&self.endpoints, |ch| {
            let req = pb::AcquireRequest {
                session_id: id,
                name: name.to_owned(),
                request_id: request_id.clone(),
                wait_timeout_ms: (!wait.is_zero()).then_some(wait.as_millis() as u64),
                ..Default::default()
            };
            async move {
                pb::lock_client::LockClient::new(ch)
                    .acquire(req)
                    .await
                    .map(|r| r.into_inner())
            }
        })
        .await?;
        Ok(r.grant.filter(|_| r.acquired).map(|g| g.token))
    }

    async fn release(&self, name: &str, token: u64) -> Result<(), OpError> {
        let id = self.id;
        raw_call(&self.endpoints, |ch| {
            let req = pb::ReleaseRequest {
                session_id: id,
                name: name.to_owned(),
                token,
            };
            async move {
                pb::lock_client::LockClient::new(ch)
                    .release(req)
                    .await
                    .map(|_| ())
            }
        })
        .await
    }

    async fn campaign(&self, _: &str, _: &str, _: Duration) -> Result<Option<u64>, OpError> {
        Err(OpError::Fail("frozen sessions only take locks".into()))
    }

    async fn proclaim(&self, _: &str, _: u64, _: &str) -> Result<(), OpError> {
        Err(OpError::Fail("frozen sessions only take locks".into()))
    }

    async fn resign(&self, _: &str, _: u64) -> Result<(), OpError> {
        Err(OpError::Fail("frozen sessions only take locks".into()))
    }

    async fn close(&self) {}

    async fn keep_alive(&self) -> Result<(), OpError> {
        let id = self.id;
        let gone = raw_call(&self.endpoints, |ch| async move {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let _ = tx.send(pb::KeepAliveRequest {
                session_id: id,
                shared: true,
            });
            let mut inbound = pb::session_client::SessionClient::new(ch)
                .keep_alive(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
                .await?
                .into_inner();
            match inbound.message().await? {
                Some(r) => Ok(r.gone),
                None => Err(tonic::Status::unavailable("keep-alive stream ended")),
            }
        })
        .await?;
        if gone {
            Err(OpError::Fail(format!("session {id} is gone")))
        } else {
            Ok(())
        }
    }
}

fn uuid_bytes() -> Vec<u8> {
    rand::random::<[u8; 16]>().to_vec()
}

/// [`classify`], for the workload's tests.
#[cfg(test)]
pub(crate) fn classify_for_tests(e: Error) -> OpError {
    classify(e)
}
