//! Watching locks: every grant, handoff, release, expiry and force-release
//! under a prefix, resumed across reconnects and leader changes without a
//! gap or a repeat.

use crate::client::Client;
use crate::error::Error;
use crate::types::Mode;
use futures::Stream;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::lock_client::LockClient;
use serde::Serialize;

/// What happened to a lock.
///
/// ```
/// assert_ne!(raftlock_client::LockEventKind::Granted, raftlock_client::LockEventKind::Handoff);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum LockEventKind {
    /// Granted to an acquire at once.
    Granted,
    /// Granted to a waiter by the command that freed the lock.
    Handoff,
    /// Released by its holder, or by the holder closing its session.
    Released,
    /// Released because the holder's session expired.
    Expired,
    /// Taken away by an administrator.
    ForceReleased,
    /// Released by the leader because the hold's cap ran out.
    HoldExpired,
    /// A lock-delay started: nobody is granted the lock until it ends.
    LockDelayStarted,
    /// A lock-delay ended; the waiters it held back are granted next.
    LockDelayEnded,
}

/// One change of one lock's holders.
///
/// ```no_run
/// # fn f(e: raftlock_client::LockEvent) { println!("{:?} {} session {} token {}", e.kind, e.name, e.session_id, e.token); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LockEvent {
    /// What happened.
    pub kind: LockEventKind,
    /// Lock name.
    pub name: String,
    /// The session that got or lost the lock.
    pub session_id: u64,
    /// The grant's fencing token.
    pub token: u64,
    /// How it is held (grants and handoffs).
    pub mode: Mode,
    /// The holder's metadata (grants and handoffs), as in [`crate::Grant`].
    #[serde(serialize_with = "crate::types::bytes_as_text")]
    pub metadata: Vec<u8>,
    /// Permits taken (grants and handoffs).
    pub count: u32,
    /// How long a lock-delay lasts, ms ([`LockEventKind::LockDelayStarted`]).
    pub lock_delay_ms: u64,
}

/// The events one applied command caused under the watched prefix.
///
/// ```no_run
/// # fn f(b: raftlock_client::WatchBatch) { println!("at index {}: {} events", b.index, b.events.len()); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchBatch {
    /// The command's index: what a watch resumes after.
    pub index: u64,
    /// When the leader proposed it (its wall clock, Unix ms).
    pub at_ms: u64,
    /// The events, in order.
    pub events: Vec<LockEvent>,
}

impl From<pb::WatchResponse> for WatchBatch {
    fn from(r: pb::WatchResponse) -> Self {
        WatchBatch {
            index: r.index,
            at_ms: r.at_ms,
            events: r
                .events
                .into_iter()
                .map(|e| LockEvent {
                    kind: match pb::LockEventKind::try_from(e.kind) {
                        Ok(pb::LockEventKind::Handoff) => LockEventKind::Handoff,
                        Ok(pb::LockEventKind::Released) => LockEventKind::Released,
                        Ok(pb::LockEventKind::Expired) => LockEventKind::Expired,
                        Ok(pb::LockEventKind::ForceReleased) => LockEventKind::ForceReleased,
                        Ok(pb::LockEventKind::HoldExpired) => LockEventKind::HoldExpired,
                        Ok(pb::LockEventKind::LockDelayStarted) => LockEventKind::LockDelayStarted,
                        Ok(pb::LockEventKind::LockDelayEnded) => LockEventKind::LockDelayEnded,
                        _ => LockEventKind::Granted,
                    },
                    name: e.name,
                    session_id: e.session_id,
                    token: e.token,
                    mode: crate::types::mode_from_pb(e.mode),
                    metadata: e.metadata,
                    count: e.count.max(1),
                    lock_delay_ms: e.lock_delay_ms,
                })
                .collect(),
        }
    }
}

impl Client {
    /// Every change of lock holders under `prefix` from now on, in log
    /// order. The stream reconnects by itself (to another node if its node
    /// goes away) and resumes after the last command it delivered, so no
    /// event is missed or repeated. It ends with
    /// [`Error::WatchCompacted`] if it was away longer than the node's
    /// history reaches (read the state afresh with [`Client::list`] and
    /// watch again), or with the error of a refusal (bad prefix, no right).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// use futures::StreamExt;
    /// let mut events = client.watch("deploy/");
    /// while let Some(batch) = events.next().await {
    ///     for e in batch?.events {
    ///         println!("{:?} {} by session {} (token {})", e.kind, e.name, e.session_id, e.token);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(
        &self,
        prefix: impl Into<String>,
    ) -> impl Stream<Item = Result<WatchBatch, Error>> + Send + 'static {
        self.watch_after(prefix, 0)
    }

    /// [`Client::watch`] resuming after `index` (a [`WatchBatch::index`]
    /// seen before, say by an earlier run of this program); 0 is from now.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client, saved: u64) {
    /// let events = client.watch_after("deploy/", saved);
    /// # }
    /// ```
    pub fn watch_after(
        &self,
        prefix: impl Into<String>,
        index: u64,
    ) -> impl Stream<Item = Result<WatchBatch, Error>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(watch(self.clone(), prefix.into(), index, tx));
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }
}

/// Refusals a reconnect would only get again.
fn fatal(s: &tonic::Status) -> bool {
    matches!(
        reason::of(s),
        Some(
            Reason::WatchCompacted
                | Reason::InvalidName
                | Reason::InvalidArgument
                | Reason::PermissionDenied
                | Reason::Unauthenticated
        )
    ) || matches!(
        s.code(),
        tonic::Code::InvalidArgument
            | tonic::Code::PermissionDenied
            | tonic::Code::Unauthenticated
            | tonic::Code::Unimplemented
    )
}

async fn watch(
    client: Client,
    prefix: String,
    mut after: u64,
    tx: tokio::sync::mpsc::Sender<Result<WatchBatch, Error>>,
) {
    let opts = client.options().clone();
    let cluster = &client.inner.cluster;
    let mut backoff = opts.initial_backoff;
    loop {
        let addr = cluster.target();
        let Ok(channel) = cluster.channel(&addr) else {
            return;
        };
        // No grpc-timeout: it would bound the whole stream, not its opening.
        let req = pb::WatchRequest {
            prefix: prefix.clone(),
            after_index: after,
        };
        let mut api = LockClient::new(channel);
        let opened = tokio::select! {
            _ = tx.closed() => return,
            r = tokio::time::timeout(opts.attempt_timeout, api.watch(req)) => {
                r.unwrap_or_else(|_| Err(tonic::Status::unavailable(format!("{addr} did not answer in time"))))
            }
        };
        let ended = match opened {
            Ok(resp) => {
                let mut inbound = resp.into_inner();
                loop {
                    let msg = tokio::select! {
                        _ = tx.closed() => return,
                        m = inbound.message() => m,
                    };
                    match msg {
                        Ok(Some(r)) => {
                            backoff = opts.initial_backoff;
                            // The opening answer carries only where the
                            // watch starts: the point to resume after.
                            after = after.max(r.index);
                            if !r.events.is_empty() && tx.send(Ok(r.into())).await.is_err() {
                                return;
                            }
                        }
                        Ok(None) => break None,
                        Err(s) => break Some(s),
                    }
                }
            }
            Err(s) => Some(s),
        };
        if let Some(s) = ended {
            if fatal(&s) {
                let _ = tx
                    .send(Err(Error::from_status(&s, None, Some(&prefix))))
                    .await;
                return;
            }
            tracing::debug!(prefix = %prefix, node = %addr, error = %s.message(), "watch stream ended; resuming");
            cluster.learn(&addr, &s);
        }
        cluster.forget_leader(&addr);
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(opts.max_backoff);
    }
}
