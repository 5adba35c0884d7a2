//! Give up an election's leadership (or a campaign's place): the release
//! of its lock, under the election's own name in traces.

use super::super::pipeline::{Context, Operation, Rights};
use super::release::Release;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, FencingToken, Reply, SessionId};

/// Give up leadership held under `token`.
#[derive(Clone, Debug)]
pub struct Resign {
    /// The leading session.
    pub session: SessionId,
    /// Election name.
    pub name: String,
    /// The leadership's token.
    pub token: FencingToken,
}

impl Resign {
    fn release(&self) -> Release {
        Release {
            session: self.session,
            name: self.name.clone(),
            token: self.token,
        }
    }
}

impl Operation for Resign {
    type Output = ();
    type Pending = ();
    const NAME: &'static str = "election.resign";
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

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        self.release().command(cx)
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<(), NodeError> {
        self.release().answer(cx, (), reply).await.map(drop)
    }
}

impl From<pb::ResignRequest> for Resign {
    fn from(r: pb::ResignRequest) -> Self {
        Resign {
            session: r.session_id,
            name: r.name,
            token: r.token,
        }
    }
}

impl OpCall for pb::ResignRequest {
    type Op = crate::locks::Resign;
    type Response = pb::ResignResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response((): ()) -> pb::ResignResponse {
        pb::ResignResponse {}
    }
}
