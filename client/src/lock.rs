//! Acquiring locks: a builder, then a guard that knows its fencing token and
//! whether it still holds.

use crate::error::Error;
use crate::pipeline::{acquired, released, Call};
use crate::session::Session;
use crate::types::{grant_from, Grant, Mode};
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::lock_client::LockClient;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// An acquisition being set up; finish with [`LockBuilder::acquire`] or
/// [`LockBuilder::try_acquire`].
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// let readers = s.lock("reports/cache").shared().try_acquire().await?;
/// let permit = s.lock("gpu-pool").permits(4).acquire().await?;
/// # Ok(()) }
/// ```
#[must_use = "an acquisition does nothing until acquire() or try_acquire() is awaited"]
pub struct LockBuilder {
    session: Session,
    name: String,
    mode: Mode,
    permits: u32,
    timeout: Option<Duration>,
    metadata: Vec<u8>,
    count: u32,
    max_hold: Option<Duration>,
    lock_delay: Option<Duration>,
}

impl LockBuilder {
    fn new(session: Session, name: String) -> Self {
        LockBuilder {
            session,
            name,
            mode: Mode::Exclusive,
            permits: 0,
            timeout: None,
            metadata: Vec::new(),
            count: 1,
            max_hold: None,
            lock_delay: None,
        }
    }

    /// Take `n` permits of a semaphore at once (implies shared): granted
    /// only when `n` are free, in FIFO order with the other waiters.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// // A batch job that needs 3 of the pool's 8 connections.
    /// let g = s.lock("db-pool").permits(8).count(3).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn count(mut self, n: u32) -> Self {
        self.mode = Mode::Shared;
        self.count = n;
        self
    }

    /// Hold cap: the leader releases the lock this long after granting it,
    /// even though the session lives (1 s ..= 7 days). The guard counts the
    /// lock lost a safety margin before then ([`LockGuard::is_valid`],
    /// [`LockGuard::lost`]). Without it a cluster may still apply the
    /// operator's default for the name's prefix; the guard knows either way.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let g = s.lock("reports/nightly").max_hold(std::time::Duration::from_secs(3600)).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }

    /// Lock-delay (exclusive locks, at most 60 s): if this hold ends
    /// without a release (the session expires, an administrator forces it,
    /// the hold cap runs out), nobody is granted the lock for this long, so
    /// that a holder that did not notice its loss has time to stop before
    /// anyone else writes. For resources that cannot check fencing tokens.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let g = s.lock("legacy-db/writer").lock_delay(std::time::Duration::from_secs(15)).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = Some(delay);
        self
    }

    /// Hold the lock shared (a read lock): any number of shared holders, no
    /// exclusive one.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let g = s.lock("config").shared().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn shared(mut self) -> Self {
        self.mode = Mode::Shared;
        self
    }

    /// A counting semaphore: at most `n` holders at once (implies shared).
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let g = s.lock("crawler-slots").permits(8).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn permits(mut self, n: u32) -> Self {
        self.mode = Mode::Shared;
        self.permits = n;
        self
    }

    /// How long [`LockBuilder::acquire`] waits in the queue (default: the
    /// server's maximum wait, one hour).
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let g = s.lock("deploy").timeout(std::time::Duration::from_secs(30)).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn timeout(mut self, wait: Duration) -> Self {
        self.timeout = Some(wait);
        self
    }

    /// Bytes stored with the grant, visible to `describe` (at most 4 KiB).
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let g = s.lock("deploy").metadata(b"host-7 pid 4242".to_vec()).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn metadata(mut self, metadata: impl Into<Vec<u8>>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// Waits in the lock's FIFO queue until granted, the timeout passes
    /// ([`Error::WaitTimedOut`]), or the session ends.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let guard = s.lock("singleton-cron").acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(self) -> Result<LockGuard, Error> {
        let wait = self
            .timeout
            .unwrap_or_else(|| self.session.inner.client.inner.cluster.max_wait());
        match self.run(Some(wait)).await? {
            Ok(g) => Ok(g),
            Err(_) => Err(Error::WaitTimedOut(String::new())),
        }
    }

    /// Tries once: the guard if the lock was free (and nobody queued), or
    /// `None` if it is taken.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// match s.lock("nightly").try_acquire().await? {
    ///     Some(guard) => { /* run the job */ guard.release().await?; }
    ///     None => println!("another instance runs it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, Error> {
        Ok(self.run(None).await?.ok())
    }

    /// Tries once, as [`LockBuilder::try_acquire`], and when the lock is
    /// taken says by whom: the holders the cluster found at the moment it
    /// refused (at most the 16 oldest grants, without their metadata; none
    /// if only queued acquisitions or a lock-delay stood in the way). A
    /// refusal retried after a lost answer names the same holders, not
    /// today's.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// use raftlock_client::Attempt;
    /// match s.lock("nightly").attempt().await? {
    ///     Attempt::Acquired(guard) => { /* run the job */ guard.release().await?; }
    ///     Attempt::Busy(holders) => {
    ///         for h in holders {
    ///             println!("held by session {} with token {}", h.session_id, h.token);
    ///         }
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn attempt(self) -> Result<Attempt, Error> {
        Ok(match self.run(None).await? {
            Ok(guard) => Attempt::Acquired(guard),
            Err(holders) => Attempt::Busy(holders),
        })
    }

    /// The guard, or for a try that found the lock taken, the holders the
    /// refusal named.
    async fn run(self, wait: Option<Duration>) -> Result<Result<LockGuard, Vec<Grant>>, Error> {
        let session = self.session.clone();
        let inner = &session.inner;
        inner_valid(&session)?;
        inner.giving_back.settled([self.name.as_str()]).await;
        // One id for every retry of this acquisition: a retry finds the
        // grant or the queue place the first attempt got.
        let request_id = uuid::Uuid::now_v7().as_bytes().to_vec();
        let ticket = inner.ticket();
        let started = Instant::now();
        let client = &inner.client;
        let opts = client.options().clone();
        let deadline = opts.deadline + wait.unwrap_or_default();
        let name = self.name.clone();
        // Dropped with this future if the caller stops waiting.
        let cancel =
            wait.map(|_| CancelOnDrop::new(&session, std::slice::from_ref(&name), &request_id));
        let res = client
            .inner
            .cluster
            .retry_at(deadline, |addr, ch, _| {
                let left = wait.map(|w| w.saturating_sub(started.elapsed()));
                let req = pb::AcquireRequest {
                    session_id: inner.lease.id,
                    name: name.clone(),
                    request_id: request_id.clone(),
                    mode: match self.mode {
                        Mode::Exclusive => pb::LockMode::Exclusive,
                        Mode::Shared => pb::LockMode::Shared,
                    } as i32,
                    permits: self.permits,
                    wait_timeout_ms: left.map(|l| l.as_millis() as u64),
                    metadata: self.metadata.clone(),
                    seq: ticket.seq,
                    acked_below: ticket.acked_below(),
                    in_flight: ticket.in_flight(),
                    count: self.count,
                    max_hold_ms: self.max_hold.map_or(0, |d| d.as_millis() as u64),
                    lock_delay_ms: self.lock_delay.map_or(0, |d| d.as_millis() as u64),
                };
                let timeout = opts.attempt_timeout + left.unwrap_or_default();
                let addr = addr.to_owned();
                async move {
                    client
                        .inner
                        .pipelines
                        .lock_call(&addr, ch, Call::Acquire(req), timeout)
                        .await
                        .and_then(acquired)
                }
            })
            .await;
        if let Some(c) = cancel {
            c.disarm();
        }
        let res = res.map_err(|s| Error::from_status(&s, Some(inner.lease.id), Some(&name)))?;
        let holders: Vec<Grant> = res.holders.iter().cloned().map(grant_from).collect();
        match (resp_grant(res), wait) {
            (Some(grant), _) => {
                // The leader counts a cap from when it applied the grant,
                // after this request was first sent: counted from the send,
                // less the lease margin, the guard gives up first.
                let hold_until = (grant.max_hold_ms > 0).then(|| {
                    let cap = Duration::from_millis(grant.max_hold_ms);
                    started + cap - crate::lease::safety_margin(cap)
                });
                Ok(Ok(LockGuard {
                    session,
                    grant,
                    released: AtomicBool::new(false),
                    hold_until,
                }))
            }
            (None, None) => Ok(Err(holders)),
            (None, Some(_)) => Err(Error::WaitTimedOut(name)),
        }
    }
}

/// The answer to [`LockBuilder::attempt`]: the lock, or who held it.
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// if let raftlock_client::Attempt::Busy(holders) = s.lock("nightly").attempt().await? {
///     println!("{} holder(s)", holders.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "an acquired lock is released when its guard is dropped"]
pub enum Attempt {
    /// The lock is held by this session.
    Acquired(LockGuard),
    /// It was taken: its holders when the cluster refused, oldest first.
    Busy(Vec<Grant>),
}

/// Runs `work` (a cancel or release of `names`) in the background, where a
/// later acquisition of the same locks by this session waits for it. Does
/// nothing outside a tokio runtime.
pub(crate) fn give_back_soon<F>(session: &Session, names: Vec<String>, work: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    // Registered now, before the caller can send its next acquisition.
    session.inner.giving_back.begin(&names);
    let done = GivenBack {
        session: session.clone(),
        names,
    };
    rt.spawn(async move {
        let _done = done;
        work.await;
    });
}

/// Ends a registered cancel or release however its task ends (answered,
/// failed, or dropped with the runtime).
struct GivenBack {
    session: Session,
    names: Vec<String>,
}

impl Drop for GivenBack {
    fn drop(&mut self) {
        self.session.inner.giving_back.end(&self.names);
    }
}

/// Held by a waiting acquisition (or campaign): if its future is dropped
/// before the answer comes (a `select!` that took another branch, a
/// timeout, a task aborted), the wait is cancelled on the cluster in the
/// background, and a grant that raced the cancel is released. The server
/// would notice the abandoned call by itself, but not over a Pipeline
/// stream that other calls keep open.
pub(crate) struct CancelOnDrop {
    session: Option<Session>,
    /// The locks the wait is for; the cancel names the first (a set's wait
    /// is cancelled by any of its locks).
    names: Vec<String>,
    request_id: Vec<u8>,
}

impl CancelOnDrop {
    pub(crate) fn new(session: &Session, names: &[String], request_id: &[u8]) -> Self {
        CancelOnDrop {
            session: Some(session.clone()),
            names: names.to_vec(),
            request_id: request_id.to_vec(),
        }
    }

    /// The call answered: nothing to cancel.
    pub(crate) fn disarm(mut self) {
        self.session = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        // An ended session has no waits left to cancel.
        if !session.is_valid() {
            return;
        }
        let names = std::mem::take(&mut self.names);
        let Some(name) = names.first().cloned() else {
            return;
        };
        let request_id = std::mem::take(&mut self.request_id);
        let s = session.clone();
        give_back_soon(&session, names, async move {
            match cancel_wait(&s, &name, &request_id).await {
                Ok(r) => {
                    tracing::debug!(lock = %name, cancelled = r.cancelled, released = r.released, token = r.token, "abandoned wait cancelled")
                }
                Err(e) => {
                    tracing::warn!(lock = %name, error = %e, "cancelling an abandoned wait failed; the server ends it at its deadline")
                }
            }
        });
    }
}

async fn cancel_wait(
    session: &Session,
    name: &str,
    request_id: &[u8],
) -> Result<pb::CancelWaitResponse, Error> {
    let client = &session.inner.client;
    let id = session.id();
    client
        .inner
        .cluster
        .retry(client.options().deadline, |ch, _| async move {
            raftlock_proto::v1::lock_client::LockClient::new(ch)
                .cancel_wait(pb::CancelWaitRequest {
                    session_id: id,
                    name: name.to_owned(),
                    request_id: request_id.to_vec(),
                })
                .await
        })
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| Error::from_status(&s, Some(id), Some(name)))
}

fn resp_grant(r: pb::AcquireResponse) -> Option<Grant> {
    if r.acquired {
        r.grant.map(grant_from)
    } else {
        None
    }
}

fn inner_valid(s: &Session) -> Result<(), Error> {
    if s.is_valid() {
        Ok(())
    } else {
        Err(Error::SessionLost(s.id()))
    }
}

/// A held lock. Dropping it releases the lock in the background; call
/// [`LockGuard::release`] to release it and see the result.
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// let guard = s.lock("payments/settle").acquire().await?;
/// // Hand the token to the resource, which refuses lower tokens.
/// let token = guard.token();
/// if guard.is_valid() { /* write with `token` */ }
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub struct LockGuard {
    session: Session,
    grant: Grant,
    released: AtomicBool,
    /// When a hold cap makes the lock lost, by the local clock.
    hold_until: Option<Instant>,
}

impl LockGuard {
    /// A guard of a grant with no hold cap (one of a set's).
    pub(crate) fn new(session: Session, grant: Grant) -> Self {
        LockGuard {
            session,
            grant,
            released: AtomicBool::new(false),
            hold_until: None,
        }
    }

    /// The fencing token: pass it with every write to the protected resource.
    ///
    /// ```no_run
    /// # fn f(g: raftlock_client::LockGuard) { println!("token {}", g.token()); }
    /// ```
    pub fn token(&self) -> u64 {
        self.grant.token
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn f(g: raftlock_client::LockGuard) { println!("holding {}", g.name()); }
    /// ```
    pub fn name(&self) -> &str {
        &self.grant.name
    }

    /// The grant as the cluster recorded it.
    ///
    /// ```no_run
    /// # fn f(g: raftlock_client::LockGuard) { println!("granted at {}", g.grant().granted_at_ms); }
    /// ```
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Whether this client can still claim the lock: not released, the
    /// session still valid by the local lease rule, and the hold cap (if
    /// any) not yet run out by the same rule.
    ///
    /// ```no_run
    /// # fn f(g: raftlock_client::LockGuard) { assert!(g.is_valid()); }
    /// ```
    pub fn is_valid(&self) -> bool {
        !self.released.load(Ordering::SeqCst)
            && self.session.is_valid()
            && self.hold_until.is_none_or(|u| Instant::now() < u)
    }

    /// When the hold cap makes this lock lost, by the local clock (a safety
    /// margin before the leader releases it); `None` without a cap.
    ///
    /// ```no_run
    /// # fn f(g: raftlock_client::LockGuard) {
    /// if let Some(until) = g.hold_until() { println!("{:?} left", until - std::time::Instant::now()); }
    /// # }
    /// ```
    pub fn hold_until(&self) -> Option<std::time::Instant> {
        self.hold_until.map(Instant::into_std)
    }

    /// Resolves when the lock can no longer be claimed, because its session
    /// was lost ([`Error::SessionLost`], [`Error::SessionGone`]) or its hold
    /// cap ran out ([`Error::HoldExpired`]); returns the reason.
    ///
    /// ```no_run
    /// # async fn f(g: raftlock_client::LockGuard) {
    /// let reason = g.lost().await;
    /// eprintln!("lock lost: {reason}");
    /// # }
    /// ```
    pub async fn lost(&self) -> Error {
        match self.hold_until {
            Some(until) => tokio::select! {
                e = self.session.lost() => e,
                _ = tokio::time::sleep_until(until) => Error::HoldExpired(self.grant.name.clone()),
            },
            None => self.session.lost().await,
        }
    }

    /// Runs `work` scoped to the lock: its output, or, when the lock is
    /// lost first (by the same deadline as [`LockGuard::is_valid`], before
    /// anyone else can be granted it), the reason [`LockGuard::lost`] gives,
    /// with `work` dropped at the await point it had reached. The lock
    /// stays held either way; release it after.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// # async fn write_report(_token: u64) {}
    /// let guard = s.lock("reports/daily").acquire().await?;
    /// let written = guard.run(write_report(guard.token())).await;
    /// guard.release().await?;
    /// written?; // Err(SessionLost | SessionGone | HoldExpired): the report was cut short
    /// # Ok(()) }
    /// ```
    pub async fn run<F: std::future::Future>(&self, work: F) -> Result<F::Output, Error> {
        tokio::select! {
            // Checked first: work that finishes in the same poll as the
            // loss is not reported as done under the lock.
            biased;
            reason = self.lost() => Err(reason),
            out = work => Ok(out),
        }
    }

    /// Releases the lock; the next waiter is granted in the same log entry.
    ///
    /// ```no_run
    /// # async fn f(g: raftlock_client::LockGuard) -> Result<(), raftlock_client::Error> {
    /// g.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<(), Error> {
        self.released.store(true, Ordering::SeqCst);
        release(&self.session, &self.grant).await
    }

    /// Makes this exclusive hold shared, as a read-write lock's writer
    /// becomes a reader without letting go: the token stays the same, and
    /// the readers queued at the front are granted beside it in the same
    /// log entry, so no other writer comes between. A hold that is already
    /// shared stays as it is. The hold's lock-delay is dropped (it protects
    /// exclusive holds only).
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let mut guard = s.lock("config/routes").acquire().await?;
    /// // ... write the new routes with guard.token(), then go on reading them:
    /// guard.downgrade().await?;
    /// assert_eq!(guard.grant().mode, raftlock_client::Mode::Shared);
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(&mut self) -> Result<(), Error> {
        let client = &self.session.inner.client;
        let (session_id, token) = (self.session.id(), self.grant.token);
        let name = self.grant.name.as_str();
        let resp = client
            .inner
            .cluster
            .retry(client.options().deadline, |ch, _| async move {
                LockClient::new(ch)
                    .downgrade(pb::DowngradeRequest {
                        session_id,
                        name: name.to_owned(),
                        token,
                    })
                    .await
            })
            .await
            .map_err(|s| Error::from_status(&s, Some(session_id), Some(name)))?
            .into_inner();
        if let Some(hold) = resp.hold {
            self.grant = grant_from(hold);
        }
        Ok(())
    }

    /// Lets go of the guard without releasing the lock: it stays held until
    /// [`Session::release`] with the returned grant, or until the session
    /// ends (closed or expired). For locks held for a session's whole life,
    /// such as a worker's shard assignments, without keeping a guard for
    /// each.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let grant = s.lock("shards/17").acquire().await?.detach();
    /// // ... later, or never: closing the session releases it too.
    /// s.release(&grant).await?;
    /// # Ok(()) }
    /// ```
    pub fn detach(self) -> Grant {
        self.released.store(true, Ordering::SeqCst);
        self.grant.clone()
    }
}

impl Session {
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

    /// Releases a lock this session holds under `grant` (from
    /// [`LockGuard::detach`] or [`LockGuard::grant`]); the next waiter is
    /// granted in the same log entry. A grant of another session is refused.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session, g: raftlock_client::Grant) -> Result<(), raftlock_client::Error> {
    /// s.release(&g).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, grant: &Grant) -> Result<(), Error> {
        if grant.session_id != self.id() {
            return Err(Error::InvalidArgument(format!(
                "lock {:?} was granted to session {}, not {}",
                grant.name,
                grant.session_id,
                self.id()
            )));
        }
        release(self, grant).await
    }
}

async fn release(session: &Session, grant: &Grant) -> Result<(), Error> {
    let client = &session.inner.client;
    let t = client.options().attempt_timeout;
    let (id, name, token) = (session.id(), grant.name.clone(), grant.token);
    let mut retried = false;
    let res = client
        .inner
        .cluster
        .retry_at(client.options().deadline, |addr, ch, attempt| {
            retried |= attempt > 0;
            let call = Call::Release(pb::ReleaseRequest {
                session_id: id,
                name: name.clone(),
                token,
            });
            let addr = addr.to_owned();
            async move {
                client
                    .inner
                    .pipelines
                    .lock_call(&addr, ch, call, t)
                    .await
                    .and_then(released)
            }
        })
        .await;
    settle_release(res, retried, id, &name)
}

/// The result of a release (or resign) after retries: a retry that finds
/// the grant gone means an earlier attempt released it and only its answer
/// was lost.
pub(crate) fn settle_release<T>(
    res: Result<T, tonic::Status>,
    retried: bool,
    session: u64,
    name: &str,
) -> Result<(), Error> {
    match res {
        Ok(_) => Ok(()),
        Err(s) if retried && reason::of(&s) == Some(Reason::NotHolder) => Ok(()),
        Err(s) => Err(Error::from_status(&s, Some(session), Some(name))),
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.grant.name)
            .field("token", &self.grant.token)
            .field("session", &self.grant.session_id)
            .finish()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let capped_out = self.hold_until.is_some_and(|u| Instant::now() >= u);
        if self.released.swap(true, Ordering::SeqCst) || !self.session.is_valid() || capped_out {
            return;
        }
        let session = self.session.clone();
        let grant = self.grant.clone();
        give_back_soon(&self.session, vec![grant.name.clone()], async move {
            if let Err(e) = release(&session, &grant).await {
                tracing::warn!(lock = %grant.name, token = grant.token, error = %e, "background release failed");
            }
        });
    }
}
