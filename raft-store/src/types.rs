//! The openraft type configuration: what a log entry carries and what
//! applying it returns.

use crate::machine::{Command, Outcome};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Cursor;
use std::sync::Arc;

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

/// Commands one entry may carry: positions must fit in the low 16 bits of
/// [`batch_index`].
pub const MAX_BATCH_COMMANDS: usize = 1 << 16;

/// The index command `position` of the entry at `log_index` applies at: its
/// fencing token or session id (DESIGN.md). Strictly increasing in log
/// order, and unique while entries hold at most [`MAX_BATCH_COMMANDS`].
pub fn batch_index(log_index: u64, position: usize) -> u64 {
    (log_index << 16) | (position as u64 & 0xffff)
}

/// A log entry's payload: the commands the leader grouped into it (group
/// commit: one append and one fsync for all), and the leader's wall-clock
/// time when it proposed them. The time is data: every replica applies the
/// same value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// Leader's wall clock, Unix ms (informational: `granted_at`).
    pub at_ms: u64,
    /// The commands, applied in order; command `i` at `batch_index(index, i)`.
    /// Shared: the log, replication to each follower and apply all read
    /// the same entry, and cloning it must not copy every command's name
    /// and metadata (serialized exactly as a `Vec`).
    pub commands: Arc<[Command]>,
}

impl Proposal {
    /// An entry of one command.
    pub fn single(at_ms: u64, command: Command) -> Proposal {
        Proposal {
            at_ms,
            commands: Arc::new([command]),
        }
    }

    /// An entry of several commands.
    pub fn batch(at_ms: u64, commands: Vec<Command>) -> Proposal {
        Proposal {
            at_ms,
            commands: commands.into(),
        }
    }
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.commands[..] {
            [one] => f.write_str(one.kind()),
            many => write!(f, "batch of {}", many.len()),
        }
    }
}

/// What applying one entry produced: for each command, the index it applied
/// at and its outcome. Blank and membership entries produce none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The entry's log index.
    pub index: u64,
    /// `(batch_index(index, i), outcome)` for command `i`.
    pub outcomes: Vec<(u64, Outcome)>,
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
