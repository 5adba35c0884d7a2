//! Workloads: concurrent client processes doing lock operations, each one
//! recorded as an invocation and a completion. A process whose operation
//! ends with an unknown outcome is retired, as in Jepsen: its successor gets
//! a new process id and a new session.

mod frozen;
mod rate;
mod recorder;

use crate::backend::{Backend, OpError, Session, TryLock};
use crate::history::{Type, F};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
pub use rate::TOKEN_LEASE;
pub use recorder::{monotonic_ns, OpSpec, Recorder, PROCESS_SPAN};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Which workload to run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Acquire, hold a short random time, release, over a few lock names.
    Mutex,
    /// Holders write to a fenced register; some holders freeze past their
    /// TTL while holding and write afterwards.
    Fenced,
    /// Campaign, proclaim, resign.
    Election,
    /// A counting semaphore.
    Semaphore,
    /// Takes of a rate limit (one token at a time, some waiting), and
    /// blocks of tokens reserved and spent locally.
    #[value(name = "ratelimit")]
    #[serde(rename = "ratelimit")]
    RateLimit,
    /// Sets of two or three of four locks acquired together (AcquireAll),
    /// held a short random time, released one by one.
    #[value(name = "multilock")]
    #[serde(rename = "multilock")]
    MultiLock,
}

impl Kind {
    /// Every workload.
    pub const ALL: [Kind; 6] = [
        Kind::Mutex,
        Kind::Fenced,
        Kind::Election,
        Kind::Semaphore,
        Kind::RateLimit,
        Kind::MultiLock,
    ];

    /// The names this workload uses.
    pub fn names(self) -> Vec<String> {
        match self {
            Kind::Mutex => (0..3).map(|i| format!("mutex/{i}")).collect(),
            Kind::Fenced => (0..2).map(|i| format!("fenced/{i}")).collect(),
            Kind::Election => (0..2).map(|i| format!("election/{i}")).collect(),
            Kind::Semaphore => vec!["semaphore/0".into()],
            Kind::RateLimit => vec!["ratelimit/0".into()],
            Kind::MultiLock => (0..4).map(|i| format!("multi/{i}")).collect(),
        }
    }
}

/// Permits of the semaphore workload.
pub const PERMITS: u32 = 3;
/// Session TTL of the workers.
pub const TTL: Duration = Duration::from_secs(3);
/// Session TTL of every other worker: long enough to outlive a failover,
/// so sessions that lived under one leader meet the next (a leader that
/// kept an old term's deadlines would expire them early).
pub const LONG_TTL: Duration = Duration::from_secs(10);
/// TTL of a frozen holder in the fenced workload (it freezes longer).
const FROZEN_TTL: Duration = Duration::from_secs(2);

/// A bug planted in the harness's own client code, to show the client
/// checks catch a holder that acts on a lease it no longer has
/// (`RAFTLOCK_JEPSEN_PLANT_CLIENT`; never set in a normal run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientBug {
    /// `ignore-lease`: holders never ask the library whether the lease
    /// holds, and act as if it always did.
    IgnoreLease,
}

/// The client bug planted in this process, if any.
pub fn client_plant() -> Option<ClientBug> {
    static PLANT: std::sync::OnceLock<Option<ClientBug>> = std::sync::OnceLock::new();
    *PLANT.get_or_init(
        || match std::env::var("RAFTLOCK_JEPSEN_PLANT_CLIENT").as_deref() {
            Ok("ignore-lease") => Some(ClientBug::IgnoreLease),
            _ => None,
        },
    )
}

/// The fenced registers kept by the harness: a write is accepted only with
/// a token at least as high as the highest accepted so far.
#[derive(Default)]
pub struct Registers {
    highest: Mutex<HashMap<String, u64>>,
}

impl Registers {
    /// Accepts or refuses a write with `token`.
    pub fn write(&self, name: &str, token: u64) -> Result<(), String> {
        let mut h = self.highest.lock();
        let highest = h.entry(name.to_owned()).or_default();
        if token < *highest {
            return Err(format!("stale token {token} < {highest}"));
        }
        *highest = token;
        Ok(())
    }
}

/// Runs one timed op: records invoke, awaits, records the completion.
/// Returns the result and whether the process must retire.
async fn timed<T, Fut>(
    rec: &Recorder,
    mut spec: OpSpec,
    fut: Fut,
    on_ok: impl FnOnce(&T, &mut OpSpec) -> Type,
) -> (Option<T>, bool)
where
    Fut: std::future::Future<Output = Result<T, OpError>>,
{
    rec.record(Type::Invoke, &spec, None);
    match fut.await {
        Ok(v) => {
            let kind = on_ok(&v, &mut spec);
            rec.record(kind, &spec, None);
            // An indeterminate op may still take effect: as in Jepsen, its
            // process does nothing more.
            (Some(v), kind == Type::Info)
        }
        Err(OpError::Fail(e)) => {
            rec.record(Type::Fail, &spec, Some(e));
            (None, false)
        }
        Err(OpError::Unknown(e)) => {
            rec.record(Type::Info, &spec, Some(e));
            (None, true)
        }
    }
}

/// How an acquisition completed: ok with its token, or indeterminate when
/// its wait timed out: a grant may have raced the timeout, so the history
/// must not call it a definite failure.
fn granted(token: &Option<u64>, spec: &mut OpSpec) -> Type {
    spec.token = *token;
    if token.is_some() {
        Type::Ok
    } else {
        Type::Info
    }
}

struct Worker {
    backend: Arc<dyn Backend>,
    rec: Arc<Recorder>,
    registers: Arc<Registers>,
    kind: Kind,
    rng: StdRng,
    process: u64,
    session: Option<Box<dyn Session>>,
    seq: u64,
    /// Its sessions' TTL.
    ttl: Duration,
    /// The share of grants held long (past the TTL, checking the lease as
    /// they go) rather than for a few milliseconds.
    long_holds: f64,
}

impl Worker {
    async fn retire(&mut self) {
        if let Some(s) = self.session.take() {
            // Closing ends whatever the lost operation may have taken.
            self.close(s).await;
        }
        self.process = self.rec.process();
    }

    /// Closes `s`, recorded: the checkers end the process's holds there.
    async fn close(&self, s: Box<dyn Session>) {
        let spec = OpSpec {
            process: self.process,
            f: F::Close,
            lock: String::new(),
            session: Some(s.id()),
            token: None,
            valid_until: None,
            value: None,
        };
        self.rec.record(Type::Invoke, &spec, None);
        s.close().await;
        self.rec.record(Type::Ok, &spec, None);
    }

    async fn session(&mut self) -> Option<&dyn Session> {
        if self
            .session
            .as_ref()
            .is_some_and(|s| s.valid_until().is_none())
        {
            if let Some(s) = self.session.take() {
                self.lost(s.as_ref());
                self.close(s).await;
            }
            // A process that lost its session starts over as a new one.
            self.process = self.rec.process();
        }
        if self.session.is_none() {
            match self.backend.session(self.ttl).await {
                Ok(s) => self.session = Some(s),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return None;
                }
            }
        }
        self.session.as_deref()
    }

    fn spec(&self, f: F, lock: &str, session: u64) -> OpSpec {
        OpSpec {
            process: self.process,
            f,
            lock: lock.to_owned(),
            session: Some(session),
            token: None,
            valid_until: None,
            value: None,
        }
    }

    async fn step(&mut self) {
        let names = self.kind.names();
        let name = names[self.rng.gen_range(0..names.len())].clone();
        let hold = Duration::from_millis(self.rng.gen_range(10..120));
        // Long enough that keep-alives, not luck, carry the lease through
        // the faults of the round.
        let long_hold = self.rng.gen_bool(self.long_holds).then(|| {
            Duration::from_millis(
                self.rng
                    .gen_range(TTL.as_millis() as u64 / 2..TTL.as_millis() as u64 * 3),
            )
        });
        if self.kind == Kind::Fenced && self.rng.gen_bool(0.12) {
            self.frozen_holder(&name).await;
            return;
        }
        if self.kind == Kind::RateLimit {
            self.rate_step(&name).await;
            return;
        }
        if self.kind == Kind::MultiLock {
            self.multi_step(names, hold).await;
            return;
        }
        if self.kind == Kind::Semaphore && self.rng.gen_bool(0.05) {
            self.resize(&name).await;
            return;
        }
        // Semaphore holds take one or two permits: a hold of two is granted
        // only when two are free, in FIFO order with the others.
        let count = if self.kind == Kind::Semaphore && self.rng.gen_bool(0.3) {
            2
        } else {
            1
        };
        let (permits, acquire_f, release_f) = match self.kind {
            Kind::Semaphore => (Some(PERMITS), F::SemAcquire, F::SemRelease),
            Kind::Election => (None, F::Campaign, F::Resign),
            _ => (None, F::Acquire, F::Release),
        };
        let rec = self.rec.clone();
        if self.session().await.is_none() {
            return;
        }
        let process = self.process;
        let Some(s) = self.session.as_deref() else {
            return;
        };
        let sid = s.id();
        let mut spec = self.spec(acquire_f, &name, sid);
        if let Some(p) = permits {
            spec.value = Some(json!({ "permits": p, "count": count }));
        }
        // Longer than most holds, long ones included: a wait that times out
        // retires its process (the grant may have raced the timeout), and
        // sessions that live across leader changes are what leases are for.
        let wait = TTL * 3;
        let value = format!("p{process}");
        // Locks and semaphores are also read (Describe) and validated, and
        // exclusive locks tried once, so that every kind of answer is
        // judged.
        let answers = matches!(self.kind, Kind::Mutex | Kind::Fenced | Kind::Semaphore);
        if answers && self.rng.gen_bool(0.1) {
            self.describe(s, &name).await;
            return;
        }
        let try_once = matches!(self.kind, Kind::Mutex | Kind::Fenced) && self.rng.gen_bool(0.3);
        let (res, retire) = if try_once {
            spec.value = Some(json!({ "try": true }));
            let (res, retire) = timed(&rec, spec.clone(), s.try_acquire(&name), tried).await;
            let res = res.map(|r| match r {
                TryLock::Granted(t) => Some(t),
                TryLock::Busy(_) => None,
            });
            (res, retire)
        } else {
            let fut = async {
                match self.kind {
                    Kind::Election => s.campaign(&name, &value, wait).await,
                    _ => s.acquire(&name, permits, count, wait).await,
                }
            };
            timed(&rec, spec.clone(), fut, granted).await
        };
        if retire {
            self.retire().await;
            return;
        }
        let Some(Some(token)) = res else {
            // Refused: a moment before the next try, so that a refusal that
            // repeats (a backend that lost the session) is not a busy loop.
            tokio::time::sleep(Duration::from_millis(10)).await;
            return;
        };
        let mut retire = false;
        match self.kind {
            Kind::Election => {
                let mut p = self.spec(F::Proclaim, &name, sid);
                p.token = Some(token);
                p.valid_until = Some(s.lease_deadline());
                p.value = Some(json!(format!("{value}-1")));
                let v2 = format!("{value}-1");
                retire |= timed(&rec, p, s.proclaim(&name, token, &v2), |_, _| Type::Ok)
                    .await
                    .1;
            }
            Kind::Fenced => {
                tokio::time::sleep(hold / 2).await;
                self.seq += 1;
                let mut w = self.spec(F::Write, &name, sid);
                w.token = Some(token);
                w.valid_until = Some(s.lease_deadline());
                w.value = Some(json!({ "seq": self.seq }));
                let regs = self.registers.clone();
                let n2 = name.clone();
                timed(
                    &rec,
                    w,
                    async move { regs.write(&n2, token).map_err(OpError::Fail) },
                    |_, _| Type::Ok,
                )
                .await;
            }
            _ => {}
        }
        if !retire {
            match long_hold {
                Some(d) => self.hold_long(s, &name, token, d).await,
                None => tokio::time::sleep(hold).await,
            }
            if answers && self.rng.gen_bool(0.3) {
                self.validate(&name, sid, token, Some(s.lease_deadline()))
                    .await;
            }
            let mut r = self.spec(release_f, &name, sid);
            r.token = Some(token);
            r.valid_until = Some(s.lease_deadline());
            let fut = async {
                match self.kind {
                    Kind::Election => s.resign(&name, token).await,
                    _ => s.release(&name, token).await,
                }
            };
            let (released, lost) = timed(&rec, r, fut, |_, _| Type::Ok).await;
            retire = lost;
            // Released: the token must no longer validate.
            if released.is_some() && answers && self.rng.gen_bool(0.5) {
                self.validate(&name, sid, token, None).await;
            }
        }
        if retire {
            self.retire().await;
        }
    }

    /// Acquires two or three of `names` together, holds them for `hold`
    /// and releases them one by one, each with its own token.
    async fn multi_step(&mut self, mut names: Vec<String>, hold: Duration) {
        use rand::seq::SliceRandom;
        names.shuffle(&mut self.rng);
        names.truncate(self.rng.gen_range(2..=3));
        let rec = self.rec.clone();
        if self.session().await.is_none() {
            return;
        }
        let Some(s) = self.session.as_deref() else {
            return;
        };
        let sid = s.id();
        let mut spec = self.spec(F::AcquireAll, &names.join(","), sid);
        spec.value = Some(json!({ "locks": names }));
        let set_granted = |tokens: &Option<Vec<u64>>, spec: &mut OpSpec| match tokens {
            Some(t) => {
                spec.token = t.first().copied();
                spec.value = Some(json!({ "locks": names, "tokens": t }));
                Type::Ok
            }
            None => Type::Info,
        };
        let (res, retire) = timed(&rec, spec, s.acquire_all(&names, TTL * 3), set_granted).await;
        if retire {
            self.retire().await;
            return;
        }
        let Some(Some(tokens)) = res else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            return;
        };
        tokio::time::sleep(hold).await;
        let mut retire = false;
        for (name, token) in names.iter().zip(tokens) {
            let mut r = self.spec(F::Release, name, sid);
            r.token = Some(token);
            r.valid_until = Some(s.lease_deadline());
            retire |= timed(&rec, r, s.release(name, token), |_, _| Type::Ok)
                .await
                .1;
            if retire {
                break;
            }
        }
        if retire {
            self.retire().await;
        }
    }

    /// Records that the library reported `s` ended, and whether the server
    /// ended it: a server that says "gone" before the client's deadline
    /// broke the lease promise, whatever the session held.
    fn lost(&self, s: &dyn Session) {
        let spec = OpSpec {
            process: self.process,
            f: F::Lost,
            lock: String::new(),
            session: Some(s.id()),
            token: None,
            valid_until: Some(s.lease_deadline()),
            value: Some(json!({ "by_server": s.ended_by_server() })),
        };
        self.rec.record(Type::Invoke, &spec, None);
        self.rec.record(Type::Ok, &spec, None);
    }

    /// Holds the grant `token` of `name` for `d` as code in a critical
    /// section should: asks the client library every 100 ms whether the
    /// lease still holds before acting (an `act` op, dated before the
    /// question, so a pause between question and record can only shorten
    /// the recorded hold), calls `Validate` now and then, and stops at once
    /// when the library reports the session lost.
    async fn hold_long(&self, s: &dyn Session, name: &str, token: u64, d: Duration) {
        let end = Instant::now() + d;
        let mut round = 0u32;
        let ignore_lease = client_plant() == Some(ClientBug::IgnoreLease);
        let mut lost = std::pin::pin!(async {
            if ignore_lease {
                std::future::pending::<()>().await
            }
            s.lost().await
        });
        while Instant::now() < end {
            tokio::select! {
                _ = &mut lost => {
                    self.lost(s);
                    let mut a = self.spec(F::Act, name, s.id());
                    a.token = Some(token);
                    a.valid_until = Some(s.lease_deadline());
                    self.rec.record(Type::Invoke, &a, None);
                    self.rec.record(Type::Fail, &a, Some("lost() fired".into()));
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            let asked = Instant::now();
            let valid = match s.valid_until() {
                None if ignore_lease => Some(s.lease_deadline()),
                v => v,
            };
            let mut a = self.spec(F::Act, name, s.id());
            a.token = Some(token);
            a.valid_until = Some(valid.unwrap_or_else(|| s.lease_deadline()));
            self.rec.record_at(Type::Invoke, &a, None, asked);
            if valid.is_none() {
                self.rec
                    .record_at(Type::Fail, &a, Some("is_valid() is false".into()), asked);
                return;
            }
            self.rec.record_at(Type::Ok, &a, None, asked);
            round += 1;
            if round.is_multiple_of(5) {
                self.validate(name, s.id(), token, Some(s.lease_deadline()))
                    .await;
            }
        }
    }

    /// Records `Validate(name, token)` by the holder in `session`, whose
    /// lease is promised until `lease_until` (`None`: it released the
    /// token, which must no longer validate).
    async fn validate(&self, name: &str, session: u64, token: u64, lease_until: Option<Instant>) {
        let mut v = self.spec(F::Validate, name, session);
        v.token = Some(token);
        v.valid_until = lease_until;
        self.rec.record(Type::Invoke, &v, None);
        match self.backend.validate(name, token).await {
            Ok(valid) => {
                v.value = Some(json!({ "valid": valid }));
                self.rec.record(Type::Ok, &v, None);
            }
            // A read changes nothing: its process goes on.
            Err(OpError::Fail(e)) => self.rec.record(Type::Fail, &v, Some(e)),
            Err(OpError::Unknown(e)) => self.rec.record(Type::Info, &v, Some(e)),
        }
    }

    /// Records `Describe(name)`: the holders at one moment.
    async fn describe(&self, s: &dyn Session, name: &str) {
        let mut d = self.spec(F::Describe, name, s.id());
        self.rec.record(Type::Invoke, &d, None);
        match self.backend.holders(name).await {
            Ok(holders) => {
                d.value = Some(json!({ "holders": holders }));
                self.rec.record(Type::Ok, &d, None);
            }
            Err(OpError::Fail(e)) => self.rec.record(Type::Fail, &d, Some(e)),
            Err(OpError::Unknown(e)) => self.rec.record(Type::Info, &d, Some(e)),
        }
    }
}

/// How a try-lock completed: ok with its token, or fail with the holders
/// its BUSY answer named.
fn tried(answer: &TryLock, spec: &mut OpSpec) -> Type {
    match answer {
        TryLock::Granted(t) => {
            spec.token = Some(*t);
            Type::Ok
        }
        TryLock::Busy(holders) => {
            spec.value = Some(json!({ "try": true, "busy": holders }));
            Type::Fail
        }
    }
}

/// Runs `concurrency` workers of `kind` until `stop` turns true, then
/// closes their sessions.
pub async fn run(
    backend: Arc<dyn Backend>,
    rec: Arc<Recorder>,
    kind: Kind,
    concurrency: usize,
    seed: u64,
    long_holds: f64,
    stop: watch::Receiver<bool>,
) {
    let registers = Arc::new(Registers::default());
    let mut tasks = Vec::new();
    for i in 0..concurrency {
        let mut w = Worker {
            backend: backend.clone(),
            rec: rec.clone(),
            registers: registers.clone(),
            kind,
            rng: StdRng::seed_from_u64(seed.wrapping_add(i as u64)),
            process: rec.process(),
            session: None,
            seq: 0,
            ttl: if (seed.wrapping_add(i as u64)).is_multiple_of(2) {
                TTL
            } else {
                LONG_TTL
            },
            long_holds,
        };
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            while !*stop.borrow() {
                w.step().await;
            }
            if let Some(s) = w.session.take() {
                w.close(s).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// After the run (and, on a real cluster, a full restart): every name's
/// holders, then a fresh grant whose token must be above all earlier ones.
pub async fn final_reads(backend: &dyn Backend, rec: &Recorder, kind: Kind) {
    // A rate limit holds no locks to read back.
    if kind == Kind::RateLimit {
        return;
    }
    let process = rec.process();
    for name in kind.names() {
        let spec = OpSpec {
            process,
            f: F::FinalRead,
            lock: name.clone(),
            session: None,
            token: None,
            valid_until: None,
            value: None,
        };
        rec.record(Type::Invoke, &spec, None);
        let holders: Vec<u64> = match backend.holders(&name).await {
            Ok(h) => h.into_iter().map(|(_, token)| token).collect(),
            Err(OpError::Fail(e)) | Err(OpError::Unknown(e)) => {
                rec.record(Type::Info, &spec, Some(e));
                continue;
            }
        };
        let permits = (kind == Kind::Semaphore).then_some(PERMITS);
        // Sessions of the run may hold until their TTL runs out on the
        // restarted leader; wait that long.
        const _: () = assert!(LONG_TTL.as_secs() < TTL.as_secs() * 4);
        let fresh = match backend.session(TTL).await {
            Ok(s) => {
                let r = s.acquire(&name, permits, 1, TTL * 4).await;
                s.close().await;
                r
            }
            Err(e) => Err(e),
        };
        let mut done = spec.clone();
        match fresh {
            Ok(Some(t)) => {
                done.value = Some(json!({
                    "holders": holders,
                    "max_token": holders.iter().copied().chain([t]).max(),
                    "fresh_token": t,
                }));
                rec.record(Type::Ok, &done, None);
            }
            Ok(None) => rec.record(Type::Info, &done, Some("fresh acquire timed out".into())),
            Err(OpError::Fail(e)) | Err(OpError::Unknown(e)) => {
                rec.record(Type::Info, &done, Some(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait that timed out may have been granted at the last moment:
    /// recording it as a failure would let a checker assume the lock stayed
    /// free, so it is indeterminate, and its process stops, as in Jepsen.
    #[tokio::test]
    async fn a_timed_out_acquire_is_indeterminate_and_retires_its_process() {
        let mut spec = OpSpec {
            process: 1,
            f: F::Acquire,
            lock: "a".into(),
            session: Some(7),
            token: None,
            valid_until: None,
            value: None,
        };
        assert_eq!(granted(&None, &mut spec), Type::Info);
        assert_eq!(granted(&Some(5), &mut spec), Type::Ok);
        let rec = Recorder::new();
        let fut = async { Ok::<_, OpError>(None::<u64>) };
        let (_, retire) = timed(&rec, spec.clone(), fut, granted).await;
        assert!(retire, "a process with an op in doubt must not go on");
        let h = rec.history();
        assert_eq!(h.last().map(|o| o.kind), Some(Type::Info));
        // The client library's own timeout, too.
        let fut = async {
            Err::<Option<u64>, _>(crate::backend::classify_for_tests(
                raftlock_client::Error::WaitTimedOut("a".into()),
            ))
        };
        let (_, retire) = timed(&rec, spec, fut, granted).await;
        assert!(retire);
        assert_eq!(rec.history().last().map(|o| o.kind), Some(Type::Info));
    }

    /// An acquire answered "session gone" may have been granted by an
    /// earlier attempt before the session expired (a BUSY of another
    /// process once named that grant, and the checker, told the acquire
    /// surely failed, called the grant invented): indeterminate.
    #[tokio::test]
    async fn an_acquire_whose_session_is_gone_is_indeterminate() {
        let spec = OpSpec {
            process: 1,
            f: F::Acquire,
            lock: "a".into(),
            session: Some(7),
            token: None,
            valid_until: None,
            value: None,
        };
        let rec = Recorder::new();
        let fut = async {
            Err::<Option<u64>, _>(crate::backend::classify_for_tests(
                raftlock_client::Error::SessionGone(7),
            ))
        };
        let (_, retire) = timed(&rec, spec, fut, granted).await;
        assert!(retire);
        assert_eq!(rec.history().last().map(|o| o.kind), Some(Type::Info));
    }
}
