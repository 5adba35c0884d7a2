//! Linearizable reads: describe, list, validate. Each waits until this
//! node has confirmed its leadership after the call began and applied what
//! was committed then, so it sees every write acknowledged before it.

use super::{ListQuery, Locks};
use crate::auth::{Access, Caller};
use crate::error::NodeError;
use raftlock_proto::limits;
use raftlock_store::machine::{validate, FencingToken, LockSummary, LockView, Validation};

/// A lock as `describe` shows it.
#[derive(Clone, Debug)]
pub struct Description {
    /// Holders, waiters and permits.
    pub view: LockView,
    /// The log index the read saw.
    pub applied_index: u64,
}

/// One page of a listing.
#[derive(Clone, Debug)]
pub struct ListPage {
    /// Locks the caller may read, in name order.
    pub locks: Vec<LockSummary>,
    /// Where the next page starts; empty when this is the last.
    pub next_page_token: String,
}

impl Locks {
    /// Holders and waiters of lock `name`.
    pub async fn describe(&self, caller: &Caller, name: &str) -> Result<Description, NodeError> {
        validate::name(name)?;
        caller.check(Access::Read, name)?;
        self.node.linearizable().await?;
        let state = self.node.state.read();
        Ok(Description {
            view: state.machine.describe(name),
            applied_index: state.last_applied.map(|l| l.index).unwrap_or(0),
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
        self.node.linearizable().await?;
        let state = self.node.state.read();
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
        Ok(ListPage {
            locks: page,
            next_page_token,
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
        self.node.linearizable().await?;
        Ok(self.node.state.read().machine.validate(name, token))
    }
}
