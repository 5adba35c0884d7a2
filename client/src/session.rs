//! Sessions: created with a TTL, kept alive in the background over the
//! client's one keep-alive stream to the leader (`keepalive.rs`), and judged locally (DESIGN.md rule 4):
//! the session counts as valid only until the send time of the last
//! acknowledged keep-alive plus the TTL minus a safety margin. Past that,
//! the client reports it lost and never calls it valid again, even if a late
//! acknowledgement arrives: the leader may already have expired it.

use crate::client::Client;
use crate::error::Error;
use crate::lock::LockBuilder;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::session_client::SessionClient;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Clone, Debug)]
enum State {
    Valid {
        until: Instant,
    },
    /// Why it ended, and the deadline it had then.
    Ended(Error, Instant),
}

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
    pub(crate) id: u64,
    pub(crate) ttl: Duration,
    state: watch::Sender<State>,
    sequence: Arc<std::sync::Mutex<Sequence>>,
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
    sequence: Arc<std::sync::Mutex<Sequence>>,
    pub(crate) seq: u64,
}

impl Ticket {
    /// What to send as `acked_below` now: every lower number is done.
    pub(crate) fn acked_below(&self) -> u64 {
        let s = self.sequence.lock().unwrap_or_else(|p| p.into_inner());
        s.waiting.first().copied().unwrap_or(self.seq).min(self.seq)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.sequence.lock().unwrap_or_else(|p| p.into_inner());
        s.waiting.remove(&self.seq);
    }
}

/// The safety margin this library takes off a session's TTL (DESIGN.md
/// rule 4): it covers the leader's and client's clocks running at slightly
/// different rates, and scheduling delays. A session counts as valid until
/// the send time of its last acknowledged keep-alive + TTL − this margin.
///
/// ```
/// use std::time::Duration;
/// let ttl = Duration::from_secs(10);
/// assert_eq!(raftlock_client::safety_margin(ttl), Duration::from_secs(1));
/// assert_eq!(raftlock_client::safety_margin(Duration::from_secs(1)), Duration::from_millis(100));
/// ```
pub fn safety_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(100))
}

impl Client {
    /// Creates a session with `ttl` (1 s ..= 10 min) and starts keeping it
    /// alive every TTL/3.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let session = client.session(std::time::Duration::from_secs(15)).await?;
    /// println!("session {}", session.id());
    /// # Ok(()) }
    /// ```
    pub async fn session(&self, ttl: Duration) -> Result<Session, Error> {
        self.session_named(ttl, "").await
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
        let t = self.inner.options.attempt_timeout;
        // The first attempt's send time: a retry may be answered with the
        // session that attempt created, whose lease the leader counts from
        // when it applied it, which is no earlier than this.
        let sent = Instant::now();
        // One key for every attempt: a retry whose first attempt created the
        // session (and lost its answer) gets that session, not a second.
        let creation_key = uuid::Uuid::now_v7().as_bytes().to_vec();
        let resp = self
            .retry(self.inner.options.deadline, |ch, _| {
                let creation_key = creation_key.clone();
                async move {
                    let mut req = tonic::Request::new(pb::CreateSessionRequest {
                        ttl_ms,
                        client_name: client_name.to_owned(),
                        creation_key,
                    });
                    req.set_timeout(t);
                    SessionClient::new(ch).create(req).await
                }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?
            .into_inner();
        let ttl = Duration::from_millis(resp.ttl_ms);
        let (state, _) = watch::channel(State::Valid {
            until: sent + ttl - safety_margin(ttl),
        });
        let inner = Arc::new(SessionInner {
            client: self.clone(),
            id: resp.session_id,
            ttl,
            state,
            sequence: Arc::default(),
        });
        self.inner.keepalives.add(self, &inner, sent);
        Ok(Session { inner })
    }
}

impl SessionInner {
    /// Numbers a new logical request of this session.
    pub(crate) fn ticket(&self) -> Ticket {
        let mut s = self.sequence.lock().unwrap_or_else(|p| p.into_inner());
        s.last += 1;
        let seq = s.last;
        s.waiting.insert(seq);
        Ticket {
            sequence: self.sequence.clone(),
            seq,
        }
    }

    pub(crate) fn until(&self) -> Result<Instant, Error> {
        match &*self.state.borrow() {
            State::Valid { until } if Instant::now() < *until => Ok(*until),
            State::Valid { .. } => Err(Error::SessionLost(self.id)),
            State::Ended(e, _) => Err(e.clone()),
        }
    }

    /// The last deadline computed, passed or not.
    pub(crate) fn last_until(&self) -> Instant {
        match &*self.state.borrow() {
            State::Valid { until } | State::Ended(_, until) => *until,
        }
    }

    /// Records an acknowledged keep-alive sent at `sent`, unless the session
    /// already counted as lost.
    pub(crate) fn acknowledged(&self, sent: Instant) {
        let now = Instant::now();
        self.state.send_modify(|s| {
            if let State::Valid { until } = s {
                if now >= *until {
                    *s = State::Ended(Error::SessionLost(self.id), *until);
                } else {
                    *until = (*until).max(sent + self.ttl - safety_margin(self.ttl));
                }
            }
        });
    }

    pub(crate) fn end(&self, e: Error) {
        self.state.send_modify(|s| {
            if let State::Valid { until } = s {
                *s = State::Ended(e, *until);
            }
        });
    }
}

impl Session {
    /// The session id, drawn from the log entry that created it (never reused).
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) { println!("session {}", s.id()); }
    /// ```
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The TTL the server granted.
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) { println!("ttl {:?}", s.ttl()); }
    /// ```
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// Whether the session still counts as alive here: a keep-alive was
    /// acknowledged recently enough that the leader cannot have expired it.
    ///
    /// ```no_run
    /// # fn f(s: raftlock_client::Session) { if !s.is_valid() { eprintln!("lost the session"); } }
    /// ```
    pub fn is_valid(&self) -> bool {
        self.inner.until().is_ok()
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
        self.inner.until().map(|u| u.into_std())
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
        self.inner.last_until().into_std()
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
        let mut rx = self.inner.state.subscribe();
        loop {
            let until = match self.inner.until() {
                Ok(u) => u,
                Err(e) => return e,
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                r = rx.changed() => if r.is_err() { return Error::SessionLost(self.inner.id) },
            }
        }
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
        self.inner.client.inner.keepalives.remove(self.inner.id);
        self.inner.end(Error::SessionGone(self.inner.id));
        let id = self.inner.id;
        let client = &self.inner.client;
        let t = client.inner.options.attempt_timeout;
        let res = client
            .retry(client.inner.options.deadline, |ch, _| async move {
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

    /// Starts building an acquisition of lock `name` held by this session.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let guard = s.lock("jobs/nightly-report").timeout(std::time::Duration::from_secs(5)).acquire().await?;
    /// println!("token {}", guard.token());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: impl Into<String>) -> LockBuilder {
        LockBuilder::new(self.clone(), name.into())
    }
}
