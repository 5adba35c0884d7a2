//! The recorded history of a run: one [`Op`] per invocation and one per
//! completion, as in Jepsen. Every checker reads only this, so a history
//! from a fake backend with planted faults is checked exactly like one from
//! a real cluster.

use serde::{Deserialize, Serialize};

/// Whether an op record starts an operation or ends it, and how it ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    /// The client is about to send the request.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// Unknown whether it took effect (timeout, connection lost). The
    /// process that got it is retired: its later ops use a new process id.
    Info,
}

/// What an operation does.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum F {
    /// Acquire the exclusive lock `lock`; `ok` carries the token. With
    /// `value` = `{"try": true}` it is a try-lock: its `fail` with `value` =
    /// `{"busy": [[session, token], ...]}` is a BUSY answer naming those
    /// holders.
    Acquire,
    /// Release `lock` held with `token`.
    Release,
    /// Write `(token, process, seq)` to the harness's fenced register named
    /// `lock`; `ok` = the register accepted it, `fail` = it refused a stale
    /// token.
    Write,
    /// Campaign in election `lock`; `ok` carries the leadership token.
    Campaign,
    /// Publish `value` as the leader of `lock` (with `token`).
    Proclaim,
    /// Resign the leadership of `lock` held with `token`.
    Resign,
    /// Acquire `count` permits (default 1) of semaphore `lock`, stating a
    /// size of `permits` (`value` = `{"permits": n, "count": k}`); `ok`
    /// carries the token.
    SemAcquire,
    /// Release a permit of `lock` held with `token`.
    SemRelease,
    /// The process ends its session (after an unknown outcome, a lost
    /// session, or at the end of the run): from its invocation on, the
    /// process no longer acts on anything the session held, and the
    /// cluster may release it all.
    Close,
    /// After the run and a full-cluster restart: the holders' tokens of
    /// `lock` (`value` = `{"holders": [tokens], "max_token": n}`), and then
    /// a fresh acquire whose token must exceed every token ever granted.
    FinalRead,
    /// A holder of `lock` (with `token`) asked its client library whether
    /// its lease still holds, as code inside a critical section does before
    /// acting: `ok` = the library said valid (`valid_until_ns` its deadline),
    /// so the holder acts up to this moment; `fail` = the library reported
    /// the session lost (`lost()` fired or `is_valid()` turned false).
    Act,
    /// `Validate(lock, token)` by the holder of `token`: `ok` with
    /// `value` = `{"valid": bool}`.
    Validate,
    /// One keep-alive of `session`, sent outside the client library (by a
    /// holder that stopped renewing): `ok` = the server said the session
    /// lives, `fail` = it said it is gone.
    KeepAlive,
    /// The client library reported `session` ended, noticed by its process
    /// at this time: `value` = `{"by_server": bool}` (the server said the
    /// session is gone, rather than the library's own deadline passing),
    /// `valid_until_ns` = the library's deadline then.
    Lost,
    /// Set semaphore `lock`'s size: `value` = `{"permits": n}`.
    Resize,
    /// Take one token of rate limit `lock` (`value` = its `rate`, `per_ms`,
    /// `burst`, and `lease_ms` of the workload's token leases); the `ok`
    /// says `{"admitted": bool}`.
    Take,
    /// Reserve a block of `{"n": k}` tokens of rate limit `lock` to spend
    /// locally; the `ok` says `{"admitted": bool}`.
    Reserve,
    /// Spend one token of a reserved block, at this moment (invoke and ok
    /// at once): what the client acted on.
    Spend,
    /// Acquire every lock of `value` = `{"locks": [names]}` together
    /// (AcquireAll); `lock` is the names joined by commas. The `ok` adds
    /// `"tokens"`, one per lock in the same order, and `token` is the
    /// first; each lock is then released on its own (`release`).
    AcquireAll,
    /// `Describe(lock)`, a linearizable read: the `ok` has `value` =
    /// `{"holders": [[session, token], ...]}`.
    Describe,
}

/// One record of the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history (0, 1, 2, ... in record order).
    pub index: usize,
    /// Monotonic nanoseconds since the run started (one clock for the
    /// whole harness, so times of different processes compare).
    pub time_ns: u64,
    /// The logical client process. A process performs one op at a time.
    pub process: u64,
    /// Invoke / ok / fail / info.
    #[serde(rename = "type")]
    pub kind: Type,
    /// What the op does.
    pub f: F,
    /// Lock, election, semaphore or register name.
    pub lock: String,
    /// The raftlock session the op runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// Fencing token: granted (ok of acquire/campaign/sem_acquire) or used
    /// (release, write, proclaim, resign, sem_release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// On a release/resign/sem_release/write invoke: until when the
    /// client's session was valid by its local lease rule, in the same
    /// clock as `time_ns`. A hold is trusted only up to the earlier of this
    /// and the release's invocation; a deadline in the past means the
    /// holder had already lost the lock when it acted (a paused process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until_ns: Option<u64>,
    /// Op-specific data: write `{"seq": n}`, proclaim value, semaphore
    /// `{"permits": n}`, final-read results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Why a `fail`/`info` ended that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A nemesis window: when a fault was active, for plots and the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// What was done, e.g. `kill leader n2` or `partition majority-ring`.
    pub name: String,
    /// Start, monotonic ns since the run started.
    pub start_ns: u64,
    /// End (healed), monotonic ns since the run started.
    pub end_ns: u64,
    /// A majority of the nodes was down on purpose (every node killed, a
    /// majority's logs damaged): the cluster may not serve, and the
    /// availability checker does not count this window.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub majority_down: bool,
    /// What nodes did with faults the rules say how to meet (a damaged log
    /// refused, a full disk left), as the nemesis saw it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<Observation>,
    /// The rate of the clock the clock nemesis gave a node in this window
    /// (1.08: eight percent fast). Checkers of clock-timed promises (rate
    /// limits) widen their bound by how fast it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_rate: Option<f64>,
}

/// One node's answer to a fault, seen by the nemesis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The node.
    pub node: u64,
    /// Whether it did what the rules (DESIGN.md, 7 and 8) say.
    pub as_required: bool,
    /// What it did, for a person.
    pub what: String,
}
