//! Create a session: written to the log, owned by the identity that asks.

use super::super::pipeline::{proposed, Context, Operation, Rights};
use super::super::unexpected;
use crate::auth::Access;
use crate::error::NodeError;
use crate::limits::Limits;
use crate::locks::call::OpCall;
use crate::messages::creation_key;
use raftlock_proto::v1 as pb;
use raftlock_store::machine::{validate, Command, LeaseError, Origin, Reply, SessionId};
use std::time::Duration;

/// Create a session.
#[derive(Clone, Debug)]
pub struct CreateSession {
    /// Its time to live without a keep-alive.
    pub ttl_ms: u64,
    /// A name for people reading `describe` (may be empty).
    pub client_name: String,
    /// A retried creation with the same key returns the same session.
    pub creation_key: Option<u128>,
    /// Where the client runs, as it says.
    pub origin: Origin,
}

impl Operation for CreateSession {
    /// The session and its TTL.
    type Output = (SessionId, Duration);
    type Pending = ();
    const NAME: &'static str = "session.create";
    const GROWS: bool = true;

    fn name(&self) -> Option<&str> {
        None
    }

    fn session(&self) -> Option<SessionId> {
        None
    }

    fn rights(&self) -> Rights<'_> {
        Rights::Any(Access::Lock)
    }

    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError> {
        limits.check_ttl(self.ttl_ms)?;
        validate::client_name(&self.client_name)?;
        validate::host(&self.origin.host)?;
        Ok(())
    }

    /// The sessions an identity may keep at once (without authentication
    /// every caller is the one anonymous identity). A retry of a creation
    /// that succeeded adds no session, so it passes. This only saves a log
    /// entry: concurrent creations all pass it, and the limit the command
    /// carries is what holds (`Command::WithinSessionLimit`).
    fn admit(&self, cx: Context<'_>) -> Result<(), NodeError> {
        let node = cx.locks.replica();
        let state = node.state().read();
        let retry_of = self
            .creation_key
            .and_then(|k| state.machine.session_by_key(cx.caller.name(), k));
        if retry_of.is_some() {
            return Ok(());
        }
        let max = node.limits().max_sessions_per_identity;
        let live = state.machine.sessions_within_limit_of(cx.caller.name());
        if live >= max {
            return Err(NodeError::Lease(LeaseError::TooManySessions {
                owner: cx.caller.name().to_owned(),
                max,
            }));
        }
        Ok(())
    }

    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, ()), NodeError> {
        let owner = cx.caller.name().to_owned();
        let (ttl_ms, client_name) = (self.ttl_ms, self.client_name.clone());
        let create = match self.creation_key {
            // Only a client that said where it runs gets the newer
            // command, so a cluster in a rolling upgrade serves older
            // clients with entries every follower decodes.
            key if self.origin != Origin::default() => Command::CreateSessionAt {
                ttl_ms,
                client_name,
                owner,
                key,
                origin: self.origin.clone(),
            },
            Some(key) => Command::CreateSessionOnce {
                ttl_ms,
                client_name,
                owner,
                key,
            },
            None => Command::CreateSession {
                ttl_ms,
                client_name,
                owner,
            },
        };
        let cmd = Command::WithinSessionLimit {
            max_sessions: cx.locks.replica().limits().max_sessions_per_identity,
            command: Box::new(create),
        };
        Ok((Some(cmd), ()))
    }

    async fn answer(
        self,
        _: Context<'_>,
        _: (),
        reply: Option<(u64, Reply)>,
    ) -> Result<(SessionId, Duration), NodeError> {
        match proposed(reply)? {
            (_, Reply::SessionCreated { session, ttl_ms }) => {
                tracing::Span::current().record("session", session);
                Ok((session, Duration::from_millis(ttl_ms)))
            }
            (_, other) => Err(unexpected(other)),
        }
    }
}

impl TryFrom<pb::CreateSessionRequest> for CreateSession {
    type Error = NodeError;
    fn try_from(r: pb::CreateSessionRequest) -> Result<Self, NodeError> {
        Ok(CreateSession {
            ttl_ms: r.ttl_ms,
            creation_key: creation_key(&r.creation_key)?,
            client_name: r.client_name,
            origin: Origin {
                host: r.host,
                pid: r.pid,
            },
        })
    }
}

impl OpCall for pb::CreateSessionRequest {
    type Op = crate::locks::CreateSession;
    type Response = pb::CreateSessionResponse;
    fn op(self) -> Result<Self::Op, NodeError> {
        self.try_into()
    }
    fn response((session_id, ttl): (u64, std::time::Duration)) -> pb::CreateSessionResponse {
        pb::CreateSessionResponse {
            session_id,
            ttl_ms: ttl.as_millis() as u64,
        }
    }
}
