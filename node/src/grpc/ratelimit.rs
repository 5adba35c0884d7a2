//! The RateLimit service over gRPC: convert, call [`Locks`], convert back.

use crate::auth::caller;
use crate::locks::Locks;
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

super::service! {
    impl RateLimitApi for RateLimitService {
        take(pb::TakeRequest) -> pb::TakeResponse;
        r#return(pb::ReturnTokensRequest) -> pb::ReturnTokensResponse;
        define(pb::DefineLimitRequest) -> pb::DefineLimitResponse;
        delete(pb::DeleteLimitRequest) -> pb::DeleteLimitResponse;
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
}
