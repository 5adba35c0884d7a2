//! Take a lock away from its holders: an administrator's action, logged
//! with who did it.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::grant;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, FencingToken, Grant, Reply, SessionId};

/// Take lock `name` away from every holder.
#[derive(Clone, Debug)]
pub struct ForceRelease {
    /// Lock name.
    pub name: String,
}

/// What a force-release did.
#[derive(Clone, Debug)]
pub struct ForceReleased {
    /// The grants taken away.
    pub released: Vec<Grant>,
    /// The waiters granted in their place.
    pub granted: Vec<Grant>,
}

impl Operation for ForceRelease {
    type Output = ForceReleased;
    type Pending = ();
    const NAME: &'static str = "lock.force_release";
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
        let cmd = Command::ForceRelease {
            name: self.name.clone(),
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<ForceReleased, NodeError> {
        match proposed(reply)? {
            (index, Reply::ForceReleased { released, granted }) => {
                metrics::counter!("raftlock_force_releases_total").increment(1);
                for g in &released {
                    tracing::warn!(
                        lock = %self.name,
                        session = g.session,
                        token = g.token,
                        identity = cx.caller.name(),
                        log_index = index,
                        "lock force-released by an administrator"
                    );
                }
                Ok(ForceReleased { released, granted })
            }
            (_, other) => Err(unexpected(other)),
        }
    }

    fn token(out: &ForceReleased) -> Option<FencingToken> {
        out.granted.first().map(|g| g.token)
    }
}

impl OpCall for pb::ForceReleaseRequest {
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
