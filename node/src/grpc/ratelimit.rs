//! The RateLimit service over gRPC: convert, call [`Locks`], convert back.

use crate::auth::caller;
use crate::error::NodeError;
use crate::locks::rates::{LimitView, Take, Taken};
use crate::locks::Locks;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::rate_limit_server::RateLimit as RateLimitApi;
use raftlock_store::machine::LimitSpec;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// Serves rate limits.
pub struct RateLimitService {
    locks: Locks,
}

impl RateLimitService {
    /// Serves the rate limits of `locks` over gRPC.
    pub fn new(locks: Locks) -> Self {
        RateLimitService { locks }
    }
}

/// A limit's parameters from the wire: the period defaults to a second and
/// the burst to one token.
pub fn spec(s: &pb::LimitSpec) -> LimitSpec {
    LimitSpec {
        rate: s.rate,
        per_ms: if s.per_ms == 0 { 1_000 } else { s.per_ms },
        burst: s.burst.max(1),
    }
}

fn spec_to_pb(s: &LimitSpec) -> pb::LimitSpec {
    pb::LimitSpec {
        rate: s.rate,
        per_ms: s.per_ms,
        burst: s.burst,
    }
}

impl From<pb::TakeRequest> for Take {
    fn from(r: pb::TakeRequest) -> Self {
        Take {
            n: r.n.max(1),
            spec: r.limit.as_ref().map(spec),
            wait: r.wait_timeout_ms.map(Duration::from_millis),
            lease_ms: r.lease_ms,
            name: r.name,
        }
    }
}

/// A take's answer as the API shows it.
pub fn take_response(t: &Taken) -> pb::TakeResponse {
    pb::TakeResponse {
        admitted: t.admitted,
        n: t.n,
        remaining: t.remaining,
        retry_after_ms: t.retry_after.as_nanos().div_ceil(1_000_000) as u64,
        lease_id: t.lease.unwrap_or(0),
    }
}

/// A limit as the API shows it.
pub fn describe_limit_response(name: String, v: &LimitView) -> pb::DescribeLimitResponse {
    pb::DescribeLimitResponse {
        name,
        limit: Some(spec_to_pb(&v.bucket.spec)),
        available: v.available,
        admitted: v.bucket.admitted,
        refused: v.bucket.refused,
        leases: v.bucket.leases.len() as u32,
        applied_index: v.applied_index,
    }
}

/// The limit a define names, which it must.
pub fn required_spec(s: Option<&pb::LimitSpec>) -> Result<LimitSpec, NodeError> {
    s.map(spec)
        .ok_or_else(|| NodeError::InvalidArgument("limit (rate, per_ms, burst) is required".into()))
}

#[tonic::async_trait]
impl RateLimitApi for RateLimitService {
    async fn take(
        &self,
        req: Request<pb::TakeRequest>,
    ) -> Result<Response<pb::TakeResponse>, Status> {
        let caller = caller(&req)?;
        let t = self.locks.take(&caller, req.into_inner().into()).await?;
        Ok(Response::new(take_response(&t)))
    }

    async fn r#return(
        &self,
        req: Request<pb::ReturnTokensRequest>,
    ) -> Result<Response<pb::ReturnTokensResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let credited = self
            .locks
            .return_tokens(&caller, &r.name, r.lease_id, r.unused)
            .await?;
        Ok(Response::new(pb::ReturnTokensResponse { credited }))
    }

    async fn define(
        &self,
        req: Request<pb::DefineLimitRequest>,
    ) -> Result<Response<pb::DefineLimitResponse>, Status> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let spec = required_spec(r.limit.as_ref())?;
        let created = self.locks.define_limit(&caller, &r.name, spec).await?;
        Ok(Response::new(pb::DefineLimitResponse { created }))
    }

    async fn describe(
        &self,
        req: Request<pb::DescribeLimitRequest>,
    ) -> Result<Response<pb::DescribeLimitResponse>, Status> {
        let caller = caller(&req)?;
        let name = req.into_inner().name;
        let v = self.locks.describe_limit(&caller, &name).await?;
        Ok(Response::new(describe_limit_response(name, &v)))
    }

    async fn delete(
        &self,
        req: Request<pb::DeleteLimitRequest>,
    ) -> Result<Response<pb::DeleteLimitResponse>, Status> {
        let caller = caller(&req)?;
        let existed = self
            .locks
            .delete_limit(&caller, &req.into_inner().name)
            .await?;
        Ok(Response::new(pb::DeleteLimitResponse { existed }))
    }
}
