//! Command sequences from a stream of bytes, over a small universe chosen to
//! collide: a few sessions (live, ended and never created), a few lock names
//! (valid ones, and empty, oversized, control-character and multi-byte ones
//! at the length limit), request ids that repeat, tokens next to real ones,
//! TTLs, waits, permits and metadata sizes at and around their limits;
//! sequenced acquires that are new, retried, late duplicates or below what
//! was acknowledged, and keyed session creations that are retried. The
//! fuzz target draws the bytes from libFuzzer (`arbitrary::Unstructured`),
//! the property test from proptest.

use super::invariants::{checked_apply, Tracker};
use raftlock_proto::limits;
use raftlock_store::machine::{
    Command, Downgrade, LeaseMachine, LimitSpec, Mode, Reply, RequestId, SessionId, Terms,
};

/// A source of choices.
pub trait Draw {
    /// The next byte; 0 once the input is used up.
    fn byte(&mut self) -> u8;
    /// Whether the input is used up.
    fn is_empty(&self) -> bool;
}

/// Draws from a byte slice.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// Draws from `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }
}

impl Draw for Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

fn pick<T: Clone>(d: &mut impl Draw, items: &[T]) -> T {
    items[d.byte() as usize % items.len()].clone()
}

/// Mostly one of `usual`, one time in sixteen one of `odd`.
fn pick_usually<T: Clone>(d: &mut impl Draw, usual: &[T], odd: &[T]) -> T {
    if d.byte() < 240 {
        pick(d, usual)
    } else {
        pick(d, odd)
    }
}

fn u16_of(d: &mut impl Draw) -> u16 {
    u16::from_le_bytes([d.byte(), d.byte()])
}

const TTLS: [u64; 4] = [limits::MIN_TTL_MS, 5_000, 10_000, limits::MAX_TTL_MS];
const ODD_TTLS: [u64; 5] = [
    0,
    limits::MIN_TTL_MS - 1,
    limits::MIN_TTL_MS + 1,
    limits::MAX_TTL_MS + 1,
    u64::MAX,
];
const WAITS: [Option<u64>; 7] = [
    None,
    None,
    Some(1_000),
    Some(30_000),
    Some(30_000),
    Some(0),
    Some(limits::MAX_WAIT_MS),
];
const ODD_WAITS: [Option<u64>; 3] = [Some(1), Some(limits::MAX_WAIT_MS + 1), Some(u64::MAX)];
const PERMITS: [Option<u32>; 7] = [None, None, None, None, Some(1), Some(2), Some(3)];
const ODD_PERMITS: [Option<u32>; 3] = [Some(0), Some(u32::MAX), Some(u32::MAX - 1)];
const METADATA_LENS: [usize; 4] = [0, 0, 1, 16];
const ODD_METADATA_LENS: [usize; 3] = [
    limits::MAX_METADATA_LEN - 1,
    limits::MAX_METADATA_LEN,
    limits::MAX_METADATA_LEN + 1,
];
const REQUEST_IDS: [u128; 8] = [0, 1, 2, 3, 4, 5, u128::MAX, 1 << 64];
/// Few, so that creations collide on them across owners.
const CREATION_KEYS: [u128; 4] = [0, 1, 2, u128::MAX];

/// Valid lock names, mostly a few short ones so that sessions collide on
/// them, and some at the length limit.
pub fn lock_names() -> Vec<String> {
    let mut names: Vec<String> = ["a", "a", "a", "b", "b", "c", "jobs/nightly", "é锁🔒", " "]
        .iter()
        .map(|s| s.to_string())
        .collect();
    names.push("x".repeat(limits::MAX_NAME_LEN));
    // Two-byte characters exactly at the limit.
    names.push("é".repeat(limits::MAX_NAME_LEN / 2));
    names
}

/// Lock names the machine must refuse.
pub fn odd_lock_names() -> Vec<String> {
    vec![
        String::new(),
        "x".repeat(limits::MAX_NAME_LEN + 1),
        format!("{}a", "é".repeat(limits::MAX_NAME_LEN / 2)),
        "a\nb".into(),
        "\u{7f}".into(),
        "\u{0}".into(),
        "\u{85}".into(),
    ]
}

fn client_names() -> Vec<String> {
    vec![
        String::new(),
        "w1".into(),
        "é".repeat(limits::MAX_CLIENT_NAME_LEN / 2),
    ]
}

fn odd_client_names() -> Vec<String> {
    vec![
        "x".repeat(limits::MAX_CLIENT_NAME_LEN + 1),
        format!("{}a", "é".repeat(limits::MAX_CLIENT_NAME_LEN / 2)),
    ]
}

fn owners() -> Vec<String> {
    vec![
        String::new(),
        String::new(),
        "team-a".into(),
        "team-b".into(),
        "o".repeat(limits::MAX_CLIENT_NAME_LEN),
    ]
}

fn odd_owners() -> Vec<String> {
    vec!["o".repeat(limits::MAX_CLIENT_NAME_LEN + 1)]
}

/// Applies generated commands at increasing indexes and times, checking
/// every step.
pub struct Driver {
    /// The machine under test.
    pub machine: LeaseMachine,
    tracker: Tracker,
    at_ms: u64,
    created: Vec<SessionId>,
    names: (Vec<String>, Vec<String>),
    client_names: (Vec<String>, Vec<String>),
    owners: (Vec<String>, Vec<String>),
    /// The commands applied so far, with their index and time.
    pub history: Vec<(u64, u64, Command)>,
}

impl Default for Driver {
    fn default() -> Self {
        Driver {
            machine: LeaseMachine::default(),
            tracker: Tracker::default(),
            at_ms: 1_700_000_000_000,
            created: Vec::new(),
            names: (lock_names(), odd_lock_names()),
            client_names: (client_names(), odd_client_names()),
            owners: (owners(), odd_owners()),
            history: Vec::new(),
        }
    }
}

impl Driver {
    /// Runs up to `max_steps` commands drawn from `d`.
    pub fn run(&mut self, d: &mut impl Draw, max_steps: usize) -> Result<(), String> {
        for _ in 0..max_steps {
            if d.is_empty() {
                break;
            }
            let cmd = self.command(d);
            let Some(index) = self.next_index(d) else {
                break;
            };
            self.at_ms = self.at_ms.saturating_add(pick_usually(
                d,
                &[0, 1, 7, 1_000, 60_000],
                &[u64::MAX / 4],
            ));
            self.step(cmd, index, self.at_ms)?;
        }
        Ok(())
    }

    /// Applies one command, checking the step.
    pub fn step(&mut self, cmd: Command, index: u64, at_ms: u64) -> Result<(), String> {
        let outcome = checked_apply(&mut self.machine, &cmd, index, at_ms, &mut self.tracker)
            .map_err(|e| {
                format!(
                    "{e}\n  after {} earlier commands (index, at_ms, command): {:#?}",
                    self.history.len(),
                    self.history
                )
            })?;
        if let Ok(Reply::SessionCreated { session, .. }) = outcome.reply {
            // A retried keyed creation answers a session created earlier.
            if session == index {
                self.created.push(session);
            }
        }
        self.history.push((index, at_ms, cmd));
        Ok(())
    }

    fn next_index(&self, d: &mut impl Draw) -> Option<u64> {
        let next = self.tracker.next_index()?;
        match d.byte() {
            0..=243 => Some(next),
            244..=251 => next.checked_add(u64::from(d.byte() % 10) + 1),
            252 | 253 => next.checked_add(1 << 16),
            254 => next.checked_add(1 << 32),
            255 => Some(next.max(u64::MAX - 64)),
        }
    }

    fn session(&self, d: &mut impl Draw) -> SessionId {
        let live: Vec<SessionId> = self.machine.sessions().map(|s| s.id).collect();
        let b = d.byte();
        if b < 220 && !live.is_empty() {
            return pick(d, &live);
        }
        if b < 240 && !self.created.is_empty() {
            return pick(d, &self.created);
        }
        let next = self.tracker.next_index().unwrap_or(u64::MAX);
        pick(d, &[0, 1, 2, next, u64::MAX])
    }

    fn name(&self, d: &mut impl Draw) -> String {
        pick_usually(d, &self.names.0, &self.names.1)
    }

    fn request_id(&self, d: &mut impl Draw, session: SessionId, name: &str) -> RequestId {
        // Often the acquisition the session already has on this lock, so
        // retries and cancels of real requests happen.
        if d.byte() < 128 {
            if let Some(s) = self.machine.session(session) {
                if let Some(r) = s.held.get(name).or_else(|| s.waiting.get(name)) {
                    return *r;
                }
            }
        }
        RequestId(pick(d, &REQUEST_IDS))
    }

    fn token(&self, d: &mut impl Draw, session: SessionId, name: &str) -> u64 {
        let view = self.machine.describe(name);
        let own = view
            .holders
            .iter()
            .find(|h| h.session == session)
            .map(|h| h.token);
        let any = view.holders.first().map(|h| h.token);
        let base = own.or(any).unwrap_or(0);
        match d.byte() % 16 {
            0..=10 => base,
            11 => base.wrapping_sub(1),
            12 => base.wrapping_add(1),
            13 => 0,
            14 => u64::MAX,
            _ => self.tracker.last_index().unwrap_or(0),
        }
    }

    fn metadata(&self, d: &mut impl Draw) -> Vec<u8> {
        // Metadata at the limit is rarer than other odd values: it makes
        // every later snapshot of the sequence kilobytes larger.
        let len = if d.byte() < 252 {
            pick(d, &METADATA_LENS)
        } else {
            pick(d, &ODD_METADATA_LENS)
        };
        vec![d.byte(); len]
    }

    /// A rate-limit command: define, take (now or as a lease), return,
    /// delete; on the rate clock, usually ahead of the machine's, now and
    /// then behind it (a deposed leader's late value).
    fn rate_command(&self, d: &mut impl Draw) -> Command {
        let clock = self.machine.rate_clock_ns();
        let now_ns = match d.byte() % 8 {
            0 => clock.saturating_sub(1_000_000_000),
            1 => clock,
            2 => clock.saturating_add(1),
            3 | 4 => clock.saturating_add(1_000_000),
            5 | 6 => clock.saturating_add(250_000_000),
            _ => clock.saturating_add(5_000_000_000),
        };
        let name = pick_usually(d, &["r1".to_string(), "r2".to_string()], &self.names.1);
        let spec = pick_usually(
            d,
            &[
                LimitSpec {
                    rate: 10,
                    per_ms: 1_000,
                    burst: 5,
                },
                LimitSpec {
                    rate: 3,
                    per_ms: 7,
                    burst: 2,
                },
            ],
            &[
                LimitSpec {
                    rate: 0,
                    per_ms: 1_000,
                    burst: 5,
                },
                LimitSpec {
                    rate: 1,
                    per_ms: 0,
                    burst: 1,
                },
                LimitSpec {
                    rate: 1,
                    per_ms: 1,
                    burst: 0,
                },
                LimitSpec {
                    rate: limits::MAX_RATE,
                    per_ms: 1,
                    burst: limits::MAX_BURST,
                },
                LimitSpec {
                    rate: 1,
                    per_ms: limits::MAX_RATE_PERIOD_MS,
                    burst: 1,
                },
            ],
        );
        match d.byte() % 8 {
            0 => Command::DefineLimit { name, spec, now_ns },
            1..=5 => Command::Take {
                name,
                n: pick_usually(d, &[1, 1, 2, 5], &[0, 6, u64::MAX]),
                spec: (d.byte() < 200).then_some(spec),
                lease_ms: pick_usually(d, &[0, 0, 0, 500], &[limits::MAX_TOKEN_LEASE_MS + 1]),
                now_ns,
            },
            6 => {
                let leases: Vec<(u64, u64)> = self
                    .machine
                    .rate_limit(&name)
                    .map(|b| b.leases.iter().map(|(id, (n, _))| (*id, *n)).collect())
                    .unwrap_or_default();
                let (lease, reserved) = if leases.is_empty() {
                    (1, 1)
                } else {
                    pick(d, &leases)
                };
                Command::ReturnTokens {
                    name,
                    lease,
                    unused: pick(d, &[0, reserved / 2, reserved, reserved + 1]),
                    now_ns,
                }
            }
            _ => Command::DeleteLimit { name },
        }
    }

    /// An acquire by `session`, sometimes with terms beyond a plain hold.
    fn acquire(&self, d: &mut impl Draw, session: SessionId) -> Command {
        let plain = self.plain_acquire(d, session);
        if d.byte() >= 64 {
            return plain;
        }
        let terms = Terms {
            count: pick_usually(d, &[1, 1, 2, 3], &[0, u32::MAX]),
            max_hold_ms: pick_usually(
                d,
                &[0, limits::MIN_HOLD_MS, 60_000],
                &[1, limits::MAX_HOLD_MS + 1],
            ),
            lock_delay_ms: pick_usually(
                d,
                &[0, 0, 5_000, limits::MAX_LOCK_DELAY_MS],
                &[limits::MAX_LOCK_DELAY_MS + 1, u64::MAX],
            ),
        };
        Command::WithTerms {
            terms,
            command: Box::new(plain),
        }
    }

    fn plain_acquire(&self, d: &mut impl Draw, session: SessionId) -> Command {
        let name = self.name(d);
        Command::Acquire {
            session,
            request_id: self.request_id(d, session, &name),
            mode: if d.byte().is_multiple_of(2) {
                Mode::Exclusive
            } else {
                Mode::Shared
            },
            permits: pick_usually(d, &PERMITS, &ODD_PERMITS),
            wait_ms: pick_usually(d, &WAITS, &ODD_WAITS),
            metadata: self.metadata(d),
            name,
        }
    }

    /// An `acked_below` for `session`'s request `seq`: what it acknowledged
    /// already, what a client would send (its lowest unanswered request,
    /// this one at most), a stale value, or one that acknowledges more
    /// than was answered.
    fn acked_below(&self, d: &mut impl Draw, session: SessionId, seq: u64) -> u64 {
        let (acked, kept) = self.machine.exactly_once(session);
        let lowest = kept.first().copied().unwrap_or(seq).min(seq);
        pick_usually(
            d,
            &[acked, lowest, lowest, seq, acked.saturating_sub(1), 1],
            &[0, seq.saturating_add(1), u64::MAX],
        )
    }

    /// A sequenced acquire or lock set: some client's next request, or an
    /// earlier one again (a retry, or a packet the network delayed) with
    /// the `acked_below` it had or a new one.
    fn sequenced(&self, d: &mut impl Draw) -> Command {
        let sent: Vec<(u64, u64, &Command)> = self
            .history
            .iter()
            .filter_map(|(_, _, c)| numbered_parts(c))
            .collect();
        let b = d.byte();
        if b < 96 && !sent.is_empty() {
            let (seq, acked_below, command) = pick(d, &sent);
            let acked_below = match command.unwrapped() {
                Command::Acquire { session, .. } | Command::AcquireAll { session, .. }
                    if b.is_multiple_of(2) =>
                {
                    self.acked_below(d, *session, seq)
                }
                _ => acked_below,
            };
            return numbered(seq, acked_below, command.clone());
        }
        if b >= 248 {
            // What only a broken client sends: seq 0 or the largest, or a
            // command that cannot be sequenced (or not that way).
            let session = self.session(d);
            let command = match d.byte() % 4 {
                0 => self.acquire(d, session),
                1 => Command::CloseSession { session },
                2 => self.lock_set(d, session),
                _ => Command::Sequenced {
                    seq: 1,
                    acked_below: 1,
                    command: Box::new(self.acquire(d, session)),
                },
            };
            let (seq, acked_below) = (pick(d, &[0, 1, u64::MAX]), pick(d, &[0, 1, u64::MAX]));
            return if d.byte().is_multiple_of(2) {
                Command::SequencedSet {
                    seq,
                    acked_below,
                    in_flight: vec![],
                    command: Box::new(command),
                }
            } else {
                Command::Sequenced {
                    seq,
                    acked_below,
                    command: Box::new(command),
                }
            };
        }
        let session = self.session(d);
        let last = sent
            .iter()
            .filter_map(|(seq, _, command)| match command.unwrapped() {
                Command::Acquire { session: s, .. } | Command::AcquireAll { session: s, .. }
                    if *s == session =>
                {
                    Some(*seq)
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        // Now and then a number skipped: requests in flight arrive out of
        // order.
        let seq = last.saturating_add(1 + u64::from(d.byte().is_multiple_of(8)));
        let acked_below = self.acked_below(d, session, seq);
        let command = if d.byte() < 48 {
            self.lock_set(d, session)
        } else {
            self.acquire(d, session)
        };
        numbered(seq, acked_below, command)
    }

    /// A lock set: mostly two or three names in order; now and then out of
    /// order, repeated or too few, which is refused.
    fn lock_set(&self, d: &mut impl Draw, session: SessionId) -> Command {
        let n = 1 + d.byte() % 3;
        let mut names: Vec<String> = (0..n).map(|_| self.name(d)).collect();
        if d.byte() < 220 {
            names.sort();
            names.dedup();
        }
        let request_id = self.request_id(d, session, &names[0]);
        Command::AcquireAll {
            session,
            names,
            request_id,
            wait_ms: (d.byte() < 180).then_some(1_000),
            metadata: self.metadata(d),
        }
    }

    /// A keyed session creation: a new one, or a retry of an earlier one
    /// (now and then under another owner, whose key space is its own).
    fn create_once(&self, d: &mut impl Draw) -> Command {
        let earlier: Vec<&Command> = self
            .history
            .iter()
            .map(|(_, _, c)| c)
            .filter(|c| matches!(c, Command::CreateSessionOnce { .. }))
            .collect();
        let b = d.byte();
        if b < 128 && !earlier.is_empty() {
            let mut retry = pick(d, &earlier).clone();
            if let Command::CreateSessionOnce { owner, .. } = &mut retry {
                if b < 16 {
                    *owner = pick_usually(d, &self.owners.0, &self.owners.1);
                }
            }
            return retry;
        }
        Command::CreateSessionOnce {
            ttl_ms: pick_usually(d, &TTLS, &ODD_TTLS),
            client_name: pick_usually(d, &self.client_names.0, &self.client_names.1),
            owner: pick_usually(d, &self.owners.0, &self.owners.1),
            key: pick(d, &CREATION_KEYS),
        }
    }

    /// A holder or a waiter of some lock, if there is any.
    fn member(
        &self,
        d: &mut impl Draw,
        holder: bool,
    ) -> Option<(String, SessionId, u64, RequestId)> {
        let mut all = Vec::new();
        for (name, lock) in self.machine.locks() {
            if holder {
                for h in &lock.holders {
                    all.push((name.to_owned(), h.session, h.token, h.request_id));
                }
            } else {
                for w in &lock.waiters {
                    all.push((name.to_owned(), w.session, 0, w.request_id));
                }
            }
        }
        if all.is_empty() {
            None
        } else {
            Some(pick(d, &all))
        }
    }

    /// The next command.
    pub fn command(&self, d: &mut impl Draw) -> Command {
        let live = self.machine.counts().0;
        let b = d.byte();
        // Keep a few sessions alive: most commands need one.
        let b = if live < 3 && !b.is_multiple_of(4) {
            0
        } else {
            b
        };
        match b {
            0..=17 => {
                let create = Command::CreateSession {
                    ttl_ms: pick_usually(d, &TTLS, &ODD_TTLS),
                    client_name: pick_usually(d, &self.client_names.0, &self.client_names.1),
                    owner: pick_usually(d, &self.owners.0, &self.owners.1),
                };
                // Now and then under a session limit, which may refuse it
                // (never the creation that keeps a few sessions alive).
                if (1..=4).contains(&b) {
                    Command::WithinSessionLimit {
                        max_sessions: u64::from(d.byte() % 8),
                        command: Box::new(create),
                    }
                } else {
                    create
                }
            }
            18..=23 => self.create_once(d),
            24..=31 => Command::CloseSession {
                session: self.session(d),
            },
            32..=39 => {
                let n = d.byte() % 4;
                Command::ExpireSessions {
                    sessions: (0..n).map(|_| self.session(d)).collect(),
                }
            }
            40..=103 => {
                let session = self.session(d);
                self.acquire(d, session)
            }
            104..=115 => {
                let session = self.session(d);
                self.lock_set(d, session)
            }
            116..=131 => self.sequenced(d),
            132..=139 => self.rate_command(d),
            140..=179 => {
                let session = self.session(d);
                let name = self.name(d);
                Command::Release {
                    session,
                    token: self.token(d, session, &name),
                    name,
                }
            }
            180..=199 => {
                let session = self.session(d);
                let name = self.name(d);
                Command::CancelWait {
                    session,
                    request_id: self.request_id(d, session, &name),
                    name,
                }
            }
            210..=214 => match self.member(d, true) {
                // A holder making its hold shared: mostly a real one's.
                Some((name, session, token, _)) => Command::Downgrade(Downgrade {
                    session,
                    name,
                    token: if d.byte() < 220 { token } else { token + 1 },
                }),
                None => Command::Downgrade(Downgrade {
                    session: self.session(d),
                    name: self.name(d),
                    token: 1,
                }),
            },
            200..=209 => {
                let session = self.session(d);
                let name = self.name(d);
                Command::Proclaim {
                    session,
                    token: self.token(d, session, &name),
                    value: self.metadata(d),
                    name,
                }
            }
            215..=224 => Command::ForceRelease { name: self.name(d) },
            225..=229 => {
                // A large expiry: some of the live sessions and some that
                // are not, in either order.
                let mut sessions: Vec<SessionId> = self
                    .machine
                    .sessions()
                    .map(|s| s.id)
                    .filter(|_| d.byte().is_multiple_of(3))
                    .collect();
                let extra = u16_of(d) % 4;
                for _ in 0..extra {
                    sessions.push(self.session(d));
                }
                if d.byte().is_multiple_of(2) {
                    sessions.reverse();
                }
                Command::ExpireSessions { sessions }
            }
            230..=244 => match self.member(d, true) {
                // Exactly right, so that releases succeed and hand over.
                Some((name, session, token, _)) => Command::Release {
                    session,
                    name,
                    token,
                },
                None => Command::ForceRelease { name: self.name(d) },
            },
            245..=247 => match self.member(d, true) {
                // The leader ending a hold cap: mostly a real holder's.
                Some((name, session, token, _)) => Command::EndHold {
                    name,
                    session,
                    token: if d.byte() < 200 { token } else { token + 1 },
                },
                None => Command::EndHold {
                    name: self.name(d),
                    session: self.session(d),
                    token: 1,
                },
            },
            248..=249 => {
                let delayed: Vec<(String, u64)> = self
                    .machine
                    .lock_delays()
                    .map(|(n, _, started)| (n.to_owned(), started))
                    .collect();
                let (name, started) = if delayed.is_empty() || d.byte() < 32 {
                    (self.name(d), 1)
                } else {
                    pick(d, &delayed)
                };
                // The old unnamed end, the current delay's, or a stale one.
                match d.byte() {
                    0..=63 => Command::EndLockDelay { name },
                    64..=191 => Command::EndLockDelayAt { name, started },
                    _ => Command::EndLockDelayAt {
                        name,
                        started: started.saturating_sub(1),
                    },
                }
            }
            250..=251 => Command::Resize {
                name: self.name(d),
                permits: pick_usually(d, &[0, 1, 2, 3, 5], &[u32::MAX]),
            },
            _ => match self.member(d, false) {
                Some((name, session, _, request_id)) => Command::CancelWait {
                    session,
                    name,
                    request_id,
                },
                None => Command::CloseSession {
                    session: self.session(d),
                },
            },
        }
    }
}

/// `command` numbered as a client of this release numbers it: a lock set
/// in `SequencedSet`, anything else in `Sequenced`.
fn numbered(seq: u64, acked_below: u64, command: Command) -> Command {
    if matches!(command, Command::AcquireAll { .. }) {
        Command::SequencedSet {
            seq,
            acked_below,
            in_flight: vec![],
            command: Box::new(command),
        }
    } else {
        Command::Sequenced {
            seq,
            acked_below,
            command: Box::new(command),
        }
    }
}

/// The number, acknowledged mark and command of a numbered command.
fn numbered_parts(c: &Command) -> Option<(u64, u64, &Command)> {
    match c {
        Command::Sequenced {
            seq,
            acked_below,
            command,
        }
        | Command::SequencedSet {
            seq,
            acked_below,
            command,
            ..
        } => Some((*seq, *acked_below, command)),
        _ => None,
    }
}
