//! A replica without a cluster: each proposal is applied at once, as one
//! entry of its own, to a real state machine (the same one a node runs,
//! with its observers), so the lock service's operations, its pipeline and
//! its wait loops are tested on their own. Knobs make it refuse, hold a
//! proposal back, lose its quorum or its leadership, as a node would.

use crate::error::NodeError;
use crate::limits::Limits;
use crate::replica::{Replica, Role};
use futures::future::BoxFuture;
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, LogId};
use parking_lot::Mutex;
use raftlock_store::machine::{Command, Outcome};
use raftlock_store::state_machine::{SharedState, StateMachineStore};
use raftlock_store::types::{Entry, NodeId, Proposal};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;

/// What the fake does differently from a healthy leader.
#[derive(Default)]
struct Knobs {
    /// Refuse what grows the state, as a leader short of disk space does.
    no_space: bool,
    /// Fail every proposal with this error (nothing is applied).
    refuse: Option<NodeError>,
    /// Fail linearizable reads and confirmations with this error.
    unconfirmed: Option<NodeError>,
}

/// A proposal on its way to the applier, which applies it whether or not
/// its caller still waits (as a node's batcher does).
type Proposed = (
    Command,
    tokio::sync::oneshot::Sender<Result<(u64, Outcome), NodeError>>,
);

/// A leader of a cluster of one, with its log in memory.
pub struct FakeReplica {
    limits: Limits,
    state: Arc<SharedState>,
    applier: tokio::sync::mpsc::UnboundedSender<Proposed>,
    /// The index of the next entry.
    next: Arc<Mutex<u64>>,
    knobs: Mutex<Knobs>,
    /// Open while proposals may be applied; a test shuts it to hold the
    /// next ones back (as a slow follower's fsync does).
    gate: watch::Sender<bool>,
    cut_off: watch::Sender<bool>,
    roles: watch::Sender<Role>,
    stopping: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl FakeReplica {
    /// A leader in term 1 with `limits`; its applier runs on the current
    /// runtime.
    pub fn new(limits: Limits) -> Arc<FakeReplica> {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = StateMachineStore::open(dir.path().join("snapshot")).expect("a new state");
        let state = store.shared();
        let (applier, proposals) = tokio::sync::mpsc::unbounded_channel();
        let gate = watch::channel(true).0;
        let roles = watch::channel(Role {
            term: 1,
            leading: true,
        })
        .0;
        let next = Arc::new(Mutex::new(1));
        tokio::spawn(apply_in_order(
            store,
            proposals,
            gate.subscribe(),
            roles.subscribe(),
            next.clone(),
        ));
        Arc::new(FakeReplica {
            limits,
            state,
            applier,
            next,
            knobs: Mutex::default(),
            gate,
            cut_off: watch::channel(false).0,
            roles,
            stopping: watch::channel(false).0,
            _dir: dir,
        })
    }

    /// Makes proposals wait (`false`) or go on (`true`).
    pub fn let_proposals_through(&self, open: bool) {
        self.gate.send_replace(open);
    }

    /// Refuses what grows the state (`true`), as a leader short of space.
    pub fn set_no_space(&self, short: bool) {
        self.knobs.lock().no_space = short;
    }

    /// Fails every proposal with `error` (`None`: accepts them again).
    pub fn refuse_proposals(&self, error: Option<NodeError>) {
        self.knobs.lock().refuse = error;
    }

    /// Fails linearizable reads and confirmations with `error`.
    pub fn refuse_confirmations(&self, error: Option<NodeError>) {
        self.knobs.lock().unconfirmed = error;
    }

    /// This leader finds itself without a quorum.
    pub fn lose_quorum(&self) {
        self.cut_off.send_replace(true);
    }

    /// This node leads (in a term one higher than before) or follows.
    pub fn set_leading(&self, leading: bool) {
        self.roles.send_modify(|r| {
            if leading && !r.leading {
                r.term += 1;
            }
            r.leading = leading;
        });
    }

    /// The node starts shutting down.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// The log index of the next entry.
    pub fn next_entry(&self) -> u64 {
        *self.next.lock()
    }

    async fn apply(&self, command: Command) -> Result<(u64, Outcome), NodeError> {
        if let Some(e) = self.knobs.lock().refuse.clone() {
            return Err(e);
        }
        if !self.roles.borrow().leading {
            return Err(self.not_leader());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.applier
            .send((command, tx))
            .map_err(|_| NodeError::Stopped("the applier stopped".into()))?;
        rx.await
            .map_err(|_| NodeError::Stopped("the applier stopped".into()))?
    }
}

/// Applies proposals one entry each, in the order they were made.
async fn apply_in_order(
    mut store: StateMachineStore,
    mut proposals: tokio::sync::mpsc::UnboundedReceiver<Proposed>,
    mut gate: watch::Receiver<bool>,
    roles: watch::Receiver<Role>,
    next: Arc<Mutex<u64>>,
) {
    while let Some((command, reply)) = proposals.recv().await {
        if gate.wait_for(|open| *open).await.is_err() {
            return;
        }
        let index = {
            let mut next = next.lock();
            *next += 1;
            *next - 1
        };
        let term = roles.borrow().term;
        let entry = Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 0), index),
            payload: EntryPayload::Normal(Proposal::single(now_ms(), command)),
        };
        let applied = match store.apply(vec![entry]).await {
            Ok(applied) => applied
                .into_iter()
                .next()
                .and_then(|a| a.outcomes.into_iter().next())
                .ok_or_else(|| NodeError::Internal("nothing applied".into())),
            Err(e) => Err(NodeError::Internal(e.to_string())),
        };
        // The caller may have gone: what was applied stays applied.
        let _ = reply.send(applied);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Replica for FakeReplica {
    fn id(&self) -> NodeId {
        1
    }

    fn term(&self) -> u64 {
        self.roles.borrow().term
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn state(&self) -> &Arc<SharedState> {
        &self.state
    }

    fn propose(&self, command: Command) -> BoxFuture<'_, Result<(u64, Outcome), NodeError>> {
        Box::pin(async move {
            tokio::select! {
                r = self.apply(command) => r,
                e = self.cut_off() => Err(e),
            }
        })
    }

    fn confirmed_after(&self, _t: Instant) -> BoxFuture<'_, Result<(), NodeError>> {
        self.linearizable()
    }

    fn linearizable(&self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move {
            if let Some(e) = self.knobs.lock().unconfirmed.clone() {
                return Err(e);
            }
            if *self.cut_off.borrow() {
                return Err(NodeError::Unavailable("cut off".into()));
            }
            if !self.roles.borrow().leading {
                return Err(self.not_leader());
            }
            Ok(())
        })
    }

    fn cut_off(&self) -> BoxFuture<'_, NodeError> {
        Box::pin(async move {
            let mut cut = self.cut_off.subscribe();
            let _ = cut.wait_for(|c| *c).await;
            NodeError::Unavailable("cut off".into())
        })
    }

    fn check_space(&self) -> Result<(), NodeError> {
        if self.knobs.lock().no_space {
            Err(NodeError::NoSpace("below the reserve".into()))
        } else {
            Ok(())
        }
    }

    fn not_leader(&self) -> NodeError {
        NodeError::NotLeader {
            node: 1,
            leader_addr: None,
        }
    }

    fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    fn roles(&self) -> watch::Receiver<Role> {
        self.roles.subscribe()
    }
}
