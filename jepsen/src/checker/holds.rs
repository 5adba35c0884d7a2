//! Holds: who held what, from which acquire until when, as the history
//! shows it (see the parent module's doc for how a hold ends).

use super::multilock::set_grants;
use crate::history::{Op, Type, F};
use std::collections::{BTreeMap, HashMap};

/// An invocation and its completion (`None`: never completed, as good as
/// `info`).
#[derive(Clone, Copy)]
pub(crate) struct Pair<'a> {
    pub(crate) invoke: &'a Op,
    pub(crate) done: Option<&'a Op>,
}

impl Pair<'_> {
    pub(crate) fn kind(&self) -> Type {
        self.done.map(|d| d.kind).unwrap_or(Type::Info)
    }
}

/// Pairs every invocation with its process's next completion.
pub(crate) fn pairs(history: &[Op]) -> Vec<Pair<'_>> {
    let mut open: HashMap<u64, usize> = HashMap::new();
    let mut out: Vec<Pair> = Vec::new();
    for op in history {
        if op.kind == Type::Invoke {
            open.insert(op.process, out.len());
            out.push(Pair {
                invoke: op,
                done: None,
            });
        } else if let Some(i) = open.remove(&op.process) {
            out[i].done = Some(op);
        }
    }
    out
}

/// One acknowledged grant and how long its holder could act on it.
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    pub(crate) f: F,
    pub(crate) lock: String,
    pub(crate) token: u64,
    pub(crate) session: Option<u64>,
    pub(crate) permits: Option<u64>,
    /// Permits it takes (semaphores; 1 otherwise).
    pub(crate) count: u64,
    /// The acquire's invoke and ok.
    pub(crate) acquire: (Op, Op),
    /// When the acquire completed.
    pub(crate) start: u64,
    /// Until when the holder acted on it (see the module doc).
    pub(crate) end: u64,
    /// The lease deadline its last op recorded, if any.
    pub(crate) lease_deadline: Option<u64>,
    /// The op that ended it (release invoke), if any.
    pub(crate) ended_by: Option<Op>,
    /// How that release completed.
    pub(crate) release: Option<Type>,
    /// When that release completed.
    pub(crate) release_done: Option<u64>,
    /// When its process closed the session, if it did before releasing.
    pub(crate) closed_at: Option<u64>,
    /// The last moment its client library told it the lease held (`act`
    /// ok), if it asked.
    pub(crate) last_act: Option<u64>,
}

impl Hold {
    /// Whether the holder could act on the grant at all: a client paused
    /// while its acquire was answered learns of the grant only after its
    /// lease ran out, and (if its library is right) never acts on it. If the
    /// library said "valid" all the same, the `act` makes the hold count.
    pub(crate) fn held(&self) -> bool {
        self.end > self.start
    }
}

/// Every acknowledged grant of every kind.
pub(crate) struct Holds(pub(crate) Vec<Hold>);

pub(crate) fn releases(f: F) -> Option<F> {
    match f {
        F::Acquire | F::AcquireAll => Some(F::Release),
        F::Campaign => Some(F::Resign),
        F::SemAcquire => Some(F::SemRelease),
        _ => None,
    }
}

impl From<&[Op]> for Holds {
    fn from(history: &[Op]) -> Self {
        let end_of_history = history.last().map(|o| o.time_ns).unwrap_or(0);
        let ps = pairs(history);
        // Ops of each process in order, to find what follows a grant.
        let mut by_process: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, p) in ps.iter().enumerate() {
            by_process.entry(p.invoke.process).or_default().push(i);
        }
        let mut holds = Vec::new();
        for idxs in by_process.values() {
            for (k, &i) in idxs.iter().enumerate() {
                let p = ps[i];
                let Some(release_f) = releases(p.invoke.f) else {
                    continue;
                };
                let Some(done) = p.done.filter(|d| d.kind == Type::Ok) else {
                    continue;
                };
                // A set's grants are holds of each of its locks, each
                // released on its own.
                let set = set_grants(done);
                let grants: Vec<(&str, u64, F)> = if p.invoke.f == F::AcquireAll {
                    set.iter().map(|&(l, t)| (l, t, F::Acquire)).collect()
                } else {
                    match done.token {
                        Some(t) => vec![(p.invoke.lock.as_str(), t, p.invoke.f)],
                        None => continue,
                    }
                };
                for (lock, token, f) in grants {
                    let mut hold = Hold {
                        f,
                        lock: lock.to_owned(),
                        token,
                        session: p.invoke.session,
                        permits: p
                            .invoke
                            .value
                            .as_ref()
                            .and_then(|v| v.get("permits"))
                            .and_then(|v| v.as_u64()),
                        count: p
                            .invoke
                            .value
                            .as_ref()
                            .and_then(|v| v.get("count"))
                            .and_then(|v| v.as_u64())
                            .unwrap_or(1),
                        acquire: (p.invoke.clone(), done.clone()),
                        start: done.time_ns,
                        end: end_of_history,
                        lease_deadline: None,
                        ended_by: None,
                        release: None,
                        release_done: None,
                        closed_at: None,
                        last_act: None,
                    };
                    // Later ops of the same process on this grant: writes and
                    // proclaims carry lease deadlines; the release ends it.
                    for &j in &idxs[k + 1..] {
                        let q = ps[j];
                        if q.invoke.f == F::Close {
                            // The process gave the session up: it stopped
                            // acting, and the cluster may release from here.
                            hold.end = q.invoke.time_ns;
                            hold.ended_by = Some(q.invoke.clone());
                            hold.closed_at = Some(q.invoke.time_ns);
                            break;
                        }
                        if q.invoke.f == F::Lost {
                            // The library gave the whole session up: its last
                            // deadline bounds this hold too.
                            if let Some(v) = q.invoke.valid_until_ns {
                                hold.lease_deadline = Some(v);
                            }
                            continue;
                        }
                        let other_of_set = q.invoke.f == F::Release
                            && q.invoke.lock != hold.lock
                            && set.iter().any(|(l, _)| *l == q.invoke.lock);
                        if other_of_set {
                            // The same session's release of another lock of
                            // the set: the deadline it carries is the
                            // session's lease, and bounds this hold too (a
                            // holder paused between two releases of its set
                            // held the rest only until then).
                            if let Some(v) = q.invoke.valid_until_ns {
                                hold.lease_deadline = Some(v);
                            }
                            continue;
                        }
                        if q.invoke.lock != hold.lock || q.invoke.token != Some(token) {
                            break;
                        }
                        if let Some(v) = q.invoke.valid_until_ns {
                            // The latest op knows the latest deadline: keep-alives
                            // moved it forward since the earlier ones.
                            hold.lease_deadline = Some(v);
                        }
                        if q.invoke.f == F::Act && q.kind() == Type::Ok {
                            hold.last_act = Some(q.invoke.time_ns);
                        }
                        if q.invoke.f == release_f {
                            hold.end = q.invoke.time_ns;
                            hold.ended_by = Some(q.invoke.clone());
                            hold.release = Some(q.kind());
                            hold.release_done = q.done.map(|d| d.time_ns);
                            break;
                        }
                    }
                    if let Some(d) = hold.lease_deadline {
                        hold.end = hold.end.min(d.max(hold.start));
                    }
                    if let Some(a) = hold.last_act {
                        // It acted then, whatever its deadline said.
                        hold.end = hold.end.max(a);
                    }
                    holds.push(hold);
                }
            }
        }
        holds.sort_by_key(|h| (h.start, h.token));
        Holds(holds)
    }
}

pub(crate) fn hold_ops(h: &Hold) -> Vec<Op> {
    let mut v = vec![h.acquire.0.clone(), h.acquire.1.clone()];
    v.extend(h.ended_by.clone());
    v
}
