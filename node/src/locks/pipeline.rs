//! The one path every lock operation takes. An operation (one file each in
//! `ops/`) states what is its own — the checks of its fields, the rights it
//! needs, the session it acts for, the command it proposes and what the
//! reply means — and [`Locks::run`] does the steps they share, in this order,
//! once for all of them:
//!
//! 1. the request's span (node, term, lock, session, identity, token);
//! 2. [`Operation::validate`]: the fields, and the operator's bounds on them;
//! 3. the caller's rights ([`Rights`]);
//! 4. that the session belongs to the caller;
//! 5. [`Operation::admit`]: bounds that count what the state holds now;
//! 6. the free-space alarm, for operations that add to the state;
//! 7. the proposal of [`Operation::command`], and
//! 8. [`Operation::answer`], which maps the reply (and may wait, as a
//!    queued acquire does, or run further operations, as a cancel that
//!    lost the race to a grant does, through `Locks::run_checked`).
//!
//! Nothing else in the lock service proposes a client's command: a new
//! operation is a new file in `ops/` and a line per transport.

use super::{session_id, Locks};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use crate::limits::Limits;
use crate::replica::Replica;
use raftlock_store::machine::{Command, FencingToken, LeaseError, Reply, SessionId};
use std::future::Future;
use tracing::Instrument;

/// The rights an operation needs.
#[derive(Clone, Copy, Debug)]
pub enum Rights<'a> {
    /// `Access` on this lock, election or limit.
    On(Access, &'a str),
    /// `Access` on each of these names.
    Each(Access, &'a [String]),
    /// `Access` on some name at least (a session serves any of them).
    Any(Access),
    /// Owning the operation's session, nothing more: its locks were
    /// checked when they were taken, and an owner may always end it.
    Owner,
}

impl Rights<'_> {
    fn check(self, caller: &Caller) -> Result<(), NodeError> {
        match self {
            Rights::On(access, name) => caller.check(access, name),
            Rights::Each(access, names) => names.iter().try_for_each(|n| caller.check(access, n)),
            Rights::Any(access) => caller.check_any(access),
            Rights::Owner => Ok(()),
        }
    }
}

/// What an operation's steps see: the service and who asked.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The lock service.
    pub locks: &'a Locks,
    /// Who asked (already checked by the time a step sees it).
    pub caller: &'a Caller,
}

/// One lock operation, as [`Locks::run`] executes it.
pub trait Operation: Send + Sized {
    /// What the caller gets.
    type Output: Send;
    /// What [`Operation::command`] hands to [`Operation::answer`] besides
    /// the reply (an acquire's registration for the grant it may wait for).
    type Pending: Send;
    /// The operation's name in traces and logs, e.g. `lock.acquire`.
    const NAME: &'static str;
    /// Whether it adds to the replicated state, and so is refused while
    /// the disk is short of space (releases and closes go on, so that
    /// locks drain).
    const GROWS: bool;

    /// The lock, election or limit it is about, if any.
    fn name(&self) -> Option<&str>;
    /// The session it acts for, if any: it must belong to the caller.
    fn session(&self) -> Option<SessionId>;
    /// The rights it needs.
    fn rights(&self) -> Rights<'_>;
    /// Checks its own fields, and the operator's bounds on them (a wait
    /// no longer than the longest allowed; a hold cap filled in).
    fn validate(&mut self, limits: &Limits) -> Result<(), NodeError>;
    /// Checks bounds that count what the state holds now (locks per
    /// session, sessions per identity), after the caller's rights.
    fn admit(&self, _cx: Context<'_>) -> Result<(), NodeError> {
        Ok(())
    }
    /// The command to propose; `None` for an operation answered without
    /// a log entry of its own (a keep-alive moves a deadline on the
    /// leader; a waiting take runs single takes).
    fn command(&self, cx: Context<'_>) -> Result<(Option<Command>, Self::Pending), NodeError>;
    /// What the reply (with its log index) means for the caller.
    fn answer(
        self,
        cx: Context<'_>,
        pending: Self::Pending,
        reply: Option<(u64, Reply)>,
    ) -> impl Future<Output = Result<Self::Output, NodeError>> + Send;
    /// The fencing token the answer carries, for the span.
    fn token(_out: &Self::Output) -> Option<FencingToken> {
        None
    }
    /// The proposal failed and the caller is told so: `pending` goes
    /// without what its drop does for a caller that went away (an acquire
    /// that may wait cancels its wait then).
    fn let_go(_pending: Self::Pending) {}
}

impl Locks {
    /// Runs `op` for `caller`: every step of the module's list.
    pub async fn run<O: Operation>(
        &self,
        caller: &Caller,
        mut op: O,
    ) -> Result<O::Output, NodeError> {
        let span = tracing::debug_span!(
            "op",
            op = O::NAME,
            node = self.replica.id(),
            term = self.term(),
            lock = op.name(),
            session = op.session(),
            identity = caller.name(),
            token = tracing::field::Empty
        );
        async {
            op.validate(self.replica.limits())?;
            if let Some(session) = op.session() {
                session_id(session)?;
            }
            op.rights().check(caller)?;
            if let Some(session) = op.session() {
                check_session_owner(self.replica.as_ref(), session, caller).await?;
            }
            let out = self.run_checked(caller, op).await?;
            if let Some(token) = O::token(&out) {
                tracing::Span::current().record("token", token);
            }
            Ok(out)
        }
        .instrument(span)
        .await
    }

    /// Runs `op` whose caller has been checked: an operation's further
    /// steps (a waiting take's single takes, the release of a grant that
    /// won a cancel's race) and the service's own (a wait abandoned by
    /// its caller).
    pub(super) async fn run_checked<O: Operation>(
        &self,
        caller: &Caller,
        op: O,
    ) -> Result<O::Output, NodeError> {
        let cx = Context {
            locks: self,
            caller,
        };
        op.admit(cx)?;
        if O::GROWS {
            self.replica.check_space()?;
        }
        let (command, pending) = op.command(cx)?;
        let reply = match command {
            Some(command) => match self.replica.propose_reply(command).await {
                Ok(reply) => Some(reply),
                Err(e) => {
                    O::let_go(pending);
                    return Err(e);
                }
            },
            None => None,
        };
        op.answer(cx, pending, reply).await
    }
}

/// Checks that `caller` may use `session`: sessions belong to the identity
/// that created them. Without authentication every session is everyone's.
/// A session this node has not seen is looked for again after a
/// linearizable round (a new leader may not have applied it yet); one
/// still missing then is refused outright.
async fn check_session_owner(
    replica: &dyn Replica,
    session: SessionId,
    caller: &Caller,
) -> Result<(), NodeError> {
    if !caller.checks_ownership() {
        return Ok(());
    }
    let owner = || {
        let state = replica.state().read();
        state.machine.session(session).map(|s| s.owner.clone())
    };
    let found = match owner() {
        Some(o) => Some(o),
        None => {
            replica.linearizable().await?;
            owner()
        }
    };
    match found {
        Some(o) if o == caller.name() => Ok(()),
        Some(_) => Err(NodeError::PermissionDenied(format!(
            "session {session} belongs to another identity than {:?}",
            caller.name()
        ))),
        // Refused here rather than passed to the state machine: an id
        // above everything applied could be created by someone else
        // before this command commits.
        None => Err(LeaseError::SessionNotFound(session).into()),
    }
}

/// The reply of an operation that proposed, or the fault of the server's
/// own that a missing one is.
pub fn proposed(reply: Option<(u64, Reply)>) -> Result<(u64, Reply), NodeError> {
    reply.ok_or_else(|| NodeError::Internal("an operation's command was not proposed".into()))
}
