//! Rate limits: token buckets kept by the cluster, exact through leader
//! changes. Take tokens one request at a time, or reserve a block and
//! spend it locally ([`TokenLease`]), so that a hot limit costs one Raft
//! write per block.

use crate::client::Client;
use crate::error::Error;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::rate_limit_client::RateLimitClient;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// A rate limit by name, and the parameters to create it with on first
/// use; from [`Client::rate_limit`].
///
/// ```no_run
/// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
/// let emails = client
///     .rate_limit("outbound-email")
///     .rate(100, std::time::Duration::from_secs(1))
///     .burst(20);
/// if emails.try_take(1).await?.admitted {
///     // send one email
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimit {
    client: Client,
    name: String,
    spec: Option<pb::LimitSpec>,
}

/// The answer to a take.
///
/// ```
/// let a = raftlock_client::Admission { admitted: false, n: 0, remaining: 0, retry_after: std::time::Duration::from_millis(40) };
/// assert!(!a.admitted && a.retry_after.as_millis() == 40);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Admission {
    /// The tokens were admitted.
    pub admitted: bool,
    /// How many.
    pub n: u64,
    /// Tokens that could be taken at once after this.
    pub remaining: u64,
    /// When not admitted: after how long they would be.
    #[serde(serialize_with = "crate::types::as_ms", rename = "retry_after_ms")]
    pub retry_after: Duration,
}

/// A rate limit's state, from [`RateLimit::describe`].
///
/// ```no_run
/// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
/// let info = l.describe().await?;
/// println!("{} of {} available", info.available, info.burst);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LimitInfo {
    /// Limit name.
    pub name: String,
    /// Tokens per period.
    pub rate: u64,
    /// The period, ms.
    pub per_ms: u64,
    /// Most tokens at once.
    pub burst: u64,
    /// Tokens that could be taken at once now.
    pub available: u64,
    /// Tokens admitted since it was defined (less what leases returned).
    pub admitted: u64,
    /// Takes refused since it was defined.
    pub refused: u64,
    /// Token leases outstanding.
    pub leases: u32,
}

impl Client {
    /// The rate limit `name`. Give [`RateLimit::rate`] and
    /// [`RateLimit::burst`] to create it on first use; without them it must
    /// exist already.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let api = client.rate_limit("partner-api").rate(10, std::time::Duration::from_secs(1)).burst(10);
    /// let a = api.take(1, std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub fn rate_limit(&self, name: impl Into<String>) -> RateLimit {
        RateLimit {
            client: self.clone(),
            name: name.into(),
            spec: None,
        }
    }
}

impl RateLimit {
    /// `n` tokens per `per` (a period of at least 1 ms).
    ///
    /// ```no_run
    /// # fn f(client: raftlock_client::Client) {
    /// let l = client.rate_limit("crawl").rate(5, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn rate(mut self, n: u64, per: Duration) -> Self {
        let spec = self.spec.get_or_insert(pb::LimitSpec {
            rate: 0,
            per_ms: 0,
            burst: 1,
        });
        spec.rate = n;
        spec.per_ms = (per.as_millis() as u64).max(1);
        self
    }

    /// At most `b` tokens at once (default 1).
    ///
    /// ```no_run
    /// # fn f(client: raftlock_client::Client) {
    /// let l = client.rate_limit("crawl").rate(5, std::time::Duration::from_secs(1)).burst(10);
    /// # }
    /// ```
    pub fn burst(mut self, b: u64) -> Self {
        let spec = self.spec.get_or_insert(pb::LimitSpec {
            rate: 0,
            per_ms: 1_000,
            burst: 1,
        });
        spec.burst = b;
        self
    }

    /// The limit's name.
    ///
    /// ```no_run
    /// # fn f(l: raftlock_client::RateLimit) { println!("{}", l.name()); }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    async fn call_take(
        &self,
        n: u64,
        wait: Option<Duration>,
        lease_ms: u64,
    ) -> Result<pb::TakeResponse, Error> {
        let opts = self.client.options().clone();
        let deadline = opts.deadline + wait.unwrap_or_default();
        let started = Instant::now();
        let res = self
            .client
            .inner
            .cluster
            .retry(deadline, |ch, _| {
                let left = wait.map(|w| w.saturating_sub(started.elapsed()));
                let mut req = tonic::Request::new(pb::TakeRequest {
                    name: self.name.clone(),
                    n,
                    limit: self.spec,
                    wait_timeout_ms: left.map(|l| l.as_millis() as u64),
                    lease_ms,
                });
                req.set_timeout(opts.attempt_timeout + left.unwrap_or_default());
                async move { RateLimitClient::new(ch).take(req).await }
            })
            .await;
        // A retry after a lost answer may take twice: that only ever admits
        // less, never more than the limit.
        res.map(|r| r.into_inner())
            .map_err(|s| Error::from_status(&s, None, Some(&self.name)))
    }

    /// Takes `tokens` tokens now, or says after how long they would fit.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
    /// let a = l.try_take(1).await?;
    /// if !a.admitted { println!("retry in {:?}", a.retry_after); }
    /// # Ok(()) }
    /// ```
    pub async fn try_take(&self, tokens: u64) -> Result<Admission, Error> {
        self.call_take(tokens, None, 0).await.map(admission)
    }

    /// Takes `tokens` tokens, waiting on the server up to `wait` for them (in
    /// FIFO order with the other waiting takes of this limit). Not
    /// admitted when they would not fit within `wait`.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
    /// if l.take(1, std::time::Duration::from_secs(2)).await?.admitted { /* call the API */ }
    /// # Ok(()) }
    /// ```
    pub async fn take(&self, tokens: u64, wait: Duration) -> Result<Admission, Error> {
        self.call_take(tokens, Some(wait), 0).await.map(admission)
    }

    /// Reserves a block of `tokens` tokens (at most the burst) to spend locally
    /// within `validity` (at most 10 s): one Raft write for the whole block.
    /// The lease counts as spent at once on the cluster; what is left when
    /// it ends is given back ([`TokenLease::finish`], or on drop). `None`
    /// when the block would not fit now.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
    /// if let Some(block) = l.reserve(50, std::time::Duration::from_secs(1)).await? {
    ///     while block.try_spend() { /* one request */ }
    ///     block.finish().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn reserve(
        &self,
        tokens: u64,
        validity: Duration,
    ) -> Result<Option<TokenLease>, Error> {
        let sent = Instant::now();
        let lease_ms = (validity.as_millis() as u64).max(1);
        let r = self.call_take(tokens, None, lease_ms).await?;
        if !r.admitted {
            return Ok(None);
        }
        let validity = Duration::from_millis(lease_ms);
        Ok(Some(TokenLease {
            limit: self.clone(),
            id: r.lease_id,
            reserved: r.n,
            spent: AtomicU64::new(0),
            // Counted from before the request, less the lease margin: the
            // block is spent while the cluster counts it, and not after.
            until: sent + validity - crate::lease::safety_margin(validity),
            finished: AtomicBool::new(false),
        }))
    }

    /// Creates the limit with the parameters given, or checks an existing
    /// one has them ([`Error::LimitConflict`] otherwise); true if this call
    /// created it.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
    /// l.define().await?;
    /// # Ok(()) }
    /// ```
    pub async fn define(&self) -> Result<bool, Error> {
        let spec = self.spec.ok_or_else(|| {
            Error::InvalidArgument("give a rate (and burst) to define a limit".into())
        })?;
        let res = self
            .client
            .inner
            .cluster
            .retry(self.client.options().deadline, |ch, _| {
                let req = pb::DefineLimitRequest {
                    name: self.name.clone(),
                    limit: Some(spec),
                };
                async move { RateLimitClient::new(ch).define(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(&self.name)))?;
        Ok(res.into_inner().created)
    }

    /// The limit's parameters, tokens available now and totals.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
    /// println!("{:?}", l.describe().await?);
    /// # Ok(()) }
    /// ```
    pub async fn describe(&self) -> Result<LimitInfo, Error> {
        let r = self
            .client
            .inner
            .cluster
            .retry(self.client.options().deadline, |ch, _| {
                let req = pb::DescribeLimitRequest {
                    name: self.name.clone(),
                };
                async move { RateLimitClient::new(ch).describe(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(&self.name)))?
            .into_inner();
        let spec = r.limit.unwrap_or_default();
        Ok(LimitInfo {
            name: r.name,
            rate: spec.rate,
            per_ms: spec.per_ms,
            burst: spec.burst,
            available: r.available,
            admitted: r.admitted,
            refused: r.refused,
            leases: r.leases,
        })
    }

    /// Forgets the limit (needs the `admin` right); true if it existed.
    ///
    /// ```no_run
    /// # async fn f(l: raftlock_client::RateLimit) -> Result<(), raftlock_client::Error> {
    /// l.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<bool, Error> {
        let r = self
            .client
            .inner
            .cluster
            .retry(self.client.options().deadline, |ch, _| {
                let req = pb::DeleteLimitRequest {
                    name: self.name.clone(),
                };
                async move { RateLimitClient::new(ch).delete(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(&self.name)))?;
        Ok(r.into_inner().existed)
    }
}

fn admission(r: pb::TakeResponse) -> Admission {
    Admission {
        admitted: r.admitted,
        n: r.n,
        remaining: r.remaining,
        retry_after: Duration::from_millis(r.retry_after_ms),
    }
}

/// A block of tokens reserved with [`RateLimit::reserve`], spent locally
/// until it runs out or its validity ends; dropping it gives back what was
/// not spent (in the background).
///
/// ```no_run
/// # async fn f(block: raftlock_client::TokenLease) {
/// if block.try_spend() { /* admitted */ }
/// println!("{} left", block.left());
/// # }
/// ```
pub struct TokenLease {
    limit: RateLimit,
    id: u64,
    reserved: u64,
    spent: AtomicU64,
    until: Instant,
    finished: AtomicBool,
}

impl TokenLease {
    /// Spends one token if the block has one left and is still valid.
    ///
    /// ```no_run
    /// # fn f(block: raftlock_client::TokenLease) { assert!(block.try_spend() || block.left() == 0 || !block.is_valid()); }
    /// ```
    pub fn try_spend(&self) -> bool {
        if !self.is_valid() {
            return false;
        }
        self.spent
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s < self.reserved).then_some(s + 1)
            })
            .is_ok()
    }

    /// Tokens not spent yet.
    ///
    /// ```no_run
    /// # fn f(block: raftlock_client::TokenLease) { println!("{}", block.left()); }
    /// ```
    pub fn left(&self) -> u64 {
        self.reserved - self.spent.load(Ordering::SeqCst).min(self.reserved)
    }

    /// Whether tokens of the block may still be spent (its validity, less
    /// a margin, has not ended, and it was not finished).
    ///
    /// ```no_run
    /// # fn f(block: raftlock_client::TokenLease) { println!("{}", block.is_valid()); }
    /// ```
    pub fn is_valid(&self) -> bool {
        !self.finished.load(Ordering::SeqCst) && Instant::now() < self.until
    }

    /// Stops spending and gives back what is left; returns how many tokens
    /// the cluster credited back.
    ///
    /// ```no_run
    /// # async fn f(block: raftlock_client::TokenLease) -> Result<(), raftlock_client::Error> {
    /// let back = block.finish().await?;
    /// # Ok(()) }
    /// ```
    pub async fn finish(self) -> Result<u64, Error> {
        self.finished.store(true, Ordering::SeqCst);
        give_back(&self.limit, self.id, self.left()).await
    }
}

async fn give_back(limit: &RateLimit, id: u64, unused: u64) -> Result<u64, Error> {
    if unused == 0 {
        return Ok(0);
    }
    let r = limit
        .client
        .inner
        .cluster
        .retry(limit.client.options().deadline, |ch, _| {
            let req = pb::ReturnTokensRequest {
                name: limit.name.clone(),
                lease_id: id,
                unused,
            };
            async move { RateLimitClient::new(ch).r#return(req).await }
        })
        .await
        .map_err(|s| Error::from_status(&s, None, Some(&limit.name)))?;
    Ok(r.into_inner().credited)
}

impl Drop for TokenLease {
    fn drop(&mut self) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        let unused = self.left();
        if unused == 0 {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let limit = self.limit.clone();
            let id = self.id;
            rt.spawn(async move {
                if let Err(e) = give_back(&limit, id, unused).await {
                    tracing::warn!(limit = %limit.name, lease = id, error = %e, "returning unspent tokens failed");
                }
            });
        }
    }
}
