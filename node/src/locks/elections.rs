//! Elections: an election is an exclusive lock whose holder's metadata is
//! the leader's value. Campaign = acquire and wait, proclaim = replace the
//! value, resign = release, leader = a linearizable read of the holder,
//! observe = the holder now and at every change.

use super::{session_id, stream_from_task, Acquire, Acquired, Campaign, Locks, Proclaim, Release};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use crate::raft::node::Node;
use futures::Stream;
use raftlock_store::machine::{validate, Command, Grant, Mode};
use raftlock_store::state_machine::Change;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tracing::Instrument;

fn leader_of(node: &Node, name: &str) -> Option<Grant> {
    node.state()
        .read()
        .machine
        .describe(name)
        .holders
        .into_iter()
        .find(|h| h.mode == Mode::Exclusive)
}

impl Locks {
    /// Waits until `caller`'s session leads election `name`; returns the
    /// leadership's grant.
    pub async fn campaign(&self, caller: &Caller, c: Campaign) -> Result<Grant, NodeError> {
        let span = tracing::debug_span!("election.campaign", node = self.node.id(), term = self.term(), lock = %c.name, session = c.session, identity = caller.name(), token = tracing::field::Empty);
        async {
            validate::name(&c.name)?;
            session_id(c.session)?;
            // Checked here so the message says "value", the name
            // campaigners know it by; the machine stores it as the holder's
            // metadata.
            validate::metadata("value", &c.value)?;
            caller.check(Access::Lock, &c.name)?;
            if let Some(w) = c.wait {
                self.node.limits().check_wait(w.as_millis() as u64)?;
            }
            self.node.check_session_owner(c.session, caller).await?;
            let wait = c
                .wait
                .unwrap_or(Duration::from_millis(self.node.limits().max_wait_ms));
            let a = Acquire {
                session: c.session,
                name: c.name,
                request_id: c.request_id,
                mode: Mode::Exclusive,
                permits: None,
                wait: Some(wait),
                metadata: c.value,
                sequence: c.sequence,
                terms: Default::default(),
            };
            match self.acquire_checked(a).await? {
                Acquired::Granted(g) => {
                    tracing::Span::current().record("token", g.token);
                    Ok(g)
                }
                Acquired::Busy(_) => Err(NodeError::Internal(
                    "a waiting campaign answered busy".into(),
                )),
            }
        }
        .instrument(span)
        .await
    }

    /// Replaces the leader's value, if `p.token` still leads.
    pub async fn proclaim(&self, caller: &Caller, p: Proclaim) -> Result<(), NodeError> {
        let span = tracing::debug_span!("election.proclaim", node = self.node.id(), term = self.term(), lock = %p.name, session = p.session, identity = caller.name(), token = p.token);
        async {
            validate::name(&p.name)?;
            session_id(p.session)?;
            validate::metadata("value", &p.value)?;
            caller.check(Access::Lock, &p.name)?;
            self.node.check_session_owner(p.session, caller).await?;
            let cmd = Command::Proclaim {
                session: p.session,
                name: p.name,
                token: p.token,
                value: p.value,
            };
            self.node.propose_reply(cmd).await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Gives up leadership (or a campaign's place).
    pub async fn resign(&self, caller: &Caller, r: Release) -> Result<(), NodeError> {
        let span = tracing::debug_span!("election.resign", node = self.node.id(), term = self.term(), lock = %r.name, session = r.session, identity = caller.name(), token = r.token);
        async {
            validate::name(&r.name)?;
            caller.check(Access::Lock, &r.name)?;
            self.node.check_session_owner(r.session, caller).await?;
            let cmd = Command::Release {
                session: session_id(r.session)?,
                name: r.name,
                token: r.token,
            };
            self.node.propose_reply(cmd).await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// The leader of election `name` now, if any.
    pub async fn leader(&self, caller: &Caller, name: &str) -> Result<Option<Grant>, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.node
            .linearizable()
            .instrument(
                tracing::debug_span!("election.leader", node = self.node.id(), lock = %name),
            )
            .await?;
        Ok(leader_of(&self.node, name))
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
        self.node
            .linearizable()
            .instrument(
                tracing::debug_span!("election.observe", node = self.node.id(), lock = %name),
            )
            .await?;
        let node = self.node.clone();
        let mut changes = node.state().subscribe();
        let mut metrics = node.metrics();
        let mut stopping = node.stopping();
        Ok(stream_from_task(move |tx| async move {
            let mut last: Option<Option<Grant>> = None;
            loop {
                let current = leader_of(&node, &name);
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
                        r = metrics.changed() => {
                            let leading = metrics.borrow().state == openraft::ServerState::Leader;
                            if r.is_err() || !leading {
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
