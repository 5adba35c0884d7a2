//! Sessions: created with a TTL, kept alive in the background over the
//! client's one keep-alive stream to the leader (`keepalive.rs`), and judged
//! locally by their lease (`lease.rs`, DESIGN.md rule 4).

use crate::client::Client;
use crate::error::Error;
use crate::lease::Lease;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::session_client::SessionClient;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A live session. Clones share it; it is no longer kept alive once the
/// last clone (and every lock guard of it) is dropped, or on [`Session::close`].
///
/// ```no_run
/// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
/// use std::time::Duration;
/// let session = client.session(Duration::from_secs(10)).await?;
/// assert!(session.is_valid());
/// session.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<SessionInner>,
}

pub(crate) struct SessionInner {
    pub(crate) client: Client,
    pub(crate) lease: Arc<Lease>,
    sequence: Arc<parking_lot::Mutex<Sequence>>,
    /// Abandoned waits and dropped guards whose cancel or release is still
    /// on its way.
    pub(crate) giving_back: GivingBack,
}

/// The session's exactly-once numbering (Raft dissertation §6.3): every
/// logical acquisition gets the next number, reused by its retries; the
/// lowest number still waiting for its answer travels with each request so
/// the server can forget the answers below it and refuse a late duplicate
/// of any of them.
#[derive(Default)]
struct Sequence {
    last: u64,
    waiting: std::collections::BTreeSet<u64>,
}

/// One logical request's number. Dropping it (the caller has its answer,
/// or gave up and will not retry) acknowledges it.
pub(crate) struct Ticket {
    sequence: Arc<parking_lot::Mutex<Sequence>>,
    pub(crate) seq: u64,
}

impl Ticket {
    /// What to send as `acked_below` now: every lower number is done.
    pub(crate) fn acked_below(&self) -> u64 {
        let s = self.sequence.lock();
        s.waiting.first().copied().unwrap_or(self.seq).min(self.seq)
    }

    /// What to send as `in_flight` now: the numbers still waiting for an
    /// answer, this one's included (the lowest ones, if there are many).
    /// Every other number up to the highest listed is acknowledged, so a
    /// long wait does not hold the answers of the calls made beside it.
    pub(crate) fn in_flight(&self) -> Vec<u64> {
        let s = self.sequence.lock();
        s.waiting
            .iter()
            .copied()
            .take(raftlock_proto::limits::MAX_IN_FLIGHT_LISTED)
            .collect()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.sequence.lock();
        s.waiting.remove(&self.seq);
    }
}

impl Client {
    /// Creates a session with `ttl` (1 s ..= 10 min) and starts keeping it
    /// alive every TTL/3, named by [`Options::client_name`](crate::Options::client_name).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let session = client.session(std::time::Duration::from_secs(15)).await?;
    /// println!("session {}", session.id());
    /// # Ok(()) }
    /// ```
    pub async fn session(&self, ttl: Duration) -> Result<Session, Error> {
        let name = self.options().client_name.clone().unwrap_or_default();
        self.session_named(ttl, &name).await
    }

    /// [`Client::session`] with a client name shown in `describe` output
    /// and server logs.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let session = client.session_named(std::time::Duration::from_secs(15), "billing-worker-3").await?;
    /// # Ok(()) }
    /// ```
    pub async fn session_named(&self, ttl: Duration, client_name: &str) -> Result<Session, Error> {
        let ttl_ms = ttl.as_millis() as u64;
        let lim = raftlock_proto::limits::MIN_TTL_MS..=raftlock_proto::limits::MAX_TTL_MS;
        if !lim.contains(&ttl_ms) {
            return Err(Error::TtlOutOfRange(format!(
                "ttl {ttl_ms} ms is out of range {}..={} ms",
                lim.start(),
                lim.end()
            )));
        }
        let t = self.options().attempt_timeout;
        // The first attempt's send time: a retry may be answered with the
        // session that attempt created, whose lease the leader counts from
        // when it applied it, which is no earlier than this.
        let sent = Instant::now();
        // One key for every attempt: a retry whose first attempt created the
        // session (and lost its answer) gets that session, not a second.
        let creation_key = uuid::Uuid::now_v7().as_bytes().to_vec();
        let (host, pid) = self.options().origin();
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| {
                let creation_key = creation_key.clone();
                let host = host.clone();
                async move {
                    let mut req = tonic::Request::new(pb::CreateSessionRequest {
                        ttl_ms,
                        client_name: client_name.to_owned(),
                        creation_key,
                        host,
                        pid,
                    });
                    req.set_timeout(t);
                    SessionClient::new(ch).create(req).await
                }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?
            .into_inner();
        let ttl = Duration::from_millis(resp.ttl_ms);
        let inner = Arc::new(SessionInner {
            client: self.clone(),
            lease: Arc::new(Lease::new(resp.session_id, ttl, sent)),
            sequence: Arc::default(),
            giving_back: Default::default(),
        });
        self.inner.keepalives.add(&inner.lease, sent);
        Ok(Session { inner })
    }
}

impl SessionInner {
    /// Numbers a new logical request of this session.
    pub(crate) fn ticket(&self) -> Ticket {
        let mut s = self.sequence.lock();
        s.last += 1;
        let seq = s.last;
        s.waiting.insert(seq);
        Ticket {
            sequence: self.sequence.clone(),
            seq,
        }
    }
}

impl Session {
    /// The session id, drawn from the log entry that created it (never reused).
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) { println!("session {}", s.id()); }
    /// ```
    pub fn id(&self) -> u64 {
        self.inner.lease.id
    }

    /// The TTL the server granted.
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) { println!("ttl {:?}", s.ttl()); }
    /// ```
    pub fn ttl(&self) -> Duration {
        self.inner.lease.ttl
    }

    /// Whether the session still counts as alive here: a keep-alive was
    /// acknowledged recently enough that the leader cannot have expired it.
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) { if !s.is_valid() { eprintln!("lost the session"); } }
    /// ```
    pub fn is_valid(&self) -> bool {
        self.inner.lease.until().is_ok()
    }

    /// The local validity deadline: until this instant the leader cannot
    /// have expired the session (last acknowledged keep-alive's send time +
    /// TTL − margin). It moves forward with every acknowledged keep-alive;
    /// an error says why the session no longer counts as valid. Work that
    /// must finish under the lock can check it has time left before it
    /// starts.
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let left = s.valid_until()?.saturating_duration_since(std::time::Instant::now());
    /// if left < std::time::Duration::from_millis(500) { /* do not start a write now */ }
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Result<std::time::Instant, Error> {
        self.inner.lease.until().map(|u| u.into_std())
    }

    /// The last local validity deadline this client computed, even once it
    /// has passed or the session has ended: the moment this client stopped
    /// (or will stop) claiming the session's locks. For tools that record
    /// when a holder's claim ended, such as a fault-injection checker.
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) {
    /// let claimed_until = s.lease_deadline();
    /// # }
    /// ```
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.inner.lease.last_until().into_std()
    }

    /// Resolves when the session is lost (keep-alives stopped being
    /// acknowledged in time, or the server says it is gone) or closed, with
    /// the reason. Use it to stop work done under the session's locks.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) {
    /// tokio::select! {
    ///     reason = s.lost() => eprintln!("stop: {reason}"),
    ///     _ = async { /* work under the lock */ } => {}
    /// }
    /// # }
    /// ```
    pub async fn lost(&self) -> Error {
        self.inner.lease.lost().await
    }

    /// Ends the session on the server: its locks are released and its waits
    /// cancelled at once.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// s.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<(), Error> {
        let id = self.inner.lease.id;
        self.inner.client.inner.keepalives.remove(id);
        self.inner.lease.end(Error::SessionGone(id));
        let client = &self.inner.client;
        client.close_session(id, client.options().deadline).await
    }
}

impl Client {
    /// Ends session `id` on the server, retrying until `deadline`.
    pub(crate) async fn close_session(&self, id: u64, deadline: Duration) -> Result<(), Error> {
        let t = self.options().attempt_timeout.min(deadline);
        let res = self
            .inner
            .cluster
            .retry(deadline, |ch, _| async move {
                let mut req = tonic::Request::new(pb::CloseSessionRequest { session_id: id });
                req.set_timeout(t);
                SessionClient::new(ch).close(req).await
            })
            .await;
        match res {
            Ok(_) => Ok(()),
            // Already gone (expired, or an earlier attempt closed it).
            Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
            Err(s) => Err(Error::from_status(&s, Some(id), None)),
        }
    }

    /// Closes every session this client keeps alive, as the Python,
    /// TypeScript and Go clients' `close` do: their locks are released and
    /// their waits cancelled at once, rather than held until the leader
    /// expires them a TTL later; handles to them then report
    /// [`Error::SessionGone`]. It takes at most `min(deadline, 5 s)`; a
    /// session the cluster cannot be told of in time is left to expire.
    /// Call it when the process shuts down (dropping a client only stops
    /// its keep-alives).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) {
    /// // ... on shutdown:
    /// client.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        let deadline = self.options().deadline.min(Duration::from_secs(5));
        let leases = self.inner.keepalives.take_all();
        let closes = leases.iter().map(|lease| {
            lease.end(Error::SessionGone(lease.id));
            self.close_session(lease.id, deadline)
        });
        let _ = tokio::time::timeout(deadline, futures::future::join_all(closes)).await;
    }
}

/// A session's locks being given back in the background, by name: the
/// cancels of abandoned waits and the releases of dropped guards.
///
/// A grant can race the cancel of its wait, and a dropped guard's lock is
/// held until its release lands: the lock is the session's meanwhile, and
/// an acquisition of it by the same session sent then would be refused
/// `ALREADY_HELD`, though the caller holds nothing it knows of (a retry
/// after a timeout, a loop that drops its guard). So a session's
/// acquisition first lets what it gives back of the same locks finish.
#[derive(Default)]
pub(crate) struct GivingBack {
    names: parking_lot::Mutex<std::collections::HashMap<String, usize>>,
    settled: tokio::sync::Notify,
}

impl GivingBack {
    pub(crate) fn begin(&self, names: &[String]) {
        let mut m = self.names.lock();
        for n in names {
            *m.entry(n.clone()).or_default() += 1;
        }
    }

    pub(crate) fn end(&self, names: &[String]) {
        {
            let mut m = self.names.lock();
            for n in names {
                if let Some(c) = m.get_mut(n) {
                    *c -= 1;
                    if *c == 0 {
                        m.remove(n);
                    }
                }
            }
        }
        self.settled.notify_waiters();
    }

    /// Returns once nothing of `names` is being given back. Each cancel or
    /// release ends within the client's deadline, answered or not.
    pub(crate) async fn settled<'a>(&self, names: impl IntoIterator<Item = &'a str> + Clone) {
        let busy = |m: &std::collections::HashMap<String, usize>| {
            names.clone().into_iter().any(|n| m.contains_key(n))
        };
        // Every acquisition passes here, and almost always nothing is
        // being given back: one look at the map, no waiter registered.
        if !busy(&self.names.lock()) {
            return;
        }
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            // Registered before the check, so an end in between wakes it.
            notified.as_mut().enable();
            if !busy(&self.names.lock()) {
                return;
            }
            notified.await;
        }
    }
}
