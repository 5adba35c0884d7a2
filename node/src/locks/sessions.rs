//! Sessions: create (written to the log), keep alive (no log write: the
//! leader's lease driver moves a deadline), close.

use super::{session_id, unexpected, CreateSession, Locks};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use raftlock_store::machine::{validate, Command, Origin, Reply, SessionId};
use std::time::Duration;
use tracing::Instrument;

impl Locks {
    /// Creates a session owned by `caller`; returns its id and TTL.
    pub async fn create_session(
        &self,
        caller: &Caller,
        c: CreateSession,
    ) -> Result<(SessionId, Duration), NodeError> {
        let span = tracing::info_span!(
            "session.create",
            node = self.node.id(),
            ttl_ms = c.ttl_ms,
            identity = caller.name(),
            session = tracing::field::Empty
        );
        async {
            caller.check_any(Access::Lock)?;
            self.node.limits().check_ttl(c.ttl_ms)?;
            validate::client_name(&c.client_name)?;
            let retry_of = c.creation_key.and_then(|k| {
                self.node
                    .state()
                    .read()
                    .machine
                    .session_by_key(caller.name(), k)
            });
            // A retry of a creation that succeeded adds no session.
            if caller.checks_ownership() && retry_of.is_none() {
                let max = self.node.limits().max_sessions_per_identity;
                let live = self.node.state().read().machine.sessions_owned_by(caller.name());
                if live >= max {
                    return Err(NodeError::ResourceExhausted(format!(
                        "identity {:?} already has {live} live sessions, the limit per identity is {max}; close some first",
                        caller.name()
                    )));
                }
            }
            validate::host(&c.origin.host)?;
            self.node.check_space()?;
            let cmd = match c.creation_key {
                // Only a client that said where it runs gets the newer
                // command, so a cluster in a rolling upgrade serves older
                // clients with entries every follower decodes.
                key if c.origin != Origin::default() => Command::CreateSessionAt {
                    ttl_ms: c.ttl_ms,
                    client_name: c.client_name,
                    owner: caller.name().to_owned(),
                    key,
                    origin: c.origin,
                },
                Some(key) => Command::CreateSessionOnce {
                    ttl_ms: c.ttl_ms,
                    client_name: c.client_name,
                    owner: caller.name().to_owned(),
                    key,
                },
                None => Command::CreateSession {
                    ttl_ms: c.ttl_ms,
                    client_name: c.client_name,
                    owner: caller.name().to_owned(),
                },
            };
            match self.node.propose_reply(cmd).await? {
                (_, Reply::SessionCreated { session, ttl_ms }) => {
                    tracing::Span::current().record("session", session);
                    Ok((session, Duration::from_millis(ttl_ms)))
                }
                (_, other) => Err(unexpected(other)),
            }
        }
        .instrument(span)
        .await
    }

    /// Renews `session` for `caller` from now; returns its TTL.
    pub async fn keep_alive(
        &self,
        caller: &Caller,
        session: SessionId,
    ) -> Result<Duration, NodeError> {
        session_id(session)?;
        self.node.check_session_owner(session, caller).await?;
        self.leases
            .renew(session)
            .instrument(tracing::debug_span!(
                "session.keepalive",
                node = self.node.id(),
                session
            ))
            .await
    }

    /// Closes `session`, releasing what it holds; returns the names of the
    /// locks it released.
    pub async fn close_session(
        &self,
        caller: &Caller,
        session: SessionId,
    ) -> Result<Vec<String>, NodeError> {
        session_id(session)?;
        let span = tracing::info_span!(
            "session.close",
            node = self.node.id(),
            session,
            identity = caller.name()
        );
        async {
            self.node.check_session_owner(session, caller).await?;
            match self
                .node
                .propose_reply(Command::CloseSession { session })
                .await?
            {
                (_, Reply::SessionClosed { released }) => Ok(released),
                (_, other) => Err(unexpected(other)),
            }
        }
        .instrument(span)
        .await
    }
}
