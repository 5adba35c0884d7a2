//! Release a lock held under a token; the waiters next in line are
//! granted in the same entry.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::grant;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, FencingToken, Grant, Reply, SessionId};

/// Release a lock held under `token`.
#[derive(Clone, Debug)]
pub struct Release {
    /// The holding session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The grant's fencing token.
    pub token: FencingToken,
}

impl Operation for Release {
    /// The waiters granted in its place.
    type Output = Vec<Grant>;
    type Pending = ();
    const NAME: &'static str = "lock.release";
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::On(Access::Lock, &self.name)
    }

    fn validate(&mut self, _: &Limits) -> Result<(), NodeError> {
        validate::name(&self.name)?;
        Ok(())
    }

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::Release {
            session: self.session,
            name: self.name.clone(),
            token: self.token,
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<Vec<Grant>, NodeError> {
        match proposed(reply)? {
            (_, Reply::Released { granted }) => Ok(granted),
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl From<pb::ReleaseRequest> for Release {
    fn from(r: pb::ReleaseRequest) -> Self {
        Release {
            session: r.session_id,
            name: r.name,
            token: r.token,
        }
    }
}

impl OpCall for pb::ReleaseRequest {
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
