//! Exactly-once requests, as in the Raft dissertation's client sessions
//! (§6.3). A client numbers its logical requests per session (`seq`, from
//! 1; retries reuse the number) and sends along the lowest number it still
//! waits for an answer to (`acked_below`). The state machine keeps the
//! first answer of every number at or above that, so a duplicate, however
//! late, gets the first answer and is never executed twice; it forgets an
//! answer only once the client said it will not ask again, and refuses any
//! number below that unexecuted. A try-lock that answered "busy" and whose
//! duplicate arrives after the lock was freed stays "busy": no grant the
//! client cannot see.
//!
//! A client that waits long beside many short calls acknowledges answers
//! one by one instead (`SequencedAcks`): it lists the numbers still in
//! flight, and every number between `acked_below` and the highest listed
//! that is not listed is answered. Those are kept as runs of acknowledged
//! numbers above the watermark (`acked`): a duplicate of one is refused as
//! below the watermark would be, and its answer is forgotten at once, so
//! an hour-long wait keeps one answer, not every answer after it. The runs
//! are cut only by calls in flight, so they are as few as those.
//!
//! A session may also be created with a client-chosen key: a retry of a
//! creation whose answer was lost finds the session the first attempt
//! made, instead of leaving an orphan that holds locks until its TTL.

use super::error::LeaseError;
use super::outcome::{Event, Reply};
use super::request::{NewSession, Sequence};
use super::types::{Finished, Grant, LogIndex, RequestId, SessionId};
use super::{acquire, acquire_all, LeaseMachine};
use raftlock_proto::limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A session's exactly-once bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Once {
    /// The key the session was created with, if any.
    pub key: Option<u128>,
    /// The highest `acked_below` the client has sent.
    pub acked_below: u64,
    /// First answers of the requests not yet acknowledged, by seq. Boxed:
    /// a B-tree node has room for eleven values, and most sessions keep
    /// one answer, so an unboxed ~200-byte answer cost every session 2 KiB
    /// (serde encodes a box as its content: snapshots are unchanged).
    pub answers: BTreeMap<u64, Box<Recorded>>,
    /// Runs of acknowledged numbers above `acked_below`, start → end
    /// (exclusive), neither touching nor overlapping (snapshot version 6).
    #[serde(default)]
    pub acked: BTreeMap<u64, u64>,
    /// The numbered acquisitions that still hold or wait, by lock (a
    /// session holds or waits through one acquisition per lock), with
    /// their sequence numbers: when one ends, how it ended is kept with its
    /// answer (and forgotten with it) rather than in the session's history
    /// of unnumbered acquisitions, which a long-lived session filled for
    /// good.
    #[serde(default)]
    pub standing: BTreeMap<String, (RequestId, u64)>,
}

impl Once {
    /// Whether the client said it will not ask for `seq` again.
    pub fn is_acked(&self, seq: u64) -> bool {
        seq < self.acked_below
            || self
                .acked
                .range(..=seq)
                .next_back()
                .is_some_and(|(_, end)| seq < *end)
    }

    /// Moves the watermark up to `acked_below` (never down), forgetting
    /// the answers and runs below it.
    fn advance(&mut self, acked_below: u64) {
        if acked_below <= self.acked_below {
            return;
        }
        self.acked_below = acked_below;
        // Oldest first, and in place: `split_off` would leave every session
        // a freshly allocated empty node.
        while let Some(entry) = self.answers.first_entry() {
            if *entry.key() >= acked_below {
                break;
            }
            entry.remove();
        }
        while let Some(entry) = self.acked.first_entry() {
            if *entry.key() >= acked_below {
                break;
            }
            let end = entry.remove();
            if end > acked_below {
                self.acked.insert(acked_below, end);
                break;
            }
        }
        self.absorb();
    }

    /// Folds a run that starts at the watermark into it.
    fn absorb(&mut self) {
        while let Some(end) = self.acked.remove(&self.acked_below) {
            self.acked_below = end;
        }
    }

    /// Records as acknowledged every number from the watermark up to the
    /// highest of `in_flight` that is neither listed nor `seq`, and forgets
    /// their answers. Refused, with nothing changed, if that would leave
    /// more runs than a session may keep.
    fn acknowledge(
        &mut self,
        session: SessionId,
        seq: u64,
        in_flight: &[u64],
    ) -> Result<(), LeaseError> {
        if in_flight.len() > limits::MAX_IN_FLIGHT_LISTED {
            return Err(LeaseError::InvalidArgument(format!(
                "in_flight lists {} sequence numbers; at most {} (the lowest ones)",
                in_flight.len(),
                limits::MAX_IN_FLIGHT_LISTED
            )));
        }
        // Nothing above the highest listed is acknowledged: a client with
        // more calls in flight than it may list lists its lowest ones.
        let Some(&highest) = in_flight.iter().max() else {
            return Ok(());
        };
        let mut open: Vec<u64> = in_flight
            .iter()
            .copied()
            .chain([seq])
            .filter(|s| (self.acked_below..=highest).contains(s))
            .collect();
        open.sort_unstable();
        open.dedup();
        let mut gaps = Vec::new();
        let mut from = self.acked_below;
        for &o in &open {
            if from < o {
                gaps.push((from, o));
            }
            from = o.saturating_add(1);
        }
        let mut runs = self.acked.clone();
        for &(a, b) in &gaps {
            insert_run(&mut runs, a, b);
        }
        // A run that starts at the watermark is folded into it below.
        let kept = runs.len() - usize::from(runs.contains_key(&self.acked_below));
        if kept > limits::MAX_ACK_RANGES_PER_SESSION {
            return Err(LeaseError::TooManyUnacknowledged {
                session,
                max: limits::MAX_UNACKED_REQUESTS_PER_SESSION,
            });
        }
        self.acked = runs;
        for (a, b) in gaps {
            let answered: Vec<u64> = self.answers.range(a..b).map(|(k, _)| *k).collect();
            for k in answered {
                self.answers.remove(&k);
            }
        }
        self.absorb();
        Ok(())
    }
}

/// Adds `a..b` to `runs`, merging it with the runs it touches.
fn insert_run(runs: &mut BTreeMap<u64, u64>, mut a: u64, mut b: u64) {
    if let Some((&s, &e)) = runs.range(..=a).next_back() {
        if e >= a {
            a = s;
            b = b.max(e);
            runs.remove(&s);
        }
    }
    while let Some((&s, &e)) = runs.range(a..=b).next() {
        b = b.max(e);
        runs.remove(&s);
    }
    runs.insert(a, b);
}

/// A numbered acquisition: one lock, or a set of locks (AcquireAll).
pub(super) enum Acquisition<'a> {
    One(acquire::Request<'a>),
    Set(acquire_all::Request<'a>),
}

impl Acquisition<'_> {
    fn session(&self) -> SessionId {
        match self {
            Acquisition::One(one) => one.session,
            Acquisition::Set(set) => set.session,
        }
    }

    fn request_id(&self) -> RequestId {
        match self {
            Acquisition::One(one) => one.request_id,
            Acquisition::Set(set) => set.request_id,
        }
    }

    /// What [`Recorded::call`] keeps of it: the lock's name, or for a set
    /// its first name, how many more and a checksum of them all, on lines
    /// of their own (a name holds no control character, so the two never
    /// meet); and whether it waits. Bounded whatever the set, since an
    /// answer is kept per unacknowledged call.
    fn call(&self) -> (String, bool) {
        match self {
            Acquisition::One(one) => (one.name.to_owned(), one.wait_ms.is_some()),
            Acquisition::Set(set) => {
                let joined = set.names.join("\n");
                let first = set.names.first().map_or("", String::as_str);
                let key = format!(
                    "{first}\n+{}\ncrc32c {:08x}",
                    set.names.len().saturating_sub(1),
                    crc32c::crc32c(joined.as_bytes())
                );
                (key, set.wait_ms.is_some())
            }
        }
    }
}

/// The first answer to a sequenced request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The acquisition it was (a seq reused for another one is refused).
    pub request_id: RequestId,
    /// What it answered.
    pub first: Result<Reply, LeaseError>,
    /// The lock it asked for (or its set, see [`Acquisition::call`]) and
    /// whether it waited: a seq and request id reused for another lock, or
    /// a wait reusing a try-lock's, is refused rather than answered with
    /// the first call's verdict. `None` for answers recorded before
    /// snapshot format 4, which did not keep it.
    pub call: Option<(String, bool)>,
    /// How the acquisition ended, once it no longer holds or waits: a
    /// duplicate is answered with it.
    #[serde(default)]
    pub ended: Option<Finished>,
}

/// The index entry of a session created with `key` by `owner`: keys are
/// per identity, so one identity cannot reach another's session by its key.
pub(super) fn key_of(owner: &str, key: u128) -> String {
    format!("{key:032x}/{owner}")
}

impl LeaseMachine {
    /// The live session `owner` created with `key`, if any.
    pub fn session_by_key(&self, owner: &str, key: u128) -> Option<SessionId> {
        self.session_keys
            .get(&key_of(owner, key))
            .copied()
            .filter(|id| self.sessions.contains_key(id))
    }

    pub(super) fn create_session_once(
        &mut self,
        new: &NewSession<'_>,
        key: u128,
        index: LogIndex,
        at_ms: u64,
    ) -> Result<Reply, LeaseError> {
        let owner = new.owner;
        if let Some(s) = self
            .session_keys
            .get(&key_of(owner, key))
            .and_then(|id| self.sessions.get(id))
        {
            return Ok(Reply::SessionCreated {
                session: s.id,
                ttl_ms: s.ttl_ms,
            });
        }
        let reply = self.create_plain_session(new, index, at_ms)?;
        self.session_keys.insert(key_of(owner, key), index);
        self.once.entry(index).or_default().key = Some(key);
        Ok(reply)
    }

    /// Forgets what a session that ended kept here.
    pub(super) fn forget_once(&mut self, session: SessionId, owner: &str) {
        if let Some(once) = self.once.remove(&session) {
            if let Some(key) = once.key {
                self.session_keys.remove(&key_of(owner, key));
            }
        }
    }

    /// Where a granted or queued acquisition stands now, if it still does.
    fn standing(&self, session: SessionId, name: &str, request_id: RequestId) -> Option<Reply> {
        let s = self.sessions.get(&session)?;
        let lock = self.locks.get(name)?;
        if s.held.get(name) == Some(&request_id) {
            return lock.holder(session).cloned().map(Reply::Acquired);
        }
        if s.waiting.get(name) == Some(&request_id) {
            return lock
                .queue_position(session)
                .map(|position| Reply::Queued { position });
        }
        None
    }

    /// How an acquisition that no longer stands ended, as its retry's error.
    fn finished_answer(&self, session: SessionId, request_id: RequestId) -> LeaseError {
        let finished = self.sessions.get(&session).and_then(|s| {
            s.finished
                .iter()
                .rev()
                .find(|(id, _)| *id == request_id)
                .map(|(_, f)| *f)
        });
        match finished {
            Some(how) => how.error(request_id),
            None => LeaseError::RequestFinished { request_id },
        }
    }

    /// Fills in `Once::standing` from the kept answers, for a state read
    /// from a snapshot format that did not keep it: each numbered
    /// acquisition granted or queued whose session still holds or waits
    /// through it. (One whose answer was already acknowledged cannot be
    /// found; its end goes to the session's history, as it did then.)
    pub(super) fn rebuild_standing(&mut self) {
        for (session, once) in &mut self.once {
            let Some(s) = self.sessions.get(session) else {
                continue;
            };
            for (seq, recorded) in &once.answers {
                let Some((name, _)) = &recorded.call else {
                    continue;
                };
                let stands = matches!(
                    recorded.first,
                    Ok(Reply::Acquired(_) | Reply::Queued { .. })
                ) && (s.held.get(name) == Some(&recorded.request_id)
                    || s.waiting.get(name) == Some(&recorded.request_id));
                if stands {
                    once.standing
                        .entry(name.clone())
                        .or_insert((recorded.request_id, *seq));
                }
            }
        }
    }

    /// Whether a numbered acquisition `request_id` of `session` has an
    /// answer kept (it ran, whatever it answered).
    pub(super) fn answered(&self, session: SessionId, request_id: RequestId) -> bool {
        self.once
            .get(&session)
            .is_some_and(|o| o.answers.values().any(|r| r.request_id == request_id))
    }

    /// Records how acquisition `request_id` of `session` for lock `name`
    /// ended: with its
    /// exactly-once answer if it was numbered (nothing once that answer is
    /// acknowledged: a duplicate is refused by its number then), else in
    /// the session's bounded history of unnumbered acquisitions.
    pub(super) fn finish(
        &mut self,
        session: SessionId,
        name: &str,
        request_id: RequestId,
        how: Finished,
    ) {
        if let Some(once) = self.once.get_mut(&session) {
            if let Some(&(standing, seq)) = once.standing.get(name) {
                if standing == request_id {
                    once.standing.remove(name);
                    if let Some(recorded) = once.answers.get_mut(&seq) {
                        recorded.ended = Some(how);
                    }
                    return;
                }
            }
        }
        if let Some(s) = self.sessions.get_mut(&session) {
            s.remember_finished(request_id, how);
        }
    }

    pub(super) fn sequenced(
        &mut self,
        sequence: Sequence<'_>,
        req: Acquisition<'_>,
        index: LogIndex,
        at_ms: u64,
        events: &mut Vec<Event>,
    ) -> Result<Reply, LeaseError> {
        let Sequence {
            seq,
            acked_below,
            in_flight,
        } = sequence;
        let (session, request_id) = (req.session(), req.request_id());
        if seq == 0 {
            return Err(LeaseError::InvalidArgument(
                "sequence numbers start at 1".into(),
            ));
        }
        if !self.sessions.contains_key(&session) {
            return Err(LeaseError::SessionNotFound(session));
        }
        let once = self.once.entry(session).or_default();
        // Everything below is answered and will not be asked again.
        once.advance(acked_below);
        if let Some(in_flight) = in_flight {
            once.acknowledge(session, seq, in_flight)?;
        }
        if once.is_acked(seq) {
            return Err(LeaseError::RequestAcknowledged { session, seq });
        }
        let call = req.call();
        if let Some(recorded) = once.answers.get(&seq).cloned() {
            let other_call = recorded.call.as_ref().is_some_and(|c| *c != call);
            if recorded.request_id != request_id || other_call {
                return Err(LeaseError::InvalidArgument(format!(
                    "sequence number {seq} of session {session} belongs to another request"
                )));
            }
            return match recorded.first {
                // Granted or queued: answer with where it stands now, or how
                // it ended; never run it again.
                Ok(Reply::Acquired(_) | Reply::AcquiredAll(_) | Reply::Queued { .. }) => {
                    let now = match &req {
                        Acquisition::One(one) => self.standing(session, one.name, request_id),
                        Acquisition::Set(set) => self.set_stands(session, set.names, request_id),
                    };
                    match now {
                        Some(reply) => Ok(reply),
                        None => Err(match recorded.ended {
                            Some(how) => how.error(request_id),
                            None => self.finished_answer(session, request_id),
                        }),
                    }
                }
                // The holders of then, kept without their names and
                // metadata (see below): never today's beside then's verdict.
                Ok(Reply::Busy { holders }) => {
                    let name = match &req {
                        Acquisition::One(one) => one.name.to_owned(),
                        Acquisition::Set(_) => {
                            holders.first().map(|h| h.name.clone()).unwrap_or_default()
                        }
                    };
                    Ok(Reply::Busy {
                        holders: holders
                            .into_iter()
                            .map(|h| Grant {
                                name: name.clone(),
                                ..h
                            })
                            .collect(),
                    })
                }
                first => first,
            };
        }
        if once.answers.len() >= limits::MAX_UNACKED_REQUESTS_PER_SESSION {
            return Err(LeaseError::TooManyUnacknowledged {
                session,
                max: limits::MAX_UNACKED_REQUESTS_PER_SESSION,
            });
        }
        let set = matches!(req, Acquisition::Set(_));
        let names: Vec<String> = match &req {
            Acquisition::One(one) => vec![one.name.to_owned()],
            Acquisition::Set(set) => set.names.to_vec(),
        };
        let first = match req {
            Acquisition::One(one) => self.acquire(one, index, at_ms, events),
            Acquisition::Set(set) => self.acquire_all(set, index, at_ms, events),
        };
        if let Some(once) = self.once.get_mut(&session) {
            if matches!(
                first,
                Ok(Reply::Acquired(_) | Reply::AcquiredAll(_) | Reply::Queued { .. })
            ) {
                for name in names {
                    once.standing.insert(name, (request_id, seq));
                }
            }
            once.answers.insert(
                seq,
                Box::new(Recorded {
                    request_id,
                    first: kept(&first, set),
                    call: Some(call),
                    ended: None,
                }),
            );
        }
        first
    }
}

/// A first answer as it is kept. A busy answer's holders with their names
/// and metadata would let one client's unacknowledged try-locks pin
/// megabytes in every replica's state: keep who held it and with which
/// token, which is the answer of that moment (a single acquire's lock is
/// its call's; a set's busy lock is named once, by its first holder). A
/// grant's duplicate is answered from the lock table (`standing`), so its
/// metadata, up to 4 KiB per lock, need not be kept twice.
fn kept(first: &Result<Reply, LeaseError>, set: bool) -> Result<Reply, LeaseError> {
    let bare = |g: &Grant, name: &str| Grant {
        name: name.to_owned(),
        metadata: Vec::new(),
        ..g.clone()
    };
    match first {
        Ok(Reply::Busy { holders }) => Ok(Reply::Busy {
            holders: holders
                .iter()
                .enumerate()
                .map(|(i, h)| bare(h, if set && i == 0 { &h.name } else { "" }))
                .collect(),
        }),
        Ok(Reply::Acquired(g)) => Ok(Reply::Acquired(bare(g, &g.name))),
        Ok(Reply::AcquiredAll(grants)) => Ok(Reply::AcquiredAll(
            grants.iter().map(|g| bare(g, "")).collect(),
        )),
        other => other.clone(),
    }
}
