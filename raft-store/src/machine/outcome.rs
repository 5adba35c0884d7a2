//! What applying a command produced: the reply for the proposer, and events
//! for everyone else (waiting acquisitions, observers of an election).

use super::error::LeaseError;
use super::types::{
    EndReason, FencingToken, Grant, HoldEnd, LogIndex, RequestId, SessionId, WaitEnd,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The result of applying one command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The answer to whoever proposed the command.
    pub reply: Result<Reply, LeaseError>,
    /// Changes to locks and sessions, in the order they happened.
    pub events: Vec<Event>,
}

/// A successful command's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// A session started.
    SessionCreated {
        /// Its id.
        session: SessionId,
        /// Its TTL in ms.
        ttl_ms: u64,
    },
    /// A session closed; it had held these locks.
    SessionClosed {
        /// Locks released by closing.
        released: Vec<String>,
    },
    /// These sessions ended (others in the command had already gone).
    SessionsExpired {
        /// Sessions that ended in this entry.
        expired: Vec<SessionId>,
    },
    /// The lock is held, now or already (an idempotent retry, or a cancel
    /// that lost the race to a grant).
    Acquired(Grant),
    /// The acquisition waits in the queue.
    Queued {
        /// Waiters ahead of it.
        position: usize,
    },
    /// A try-lock found the lock taken.
    Busy {
        /// The holders in the way.
        holders: Vec<Grant>,
    },
    /// The lock was released.
    Released {
        /// Waiters granted by the release.
        granted: Vec<Grant>,
    },
    /// The wait was cancelled.
    WaitCancelled,
    /// The holder's metadata changed.
    Proclaimed(Grant),
    /// An administrator freed the lock.
    ForceReleased {
        /// The grants taken away.
        released: Vec<Grant>,
        /// Waiters granted in their place.
        granted: Vec<Grant>,
    },
    // New variants go last (postcard numbers variants by position).
    /// A hold's cap ran out (`released` is `None` if it had ended before).
    HoldEnded {
        /// The hold ended.
        released: Option<Grant>,
        /// Waiters granted in its place.
        granted: Vec<Grant>,
    },
    /// A lock-delay ended.
    LockDelayEnded {
        /// Waiters it had held back, granted now.
        granted: Vec<Grant>,
    },
    /// A semaphore's size changed.
    Resized {
        /// Waiters a larger size let in.
        granted: Vec<Grant>,
    },
    /// A rate limit exists with the spec asked for.
    LimitDefined {
        /// This command created it.
        created: bool,
    },
    /// Tokens admitted.
    Taken {
        /// How many.
        n: u64,
        /// Tokens left to take at once now.
        remaining: u64,
        /// The token lease they were reserved under, if asked for.
        lease: Option<LogIndex>,
    },
    /// A take refused: the tokens would fit after this long on the rate
    /// clock.
    TakeRefused {
        /// The wait, ns.
        retry_after_ns: u64,
    },
    /// Unspent tokens of a lease credited back.
    Returned {
        /// How many (0 for a lease already returned or forgotten).
        credited: u64,
    },
    /// A rate limit forgotten.
    LimitDeleted {
        /// It existed.
        existed: bool,
    },
    /// Every lock of a set is held (now, or already: a retry, or a cancel
    /// that lost the race to the set's grant), one grant each, in name
    /// order.
    AcquiredAll(Vec<Grant>),
    /// An exclusive hold is shared now.
    Downgraded {
        /// The hold as it is now.
        hold: Grant,
        /// Shared waiters granted beside it.
        granted: Vec<Grant>,
    },
}

/// Something that changed while applying a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A lock was granted to the command that asked for it (an Acquire,
    /// AcquireAll or Campaign, at once).
    Granted(Grant),
    /// A hold ended (released, its session ended, forced, its cap ran
    /// out).
    Released {
        /// Lock name.
        name: String,
        /// The former holder.
        session: SessionId,
        /// Its token.
        token: FencingToken,
        /// What ended it.
        why: HoldEnd,
    },
    /// A wait ended without a grant.
    WaitEnded {
        /// Lock name.
        name: String,
        /// The waiting session.
        session: SessionId,
        /// The acquisition.
        request_id: RequestId,
        /// Why.
        reason: WaitEnd,
    },
    /// A session ended.
    SessionEnded {
        /// The session.
        session: SessionId,
        /// Why.
        reason: EndReason,
    },
    /// A holder replaced its metadata.
    Proclaimed(Grant),
    // New variants go last.
    /// A lock-delay started: nobody is granted the lock until it ends.
    LockDelayed {
        /// Lock name.
        name: String,
        /// How long, in ms (on the leader's clock, from when it applies
        /// this).
        delay_ms: u64,
    },
    /// A lock-delay ended.
    LockDelayEnded {
        /// Lock name.
        name: String,
    },
    /// A lock was granted to a waiter, by the command that freed it or
    /// let it through (a release, an expiry, a cancel, a resize, the end
    /// of a lock-delay or of a hold cap).
    HandedOver(Grant),
}

impl Event {
    /// The grant this event made, at once or to a waiter.
    pub fn grant(&self) -> Option<&Grant> {
        match self {
            Event::Granted(g) | Event::HandedOver(g) => Some(g),
            _ => None,
        }
    }

    /// The lock this event is about, if any.
    pub fn lock_name(&self) -> Option<&str> {
        match self {
            Event::Granted(g) | Event::HandedOver(g) | Event::Proclaimed(g) => Some(&g.name),
            Event::Released { name, .. }
            | Event::WaitEnded { name, .. }
            | Event::LockDelayed { name, .. }
            | Event::LockDelayEnded { name } => Some(name),
            Event::SessionEnded { .. } => None,
        }
    }
}

/// One line per outcome, then one indented line per event: the form
/// scenario files are written in.
impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reply {
            Ok(r) => write!(f, "ok {r}")?,
            Err(e) => write!(f, "err {}", e.code())?,
        }
        for e in &self.events {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

fn fmt_grant(g: &Grant) -> String {
    format!(
        "lock={} session={} token={} mode={}",
        g.name, g.session, g.token, g.mode
    )
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::SessionCreated { session, ttl_ms } => {
                write!(f, "session-created session={session} ttl={ttl_ms}")
            }
            Reply::SessionClosed { released } => {
                write!(f, "session-closed released=[{}]", released.join(","))
            }
            Reply::SessionsExpired { expired } => {
                let ids: Vec<String> = expired.iter().map(|s| s.to_string()).collect();
                write!(f, "sessions-expired [{}]", ids.join(","))
            }
            Reply::Acquired(g) => write!(f, "acquired {}", fmt_grant(g)),
            Reply::AcquiredAll(grants) => {
                let gs: Vec<String> = grants.iter().map(fmt_grant).collect();
                write!(f, "acquired-all [{}]", gs.join("; "))
            }
            Reply::Queued { position } => write!(f, "queued position={position}"),
            Reply::Busy { holders } => {
                let hs: Vec<String> = holders
                    .iter()
                    .map(|h| format!("{}@{}", h.session, h.token))
                    .collect();
                write!(f, "busy holders=[{}]", hs.join(","))
            }
            Reply::Released { granted } => write!(f, "released granted={}", granted.len()),
            Reply::WaitCancelled => write!(f, "wait-cancelled"),
            Reply::Proclaimed(g) => write!(f, "proclaimed {}", fmt_grant(g)),
            Reply::ForceReleased { released, granted } => write!(
                f,
                "force-released released={} granted={}",
                released.len(),
                granted.len()
            ),
            Reply::HoldEnded { released, granted } => write!(
                f,
                "hold-ended released={} granted={}",
                released.as_ref().map_or(0, |_| 1),
                granted.len()
            ),
            Reply::LockDelayEnded { granted } => {
                write!(f, "lock-delay-ended granted={}", granted.len())
            }
            Reply::Resized { granted } => write!(f, "resized granted={}", granted.len()),
            Reply::LimitDefined { created } => write!(f, "limit-defined created={created}"),
            Reply::Taken {
                n,
                remaining,
                lease,
            } => write!(f, "taken n={n} remaining={remaining} lease={lease:?}"),
            Reply::TakeRefused { retry_after_ns } => {
                write!(f, "take-refused retry_after_ns={retry_after_ns}")
            }
            Reply::Returned { credited } => write!(f, "returned credited={credited}"),
            Reply::LimitDeleted { existed } => write!(f, "limit-deleted existed={existed}"),
            Reply::Downgraded { hold, granted } => {
                write!(
                    f,
                    "downgraded {} granted={}",
                    fmt_grant(hold),
                    granted.len()
                )
            }
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Granted(g) => write!(f, "granted {}", fmt_grant(g)),
            Event::HandedOver(g) => write!(f, "handed over {}", fmt_grant(g)),
            Event::Released {
                name,
                session,
                token,
                why,
            } => {
                write!(f, "released lock={name} session={session} token={token}")?;
                match why {
                    HoldEnd::Released => Ok(()),
                    HoldEnd::SessionClosed => f.write_str(" (session closed)"),
                    HoldEnd::SessionExpired => f.write_str(" (session expired)"),
                    HoldEnd::ForceReleased => f.write_str(" (forced)"),
                    HoldEnd::CapRanOut => f.write_str(" (cap ran out)"),
                }
            }
            Event::WaitEnded {
                name,
                session,
                reason,
                ..
            } => write!(
                f,
                "wait-ended lock={name} session={session} reason={reason:?}"
            ),
            Event::SessionEnded { session, reason } => {
                write!(f, "session-ended session={session} reason={reason:?}")
            }
            Event::Proclaimed(g) => write!(f, "proclaimed {}", fmt_grant(g)),
            Event::LockDelayed { name, delay_ms } => {
                write!(f, "lock-delayed lock={name} delay={delay_ms}")
            }
            Event::LockDelayEnded { name } => write!(f, "lock-delay-ended lock={name}"),
        }
    }
}
