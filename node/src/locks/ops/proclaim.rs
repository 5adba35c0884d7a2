//! Replace an elected leader's value, if its token still leads.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, FencingToken, Reply, SessionId};

/// Replace the elected leader's value.
#[derive(Clone, Debug)]
pub struct Proclaim {
    /// The leading session.
    pub session: SessionId,
    /// Election name.
    pub name: String,
    /// The leadership's token.
    pub token: FencingToken,
    /// The new value.
    pub value: Vec<u8>,
}

impl Operation for Proclaim {
    type Output = ();
    type Pending = ();
    const NAME: &'static str = "election.proclaim";
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
        validate::metadata("value", &self.value)?;
        Ok(())
    }

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::Proclaim {
            session: self.session,
            name: self.name.clone(),
            token: self.token,
            value: self.value.clone(),
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<(), NodeError> {
        proposed(reply).map(drop)
    }
}

impl From<pb::ProclaimRequest> for Proclaim {
    fn from(r: pb::ProclaimRequest) -> Self {
        Proclaim {
            session: r.session_id,
            name: r.name,
            token: r.token,
            value: r.value,
        }
    }
}

impl OpCall for pb::ProclaimRequest {
    type Op = crate::locks::Proclaim;
    type Response = pb::ProclaimResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(self.into())
    }
    fn response((): ()) -> pb::ProclaimResponse {
        pb::ProclaimResponse {}
    }
}
