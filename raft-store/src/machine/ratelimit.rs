//! Rate limits: token buckets (GCRA, the generic cell rate algorithm) in
//! the replicated state, so that what a limit admitted survives a leader
//! change exactly.
//!
//! Time is the **rate clock**, carried in each command (`now_ns`) and never
//! read from a clock here. The leader computes it as the replicated clock
//! it found when it took over plus the time its own monotonic clock has
//! measured since, so a new leader whose wall clock is ahead cannot mint
//! tokens: time on the rate clock only passes while a leader measures it,
//! and stands still across the gap of a failover (which can only admit
//! less). The machine also never lets it go back (`max` with the highest
//! value applied), so a deposed leader's late value cannot rewind a bucket.
//!
//! A bucket of `rate` tokens per `per_ms` with burst `burst` has emission
//! interval `T = ceil(per_ms · 10⁶ / rate)` ns (rounded up: never more
//! than the rate) and a theoretical arrival time `tat`. Taking `n` at
//! `now` moves `tat` to `max(tat, now) + n·T` if that is at most
//! `now + burst·T`, and is refused otherwise, with the wait until it would
//! fit. Over any span of `d` ns of the rate clock a bucket admits at most
//! `d / T + burst` tokens.
//!
//! A **token lease** takes a block at once (counted as admitted then) for
//! a client to spend locally within `lease_ms`; the client returns what it
//! did not spend, which is credited back. The machine keeps each lease's
//! size, so nobody can return more than was reserved.

use super::error::LeaseError;
use super::outcome::Reply;
use super::{validate, LeaseMachine, LogIndex};
use raftlock_proto::limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How long a lease's record is kept after it runs out, for its return
/// (clients return at once when they finish, or when the lease ends). A
/// block spent to the last token is never returned, so its record goes
/// only this long after it ran out.
pub const RETURN_GRACE_NS: u64 = 5_000_000_000;

/// What a rate limit allows.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSpec {
    /// Tokens per period.
    pub rate: u64,
    /// The period, in ms.
    pub per_ms: u64,
    /// Most tokens available at once (taken in a burst).
    pub burst: u64,
}

impl LimitSpec {
    /// The emission interval: ns per token, rounded up.
    pub fn interval_ns(&self) -> u64 {
        let period_ns = u128::from(self.per_ms) * 1_000_000;
        let rate = u128::from(self.rate.max(1));
        u64::try_from(period_ns.div_ceil(rate)).unwrap_or(u64::MAX)
    }

    /// The burst as rate-clock time, ns.
    fn tolerance_ns(&self) -> u128 {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::planted(crate::planted::Bug::RateDoubleBurst) {
            return 2 * u128::from(self.burst) * u128::from(self.interval_ns());
        }
        u128::from(self.burst) * u128::from(self.interval_ns())
    }
}

/// One rate limit's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// What it allows.
    pub spec: LimitSpec,
    /// Theoretical arrival time on the rate clock, ns.
    pub tat_ns: u64,
    /// Tokens admitted since it was defined (leases count when taken).
    pub admitted: u64,
    /// Takes refused since it was defined.
    pub refused: u64,
    /// Outstanding token leases: id (the taking command's index) → tokens
    /// reserved and when the lease runs out on the rate clock.
    pub leases: BTreeMap<LogIndex, (u64, u64)>,
}

impl Bucket {
    fn new(spec: LimitSpec, now_ns: u64) -> Bucket {
        Bucket {
            spec,
            tat_ns: now_ns,
            admitted: 0,
            refused: 0,
            leases: BTreeMap::new(),
        }
    }

    /// Tokens that could be taken at `now_ns`.
    pub fn available(&self, now_ns: u64) -> u64 {
        let t = u128::from(self.spec.interval_ns());
        let used = u128::from(self.tat_ns.saturating_sub(now_ns));
        let free = self.spec.tolerance_ns().saturating_sub(used);
        u64::try_from(free / t).unwrap_or(u64::MAX)
    }

    /// Forgets leases whose return grace has passed.
    fn forget_old_leases(&mut self, now_ns: u64) {
        self.leases
            .retain(|_, (_, until)| until.saturating_add(RETURN_GRACE_NS) > now_ns);
    }
}

/// A take: `n` tokens now, or a block of `n` for a lease of `lease_ms`.
pub(super) struct Take<'a> {
    pub name: &'a str,
    pub n: u64,
    pub now_ns: u64,
    pub spec: Option<LimitSpec>,
    pub lease_ms: u64,
}

impl LeaseMachine {
    /// The rate clock: moves to `now_ns` unless it is already past it.
    fn rate_now(&mut self, now_ns: u64) -> u64 {
        self.rate_clock_ns = self.rate_clock_ns.max(now_ns);
        self.rate_clock_ns
    }

    /// Creates `name` with `spec` if it does not exist; an existing limit
    /// with another spec is a conflict, refused with nothing changed.
    fn bucket_for(
        &mut self,
        name: &str,
        spec: Option<LimitSpec>,
        now_ns: u64,
    ) -> Result<(&mut Bucket, bool), LeaseError> {
        validate::name(name)?;
        if let Some(s) = &spec {
            validate::limit_spec(s)?;
        }
        let exists = self.buckets.contains_key(name);
        match (exists, spec) {
            (true, Some(s)) if self.buckets[name].spec != s => {
                return Err(LeaseError::LimitConflict {
                    name: name.to_owned(),
                    rate: self.buckets[name].spec.rate,
                    per_ms: self.buckets[name].spec.per_ms,
                    burst: self.buckets[name].spec.burst,
                })
            }
            (false, None) => {
                return Err(LeaseError::LimitNotFound {
                    name: name.to_owned(),
                })
            }
            (false, Some(_)) if self.buckets.len() >= limits::MAX_RATE_LIMITS => {
                return Err(LeaseError::TooManyLimits {
                    max: limits::MAX_RATE_LIMITS,
                })
            }
            _ => {}
        }
        let now = self.rate_now(now_ns);
        let created = !exists;
        let bucket = self.buckets.entry(name.to_owned()).or_insert_with(|| {
            Bucket::new(
                spec.unwrap_or(LimitSpec {
                    rate: 1,
                    per_ms: 1,
                    burst: 1,
                }),
                now,
            )
        });
        Ok((bucket, created))
    }

    pub(super) fn define_limit(
        &mut self,
        name: &str,
        spec: LimitSpec,
        now_ns: u64,
    ) -> Result<Reply, LeaseError> {
        let (_, created) = self.bucket_for(name, Some(spec), now_ns)?;
        Ok(Reply::LimitDefined { created })
    }

    pub(super) fn take(&mut self, t: Take<'_>, index: LogIndex) -> Result<Reply, LeaseError> {
        if t.n == 0 {
            return Err(LeaseError::InvalidArgument("take at least 1 token".into()));
        }
        if t.lease_ms > limits::MAX_TOKEN_LEASE_MS {
            return Err(LeaseError::InvalidArgument(format!(
                "a token lease of {} ms is longer than the limit of {} ms",
                t.lease_ms,
                limits::MAX_TOKEN_LEASE_MS
            )));
        }
        // Checked before anything changes: a refusal changes nothing.
        if let Some(b) = self.buckets.get(t.name) {
            if t.spec.is_none_or(|s| s == b.spec) {
                if t.n > b.spec.burst {
                    return Err(more_than_burst(t.name, t.n, b.spec.burst));
                }
                if t.lease_ms > 0 && b.leases.len() >= limits::MAX_TOKEN_LEASES_PER_LIMIT {
                    return Err(LeaseError::InvalidArgument(format!(
                        "rate limit {:?} already has {} token leases outstanding",
                        t.name,
                        limits::MAX_TOKEN_LEASES_PER_LIMIT
                    )));
                }
            }
        } else if let Some(s) = &t.spec {
            if t.n > s.burst {
                return Err(more_than_burst(t.name, t.n, s.burst));
            }
        }
        self.bucket_for(t.name, t.spec, t.now_ns)?;
        let now = self.rate_clock_ns;
        let Some(bucket) = self.buckets.get_mut(t.name) else {
            return Err(LeaseError::LimitNotFound {
                name: t.name.to_owned(),
            });
        };
        bucket.forget_old_leases(now);
        let interval = u128::from(bucket.spec.interval_ns());
        let start = u128::from(bucket.tat_ns.max(now));
        let tat = start + u128::from(t.n) * interval;
        let ahead = tat - u128::from(now);
        let tolerance = bucket.spec.tolerance_ns();
        if ahead > tolerance {
            bucket.refused += 1;
            let wait_ns = ahead - tolerance;
            return Ok(Reply::TakeRefused {
                retry_after_ns: u64::try_from(wait_ns).unwrap_or(u64::MAX),
            });
        }
        bucket.tat_ns = u64::try_from(tat).unwrap_or(u64::MAX);
        bucket.admitted = bucket.admitted.saturating_add(t.n);
        let lease = (t.lease_ms > 0).then(|| {
            let until = now.saturating_add(t.lease_ms.saturating_mul(1_000_000));
            bucket.leases.insert(index, (t.n, until));
            index
        });
        Ok(Reply::Taken {
            n: t.n,
            remaining: bucket.available(now),
            lease,
        })
    }

    /// Credits back the tokens of lease `lease` its client did not spend.
    pub(super) fn return_tokens(
        &mut self,
        name: &str,
        lease: LogIndex,
        unused: u64,
        now_ns: u64,
    ) -> Result<Reply, LeaseError> {
        validate::name(name)?;
        let Some(bucket) = self.buckets.get(name) else {
            return Err(LeaseError::LimitNotFound {
                name: name.to_owned(),
            });
        };
        let Some(&(reserved, _)) = bucket.leases.get(&lease) else {
            // Already returned, or kept past its grace: nothing to credit.
            return Ok(Reply::Returned { credited: 0 });
        };
        if unused > reserved {
            return Err(LeaseError::InvalidArgument(format!(
                "lease {lease} of rate limit {name:?} reserved {reserved} tokens, not {unused}"
            )));
        }
        let now = self.rate_now(now_ns);
        let Some(bucket) = self.buckets.get_mut(name) else {
            return Ok(Reply::Returned { credited: 0 });
        };
        bucket.leases.remove(&lease);
        let credit = u128::from(unused) * u128::from(bucket.spec.interval_ns());
        // A full bucket stays full: tokens do not accrue beyond the burst.
        let tat = u128::from(bucket.tat_ns)
            .saturating_sub(credit)
            .max(u128::from(now));
        bucket.tat_ns = u64::try_from(tat).unwrap_or(u64::MAX);
        bucket.admitted = bucket.admitted.saturating_sub(unused);
        bucket.forget_old_leases(now);
        Ok(Reply::Returned { credited: unused })
    }

    pub(super) fn delete_limit(&mut self, name: &str) -> Result<Reply, LeaseError> {
        validate::name(name)?;
        Ok(Reply::LimitDeleted {
            existed: self.buckets.remove(name).is_some(),
        })
    }

    /// A rate limit by name.
    pub fn rate_limit(&self, name: &str) -> Option<&Bucket> {
        self.buckets.get(name)
    }

    /// Every rate limit, by name.
    pub fn rate_limits(&self) -> impl Iterator<Item = (&str, &Bucket)> {
        self.buckets.iter().map(|(n, b)| (n.as_str(), b))
    }

    /// The highest rate-clock time applied, ns: where a new leader's rate
    /// clock starts.
    pub fn rate_clock_ns(&self) -> u64 {
        self.rate_clock_ns
    }
}

fn more_than_burst(name: &str, n: u64, burst: u64) -> LeaseError {
    LeaseError::InvalidArgument(format!(
        "{n} tokens is more than rate limit {name:?}'s burst of {burst}: it could never be admitted"
    ))
}
