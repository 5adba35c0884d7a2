//! Linearizable reads: describe, list, validate. Each waits until this
//! node has confirmed its leadership after the call began and applied what
//! was committed then, so it sees every write acknowledged before it.

use super::{ListQuery, Locks};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use raftlock_proto::limits;
use raftlock_store::machine::{
    validate, FencingToken, LeaseMachine, LockSummary, LockView, Origin, Session, SessionId,
    Validation,
};
use raftlock_store::planted::remembered;
use raftlock_store::state_machine::AppliedState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tracing::Instrument;

/// A lock as `describe` shows it.
#[derive(Clone, Debug)]
pub struct Description {
    /// Holders, waiters and permits.
    pub view: LockView,
    /// The log index the read saw.
    pub applied_index: u64,
    /// The sessions of the holders and waiters, in id order.
    pub sessions: Vec<SessionView>,
    /// The size was set by Resize.
    pub resized: bool,
}

/// A live session as an operator sees it.
#[derive(Clone, Debug)]
pub struct SessionView {
    /// Id, client name, owner, creation time, TTL, locks held and waited.
    pub session: Session,
    /// Where its client runs, if it said.
    pub origin: Origin,
    /// Time left before this leader expires it without a keep-alive.
    pub expires_in: Duration,
}

/// One page of sessions.
#[derive(Clone, Debug)]
pub struct SessionPage {
    /// Sessions in id order.
    pub sessions: Vec<SessionView>,
    /// Where the next page starts; 0 when this is the last.
    pub next_page_token: SessionId,
}

/// Which sessions to list.
#[derive(Clone, Debug, Default)]
pub struct SessionQuery {
    /// Only client names that start with this.
    pub client_name_prefix: String,
    /// Resume after this session id.
    pub after: SessionId,
    /// Page size; 0 means the default.
    pub limit: u32,
}

/// One page of a listing.
#[derive(Clone, Debug)]
pub struct ListPage {
    /// Locks the caller may read, in name order.
    pub locks: Vec<LockSummary>,
    /// Where the next page starts; empty when this is the last.
    pub next_page_token: String,
    /// The holders' sessions, by id.
    pub sessions: BTreeMap<SessionId, SessionView>,
}

impl Locks {
    /// Waits for a linearizable round in the read's own span (node, term,
    /// lock, identity), as an operation's proposal runs in its own.
    pub(super) async fn linearizable_read(
        &self,
        op: &'static str,
        name: Option<&str>,
        caller: &Caller,
    ) -> Result<(), NodeError> {
        let span = tracing::debug_span!(
            "read",
            op,
            node = self.replica.id(),
            term = self.term(),
            lock = name,
            identity = caller.name()
        );
        self.replica.linearizable().instrument(span).await
    }

    /// Holders and waiters of lock `name`.
    pub async fn describe(&self, caller: &Caller, name: &str) -> Result<Description, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.linearizable_read("lock.describe", Some(name), caller)
            .await?;
        let state = self.replica.state().read();
        Ok(remembered(format!("describe {name}"), || {
            self.describe_now(&state, name)
        }))
    }

    /// Holders and waiters of `name` in `state`, with their sessions.
    fn describe_now(&self, state: &AppliedState, name: &str) -> Description {
        let view = state.machine.describe(name);
        let ids: BTreeSet<SessionId> = view
            .holders
            .iter()
            .map(|g| g.session)
            .chain(view.waiters.iter().map(|w| w.session))
            .collect();
        let sessions = ids
            .into_iter()
            .filter_map(|id| self.session_view(&state.machine, id))
            .collect();
        Description {
            resized: state.machine.size(name).is_some(),
            view,
            applied_index: state.last_applied.map(|l| l.index).unwrap_or(0),
            sessions,
        }
    }

    /// Live sessions: every one for a caller that may read every lock (an
    /// operator), otherwise only the caller's own.
    pub async fn list_sessions(
        &self,
        caller: &Caller,
        q: SessionQuery,
    ) -> Result<SessionPage, NodeError> {
        caller.check_any(Access::Read)?;
        let limit = match q.limit {
            0 => limits::DEFAULT_LIST_LIMIT,
            n => n.min(limits::MAX_LIST_LIMIT),
        } as usize;
        let everyone = !caller.checks_ownership() || caller.may(Access::Read, "");
        self.linearizable_read("session.list", None, caller).await?;
        let state = self.replica.state().read();
        let mut scanned = state
            .machine
            .sessions()
            .filter(|s| s.id > q.after)
            .filter(|s| s.client_name.starts_with(&q.client_name_prefix))
            .filter(|s| everyone || s.owner == caller.name());
        let mut sessions = Vec::new();
        let mut next_page_token = 0;
        for s in scanned.by_ref() {
            if sessions.len() == limit {
                next_page_token = sessions.last().map_or(0, |v: &SessionView| v.session.id);
                break;
            }
            if let Some(v) = self.session_view(&state.machine, s.id) {
                sessions.push(v);
            }
        }
        Ok(SessionPage {
            sessions,
            next_page_token,
        })
    }

    fn session_view(&self, machine: &LeaseMachine, id: SessionId) -> Option<SessionView> {
        let session = machine.session(id)?.clone();
        let ttl = Duration::from_millis(session.ttl_ms);
        Some(SessionView {
            origin: machine.origin(id).cloned().unwrap_or_default(),
            // A node that leads has a deadline for every live session; the
            // TTL is what any other would give it.
            expires_in: self.leases.remaining(id).unwrap_or(ttl),
            session,
        })
    }

    /// A page of the locks under a prefix. Names the caller may not read
    /// are left out, as if absent.
    pub async fn list(&self, caller: &Caller, q: ListQuery) -> Result<ListPage, NodeError> {
        caller.check_any(Access::Read)?;
        let limit = match q.limit {
            0 => limits::DEFAULT_LIST_LIMIT,
            n => n.min(limits::MAX_LIST_LIMIT),
        } as usize;
        self.linearizable_read("lock.list", Some(&q.prefix), caller)
            .await?;
        let state = self.replica.state().read();
        let mut page = state.machine.list(&q.prefix, &q.page_token, limit + 1);
        let more = page.len() > limit;
        page.truncate(limit);
        // The page token is the last name scanned, readable or not, so a
        // page thinned by the filter still leads to the next one.
        let next_page_token = match page.last() {
            Some(l) if more => l.name.clone(),
            _ => String::new(),
        };
        page.retain(|l| caller.may(Access::Read, &l.name));
        let sessions = page
            .iter()
            .flat_map(|l| l.holders.iter().map(|h| h.session))
            .filter_map(|id| Some((id, self.session_view(&state.machine, id)?)))
            .collect();
        Ok(ListPage {
            locks: page,
            next_page_token,
            sessions,
        })
    }

    /// Whether `token` is held on lock `name` now: what a resource that
    /// cannot compare tokens itself asks before acting on a holder's behalf.
    pub async fn validate(
        &self,
        caller: &Caller,
        name: &str,
        token: FencingToken,
    ) -> Result<Validation, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.linearizable_read("lock.validate", Some(name), caller)
            .await?;
        let state = self.replica.state().read();
        Ok(remembered(format!("validate {name} {token}"), || {
            state.machine.validate(name, token)
        }))
    }
}
