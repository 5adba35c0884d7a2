//! Acquiring several locks together: one log entry grants them all, or
//! none is granted. Waiting for a set never deadlocks with another set,
//! whatever order either names its locks in, which taking locks one at a
//! time in a program cannot promise.

use crate::error::Error;
use crate::lock::{CancelOnDrop, LockGuard};
use crate::session::Session;
use crate::types::{grant_from, Grant};
use raftlock_proto::v1 as pb;
use std::time::Duration;
use tokio::time::Instant;

/// An acquisition of a set of locks being set up; finish with
/// [`LockAllBuilder::acquire`] or [`LockAllBuilder::try_acquire`].
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// // Move money between two accounts: hold both or neither.
/// let both = s.lock_all(["accounts/17", "accounts/42"]).acquire().await?;
/// println!("tokens {:?}", both.tokens());
/// both.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "an acquisition does nothing until acquire() or try_acquire() is awaited"]
pub struct LockAllBuilder {
    session: Session,
    names: Vec<String>,
    timeout: Option<Duration>,
    metadata: Vec<u8>,
}

impl LockAllBuilder {
    /// Waits at most `wait` for the whole set (default: the client's
    /// longest wait); [`Error::WaitTimedOut`] after, with no waiter left
    /// behind.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let set = s.lock_all(["a", "b"]).timeout(std::time::Duration::from_secs(5)).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn timeout(mut self, wait: Duration) -> Self {
        self.timeout = Some(wait);
        self
    }

    /// Opaque bytes stored with each grant, shown to anyone who describes
    /// one of the locks.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let set = s.lock_all(["a", "b"]).metadata("transfer 8812").acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn metadata(mut self, metadata: impl Into<Vec<u8>>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// Waits in the queue of every lock of the set until all are granted
    /// together, the timeout passes ([`Error::WaitTimedOut`]), or the
    /// session ends. Dropping the future cancels the wait on the cluster.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let set = s.lock_all(["inventory/sku-1", "inventory/sku-2"]).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(self) -> Result<LockSet, Error> {
        let wait = self
            .timeout
            .unwrap_or_else(|| self.session.inner.client.inner.cluster.max_wait());
        let first = self.names.first().cloned().unwrap_or_default();
        match self.run(Some(wait)).await? {
            Some(set) => Ok(set),
            None => Err(Error::WaitTimedOut(first)),
        }
    }

    /// Tries once: the set if every lock was free (and nobody queued for
    /// any), or `None`.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// if let Some(set) = s.lock_all(["a", "b"]).try_acquire().await? {
    ///     set.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(self) -> Result<Option<LockSet>, Error> {
        self.run(None).await
    }

    async fn run(self, wait: Option<Duration>) -> Result<Option<LockSet>, Error> {
        let session = self.session.clone();
        if !session.is_valid() {
            return Err(Error::SessionLost(session.id()));
        }
        let mut names = self.names;
        names.sort_unstable();
        names.dedup();
        session
            .inner
            .giving_back
            .settled(names.iter().map(String::as_str))
            .await;
        let first = names.first().cloned().unwrap_or_default();
        let request_id = uuid::Uuid::now_v7().as_bytes().to_vec();
        // Numbered as an acquire is: a very late duplicate of this set is
        // refused, not granted again.
        let ticket = session.inner.ticket();
        let started = Instant::now();
        let client = &session.inner.client;
        let opts = client.options().clone();
        let deadline = opts.deadline + wait.unwrap_or_default();
        // A cancel of one lock of a set cancels the set on the server.
        let cancel = wait.map(|_| CancelOnDrop::new(&session, &names, &request_id));
        let id = session.id();
        let res = client
            .inner
            .cluster
            .retry(deadline, |ch, _| {
                let left = wait.map(|w| w.saturating_sub(started.elapsed()));
                let req = pb::AcquireAllRequest {
                    session_id: id,
                    names: names.clone(),
                    request_id: request_id.clone(),
                    wait_timeout_ms: left.map(|l| l.as_millis() as u64),
                    metadata: self.metadata.clone(),
                    seq: ticket.seq,
                    acked_below: ticket.acked_below(),
                    in_flight: ticket.in_flight(),
                };
                let timeout = opts.attempt_timeout + left.unwrap_or_default();
                async move {
                    let mut request = tonic::Request::new(req);
                    request.set_timeout(timeout);
                    raftlock_proto::v1::lock_client::LockClient::new(ch)
                        .acquire_all(request)
                        .await
                }
            })
            .await;
        if let Some(c) = cancel {
            c.disarm();
        }
        let res = res
            .map(tonic::Response::into_inner)
            .map_err(|s| Error::from_status(&s, Some(id), Some(&first)))?;
        if !res.acquired {
            return match wait {
                None => Ok(None),
                Some(_) => Err(Error::WaitTimedOut(first)),
            };
        }
        let guards = res
            .grants
            .into_iter()
            .map(|g| LockGuard::new(session.clone(), grant_from(g)))
            .collect();
        Ok(Some(LockSet { guards }))
    }
}

/// Locks held together, one [`LockGuard`] each, in name order. Dropping it
/// releases them all in the background; [`LockSet::release`] releases them
/// and reports the result.
///
/// ```no_run
/// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
/// let set = s.lock_all(["a", "b", "c"]).acquire().await?;
/// for g in set.guards() { println!("{} token {}", g.name(), g.token()); }
/// set.release().await?;
/// # Ok(()) }
/// ```
pub struct LockSet {
    guards: Vec<LockGuard>,
}

impl LockSet {
    /// The guard of each lock, in name order.
    ///
    /// ```no_run
    /// # fn f(set: raftlock_client::LockSet) { assert!(set.guards().len() >= 2); }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Each lock's name and fencing token, in name order. The tokens are
    /// equal (one log entry granted them all); each fences its own lock.
    ///
    /// ```no_run
    /// # fn f(set: raftlock_client::LockSet) { for (name, token) in set.tokens() { println!("{name}: {token}"); } }
    /// ```
    pub fn tokens(&self) -> Vec<(&str, u64)> {
        self.guards.iter().map(|g| (g.name(), g.token())).collect()
    }

    /// The grants as the cluster recorded them.
    ///
    /// ```no_run
    /// # fn f(set: raftlock_client::LockSet) { let grants = set.grants(); }
    /// ```
    pub fn grants(&self) -> Vec<Grant> {
        self.guards.iter().map(|g| g.grant().clone()).collect()
    }

    /// Whether this client can still claim every lock of the set (they
    /// share a session, so they are lost together).
    ///
    /// ```no_run
    /// # fn f(set: raftlock_client::LockSet) { assert!(set.is_valid()); }
    /// ```
    pub fn is_valid(&self) -> bool {
        self.guards.iter().all(LockGuard::is_valid)
    }

    /// Resolves when the set can no longer be claimed (its session was
    /// lost); returns the reason.
    ///
    /// ```no_run
    /// # async fn f(set: raftlock_client::LockSet) { eprintln!("lost: {}", set.lost().await); }
    /// ```
    pub async fn lost(&self) -> Error {
        match self.guards.first() {
            Some(g) => g.lost().await,
            None => std::future::pending().await,
        }
    }

    /// Runs `work` scoped to the set, as [`LockGuard::run`] does for one
    /// lock: its output, or the reason the set was lost first, with `work`
    /// dropped.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// # async fn transfer() {}
    /// let set = s.lock_all(["accounts/17", "accounts/42"]).acquire().await?;
    /// let done = set.run(transfer()).await;
    /// set.release().await?;
    /// done?;
    /// # Ok(()) }
    /// ```
    pub async fn run<F: std::future::Future>(&self, work: F) -> Result<F::Output, Error> {
        tokio::select! {
            biased;
            reason = self.lost() => Err(reason),
            out = work => Ok(out),
        }
    }

    /// Releases every lock of the set (each its own release; the first
    /// failure is returned after trying them all).
    ///
    /// ```no_run
    /// # async fn f(set: raftlock_client::LockSet) -> Result<(), raftlock_client::Error> {
    /// set.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<(), Error> {
        let mut first_error = None;
        for g in self.guards {
            if let Err(e) = g.release().await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The guards, to release the locks one at a time.
    ///
    /// ```no_run
    /// # async fn f(set: raftlock_client::LockSet) -> Result<(), raftlock_client::Error> {
    /// for g in set.into_guards() { g.release().await?; }
    /// # Ok(()) }
    /// ```
    pub fn into_guards(self) -> Vec<LockGuard> {
        self.guards
    }
}

impl Session {
    /// Starts building an acquisition of every lock in `names` (2 to 64,
    /// any order, repeats count once), exclusively and together.
    ///
    /// ```no_run
    /// # async fn f(s: raftlock_client::Session) -> Result<(), raftlock_client::Error> {
    /// let set = s.lock_all(["printers/a", "printers/b"]).acquire().await?;
    /// set.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I, S>(&self, names: I) -> LockAllBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        LockAllBuilder {
            session: self.clone(),
            names: names.into_iter().map(Into::into).collect(),
            timeout: None,
            metadata: Vec::new(),
        }
    }
}
