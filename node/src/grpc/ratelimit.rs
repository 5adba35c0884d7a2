//! The RateLimit service over gRPC: convert, call [`Locks`], convert back.

use crate::auth::caller;
use crate::locks::Locks;
use crate::wire::call;
use crate::wire::convert::describe_limit_response;
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::rate_limit_server::RateLimit as RateLimitApi;
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

#[tonic::async_trait]
impl RateLimitApi for RateLimitService {
    async fn take(
        &self,
        req: Request<pb::TakeRequest>,
    ) -> Result<Response<pb::TakeResponse>, Status> {
        let caller = caller(&req)?;
        Ok(Response::new(
            call(&self.locks, &caller, req.into_inner()).await?,
        ))
    }

    async fn r#return(
        &self,
        req: Request<pb::ReturnTokensRequest>,
    ) -> Result<Response<pb::ReturnTokensResponse>, Status> {
        let caller = caller(&req)?;
        Ok(Response::new(
            call(&self.locks, &caller, req.into_inner()).await?,
        ))
    }

    async fn define(
        &self,
        req: Request<pb::DefineLimitRequest>,
    ) -> Result<Response<pb::DefineLimitResponse>, Status> {
        let caller = caller(&req)?;
        Ok(Response::new(
            call(&self.locks, &caller, req.into_inner()).await?,
        ))
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
        Ok(Response::new(
            call(&self.locks, &caller, req.into_inner()).await?,
        ))
    }
}
