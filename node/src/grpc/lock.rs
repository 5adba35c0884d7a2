//! The Lock service over gRPC: convert, call [`Locks`], convert back. The
//! Pipeline stream carries many acquires and releases on one HTTP/2 stream.

use super::service;
use crate::auth::{stream_caller, Access, Caller, StreamCaller};
use crate::limits::ConnectionCounts;
use crate::locks::{Call, Locks};
use crate::wire::convert::watch_response;
use futures::Stream;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::lock_server::Lock as LockApi;
use raftlock_proto::v1::*;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

/// Serves locks.
#[derive(Clone)]
pub struct LockService {
    locks: Locks,
    connections: Arc<ConnectionCounts>,
}

impl LockService {
    /// Serves `locks` over gRPC.
    pub fn new(locks: Locks, connections: Arc<ConnectionCounts>) -> Self {
        LockService { locks, connections }
    }

    /// One Acquire, unary or pipelined.
    async fn acquire_call(
        &self,
        caller: &Caller,
        r: AcquireRequest,
    ) -> Result<AcquireResponse, Status> {
        Ok(r.answer(&self.locks, caller).await?)
    }

    /// One Release, unary or pipelined.
    async fn release_call(
        &self,
        caller: &Caller,
        r: ReleaseRequest,
    ) -> Result<ReleaseResponse, Status> {
        Ok(r.answer(&self.locks, caller).await?)
    }

    /// One call of a Pipeline stream, answered as the unary call would be.
    async fn pipeline_call(
        &self,
        caller: &Caller,
        call: pipeline_request::Call,
    ) -> pipeline_response::Result {
        use pipeline_response::Result as Answer;
        let (method, result) = match call {
            pipeline_request::Call::Acquire(r) => (
                "Lock/Acquire",
                self.acquire_call(caller, r).await.map(Answer::Acquire),
            ),
            pipeline_request::Call::Release(r) => (
                "Lock/Release",
                self.release_call(caller, r).await.map(Answer::Release),
            ),
        };
        // Counted as the unary call would be (the metrics layer sees only
        // the stream), so dashboards read the same whichever path clients use.
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        };
        pipelined_calls(method == "Lock/Release", code).increment(1);
        result.unwrap_or_else(|s| Answer::Error(pipeline_error(&s)))
    }
}

/// `raftlock_grpc_requests_total` of a pipelined acquire or release ending
/// in `code`, registered on first use: looking a labelled counter up on
/// every call hashes its labels each time.
fn pipelined_calls(release: bool, code: tonic::Code) -> &'static metrics::Counter {
    const CODES: usize = 17;
    static COUNTERS: [[OnceLock<metrics::Counter>; CODES]; 2] =
        [const { [const { OnceLock::new() }; CODES] }; 2];
    let method = if release {
        "Lock/Release"
    } else {
        "Lock/Acquire"
    };
    COUNTERS[usize::from(release)][(code as usize).min(CODES - 1)].get_or_init(|| {
        metrics::counter!(
            "raftlock_grpc_requests_total",
            "method" => method,
            "code" => super::metrics::debug_name(code)
        )
    })
}

/// A status as a Pipeline answer, leader hint included.
fn pipeline_error(s: &Status) -> PipelineError {
    PipelineError {
        code: s.code() as i32,
        message: s.message().to_owned(),
        leader: s
            .metadata()
            .get(raftlock_proto::LEADER_METADATA_KEY)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        reason: reason::of(s)
            .map(|r| r.as_str().to_owned())
            .unwrap_or_default(),
    }
}

/// Call `id` refused before it ran.
fn refusal(id: u64, s: &Status) -> PipelineResponse {
    PipelineResponse {
        id,
        result: Some(pipeline_response::Result::Error(pipeline_error(s))),
    }
}

/// A Pipeline stream's state between answers.
struct Pipeline {
    connections: Arc<ConnectionCounts>,
    addr: Option<std::net::SocketAddr>,
    stopping: tokio::sync::watch::Receiver<bool>,
    inbound: Streaming<PipelineRequest>,
    service: Arc<LockService>,
    caller: StreamCaller,
    calls: futures::stream::FuturesUnordered<
        Pin<Box<dyn std::future::Future<Output = PipelineResponse> + Send>>,
    >,
    /// The client has not ended its side yet.
    reading: bool,
    /// The last answer was the stream's end (a stopping node's redirect).
    ended: bool,
}

impl Pipeline {
    /// The next answer to send; `None` ends the stream.
    async fn next_answer(&mut self) -> Option<Result<PipelineResponse, Status>> {
        loop {
            // The client ended its side and every call has answered.
            if self.ended || (!self.reading && self.calls.is_empty()) {
                return None;
            }
            let msg = tokio::select! {
                m = self.inbound.next(), if self.reading => m,
                Some(answer) = self.calls.next(), if !self.calls.is_empty() => {
                    return Some(Ok(answer));
                }
                // A stopping node has handed leadership over: end the
                // stream with the successor's address, as keep-alive
                // streams do, so the client moves its calls there now
                // (a call cut short is retried under its request id).
                _ = async { drop(self.stopping.wait_for(|s| *s).await) } => {
                    self.ended = true;
                    return Some(Err(self.service.locks.replica().not_leader().into()));
                }
            };
            let req = match msg {
                Some(Ok(r)) => r,
                // The client ended its side: calls in progress still
                // answer, then the stream ends.
                None => {
                    self.reading = false;
                    continue;
                }
                Some(Err(s)) => {
                    tracing::debug!(error = %s, "pipeline request stream failed");
                    return None;
                }
            };
            let id = req.id;
            let Some(call) = req.call else {
                let e = reason::status(
                    Reason::InvalidArgument,
                    "a pipeline request needs an acquire or a release",
                );
                return Some(Ok(refusal(id, &e)));
            };
            // Each call holds one of its connection's request slots, as a
            // unary call does, so a stream cannot pin more work.
            let slot = match self.addr {
                Some(a) => match self.connections.request(
                    a,
                    self.service
                        .locks
                        .replica()
                        .limits()
                        .max_concurrent_requests_per_connection,
                ) {
                    Ok(slot) => Some(slot),
                    Err(e) => return Some(Ok(refusal(id, &e))),
                },
                None => None,
            };
            // Each call as its identity stands now: one removed from the
            // auth file since the stream opened is refused as a unary call
            // would be.
            let caller = match self.caller.now() {
                Ok(c) => c,
                Err(e) => return Some(Ok(refusal(id, &Status::from(e)))),
            };
            let service = self.service.clone();
            self.calls.push(Box::pin(async move {
                let _slot = slot;
                PipelineResponse {
                    id,
                    result: Some(service.pipeline_call(&caller, call).await),
                }
            }));
        }
    }
}

/// A watch's answers.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchResponse, Status>> + Send + 'static>>;

/// The answers of a Pipeline stream.
pub type PipelineStream =
    Pin<Box<dyn Stream<Item = Result<PipelineResponse, Status>> + Send + 'static>>;

raftlock_proto::lock_calls!(service! {
    impl LockApi for LockService {
    type WatchStream = WatchStream;

    async fn watch(
        &self,
        req: Request<WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let caller = stream_caller(&req)?;
        let slot = super::stream_slot(
            &self.connections,
            self.locks.replica().limits(),
            req.extensions(),
        )?;
        let r = req.into_inner();
        let events = self
            .locks
            .watch(caller.opened().clone(), r.prefix, r.after_index)?;
        // Each answer goes to the identity as it stands now: ended if the
        // auth file no longer knows it, and without the names it may no
        // longer read.
        let stream = futures::StreamExt::filter_map(events, move |w| {
            let _slot = &slot;
            let answer = match (w, caller.now()) {
                (_, Err(e)) | (Err(e), _) => Some(Err(Status::from(e))),
                (Ok(w), Ok(now)) => {
                    let mut r = watch_response(&w);
                    r.events.retain(|e| now.may(Access::Read, &e.name));
                    (!r.events.is_empty() || w.events.is_empty()).then_some(Ok(r))
                }
            };
            futures::future::ready(answer)
        });
        Ok(Response::new(Box::pin(stream)))
    }

    type PipelineStream = PipelineStream;

    async fn pipeline(
        &self,
        req: Request<Streaming<PipelineRequest>>,
    ) -> Result<Response<Self::PipelineStream>, Status> {
        let caller = stream_caller(&req)?;
        caller.opened().check_any(Access::Lock)?;
        let pipeline = Pipeline {
            connections: self.connections.clone(),
            addr: crate::limits::remote_addr(req.extensions()),
            stopping: self.locks.replica().stopping(),
            inbound: req.into_inner(),
            service: Arc::new(self.clone()),
            caller,
            calls: futures::stream::FuturesUnordered::new(),
            reading: true,
            ended: false,
        };
        // The answers are the stream itself, polled by the task hyper runs
        // for the HTTP/2 stream: the calls run there too, with no task of
        // their own and no channel between them and the answer's write. A
        // task in between cost a wake-up and a hand-off per answer. When
        // the client goes away the stream is dropped, and with it its calls
        // (a waiting acquire stops waiting, as a cancelled unary call's
        // would); while the client does not read answers the stream is not
        // polled, so its requests wait in HTTP/2 flow control.
        Ok(Response::new(Box::pin(futures::stream::unfold(
            pipeline,
            |mut p| async move { p.next_answer().await.map(|answer| (answer, p)) },
        ))))
    }
    }
});
