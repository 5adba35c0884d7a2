//! Make an exclusive hold shared, keeping its token; the shared waiters at
//! the front of the queue are granted beside it in the same entry.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::grant;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{self, validate, Command, FencingToken, Grant, Reply, SessionId};

/// Make the exclusive hold granted with `token` a shared one.
#[derive(Clone, Debug)]
pub struct Downgrade {
    /// The holding session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The hold's fencing token.
    pub token: FencingToken,
}

/// A hold made shared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Downgraded {
    /// The hold as it is now.
    pub hold: Grant,
    /// Shared waiters granted beside it.
    pub granted: Vec<Grant>,
}

impl Operation for Downgrade {
    type Output = Downgraded;
    type Pending = ();
    const NAME: &'static str = "lock.downgrade";
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
        let cmd = Command::Downgrade(machine::Downgrade {
            session: self.session,
            name: self.name.clone(),
            token: self.token,
        });
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        cx: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<Downgraded, NodeError> {
        match proposed(reply)? {
            (_, Reply::Downgraded { hold, granted }) => {
                tracing::info!(lock = %self.name, session = self.session, token = self.token, granted = granted.len(), identity = cx.caller.name(), "hold downgraded to shared");
                Ok(Downgraded { hold, granted })
            }
            (_, other) => Err(unexpected(other)),
        }
    }

    fn token(out: &Downgraded) -> Option<FencingToken> {
        Some(out.hold.token)
    }
}

impl OpCall for pb::DowngradeRequest {
    type Op = Downgrade;
    type Response = pb::DowngradeResponse;
    fn op(self) -> Result<Downgrade, NodeError> {
        Ok(Downgrade {
            session: self.session_id,
            name: self.name,
            token: self.token,
        })
    }
    fn response(out: Downgraded) -> pb::DowngradeResponse {
        pb::DowngradeResponse {
            hold: Some(grant(&out.hold)),
            granted: out.granted.iter().map(grant).collect(),
        }
    }
}
