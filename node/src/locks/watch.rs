//! Watch: every change of lock holders under a prefix, in log order, with
//! the index of the command it came from so that a watcher can resume on
//! any node after a reconnect, with no gap and nothing twice.
//!
//! Each node keeps the lock events of its last applied commands in a
//! bounded history. One task feeds it from the applied changes and fans
//! them out to the live watchers; history and fan-out are updated under
//! one lock, and a watcher copies its backlog and subscribes under that
//! same lock, so nothing falls between the two. A watcher that asks for
//! more than the history holds (or whose node installed a snapshot, which
//! replaces the state without its commands) is told WATCH_COMPACTED and
//! reads the state afresh: etcd's answer to a compacted revision.

use super::Locks;
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use parking_lot::Mutex;
use raftlock_store::machine::{validate, Event, FencingToken, HoldEnd, Mode, SessionId};
use raftlock_store::state_machine::{Change, SharedState};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError};

/// Commands with lock events a node remembers for watchers by default.
pub const DEFAULT_HISTORY: usize = 10_000;

/// What happened to one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockEventKind {
    /// Granted to an acquire at once.
    Granted,
    /// Granted to a waiter by the command that freed the lock.
    Handoff,
    /// Released by the holder (or its session's close).
    Released,
    /// Released because the holder's session expired.
    Expired,
    /// Taken away by an administrator.
    ForceReleased,
    /// Released by the leader: the hold's cap ran out.
    HoldExpired,
    /// A lock-delay started: nobody is granted the lock until it ends.
    LockDelayStarted,
    /// A lock-delay ended.
    LockDelayEnded,
}

/// One change of one lock's holders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockEvent {
    /// What happened.
    pub kind: LockEventKind,
    /// Lock name.
    pub name: String,
    /// The session that got or lost the lock.
    pub session: SessionId,
    /// The grant's token.
    pub token: FencingToken,
    /// How it is held (grants and handoffs; exclusive otherwise).
    pub mode: Mode,
    /// The holder's metadata (grants and handoffs).
    pub metadata: Vec<u8>,
    /// Permits taken (grants and handoffs).
    pub count: u32,
    /// A lock-delay's length (LockDelayStarted), ms.
    pub lock_delay_ms: u64,
}

/// The lock events of one applied command.
#[derive(Clone, Debug)]
pub struct Watched {
    /// The command's index (entry index × 2^16 + position).
    pub index: u64,
    /// The leader's wall clock when it proposed the command (Unix ms).
    pub at_ms: u64,
    /// What it did to locks, in order.
    pub events: Vec<LockEvent>,
}

impl Watched {
    /// Only the events on names under `prefix` that `caller` may read, or
    /// `None` if none is left.
    pub fn visible(&self, prefix: &str, caller: &Caller) -> Option<Watched> {
        let events: Vec<LockEvent> = self
            .events
            .iter()
            .filter(|e| e.name.starts_with(prefix) && caller.may(Access::Read, &e.name))
            .cloned()
            .collect();
        (!events.is_empty()).then_some(Watched {
            index: self.index,
            at_ms: self.at_ms,
            events,
        })
    }
}

/// What the fan-out carries.
#[derive(Clone, Debug)]
pub enum Feed {
    /// A command's events.
    Command(Arc<Watched>),
    /// The history was reset (a snapshot was installed): every live watch
    /// has lost track and must start over.
    Reset,
}

struct History {
    commands: VecDeque<Arc<Watched>>,
    capacity: usize,
    /// Commands at or below this index may have had events that are no
    /// longer (or never were) in `commands`.
    forgotten_through: u64,
    /// The last applied index seen: where a watch "from now" starts.
    applied: u64,
}

/// The history and fan-out of one node.
pub struct WatchHub {
    history: Mutex<History>,
    live: broadcast::Sender<Feed>,
}

/// The start of a watch: what it missed, and what comes next.
pub struct Start {
    /// The index the watch starts after.
    pub after: u64,
    /// Commands after it, already applied.
    pub backlog: Vec<Arc<Watched>>,
    /// Everything applied from here on.
    pub live: broadcast::Receiver<Feed>,
}

impl WatchHub {
    /// A hub that remembers the lock events of `capacity` commands, fed by
    /// `state` from its current applied index on.
    pub fn start(state: Arc<SharedState>, capacity: usize) -> Arc<WatchHub> {
        let applied = state.read().last_applied.map_or(0, |l| l.index << 16);
        let (live, _) = broadcast::channel(1024);
        let hub = Arc::new(WatchHub {
            history: Mutex::new(History {
                commands: VecDeque::new(),
                capacity: capacity.max(1),
                forgotten_through: applied,
                applied,
            }),
            live,
        });
        let feeding = hub.clone();
        // Weak: the state owns its observers.
        let weak = Arc::downgrade(&state);
        state.observe(move |batch| {
            if let Some(state) = weak.upgrade() {
                batch.iter().for_each(|c| feeding.record(c, &state));
            }
        });
        // What was applied before the observer was in place is not in the
        // history: a watch must not be resumed across it.
        if state.read().last_applied.map_or(0, |l| l.index << 16) > applied {
            hub.reset(&state);
        }
        hub
    }

    fn history(&self) -> parking_lot::MutexGuard<'_, History> {
        self.history.lock()
    }

    fn record(&self, change: &Change, state: &SharedState) {
        let Change::Applied {
            index,
            at_ms,
            outcome,
            ..
        } = change
        else {
            return self.reset(state);
        };
        let mut h = self.history();
        if *index <= h.applied {
            return;
        }
        h.applied = *index;
        let events = lock_events(&outcome.events);
        if events.is_empty() {
            return;
        }
        let watched = Arc::new(Watched {
            index: *index,
            at_ms: *at_ms,
            events,
        });
        if h.commands.len() == h.capacity {
            if let Some(old) = h.commands.pop_front() {
                h.forgotten_through = old.index;
            }
        }
        h.commands.push_back(watched.clone());
        // No receiver is not an error: nobody watches.
        let _ = self.live.send(Feed::Command(watched));
    }

    /// Forgets everything: the state moved in a way the history cannot
    /// follow (a snapshot, or this feed fell behind the applied changes).
    fn reset(&self, state: &SharedState) {
        let applied = state.read().last_applied.map_or(0, |l| l.index << 16);
        let mut h = self.history();
        h.commands.clear();
        h.applied = h.applied.max(applied);
        h.forgotten_through = h.applied;
        let _ = self.live.send(Feed::Reset);
    }

    /// The last `n` commands with lock events, newest last.
    pub fn recent(&self, n: usize) -> Vec<Arc<Watched>> {
        let h = self.history();
        h.commands.iter().rev().take(n).rev().cloned().collect()
    }

    /// Starts a watch after `after` (0: from now).
    pub fn begin(&self, after: u64) -> Result<Start, NodeError> {
        let h = self.history();
        let after = if after == 0 { h.applied } else { after };
        if after < h.forgotten_through {
            return Err(NodeError::WatchCompacted(format!(
                "this node remembers lock events after index {} only, not after {after}; \
                 read the state afresh and watch from now",
                h.forgotten_through
            )));
        }
        Ok(Start {
            after,
            backlog: h
                .commands
                .iter()
                .filter(|w| w.index > after)
                .cloned()
                .collect(),
            live: self.live.subscribe(),
        })
    }
}

/// The lock events of one command's outcome, each with the cause the
/// state machine gave it (granted at once or handed over to a waiter; a
/// hold released, expired, forced or capped), never inferred from the
/// command.
fn lock_events(events: &[Event]) -> Vec<LockEvent> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Granted(g) | Event::HandedOver(g) => Some(LockEvent {
                kind: if matches!(e, Event::Granted(_)) {
                    LockEventKind::Granted
                } else {
                    LockEventKind::Handoff
                },
                name: g.name.clone(),
                session: g.session,
                token: g.token,
                mode: g.mode,
                metadata: g.metadata.clone(),
                count: g.terms.count,
                lock_delay_ms: 0,
            }),
            Event::Released {
                name,
                session,
                token,
                why,
            } => Some(LockEvent {
                kind: match why {
                    HoldEnd::Released | HoldEnd::SessionClosed => LockEventKind::Released,
                    HoldEnd::SessionExpired => LockEventKind::Expired,
                    HoldEnd::ForceReleased => LockEventKind::ForceReleased,
                    HoldEnd::CapRanOut => LockEventKind::HoldExpired,
                },
                name: name.clone(),
                session: *session,
                token: *token,
                mode: Mode::Exclusive,
                metadata: Vec::new(),
                count: 0,
                lock_delay_ms: 0,
            }),
            Event::LockDelayed { name, delay_ms } => Some(LockEvent {
                kind: LockEventKind::LockDelayStarted,
                name: name.clone(),
                session: 0,
                token: 0,
                mode: Mode::Exclusive,
                metadata: Vec::new(),
                count: 0,
                lock_delay_ms: *delay_ms,
            }),
            Event::LockDelayEnded { name } => Some(LockEvent {
                kind: LockEventKind::LockDelayEnded,
                name: name.clone(),
                session: 0,
                token: 0,
                mode: Mode::Exclusive,
                metadata: Vec::new(),
                count: 0,
                lock_delay_ms: 0,
            }),
            _ => None,
        })
        .collect()
}

impl Locks {
    /// Watches `prefix` for `caller` after index `after` (0: from now).
    /// The stream opens with an answer without events whose index is where
    /// it starts, so that a watcher knows where to resume even if nothing
    /// happens; then one answer per command with events it may read. It
    /// ends with WATCH_COMPACTED when it loses track (its node installed a
    /// snapshot, or it fell further behind than the history reaches).
    pub fn watch(
        &self,
        caller: Arc<Caller>,
        prefix: String,
        after: u64,
    ) -> Result<impl futures::Stream<Item = Result<Watched, NodeError>>, NodeError> {
        if !prefix.is_empty() {
            validate::name(&prefix)?;
        }
        caller.check_any(Access::Read)?;
        let hub = self.watches.clone();
        let start = hub.begin(after)?;
        let span = tracing::info_span!("lock.watch", node = self.replica.id(), lock = %prefix, after = start.after);
        Ok(super::stream_from_task(move |tx| {
            use tracing::Instrument;
            async move {
                let Start {
                    after,
                    backlog,
                    mut live,
                } = start;
                let opening = Watched {
                    index: after,
                    at_ms: 0,
                    events: Vec::new(),
                };
                if tx.send(Ok(opening)).await.is_err() {
                    return;
                }
                let mut last = after;
                let mut pending: VecDeque<Arc<Watched>> = backlog.into();
                loop {
                    while let Some(w) = pending.pop_front() {
                        if w.index <= last {
                            continue;
                        }
                        last = w.index;
                        if let Some(v) = w.visible(&prefix, &caller) {
                            if tx.send(Ok(v)).await.is_err() {
                                return;
                            }
                        }
                    }
                    match live.recv().await {
                        Ok(Feed::Command(w)) => pending.push_back(w),
                        Ok(Feed::Reset) => {
                            let _ = tx
                                .send(Err(NodeError::WatchCompacted(format!(
                                    "this node replaced its state from a snapshot after index {last}; \
                                     read the state afresh and watch from now"
                                ))))
                                .await;
                            return;
                        }
                        // Fell behind the fan-out: pick up from the history,
                        // which reaches further back.
                        Err(RecvError::Lagged(_)) => match hub.begin(last) {
                            Ok(again) => {
                                live = again.live;
                                pending = again.backlog.into();
                            }
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                                return;
                            }
                        },
                        Err(RecvError::Closed) => return,
                    }
                }
            }
            .instrument(span)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_store::machine::Grant;

    fn grant(name: &str, session: SessionId, token: FencingToken) -> Grant {
        Grant {
            name: name.into(),
            session,
            request_id: raftlock_store::machine::RequestId(1),
            mode: Mode::Exclusive,
            token,
            granted_at_ms: 0,
            metadata: vec![],
            terms: Default::default(),
        }
    }

    #[test]
    fn events_are_named_by_the_cause_the_machine_gave_them() {
        let released = |why| Event::Released {
            name: "a".into(),
            session: 1,
            token: 5,
            why,
        };
        let events = [
            released(HoldEnd::SessionExpired),
            Event::HandedOver(grant("a", 2, 9)),
            Event::Granted(grant("b", 2, 10)),
            released(HoldEnd::ForceReleased),
            released(HoldEnd::CapRanOut),
            released(HoldEnd::SessionClosed),
            released(HoldEnd::Released),
        ];
        let kinds: Vec<_> = lock_events(&events).iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                LockEventKind::Expired,
                LockEventKind::Handoff,
                LockEventKind::Granted,
                LockEventKind::ForceReleased,
                LockEventKind::HoldExpired,
                LockEventKind::Released,
                LockEventKind::Released,
            ]
        );
    }
}
