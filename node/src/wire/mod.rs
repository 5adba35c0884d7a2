//! The API's messages and the lock service's operations, each way, shared
//! by gRPC and HTTP/JSON (the same protobuf messages, in their proto3 JSON
//! mapping). A request message names its operation ([`Call`]); both
//! transports answer it with [`call`], so a call means the same on either,
//! and a new operation is one `Call` here and a line per transport.

pub mod convert;

use crate::auth::Caller;
use crate::error::NodeError;
use crate::locks::{
    Acquired, CancelWait, Cancelled, CloseSession, DefineLimit, DeleteLimit, ForceRelease,
    KeepAlive, Locks, Operation, ReturnTokens,
};
use convert::{grant, request_id, required_spec, take_response};
use raftlock_proto::v1 as pb;

/// A request message, the operation it asks for, and its answer message.
pub trait Call: Sized + Send {
    /// The operation.
    type Op: Operation;
    /// The answer message.
    type Response;
    /// Parses the request (refusing what cannot be parsed).
    fn op(self) -> Result<Self::Op, NodeError>;
    /// The operation's output as the answer message.
    fn response(out: <Self::Op as Operation>::Output) -> Self::Response;
}

/// Answers `request` for `caller`: parse, run through the lock service's
/// pipeline, build the answer.
pub async fn call<C: Call>(
    locks: &Locks,
    caller: &Caller,
    request: C,
) -> Result<C::Response, NodeError> {
    let op = request.op()?;
    Ok(C::response(locks.run(caller, op).await?))
}

impl Call for pb::AcquireRequest {
    type Op = crate::locks::Acquire;
    type Response = pb::AcquireResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        self.try_into()
    }
    fn response(out: Acquired) -> pb::AcquireResponse {
        match out {
            Acquired::Granted(g) => pb::AcquireResponse {
                grant: Some(grant(&g)),
                acquired: true,
                holders: vec![],
            },
            Acquired::Busy(holders) => pb::AcquireResponse {
                grant: None,
                acquired: false,
                holders: holders.iter().map(grant).collect(),
            },
        }
    }
}

impl Call for pb::AcquireAllRequest {
    type Op = crate::locks::AcquireAll;
    type Response = pb::AcquireAllResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(crate::locks::AcquireAll {
            session: self.session_id,
            names: self.names,
            request_id: request_id(&self.request_id)?,
            wait: self.wait_timeout_ms.map(std::time::Duration::from_millis),
            metadata: self.metadata,
            sequence: convert::sequence(self.seq, self.acked_below, self.in_flight)?,
        })
    }
    fn response(out: crate::locks::AcquiredAll) -> pb::AcquireAllResponse {
        match out {
            crate::locks::AcquiredAll::Granted(grants) => pb::AcquireAllResponse {
                acquired: true,
                grants: grants.iter().map(grant).collect(),
                holders: vec![],
            },
            crate::locks::AcquiredAll::Busy(holders) => pb::AcquireAllResponse {
                acquired: false,
                grants: vec![],
                holders: holders.iter().map(grant).collect(),
            },
        }
    }
}

impl Call for pb::ReleaseRequest {
    type Op = crate::locks::Release;
    type Response = pb::ReleaseResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response(granted: Vec<raftlock_store::machine::Grant>) -> pb::ReleaseResponse {
        pb::ReleaseResponse {
            granted: granted.iter().map(grant).collect(),
        }
    }
}

impl Call for pb::ResizeRequest {
    type Op = crate::locks::Resize;
    type Response = pb::ResizeResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response(granted: Vec<raftlock_store::machine::Grant>) -> pb::ResizeResponse {
        pb::ResizeResponse {
            granted: granted.iter().map(grant).collect(),
        }
    }
}

impl Call for pb::ForceReleaseRequest {
    type Op = ForceRelease;
    type Response = pb::ForceReleaseResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(ForceRelease { name: self.name })
    }
    fn response(f: crate::locks::ForceReleased) -> pb::ForceReleaseResponse {
        pb::ForceReleaseResponse {
            released: f.released.iter().map(grant).collect(),
            granted: f.granted.iter().map(grant).collect(),
        }
    }
}

impl Call for pb::CancelWaitRequest {
    type Op = CancelWait;
    type Response = pb::CancelWaitResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(CancelWait {
            session: self.session_id,
            name: self.name,
            request_id: request_id(&self.request_id)?,
        })
    }
    fn response(done: Cancelled) -> pb::CancelWaitResponse {
        match done {
            Cancelled::Removed => pb::CancelWaitResponse {
                cancelled: true,
                ..Default::default()
            },
            Cancelled::Released(token) => pb::CancelWaitResponse {
                released: true,
                token,
                ..Default::default()
            },
            Cancelled::NotWaiting => pb::CancelWaitResponse::default(),
        }
    }
}

impl Call for pb::CreateSessionRequest {
    type Op = crate::locks::CreateSession;
    type Response = pb::CreateSessionResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        self.try_into()
    }
    fn response((session_id, ttl): (u64, std::time::Duration)) -> pb::CreateSessionResponse {
        pb::CreateSessionResponse {
            session_id,
            ttl_ms: ttl.as_millis() as u64,
        }
    }
}

impl Call for pb::KeepAliveRequest {
    type Op = KeepAlive;
    type Response = pb::KeepAliveResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(KeepAlive {
            session: self.session_id,
        })
    }
    fn response((session_id, ttl): (u64, std::time::Duration)) -> pb::KeepAliveResponse {
        pb::KeepAliveResponse {
            session_id,
            ttl_ms: ttl.as_millis() as u64,
            gone: false,
        }
    }
}

impl Call for pb::CloseSessionRequest {
    type Op = CloseSession;
    type Response = pb::CloseSessionResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(CloseSession {
            session: self.session_id,
        })
    }
    fn response(released: Vec<String>) -> pb::CloseSessionResponse {
        pb::CloseSessionResponse { released }
    }
}

impl Call for pb::CampaignRequest {
    type Op = crate::locks::Campaign;
    type Response = pb::CampaignResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        self.try_into()
    }
    fn response(g: raftlock_store::machine::Grant) -> pb::CampaignResponse {
        pb::CampaignResponse {
            leader: Some(grant(&g)),
        }
    }
}

impl Call for pb::ProclaimRequest {
    type Op = crate::locks::Proclaim;
    type Response = pb::ProclaimResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response((): ()) -> pb::ProclaimResponse {
        pb::ProclaimResponse {}
    }
}

impl Call for pb::ResignRequest {
    type Op = crate::locks::Resign;
    type Response = pb::ResignResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response((): ()) -> pb::ResignResponse {
        pb::ResignResponse {}
    }
}

impl Call for pb::TakeRequest {
    type Op = crate::locks::Take;
    type Response = pb::TakeResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response(t: crate::locks::Taken) -> pb::TakeResponse {
        take_response(&t)
    }
}

impl Call for pb::ReturnTokensRequest {
    type Op = ReturnTokens;
    type Response = pb::ReturnTokensResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(ReturnTokens {
            name: self.name,
            lease: self.lease_id,
            unused: self.unused,
        })
    }
    fn response(credited: u64) -> pb::ReturnTokensResponse {
        pb::ReturnTokensResponse { credited }
    }
}

impl Call for pb::DefineLimitRequest {
    type Op = DefineLimit;
    type Response = pb::DefineLimitResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(DefineLimit {
            spec: required_spec(self.limit.as_ref())?,
            name: self.name,
        })
    }
    fn response(created: bool) -> pb::DefineLimitResponse {
        pb::DefineLimitResponse { created }
    }
}

impl Call for pb::DeleteLimitRequest {
    type Op = DeleteLimit;
    type Response = pb::DeleteLimitResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(DeleteLimit { name: self.name })
    }
    fn response(existed: bool) -> pb::DeleteLimitResponse {
        pb::DeleteLimitResponse { existed }
    }
}
