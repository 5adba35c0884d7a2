//! Checks of command arguments against [`raftlock_proto::limits`]. The edge
//! (gRPC) calls these same functions first, so a bad request is refused
//! without costing a log entry; the state machine calls them again so that it
//! stays safe even from a log entry that skipped the edge.

use super::error::LeaseError;
use raftlock_proto::limits;

/// A lock name: non-empty, at most `MAX_NAME_LEN` bytes, no control characters.
pub fn name(name: &str) -> Result<(), LeaseError> {
    let reason = if name.is_empty() {
        "must not be empty".to_owned()
    } else if name.len() > limits::MAX_NAME_LEN {
        format!(
            "{} bytes, longer than the limit of {}",
            name.len(),
            limits::MAX_NAME_LEN
        )
    } else if name.chars().any(char::is_control) {
        "must not contain control characters".to_owned()
    } else {
        return Ok(());
    };
    Err(LeaseError::InvalidName { reason })
}

/// The locks an AcquireAll takes: at least two, at most
/// `MAX_LOCKS_PER_SET`, each a valid name, in strictly ascending order (so
/// that one set has one spelling, and a duplicate is refused).
pub fn lock_set(names: &[String]) -> Result<(), LeaseError> {
    if names.len() < 2 || names.len() > limits::MAX_LOCKS_PER_SET {
        return Err(LeaseError::InvalidArgument(format!(
            "a lock set has 2 to {} names, not {}",
            limits::MAX_LOCKS_PER_SET,
            names.len()
        )));
    }
    for n in names {
        name(n)?;
    }
    if let Some(w) = names.windows(2).find(|w| w[0] >= w[1]) {
        return Err(LeaseError::InvalidArgument(format!(
            "a lock set's names must be distinct and in ascending order: {:?} before {:?}",
            w[0], w[1]
        )));
    }
    Ok(())
}

/// A session TTL within the machine's absolute bounds.
pub fn ttl(ttl_ms: u64) -> Result<(), LeaseError> {
    if (limits::MIN_TTL_MS..=limits::MAX_TTL_MS).contains(&ttl_ms) {
        Ok(())
    } else {
        Err(LeaseError::TtlOutOfRange {
            ttl_ms,
            min_ms: limits::MIN_TTL_MS,
            max_ms: limits::MAX_TTL_MS,
        })
    }
}

/// Holder metadata or an election value (`what` names it in the message).
pub fn metadata(what: &str, bytes: &[u8]) -> Result<(), LeaseError> {
    if bytes.len() > limits::MAX_METADATA_LEN {
        return Err(LeaseError::InvalidArgument(format!(
            "{what} is {} bytes, more than the limit of {}",
            bytes.len(),
            limits::MAX_METADATA_LEN
        )));
    }
    Ok(())
}

/// A session's client name or owner.
pub fn client_name(name: &str) -> Result<(), LeaseError> {
    short_text("client name", name)
}

/// Free text about a client (its name, its host) within one bound.
fn short_text(what: &str, text: &str) -> Result<(), LeaseError> {
    if text.len() > limits::MAX_CLIENT_NAME_LEN {
        return Err(LeaseError::InvalidArgument(format!(
            "{what} is {} bytes, more than the limit of {}",
            text.len(),
            limits::MAX_CLIENT_NAME_LEN
        )));
    }
    Ok(())
}

/// A client's host name within the same bound as its client name.
pub fn host(host: &str) -> Result<(), LeaseError> {
    short_text("host", host)
}

/// An Acquire wait within the machine's absolute bound.
pub fn wait(wait_ms: Option<u64>) -> Result<(), LeaseError> {
    match wait_ms {
        Some(ms) if ms > limits::MAX_WAIT_MS => Err(LeaseError::InvalidArgument(format!(
            "wait of {ms} ms is longer than the limit of {} ms",
            limits::MAX_WAIT_MS
        ))),
        _ => Ok(()),
    }
}

/// Semaphore permits: absent or at least 1.
pub fn permits(permits: Option<u32>) -> Result<(), LeaseError> {
    if permits == Some(0) {
        return Err(LeaseError::InvalidArgument(
            "permits must be at least 1".to_owned(),
        ));
    }
    Ok(())
}

/// What an acquisition asks for beyond a plain hold.
pub fn terms(mode: super::Mode, terms: &super::Terms) -> Result<(), LeaseError> {
    let reason = if terms.count == 0 {
        "a hold takes at least 1 permit".to_owned()
    } else if terms.count > 1 && mode == super::Mode::Exclusive {
        "an exclusive hold takes the whole lock: only shared holds take several permits".to_owned()
    } else if terms.max_hold_ms != 0
        && !(limits::MIN_HOLD_MS..=limits::MAX_HOLD_MS).contains(&terms.max_hold_ms)
    {
        format!(
            "hold cap of {} ms is out of range {}..={} ms",
            terms.max_hold_ms,
            limits::MIN_HOLD_MS,
            limits::MAX_HOLD_MS
        )
    } else if terms.lock_delay_ms > limits::MAX_LOCK_DELAY_MS {
        format!(
            "lock-delay of {} ms is longer than the limit of {} ms",
            terms.lock_delay_ms,
            limits::MAX_LOCK_DELAY_MS
        )
    } else if terms.lock_delay_ms != 0 && mode == super::Mode::Shared {
        "lock-delay protects exclusive holds only".to_owned()
    } else {
        return Ok(());
    };
    Err(LeaseError::InvalidArgument(reason))
}

/// The longest a bucket may take to refill its burst, ns (2^62, about 146
/// years): rate-clock times (ns since the epoch) plus it stay far inside a
/// u64.
pub const MAX_BURST_SPAN_NS: u128 = 1 << 62;

/// A rate limit's parameters: a positive rate over a positive period, and
/// a burst of at least one token, within the hard bounds, that refills
/// within [`MAX_BURST_SPAN_NS`].
pub fn limit_spec(spec: &super::LimitSpec) -> Result<(), LeaseError> {
    let reason = if spec.rate == 0 || spec.rate > limits::MAX_RATE {
        format!("rate must lie within 1..={}", limits::MAX_RATE)
    } else if spec.per_ms == 0 || spec.per_ms > limits::MAX_RATE_PERIOD_MS {
        format!(
            "the period must lie within 1..={} ms",
            limits::MAX_RATE_PERIOD_MS
        )
    } else if spec.burst == 0 || spec.burst > limits::MAX_BURST {
        format!("burst must lie within 1..={}", limits::MAX_BURST)
    } else if u128::from(spec.burst) * u128::from(spec.interval_ns()) > MAX_BURST_SPAN_NS {
        // A bucket's arrival time runs up to now + burst · interval; past
        // what a u64 of ns holds it would saturate and stop refilling.
        format!(
            "a burst of {} at {} per {} ms takes {} days to refill, more than the limit of {} days",
            spec.burst,
            spec.rate,
            spec.per_ms,
            u128::from(spec.burst) * u128::from(spec.interval_ns()) / 86_400_000_000_000,
            MAX_BURST_SPAN_NS / 86_400_000_000_000
        )
    } else {
        return Ok(());
    };
    Err(LeaseError::InvalidArgument(reason))
}
