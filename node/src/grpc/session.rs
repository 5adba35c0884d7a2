//! The Session service: create, keep alive (a stream, no log writes), close.

use super::convert::{self, status};
use crate::auth::{caller, Access};
use crate::lease::LeaseDriver;
use crate::node::{Node, NodeError};
use futures::Stream;
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
            if caller.checks_ownership() {
                let max = self.node.limits.max_sessions_per_identity;
                let live = self.node.state.read().machine.sessions_owned_by(caller.name());
                if live >= max {
                    return Err(status(NodeError::ResourceExhausted(format!(
                        "identity {:?} already has {live} live sessions, the limit per identity is {max}; close some first",
                        caller.name()
                    ))));
                }
            }
            let cmd = Command::CreateSession {
                ttl_ms: req.ttl_ms,
                client_name: req.client_name,
                owner: caller.name().to_owned(),
            };
            match self.node.propose_reply(cmd).await.map_err(status)? {
                (_, Reply::SessionCreated { session, ttl_ms }) => {
                    tracing::Span::current().record("session", session);
                    Ok(Response::new(CreateSessionResponse {
                        session_id: session,
                        ttl_ms,
                    }))
                }
                (_, other) => Err(Status::internal(format!("unexpected reply {other}"))),
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
                let msg = tokio::select! {
                    m = inbound.next() => m,
                    // A stopping node has already handed leadership over:
                    // point the client at the successor now rather than
                    // let its renewals stall until the listener closes.
                    _ = async { drop(stopping.wait_for(|s| *s).await) } => {
                        let _ = tx.send(Err(status(node.not_leader()))).await;
                        return;
                    }
                };
                let msg = match msg {
                    Some(Ok(m)) => m,
                    Some(Err(_)) | None => return,
                };
                let session = msg.session_id;
                if let Err(e) = convert::session_id(session) {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
                if let Err(e) = node.check_session_owner(session, &caller).await {
                    let _ = tx.send(Err(status(e))).await;
                    return;
                }
                let res = leases
                    .renew(session)
                    .instrument(tracing::debug_span!(
                        "session.keepalive",
                        node = node.id,
                        session
                    ))
                    .await;
                let item = res
                    .map(|ttl| KeepAliveResponse {
                        session_id: session,
                        ttl_ms: ttl.as_millis() as u64,
                    })
                    .map_err(status);
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
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
                (_, other) => Err(Status::internal(format!("unexpected reply {other}"))),
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
