//! Renew a session: no log entry, the leader's lease driver moves its
//! deadline (the leader alone expires sessions).

use super::super::pipeline::{Context, Operation, Rights};
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{Command, Reply, SessionId};
use std::time::Duration;

/// Renew a session from now.
#[derive(Clone, Copy, Debug)]
pub struct KeepAlive {
    /// The session.
    pub session: SessionId,
}

impl Operation for KeepAlive {
    /// The session and its TTL.
    type Output = (SessionId, Duration);
    type Pending = ();
    const NAME: &'static str = "session.keepalive";
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
        Ok((None, ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        _: Option<(u64, Reply)>,
    ) -> Result<(SessionId, Duration), NodeError> {
        let ttl = cx.locks.leases.renew(self.session).await?;
        Ok((self.session, ttl))
    }
}

impl OpCall for pb::KeepAliveRequest {
    type Op = KeepAlive;
    type Response = pb::KeepAliveResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        Ok(KeepAlive {
            session: self.session_id,
        })
    }
    fn response((session_id, ttl): (u64, std::time::Duration)) -> pb::KeepAliveResponse {
        pb::KeepAliveResponse {
            session_id,
            ttl_ms: ttl.as_millis() as u64,
            gone: false,
        }
    }
}
