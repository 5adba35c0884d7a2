//! Waits that end because their caller no longer wants them: asked for
//! (`CancelWait`), or abandoned (the call, its HTTP connection or the
//! future that awaited it went away while it waited).
//!
//! A cancel races the grant: the entry that hands the lock to the waiter
//! may be applied just before the cancel. Then the cancel releases that
//! grant, so that a lock is never held for a caller that stopped
//! listening, and everyone behind it is served.

use super::{session_id, unexpected, Locks};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use raftlock_store::machine::{
    validate, Command, FencingToken, LeaseError, Reply, RequestId, SessionId,
};
use std::time::Duration;
use tracing::Instrument;

/// Cancel a waiting acquisition (or campaign).
#[derive(Clone, Debug)]
pub struct CancelWait {
    /// The waiting session.
    pub session: SessionId,
    /// Lock name.
    pub name: String,
    /// The acquisition's request id.
    pub request_id: RequestId,
}

/// What a cancel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// The wait was in the queue and is gone from it.
    Removed,
    /// The grant had won the race; it is released.
    Released(FencingToken),
    /// Neither waiting nor holding: it ended before (timed out, cancelled,
    /// released) or never existed. Nothing changed.
    NotWaiting,
}

/// How long an abandoned wait is kept for a retry of the same call: a
/// client whose connection broke retries the same request id on the same
/// leader within a few round trips, and that retry rejoins the wait.
const ABANDON_GRACE: Duration = Duration::from_millis(250);

impl Locks {
    /// Cancels `c`'s wait for `caller`. Idempotent: a retry finds nothing
    /// to do, and says so.
    pub async fn cancel_wait(
        &self,
        caller: &Caller,
        c: CancelWait,
    ) -> Result<Cancelled, NodeError> {
        let span = tracing::debug_span!("lock.cancel_wait", node = self.node.id(), term = self.term(), lock = %c.name, session = c.session, identity = caller.name(), token = tracing::field::Empty);
        async {
            validate::name(&c.name)?;
            session_id(c.session)?;
            caller.check(Access::Lock, &c.name)?;
            self.node.check_session_owner(c.session, caller).await?;
            let done = self
                .cancel_checked(c.session, &c.name, c.request_id)
                .await?;
            if let Cancelled::Released(token) = done {
                tracing::Span::current().record("token", token);
            }
            Ok(done)
        }
        .instrument(span)
        .await
    }

    pub(super) async fn cancel_checked(
        &self,
        session: SessionId,
        name: &str,
        request_id: RequestId,
    ) -> Result<Cancelled, NodeError> {
        let cmd = Command::CancelWait {
            session,
            name: name.to_owned(),
            request_id,
        };
        match self.node.propose_reply(cmd).await {
            Ok((_, Reply::WaitCancelled)) => Ok(Cancelled::Removed),
            Ok((_, Reply::Acquired(g))) => {
                let release = Command::Release {
                    session,
                    name: name.to_owned(),
                    token: g.token,
                };
                match self.node.propose_reply(release).await {
                    Ok((_, Reply::Released { .. }))
                    // Gone meanwhile (its session ended, an operator took
                    // it): released all the same.
                    | Err(NodeError::Lease(
                        LeaseError::SessionNotFound(_) | LeaseError::NotHolder { .. },
                    )) => Ok(Cancelled::Released(g.token)),
                    Ok((_, other)) => Err(unexpected(other)),
                    Err(e) => Err(e),
                }
            }
            Ok((_, other)) => Err(unexpected(other)),
            Err(NodeError::Lease(LeaseError::WaitNotFound { .. })) => Ok(Cancelled::NotWaiting),
            Err(e) => Err(e),
        }
    }

    /// Cancels a wait whose call went away, unless a retry of the same
    /// call has taken it up meanwhile. Runs on its own task: the call's
    /// future is gone.
    async fn abandon(self, session: SessionId, name: String, request_id: RequestId) {
        tokio::time::sleep(ABANDON_GRACE).await;
        if self.waits.is_waiting(session, &name, request_id) {
            return;
        }
        match self.cancel_checked(session, &name, request_id).await {
            Ok(Cancelled::NotWaiting) => {}
            Ok(done) => {
                metrics::counter!("raftlock_waits_abandoned_total").increment(1);
                tracing::info!(node = self.node.id(), lock = %name, session, ?done, "wait cancelled: its caller went away");
            }
            // Not the leader any more: the new leader's deadline ends it.
            Err(e) => {
                tracing::debug!(node = self.node.id(), lock = %name, session, error = %e, "abandoned wait left to its deadline")
            }
        }
    }
}

/// Held by a waiting call: if the call's future is dropped before the
/// wait ends, the wait is cancelled on the server's own task.
pub(super) struct AbandonGuard {
    locks: Option<Locks>,
    session: SessionId,
    name: String,
    request_id: RequestId,
}

impl AbandonGuard {
    pub(super) fn new(
        locks: &Locks,
        session: SessionId,
        name: &str,
        request_id: RequestId,
    ) -> Self {
        AbandonGuard {
            locks: Some(locks.clone()),
            session,
            name: name.to_owned(),
            request_id,
        }
    }

    /// The wait ended with an answer for the caller: nothing to cancel.
    pub(super) fn disarm(mut self) {
        self.locks = None;
    }
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(locks) = self.locks.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(locks.abandon(
                self.session,
                std::mem::take(&mut self.name),
                self.request_id,
            ));
        }
    }
}
