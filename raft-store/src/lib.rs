//! raftlock's replicated state: the pure lease state machine ([`machine`])
//! and, around it, the sled-backed storage openraft drives.
//!
//! The machine knows nothing of Raft, disks or clocks; the storage adapter
//! feeds it committed entries and persists its snapshots.
#![deny(missing_docs)]

pub mod machine;
