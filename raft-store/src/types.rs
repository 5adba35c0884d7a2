//! The openraft type configuration: what a log entry carries and what
//! applying it returns.

use crate::machine::{Command, Outcome};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Cursor;

/// A Raft node id.
pub type NodeId = u64;

/// How to reach a member: peers talk Raft to `peer_addr`, clients are sent
/// to `client_addr` when this node leads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// `host:port` of the Raft (peer) listener.
    pub peer_addr: String,
    /// `host:port` of the client listener.
    pub client_addr: String,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer={} client={}", self.peer_addr, self.client_addr)
    }
}

/// A log entry's payload: a command, and the leader's wall-clock time when
/// it proposed it. The time is data: every replica applies the same value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// Leader's wall clock, Unix ms (informational: `granted_at`).
    pub at_ms: u64,
    /// The command.
    pub command: Command,
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.command.kind())
    }
}

/// What applying one entry produced. Blank and membership entries produce
/// no outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The entry's log index.
    pub index: u64,
    /// The state machine's outcome, for a normal entry.
    pub outcome: Option<Outcome>,
}

openraft::declare_raft_types!(
    /// raftlock's openraft types.
    pub TypeConfig:
        D = Proposal,
        R = Applied,
        NodeId = NodeId,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The Raft instance raftlock runs.
pub type Raft = openraft::Raft<TypeConfig>;
/// Storage errors as openraft reports them.
pub type StorageError = openraft::StorageError<NodeId>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
