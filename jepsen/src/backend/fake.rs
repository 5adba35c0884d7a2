//! An in-memory lock service, correct or with one planted fault, for
//! showing that the checkers catch what they claim to.

use super::{Backend, OpError, Session, TokenBlock, TryLock, BURST, RATE, RATE_PER};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A fault planted in the [`Fake`] backend.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// A correct in-memory lock service (the checkers must say valid).
    None,
    /// Grants without consensus: a second node also grants a held lock.
    SplitBrain,
    /// The state machine hands out the same token twice.
    ReuseToken,
    /// Leases expire before the client's validity deadline.
    EarlyExpiry,
    /// A restart loses acknowledged state (an fsync that was not one): the
    /// final reads find an empty state machine whose tokens start over.
    ForgetOnRestart,
    /// A try-lock refused by a held lock names nobody as its holder.
    BusyNamesNobody,
    /// Validate and Describe answer what they answered for the same
    /// question up to a second ago (a read cache).
    StaleReads,
}

#[derive(Default)]
struct FakeState {
    next_index: u64,
    /// Session -> (TTL, last renewal, frozen). A session that is not
    /// frozen is kept alive by its (perfect) library all the time, as its
    /// `lease_deadline` says; a frozen one only lives out its TTL.
    sessions: HashMap<u64, (Duration, Instant, bool)>,
    // name -> holders (session, token)
    locks: HashMap<String, Vec<(u64, u64)>>,
    // name -> the last token granted, and grants so far (for ReuseToken)
    last_grant: HashMap<String, u64>,
    grants: u64,
    // token -> permits the hold takes (when more than one)
    counts: HashMap<u64, u32>,
    // name -> size set by a resize
    sizes: HashMap<String, u32>,
    // name -> (tokens, when they were counted) of a rate limit
    buckets: HashMap<String, (f64, Instant)>,
    // StaleReads: a read's key -> its answer and when it was given
    read_cache: HashMap<String, (Instant, Vec<(u64, u64)>)>,
}

impl FakeState {
    /// A token bucket; SplitBrain's second "leader" counts its own, so
    /// twice the burst goes out at once.
    fn take(&mut self, name: &str, n: u64, fault: Fault) -> Result<(bool, Duration), OpError> {
        let burst = if fault == Fault::SplitBrain {
            2 * BURST
        } else {
            BURST
        } as f64;
        let per_token = RATE_PER.as_secs_f64() / RATE as f64;
        let now = Instant::now();
        let (tokens, at) = self.buckets.entry(name.to_owned()).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() / per_token).min(burst);
        *at = now;
        if *tokens >= n as f64 {
            *tokens -= n as f64;
            Ok((true, Duration::ZERO))
        } else {
            let wait = (n as f64 - *tokens) * per_token;
            Ok((false, Duration::from_secs_f64(wait)))
        }
    }
}

/// A block of the fake's tokens.
struct FakeBlock {
    left: AtomicU64,
    until: Instant,
}

#[tonic::async_trait]
impl TokenBlock for FakeBlock {
    fn try_spend(&self) -> bool {
        Instant::now() < self.until
            && self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(1))
                .is_ok()
    }

    async fn finish(self: Box<Self>) {}
}

/// An in-memory lock service, correct or with one planted [`Fault`].
pub struct Fake {
    fault: Fault,
    state: Arc<Mutex<FakeState>>,
}

impl Fake {
    /// A fake with `fault` planted.
    pub fn new(fault: Fault) -> Fake {
        Fake {
            fault,
            state: Arc::default(),
        }
    }
}

struct FakeSession {
    id: u64,
    ttl: Duration,
    frozen: bool,
    created: Instant,
    fault: Fault,
    state: Arc<Mutex<FakeState>>,
}

impl FakeState {
    /// The holders of `name` as a read keyed `key` sees them: now, or with
    /// [`Fault::StaleReads`] what the same read saw up to a second ago.
    fn read(&mut self, key: String, name: &str, fault: Fault) -> Vec<(u64, u64)> {
        let now = self.locks.get(name).cloned().unwrap_or_default();
        if fault != Fault::StaleReads {
            return now;
        }
        match self.read_cache.get(&key) {
            Some((at, seen)) if at.elapsed() < Duration::from_secs(1) => seen.clone(),
            _ => {
                self.read_cache.insert(key, (Instant::now(), now.clone()));
                now
            }
        }
    }

    fn index(&mut self) -> u64 {
        self.next_index += 1;
        self.next_index
    }

    /// Drops sessions whose lease ran out, and their holds.
    fn expire(&mut self, now: Instant, fault: Fault) {
        let dead: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, (ttl, renewed, frozen))| {
                if !*frozen {
                    return false;
                }
                // The planted fault: the server's clock runs the lease out
                // at a third of the TTL, before the client stops trusting it.
                let ttl = if fault == Fault::EarlyExpiry {
                    *ttl / 3
                } else {
                    *ttl
                };
                now > *renewed + ttl
            })
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.sessions.remove(&id);
            for holders in self.locks.values_mut() {
                holders.retain(|(s, _)| *s != id);
            }
        }
    }
}

#[tonic::async_trait]
impl Backend for Fake {
    async fn session(&self, ttl: Duration) -> Result<Box<dyn Session>, OpError> {
        self.make(ttl, false)
    }

    async fn frozen_session(&self, ttl: Duration) -> Result<Box<dyn Session>, OpError> {
        self.make(ttl, true)
    }

    async fn validate(&self, name: &str, token: u64) -> Result<bool, OpError> {
        // Not through `holders`: with ForgetOnRestart that call is the
        // "restart" and wipes the state, which a read mid-run must not do.
        let mut st = self.state.lock();
        st.expire(Instant::now(), self.fault);
        let holders = st.read(format!("validate {name} {token}"), name, self.fault);
        Ok(holders.iter().any(|(_, t)| *t == token))
    }

    async fn resize(&self, name: &str, permits: u32) -> Result<(), OpError> {
        let mut st = self.state.lock();
        st.index();
        st.sizes.insert(name.to_owned(), permits);
        Ok(())
    }

    async fn take(&self, name: &str, wait: Option<Duration>) -> Result<(bool, Duration), OpError> {
        let give_up = Instant::now() + wait.unwrap_or_default();
        loop {
            let r = self.state.lock().take(name, 1, self.fault)?;
            if r.0 || Instant::now() + r.1 > give_up {
                return Ok(r);
            }
            tokio::time::sleep(r.1).await;
        }
    }

    async fn reserve(
        &self,
        name: &str,
        n: u64,
        validity: Duration,
    ) -> Result<Option<Box<dyn TokenBlock>>, OpError> {
        let (admitted, _) = self.state.lock().take(name, n, self.fault)?;
        Ok(admitted.then(|| {
            Box::new(FakeBlock {
                left: AtomicU64::new(n),
                until: Instant::now() + validity,
            }) as Box<dyn TokenBlock>
        }))
    }

    async fn holders(&self, name: &str) -> Result<Vec<(u64, u64)>, OpError> {
        let mut st = self.state.lock();
        if self.fault == Fault::ForgetOnRestart && st.next_index > 10 {
            // Final reads come after the "restart": everything is gone,
            // sessions included, and the log index starts again.
            *st = FakeState::default();
        }
        st.expire(Instant::now(), self.fault);
        Ok(st.read(format!("describe {name}"), name, self.fault))
    }
}

impl Fake {
    fn make(&self, ttl: Duration, frozen: bool) -> Result<Box<dyn Session>, OpError> {
        let mut st = self.state.lock();
        let id = st.index();
        let now = Instant::now();
        st.sessions.insert(id, (ttl, now, frozen));
        Ok(Box::new(FakeSession {
            id,
            ttl,
            frozen,
            created: now,
            fault: self.fault,
            state: self.state.clone(),
        }))
    }
}

impl FakeSession {
    /// Grants `name` to this session now if it fits, as one step of the
    /// state machine.
    fn grant(
        &self,
        st: &mut FakeState,
        name: &str,
        permits: Option<u32>,
        count: u32,
    ) -> Option<u64> {
        let cap = st.sizes.get(name).copied().or(permits).unwrap_or(1) as usize;
        let held: usize = st
            .locks
            .get(name)
            .map(|h| {
                h.iter()
                    .map(|(_, t)| st.counts.get(t).copied().unwrap_or(1) as usize)
                    .sum()
            })
            .unwrap_or(0);
        let count = count.max(1) as usize;
        // SplitBrain: a second "leader" grants while one holder exists.
        let limit = if self.fault == Fault::SplitBrain {
            cap + 1
        } else {
            cap
        };
        if held + count <= limit {
            st.grants += 1;
            // The planted fault: every third grant hands out the
            // lock's previous token again.
            let token = match st.last_grant.get(name) {
                Some(&t) if self.fault == Fault::ReuseToken && st.grants.is_multiple_of(3) => t,
                _ => st.index(),
            };
            st.last_grant.insert(name.to_owned(), token);
            if count > 1 {
                st.counts.insert(token, count as u32);
            }
            st.locks
                .entry(name.to_owned())
                .or_default()
                .push((self.id, token));
            return Some(token);
        }
        None
    }

    fn margin(&self) -> Duration {
        (self.ttl / 10).max(Duration::from_millis(200))
    }

    /// Renews (unless frozen) and expires others, as a leader would.
    fn tick(&self, st: &mut FakeState) -> bool {
        let now = Instant::now();
        if !self.frozen {
            if let Some((_, renewed, _)) = st.sessions.get_mut(&self.id) {
                *renewed = now;
            }
        }
        st.expire(now, self.fault);
        st.sessions.contains_key(&self.id)
    }
}

#[tonic::async_trait]
impl Session for FakeSession {
    fn id(&self) -> u64 {
        self.id
    }

    fn valid_until(&self) -> Option<Instant> {
        let until = self.lease_deadline();
        (Instant::now() < until).then_some(until)
    }

    fn lease_deadline(&self) -> Instant {
        if self.frozen {
            self.created + self.ttl - self.margin()
        } else {
            // Renewed continuously in this fake.
            Instant::now() + self.ttl - self.margin()
        }
    }

    async fn acquire(
        &self,
        name: &str,
        permits: Option<u32>,
        count: u32,
        wait: Duration,
    ) -> Result<Option<u64>, OpError> {
        let give_up = Instant::now() + wait;
        loop {
            {
                let mut st = self.state.lock();
                if !self.tick(&mut st) {
                    return Err(OpError::Fail("session gone".into()));
                }
                if let Some(token) = self.grant(&mut st, name, permits, count) {
                    return Ok(Some(token));
                }
            }
            if Instant::now() >= give_up {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn try_acquire(&self, name: &str) -> Result<TryLock, OpError> {
        let mut st = self.state.lock();
        if !self.tick(&mut st) {
            return Err(OpError::Fail("session gone".into()));
        }
        if let Some(token) = self.grant(&mut st, name, None, 1) {
            return Ok(TryLock::Granted(token));
        }
        let holders = st.locks.get(name).cloned().unwrap_or_default();
        if self.fault == Fault::BusyNamesNobody {
            return Ok(TryLock::Busy(Vec::new()));
        }
        Ok(TryLock::Busy(holders))
    }

    async fn release(&self, name: &str, token: u64) -> Result<(), OpError> {
        let mut st = self.state.lock();
        self.tick(&mut st);
        let holders = st.locks.entry(name.to_owned()).or_default();
        let before = holders.len();
        holders.retain(|&(s, t)| !(s == self.id && t == token));
        if holders.len() == before {
            return Err(OpError::Fail(format!("{name}: does not hold {token}")));
        }
        st.index();
        Ok(())
    }

    async fn campaign(
        &self,
        name: &str,
        _value: &str,
        wait: Duration,
    ) -> Result<Option<u64>, OpError> {
        self.acquire(name, None, 1, wait).await
    }

    async fn proclaim(&self, name: &str, token: u64, _value: &str) -> Result<(), OpError> {
        let mut st = self.state.lock();
        self.tick(&mut st);
        let holds = st
            .locks
            .get(name)
            .is_some_and(|h| h.contains(&(self.id, token)));
        if holds {
            Ok(())
        } else {
            Err(OpError::Fail(format!("{name}: does not hold {token}")))
        }
    }

    async fn resign(&self, name: &str, token: u64) -> Result<(), OpError> {
        self.release(name, token).await
    }

    async fn close(&self) {
        let mut st = self.state.lock();
        st.sessions.remove(&self.id);
        for holders in st.locks.values_mut() {
            holders.retain(|(s, _)| *s != self.id);
        }
    }
}
