//! Credit back the tokens of a lease its holder did not spend.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::rates::owned;
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, Reply, SessionId};

/// Return a lease's unspent tokens.
#[derive(Clone, Debug)]
pub struct ReturnTokens {
    /// Limit name.
    pub name: String,
    /// The lease a take with `lease_ms` answered.
    pub lease: u64,
    /// Tokens not spent.
    pub unused: u64,
}

impl Operation for ReturnTokens {
    /// Tokens credited.
    type Output = u64;
    type Pending = ();
    const NAME: &'static str = "ratelimit.return";
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        None
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, _: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        Ok(())
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::ReturnTokens {
            name: self.name.clone(),
            lease: self.lease,
            unused: self.unused,
            now_ns: cx.locks.rate_now(),
        };
        // With authentication, a lease is returned only by the identity
        // that took it.
        Ok((Some(owned(cx.caller, cmd)), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<u64, NodeError> {
        match proposed(reply)? {
            (_, Reply::Returned { credited }) => Ok(credited),
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl OpCall for pb::ReturnTokensRequest {
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
