//! What the lock service needs of the replicated log, and nothing more:
//! propose a command and learn its outcome, read the applied state, have a
//! read or an acknowledgement confirmed by a quorum, and know whether this
//! node leads. The running node (`raft::node::Node`) is one replica; the
//! lock service's unit tests use another that applies commands straight to
//! a state machine, as etcd tests its lessor without a cluster.

use crate::error::NodeError;
use crate::limits::Limits;
use futures::future::BoxFuture;
use raftlock_store::machine::{Command, Outcome, Reply};
use raftlock_store::state_machine::SharedState;
use raftlock_store::NodeId;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;

/// This node's role, as the lock service acts on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Role {
    /// The term this node last voted in (or leads).
    pub term: u64,
    /// Whether it leads in that term.
    pub leading: bool,
}

impl Role {
    /// The term this node leads in, if it leads.
    pub fn leading_term(self) -> Option<u64> {
        self.leading.then_some(self.term)
    }
}

/// One member of the replicated lock state, as the lock service uses it.
pub trait Replica: Send + Sync + 'static {
    /// This node's id, for spans and logs.
    fn id(&self) -> NodeId;

    /// The current term, for spans and logs.
    fn term(&self) -> u64;

    /// The operator's limits.
    fn limits(&self) -> &Limits;

    /// The state machine as applied here: only as fresh as this node's
    /// log, so call [`Replica::linearizable`] first where an answer must
    /// reflect every write acknowledged before the call.
    fn state(&self) -> &Arc<SharedState>;

    /// Proposes `command`, waits until it is committed and applied here,
    /// and returns the index it applied at and its outcome.
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<(u64, Outcome), NodeError>>;

    /// Waits until a quorum has confirmed this node's leadership in a
    /// round that started after `t`.
    fn confirmed_after(&self, t: Instant) -> BoxFuture<'_, Result<(), NodeError>>;

    /// Waits until a read of the local state is linearizable: leadership
    /// confirmed after this call began, and the state applied up to the
    /// commit point known then.
    fn linearizable(&self) -> BoxFuture<'_, Result<(), NodeError>>;

    /// Resolves, with the error to answer, once this node is found leading
    /// without a quorum: a wait it holds can then be neither granted nor
    /// ended here. Never while it is not so.
    fn cut_off(&self) -> BoxFuture<'_, NodeError>;

    /// Refuses a call that grows the state while this node leads short of
    /// disk space.
    fn check_space(&self) -> Result<(), NodeError>;

    /// The error for a call this node cannot serve because it does not
    /// lead (naming the leader when known).
    fn not_leader(&self) -> NodeError;

    /// Becomes true when the node starts shutting down.
    fn stopping(&self) -> watch::Receiver<bool>;

    /// This node's role, changing when it does; closed once the node can
    /// no longer take part (its Raft core stopped).
    fn roles(&self) -> watch::Receiver<Role>;

    /// Proposes `command` and returns its reply, or the state machine's
    /// refusal as an error.
    fn propose_reply(&self, command: Command) -> BoxFuture<'_, Result<(u64, Reply), NodeError>> {
        Box::pin(async move {
            let (index, outcome) = self.propose(command).await?;
            Ok((index, outcome.reply?))
        })
    }
}
