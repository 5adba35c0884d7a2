//! The lease state machine: `apply` is a pure, deterministic function of
//! (state, command, log index, proposal time), so every replica that applies
//! the same log holds the same sessions, locks, waiters and tokens.
//!
//! Nothing in this module touches I/O, an async runtime, a clock or anything
//! unpredictable; time enters only as `at_ms`, a value the leader proposed.
//! Maps are `BTreeMap`s and queues `VecDeque`s so that no iteration order can
//! differ between nodes, and snapshots of equal states are equal bytes.
//!
//! ```
//! use raftlock_store::machine::{Command, LeaseMachine, Mode, Reply, RequestId};
//! let mut m = LeaseMachine::default();
//! let created = m.apply(&Command::CreateSession { ttl_ms: 10_000, client_name: "w1".into(), owner: String::new() }, 1, 0);
//! let Ok(Reply::SessionCreated { session, .. }) = created.reply else { panic!() };
//! let acquire = Command::Acquire {
//!     session, name: "jobs/nightly".into(), request_id: RequestId(7), mode: Mode::Exclusive,
//!     permits: None, wait_ms: None, metadata: vec![],
//! };
//! let Ok(Reply::Acquired(grant)) = m.apply(&acquire, 2, 0).reply else { panic!() };
//! assert_eq!(grant.token, 2); // the fencing token is the log index
//! ```

mod acquire;
mod acquire_all;
mod cancel_wait;
mod downgrade;
mod error;
mod exactly_once;
mod force_release;
mod hold_cap;
mod lock;
mod lock_delay;
mod outcome;
mod proclaim;
mod query;
mod ratelimit;
mod release;
mod request;
mod resize;
mod session;
mod snapshot;
mod types;
pub mod validate;

pub use downgrade::Downgrade;
pub use error::LeaseError;
pub use lock::LockState;
pub use outcome::{Event, Outcome, Reply};
pub use query::{LockSummary, LockView, Validation};
pub use ratelimit::{Bucket, LimitSpec};
pub use snapshot::SnapshotError;
pub use types::{
    EndReason, FencingToken, Finished, Grant, HoldEnd, LogIndex, Mode, Origin, RequestId, Session,
    SessionId, Terms, WaitEnd, Waiter,
};

use exactly_once::Acquisition;
use request::Request;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A state-machine command: the payload of one Raft log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Starts a session; its id is the entry's log index.
    CreateSession {
        /// Time to live without keep-alives, in ms.
        ttl_ms: u64,
        /// Free text naming the client.
        client_name: String,
        /// The authenticated identity that created it (empty when the
        /// cluster runs without authentication). Only this identity may
        /// use the session.
        #[serde(default)]
        owner: String,
    },
    /// Ends a session at the client's request.
    CloseSession {
        /// The session.
        session: SessionId,
    },
    /// Ends sessions whose deadlines passed on the leader. Ids that no
    /// longer exist are skipped.
    ExpireSessions {
        /// The sessions.
        sessions: Vec<SessionId>,
    },
    /// Acquires a lock, or queues for it.
    Acquire {
        /// The session that will hold it.
        session: SessionId,
        /// Lock name.
        name: String,
        /// The logical acquisition (reused by retries).
        request_id: RequestId,
        /// Exclusive or shared.
        mode: Mode,
        /// Shared capacity stated by the request.
        permits: Option<u32>,
        /// `None`: try once. `Some(ms)`: wait in the queue up to `ms`.
        wait_ms: Option<u64>,
        /// Stored with the grant.
        metadata: Vec<u8>,
    },
    /// Releases a held lock.
    Release {
        /// The holding session.
        session: SessionId,
        /// Lock name.
        name: String,
        /// The grant's token.
        token: FencingToken,
    },
    /// Cancels a wait (its deadline passed on the leader, or the client gave
    /// up). If the wait was granted first, the grant is returned.
    CancelWait {
        /// The waiting session.
        session: SessionId,
        /// Lock name.
        name: String,
        /// The waiting acquisition.
        request_id: RequestId,
    },
    /// A holder replaces its grant's metadata (an election leader's value).
    Proclaim {
        /// The holding session.
        session: SessionId,
        /// Lock name.
        name: String,
        /// The grant's token.
        token: FencingToken,
        /// New metadata.
        value: Vec<u8>,
    },
    /// An administrator frees a lock whatever its holders: every holder
    /// loses it and the waiters it frees are granted in the same entry,
    /// with this entry's (larger) token.
    ForceRelease {
        /// Lock name.
        name: String,
    },
    // New variants go last: log entries are postcard, which numbers variants
    // by position, so entries of older releases still decode.
    /// A command under its session's exactly-once sequence (Raft
    /// dissertation §6.3). `command` is an [`Command::Acquire`]; its session
    /// is the sequence's. A duplicate (same `seq`) gets the first answer,
    /// never a second execution; a `seq` below what the client has
    /// acknowledged is refused unexecuted.
    Sequenced {
        /// The client's number for this logical request, from 1.
        seq: u64,
        /// Every seq below this has been answered and will not be retried:
        /// their answers may be forgotten.
        acked_below: u64,
        /// The command.
        command: Box<Command>,
    },
    /// [`Command::CreateSession`] with a key the client chose for this
    /// logical creation: a retry with the same key (and owner) gets the
    /// session the first attempt created while it lives, not a second one.
    CreateSessionOnce {
        /// Time to live without keep-alives, in ms.
        ttl_ms: u64,
        /// Free text naming the client.
        client_name: String,
        /// The authenticated identity that creates it.
        owner: String,
        /// The client's key for this creation.
        key: u128,
    },
    /// A session that says where its client runs, so that an operator
    /// asking who holds a lock is told the host and process, not only a
    /// session number. Otherwise [`Command::CreateSession`], or
    /// [`Command::CreateSessionOnce`] when `key` is set.
    CreateSessionAt {
        /// Time to live without keep-alives, in ms.
        ttl_ms: u64,
        /// Free text naming the client.
        client_name: String,
        /// The authenticated identity that creates it.
        owner: String,
        /// The client's key for this creation, if it has one.
        key: Option<u128>,
        /// Where the client runs.
        origin: Origin,
    },
    /// An acquisition that asks for more than a plain hold (several
    /// permits, a hold cap, a lock-delay): `command` is an
    /// [`Command::Acquire`], which it wraps so that plain acquires keep
    /// the form older releases read. A [`Command::Sequenced`] wraps this,
    /// not the other way round.
    WithTerms {
        /// What the acquisition asks for.
        terms: Terms,
        /// The acquire.
        command: Box<Command>,
    },
    /// The leader ends a hold whose cap ran out on its clock. Skipped if
    /// the session no longer holds the lock with this token.
    EndHold {
        /// Lock name.
        name: String,
        /// The holding session.
        session: SessionId,
        /// The grant's token.
        token: FencingToken,
    },
    /// The leader ends a lock-delay whose time ran out on its clock, and
    /// grants the waiters it held back.
    EndLockDelay {
        /// Lock name.
        name: String,
    },
    /// Sets the size of a semaphore, held or not: from this entry on it
    /// has `permits` permits, whatever size acquisitions state, until it is
    /// resized again; 0 forgets the size. Growing grants waiters at once;
    /// shrinking takes nothing away, it only grants nobody until the
    /// holders fit.
    Resize {
        /// Lock name.
        name: String,
        /// The new size (0: forget it).
        permits: u32,
    },
    /// Defines a rate limit, or checks that an existing one has this spec.
    DefineLimit {
        /// Limit name.
        name: String,
        /// What it allows.
        spec: LimitSpec,
        /// The leader's rate clock, ns (see `ratelimit.rs`).
        now_ns: u64,
    },
    /// Takes `n` tokens of a rate limit, or refuses with the wait until
    /// they would fit; with `lease_ms`, reserves them as a block for the
    /// client to spend within that time.
    Take {
        /// Limit name.
        name: String,
        /// Tokens.
        n: u64,
        /// Creates the limit with this spec on first use (a different
        /// spec than the existing one's is refused).
        spec: Option<LimitSpec>,
        /// 0: spend now; otherwise a token lease of this many ms.
        lease_ms: u64,
        /// The leader's rate clock, ns.
        now_ns: u64,
    },
    /// Returns the unspent tokens of a token lease.
    ReturnTokens {
        /// Limit name.
        name: String,
        /// The lease (the index of the take that made it).
        lease: LogIndex,
        /// Tokens not spent.
        unused: u64,
        /// The leader's rate clock, ns.
        now_ns: u64,
    },
    /// Forgets a rate limit.
    DeleteLimit {
        /// Limit name.
        name: String,
    },
    /// [`Command::Sequenced`] from a client that acknowledges answers one
    /// by one: `in_flight` lists the numbers it still waits for (its lowest
    /// ones, if it has many), and every number from `acked_below` up to the
    /// highest listed that is neither listed nor `seq` is answered and will
    /// not be retried. So one long wait does not keep the answers of every
    /// later call (`exactly_once.rs`). New variants go last: entries are decoded by
    /// position.
    SequencedAcks {
        /// The client's number for this logical request, from 1.
        seq: u64,
        /// Every seq below this has been answered.
        acked_below: u64,
        /// Numbers at or above `acked_below` still awaiting an answer.
        in_flight: Vec<u64>,
        /// The command.
        command: Box<Command>,
    },
    /// [`Command::EndLockDelay`] for the delay that started at index
    /// `started` only: a late end of an earlier delay leaves a newer one
    /// running.
    EndLockDelayAt {
        /// Lock name.
        name: String,
        /// The index of the command that started the delay.
        started: LogIndex,
    },
    /// A [`Command::Take`] or [`Command::ReturnTokens`] on behalf of an
    /// authenticated identity: a token lease taken this way is returned
    /// only by the same identity (a plain return, from an entry of an
    /// older release or a cluster without authentication, is not checked).
    ByOwner {
        /// The identity.
        owner: String,
        /// The take or return.
        command: Box<Command>,
    },
    /// Acquires several locks exclusively in this one entry, or none of
    /// them: each gets its own grant, all with this entry's index as token.
    /// One that cannot be granted at once waits in the queue of every lock
    /// of the set and is granted when it is at the front of all of them
    /// and they are all free (`acquire_all.rs`).
    AcquireAll {
        /// The session that will hold them.
        session: SessionId,
        /// Lock names, distinct, in ascending order.
        names: Vec<String>,
        /// The logical acquisition (reused by retries).
        request_id: RequestId,
        /// `None`: try once. `Some(ms)`: wait in the queues up to `ms`.
        wait_ms: Option<u64>,
        /// Stored with each grant.
        metadata: Vec<u8>,
    },
    /// A session creation ([`Command::CreateSession`],
    /// [`Command::CreateSessionOnce`] or [`Command::CreateSessionAt`])
    /// under the limit the proposing leader applies: refused when its owner
    /// already has `max_sessions` live sessions (all sessions, for the
    /// empty owner of a cluster without authentication). The leader checks
    /// the limit before proposing too, but only the log orders concurrent
    /// creations, so only this check holds under a race.
    WithinSessionLimit {
        /// The most live sessions the owner may have.
        max_sessions: u64,
        /// The creation.
        command: Box<Command>,
    },
    /// An [`Command::AcquireAll`] under its session's exactly-once
    /// sequence, numbered and acknowledged as [`Command::SequencedAcks`]
    /// numbers an acquire (an empty `in_flight`: by `acked_below` alone). A
    /// variant of its own rather than a set inside `Sequenced`: a node of
    /// an older release reads `Sequenced` but refuses a set in it without
    /// taking its locks, and would go on with another lock table than its
    /// peers; this one it cannot decode, so it stops until upgraded.
    SequencedSet {
        /// The client's number for this logical request, from 1.
        seq: u64,
        /// Every seq below this has been answered.
        acked_below: u64,
        /// Numbers at or above `acked_below` still awaiting an answer.
        in_flight: Vec<u64>,
        /// The lock set.
        command: Box<Command>,
    },
    // Commands from here on are a struct each, declared and applied in a
    // file of its own ([`Apply`]); a new one is that file, a variant here
    // and its arm in [`Command::own`].
    /// See [`Downgrade`].
    Downgrade(Downgrade),
}

/// A command declared in a file of its own: its struct is its fields, and
/// it applies itself to the machine. Commands added since `SequencedSet`
/// take this form, so that the machine's dispatch needs no arm for them.
pub trait Apply {
    /// A short name, for logs and metrics.
    fn kind(&self) -> &'static str;
    /// Applies it, as [`LeaseMachine::apply`] does: proposed at `at_ms`
    /// (leader's wall clock), committed at `index`.
    fn apply(
        &self,
        machine: &mut LeaseMachine,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError>;
}

impl Command {
    /// A short name, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::CreateSession { .. } => "create_session",
            Command::CloseSession { .. } => "close_session",
            Command::ExpireSessions { .. } => "expire_sessions",
            Command::Acquire { .. } => "acquire",
            Command::Release { .. } => "release",
            Command::CancelWait { .. } => "cancel_wait",
            Command::Proclaim { .. } => "proclaim",
            Command::ForceRelease { .. } => "force_release",
            Command::Sequenced { command, .. } => command.kind(),
            Command::CreateSessionOnce { .. } => "create_session",
            Command::CreateSessionAt { .. } => "create_session",
            Command::WithTerms { command, .. } => command.kind(),
            Command::EndHold { .. } => "end_hold",
            Command::EndLockDelay { .. } => "end_lock_delay",
            Command::Resize { .. } => "resize",
            Command::DefineLimit { .. } => "define_limit",
            Command::Take { .. } => "take",
            Command::ReturnTokens { .. } => "return_tokens",
            Command::DeleteLimit { .. } => "delete_limit",
            Command::SequencedAcks { command, .. } => command.kind(),
            Command::EndLockDelayAt { .. } => "end_lock_delay",
            Command::ByOwner { command, .. } => command.kind(),
            Command::AcquireAll { .. } => "acquire_all",
            Command::WithinSessionLimit { command, .. } => command.kind(),
            Command::SequencedSet { command, .. } => command.kind(),
            own => own.own().map_or("unknown", Apply::kind),
        }
    }

    /// The command as the [`Apply`] it is, for a command of that form.
    pub fn own(&self) -> Option<&dyn Apply> {
        match self {
            Command::Downgrade(c) => Some(c),
            _ => None,
        }
    }

    /// The command itself, seen through a [`Command::Sequenced`] wrapper.
    pub fn unwrapped(&self) -> &Command {
        match self {
            Command::Sequenced { command, .. }
            | Command::SequencedAcks { command, .. }
            | Command::WithTerms { command, .. }
            | Command::ByOwner { command, .. }
            | Command::WithinSessionLimit { command, .. }
            | Command::SequencedSet { command, .. } => command.unwrapped(),
            other => other,
        }
    }
}

/// A lock-delay in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delay {
    /// Its length, ms (the longest of the delays that ran into each other).
    pub ms: u64,
    /// The index of the command that started it (0: restored from a
    /// snapshot that did not keep it).
    pub started: LogIndex,
}

/// The replicated state: sessions and the locks they hold or wait for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseMachine {
    sessions: BTreeMap<SessionId, Session>,
    /// Only locks with a holder or a waiter. A waiter with no holder ahead
    /// of it waits for a lock-delay to end, or is a lock set (`sets`)
    /// that waits for another of its locks.
    locks: BTreeMap<String, LockState>,
    /// Live sessions per non-empty owner, for the per-identity limit (the
    /// empty owner's are all of `sessions`).
    /// Derived from `sessions`, kept so the leader can check the limit
    /// without a scan.
    #[serde(default)]
    owners: BTreeMap<String, u64>,
    /// Exactly-once bookkeeping of sessions that use sequence numbers or a
    /// creation key. New fields go last (see `snapshot.rs`).
    #[serde(default)]
    once: BTreeMap<SessionId, exactly_once::Once>,
    /// Live sessions by creation key (`exactly_once::key_of`).
    #[serde(default)]
    session_keys: BTreeMap<String, SessionId>,
    /// Where the clients of live sessions run, for the sessions that said
    /// (snapshot version 4 on).
    #[serde(default)]
    origins: BTreeMap<SessionId, Origin>,
    /// Locks in lock-delay: nobody is granted them until the leader ends
    /// it (`EndLockDelayAt`). Snapshot version 5 on, as are the fields
    /// after it (version 5 kept only each delay's length).
    #[serde(default)]
    delayed: BTreeMap<String, Delay>,
    /// Semaphore sizes set by `Resize`, which outlive the locks' holders.
    #[serde(default)]
    sizes: BTreeMap<String, u32>,
    /// The highest rate-clock time applied, ns (`ratelimit.rs`).
    #[serde(default)]
    rate_clock_ns: u64,
    /// Rate limits by name.
    #[serde(default)]
    buckets: BTreeMap<String, ratelimit::Bucket>,
    /// Every token lease by when its record goes (validity + return
    /// grace, rate clock ns), limit and id, with the identity that took it
    /// ("" for none): kept beside `buckets`, so that
    /// any rate command forgets every lease past its grace, whatever its
    /// limit (snapshot version 6; rebuilt when an older one is read).
    #[serde(default)]
    lease_ends: ratelimit::LeaseEnds,
    /// The lock sets waiting in queues (`AcquireAll`), by session and
    /// request id (nested, so that a JSON snapshot can key them): a waiter found here is granted only with the rest of
    /// its set (snapshot version 7).
    #[serde(default)]
    sets: BTreeMap<SessionId, BTreeMap<RequestId, Vec<String>>>,
}

impl LeaseMachine {
    /// Applies one command proposed at `at_ms` (leader's wall clock, Unix
    /// ms, informational) and committed at `index`.
    pub fn apply(&mut self, cmd: &Command, index: LogIndex, at_ms: u64) -> Outcome {
        let mut events = Vec::new();
        let events_ = &mut events;
        let reply = match Request::of(cmd) {
            Request::CreateSession(new) => self.create_session(new, index, at_ms),
            Request::CloseSession { session } => self.close_session(session, index, at_ms, events_),
            Request::ExpireSessions { sessions } => {
                Ok(self.expire_sessions(sessions, index, at_ms, events_))
            }
            Request::Acquire {
                acquire,
                sequence: None,
            } => self.acquire(acquire, index, at_ms, events_),
            Request::Acquire {
                acquire,
                sequence: Some(sequence),
            } => self.sequenced(sequence, Acquisition::One(acquire), index, at_ms, events_),
            Request::Release {
                session,
                name,
                token,
            } => self.release(session, name, token, index, at_ms, events_),
            Request::CancelWait {
                session,
                name,
                request_id,
            } => self.cancel_wait(session, name, request_id, index, at_ms, events_),
            Request::Proclaim {
                session,
                name,
                token,
                value,
            } => self.proclaim(session, name, token, value, events_),
            Request::ForceRelease { name } => self.force_release(name, index, at_ms, events_),
            Request::EndHold {
                name,
                session,
                token,
            } => Ok(self.end_hold(name, session, token, index, at_ms, events_)),
            Request::EndLockDelay { name, started } => {
                Ok(self.end_lock_delay(name, started, index, at_ms, events_))
            }
            Request::Resize { name, permits } => self.resize(name, permits, index, at_ms, events_),
            Request::DefineLimit { name, spec, now_ns } => self.define_limit(name, spec, now_ns),
            Request::Take(take) => self.take(take, index),
            Request::ReturnTokens {
                name,
                lease,
                unused,
                now_ns,
                owner,
            } => self.return_tokens(name, lease, unused, now_ns, owner),
            Request::DeleteLimit { name } => self.delete_limit(name),
            Request::AcquireAll {
                all,
                sequence: None,
            } => self.acquire_all(all, index, at_ms, events_),
            Request::AcquireAll {
                all,
                sequence: Some(sequence),
            } => self.sequenced(sequence, Acquisition::Set(all), index, at_ms, events_),
            Request::Own(c) => c.apply(self, index, at_ms, events_),
            Request::Malformed(e) => Err(e),
        };
        Outcome { reply, events }
    }

    /// Ends the hold `grant` was (already taken off its lock): its session
    /// forgets it, its request is finished as released, and an event says
    /// so. Shared by every way a hold ends without its session ending:
    /// release, force-release and a hold cap running out.
    pub(super) fn hold_ended(&mut self, grant: &Grant, why: HoldEnd, events: &mut Vec<Event>) {
        if let Some(s) = self.sessions.get_mut(&grant.session) {
            s.held.remove(&grant.name);
        }
        self.finish(
            grant.session,
            &grant.name,
            grant.request_id,
            Finished::Released(grant.token),
        );
        events.push(Event::Released {
            name: grant.name.clone(),
            session: grant.session,
            token: grant.token,
            why,
        });
    }

    /// Grants the waiters nothing blocks any more and returns their grants.
    pub(super) fn grant_collecting(
        &mut self,
        name: &str,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Vec<Grant> {
        let before = events.len();
        self.grant_waiters(name, index, at_ms, events);
        events[before..]
            .iter()
            .filter_map(|e| e.grant().cloned())
            .collect()
    }

    /// Grants the waiters at the front of `name`'s queue that nothing blocks
    /// any more, in FIFO order, with the token of the entry being applied;
    /// drops the lock's entry when nobody holds or waits for it.
    fn grant_waiters(&mut self, name: &str, index: LogIndex, at_ms: u64, events: &mut Vec<Event>) {
        let sets = &self.sets;
        let Some(lock) = self.locks.get_mut(name) else {
            return;
        };
        // A lock in lock-delay grants nobody; its waiters keep their places.
        let grants = if self.delayed.contains_key(name) {
            Vec::new()
        } else {
            // A lock set at the front stops the scan: it is granted with the
            // rest of its set or not at all (below).
            lock.grant_front(name, index, at_ms, |w| {
                acquire_all::set_of(sets, w, name).is_some()
            })
        };
        for grant in grants {
            if let Some(s) = self.sessions.get_mut(&grant.session) {
                s.waiting.remove(name);
                s.held.insert(name.to_owned(), grant.request_id);
            }
            events.push(Event::HandedOver(grant));
        }
        let front_set = lock
            .waiters
            .front()
            .and_then(|w| acquire_all::set_of(sets, w, name).map(|_| (w.session, w.request_id)));
        if let Some(key) = front_set {
            if !self.grant_set(key, index, at_ms, events)
                && crate::planted::planted(crate::planted::Bug::SetGrantsEarly)
            {
                self.grant_one_of_set(key, name, index, at_ms, events);
            }
        }
        if self.locks.get(name).is_some_and(LockState::is_empty) {
            self.locks.remove(name);
        }
    }
}

#[cfg(test)]
mod tests;
