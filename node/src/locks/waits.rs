//! Acquisitions waiting in a lock's queue, woken by the entry that grants
//! or cancels them. Each waiting call registers before it proposes, so the
//! grant cannot slip past unseen; the applying task routes applied events
//! to the registered calls (`on_changes`) instead of waking every waiter
//! on every event.

use raftlock_store::machine::{Event, Grant, RequestId, SessionId, WaitEnd};
use raftlock_store::state_machine::Change;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
/// The calls waiting on one (session, lock), by request id.
type Waiting = Vec<(RequestId, oneshot::Sender<WaitResult>)>;

/// Registered waits.
#[derive(Default)]
pub struct Waits {
    inner: Mutex<HashMap<Key, Waiting>>,
}

/// Removes a registration when the waiting call ends, however it ends.
pub struct Registration {
    waits: Arc<Waits>,
    key: Key,
    request_id: RequestId,
    /// Resolves when the wait ends.
    pub rx: oneshot::Receiver<WaitResult>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = self.waits.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = inner.get_mut(&self.key) {
            list.retain(|(id, tx)| *id != self.request_id || !tx.is_closed());
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
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .push((request_id, tx));
        Registration {
            waits: self.clone(),
            key,
            request_id,
            rx,
        }
    }

    fn resolve(&self, key: &Key, request_id: RequestId, result: impl Fn() -> WaitResult) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = inner.get_mut(key) {
            let mut kept = Vec::new();
            for (id, tx) in list.drain(..) {
                if id == request_id {
                    let _ = tx.send(result());
                } else {
                    kept.push((id, tx));
                }
            }
            *list = kept;
            if list.is_empty() {
                inner.remove(key);
            }
        }
    }

    fn recheck_all(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for (_, list) in inner.drain() {
            for (_, tx) in list {
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
                            Event::Granted(g) => {
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
