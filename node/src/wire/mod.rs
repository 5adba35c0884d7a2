//! The lock service's reads as calls of the API, for gRPC and HTTP/JSON
//! alike (the operations' calls are beside them, in `locks/ops/`), and the
//! protobuf forms of what reads return (`convert`).

pub mod convert;

use crate::auth::Caller;
use crate::error::NodeError;
use crate::locks::{Call, Locks};
use crate::messages::grant;
use convert::{describe_limit_response, describe_response, sessions_response, summary};
use raftlock_proto::v1 as pb;

impl Call for pb::DescribeRequest {
    type Response = pb::DescribeResponse;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<Self::Response, NodeError> {
        let d = locks.describe(caller, &self.name).await?;
        Ok(describe_response(self.name, &d))
    }
}

impl Call for pb::ListRequest {
    type Response = pb::ListResponse;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<Self::Response, NodeError> {
        let page = locks.list(caller, self.into()).await?;
        Ok(pb::ListResponse {
            locks: page.locks.iter().map(|l| summary(l, &page)).collect(),
            next_page_token: page.next_page_token,
        })
    }
}

impl Call for pb::ValidateRequest {
    type Response = pb::ValidateResponse;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<Self::Response, NodeError> {
        let v = locks.validate(caller, &self.name, self.token).await?;
        Ok(pb::ValidateResponse {
            valid: v.valid,
            current_token: v.current_token,
        })
    }
}

impl Call for pb::ListSessionsRequest {
    type Response = pb::ListSessionsResponse;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<Self::Response, NodeError> {
        let page = locks.list_sessions(caller, self.into()).await?;
        Ok(sessions_response(&page))
    }
}

impl Call for pb::DescribeLimitRequest {
    type Response = pb::DescribeLimitResponse;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<Self::Response, NodeError> {
        let v = locks.describe_limit(caller, &self.name).await?;
        Ok(describe_limit_response(self.name, &v))
    }
}

impl Call for pb::LeaderRequest {
    type Response = pb::LeaderResponse;
    async fn answer(self, locks: &Locks, caller: &Caller) -> Result<Self::Response, NodeError> {
        let leader = locks.leader(caller, &self.name).await?;
        Ok(pb::LeaderResponse {
            leader: leader.as_ref().map(grant),
        })
    }
}
