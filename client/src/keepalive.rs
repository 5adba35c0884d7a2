//! One keep-alive stream per client for all of its sessions, as etcd
//! clients share one LeaseKeepAlive stream: a service with thousands of
//! sessions holds one HTTP/2 stream and one task, not thousands, and the
//! leader renews each burst under one leadership confirmation.
//!
//! Each session is renewed every TTL/3 from the send time of its last
//! acknowledged renewal. The task runs while the client has live sessions
//! and stops when the last one is dropped, closed or lost.

use crate::error::Error;
use crate::lease::Lease;
use crate::transport::Cluster;
use parking_lot::Mutex;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::session_client::SessionClient;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How often the task looks for sessions due. Small against the shortest
/// renewal interval (1 s TTL / 3).
const TICK: Duration = Duration::from_millis(50);
/// The longest a renewal may go unanswered before the node counts as
/// frozen, partitioned or deposed (a renewal needs one quorum round).
const PATIENCE: Duration = Duration::from_secs(2);

/// The sessions a client keeps alive.
pub(crate) struct KeepAlives {
    cluster: Arc<Cluster>,
    registry: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    /// Weak: the session holds its lease, so a dropped session drops out.
    sessions: HashMap<u64, Weak<Lease>>,
    /// Sessions added since the task last looked, with their first due
    /// time (TTL/3 after creation).
    added: Vec<(Instant, u64)>,
    running: bool,
}

impl KeepAlives {
    pub(crate) fn new(cluster: Arc<Cluster>) -> KeepAlives {
        KeepAlives {
            cluster,
            registry: Mutex::default(),
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Registry> {
        self.registry.lock()
    }

    /// Starts keeping `session` alive (created at `sent`), and the task if
    /// it is not running.
    pub(crate) fn add(self: &Arc<Self>, session: &Arc<Lease>, sent: Instant) {
        let mut r = self.lock();
        r.sessions.insert(session.id, Arc::downgrade(session));
        r.added.push((sent + session.ttl / 3, session.id));
        if !r.running {
            r.running = true;
            tokio::spawn(run(self.clone()));
        }
    }

    /// Stops keeping session `id` alive.
    pub(crate) fn remove(&self, id: u64) {
        self.lock().sessions.remove(&id);
    }

    /// Stops keeping every session alive; the ones still referenced.
    pub(crate) fn take_all(&self) -> Vec<Arc<Lease>> {
        let mut r = self.lock();
        r.added.clear();
        r.sessions
            .drain()
            .filter_map(|(_, lease)| lease.upgrade())
            .collect()
    }

    fn get(&self, id: u64) -> Option<Arc<Lease>> {
        self.lock().sessions.get(&id).and_then(Weak::upgrade)
    }
}

/// The task's schedule: when each session is next due, and the renewals
/// awaiting an answer. Ordered by time, so a tick touches only the
/// sessions due, however many the client has.
#[derive(Default)]
struct Schedule {
    due: BTreeSet<(Instant, u64)>,
    pending: HashMap<u64, Instant>,
    pending_by_time: BTreeSet<(Instant, u64)>,
}

impl Schedule {
    /// Takes in new sessions; false once the client has none left (and the
    /// task is then marked stopped).
    fn refresh(&mut self, keepalives: &KeepAlives) -> bool {
        let mut r = keepalives.lock();
        let added = std::mem::take(&mut r.added);
        self.due.extend(added);
        if r.sessions.is_empty() {
            r.running = false;
            return false;
        }
        true
    }

    /// The sessions due by `now`, now marked pending; drops sessions that
    /// were dropped, closed or lost meanwhile.
    fn take_due(&mut self, keepalives: &KeepAlives, now: Instant) -> Vec<u64> {
        let mut send = Vec::new();
        let mut r = keepalives.lock();
        while let Some(&(at, id)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            let Some(s) = r.sessions.get(&id).and_then(Weak::upgrade) else {
                r.sessions.remove(&id);
                continue;
            };
            if let Err(e) = s.until() {
                s.end(e);
                r.sessions.remove(&id);
                continue;
            }
            self.pending.insert(id, now);
            self.pending_by_time.insert((now, id));
            send.push(id);
        }
        send
    }

    /// The send time of `id`'s renewal awaiting an answer, if any.
    fn answered(&mut self, id: u64) -> Option<Instant> {
        let sent = self.pending.remove(&id)?;
        self.pending_by_time.remove(&(sent, id));
        Some(sent)
    }

    /// Whether some renewal has gone unanswered longer than `patience`.
    fn stalled(&self, now: Instant, patience: Duration) -> bool {
        self.pending_by_time
            .first()
            .is_some_and(|(sent, _)| now.duration_since(*sent) > patience)
    }

    /// After the stream broke: whatever was in flight died with it, and a
    /// failover leaves little of the TTL, so everything is due now.
    fn all_due(&mut self, now: Instant) {
        let ids: Vec<u64> = self
            .due
            .iter()
            .map(|(_, id)| *id)
            .chain(self.pending.keys().copied())
            .collect();
        self.due = ids.into_iter().map(|id| (now, id)).collect();
        self.pending.clear();
        self.pending_by_time.clear();
    }
}

/// Keeps the client's sessions alive until none is left.
async fn run(keepalives: Arc<KeepAlives>) {
    let cluster = &keepalives.cluster;
    let mut schedule = Schedule::default();
    let mut backoff = Duration::from_millis(50);
    loop {
        if !schedule.refresh(&keepalives) {
            return;
        }
        let interval = keepalives
            .lock()
            .sessions
            .values()
            .filter_map(Weak::upgrade)
            .map(|s| s.ttl / 3)
            .min()
            .unwrap_or(PATIENCE);
        let patience = interval.min(PATIENCE);
        // After a failure, retry soon: a failover leaves little of the TTL.
        let max_backoff = (interval / 4).min(Duration::from_millis(250));
        let addr = cluster.target();
        let channel = match cluster.channel(&addr) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(node = %addr, error = %e, "cannot reach node for keep-alives");
                tokio::time::sleep(max_backoff).await;
                continue;
            }
        };
        // Unbounded: at most one renewal per session is outstanding, and a
        // send must never wait on the server while answers go unread.
        let (tx, rx) = mpsc::unbounded_channel();
        let opened = tokio::time::timeout(
            patience,
            SessionClient::new(channel)
                .keep_alive(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)),
        )
        .await;
        let mut inbound = match opened {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(status)) => {
                tracing::debug!(node = %addr, error = %status.message(), "keep-alive stream refused");
                cluster.learn(&addr, &status);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(max_backoff);
                continue;
            }
            Err(_) => {
                tracing::debug!(node = %addr, "keep-alive stream did not open in time");
                cluster.forget_leader(&addr);
                continue;
            }
        };
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if !schedule.refresh(&keepalives) {
                        return;
                    }
                    let now = Instant::now();
                    if schedule.stalled(now, patience) {
                        tracing::debug!(node = %addr, "keep-alive unanswered");
                        cluster.forget_leader(&addr);
                        break;
                    }
                    let sent = schedule
                        .take_due(&keepalives, now)
                        .into_iter()
                        .all(|id| tx.send(pb::KeepAliveRequest { session_id: id, shared: true }).is_ok());
                    if !sent {
                        break;
                    }
                }
                m = inbound.message() => match m {
                    Ok(Some(resp)) => {
                        let id = resp.session_id;
                        let sent = schedule.answered(id);
                        let session = keepalives.get(id);
                        if session.is_none() {
                            // Dropped while its renewal was in flight.
                            keepalives.remove(id);
                        }
                        if let (Some(sent), Some(s)) = (sent, session) {
                            if resp.gone {
                                s.end(Error::SessionGone(id));
                                keepalives.remove(id);
                            } else {
                                s.acknowledged(sent);
                                schedule.due.insert((sent + s.ttl / 3, id));
                                tracing::trace!(session = id, node = %addr, "keep-alive acknowledged");
                            }
                        }
                        cluster.remember_leader(&addr);
                        backoff = Duration::from_millis(50);
                    }
                    Ok(None) => {
                        // The server speaks unasked only to end the stream
                        // (it is stepping down or stopping): move on now, not
                        // at the next renewal.
                        tracing::debug!(node = %addr, "keep-alive stream ended by server");
                        cluster.forget_leader(&addr);
                        break;
                    }
                    Err(status) => {
                        tracing::debug!(node = %addr, error = %status.message(), "keep-alive stream ended by server");
                        cluster.learn(&addr, &status);
                        break;
                    }
                }
            }
        }
        schedule.all_due(Instant::now());
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(max_backoff);
    }
}
