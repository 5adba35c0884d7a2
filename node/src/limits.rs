//! Limits against exhaustion, so one careless or hostile client degrades
//! only itself: sizes of requests and metadata, TTL and wait bounds,
//! sessions per identity, locks per session, waiters per lock, and
//! streams and concurrent requests per connection.
//!
//! The state machine has hard ceilings of its own (`raftlock_proto::limits`)
//! that every replica applies alike; these are the operator's, checked by
//! the node that takes the request, and may only be tighter.

use crate::error::{ConfigError, NodeError};
use clap::Args;
use parking_lot::Mutex;
use raftlock_proto::limits as hard;
use raftlock_proto::reason::{self, Reason};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tonic::Status;

/// Limit flags (also the `[limits]` table of the config file).
#[derive(Args, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitArgs {
    /// Largest gRPC request message on the client port, in bytes [default: 65536].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<usize>,
    /// Largest total of request headers (gRPC metadata), in bytes [default: 8192].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_metadata_bytes: Option<u32>,
    /// Shortest session TTL a client may ask for, in ms [default: 1000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ttl_ms: Option<u64>,
    /// Longest session TTL a client may ask for, in ms [default: 600000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ttl_ms: Option<u64>,
    /// Longest wait an Acquire or Campaign may ask for, in ms [default: 3600000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// Longest an AddLearner that asked to wait for the learner to catch up
    /// waits before it answers LEARNER_NOT_CAUGHT_UP, in ms [default: 120000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_learner_wait_ms: Option<u64>,
    /// Most live sessions one identity may have; without authentication,
    /// all callers together [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions_per_identity: Option<u64>,
    /// Most locks one session may hold or wait for at once [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_locks_per_session: Option<usize>,
    /// Most waiters queued on one lock [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_waiters_per_lock: Option<usize>,
    /// Most streams (keep-alive and observe) open on one client connection
    /// [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_keepalive_streams_per_connection: Option<usize>,
    /// Most requests in progress on one client connection, streams
    /// included [default: 2000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_requests_per_connection: Option<usize>,
    /// Hold cap of the locks under a prefix, as PREFIX=DEFAULT_MS or
    /// PREFIX=DEFAULT_MS:MAX_MS (repeatable; the longest matching prefix
    /// applies). Acquisitions that set no cap get DEFAULT_MS (0: none);
    /// none may set more than MAX_MS.
    #[arg(long, value_name = "PREFIX=DEFAULT_MS[:MAX_MS]")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_cap: Option<Vec<String>>,
}

/// The hold cap of the locks under one prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldCap {
    /// Names that start with this.
    pub prefix: String,
    /// What an acquisition that sets no cap gets, ms (0: none).
    pub default_ms: u64,
    /// The longest cap an acquisition may set, ms (0: the hard limit).
    pub max_ms: u64,
}

impl std::str::FromStr for HoldCap {
    type Err = String;
    fn from_str(rule: &str) -> Result<Self, String> {
        let (prefix, caps) = rule
            .rsplit_once('=')
            .ok_or_else(|| format!("{rule:?} is not PREFIX=DEFAULT_MS[:MAX_MS]"))?;
        let (default, max) = caps.split_once(':').unwrap_or((caps, "0"));
        let ms = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{v:?} in {rule:?} is not a number of ms"))
        };
        let cap = HoldCap {
            prefix: prefix.to_owned(),
            default_ms: ms(default)?,
            max_ms: ms(max)?,
        };
        for v in [cap.default_ms, cap.max_ms] {
            if v != 0 && !(hard::MIN_HOLD_MS..=hard::MAX_HOLD_MS).contains(&v) {
                return Err(format!(
                    "{v} ms in {rule:?} is out of range {}..={} ms",
                    hard::MIN_HOLD_MS,
                    hard::MAX_HOLD_MS
                ));
            }
        }
        if cap.max_ms != 0 && cap.default_ms > cap.max_ms {
            return Err(format!("{rule:?}: the default is above the maximum"));
        }
        Ok(cap)
    }
}

/// The limits a node applies.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request message.
    pub max_request_bytes: usize,
    /// Largest header list.
    pub max_metadata_bytes: u32,
    /// Shortest TTL.
    pub min_ttl_ms: u64,
    /// Longest TTL.
    pub max_ttl_ms: u64,
    /// Longest wait.
    pub max_wait_ms: u64,
    /// Longest wait for a learner to catch up.
    pub max_learner_wait_ms: u64,
    /// Sessions per identity.
    pub max_sessions_per_identity: u64,
    /// Locks held or waited for per session.
    pub max_locks_per_session: usize,
    /// Waiters per lock.
    pub max_waiters_per_lock: usize,
    /// Keep-alive streams per connection.
    pub max_keepalive_streams_per_connection: usize,
    /// Requests in progress per connection.
    pub max_concurrent_requests_per_connection: usize,
    /// Hold caps by prefix, as written (`--hold-cap`).
    pub hold_cap: Vec<String>,
    /// The same, read by `check`.
    #[serde(skip)]
    pub hold_caps: Vec<HoldCap>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 64 << 10,
            max_metadata_bytes: 8 << 10,
            min_ttl_ms: hard::MIN_TTL_MS,
            max_ttl_ms: hard::MAX_TTL_MS,
            max_wait_ms: hard::MAX_WAIT_MS,
            max_learner_wait_ms: 120_000,
            max_sessions_per_identity: 10_000,
            max_locks_per_session: hard::MAX_LOCKS_PER_SESSION,
            max_waiters_per_lock: hard::MAX_WAITERS_PER_LOCK,
            // The client library keeps one stream per session, and one
            // identity may hold 10,000 sessions: a service holding that many
            // over one connection must not lose them to this limit.
            max_keepalive_streams_per_connection: 10_000,
            max_concurrent_requests_per_connection: 2_000,
            hold_cap: Vec::new(),
            hold_caps: Vec::new(),
        }
    }
}

impl Limits {
    /// Checks the operator's limits against the state machine's ceilings.
    pub fn check(self) -> Result<Limits, ConfigError> {
        let mut l = self;
        l.hold_caps = l
            .hold_cap
            .iter()
            .map(|r| r.parse())
            .collect::<Result<_, String>>()
            .map_err(|reason| ConfigError::Invalid {
                setting: "--hold-cap",
                reason,
            })?;
        let bad = |setting, reason: String| Err(ConfigError::Invalid { setting, reason });
        if l.max_request_bytes < 1024 {
            return bad("--max-request-bytes", "must be at least 1024".into());
        }
        if l.max_metadata_bytes < 1024 {
            return bad("--max-metadata-bytes", "must be at least 1024".into());
        }
        if l.min_ttl_ms < hard::MIN_TTL_MS || l.max_ttl_ms > hard::MAX_TTL_MS {
            return bad(
                "--min-ttl-ms/--max-ttl-ms",
                format!(
                    "must lie within {}..={} ms",
                    hard::MIN_TTL_MS,
                    hard::MAX_TTL_MS
                ),
            );
        }
        if l.min_ttl_ms > l.max_ttl_ms {
            return bad("--min-ttl-ms", "is more than --max-ttl-ms".into());
        }
        if l.max_wait_ms > hard::MAX_WAIT_MS {
            return bad(
                "--max-wait-ms",
                format!("must be at most {} ms", hard::MAX_WAIT_MS),
            );
        }
        if !(1_000..=hard::MAX_WAIT_MS).contains(&l.max_learner_wait_ms) {
            return bad(
                "--max-learner-wait-ms",
                format!("must lie within 1000..={} ms", hard::MAX_WAIT_MS),
            );
        }
        if l.max_locks_per_session == 0 || l.max_locks_per_session > hard::MAX_LOCKS_PER_SESSION {
            return bad(
                "--max-locks-per-session",
                format!("must lie within 1..={}", hard::MAX_LOCKS_PER_SESSION),
            );
        }
        if l.max_waiters_per_lock > hard::MAX_WAITERS_PER_LOCK {
            return bad(
                "--max-waiters-per-lock",
                format!("must be at most {}", hard::MAX_WAITERS_PER_LOCK),
            );
        }
        if l.max_sessions_per_identity == 0
            || l.max_keepalive_streams_per_connection == 0
            || l.max_concurrent_requests_per_connection == 0
        {
            return bad(
                "--max-sessions-per-identity/--max-*-per-connection",
                "must be at least 1".into(),
            );
        }
        Ok(l)
    }
}

impl Limits {
    /// A session TTL within the operator's bounds.
    pub fn check_ttl(&self, ttl_ms: u64) -> Result<(), NodeError> {
        if ttl_ms < self.min_ttl_ms || ttl_ms > self.max_ttl_ms {
            return Err(NodeError::TtlOutOfRange {
                ttl_ms,
                min_ms: self.min_ttl_ms,
                max_ms: self.max_ttl_ms,
            });
        }
        Ok(())
    }

    /// The hold cap an acquisition of `name` gets: the one it set, or the
    /// operator's default for the name's prefix; a cap above the prefix's
    /// maximum is refused.
    pub fn hold_cap(&self, name: &str, asked_ms: u64) -> Result<u64, NodeError> {
        let Some(rule) = self
            .hold_caps
            .iter()
            .filter(|r| name.starts_with(&r.prefix))
            .max_by_key(|r| r.prefix.len())
        else {
            return Ok(asked_ms);
        };
        if rule.max_ms != 0 && asked_ms > rule.max_ms {
            return Err(NodeError::InvalidArgument(format!(
                "max_hold_ms {asked_ms} is more than the {} ms this cluster allows under {:?}",
                rule.max_ms, rule.prefix
            )));
        }
        Ok(if asked_ms == 0 {
            rule.default_ms
        } else {
            asked_ms
        })
    }

    /// A wait within the operator's bound.
    pub fn check_wait(&self, wait_ms: u64) -> Result<(), NodeError> {
        if wait_ms > self.max_wait_ms {
            return Err(NodeError::InvalidArgument(format!(
                "wait_timeout_ms {wait_ms} is more than the limit of {} ms",
                self.max_wait_ms
            )));
        }
        Ok(())
    }
}

/// Counts what each client connection has open.
#[derive(Default)]
pub struct ConnectionCounts {
    requests: Mutex<HashMap<SocketAddr, usize>>,
    streams: Mutex<HashMap<SocketAddr, usize>>,
}

/// One unit of a connection's count, given back on drop.
pub struct Slot {
    counts: Arc<ConnectionCounts>,
    addr: SocketAddr,
    stream: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let map = if self.stream {
            &self.counts.streams
        } else {
            &self.counts.requests
        };
        let mut map = map.lock();
        if let Some(n) = map.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.addr);
            }
        }
    }
}

impl ConnectionCounts {
    fn take(
        self: &Arc<Self>,
        addr: SocketAddr,
        stream: bool,
        limit: usize,
        what: &str,
    ) -> Result<Slot, Status> {
        let map = if stream {
            &self.streams
        } else {
            &self.requests
        };
        let mut map = map.lock();
        let n = map.entry(addr).or_default();
        if *n >= limit {
            metrics::counter!("raftlock_limit_refusals_total", "limit" => what.to_owned())
                .increment(1);
            return Err(reason::status(Reason::LimitExceeded, format!(
                "too many {what} on this connection (limit {limit}); wait for some to finish or open another connection"
            )));
        }
        *n += 1;
        Ok(Slot {
            counts: self.clone(),
            addr,
            stream,
        })
    }

    /// Admits one more request from `addr`, or RESOURCE_EXHAUSTED.
    pub fn request(self: &Arc<Self>, addr: SocketAddr, limit: usize) -> Result<Slot, Status> {
        self.take(addr, false, limit, "concurrent requests")
    }

    /// Admits one more long-lived stream (keep-alive or observe) from `addr`, or RESOURCE_EXHAUSTED.
    pub fn stream(self: &Arc<Self>, addr: SocketAddr, limit: usize) -> Result<Slot, Status> {
        self.take(addr, true, limit, "open streams (keep-alive and observe)")
    }
}

/// The remote address of the connection a request came on.
pub fn remote_addr(ext: &http::Extensions) -> Option<SocketAddr> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    ext.get::<TcpConnectInfo>()
        .and_then(|i| i.remote_addr())
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
        })
}

/// A layer that refuses a request with RESOURCE_EXHAUSTED when its
/// connection already has the most requests in progress it may have.
#[derive(Clone)]
pub struct ConnectionLimitLayer {
    /// Shared counts.
    pub counts: Arc<ConnectionCounts>,
    /// Requests in progress per connection.
    pub limit: usize,
}

impl<S> tower::Layer<S> for ConnectionLimitLayer {
    type Service = ConnectionLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ConnectionLimit {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`ConnectionLimitLayer`].
#[derive(Clone)]
pub struct ConnectionLimit<S> {
    inner: S,
    layer: ConnectionLimitLayer,
}

impl<S, B> tower::Service<http::Request<B>> for ConnectionLimit<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let slot = match remote_addr(req.extensions()) {
            Some(addr) => match self.layer.counts.request(addr, self.layer.limit) {
                Ok(slot) => Some(slot),
                Err(status) => {
                    tracing::info!(remote = %addr, "request refused: {}", status.message());
                    return Box::pin(async move { Ok(status.into_http()) });
                }
            },
            None => None,
        };
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            drop(slot);
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_connection_and_given_back() {
        let counts = Arc::new(ConnectionCounts::default());
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let s1 = counts.request(a, 2).unwrap();
        let _s2 = counts.request(a, 2).unwrap();
        let e = counts.request(a, 2).err().unwrap();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("limit 2"));
        assert!(
            counts.request(b, 2).is_ok(),
            "another connection is not affected"
        );
        drop(s1);
        assert!(counts.request(a, 2).is_ok());
        let _k = counts.stream(a, 1).unwrap();
        assert!(counts.stream(a, 1).is_err());
    }

    #[test]
    fn limits_may_only_tighten_the_machine_ceilings() {
        let wider = Limits {
            max_ttl_ms: hard::MAX_TTL_MS + 1,
            ..Default::default()
        };
        assert!(wider.check().is_err());
        let l = Limits {
            max_waiters_per_lock: 3,
            ..Default::default()
        }
        .check()
        .unwrap();
        assert_eq!(l.max_waiters_per_lock, 3);
        assert!(l.check_ttl(500).is_err() && l.check_ttl(5_000).is_ok());
    }
}
