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
}

/// Every token lease by when its record goes (rate clock ns), then limit
/// and id, with the identity that took it ("" for none). Keys are plain
/// integers so that JSON snapshots can hold it too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseEnds(BTreeMap<u64, Vec<(String, LogIndex, String)>>);

impl LeaseEnds {
    /// The index of `buckets`' leases, none with an owner (what a version
    /// 5 snapshot held).
    pub(super) fn of(buckets: &BTreeMap<String, Bucket>) -> LeaseEnds {
        let mut ends = LeaseEnds::default();
        for (name, b) in buckets {
            for (lease, (_, until)) in &b.leases {
                ends.insert(lease_gone_at(*until), name, *lease, "");
            }
        }
        ends
    }

    fn insert(&mut self, gone_at: u64, name: &str, lease: LogIndex, owner: &str) {
        self.0
            .entry(gone_at)
            .or_default()
            .push((name.to_owned(), lease, owner.to_owned()));
    }

    fn position(&self, gone_at: u64, name: &str, lease: LogIndex) -> Option<usize> {
        self.0
            .get(&gone_at)?
            .iter()
            .position(|(n, l, _)| n == name && *l == lease)
    }

    /// Who took a lease ("" for nobody in particular).
    fn owner(&self, gone_at: u64, name: &str, lease: LogIndex) -> &str {
        match self.position(gone_at, name, lease) {
            Some(i) => &self.0[&gone_at][i].2,
            None => "",
        }
    }

    fn remove(&mut self, gone_at: u64, name: &str, lease: LogIndex) {
        if let Some(i) = self.position(gone_at, name, lease) {
            let at = self.0.get_mut(&gone_at).expect("found there");
            at.remove(i);
            if at.is_empty() {
                self.0.remove(&gone_at);
            }
        }
    }

    /// Takes out every lease whose record goes by `now`.
    fn due(&mut self, now: u64) -> Vec<(String, LogIndex)> {
        let mut due = Vec::new();
        while let Some(entry) = self.0.first_entry() {
            if *entry.key() > now {
                break;
            }
            due.extend(entry.remove().into_iter().map(|(n, l, _)| (n, l)));
        }
        due
    }
}

/// When a lease's record may go: its validity and the return grace after.
fn lease_gone_at(until_ns: u64) -> u64 {
    until_ns.saturating_add(RETURN_GRACE_NS)
}

/// A take: `n` tokens now, or a block of `n` for a lease of `lease_ms`.
pub(super) struct Take<'a> {
    pub name: &'a str,
    pub n: u64,
    pub now_ns: u64,
    pub spec: Option<LimitSpec>,
    pub lease_ms: u64,
    /// The identity taking ("" without authentication): only it may
    /// return a lease taken here.
    pub owner: &'a str,
}

impl LeaseMachine {
    /// The rate clock: moves to `now_ns` unless it is already past it, and
    /// forgets every lease, of any limit, whose return grace has passed by
    /// then. They went only with a later call on their own limit before,
    /// so a limit used once kept its leases for good.
    fn rate_now(&mut self, now_ns: u64) -> u64 {
        self.rate_clock_ns = self.rate_clock_ns.max(now_ns);
        let now = self.rate_clock_ns;
        for (name, lease) in self.lease_ends.due(now) {
            if let Some(b) = self.buckets.get_mut(&name) {
                b.leases.remove(&lease);
            }
        }
        now
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
                    // The take is well formed; the limit as it stands
                    // cannot serve it.
                    return Err(LeaseError::MoreThanBurst {
                        name: t.name.to_owned(),
                        n: t.n,
                        burst: b.spec.burst,
                    });
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
            (index, until)
        });
        let remaining = bucket.available(now);
        if let Some((index, until)) = lease {
            self.lease_ends
                .insert(lease_gone_at(until), t.name, index, t.owner);
        }
        Ok(Reply::Taken {
            n: t.n,
            remaining,
            lease: lease.map(|(index, _)| index),
        })
    }

    /// Credits back the tokens of lease `lease` its client did not spend;
    /// `owner`, when the return names one, must be who took it.
    pub(super) fn return_tokens(
        &mut self,
        name: &str,
        lease: LogIndex,
        unused: u64,
        now_ns: u64,
        owner: Option<&str>,
    ) -> Result<Reply, LeaseError> {
        validate::name(name)?;
        let Some(bucket) = self.buckets.get(name) else {
            return Err(LeaseError::LimitNotFound {
                name: name.to_owned(),
            });
        };
        let Some(&(reserved, until)) = bucket.leases.get(&lease) else {
            // Already returned, or kept past its grace: nothing to credit.
            return Ok(Reply::Returned { credited: 0 });
        };
        if unused > reserved {
            return Err(LeaseError::InvalidArgument(format!(
                "lease {lease} of rate limit {name:?} reserved {reserved} tokens, not {unused}"
            )));
        }
        let took = self.lease_ends.owner(lease_gone_at(until), name, lease);
        if let Some(owner) = owner {
            if !took.is_empty() && took != owner {
                return Err(LeaseError::NotLeaseOwner {
                    name: name.to_owned(),
                    lease,
                    owner: took.to_owned(),
                });
            }
        }
        let now = self.rate_now(now_ns);
        let Some(bucket) = self.buckets.get_mut(name) else {
            return Ok(Reply::Returned { credited: 0 });
        };
        if bucket.leases.remove(&lease).is_none() {
            // Its grace passed at this very clock: nothing to credit.
            return Ok(Reply::Returned { credited: 0 });
        }
        let credit = u128::from(unused) * u128::from(bucket.spec.interval_ns());
        // A full bucket stays full: tokens do not accrue beyond the burst.
        let tat = u128::from(bucket.tat_ns)
            .saturating_sub(credit)
            .max(u128::from(now));
        bucket.tat_ns = u64::try_from(tat).unwrap_or(u64::MAX);
        bucket.admitted = bucket.admitted.saturating_sub(unused);
        self.lease_ends.remove(lease_gone_at(until), name, lease);
        Ok(Reply::Returned { credited: unused })
    }

    pub(super) fn delete_limit(&mut self, name: &str) -> Result<Reply, LeaseError> {
        validate::name(name)?;
        let removed = self.buckets.remove(name);
        if let Some(b) = &removed {
            for (lease, (_, until)) in &b.leases {
                self.lease_ends.remove(lease_gone_at(*until), name, *lease);
            }
        }
        Ok(Reply::LimitDeleted {
            existed: removed.is_some(),
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
