//! Acquires and releases over one `Lock.Pipeline` stream per node, shared by
//! every session of a client: each call is one message each way instead
//! of its own HTTP/2 stream with headers and trailers, and calls made at
//! the same moment travel in the same writes. A call behaves as the unary
//! one would, failures and leader hints included, so the retry loop above
//! it cannot tell the two apart. Against a node without the method
//! (UNIMPLEMENTED, an older release during a rolling upgrade) the client
//! falls back to unary calls to that node.

use crate::transport::Transport;
use parking_lot::Mutex;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::LEADER_METADATA_KEY;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

pub(crate) use pb::pipeline_request::Call;
pub(crate) use pb::pipeline_response::Result as Answer;

type Waiter = oneshot::Sender<Result<Answer, Status>>;

/// The streams of one client, by node address.
pub(crate) struct Pipelines {
    /// `Options::pipeline`; false sends every call unary.
    enabled: bool,
    /// A std mutex, never held across an await: every call looks here.
    streams: Mutex<Streams>,
    /// Held across opening a stream, so that calls arriving meanwhile wait
    /// for that stream instead of each opening their own.
    opening: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Streams {
    open: HashMap<String, Arc<Pipeline>>,
    /// Nodes that answered UNIMPLEMENTED: unary calls only.
    unary_only: HashSet<String>,
}

/// What the client has for a node.
enum Found {
    Stream(Arc<Pipeline>),
    UnaryOnly,
    Nothing,
}

impl Pipelines {
    pub(crate) fn new(enabled: bool) -> Pipelines {
        Pipelines {
            enabled,
            streams: Mutex::default(),
            opening: tokio::sync::Mutex::default(),
        }
    }

    fn find(&self, addr: &str) -> Found {
        let streams = self.streams.lock();
        if streams.unary_only.contains(addr) {
            return Found::UnaryOnly;
        }
        match streams.open.get(addr) {
            Some(p) if p.is_open() => Found::Stream(p.clone()),
            _ => Found::Nothing,
        }
    }
}

/// One open stream: calls in progress, by id.
struct Pipeline {
    tx: mpsc::UnboundedSender<pb::PipelineRequest>,
    next_id: AtomicU64,
    pending: Arc<Mutex<Pending>>,
}

#[derive(Default)]
struct Pending {
    /// Set once the stream ended; no call is added after.
    ended: bool,
    calls: HashMap<u64, Waiter>,
}

impl Pipeline {
    fn is_open(&self) -> bool {
        !self.pending.lock().ended
    }

    async fn call(&self, call: Call, timeout: Duration) -> Result<Answer, Status> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            if pending.ended {
                return Err(Status::unavailable("the pipeline stream ended"));
            }
            pending.calls.insert(id, tx);
        }
        let forget = || {
            self.pending.lock().calls.remove(&id);
        };
        if self
            .tx
            .send(pb::PipelineRequest {
                id,
                call: Some(call),
            })
            .is_err()
        {
            forget();
            return Err(Status::unavailable("the pipeline stream ended"));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Status::unavailable("the pipeline stream ended")),
            Err(_) => {
                forget();
                // What tonic's own per-call timeout says, so the retry loop
                // treats both alike.
                Err(Status::cancelled("Timeout expired"))
            }
        }
    }
}

/// A Pipeline answer's error as the status the unary call would have
/// returned, leader hint in the metadata.
fn status_of(e: pb::PipelineError) -> Status {
    let mut metadata = tonic::metadata::MetadataMap::new();
    if !e.leader.is_empty() {
        if let Ok(v) = e.leader.parse() {
            metadata.insert(LEADER_METADATA_KEY, v);
        }
    }
    match raftlock_proto::reason::Reason::parse(&e.reason) {
        Some(r) => raftlock_proto::reason::status_with_metadata(r, e.message, metadata),
        None => Status::with_metadata(tonic::Code::from(e.code), e.message, metadata),
    }
}

/// Reads answers and hands each to its caller; when the stream ends, every
/// call still waiting gets the reason.
async fn dispatch(
    mut inbound: tonic::Streaming<pb::PipelineResponse>,
    pending: Arc<Mutex<Pending>>,
) {
    let end = loop {
        match inbound.message().await {
            Ok(Some(r)) => {
                let waiter = pending.lock().calls.remove(&r.id);
                // No waiter: that call timed out on this side already.
                if let Some(w) = waiter {
                    let answer = match r.result {
                        Some(Answer::Error(e)) => Err(status_of(e)),
                        Some(a) => Ok(a),
                        None => Err(Status::internal("a pipeline answer without a result")),
                    };
                    let _ = w.send(answer);
                }
            }
            Ok(None) => break Status::unavailable("the node ended the pipeline stream"),
            Err(s) => break s,
        }
    };
    let calls = {
        let mut p = pending.lock();
        p.ended = true;
        std::mem::take(&mut p.calls)
    };
    for (_, w) in calls {
        let _ = w.send(Err(end.clone()));
    }
}

impl Pipelines {
    /// One attempt of an acquire or release at `addr`: over its pipeline
    /// when the client uses them and the node has them, else unary.
    pub(crate) async fn lock_call(
        &self,
        addr: &str,
        channel: Transport,
        call: Call,
        timeout: Duration,
    ) -> Result<Answer, Status> {
        if self.enabled {
            match self.pipeline(addr, channel.clone(), timeout).await {
                Ok(Some(p)) => return p.call(call, timeout).await,
                Ok(None) => {}
                Err(s) => return Err(s),
            }
        }
        unary(channel, call, timeout).await
    }

    /// The open pipeline to `addr`, opened now if needed; `None` when the
    /// node does not have the method.
    async fn pipeline(
        &self,
        addr: &str,
        channel: Transport,
        timeout: Duration,
    ) -> Result<Option<Arc<Pipeline>>, Status> {
        match self.find(addr) {
            Found::Stream(p) => return Ok(Some(p)),
            Found::UnaryOnly => return Ok(None),
            Found::Nothing => {}
        }
        let _opening = self.opening.lock().await;
        // Another call may have opened it while this one waited.
        match self.find(addr) {
            Found::Stream(p) => return Ok(Some(p)),
            Found::UnaryOnly => return Ok(None),
            Found::Nothing => {}
        }
        // Unbounded: a call must never wait to be sent while answers go
        // unread; the node bounds the calls it runs per connection.
        let (tx, rx) = mpsc::unbounded_channel();
        let opened = tokio::time::timeout(
            timeout,
            LockClient::new(channel)
                .pipeline(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)),
        )
        .await;
        let inbound = match opened {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => {
                tracing::debug!(node = %addr, "no pipeline method; unary calls to this node");
                self.streams.lock().unary_only.insert(addr.to_owned());
                return Ok(None);
            }
            Ok(Err(s)) => return Err(s),
            Err(_) => return Err(Status::cancelled("Timeout expired")),
        };
        let pending = Arc::new(Mutex::new(Pending::default()));
        tokio::spawn(dispatch(inbound, pending.clone()));
        let p = Arc::new(Pipeline {
            tx,
            next_id: AtomicU64::new(1),
            pending,
        });
        self.streams.lock().open.insert(addr.to_owned(), p.clone());
        Ok(Some(p))
    }
}

/// The same call as its own unary RPC.
async fn unary(channel: Transport, call: Call, timeout: Duration) -> Result<Answer, Status> {
    let mut client = LockClient::new(channel);
    match call {
        Call::Acquire(r) => {
            let mut req = tonic::Request::new(r);
            req.set_timeout(timeout);
            Ok(Answer::Acquire(client.acquire(req).await?.into_inner()))
        }
        Call::Release(r) => {
            let mut req = tonic::Request::new(r);
            req.set_timeout(timeout);
            Ok(Answer::Release(client.release(req).await?.into_inner()))
        }
    }
}

/// The acquire answer, or an error if the node answered another call.
pub(crate) fn acquired(a: Answer) -> Result<pb::AcquireResponse, Status> {
    match a {
        Answer::Acquire(r) => Ok(r),
        _ => Err(Status::internal(
            "the answer to an acquire was not an acquire's",
        )),
    }
}

/// The release answer, or an error if the node answered another call.
pub(crate) fn released(a: Answer) -> Result<pb::ReleaseResponse, Status> {
    match a {
        Answer::Release(r) => Ok(r),
        _ => Err(Status::internal(
            "the answer to a release was not a release's",
        )),
    }
}
