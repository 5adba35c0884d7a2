//! What a node lets through from its peers while it may not vote: the
//! gate its peer service consults on every vote and append, which
//! `standing.rs` opens once the node has earned it back.

use super::network::probe::ProbeAnswer;
use parking_lot::{Mutex, RwLock};
use raftlock_store::data_dir::{DataDir, Standing};
use raftlock_store::{NodeId, Raft};
use std::sync::Arc;

/// What this node lets through while it may not vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admits {
    /// Everything: a full member.
    All,
    /// Nothing yet: it has not heard from enough peers.
    Nothing,
    /// Entries from leaders of this term or later; no votes.
    EntriesFrom(u64),
}

/// This node's standing, shared by its peer service (which consults it on
/// every vote and append) and the task that earns it back.
#[derive(Clone)]
pub struct Gate {
    pub(super) node: NodeId,
    pub(super) admits: Arc<RwLock<Admits>>,
    data: Option<Arc<Mutex<DataDir>>>,
}

impl Gate {
    /// The gate of node `node` as its data dir records its standing.
    pub fn new(node: NodeId, data: Arc<Mutex<DataDir>>) -> Gate {
        let admits = match data.lock().identity().standing {
            Standing::Member => Admits::All,
            Standing::Forming | Standing::Rejoining => Admits::Nothing,
        };
        Gate {
            node,
            admits: Arc::new(RwLock::new(admits)),
            data: Some(data),
        }
    }

    /// A gate that admits everything and records nothing (tests, tools).
    pub fn open(node: NodeId) -> Gate {
        Gate {
            node,
            admits: Arc::new(RwLock::new(Admits::All)),
            data: None,
        }
    }

    /// Whether this node is a full member.
    pub fn is_member(&self) -> bool {
        *self.admits.read() == Admits::All
    }

    /// Admits a vote request, or refuses it while this node may not vote.
    pub fn admit_vote(&self) -> Result<(), tonic::Status> {
        match *self.admits.read() {
            Admits::All => Ok(()),
            _ => Err(self.refusal("a vote")),
        }
    }

    /// Admits entries (or a snapshot) from a leader of `term`.
    pub fn admit_entries(&self, term: u64) -> Result<(), tonic::Status> {
        match *self.admits.read() {
            Admits::All => Ok(()),
            Admits::EntriesFrom(t) if term >= t => Ok(()),
            _ => Err(self.refusal(&format!("entries of term {term}"))),
        }
    }

    /// Unavailable, which the caller's openraft counts as unreachable:
    /// no vote, no acknowledgement, retried later. Peers only, so no
    /// client reason.
    fn refusal(&self, what: &str) -> tonic::Status {
        tonic::Status::unavailable(format!(
                "node {} does not hold everything it once acknowledged (its data dir is new or its log was damaged) and refuses {what} until it has caught up from its peers",
            self.node
        ))
    }

    /// This node's answer to a probe; `space_low` says whether its data
    /// dir is below its reserve.
    pub fn answer(&self, raft: &Raft, space_low: Option<bool>) -> ProbeAnswer {
        let m = raft.metrics().borrow().clone();
        let (incarnation, standing, formed_with) = match &self.data {
            Some(d) => {
                let d = d.lock();
                let i = d.identity();
                (i.incarnation, i.standing, i.formed_with.clone())
            }
            None => (0, Standing::Member, Vec::new()),
        };
        ProbeAnswer {
            node: self.node,
            incarnation,
            standing,
            term: m.current_term,
            last_log_index: m.last_log_index,
            formed_with,
            space_low,
        }
    }

    pub(super) fn identity(&self) -> (u64, Standing) {
        match &self.data {
            Some(d) => {
                let d = d.lock();
                (d.identity().incarnation, d.identity().standing)
            }
            None => (0, Standing::Member),
        }
    }

    /// Records `standing` durably, then acts on it.
    pub(super) fn become_(
        &self,
        standing: Standing,
        formed_with: Option<Vec<(u64, u64)>>,
    ) -> Result<(), String> {
        if let Some(d) = &self.data {
            d.lock()
                .set_standing(standing, formed_with)
                .map_err(|e| e.to_string())?;
        }
        if standing == Standing::Member {
            *self.admits.write() = Admits::All;
        }
        Ok(())
    }
}
