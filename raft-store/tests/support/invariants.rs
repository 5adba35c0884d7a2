//! The lease machine's invariants, checked through its public API only, and
//! `checked_apply`: one `apply` followed by every check that can be made of
//! the step (tokens, reply against state, events against the state change,
//! refusals change nothing, sequenced duplicates run nothing, snapshot and
//! backup round trips, replay from the previous snapshot).
//!
//! This file is longer than 800 lines because every check of one step lives
//! beside `checked_apply`, which runs them all: a check kept elsewhere is a
//! check some property test forgets to call.

use raftlock_proto::limits;
use raftlock_store::backup;
use raftlock_store::machine::{
    Command, Event, Finished, HoldEnd, LeaseError, LeaseMachine, Mode, Outcome, Reply, SessionId,
};
use std::collections::BTreeMap;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// The state machine's rule for lock names.
pub fn name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= limits::MAX_NAME_LEN && !name.chars().any(char::is_control)
}

/// Everything that must hold of any state reached by applying commands.
pub fn check_invariants(m: &LeaseMachine) -> Result<(), String> {
    check_invariants_with(m, &m.to_snapshot())
}

/// [`check_invariants`], given the machine's snapshot bytes.
fn check_invariants_with(m: &LeaseMachine, snapshot: &[u8]) -> Result<(), String> {
    let mut owners: BTreeMap<String, u64> = BTreeMap::new();
    let mut sessions = 0usize;
    let mut last_id = None;
    for s in m.sessions() {
        sessions += 1;
        ensure!(
            m.session(s.id) == Some(s),
            "session {} is not kept under its own id",
            s.id
        );
        ensure!(
            last_id.is_none_or(|l| l < s.id),
            "sessions are not listed in id order at {}",
            s.id
        );
        last_id = Some(s.id);
        ensure!(
            (limits::MIN_TTL_MS..=limits::MAX_TTL_MS).contains(&s.ttl_ms),
            "session {} has ttl {} out of range",
            s.id,
            s.ttl_ms
        );
        ensure!(
            s.client_name.len() <= limits::MAX_CLIENT_NAME_LEN,
            "session {} has a client name of {} bytes",
            s.id,
            s.client_name.len()
        );
        ensure!(
            s.owner.len() <= limits::MAX_CLIENT_NAME_LEN,
            "session {} has an owner of {} bytes",
            s.id,
            s.owner.len()
        );
        if !s.owner.is_empty() {
            *owners.entry(s.owner.clone()).or_default() += 1;
        }
        ensure!(
            s.held.len() + s.waiting.len() <= limits::MAX_LOCKS_PER_SESSION,
            "session {} holds or waits for {} locks",
            s.id,
            s.held.len() + s.waiting.len()
        );
        ensure!(
            s.finished.len() <= limits::FINISHED_REQUESTS_PER_SESSION,
            "session {} remembers {} finished requests",
            s.id,
            s.finished.len()
        );
        for (rid, name, seq) in m.numbered_standing(s.id) {
            ensure!(
                s.held.get(name) == Some(&rid) || s.waiting.get(name) == Some(&rid),
                "session {} keeps seq {seq} ({rid} on {name:?}) as standing, but it neither holds nor waits",
                s.id
            );
        }
        for (name, rid) in &s.held {
            ensure!(
                !s.waiting.contains_key(name),
                "session {} both holds and waits for {name:?}",
                s.id
            );
            let view = m.describe(name);
            ensure!(
                view.holders
                    .iter()
                    .any(|h| h.session == s.id && h.request_id == *rid),
                "session {} lists {name:?} as held through {rid} but the holders are {:?}",
                s.id,
                view.holders
            );
        }
        for (name, rid) in &s.waiting {
            let view = m.describe(name);
            ensure!(
                view.waiters
                    .iter()
                    .any(|w| w.session == s.id && w.request_id == *rid),
                "session {} lists {name:?} as waited for through {rid} but the waiters are {:?}",
                s.id,
                view.waiters
            );
        }
    }

    // The per-owner counters: the machine answers them one owner at a time,
    // and only its snapshot shows the whole map (stale entries included).
    for (owner, n) in &owners {
        ensure!(
            m.sessions_owned_by(owner) == *n,
            "owner {owner:?} has {n} live sessions but the machine counts {}",
            m.sessions_owned_by(owner)
        );
    }
    ensure!(m.sessions_owned_by("") == 0, "the empty owner is counted");
    let tables = tables_in_snapshot(snapshot)?;
    if let Some(stored) = tables.owners {
        ensure!(
            stored == owners,
            "the owner counters {stored:?} differ from the live sessions' owners {owners:?}"
        );
    }

    // The exactly-once tables, like the owner counters, in full only in the
    // snapshot: whatever they keep must belong to a live session, or a key
    // could answer a retry with an ended session and answers would pile up.
    let mut keyed = 0usize;
    for (id, once) in &tables.once {
        let Some(s) = m.session(*id) else {
            return Err(format!(
                "exactly-once bookkeeping is kept for session {id}, which does not exist"
            ));
        };
        let kept: Vec<u64> = once.answers.keys().copied().collect();
        ensure!(
            m.exactly_once(*id) == (once.acked_below, kept.clone()),
            "exactly_once({id}) = {:?}, the state keeps {:?}",
            m.exactly_once(*id),
            (once.acked_below, &kept)
        );
        ensure!(
            kept.first()
                .is_none_or(|first| *first >= once.acked_below.max(1)),
            "session {id} keeps answers {kept:?} below its acknowledged mark {} or for seq 0",
            once.acked_below
        );
        ensure!(
            kept.len() <= limits::MAX_UNACKED_REQUESTS_PER_SESSION,
            "session {id} keeps {} unacknowledged answers",
            kept.len()
        );
        if let Some(key) = once.key {
            keyed += 1;
            ensure!(
                m.session_by_key(&s.owner, key) == Some(*id),
                "session {id} was created with key {key} by {:?}, which finds {:?}",
                s.owner,
                m.session_by_key(&s.owner, key)
            );
        }
    }
    for (key, id) in &tables.session_keys {
        ensure!(
            m.session(*id).is_some(),
            "creation key {key:?} names session {id}, which does not exist"
        );
    }
    ensure!(
        tables.session_keys.len() == keyed,
        "{} creation keys are indexed for {keyed} sessions created with one: {:?}",
        tables.session_keys.len(),
        tables.session_keys
    );

    // A waiting lock set is in the queue of each of its locks, and is not
    // left waiting once it is at the front of all of them and they are free.
    for (session, request_id, names) in m.lock_sets() {
        ensure!(names.len() >= 2, "lock set {names:?} of session {session}");
        let mut ready = true;
        for name in names {
            let queue = m.lock(name).map(|l| &l.waiters);
            ensure!(
                queue.is_some_and(|q| q
                    .iter()
                    .any(|w| w.session == session && w.request_id == request_id)),
                "session {session} waits for the set {names:?}, but not in {name:?}'s queue"
            );
            ensure!(
                m.session(session)
                    .is_some_and(|s| s.waiting.get(name) == Some(&request_id)),
                "session {session} does not list {name:?} of its waiting set {names:?}"
            );
            let lock = m.lock(name);
            ready &= lock.is_some_and(|l| {
                l.holders.is_empty()
                    && l.waiters
                        .front()
                        .is_some_and(|w| w.session == session && w.request_id == request_id)
            }) && m.lock_delay(name).is_none();
        }
        ensure!(
            !ready,
            "the set {names:?} of session {session} is at the front of every queue, free, and still waits"
        );
    }

    let mut locks = 0usize;
    let mut waiters = 0usize;
    let mut names = Vec::new();
    for (name, lock) in m.locks() {
        locks += 1;
        waiters += lock.waiters.len();
        names.push(name.to_owned());
        ensure!(name_ok(name), "a lock has the invalid name {name:?}");
        // Only a lock-delay, or a lock set at the front that waits for
        // another of its locks, keeps waiters from a lock nobody holds.
        let set_at_front = lock
            .waiters
            .front()
            .and_then(|w| m.lock_set(w.session, w.request_id))
            .is_some_and(|names| names.iter().any(|n| n == name));
        ensure!(
            !lock.holders.is_empty()
                || (m.lock_delay(name).is_some() && !lock.waiters.is_empty())
                || set_at_front,
            "lock {name:?} is kept without a holder (waiters {:?})",
            lock.waiters
        );
        if let Some(size) = m.size(name) {
            ensure!(
                lock.permits == Some(size),
                "{name:?} was resized to {size} but has {:?} permits",
                lock.permits
            );
        }
        ensure!(lock.permits != Some(0), "lock {name:?} has 0 permits");
        let mut present = std::collections::BTreeSet::new();
        for h in &lock.holders {
            ensure!(h.name == name, "a holder of {name:?} names {:?}", h.name);
            ensure!(
                present.insert(h.session),
                "session {} holds {name:?} twice",
                h.session
            );
            ensure!(
                h.metadata.len() <= limits::MAX_METADATA_LEN,
                "a holder of {name:?} has {} bytes of metadata",
                h.metadata.len()
            );
            let Some(s) = m.session(h.session) else {
                return Err(format!(
                    "holder session {} of {name:?} does not exist",
                    h.session
                ));
            };
            ensure!(
                s.held.get(name) == Some(&h.request_id),
                "session {} holds {name:?} through {} but lists {:?}",
                h.session,
                h.request_id,
                s.held.get(name)
            );
            ensure!(
                m.validate(name, h.token).valid,
                "the token {} of a holder of {name:?} does not validate",
                h.token
            );
        }
        if lock.holders.iter().any(|h| h.mode == Mode::Exclusive) {
            ensure!(
                lock.holders.len() == 1,
                "{name:?} has an exclusive holder beside others: {:?}",
                lock.holders
            );
        } else if !lock.holders.is_empty() {
            let Some(cap) = lock.permits else {
                return Err(format!("{name:?} has shared holders and no permit count"));
            };
            let taken: u64 = lock.holders.iter().map(|h| u64::from(h.terms.count)).sum();
            // Only a resize shrinks a semaphore below what its holders took.
            ensure!(
                taken <= u64::from(cap) || m.size(name).is_some(),
                "{name:?} has shared holders taking {taken} permits of {cap}",
            );
        }
        for h in &lock.holders {
            ensure!(
                h.terms.count >= 1 && (h.mode == Mode::Shared || h.terms.count == 1),
                "a holder of {name:?} takes {} permits in mode {:?}",
                h.terms.count,
                h.mode
            );
        }
        ensure!(
            lock.waiters.len() <= limits::MAX_WAITERS_PER_LOCK,
            "{name:?} has {} waiters",
            lock.waiters.len()
        );
        for w in &lock.waiters {
            ensure!(
                present.insert(w.session),
                "session {} appears twice in {name:?} (as holder and waiter, or waiting twice)",
                w.session
            );
            let Some(s) = m.session(w.session) else {
                return Err(format!(
                    "waiting session {} of {name:?} does not exist",
                    w.session
                ));
            };
            ensure!(
                s.waiting.get(name) == Some(&w.request_id),
                "session {} waits for {name:?} through {} but lists {:?}",
                w.session,
                w.request_id,
                s.waiting.get(name)
            );
            ensure!(
                w.timeout_ms <= limits::MAX_WAIT_MS,
                "a waiter of {name:?} waits {} ms",
                w.timeout_ms
            );
            ensure!(
                w.metadata.len() <= limits::MAX_METADATA_LEN,
                "a waiter of {name:?} has {} bytes of metadata",
                w.metadata.len()
            );
        }
        if let Some(front) = lock.waiters.front() {
            ensure!(
                !lock.fits(front.mode, front.terms.count)
                    || m.lock_delay(name).is_some()
                    || set_at_front,
                "{name:?}: the first waiter (session {}, {:?}) fits beside the holders {:?} but was not granted",
                front.session,
                front.mode,
                lock.holders
            );
        }
        let view = m.describe(name);
        ensure!(
            view.permits == m.size(name).or(lock.permits)
                && view.holders == lock.holders
                && view.waiters.iter().eq(lock.waiters.iter()),
            "describe({name:?}) differs from the lock's state"
        );
        let v = m.validate(name, lock.current_token());
        ensure!(
            (v.valid || lock.holders.is_empty()) && v.current_token == lock.current_token(),
            "validate({name:?}, current token) = {v:?}"
        );
    }
    for (name, b) in m.rate_limits() {
        ensure!(name_ok(name), "a rate limit has the invalid name {name:?}");
        let t = u128::from(b.spec.interval_ns());
        ensure!(
            u128::from(b.tat_ns) <= u128::from(m.rate_clock_ns()) + u128::from(b.spec.burst) * t,
            "rate limit {name:?} has taken more than its burst ahead of the rate clock"
        );
        ensure!(
            b.leases.len() <= limits::MAX_TOKEN_LEASES_PER_LIMIT,
            "rate limit {name:?} has {} leases",
            b.leases.len()
        );
        ensure!(
            b.leases
                .values()
                .all(|(n, _)| *n >= 1 && *n <= b.spec.burst),
            "rate limit {name:?} has a lease outside 1..=burst: {:?}",
            b.leases
        );
    }
    // list() shows the locks held or waited for and the sized semaphores.
    let listed: Vec<String> = m
        .list("", "", usize::MAX)
        .into_iter()
        .map(|l| l.name)
        .collect();
    let mut expected: Vec<String> = names.clone();
    expected.extend(tables.sizes.keys().cloned());
    expected.sort();
    expected.dedup();
    ensure!(
        listed == expected,
        "list() shows {listed:?}, the locks and sized semaphores are {expected:?}"
    );
    ensure!(
        m.counts() == (sessions, locks, waiters),
        "counts() = {:?}, the state has {:?}",
        m.counts(),
        (sessions, locks, waiters)
    );
    Ok(())
}

/// The tables only a snapshot shows whole.
#[derive(serde::Deserialize)]
struct Tables {
    /// `None` for a build without it.
    owners: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    once: BTreeMap<SessionId, Once>,
    #[serde(default)]
    session_keys: BTreeMap<String, SessionId>,
    #[serde(default)]
    sizes: BTreeMap<String, u32>,
}

/// A session's exactly-once bookkeeping, as the snapshot stores it.
#[derive(serde::Deserialize)]
struct Once {
    key: Option<u128>,
    acked_below: u64,
    answers: BTreeMap<u64, serde::de::IgnoredAny>,
}

/// The owner counters and exactly-once tables as the snapshot stores them.
fn tables_in_snapshot(snapshot: &[u8]) -> Result<Tables, String> {
    #[derive(serde::Deserialize)]
    struct Snapshot {
        machine: Tables,
    }
    // Snapshots are binary; the JSON form carries the same fields by name.
    let json = LeaseMachine::from_snapshot(snapshot)
        .map_err(|e| format!("the snapshot does not restore: {e}"))?
        .to_json_snapshot();
    serde_json::from_slice::<Snapshot>(&json)
        .map(|s| s.machine)
        .map_err(|e| format!("the snapshot's owner or exactly-once tables do not read: {e}"))
}

/// What a sequence of steps must remember: the last index applied and, per
/// lock, the token of its latest grant and the index that made it.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    last_index: Option<u64>,
    grants: BTreeMap<String, (u64, u64)>,
    /// The state after the last step and its snapshot, so the next step
    /// need not make them again (used only while the machine still equals
    /// it).
    after: Option<(LeaseMachine, Vec<u8>)>,
}

impl Tracker {
    /// A tracker for a machine restored from elsewhere: nothing may be
    /// applied at or below the highest id or token in it.
    pub fn after(m: &LeaseMachine) -> Tracker {
        let mut t = Tracker::default();
        let mut high = None::<u64>;
        for s in m.sessions() {
            high = high.max(Some(s.id));
        }
        for (name, lock) in m.locks() {
            let token = lock.current_token();
            high = high.max(Some(token));
            t.grants.insert(name.to_owned(), (token, token));
        }
        t.last_index = high;
        t
    }

    /// The next index to apply at, if any is left.
    pub fn next_index(&self) -> Option<u64> {
        match self.last_index {
            None => Some(1),
            Some(i) => i.checked_add(1),
        }
    }

    /// The last index applied.
    pub fn last_index(&self) -> Option<u64> {
        self.last_index
    }
}

/// Applies `cmd` at `index` and checks everything about the step. On a
/// finding, the error names the command and what went wrong.
pub fn checked_apply(
    m: &mut LeaseMachine,
    cmd: &Command,
    index: u64,
    at_ms: u64,
    t: &mut Tracker,
) -> Result<Outcome, String> {
    if let Some(last) = t.last_index {
        ensure!(
            index > last,
            "harness bug: index {index} is not after {last}"
        );
    }
    let (before, before_snapshot) = match t.after.take() {
        Some((machine, snapshot)) if machine == *m => (machine, snapshot),
        _ => (m.clone(), m.to_snapshot()),
    };
    let outcome = m.apply(cmd, index, at_ms);
    t.last_index = Some(index);
    let after =
        check_step(&before, &before_snapshot, cmd, index, at_ms, &outcome, m, t).map_err(|e| {
            format!(
                "{e}\n  applying {cmd:?}\n  at index {index}, at_ms {at_ms}\n  gave {outcome:?}"
            )
        })?;
    t.after = Some(after);
    Ok(outcome)
}

#[allow(clippy::too_many_arguments)]
fn check_step(
    before: &LeaseMachine,
    before_snapshot: &[u8],
    cmd: &Command,
    index: u64,
    at_ms: u64,
    outcome: &Outcome,
    after: &LeaseMachine,
    t: &mut Tracker,
) -> Result<(LeaseMachine, Vec<u8>), String> {
    // Fencing tokens: a grant's token is the index of the entry that made
    // it, and the tokens of one lock's grants strictly increase.
    for e in &outcome.events {
        if let Some(g) = e.grant() {
            ensure!(
                g.token == index,
                "a grant of {:?} made at index {index} has token {}",
                g.name,
                g.token
            );
            if let Some((token, at)) = t.grants.get(&g.name) {
                ensure!(
                    *at == index || g.token > *token,
                    "a grant of {:?} has token {}, not above the earlier {token}",
                    g.name,
                    g.token
                );
            }
            t.grants.insert(g.name.clone(), (g.token, index));
        }
    }
    // A grant's cause is the machine's to say: at once only to the request
    // the command itself made, and to anyone else only as a handover.
    let own = match cmd.unwrapped() {
        Command::Acquire {
            session,
            request_id,
            ..
        }
        | Command::AcquireAll {
            session,
            request_id,
            ..
        } => Some((*session, *request_id)),
        _ => None,
    };
    for e in &outcome.events {
        match e {
            Event::Granted(g) => ensure!(
                own == Some((g.session, g.request_id)),
                "{:?} granted at once to session {} by a command that did not ask for it",
                g.name,
                g.session
            ),
            Event::HandedOver(g) => ensure!(
                own != Some((g.session, g.request_id)),
                "{:?} handed over to the request that asked for it in the same command",
                g.name
            ),
            _ => {}
        }
    }
    for (name, lock) in after.locks() {
        for h in &lock.holders {
            ensure!(
                h.token <= index,
                "a holder of {name:?} has token {} from the future",
                h.token
            );
        }
    }

    let snapshot = after.to_snapshot();
    check_exactly_once(before, cmd, outcome, after)?;
    check_reply(before, cmd, index, outcome, after)?;
    check_events(before, cmd, outcome, after)?;
    check_invariants_with(after, &snapshot)?;

    // A snapshot restores an equal machine, which snapshots to equal bytes.
    let restored = LeaseMachine::from_snapshot(&snapshot)
        .map_err(|e| format!("the machine's own snapshot does not restore: {e}"))?;
    ensure!(
        restored == *after,
        "the machine restored from its snapshot differs"
    );
    ensure!(
        restored.to_snapshot() == snapshot,
        "equal machines gave different snapshot bytes"
    );
    // A replica restored from the previous snapshot applies the command the
    // same way: the snapshot holds everything `apply` depends on.
    let mut replica = LeaseMachine::from_snapshot(before_snapshot)
        .map_err(|e| format!("the previous snapshot does not restore: {e}"))?;
    let replayed = replica.apply(cmd, index, at_ms);
    ensure!(
        replayed == *outcome,
        "a replica restored from the snapshot answered {replayed:?}"
    );
    ensure!(
        replica == *after,
        "a replica restored from the snapshot reached another state"
    );
    // A backup of the state restores it at its index.
    let bytes = backup::encode(after, index, at_ms, "fuzz");
    let (header, machine) =
        backup::decode(&bytes).map_err(|e| format!("a fresh backup does not decode: {e}"))?;
    ensure!(
        header.last_index == index && machine == *after,
        "a backup did not round-trip"
    );
    Ok((restored, snapshot))
}

/// The same sessions, with the same holdings and waits, and the same locks:
/// all that a command that runs nothing may leave changed is exactly-once
/// bookkeeping.
fn same_sessions_and_locks(before: &LeaseMachine, after: &LeaseMachine) -> bool {
    before.sessions().eq(after.sessions()) && before.locks().eq(after.locks())
}

/// Only a sequenced command changes a session's exactly-once bookkeeping,
/// and it keeps the rule: the acknowledged mark only rises, to what the
/// client sent; only acknowledged answers are forgotten; every answer is
/// kept until acknowledged; a number below the mark is refused; and a
/// duplicate of a kept answer runs nothing.
fn check_exactly_once(
    before: &LeaseMachine,
    cmd: &Command,
    outcome: &Outcome,
    after: &LeaseMachine,
) -> Result<(), String> {
    let sequenced = match cmd {
        Command::Sequenced {
            seq,
            acked_below,
            command,
        } => {
            // An acquire, or an acquire with terms: what `Sequenced` wraps.
            let acquire = match command.as_ref() {
                Command::WithTerms { command, .. } => command.as_ref(),
                other => other,
            };
            match acquire {
                Command::Acquire { session, .. } => Some((*seq, *acked_below, *session)),
                _ => None,
            }
        }
        Command::SequencedSet {
            seq,
            acked_below,
            command,
            ..
        } => match command.as_ref() {
            Command::AcquireAll { session, .. } => Some((*seq, *acked_below, *session)),
            _ => None,
        },
        _ => None,
    };
    for s in before.sessions() {
        if after.session(s.id).is_none() || sequenced.is_some_and(|(.., id)| id == s.id) {
            continue;
        }
        ensure!(
            before.exactly_once(s.id) == after.exactly_once(s.id),
            "the exactly-once bookkeeping of session {} changed from {:?} to {:?}",
            s.id,
            before.exactly_once(s.id),
            after.exactly_once(s.id)
        );
    }
    let Some((seq, acked_below, session)) = sequenced else {
        return Ok(());
    };
    let (mark_before, kept_before) = before.exactly_once(session);
    let (mark, kept) = after.exactly_once(session);
    ensure!(
        mark == mark_before || (mark == acked_below && acked_below > mark_before),
        "the acknowledged mark went from {mark_before} to {mark} on acked_below {acked_below}"
    );
    ensure!(
        kept.iter().all(|s| *s == seq || kept_before.contains(s)),
        "kept answers went from {kept_before:?} to {kept:?} on seq {seq}"
    );
    ensure!(
        kept_before.iter().all(|s| *s < mark || kept.contains(s)),
        "unacknowledged answers were forgotten: {kept_before:?} to {kept:?} (mark {mark})"
    );
    let runs_nothing = if seq == 0 || before.session(session).is_none() {
        ensure!(
            outcome.reply.is_err(),
            "seq {seq} of session {session} (seq 0, or no such session) was answered {:?}",
            outcome.reply
        );
        true
    } else if seq < mark {
        ensure!(
            matches!(
                outcome.reply,
                Err(LeaseError::RequestAcknowledged { session: s, seq: q }) if s == session && q == seq
            ),
            "seq {seq}, below the acknowledged mark {mark}, was answered {:?}",
            outcome.reply
        );
        true
    } else if kept_before.contains(&seq) {
        true
    } else {
        // Answered now, so kept until acknowledged, unless refused for
        // having too many answers unacknowledged already.
        let unrun = matches!(outcome.reply, Err(LeaseError::TooManyUnacknowledged { .. }));
        ensure!(
            unrun || kept.contains(&seq),
            "the answer to seq {seq} is not kept: {kept:?}"
        );
        unrun
    };
    if runs_nothing {
        ensure!(
            outcome.events.is_empty() && same_sessions_and_locks(before, after),
            "seq {seq} of session {session} ran again, or ran although refused: {:?}",
            outcome.events
        );
    }
    Ok(())
}

/// The reply agrees with the state before and after.
fn check_reply(
    before: &LeaseMachine,
    cmd: &Command,
    index: u64,
    outcome: &Outcome,
    after: &LeaseMachine,
) -> Result<(), String> {
    let sequenced = matches!(
        cmd,
        Command::Sequenced { .. } | Command::SequencedSet { .. }
    );
    let reply = match &outcome.reply {
        // A sequenced refusal is an answer kept for duplicates.
        Err(_) if sequenced => {
            ensure!(
                same_sessions_and_locks(before, after),
                "a refused command changed the state"
            );
            ensure!(
                outcome.events.is_empty(),
                "a refused command produced events"
            );
            return Ok(());
        }
        Err(_) => {
            ensure!(before == after, "a refused command changed the state");
            ensure!(
                outcome.events.is_empty(),
                "a refused command produced events"
            );
            return Ok(());
        }
        Ok(r) => r,
    };
    let holder_of = |m: &LeaseMachine, name: &str, session: u64| {
        m.describe(name)
            .holders
            .into_iter()
            .find(|h| h.session == session)
    };
    match reply {
        Reply::SessionCreated { session, ttl_ms } => {
            if let Command::CreateSessionOnce { owner, key, .. } = cmd {
                if let Some(earlier) = before.session_by_key(owner, *key) {
                    ensure!(
                        *session == earlier && before == after,
                        "a retried creation answered {session} and changed the state; \
                         its key had made {earlier}"
                    );
                    return Ok(());
                }
                ensure!(
                    after.session_by_key(owner, *key) == Some(index),
                    "a keyed creation's key finds {:?}, not the session it made",
                    after.session_by_key(owner, *key)
                );
            }
            ensure!(*session == index, "session created with id {session}");
            ensure!(
                before.session(index).is_none(),
                "a session was created over an existing one"
            );
            ensure!(
                after.session(index).is_some_and(|s| s.ttl_ms == *ttl_ms),
                "the created session is not there"
            );
        }
        Reply::SessionClosed { released } => {
            let Command::CloseSession { session } = cmd else {
                return Err("SessionClosed answers another command".into());
            };
            let held: Vec<String> = before
                .session(*session)
                .map(|s| s.held.keys().cloned().collect())
                .unwrap_or_default();
            ensure!(
                *released == held,
                "closing released {released:?}, the session held {held:?}"
            );
            ensure!(
                after.session(*session).is_none(),
                "a closed session lives on"
            );
        }
        Reply::SessionsExpired { expired } => {
            let Command::ExpireSessions { sessions } = cmd else {
                return Err("SessionsExpired answers another command".into());
            };
            let mut want = Vec::new();
            for s in sessions {
                if before.session(*s).is_some() && !want.contains(s) {
                    want.push(*s);
                }
            }
            ensure!(
                *expired == want,
                "expired {expired:?}, the live ones named were {want:?}"
            );
            for s in sessions {
                ensure!(after.session(*s).is_none(), "expired session {s} lives on");
            }
        }
        Reply::Acquired(g) => {
            ensure!(
                holder_of(after, &g.name, g.session).as_ref() == Some(g),
                "the grant answered is not held: {g:?}"
            );
        }
        Reply::AcquiredAll(grants) => {
            let names: Vec<String> = match cmd.unwrapped() {
                Command::AcquireAll { names, .. } => names.clone(),
                // A cancel that lost the race to its set's grant: every
                // lock the session holds through that request.
                Command::CancelWait {
                    session,
                    request_id,
                    ..
                } => before
                    .session(*session)
                    .map(|s| {
                        s.held
                            .iter()
                            .filter(|(_, r)| *r == request_id)
                            .map(|(n, _)| n.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
                _ => return Err("AcquiredAll answers another command".into()),
            };
            let granted: Vec<&str> = grants.iter().map(|g| g.name.as_str()).collect();
            ensure!(
                granted == names.iter().map(String::as_str).collect::<Vec<_>>(),
                "a set of {names:?} answered grants of {granted:?}"
            );
            for g in grants {
                ensure!(
                    holder_of(after, &g.name, g.session).as_ref() == Some(g),
                    "a grant of the set answered is not held: {g:?}"
                );
            }
        }
        Reply::Queued { position } if matches!(cmd.unwrapped(), Command::AcquireAll { .. }) => {
            let Command::AcquireAll { session, names, .. } = cmd.unwrapped() else {
                unreachable!("matched above");
            };
            let at = names
                .iter()
                .map(|n| {
                    after
                        .describe(n)
                        .waiters
                        .iter()
                        .position(|w| w.session == *session)
                })
                .collect::<Option<Vec<_>>>()
                .and_then(|p| p.into_iter().max());
            ensure!(
                at == Some(*position),
                "a set queued at {position}, its furthest place in the queues is {at:?}"
            );
        }
        Reply::Busy { .. } if matches!(cmd.unwrapped(), Command::AcquireAll { .. }) => {
            // A sequenced try keeps its answer; nothing else may change.
            ensure!(
                if sequenced {
                    same_sessions_and_locks(before, after)
                } else {
                    before == after
                },
                "a busy try of a set changed the state"
            );
        }
        Reply::Queued { position } => {
            let Command::Acquire { session, name, .. } = cmd.unwrapped() else {
                return Err("Queued answers another command".into());
            };
            let at = after
                .describe(name)
                .waiters
                .iter()
                .position(|w| w.session == *session);
            ensure!(
                at == Some(*position),
                "queued at {position}, the queue has the session at {at:?}"
            );
        }
        Reply::Busy { holders } => {
            let Command::Acquire { session, name, .. } = cmd.unwrapped() else {
                return Err("Busy answers another command".into());
            };
            if let Command::Sequenced { seq, .. } = cmd {
                ensure!(
                    same_sessions_and_locks(before, after),
                    "a busy try-lock changed the state"
                );
                // A duplicate's Busy is the first answer, about the holders
                // of then.
                if before.exactly_once(*session).1.contains(seq) {
                    return Ok(());
                }
            } else {
                ensure!(before == after, "a busy try-lock changed the state");
            }
            let oldest: Vec<_> = before
                .describe(name)
                .holders
                .into_iter()
                .take(raftlock_proto::limits::MAX_BUSY_HOLDERS)
                .collect();
            ensure!(
                *holders == oldest,
                "busy names holders {holders:?}, not the lock's oldest"
            );
        }
        Reply::Released { granted } => {
            let Command::Release { session, name, .. } = cmd else {
                return Err("Released answers another command".into());
            };
            ensure!(
                holder_of(after, name, *session).is_none(),
                "a released lock is still held by its session"
            );
            for g in granted {
                ensure!(
                    outcome.events.iter().any(|e| e.grant() == Some(g)),
                    "a grant in the reply has no event"
                );
            }
        }
        Reply::WaitCancelled => {
            let Command::CancelWait {
                session,
                name,
                request_id,
            } = cmd
            else {
                return Err("WaitCancelled answers another command".into());
            };
            ensure!(
                after
                    .session(*session)
                    .is_some_and(|s| s.waiting.get(name) != Some(request_id)),
                "a cancelled wait is still there"
            );
            let was_waiting = before
                .session(*session)
                .is_some_and(|s| s.waiting.get(name) == Some(request_id));
            if !was_waiting {
                // Cancelled before it arrived: nothing is held or queued
                // differently, and the session remembers the request as
                // cancelled, so that it is refused when it does arrive
                // (whatever else the session waits for meanwhile).
                ensure!(
                    outcome.events.is_empty()
                        && before.locks().eq(after.locks())
                        && before
                            .sessions()
                            .map(|s| (s.id, &s.held, &s.waiting))
                            .eq(after.sessions().map(|s| (s.id, &s.held, &s.waiting))),
                    "a cancel of a request that had not arrived changed what is held or queued"
                );
                ensure!(
                    after.session(*session).and_then(|s| s.finished.back())
                        == Some(&(*request_id, Finished::WaitCancelled)),
                    "a cancel of a request that had not arrived does not remember it as cancelled"
                );
            }
        }
        Reply::Downgraded { hold, granted } => {
            let Command::Downgrade(d) = cmd else {
                return Err("Downgraded answers another command".into());
            };
            let was = holder_of(before, &d.name, d.session);
            ensure!(
                was.as_ref()
                    .is_some_and(|w| w.token == d.token && w.token == hold.token),
                "downgraded {:?}/{}/{} to {hold:?}, the hold was {was:?}",
                d.name,
                d.session,
                d.token
            );
            ensure!(
                hold.mode == Mode::Shared
                    && hold.terms.lock_delay_ms == 0
                    && holder_of(after, &d.name, d.session).as_ref() == Some(hold),
                "the downgraded hold is not held shared as answered"
            );
            ensure!(
                was.is_some_and(|w| w.mode == Mode::Exclusive)
                    || (granted.is_empty() && before == after),
                "a downgrade of a shared hold changed the state"
            );
            for g in granted {
                ensure!(
                    g.mode == Mode::Shared && outcome.events.iter().any(|e| e.grant() == Some(g)),
                    "a grant beside a downgraded hold is not shared or has no event"
                );
            }
        }
        Reply::Proclaimed(g) => {
            let Command::Proclaim { value, .. } = cmd else {
                return Err("Proclaimed answers another command".into());
            };
            ensure!(
                g.metadata == *value && holder_of(after, &g.name, g.session).as_ref() == Some(g),
                "the proclaimed grant is not held as answered"
            );
        }
        Reply::ForceReleased { released, granted } => {
            let Command::ForceRelease { name } = cmd else {
                return Err("ForceReleased answers another command".into());
            };
            ensure!(
                *released == before.describe(name).holders,
                "force-release took {released:?}, the holders were {:?}",
                before.describe(name).holders
            );
            for r in released {
                ensure!(
                    holder_of(after, name, r.session).is_none(),
                    "session {} still holds a force-released lock",
                    r.session
                );
            }
            for g in granted {
                ensure!(
                    outcome.events.iter().any(|e| e.grant() == Some(g)),
                    "a grant in the reply has no event"
                );
            }
        }
        Reply::HoldEnded { released, granted } => {
            let Command::EndHold {
                name,
                session,
                token,
            } = cmd
            else {
                return Err("HoldEnded answers another command".into());
            };
            let was = holder_of(before, name, *session)
                .filter(|h| h.token == *token && h.terms.max_hold_ms != 0);
            ensure!(
                *released == was,
                "ending the hold {name:?}/{session}/{token} took {released:?}, it was {was:?}"
            );
            ensure!(
                released.is_some() || before == after,
                "ending a hold that had ended changed the state"
            );
            ensure!(
                released.is_none() || holder_of(after, name, *session).is_none(),
                "session {session} still holds {name:?} after its hold cap ran out"
            );
            for g in granted {
                ensure!(
                    outcome.events.iter().any(|e| e.grant() == Some(g)),
                    "a grant in the reply has no event"
                );
            }
        }
        Reply::LimitDefined { .. } | Reply::LimitDeleted { .. } => {}
        Reply::Taken { n, lease, .. } => {
            let Command::Take { name, lease_ms, .. } = cmd else {
                return Err("Taken answers another command".into());
            };
            let b = after
                .rate_limit(name)
                .ok_or("a take admitted from no limit")?;
            ensure!(
                *n >= 1 && *n <= b.spec.burst,
                "admitted {n} tokens of burst {}",
                b.spec.burst
            );
            let was = before.rate_limit(name).map_or(0, |b| b.admitted);
            ensure!(
                b.admitted == was + n,
                "admitted count went from {was} to {}",
                b.admitted
            );
            ensure!(
                lease.is_some() == (*lease_ms > 0)
                    && lease.is_none_or(|id| b.leases.get(&id).is_some_and(|(k, _)| k == n)),
                "a take with lease_ms {lease_ms} answered lease {lease:?}"
            );
        }
        Reply::TakeRefused { .. } => {
            let Command::Take { name, .. } = cmd else {
                return Err("TakeRefused answers another command".into());
            };
            let (b, a) = (before.rate_limit(name), after.rate_limit(name));
            ensure!(
                a.is_some_and(
                    |a| b.is_none_or(|b| a.tat_ns == b.tat_ns && a.admitted == b.admitted)
                ),
                "a refused take changed what the limit admitted"
            );
        }
        Reply::Returned { credited } => {
            let Command::ReturnTokens { name, lease, .. } = cmd else {
                return Err("Returned answers another command".into());
            };
            let reserved = before
                .rate_limit(name)
                .and_then(|b| b.leases.get(lease))
                .map_or(0, |(n, _)| *n);
            ensure!(
                *credited <= reserved,
                "credited {credited} of a lease of {reserved}"
            );
            ensure!(
                after
                    .rate_limit(name)
                    .is_some_and(|b| !b.leases.contains_key(lease)),
                "a returned lease is still outstanding"
            );
        }
        Reply::LockDelayEnded { granted } | Reply::Resized { granted } => {
            let name = match cmd {
                Command::EndLockDelay { name } => {
                    ensure!(
                        after.lock_delay(name).is_none(),
                        "{name:?} is still in lock-delay after it ended"
                    );
                    name
                }
                Command::EndLockDelayAt { name, started } => {
                    // It ends the delay it names, and no other.
                    let named = before
                        .lock_delays()
                        .any(|(n, _, s)| n == name && s == *started);
                    ensure!(
                        after.lock_delay(name).is_none() == (named || before.lock_delay(name).is_none()),
                        "{name:?}: an end of the delay started at {started} left {:?} (before: {:?})",
                        after.lock_delay(name),
                        before.lock_delay(name)
                    );
                    if !named {
                        ensure!(
                            granted.is_empty(),
                            "a stale end of {name:?}'s delay granted"
                        );
                    }
                    name
                }
                Command::Resize { name, permits } => {
                    let want = (*permits != 0).then_some(*permits);
                    ensure!(
                        after.size(name) == want,
                        "{name:?} resized to {permits} has size {:?}",
                        after.size(name)
                    );
                    name
                }
                _ => return Err("LockDelayEnded or Resized answers another command".into()),
            };
            for g in granted {
                ensure!(
                    g.name == *name && outcome.events.iter().any(|e| e.grant() == Some(g)),
                    "a grant in the reply has no event"
                );
            }
        }
    }
    Ok(())
}

/// Nothing changes silently: every holder, waiter and session that went away
/// has an event saying so, and every new holder a grant event. A hold's end
/// names its cause, the one its command is: a release, a close, an expiry,
/// a forced release or a hold cap, and no other command ends a hold.
fn check_events(
    before: &LeaseMachine,
    cmd: &Command,
    outcome: &Outcome,
    after: &LeaseMachine,
) -> Result<(), String> {
    let events = &outcome.events;
    let cause = match cmd.unwrapped() {
        Command::Release { .. } => Some(HoldEnd::Released),
        Command::CloseSession { .. } => Some(HoldEnd::SessionClosed),
        Command::ExpireSessions { .. } => Some(HoldEnd::SessionExpired),
        Command::ForceRelease { .. } => Some(HoldEnd::ForceReleased),
        Command::EndHold { .. } => Some(HoldEnd::CapRanOut),
        _ => None,
    };
    for e in events {
        if let Event::Released { why, .. } = e {
            ensure!(
                cause == Some(*why),
                "a hold ended {why:?} under {}, whose holds end {cause:?}",
                cmd.kind()
            );
        }
    }
    for (name, lock) in before.locks() {
        let now = after.describe(name);
        for h in &lock.holders {
            let kept = now
                .holders
                .iter()
                .any(|n| n.session == h.session && n.token == h.token);
            if !kept {
                ensure!(
                    events.iter().any(|e| matches!(
                        e,
                        Event::Released { name: n, session, token, .. }
                            if n == name && *session == h.session && *token == h.token
                    )),
                    "holder {} of {name:?} vanished without a Released event",
                    h.session
                );
            }
        }
        for w in &lock.waiters {
            if now.waiters.iter().any(|n| n.session == w.session) {
                continue;
            }
            let told = events.iter().any(|e| match e {
                Event::Granted(g) | Event::HandedOver(g) => {
                    g.name == name && g.session == w.session && g.request_id == w.request_id
                }
                Event::WaitEnded {
                    name: n,
                    session,
                    request_id,
                    ..
                } => n == name && *session == w.session && *request_id == w.request_id,
                _ => false,
            });
            ensure!(
                told,
                "waiter {} of {name:?} vanished without an event",
                w.session
            );
        }
    }
    for (name, lock) in after.locks() {
        let was = before.describe(name);
        for h in &lock.holders {
            let old = was
                .holders
                .iter()
                .any(|o| o.session == h.session && o.token == h.token);
            if !old {
                ensure!(
                    events.iter().any(|e| match e {
                        Event::Granted(g) | Event::HandedOver(g) =>
                            g.name == name && g.session == h.session && g.token == h.token,
                        _ => false,
                    }),
                    "holder {} of {name:?} appeared without a Granted event",
                    h.session
                );
            }
        }
    }
    for s in before.sessions() {
        if after.session(s.id).is_none() {
            ensure!(
                events
                    .iter()
                    .any(|e| matches!(e, Event::SessionEnded { session, .. } if *session == s.id)),
                "session {} vanished without a SessionEnded event",
                s.id
            );
        }
    }
    for e in events {
        match e {
            Event::Granted(g) | Event::HandedOver(g) | Event::Proclaimed(g) => {
                let view = after.describe(&g.name);
                let taken: u64 = view.holders.iter().map(|h| u64::from(h.terms.count)).sum();
                ensure!(
                    g.mode == Mode::Exclusive
                        || matches!(e, Event::Proclaimed(_))
                        || taken <= u64::from(view.permits.unwrap_or(0)),
                    "a grant of {:?} leaves holders taking {taken} permits of {:?}",
                    g.name,
                    view.permits
                );
                let held = view.holders.into_iter().find(|h| h.session == g.session);
                ensure!(
                    held.as_ref() == Some(g),
                    "event {e:?} but the lock is held as {held:?}"
                );
            }
            Event::SessionEnded { session, .. } => {
                ensure!(
                    before.session(*session).is_some() && after.session(*session).is_none(),
                    "event {e:?} for a session that did not end here"
                );
            }
            Event::Released { .. } | Event::WaitEnded { .. } => {}
            Event::LockDelayed { name, .. } => {
                ensure!(
                    after.lock_delay(name).is_some(),
                    "event {e:?} but {name:?} is not in lock-delay"
                );
            }
            Event::LockDelayEnded { name } => {
                ensure!(
                    before.lock_delay(name).is_some() && after.lock_delay(name).is_none(),
                    "event {e:?} for a lock-delay that did not end here"
                );
            }
        }
    }
    Ok(())
}
