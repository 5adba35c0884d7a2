//! Set a semaphore's size, granting the waiters a larger size lets in.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::grant;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, Grant, Reply, SessionId};

/// Set a semaphore's size.
#[derive(Clone, Debug)]
pub struct Resize {
    /// Lock name.
    pub name: String,
    /// The new size; 0 forgets the size set before.
    pub permits: u32,
}

impl Operation for Resize {
    /// The waiters granted because of it.
    type Output = Vec<Grant>;
    type Pending = ();
    const NAME: &'static str = "lock.resize";
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

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::Resize {
            name: self.name.clone(),
            permits: self.permits,
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<Vec<Grant>, NodeError> {
        match proposed(reply)? {
            (_, Reply::Resized { granted }) => {
                tracing::info!(lock = %self.name, permits = self.permits, granted = granted.len(), identity = cx.caller.name(), "semaphore resized");
                Ok(granted)
            }
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl From<pb::ResizeRequest> for Resize {
    fn from(r: pb::ResizeRequest) -> Self {
        Resize {
            name: r.name,
            permits: r.permits,
        }
    }
}

impl OpCall for pb::ResizeRequest {
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
