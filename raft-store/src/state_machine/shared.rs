//! The applied state as the rest of the node sees it: read under a lock,
//! and told of every change by observers that run in apply order.

use crate::machine::{Command, LeaseMachine, Outcome};
use crate::types::{LogId, NodeId, NodeInfo};
use openraft::StoredMembership;
use parking_lot::{RwLock, RwLockReadGuard};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The applied state: the lease machine plus what openraft needs to know
/// about how far it got.
#[derive(Clone, Debug, Default)]
pub struct AppliedState {
    /// Sessions and locks.
    pub machine: LeaseMachine,
    /// The last entry applied.
    pub last_applied: Option<LogId>,
    /// The last membership applied.
    pub last_membership: StoredMembership<NodeId, NodeInfo>,
}

/// A change of the applied state, published to whoever watches (waiting
/// acquisitions, the lease driver, election observers).
// Always sent inside an `Arc`, so the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Change {
    /// One command of a normal entry was applied.
    Applied {
        /// The index it applied at (`batch_index(entry index, position)`).
        index: u64,
        /// Its command, shared with the log entry it came in, not copied.
        command: EntryCommand,
        /// When the leader proposed it (its wall clock, Unix ms).
        at_ms: u64,
        /// What applying it produced.
        outcome: Outcome,
    },
    /// The state was replaced by a snapshot: watchers must re-read it.
    Restored,
}

/// One command of an applied entry: the entry's commands, shared with the
/// log's tail and with replication, and this one's position among them.
/// Reads as the [`Command`] itself.
#[derive(Clone)]
pub struct EntryCommand {
    commands: Arc<[Command]>,
    position: usize,
}

impl EntryCommand {
    /// Command `position` of `commands`; `None` past the end.
    pub fn new(commands: Arc<[Command]>, position: usize) -> Option<EntryCommand> {
        (position < commands.len()).then_some(EntryCommand { commands, position })
    }
}

impl std::ops::Deref for EntryCommand {
    type Target = Command;

    fn deref(&self) -> &Command {
        // In bounds: `new` is the only way to make one.
        &self.commands[self.position]
    }
}

impl std::fmt::Debug for EntryCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// The state shared between the state machine and the node's readers.
#[derive(Debug)]
pub struct SharedState {
    pub(super) state: RwLock<AppliedState>,
    pub(super) changes: broadcast::Sender<Arc<[Change]>>,
    pub(super) observers: Observers,
}

/// A bookkeeper that sees every applied batch (see [`SharedState::observe`]).
type Observer = Box<dyn Fn(&[Change]) + Send + Sync>;

#[derive(Default)]
pub(super) struct Observers(RwLock<Vec<Observer>>);

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.read().len();
        write!(f, "{n} observers")
    }
}

impl SharedState {
    /// Reads the applied state. A std lock: nothing awaits while holding it.
    pub fn read(&self) -> RwLockReadGuard<'_, AppliedState> {
        self.state.read()
    }

    /// Subscribes to changes from now on.
    /// The changes applied from now on, in order: one message per batch
    /// of entries applied together (each of their commands, in order), so
    /// a subscriber wakes once per batch, not once per command.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<[Change]>> {
        self.changes.subscribe()
    }

    /// Calls `observer` with every batch of changes applied from now on,
    /// in order, on the task that applies them, after the state is
    /// updated and before the entries' replies go out. For bookkeeping
    /// that must see every change and costs little: it must not block or
    /// take a lock that is held while waiting for the state. A subscriber
    /// task per such bookkeeper woke on every applied batch, on every node.
    pub fn observe(&self, observer: impl Fn(&[Change]) + Send + Sync + 'static) {
        self.observers.0.write().push(Box::new(observer));
    }

    pub(super) fn publish(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        for observe in self.observers.0.read().iter() {
            observe(&changes);
        }
        if self.changes.receiver_count() > 0 {
            // A receiver may go away meanwhile: not an error.
            let _ = self.changes.send(changes.into());
        }
    }
}
