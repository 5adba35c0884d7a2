//! Acquisitions waiting in a lock's queue, woken by the entry that grants
//! or cancels them. Each waiting call registers before it proposes, so the
//! grant cannot slip past unseen; the applying task routes applied events
//! to the registered calls (`on_changes`) instead of waking every waiter
//! on every event.

use parking_lot::Mutex;
use raftlock_store::machine::{Event, Grant, RequestId, SessionId, WaitEnd};
use raftlock_store::state_machine::Change;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;

/// What ended a wait.
#[derive(Debug)]
pub enum WaitResult {
    /// Granted.
    Granted(Grant),
    /// Ended without a grant.
    Ended(WaitEnd),
    /// The state was replaced by a snapshot, so the events that would
    /// have ended the wait may never come: read the state again.
    Recheck,
}

type Key = (SessionId, String);
/// The calls waiting on one (session, lock): request id, registration
/// number, and where the result goes.
type Waiting = Vec<(RequestId, u64, oneshot::Sender<WaitResult>)>;

/// Registered waits.
#[derive(Default)]
pub struct Waits {
    inner: Mutex<HashMap<Key, Waiting>>,
    /// Numbers registrations, so that one ending removes itself and not a
    /// retry of the same request that waits beside it.
    next: std::sync::atomic::AtomicU64,
}

impl Waits {
    /// Waiting calls registered on this node (a gauge: one left behind by
    /// a call that ended is a leak).
    pub fn len(&self) -> usize {
        let inner = self.inner.lock();
        inner.values().map(Vec::len).sum()
    }

    /// No waiting call is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Removes a registration when the waiting call ends, however it ends.
pub struct Registration {
    waits: Arc<Waits>,
    key: Key,
    serial: u64,
    /// Resolves when the wait ends.
    pub rx: oneshot::Receiver<WaitResult>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // By its own number: its receiver is still alive here, so the
        // sender does not look closed yet.
        let mut inner = self.waits.inner.lock();
        if let Some(list) = inner.get_mut(&self.key) {
            list.retain(|(_, serial, _)| *serial != self.serial);
            if list.is_empty() {
                inner.remove(&self.key);
            }
        }
    }
}

impl Waits {
    /// Registers interest in the outcome of `request_id`'s wait for `name`.
    pub fn register(
        self: &Arc<Self>,
        session: SessionId,
        name: &str,
        request_id: RequestId,
    ) -> Registration {
        let (tx, rx) = oneshot::channel();
        let key = (session, name.to_owned());
        let serial = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner
            .lock()
            .entry(key.clone())
            .or_default()
            .push((request_id, serial, tx));
        Registration {
            waits: self.clone(),
            key,
            serial,
            rx,
        }
    }

    /// Whether a call here waits for `request_id`'s wait for `name`.
    pub fn is_waiting(&self, session: SessionId, name: &str, request_id: RequestId) -> bool {
        let inner = self.inner.lock();
        inner
            .get(&(session, name.to_owned()))
            .is_some_and(|list| list.iter().any(|(id, _, _)| *id == request_id))
    }

    fn resolve(&self, key: &Key, request_id: RequestId, result: impl Fn() -> WaitResult) {
        let mut inner = self.inner.lock();
        if let Some(list) = inner.get_mut(key) {
            let mut kept = Vec::new();
            for (id, serial, tx) in list.drain(..) {
                if id == request_id {
                    let _ = tx.send(result());
                } else {
                    kept.push((id, serial, tx));
                }
            }
            *list = kept;
            if list.is_empty() {
                inner.remove(key);
            }
        }
    }

    fn recheck_all(&self) {
        let mut inner = self.inner.lock();
        for (_, list) in inner.drain() {
            for (_, _, tx) in list {
                let _ = tx.send(WaitResult::Recheck);
            }
        }
    }

    /// Routes each applied change to the waits it ends. Runs as an
    /// observer of the applied state (`SharedState::observe`), so it sees
    /// every change, in order, before the entry's replies go out.
    pub fn on_changes(&self, batch: &[Change]) {
        for change in batch {
            match change {
                Change::Applied { outcome, .. } => {
                    for e in &outcome.events {
                        match e {
                            Event::Granted(g) | Event::HandedOver(g) => {
                                let key = (g.session, g.name.clone());
                                self.resolve(&key, g.request_id, || WaitResult::Granted(g.clone()));
                            }
                            Event::WaitEnded {
                                name,
                                session,
                                request_id,
                                reason,
                            } => {
                                let key = (*session, name.clone());
                                self.resolve(&key, *request_id, || WaitResult::Ended(*reason));
                            }
                            _ => {}
                        }
                    }
                }
                Change::Restored => self.recheck_all(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(waits: &Waits) -> usize {
        waits.inner.lock().values().map(Vec::len).sum()
    }

    /// A waiting call whose proposal failed (not leader, no session,
    /// refused) drops its registration without any event: nothing may be
    /// left behind.
    #[test]
    fn a_registration_dropped_without_an_event_leaves_nothing() {
        let waits = Arc::new(Waits::default());
        let r = waits.register(7, "l", RequestId(1));
        assert_eq!(registered(&waits), 1);
        drop(r);
        assert_eq!(registered(&waits), 0, "the registry kept a dropped wait");
        assert!(waits.inner.lock().is_empty());
    }

    /// A retry of the same request waiting beside the first: the first
    /// ending removes only itself, and the grant still reaches the retry.
    #[tokio::test]
    async fn a_retry_keeps_its_registration_when_the_first_call_ends() {
        let waits = Arc::new(Waits::default());
        let first = waits.register(7, "l", RequestId(1));
        let mut retry = waits.register(7, "l", RequestId(1));
        drop(first);
        assert_eq!(registered(&waits), 1);
        waits.resolve(&(7, "l".into()), RequestId(1), || {
            WaitResult::Ended(WaitEnd::Cancelled)
        });
        assert!(matches!((&mut retry.rx).await, Ok(WaitResult::Ended(_))));
        drop(retry);
        assert_eq!(registered(&waits), 0);
    }
}
