//! Create a rate limit, or check an existing one has the same parameters.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::required_spec;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, LimitSpec, Reply, SessionId};

/// Define limit `name` as `spec`.
#[derive(Clone, Debug)]
pub struct DefineLimit {
    /// Limit name.
    pub name: String,
    /// Its rate and burst.
    pub spec: LimitSpec,
}

impl Operation for DefineLimit {
    /// True if this call created it.
    type Output = bool;
    type Pending = ();
    const NAME: &'static str = "ratelimit.define";
    const GROWS: bool = true;

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
        validate::limit_spec(&self.spec)?;
        Ok(())
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::DefineLimit {
            name: self.name.clone(),
            spec: self.spec,
            now_ns: cx.locks.rate_now(),
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<bool, NodeError> {
        match proposed(reply)? {
            (_, Reply::LimitDefined { created }) => Ok(created),
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl OpCall for pb::DefineLimitRequest {
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
