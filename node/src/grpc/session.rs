//! The Session service: create, keep alive (a stream, no log writes), close.

use super::convert::{self, status};
use crate::auth::{caller, Access};
use crate::lease::LeaseDriver;
use crate::node::{Node, NodeError};
use futures::Stream;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::session_server::Session as SessionApi;
use raftlock_proto::v1::*;
use raftlock_store::machine::{Command, Reply};
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

/// Serves sessions.
pub struct SessionService {
    node: Arc<Node>,
    leases: Arc<LeaseDriver>,
}

impl SessionService {
    /// Serves sessions of `node`, renewed through `leases`.
    pub fn new(node: Arc<Node>, leases: Arc<LeaseDriver>) -> Self {
        SessionService { node, leases }
    }
}

type KeepAliveStream = Pin<Box<dyn Stream<Item = Result<KeepAliveResponse, Status>> + Send>>;

/// Renewals taken off one stream at once: bounds the work one burst can
/// queue behind a single confirmation round.
const KEEPALIVE_BATCH: usize = 4096;

/// Renews one session for `caller`; the session's TTL.
async fn renew_one(
    node: &Node,
    leases: &LeaseDriver,
    caller: &crate::auth::Caller,
    session: u64,
) -> Result<std::time::Duration, Status> {
    convert::session_id(session)?;
    node.check_session_owner(session, caller)
        .await
        .map_err(status)?;
    leases
        .renew(session)
        .instrument(tracing::debug_span!(
            "session.keepalive",
            node = node.id,
            session
        ))
        .await
        .map_err(status)
}

#[tonic::async_trait]
impl SessionApi for SessionService {
    async fn create(
        &self,
        req: Request<CreateSessionRequest>,
    ) -> Result<Response<CreateSessionResponse>, Status> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let span = tracing::info_span!(
            "session.create",
            node = self.node.id,
            ttl_ms = req.ttl_ms,
            identity = caller.name(),
            session = tracing::field::Empty
        );
        async {
            caller.check_any(Access::Lock)?;
            self.node.limits.check_ttl(req.ttl_ms)?;
            convert::client_name(&req.client_name)?;
            let key = convert::creation_key(&req.creation_key)?;
            let retry_of = key.and_then(|k| {
                self.node
                    .state
                    .read()
                    .machine
                    .session_by_key(caller.name(), k)
            });
            // A retry of a creation that succeeded adds no session.
            if caller.checks_ownership() && retry_of.is_none() {
                let max = self.node.limits.max_sessions_per_identity;
                let live = self.node.state.read().machine.sessions_owned_by(caller.name());
                if live >= max {
                    return Err(status(NodeError::ResourceExhausted(format!(
                        "identity {:?} already has {live} live sessions, the limit per identity is {max}; close some first",
                        caller.name()
                    ))));
                }
            }
            let cmd = match key {
                Some(key) => Command::CreateSessionOnce {
                    ttl_ms: req.ttl_ms,
                    client_name: req.client_name,
                    owner: caller.name().to_owned(),
                    key,
                },
                None => Command::CreateSession {
                    ttl_ms: req.ttl_ms,
                    client_name: req.client_name,
                    owner: caller.name().to_owned(),
                },
            };
            match self.node.propose_reply(cmd).await.map_err(status)? {
                (_, Reply::SessionCreated { session, ttl_ms }) => {
                    tracing::Span::current().record("session", session);
                    Ok(Response::new(CreateSessionResponse {
                        session_id: session,
                        ttl_ms,
                    }))
                }
                (_, other) => Err(reason::status(Reason::Internal, format!("unexpected reply {other}"))),
            }
        }
        .instrument(span)
        .await
    }

    type KeepAliveStream = KeepAliveStream;

    async fn keep_alive(
        &self,
        req: Request<Streaming<KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let caller = caller(&req)?;
        caller.check_any(Access::Lock)?;
        // Each stream holds a slot of its connection's allowance until it
        // ends, so one client cannot pin unbounded server tasks.
        let slot = match crate::limits::remote_addr(req.extensions()) {
            Some(addr) => Some(
                self.node
                    .connections
                    .stream(addr, self.node.limits.max_keepalive_streams_per_connection)?,
            ),
            None => None,
        };
        let mut inbound = req.into_inner();
        let leases = self.leases.clone();
        let node = self.node.clone();
        let mut stopping = self.node.stopping.clone();
        let out = async_stream_from(move |tx| async move {
            let _slot = slot;
            loop {
                let first = tokio::select! {
                    m = inbound.next() => m,
                    // A stopping node has already handed leadership over:
                    // point the client at the successor now rather than
                    // let its renewals stall until the listener closes.
                    _ = async { drop(stopping.wait_for(|s| *s).await) } => {
                        let _ = tx.send(Err(status(node.not_leader()))).await;
                        return;
                    }
                };
                let Some(Ok(first)) = first else { return };
                // A client renewing many sessions sends them in bursts:
                // everything already received is renewed together, so the
                // burst waits for one leadership confirmation, not one each.
                let mut batch = vec![first];
                let mut ended = false;
                while batch.len() < KEEPALIVE_BATCH {
                    match futures::FutureExt::now_or_never(inbound.next()) {
                        Some(Some(Ok(m))) => batch.push(m),
                        Some(Some(Err(_)) | None) => {
                            ended = true;
                            break;
                        }
                        None => break,
                    }
                }
                let answers = futures::future::join_all(
                    batch
                        .iter()
                        .map(|m| renew_one(&node, &leases, &caller, m.session_id)),
                )
                .await;
                for (msg, answer) in batch.iter().zip(answers) {
                    let item = match answer {
                        Ok(ttl) => Ok(KeepAliveResponse {
                            session_id: msg.session_id,
                            ttl_ms: ttl.as_millis() as u64,
                            gone: false,
                        }),
                        // Only this session is over; the stream's others
                        // go on being renewed.
                        Err(e) if msg.shared && e.code() == tonic::Code::NotFound => {
                            Ok(KeepAliveResponse {
                                session_id: msg.session_id,
                                ttl_ms: 0,
                                gone: true,
                            })
                        }
                        Err(e) => Err(e),
                    };
                    let failed = item.is_err();
                    if tx.send(item).await.is_err() || failed {
                        return;
                    }
                }
                if ended {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(out)))
    }

    async fn close(
        &self,
        req: Request<CloseSessionRequest>,
    ) -> Result<Response<CloseSessionResponse>, Status> {
        let caller = caller(&req)?;
        let session = convert::session_id(req.into_inner().session_id)?;
        let span = tracing::info_span!(
            "session.close",
            node = self.node.id,
            session,
            identity = caller.name()
        );
        async {
            self.node
                .check_session_owner(session, &caller)
                .await
                .map_err(status)?;
            match self
                .node
                .propose_reply(Command::CloseSession { session })
                .await
                .map_err(status)?
            {
                (_, Reply::SessionClosed { released }) => {
                    Ok(Response::new(CloseSessionResponse { released }))
                }
                (_, other) => Err(reason::status(
                    Reason::Internal,
                    format!("unexpected reply {other}"),
                )),
            }
        }
        .instrument(span)
        .await
    }
}

/// A stream fed by a task through a bounded channel; the task stops when
/// the receiver (the client's stream) goes away.
pub fn async_stream_from<T, F, Fut>(f: F) -> impl Stream<Item = T>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
