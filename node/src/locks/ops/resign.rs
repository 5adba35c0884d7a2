//! Give up an election's leadership (or a campaign's place): the release
//! of its lock, under the election's own name in traces.

use super::super::pipeline::{Context, Operation, Rights};
use super::release::Release;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
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
