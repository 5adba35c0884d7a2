//! The Election service: an election is an exclusive lock whose holder's
//! metadata is the leader's value. Campaign = acquire and wait, Proclaim =
//! replace the value, Resign = release, Leader = linearizable read of the
//! holder, Observe = the holder now and at every change.

use super::convert::{self, grant, status};
use super::lock::{acquire, AcquireArgs, Acquired};
use super::session::async_stream_from;
use crate::auth::{caller, Access};
use crate::node::Node;
use crate::waits::Waits;
use futures::Stream;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::election_server::Election as ElectionApi;
use raftlock_proto::v1::*;
use raftlock_store::machine::{Command, Grant, Mode};
use raftlock_store::state_machine::Change;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};
use tracing::Instrument;

/// Serves elections.
pub struct ElectionService {
    node: Arc<Node>,
    waits: Arc<Waits>,
}

impl ElectionService {
    /// Serves elections of `node`.
    pub fn new(node: Arc<Node>, waits: Arc<Waits>) -> Self {
        ElectionService { node, waits }
    }
}

fn leader_of(node: &Node, name: &str) -> Option<Grant> {
    node.state
        .read()
        .machine
        .describe(name)
        .holders
        .into_iter()
        .find(|h| h.mode == Mode::Exclusive)
}

type ObserveStream = Pin<Box<dyn Stream<Item = Result<LeaderResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ElectionApi for ElectionService {
    async fn campaign(
        &self,
        req: Request<CampaignRequest>,
    ) -> Result<Response<CampaignResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let span = tracing::info_span!("election.campaign", node = self.node.id, lock = %r.name, session = r.session_id, identity = caller.name(), token = tracing::field::Empty);
        async {
            convert::lock_name(&r.name)?;
            convert::session_id(r.session_id)?;
            // Checked here so the message says "value", the name campaigners
            // know it by; the machine stores it as the holder's metadata.
            convert::metadata("value", &r.value)?;
            caller.check(Access::Lock, &r.name)?;
            if let Some(w) = r.wait_timeout_ms {
                self.node.limits.check_wait(w)?;
            }
            self.node
                .check_session_owner(r.session_id, &caller)
                .await
                .map_err(status)?;
            let args = AcquireArgs {
                session: convert::session_id(r.session_id)?,
                request_id: convert::request_id(&r.request_id)?,
                mode: Mode::Exclusive,
                permits: None,
                wait: Some(Duration::from_millis(
                    r.wait_timeout_ms.unwrap_or(self.node.limits.max_wait_ms),
                )),
                metadata: r.value,
                name: r.name,
                sequence: convert::sequence(r.seq, r.acked_below)?,
            };
            match acquire(&self.node, &self.waits, args)
                .await
                .map_err(status)?
            {
                Acquired::Granted(g) => {
                    tracing::Span::current().record("token", g.token);
                    Ok(Response::new(CampaignResponse {
                        leader: Some(grant(&g)),
                    }))
                }
                Acquired::Busy(_) => Err(reason::status(
                    Reason::Internal,
                    "a waiting campaign answered busy",
                )),
            }
        }
        .instrument(span)
        .await
    }

    async fn proclaim(
        &self,
        req: Request<ProclaimRequest>,
    ) -> Result<Response<ProclaimResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let span = tracing::info_span!("election.proclaim", node = self.node.id, lock = %r.name, session = r.session_id, identity = caller.name(), token = r.token);
        async {
            convert::lock_name(&r.name)?;
            convert::session_id(r.session_id)?;
            convert::metadata("value", &r.value)?;
            caller.check(Access::Lock, &r.name)?;
            self.node
                .check_session_owner(r.session_id, &caller)
                .await
                .map_err(status)?;
            let cmd = Command::Proclaim {
                session: convert::session_id(r.session_id)?,
                name: r.name.clone(),
                token: r.token,
                value: r.value.clone(),
            };
            self.node.propose_reply(cmd).await.map_err(status)?;
            Ok(Response::new(ProclaimResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn resign(
        &self,
        req: Request<ResignRequest>,
    ) -> Result<Response<ResignResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let span = tracing::info_span!("election.resign", node = self.node.id, lock = %r.name, session = r.session_id, identity = caller.name(), token = r.token);
        async {
            convert::lock_name(&r.name)?;
            caller.check(Access::Lock, &r.name)?;
            self.node
                .check_session_owner(r.session_id, &caller)
                .await
                .map_err(status)?;
            let cmd = Command::Release {
                session: convert::session_id(r.session_id)?,
                name: r.name.clone(),
                token: r.token,
            };
            self.node.propose_reply(cmd).await.map_err(status)?;
            Ok(Response::new(ResignResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn leader(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<LeaderResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let span = tracing::debug_span!("election.leader", node = self.node.id, lock = %r.name);
        async {
            convert::lock_name(&r.name)?;
            caller.check(Access::Read, &r.name)?;
            self.node.linearizable().await.map_err(status)?;
            Ok(Response::new(LeaderResponse {
                leader: leader_of(&self.node, &r.name).as_ref().map(grant),
            }))
        }
        .instrument(span)
        .await
    }

    type ObserveStream = ObserveStream;

    async fn observe(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let caller = caller(&req)?;
        let slot = match crate::limits::remote_addr(req.extensions()) {
            Some(addr) => Some(
                self.node
                    .connections
                    .stream(addr, self.node.limits.max_keepalive_streams_per_connection)?,
            ),
            None => None,
        };
        let name = req.into_inner().name;
        convert::lock_name(&name)?;
        caller.check(Access::Read, &name)?;
        self.node
            .linearizable()
            .instrument(tracing::debug_span!("election.observe", node = self.node.id, lock = %name))
            .await
            .map_err(status)?;
        let node = self.node.clone();
        let mut changes = node.state.subscribe();
        let mut metrics = node.raft.metrics();
        let mut stopping = node.stopping.clone();
        let stream = async_stream_from(move |tx| async move {
            let _slot = slot;
            let mut last: Option<Option<Grant>> = None;
            loop {
                let current = leader_of(&node, &name);
                if last.as_ref() != Some(&current) {
                    let item = LeaderResponse {
                        leader: current.as_ref().map(grant),
                    };
                    if tx.send(Ok(item)).await.is_err() {
                        return;
                    }
                    last = Some(current);
                }
                // Wait for a change that touches this election (or one that
                // may have: a restore, or events we fell behind on). A node
                // that stops leading or stops ends the stream with the
                // leader's address: a deposed or partitioned node would
                // otherwise keep an observer on a view that no longer moves.
                let ended = loop {
                    tokio::select! {
                        c = changes.recv() => match c {
                            Ok(c) => match &*c {
                                Change::Applied { outcome, .. }
                                    if !outcome.events.iter().any(|e| e.lock_name() == Some(&name)) => {}
                                _ => break false,
                            },
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break false,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
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
                    let _ = tx.send(Err(status(node.not_leader()))).await;
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
