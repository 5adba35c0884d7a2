//! Forget a rate limit: an administrator's action, logged with who did it.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, Reply, SessionId};

/// Delete limit `name`.
#[derive(Clone, Debug)]
pub struct DeleteLimit {
    /// Limit name.
    pub name: String,
}

impl Operation for DeleteLimit {
    /// True if it existed.
    type Output = bool;
    type Pending = ();
    const NAME: &'static str = "ratelimit.delete";
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        None
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Admin, &self.name)
    }

    fn validate(&mut self, _: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        Ok(())
    }

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::DeleteLimit {
            name: self.name.clone(),
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<bool, NodeError> {
        match proposed(reply)? {
            (_, Reply::LimitDeleted { existed }) => {
                tracing::warn!(limit = %self.name, identity = cx.caller.name(), existed, "rate limit deleted");
                Ok(existed)
            }
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl OpCall for pb::DeleteLimitRequest {
    type Op = DeleteLimit;
    type Response = pb::DeleteLimitResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(DeleteLimit { name: self.name })
    }
    fn response(existed: bool) -> pb::DeleteLimitResponse {
        pb::DeleteLimitResponse { existed }
    }
}
