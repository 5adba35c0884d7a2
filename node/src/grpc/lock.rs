//! The Lock service. Acquire waits server-side: the call registers its wait
//! before proposing, so the grant made by a later Release or expiry reaches
//! it in the same entry, with no polling by the client.

use super::convert::{self, grant, status, waiter};
use crate::auth::Caller;
use crate::auth::{caller, Access};
use crate::node::{Node, NodeError};
use crate::waits::{WaitResult, Waits};
use futures::Stream;
use raftlock_proto::limits;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::lock_server::Lock as LockApi;
use raftlock_proto::v1::*;
use raftlock_store::machine::{Command, Grant, LeaseError, Mode, Reply, RequestId, WaitEnd};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

/// Answers a Pipeline stream may have waiting to be sent before its calls
/// wait for the client to read them.
const PIPELINE_ANSWERS_BUFFERED: usize = 1024;

/// Serves locks.
pub struct LockService {
    node: Arc<Node>,
    waits: Arc<Waits>,
}

/// An acquisition as the services ask for it.
pub struct AcquireArgs {
    /// Session.
    pub session: u64,
    /// Lock name.
    pub name: String,
    /// Request id.
    pub request_id: RequestId,
    /// Mode.
    pub mode: Mode,
    /// Stated permits.
    pub permits: Option<u32>,
    /// Wait, if any.
    pub wait: Option<Duration>,
    /// Metadata.
    pub metadata: Vec<u8>,
    /// The session's exactly-once numbering, if the client uses it.
    pub sequence: Option<convert::Sequence>,
}

/// The result of an acquisition.
pub enum Acquired {
    /// Held.
    Granted(Grant),
    /// A try-lock found these holders.
    Busy(Vec<Grant>),
}

impl LockService {
    /// Serves locks of `node`, waking waiters through `waits`.
    pub fn new(node: Arc<Node>, waits: Arc<Waits>) -> Self {
        LockService { node, waits }
    }
}

/// Acquires a lock, waiting in the queue when asked to. Shared by Lock and
/// Election (a campaign is an acquire that waits).
pub async fn acquire(
    node: &Node,
    waits: &Arc<Waits>,
    a: AcquireArgs,
) -> Result<Acquired, NodeError> {
    check_acquire_limits(node, &a)?;
    let started = tokio::time::Instant::now();
    let mut registration = waits.register(a.session, &a.name, a.request_id);
    let mut cmd = Command::Acquire {
        session: a.session,
        name: a.name.clone(),
        request_id: a.request_id,
        mode: a.mode,
        permits: a.permits,
        wait_ms: a.wait.map(|d| d.as_millis() as u64),
        metadata: a.metadata.clone(),
    };
    if let Some(s) = a.sequence {
        cmd = Command::Sequenced {
            seq: s.seq,
            acked_below: s.acked_below,
            command: Box::new(cmd),
        };
    }
    match node.propose_reply(cmd).await? {
        (_, Reply::Acquired(g)) => return Ok(Acquired::Granted(g)),
        (_, Reply::Busy { holders }) => return Ok(Acquired::Busy(holders)),
        (_, Reply::Queued { position }) => {
            tracing::debug!(position, "queued");
        }
        (_, other) => return Err(NodeError::Stopped(format!("unexpected reply {other}"))),
    }
    let deadline = started + a.wait.unwrap_or_default();
    let waited = async {
        loop {
            let woke = tokio::select! {
                r = &mut registration.rx => r.unwrap_or(WaitResult::Recheck),
                _ = tokio::time::sleep_until(deadline) => {
                    // The leader's driver cancels overdue waits too; cancelling
                    // here as well answers the caller on time. A grant that won
                    // the race comes back as the cancel's reply.
                    return match node.propose_reply(Command::CancelWait {
                        session: a.session, name: a.name.clone(), request_id: a.request_id,
                    }).await {
                        Ok((_, Reply::Acquired(g))) => Ok(Acquired::Granted(g)),
                        Ok(_) | Err(NodeError::Lease(LeaseError::WaitNotFound { .. })) => {
                            recheck(node, &a).map(Acquired::Granted).ok_or(NodeError::WaitTimedOut(a.name.clone()))
                        }
                        Err(e) => Err(e),
                    };
                }
            };
            match woke {
                WaitResult::Granted(g) => return Ok(Acquired::Granted(g)),
                WaitResult::Ended(WaitEnd::Cancelled) => return Err(NodeError::WaitTimedOut(a.name)),
                WaitResult::Ended(WaitEnd::SessionEnded) => {
                    return Err(LeaseError::SessionNotFound(a.session).into())
                }
                WaitResult::Recheck => {
                    registration = waits.register(a.session, &a.name, a.request_id);
                    if let Some(g) = recheck(node, &a) {
                        return Ok(Acquired::Granted(g));
                    }
                    let state = node.state.read();
                    let still_waiting = state
                        .machine
                        .session(a.session)
                        .is_some_and(|s| s.waiting.get(&a.name) == Some(&a.request_id));
                    if !still_waiting {
                        return Err(NodeError::WaitTimedOut(a.name));
                    }
                }
            }
        }
    }
    .await;
    if let Ok(Acquired::Granted(_)) = &waited {
        metrics::histogram!("raftlock_wait_seconds").record(started.elapsed().as_secs_f64());
    }
    waited
}

/// The operator's limits on locks per session and waiters per lock. A
/// retry of an acquisition the session already holds or waits with passes,
/// so that limits never break idempotent retries.
fn check_acquire_limits(node: &Node, a: &AcquireArgs) -> Result<(), NodeError> {
    let state = node.state.read();
    let Some(s) = state.machine.session(a.session) else {
        return Ok(()); // the state machine answers NOT_FOUND
    };
    if s.held.contains_key(&a.name) || s.waiting.contains_key(&a.name) {
        return Ok(());
    }
    let limits = &node.limits;
    if s.held.len() + s.waiting.len() >= limits.max_locks_per_session {
        // The same refusal the state machine gives at its own bound.
        return Err(NodeError::Lease(LeaseError::TooManyLocks {
            session: a.session,
            max: limits.max_locks_per_session,
        }));
    }
    if a.wait.is_some() {
        if let Some(lock) = state.machine.lock(&a.name) {
            if lock.waiters.len() >= limits.max_waiters_per_lock {
                return Err(NodeError::Lease(LeaseError::TooManyWaiters {
                    name: a.name.clone(),
                    max: limits.max_waiters_per_lock,
                }));
            }
        }
    }
    Ok(())
}

/// The grant this acquisition holds now, if any.
fn recheck(node: &Node, a: &AcquireArgs) -> Option<Grant> {
    let state = node.state.read();
    state
        .machine
        .describe(&a.name)
        .holders
        .into_iter()
        .find(|h| h.session == a.session && h.request_id == a.request_id)
}

fn term(node: &Node) -> u64 {
    node.raft.metrics().borrow().current_term
}

impl LockService {
    /// One Acquire, unary or pipelined: the same checks, span and answer.
    async fn acquire_call(
        &self,
        caller: &Caller,
        r: AcquireRequest,
    ) -> Result<AcquireResponse, Status> {
        let span = tracing::info_span!("lock.acquire", node = self.node.id, term = term(&self.node), lock = %r.name, session = r.session_id, identity = caller.name(), token = tracing::field::Empty);
        async {
            convert::lock_name(&r.name)?;
            convert::session_id(r.session_id)?;
            convert::metadata("metadata", &r.metadata)?;
            caller.check(Access::Lock, &r.name)?;
            if let Some(w) = r.wait_timeout_ms {
                self.node.limits.check_wait(w)?;
            }
            self.node
                .check_session_owner(r.session_id, caller)
                .await
                .map_err(status)?;
            let args = AcquireArgs {
                session: convert::session_id(r.session_id)?,
                request_id: convert::request_id(&r.request_id)?,
                mode: convert::mode(r.mode)?,
                permits: (r.permits > 0).then_some(r.permits),
                wait: r.wait_timeout_ms.map(Duration::from_millis),
                metadata: r.metadata,
                name: r.name,
                sequence: convert::sequence(r.seq, r.acked_below)?,
            };
            match acquire(&self.node, &self.waits, args)
                .await
                .map_err(status)?
            {
                Acquired::Granted(g) => {
                    tracing::Span::current().record("token", g.token);
                    Ok(AcquireResponse {
                        grant: Some(grant(&g)),
                        acquired: true,
                        holders: vec![],
                    })
                }
                Acquired::Busy(holders) => Ok(AcquireResponse {
                    grant: None,
                    acquired: false,
                    holders: holders.iter().map(grant).collect(),
                }),
            }
        }
        .instrument(span)
        .await
    }

    /// One Release, unary or pipelined.
    async fn release_call(
        &self,
        caller: &Caller,
        r: ReleaseRequest,
    ) -> Result<ReleaseResponse, Status> {
        let span = tracing::info_span!("lock.release", node = self.node.id, term = term(&self.node), lock = %r.name, session = r.session_id, identity = caller.name(), token = r.token);
        async {
            convert::lock_name(&r.name)?;
            caller.check(Access::Lock, &r.name)?;
            self.node
                .check_session_owner(r.session_id, caller)
                .await
                .map_err(status)?;
            let cmd = Command::Release {
                session: convert::session_id(r.session_id)?,
                name: r.name,
                token: r.token,
            };
            match self.node.propose_reply(cmd).await.map_err(status)? {
                (_, Reply::Released { granted }) => Ok(ReleaseResponse {
                    granted: granted.iter().map(grant).collect(),
                }),
                (_, other) => Err(reason::status(
                    Reason::Internal,
                    format!("unexpected reply {other}"),
                )),
            }
        }
        .instrument(span)
        .await
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
        metrics::counter!("raftlock_grpc_requests_total", "method" => method, "code" => format!("{code:?}")).increment(1);
        result.unwrap_or_else(|s| Answer::Error(pipeline_error(&s)))
    }
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

/// The answers of a Pipeline stream.
pub type PipelineStream =
    Pin<Box<dyn Stream<Item = Result<PipelineResponse, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl LockApi for LockService {
    async fn acquire(
        &self,
        req: Request<AcquireRequest>,
    ) -> Result<Response<AcquireResponse>, Status> {
        let caller = caller(&req)?;
        self.acquire_call(&caller, req.into_inner())
            .await
            .map(Response::new)
    }

    async fn release(
        &self,
        req: Request<ReleaseRequest>,
    ) -> Result<Response<ReleaseResponse>, Status> {
        let caller = caller(&req)?;
        self.release_call(&caller, req.into_inner())
            .await
            .map(Response::new)
    }

    type PipelineStream = PipelineStream;

    async fn pipeline(
        &self,
        req: Request<Streaming<PipelineRequest>>,
    ) -> Result<Response<Self::PipelineStream>, Status> {
        let caller = caller(&req)?;
        caller.check_any(Access::Lock)?;
        let addr = crate::limits::remote_addr(req.extensions());
        let mut inbound = req.into_inner();
        let service = LockService {
            node: self.node.clone(),
            waits: self.waits.clone(),
        };
        let (tx, rx) = mpsc::channel::<Result<PipelineResponse, Status>>(PIPELINE_ANSWERS_BUFFERED);
        let mut stopping = self.node.stopping.clone();
        tokio::spawn(async move {
            let service = Arc::new(service);
            loop {
                let msg = tokio::select! {
                    m = inbound.next() => m,
                    // The client is gone: stop reading for it.
                    _ = tx.closed() => return,
                    // A stopping node has handed leadership over: end the
                    // stream with the successor's address, as keep-alive
                    // streams do, so the client moves its calls there now
                    // (a call cut short is retried under its request id).
                    _ = async { drop(stopping.wait_for(|s| *s).await) } => {
                        let _ = tx.send(Err(status(service.node.not_leader()))).await;
                        return;
                    }
                };
                let req = match msg {
                    Some(Ok(r)) => r,
                    // The client ended its side: calls in progress still
                    // answer, then the stream ends when the last sender goes.
                    None => return,
                    Some(Err(s)) => {
                        tracing::debug!(error = %s, "pipeline request stream failed");
                        return;
                    }
                };
                let id = req.id;
                let Some(call) = req.call else {
                    let e = reason::status(
                        Reason::InvalidArgument,
                        "a pipeline request needs an acquire or a release",
                    );
                    let _ = tx.send(Ok(refusal(id, &e))).await;
                    continue;
                };
                // Each call holds one of its connection's request slots, as
                // a unary call does, so a stream cannot pin more work.
                let slot = match addr {
                    Some(a) => match service.node.connections.request(
                        a,
                        service.node.limits.max_concurrent_requests_per_connection,
                    ) {
                        Ok(slot) => Some(slot),
                        Err(e) => {
                            let _ = tx.send(Ok(refusal(id, &e))).await;
                            continue;
                        }
                    },
                    None => None,
                };
                let (service, caller, tx) = (service.clone(), caller.clone(), tx.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    let answer = tokio::select! {
                        a = service.pipeline_call(&caller, call) => a,
                        // Nobody is left to answer: a waiting acquire stops
                        // waiting, as a cancelled unary call's would.
                        _ = tx.closed() => return,
                    };
                    let _ = tx
                        .send(Ok(PipelineResponse {
                            id,
                            result: Some(answer),
                        }))
                        .await;
                });
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn describe(
        &self,
        req: Request<DescribeRequest>,
    ) -> Result<Response<DescribeResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        convert::lock_name(&r.name)?;
        caller.check(Access::Read, &r.name)?;
        self.node.linearizable().await.map_err(status)?;
        let state = self.node.state.read();
        let view = state.machine.describe(&r.name);
        Ok(Response::new(DescribeResponse {
            name: r.name,
            permits: view.permits.unwrap_or(0),
            holders: view.holders.iter().map(grant).collect(),
            waiters: view.waiters.iter().map(waiter).collect(),
            applied_index: state.last_applied.map(|l| l.index).unwrap_or(0),
        }))
    }

    async fn list(&self, req: Request<ListRequest>) -> Result<Response<ListResponse>, Status> {
        let caller = caller(&req)?;
        caller.check_any(Access::Read)?;
        let r = req.into_inner();
        let limit = match r.limit {
            0 => limits::DEFAULT_LIST_LIMIT,
            n => n.min(limits::MAX_LIST_LIMIT),
        } as usize;
        self.node.linearizable().await.map_err(status)?;
        let state = self.node.state.read();
        let mut page = state.machine.list(&r.prefix, &r.page_token, limit + 1);
        let more = page.len() > limit;
        page.truncate(limit);
        // The page token is the last name scanned, readable or not, so a
        // page thinned by the filter below still leads to the next one.
        let next_page_token = match page.last() {
            Some(l) if more => l.name.clone(),
            _ => String::new(),
        };
        // Names the caller may not read are left out, as if absent.
        let locks: Vec<LockSummary> = page
            .into_iter()
            .filter(|l| caller.may(Access::Read, &l.name))
            .map(|l| LockSummary {
                holders: l.holders.iter().map(grant).collect(),
                waiters: l.waiters as u32,
                name: l.name,
            })
            .collect();
        Ok(Response::new(ListResponse {
            locks,
            next_page_token,
        }))
    }

    async fn validate(
        &self,
        req: Request<ValidateRequest>,
    ) -> Result<Response<ValidateResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        convert::lock_name(&r.name)?;
        caller.check(Access::Read, &r.name)?;
        self.node.linearizable().await.map_err(status)?;
        let v = self.node.state.read().machine.validate(&r.name, r.token);
        Ok(Response::new(ValidateResponse {
            valid: v.valid,
            current_token: v.current_token,
        }))
    }

    async fn force_release(
        &self,
        req: Request<ForceReleaseRequest>,
    ) -> Result<Response<ForceReleaseResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let span = tracing::info_span!("lock.force_release", node = self.node.id, term = term(&self.node), lock = %r.name, identity = caller.name(), token = tracing::field::Empty);
        async {
            convert::lock_name(&r.name)?;
            caller.check(Access::Admin, &r.name)?;
            let cmd = Command::ForceRelease {
                name: r.name.clone(),
            };
            match self.node.propose_reply(cmd).await.map_err(status)? {
                (index, Reply::ForceReleased { released, granted }) => {
                    metrics::counter!("raftlock_force_releases_total").increment(1);
                    for g in &released {
                        tracing::warn!(
                            lock = %r.name,
                            session = g.session,
                            token = g.token,
                            identity = caller.name(),
                            log_index = index,
                            "lock force-released by an administrator"
                        );
                    }
                    if let Some(g) = granted.first() {
                        tracing::Span::current().record("token", g.token);
                    }
                    Ok(Response::new(ForceReleaseResponse {
                        released: released.iter().map(grant).collect(),
                        granted: granted.iter().map(grant).collect(),
                    }))
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
