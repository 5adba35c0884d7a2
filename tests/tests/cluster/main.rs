//! Clusters of real processes: replication, snapshots, restarts (kill -9 and power loss), graceful stops, membership changes, backups and the sled migration.
//!
//! One test binary per area; each module is one topic.

mod backup;
mod disk;
mod formation;
mod graceful;
mod lost_state;
mod membership;
mod migration;
mod recovery;
mod replication;
mod restart;
mod snapshots;
mod storage_faults;
