//! The openraft state machine: a thin adapter that feeds committed entries
//! to [`LeaseMachine`] and keeps its snapshot on disk.
//!
//! The lease state lives in memory and is persisted by snapshots: on
//! restart the node loads the latest snapshot and openraft re-applies the
//! durable log after it up to the saved commit point, so every committed
//! grant comes back and no token is reissued (tokens are log indexes, and
//! the log only grows).
//!
//! Split by concern: this module is the openraft adapter; `shared` is the
//! applied state as the node reads it and the observers told of each
//! change; `snapshot_file` is the file format on disk.

use crate::machine::{LeaseError, LeaseMachine, Outcome};
use crate::types::{
    batch_index, Applied, Entry, LogId, NodeId, NodeInfo, StorageError, TypeConfig,
    MAX_BATCH_COMMANDS,
};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageIOError, StoredMembership,
};
use parking_lot::{Mutex, RwLock};
use std::io::Cursor;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;

mod shared;
mod snapshot_file;
#[cfg(test)]
mod tests;

use shared::Observers;
pub use shared::{AppliedState, Change, EntryCommand, SharedState};
pub use snapshot_file::{decode_snapshot_file, verify_snapshot_file, StoredSnapshot};
use snapshot_file::{read_snapshot_file, write_snapshot_file};

/// The openraft state machine over [`LeaseMachine`].
#[derive(Clone)]
pub struct StateMachineStore {
    shared: Arc<SharedState>,
    snapshot_file: PathBuf,
    snapshot_seq: Arc<AtomicU64>,
    /// The last log id of the snapshot on disk. Held while the file is
    /// written: openraft builds snapshots in a task of its own and may
    /// install one from the leader meanwhile, and both write the same file.
    on_disk: Arc<Mutex<Option<LogId>>>,
    /// The last entry durable in this node's log ([`crate::wal::Wal::flushed`]):
    /// nothing is applied before it is on this disk, because a leader
    /// replicates its entries while it is still writing them.
    flushed: Option<tokio::sync::watch::Receiver<Option<LogId>>>,
}

impl StateMachineStore {
    /// Opens the state machine, restoring the snapshot in `snapshot_file` if
    /// there is one.
    pub fn open(snapshot_file: PathBuf) -> Result<Self, StorageError> {
        let mut state = AppliedState::default();
        let started = std::time::Instant::now();
        let mut on_disk = None;
        if let Some((meta, data)) = read_snapshot_file(&snapshot_file)? {
            on_disk = meta.last_log_id;
            let bytes = data.len();
            state.machine = LeaseMachine::from_snapshot(&data)
                .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
            state.last_applied = meta.last_log_id;
            state.last_membership = meta.last_membership;
            let secs = started.elapsed().as_secs_f64();
            metrics::gauge!("raftlock_snapshot_load_seconds").set(secs);
            metrics::gauge!("raftlock_snapshot_bytes").set(bytes as f64);
            tracing::info!(
                index = state.last_applied.map(|l| l.index).unwrap_or(0),
                bytes,
                secs,
                "snapshot loaded"
            );
        }
        let (changes, _) = broadcast::channel(4096);
        Ok(StateMachineStore {
            shared: Arc::new(SharedState {
                state: RwLock::new(state),
                changes,
                observers: Observers::default(),
            }),
            snapshot_file,
            snapshot_seq: Arc::new(AtomicU64::new(0)),
            on_disk: Arc::new(Mutex::new(on_disk)),
            flushed: None,
        })
    }

    /// Applies an entry only once `flushed` (the log's durable point) has
    /// reached it.
    pub fn apply_after_flush(&mut self, flushed: tokio::sync::watch::Receiver<Option<LogId>>) {
        self.flushed = Some(flushed);
    }

    async fn wait_flushed(&mut self, index: u64) -> Result<(), StorageError> {
        let Some(flushed) = &mut self.flushed else {
            return Ok(());
        };
        if flushed.borrow().is_some_and(|f| f.index >= index) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        flushed
            .wait_for(|f| f.is_some_and(|f| f.index >= index))
            .await
            .map_err(|_| {
                let e = std::io::Error::other("the log writer stopped");
                StorageError::from(StorageIOError::write_logs(&e))
            })?;
        metrics::histogram!("raftlock_apply_flush_wait_seconds")
            .record(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// The state, for readers outside openraft.
    pub fn shared(&self) -> Arc<SharedState> {
        self.shared.clone()
    }

    fn write(&self) -> parking_lot::RwLockWriteGuard<'_, AppliedState> {
        self.shared.state.write()
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let started = std::time::Instant::now();
        let (data, last_applied, last_membership) = {
            let state = self.shared.read();
            (
                state.machine.to_snapshot(),
                state.last_applied,
                state.last_membership.clone(),
            )
        };
        // Applies wait for the read lock meanwhile: this is the stall.
        let serialize_secs = started.elapsed().as_secs_f64();
        let seq = self.snapshot_seq.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match last_applied {
            Some(l) => format!("{}-{}-{seq}", l.leader_id, l.index),
            None => format!("none-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership,
            snapshot_id,
        };
        let path = self.snapshot_file.clone();
        let on_disk = self.on_disk.clone();
        let (meta, data) = tokio::task::spawn_blocking(move || {
            let mut on_disk = on_disk.lock();
            if on_disk.is_some() && *on_disk >= meta.last_log_id {
                // A snapshot installed meanwhile is at least as new: it is
                // the one to keep (the log may be purged up to it already).
                return read_snapshot_file(&path)?.ok_or_else(|| {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("{}: snapshot vanished", path.display()),
                    );
                    StorageIOError::read_snapshot(None, &e).into()
                });
            }
            write_snapshot_file(&path, &meta, &data)?;
            *on_disk = meta.last_log_id;
            Ok::<_, StorageError>((meta, data))
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(None, &e))??;
        let index = meta.last_log_id.map(|l| l.index).unwrap_or(0);
        let secs = started.elapsed().as_secs_f64();
        metrics::histogram!("raftlock_snapshot_build_seconds").record(secs);
        metrics::gauge!("raftlock_snapshot_build_last_seconds").set(secs);
        metrics::gauge!("raftlock_snapshot_bytes").set(data.len() as f64);
        metrics::gauge!("raftlock_snapshot_index").set(index as f64);
        tracing::info!(
            index,
            bytes = data.len(),
            secs,
            serialize_secs,
            "snapshot written"
        );
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<NodeId, NodeInfo>), StorageError> {
        let state = self.shared.read();
        Ok((state.last_applied, state.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if let Some(last) = entries.last() {
            self.wait_flushed(last.log_id.index).await?;
        }
        // Sized up front: under load an entry holds tens of commands, and
        // growing these one push at a time was a tenth of a follower's CPU.
        let mut replies = Vec::with_capacity(entries.len());
        let mut changes = Vec::with_capacity(
            entries
                .iter()
                .map(|e| match &e.payload {
                    EntryPayload::Normal(p) => p.commands.len(),
                    _ => 0,
                })
                .sum(),
        );
        {
            let mut state = self.write();
            for entry in entries {
                let index = entry.log_id.index;
                state.last_applied = Some(entry.log_id);
                let mut outcomes = Vec::new();
                match entry.payload {
                    EntryPayload::Blank => {}
                    EntryPayload::Membership(m) => {
                        state.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    }
                    EntryPayload::Normal(p) => {
                        let index = crate::planted::token_index(index);
                        outcomes.reserve_exact(p.commands.len());
                        for (i, command) in p.commands.iter().enumerate() {
                            let at = batch_index(index, i);
                            // A leader never builds such an entry; one that
                            // arrives anyway must not reuse the next entry's
                            // indexes, and every replica refuses it alike.
                            let outcome = if i >= MAX_BATCH_COMMANDS {
                                Outcome {
                                    reply: Err(LeaseError::InvalidArgument(format!(
                                        "an entry holds at most {MAX_BATCH_COMMANDS} commands"
                                    ))),
                                    events: Vec::new(),
                                }
                            } else {
                                state.machine.apply(command, at, p.at_ms)
                            };
                            if let Some(command) = EntryCommand::new(p.commands.clone(), i) {
                                changes.push(Change::Applied {
                                    index: at,
                                    command,
                                    at_ms: p.at_ms,
                                    outcome: outcome.clone(),
                                });
                            }
                            outcomes.push((at, outcome));
                        }
                    }
                }
                replies.push(Applied { index, outcomes });
            }
        }
        self.shared.publish(changes);
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, NodeInfo>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let machine = LeaseMachine::from_snapshot(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let path = self.snapshot_file.clone();
        let file_meta = meta.clone();
        let on_disk = self.on_disk.clone();
        let written = tokio::task::spawn_blocking(move || {
            let mut on_disk = on_disk.lock();
            // Never replace a newer snapshot with an older one.
            if *on_disk > file_meta.last_log_id {
                return Ok(None);
            }
            write_snapshot_file(&path, &file_meta, &data)?;
            *on_disk = file_meta.last_log_id;
            Ok::<_, StorageError>(Some(data.len()))
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(None, &e))??;
        // The snapshot on disk is now the installed one: its size and index
        // are what an operator sizing the data dir must see, whether this
        // node built it or received it.
        if let Some(bytes) = written {
            metrics::gauge!("raftlock_snapshot_bytes").set(bytes as f64);
            metrics::gauge!("raftlock_snapshot_index")
                .set(meta.last_log_id.map(|l| l.index).unwrap_or(0) as f64);
        }
        {
            let mut state = self.write();
            state.machine = machine;
            state.last_applied = meta.last_log_id;
            state.last_membership = meta.last_membership.clone();
        }
        self.shared.publish(vec![Change::Restored]);
        tracing::info!(
            index = meta.last_log_id.map(|l| l.index).unwrap_or(0),
            "installed a snapshot from the leader"
        );
        metrics::counter!("raftlock_snapshots_installed_total").increment(1);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let path = self.snapshot_file.clone();
        let read = tokio::task::spawn_blocking(move || read_snapshot_file(&path))
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))??;
        Ok(read.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
