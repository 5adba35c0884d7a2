//! The Session service over gRPC: create, keep alive (a stream, no log
//! writes), close.

use super::service;
use crate::auth::Access;
use crate::limits::ConnectionCounts;
use crate::locks::OpCall;
use crate::locks::{stream_from_task, KeepAlive, Locks};
use futures::Stream;
use raftlock_proto::v1::session_server::Session as SessionApi;
use raftlock_proto::v1::*;
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

/// Serves sessions.
pub struct SessionService {
    locks: Locks,
    connections: Arc<ConnectionCounts>,
}

impl SessionService {
    /// Serves the sessions of `locks` over gRPC.
    pub fn new(locks: Locks, connections: Arc<ConnectionCounts>) -> Self {
        SessionService { locks, connections }
    }
}

type KeepAliveStream = Pin<Box<dyn Stream<Item = Result<KeepAliveResponse, Status>> + Send>>;

/// Renewals taken off one stream at once: bounds the work one burst can
/// queue behind a single confirmation round.
const KEEPALIVE_BATCH: usize = 4096;

raftlock_proto::session_calls!(service! {
    impl SessionApi for SessionService {
    type KeepAliveStream = KeepAliveStream;

    async fn keep_alive(
        &self,
        req: Request<Streaming<KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let stream_caller = crate::auth::stream_caller(&req)?;
        stream_caller.opened().check_any(Access::Lock)?;
        let replica = self.locks.replica().clone();
        let slot = super::stream_slot(&self.connections, replica.limits(), req.extensions())?;
        let mut inbound = req.into_inner();
        let locks = self.locks.clone();
        let mut stopping = replica.stopping();
        let out = stream_from_task(move |tx| async move {
            let _slot = slot;
            loop {
                let first = tokio::select! {
                    m = inbound.next() => m,
                    // A stopping node has already handed leadership over:
                    // point the client at the successor now rather than
                    // let its renewals stall until the listener closes.
                    _ = async { drop(stopping.wait_for(|s| *s).await) } => {
                        let _ = tx.send(Err(replica.not_leader().into())).await;
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
                // As the identity stands now: one removed from the auth
                // file stops renewing, and its sessions expire.
                let caller = match stream_caller.now() {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                };
                let answers = futures::future::join_all(batch.iter().map(|m| {
                    let op = KeepAlive {
                        session: m.session_id,
                    };
                    locks.run(&caller, op)
                }))
                .await;
                for (msg, answer) in batch.iter().zip(answers) {
                    let item = match answer {
                        Ok(out) => Ok(KeepAliveRequest::response(out)),
                        // Only this session is over; the stream's others
                        // go on being renewed.
                        Err(e)
                            if msg.shared
                                && e.reason()
                                    == raftlock_proto::reason::Reason::SessionNotFound =>
                        {
                            Ok(KeepAliveResponse {
                                session_id: msg.session_id,
                                ttl_ms: 0,
                                gone: true,
                            })
                        }
                        Err(e) => Err(e.into()),
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
    }
});
