//! The history recorder: every op on one monotonic clock, numbered in
//! record order, kept in memory or (in a client process) written out as
//! JSON lines for the harness to read.

use crate::history::{Op, Type, F};
use parking_lot::Mutex;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records the history on one monotonic clock: `CLOCK_MONOTONIC`, counted
/// from the run's start, so ops recorded by the harness's client processes
/// (see [`Recorder::child`]) fall on the same time line as its own.
pub struct Recorder {
    start: Instant,
    base_ns: u64,
    ops: Mutex<Vec<Op>>,
    next_process: AtomicU64,
    /// In a client process: each op is written here as a JSON line for the
    /// harness to read, not kept.
    sink: Option<Mutex<Box<dyn std::io::Write + Send>>>,
}

/// `CLOCK_MONOTONIC` now, in ns: the clock `Instant` reads on Linux, and the
/// same for every process of the machine.
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// How many processes one client process may number: process ids of client
/// process `k` start at `(k + 1) * PROCESS_SPAN`.
pub const PROCESS_SPAN: u64 = 1_000_000;

/// The fields of an op besides its type, time and index.
#[derive(Clone)]
pub struct OpSpec {
    /// Process.
    pub process: u64,
    /// Function.
    pub f: F,
    /// Name.
    pub lock: String,
    /// Session.
    pub session: Option<u64>,
    /// Token.
    pub token: Option<u64>,
    /// Validity deadline, if meaningful.
    pub valid_until: Option<Instant>,
    /// Extra data.
    pub value: Option<serde_json::Value>,
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Arc<Recorder> {
        let start = Instant::now();
        Arc::new(Recorder {
            start,
            base_ns: monotonic_ns(),
            ops: Mutex::new(Vec::new()),
            next_process: AtomicU64::new(0),
            sink: None,
        })
    }

    /// In a client process started by the harness: the harness's clock
    /// (its start at `base_ns` on `CLOCK_MONOTONIC`), process ids from
    /// `first_process`, and every op written to `sink` as a JSON line.
    pub fn child(
        base_ns: u64,
        first_process: u64,
        sink: Box<dyn std::io::Write + Send>,
    ) -> Arc<Recorder> {
        let now = Instant::now();
        let since = Duration::from_nanos(monotonic_ns().saturating_sub(base_ns));
        Arc::new(Recorder {
            start: now.checked_sub(since).unwrap_or(now),
            base_ns,
            ops: Mutex::new(Vec::new()),
            next_process: AtomicU64::new(first_process),
            sink: Some(Mutex::new(sink)),
        })
    }

    /// The run's start on `CLOCK_MONOTONIC`, for [`Recorder::child`].
    pub fn base_ns(&self) -> u64 {
        self.base_ns
    }

    /// Takes in an op a client process recorded (its time already on this
    /// clock).
    pub fn insert(&self, mut op: Op) {
        let mut ops = self.ops.lock();
        op.index = ops.len();
        ops.push(op);
    }

    /// Nanoseconds since the start, for `t`.
    pub fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_nanos() as u64
    }

    /// Now, in the history's clock.
    pub fn now_ns(&self) -> u64 {
        self.ns(Instant::now())
    }

    /// A fresh process id.
    pub fn process(&self) -> u64 {
        self.next_process.fetch_add(1, Ordering::SeqCst)
    }

    /// Records one op of `kind`, now.
    pub fn record(&self, kind: Type, spec: &OpSpec, error: Option<String>) {
        self.record_at(kind, spec, error, Instant::now());
    }

    /// Records one op of `kind` that happened at `at`.
    pub fn record_at(&self, kind: Type, spec: &OpSpec, error: Option<String>, at: Instant) {
        let mut ops = self.ops.lock();
        let op = Op {
            index: ops.len(),
            time_ns: self.ns(at),
            process: spec.process,
            kind,
            f: spec.f,
            lock: spec.lock.clone(),
            session: spec.session,
            token: spec.token,
            valid_until_ns: spec.valid_until.map(|t| self.ns(t)),
            value: spec.value.clone(),
            error,
        };
        if let Some(sink) = &self.sink {
            drop(ops);
            let mut w = sink.lock();
            // The harness reads whole lines; a write error means it is gone.
            if let Ok(line) = serde_json::to_string(&op) {
                let _ = writeln!(w, "{line}").and_then(|_| w.flush());
            }
            return;
        }
        ops.push(op);
    }

    /// The history so far, in time order (ops of client processes arrive
    /// late); each process's ops keep their order.
    pub fn history(&self) -> Vec<Op> {
        let mut h = self.ops.lock().clone();
        h.sort_by_key(|o| o.time_ns);
        for (i, o) in h.iter_mut().enumerate() {
            o.index = i;
        }
        h
    }
}
