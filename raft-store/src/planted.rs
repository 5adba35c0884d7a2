//! Bugs a test can plant in a real server, to show that the fault-injection
//! harness reports them (a harness that passes a broken server proves
//! nothing). This module is the one seam between them and the server: the
//! code that would misbehave asks [`planted`], which is a constant `false`
//! in every build without the `planted-bugs` feature (no normal build
//! enables it), so the compiler drops the broken branch and no production
//! function carries a feature switch of its own. A build with the feature
//! plants the bug named in `RAFTLOCK_PLANT` ([`plant_from_env`]).

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A bug to plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// A release or expiry that hands a lock over also grants the next
    /// waiter behind the first, whatever the lock's capacity.
    DoubleGrant,
    /// After a restart, tokens (and session ids) count from the restored
    /// snapshot's index again instead of from the log index.
    TokenReuse,
    /// The leader expires sessions without confirming it still leads, and
    /// keeps its deadlines across terms instead of a full TTL per election.
    UnconfirmedExpiry,
    /// A keep-alive for a session the leader already expired is
    /// acknowledged as if it lived.
    LateKeepAlive,
    /// A semaphore counts each holder as one permit, however many it took.
    OnePermitEach,
    /// A rate limit lets twice its burst through at once.
    RateDoubleBurst,
    /// Recovery reads damage to durable log bytes as the torn tail of a
    /// crash: it keeps what came before and serves (the behaviour of
    /// logs that cannot tell the two apart).
    DamageAsTorn,
    /// A lock set (AcquireAll) waiting at the front of a lock's queue is
    /// granted that lock as soon as it is free, before the rest of its set.
    SetGrantsEarly,
    /// A node that lost its state (an empty data dir, a log set aside)
    /// votes and acknowledges at once, as one that kept it would.
    LostStateVotes,
    /// A try-lock refused because the lock is held names nobody as its
    /// holder.
    BusyNamesNobody,
    /// Validate and Describe answer what the same question got up to a
    /// second ago (a read cache with no invalidation).
    StaleReads,
}

impl Bug {
    const ALL: [(Bug, &'static str); 11] = [
        (Bug::DoubleGrant, "double-grant"),
        (Bug::TokenReuse, "token-reuse"),
        (Bug::UnconfirmedExpiry, "unconfirmed-expiry"),
        (Bug::LateKeepAlive, "late-keepalive"),
        (Bug::OnePermitEach, "one-permit-each"),
        (Bug::RateDoubleBurst, "rate-double-burst"),
        (Bug::DamageAsTorn, "damage-as-torn"),
        (Bug::SetGrantsEarly, "set-grants-early"),
        (Bug::LostStateVotes, "lost-state-votes"),
        (Bug::BusyNamesNobody, "busy-names-nobody"),
        (Bug::StaleReads, "stale-reads"),
    ];

    /// Reads a bug's name.
    pub fn parse(name: &str) -> Option<Bug> {
        Bug::ALL.iter().find(|(_, n)| *n == name).map(|(b, _)| *b)
    }

    /// Every bug's name.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Bug::ALL.iter().map(|(_, n)| *n)
    }
}

static PLANTED: AtomicU8 = AtomicU8::new(0);
static RESTART_INDEX: AtomicU64 = AtomicU64::new(0);

/// Records the last log index this process found on disk at start: with
/// [`Bug::TokenReuse`], entries after it count their indexes from it.
pub fn set_restart_index(index: u64) {
    RESTART_INDEX.store(index, Ordering::SeqCst);
}

/// The index an entry's tokens come from under [`Bug::TokenReuse`].
pub fn token_index(index: u64) -> u64 {
    let restart = RESTART_INDEX.load(Ordering::Relaxed);
    if planted(Bug::TokenReuse) && restart > 0 && index > restart {
        index - restart
    } else {
        index
    }
}

/// The answer to a read: `fresh()`, or under [`Bug::StaleReads`] the
/// answer the read keyed `key` got up to a second ago, if it got one.
pub fn remembered<T: Clone + Send + 'static>(key: String, fresh: impl FnOnce() -> T) -> T {
    if !planted(Bug::StaleReads) {
        return fresh();
    }
    type Cache = HashMap<String, (Instant, Box<dyn Any + Send>)>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((at, answer)) = cache.get(&key) {
        if at.elapsed() < Duration::from_secs(1) {
            if let Some(answer) = answer.downcast_ref::<T>() {
                return answer.clone();
            }
        }
    }
    let answer = fresh();
    cache.insert(key, (Instant::now(), Box::new(answer.clone())));
    answer
}

/// Plants `bug` for the rest of the process (a build with the
/// `planted-bugs` feature only: without it nothing is ever planted).
pub fn plant(bug: Bug) {
    if cfg!(feature = "planted-bugs") {
        PLANTED.store(bug as u8 + 1, Ordering::SeqCst);
    }
}

/// Whether `bug` is planted: always false without the `planted-bugs`
/// feature.
#[inline]
pub fn planted(bug: Bug) -> bool {
    cfg!(feature = "planted-bugs") && PLANTED.load(Ordering::Relaxed) == bug as u8 + 1
}

/// Plants the bug `RAFTLOCK_PLANT` names, before the storage opens (some
/// bugs live in its recovery); returns its name. A build without the
/// `planted-bugs` feature does not read the variable.
pub fn plant_from_env() -> Result<Option<String>, String> {
    if !cfg!(feature = "planted-bugs") {
        return Ok(None);
    }
    let Ok(name) = std::env::var("RAFTLOCK_PLANT") else {
        return Ok(None);
    };
    let bug = Bug::parse(&name).ok_or_else(|| {
        format!(
            "RAFTLOCK_PLANT={name:?} is not one of {}",
            Bug::names().collect::<Vec<_>>().join(", ")
        )
    })?;
    plant(bug);
    Ok(Some(name))
}

#[cfg(all(test, not(feature = "planted-bugs")))]
mod tests {
    use super::*;

    #[test]
    fn a_build_without_the_feature_plants_nothing() {
        plant(Bug::DoubleGrant);
        assert!(!planted(Bug::DoubleGrant));
        set_restart_index(10);
        assert_eq!(token_index(15), 15);
    }
}
