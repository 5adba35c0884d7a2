//! Reading elections: an election is an exclusive lock whose holder's
//! metadata is the leader's value, so its leader is a linearizable read
//! of the holder, and observing it follows the holder at every change.
//! (Campaign, proclaim and resign are operations, in `ops/`.)

use super::{stream_from_task, Locks};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use crate::replica::Replica;
use futures::Stream;
use raftlock_store::machine::{validate, Grant, Mode};
use raftlock_store::state_machine::Change;
use tokio::sync::broadcast::error::RecvError;
use tracing::Instrument;

fn leader_of(node: &dyn Replica, name: &str) -> Option<Grant> {
    node.state()
        .read()
        .machine
        .describe(name)
        .holders
        .into_iter()
        .find(|h| h.mode == Mode::Exclusive)
}

impl Locks {
    /// The leader of election `name` now, if any.
    pub async fn leader(&self, caller: &Caller, name: &str) -> Result<Option<Grant>, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.replica
            .linearizable()
            .instrument(
                tracing::debug_span!("election.leader", node = self.replica.id(), lock = %name),
            )
            .await?;
        Ok(leader_of(self.replica.as_ref(), name))
    }

    /// The leader of election `name` now and at every change. The stream
    /// ends with the not-leader error (naming the leader, when known) once
    /// this node stops leading or stops: a deposed or partitioned node
    /// would otherwise keep an observer on a view that no longer moves.
    pub async fn observe(
        &self,
        caller: &Caller,
        name: String,
    ) -> Result<impl Stream<Item = Result<Option<Grant>, NodeError>> + Send + 'static, NodeError>
    {
        validate::name(&name)?;
        caller.check(Access::Read, &name)?;
        self.replica
            .linearizable()
            .instrument(
                tracing::debug_span!("election.observe", node = self.replica.id(), lock = %name),
            )
            .await?;
        let node = self.replica.clone();
        let mut changes = node.state().subscribe();
        let mut roles = node.roles();
        let mut stopping = node.stopping();
        Ok(stream_from_task(move |tx| async move {
            let mut last: Option<Option<Grant>> = None;
            loop {
                let current = leader_of(node.as_ref(), &name);
                if last.as_ref() != Some(&current) {
                    if tx.send(Ok(current.clone())).await.is_err() {
                        return;
                    }
                    last = Some(current);
                }
                // Wait for a change that touches this election (or one that
                // may have: a restore, or events we fell behind on).
                let ended = loop {
                    tokio::select! {
                        c = changes.recv() => match c {
                            Ok(batch) => {
                                let touched = batch.iter().any(|c| match c {
                                    Change::Applied { outcome, .. } => {
                                        outcome.events.iter().any(|e| e.lock_name() == Some(&name))
                                    }
                                    Change::Restored => true,
                                });
                                if touched {
                                    break false;
                                }
                            }
                            Err(RecvError::Lagged(_)) => break false,
                            Err(RecvError::Closed) => return,
                        },
                        r = roles.changed() => {
                            if r.is_err() || !roles.borrow_and_update().leading {
                                break true;
                            }
                        }
                        _ = async { drop(stopping.wait_for(|s| *s).await) } => break true,
                    }
                };
                if ended {
                    let _ = tx.send(Err(node.not_leader())).await;
                    return;
                }
            }
        }))
    }
}
