//! Close a session, releasing what it holds and ending its waits.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{Command, Reply, SessionId};

/// Close a session.
#[derive(Clone, Copy, Debug)]
pub struct CloseSession {
    /// The session.
    pub session: SessionId,
}

impl Operation for CloseSession {
    /// The names of the locks it released.
    type Output = Vec<String>;
    type Pending = ();
    const NAME: &'static str = "session.close";
    const GROWS: bool = false;

    fn name(&self) -> Option<&str> {
        None
    }

    fn session(&self) -> Option<SessionId> {
        Some(self.session)
    }

    fn rights(&self) -> Rights<'_> {
        Rights::Owner
    }

    fn validate(&mut self, _: &Limits) -> Result<(), NodeError> {
        Ok(())
    }

    fn command(&self, _: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let cmd = Command::CloseSession {
            session: self.session,
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<Vec<String>, NodeError> {
        match proposed(reply)? {
            (_, Reply::SessionClosed { released }) => Ok(released),
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl OpCall for pb::CloseSessionRequest {
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
