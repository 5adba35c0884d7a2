//! The openraft state machine: a thin adapter that feeds committed entries
//! to [`LeaseMachine`] and keeps its snapshot on disk.
//!
//! The lease state lives in memory and is persisted by snapshots: on
//! restart the node loads the latest snapshot and openraft re-applies the
//! durable log after it up to the saved commit point, so every committed
//! grant comes back and no token is reissued (tokens are log indexes, and
//! the log only grows).

use crate::data_dir::write_durably;
use crate::machine::{Command, LeaseError, LeaseMachine, Outcome};
use crate::types::{
    batch_index, Applied, Entry, LogId, NodeId, NodeInfo, StorageError, TypeConfig,
    MAX_BATCH_COMMANDS,
};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageIOError, StoredMembership,
};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The applied state: the lease machine plus what openraft needs to know
/// about how far it got.
#[derive(Clone, Debug, Default)]
pub struct AppliedState {
    /// Sessions and locks.
    pub machine: LeaseMachine,
    /// The last entry applied.
    pub last_applied: Option<LogId>,
    /// The last membership applied.
    pub last_membership: StoredMembership<NodeId, NodeInfo>,
}

/// A change of the applied state, published to whoever watches (waiting
/// acquisitions, the lease driver, election observers).
// Always sent inside an `Arc`, so the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Change {
    /// One command of a normal entry was applied.
    Applied {
        /// The index it applied at (`batch_index(entry index, position)`).
        index: u64,
        /// Its command, shared with the log entry it came in, not copied.
        command: EntryCommand,
        /// When the leader proposed it (its wall clock, Unix ms).
        at_ms: u64,
        /// What applying it produced.
        outcome: Outcome,
    },
    /// The state was replaced by a snapshot: watchers must re-read it.
    Restored,
}

/// One command of an applied entry: the entry's commands, shared with the
/// log's tail and with replication, and this one's position among them.
/// Reads as the [`Command`] itself.
#[derive(Clone)]
pub struct EntryCommand {
    commands: Arc<[Command]>,
    position: usize,
}

impl EntryCommand {
    /// Command `position` of `commands`; `None` past the end.
    pub fn new(commands: Arc<[Command]>, position: usize) -> Option<EntryCommand> {
        (position < commands.len()).then_some(EntryCommand { commands, position })
    }
}

impl std::ops::Deref for EntryCommand {
    type Target = Command;

    fn deref(&self) -> &Command {
        // In bounds: `new` is the only way to make one.
        &self.commands[self.position]
    }
}

impl std::fmt::Debug for EntryCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// The state shared between the state machine and the node's readers.
#[derive(Debug)]
pub struct SharedState {
    state: RwLock<AppliedState>,
    changes: broadcast::Sender<Arc<[Change]>>,
    observers: Observers,
}

/// A bookkeeper that sees every applied batch (see [`SharedState::observe`]).
type Observer = Box<dyn Fn(&[Change]) + Send + Sync>;

#[derive(Default)]
struct Observers(RwLock<Vec<Observer>>);

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.read().len();
        write!(f, "{n} observers")
    }
}

impl SharedState {
    /// Reads the applied state. A std lock: nothing awaits while holding it.
    pub fn read(&self) -> RwLockReadGuard<'_, AppliedState> {
        self.state.read()
    }

    /// Subscribes to changes from now on.
    /// The changes applied from now on, in order: one message per batch
    /// of entries applied together (each of their commands, in order), so
    /// a subscriber wakes once per batch, not once per command.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<[Change]>> {
        self.changes.subscribe()
    }

    /// Calls `observer` with every batch of changes applied from now on,
    /// in order, on the task that applies them, after the state is
    /// updated and before the entries' replies go out. For bookkeeping
    /// that must see every change and costs little: it must not block or
    /// take a lock that is held while waiting for the state. A subscriber
    /// task per such bookkeeper woke on every applied batch, on every node.
    pub fn observe(&self, observer: impl Fn(&[Change]) + Send + Sync + 'static) {
        self.observers.0.write().push(Box::new(observer));
    }

    fn publish(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        for observe in self.observers.0.read().iter() {
            observe(&changes);
        }
        if self.changes.receiver_count() > 0 {
            // A receiver may go away meanwhile: not an error.
            let _ = self.changes.send(changes.into());
        }
    }
}

/// The snapshot file: a JSON header line, then the machine's bytes.
#[derive(Serialize, Deserialize)]
struct SnapshotHeader {
    meta: SnapshotMeta<NodeId, NodeInfo>,
    /// CRC-32C of the machine's bytes; absent in files of releases before
    /// it, which are read unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crc32c: Option<u32>,
}

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

/// A snapshot's metadata and the machine's bytes.
pub type StoredSnapshot = (SnapshotMeta<NodeId, NodeInfo>, Vec<u8>);

/// Reads and checks the snapshot file at `path` (its checksum, and that
/// the machine decodes): `None` when there is none. For offline checks.
pub fn verify_snapshot_file(path: &Path) -> std::io::Result<Option<(Option<LogId>, usize)>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(std::io::Error::new(
                e.kind(),
                format!("reading {}: {e}", path.display()),
            ))
        }
    };
    let (meta, data) = decode_snapshot_file(&bytes)?;
    LeaseMachine::from_snapshot(&data).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the snapshot's state does not decode: {e}"),
        )
    })?;
    Ok(Some((meta.last_log_id, data.len())))
}

fn read_snapshot_file(path: &Path) -> Result<Option<StoredSnapshot>, StorageError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            let e = std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display()));
            return Err(StorageIOError::read_snapshot(None, &e).into());
        }
    };
    decode_snapshot_file(&bytes).map(Some).map_err(|e| {
        let e = std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        StorageIOError::read_snapshot(None, &e).into()
    })
}

/// Splits the bytes of a snapshot file into its header's metadata and the
/// machine's bytes (which [`LeaseMachine::from_snapshot`] reads). Public so
/// that the fuzz targets and property tests feed it exactly what a restart
/// reads.
pub fn decode_snapshot_file(bytes: &[u8]) -> std::io::Result<StoredSnapshot> {
    let split = bytes.iter().position(|b| *b == b'\n').ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "no snapshot header")
    })?;
    let header: SnapshotHeader = serde_json::from_slice(&bytes[..split])
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let data = &bytes[split + 1..];
    if let Some(expected) = header.crc32c {
        let found = crc32c::crc32c(data);
        if found != expected {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the snapshot is damaged: its {} bytes have checksum {found:08x}, its header says {expected:08x}; \
                     refusing to start on it: rebuild this node from the other members (docs/operations.md, \"When a disk fails\")",
                    data.len()
                ),
            ));
        }
    }
    Ok((header.meta, data.to_vec()))
}

fn write_snapshot_file(
    path: &Path,
    meta: &SnapshotMeta<NodeId, NodeInfo>,
    data: &[u8],
) -> Result<(), StorageError> {
    let mut bytes = serde_json::to_vec(&SnapshotHeader {
        meta: meta.clone(),
        crc32c: Some(crc32c::crc32c(data)),
    })
    .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
    bytes.push(b'\n');
    bytes.extend_from_slice(data);
    write_durably(path, &bytes)
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e).into())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Mode, Reply, RequestId};
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64, commands: Vec<Command>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(crate::Proposal::batch(1_000, commands)),
        }
    }

    fn create() -> Command {
        Command::CreateSession {
            ttl_ms: 5_000,
            client_name: "t".into(),
            owner: String::new(),
        }
    }

    fn acquire(session: u64, req: u128) -> Command {
        Command::Acquire {
            session,
            name: "l".into(),
            request_id: RequestId(req),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms: Some(1_000),
            metadata: vec![],
        }
    }

    fn session_id(o: &Outcome) -> u64 {
        match &o.reply {
            Ok(Reply::SessionCreated { session, .. }) => *session,
            other => panic!("not a session: {other:?}"),
        }
    }

    /// An entry is applied (and its caller answered) only once this node's
    /// log holds it durably: a leader replicating while it writes counts
    /// itself towards the commit before its own copy is on disk.
    #[tokio::test]
    async fn nothing_is_applied_before_the_log_holds_it_durably() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = StateMachineStore::open(dir.path().join("snap")).unwrap();
        let (durable, flushed) = tokio::sync::watch::channel(None);
        sm.apply_after_flush(flushed);
        let shared = sm.shared();
        let apply = tokio::spawn(async move { sm.apply(vec![entry(2, vec![create()])]).await });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(shared.read().machine.counts().0, 0, "applied too early");
        durable.send_replace(Some(LogId::new(CommittedLeaderId::new(1, 1), 1)));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !apply.is_finished(),
            "applied before its own index was durable"
        );
        durable.send_replace(Some(LogId::new(CommittedLeaderId::new(1, 1), 2)));
        let applied = apply.await.unwrap().unwrap();
        assert_eq!(applied.len(), 1);
        assert_eq!(shared.read().machine.counts().0, 1);
    }

    /// Group commit must not cost uniqueness: commands sharing an entry get
    /// distinct ids, and tokens granted later in the log stay larger, also
    /// when a handoff grants a waiter inside a batch.
    #[tokio::test]
    async fn commands_of_one_entry_get_distinct_increasing_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = StateMachineStore::open(dir.path().join("snap")).unwrap();
        let applied = sm
            .apply(vec![entry(7, vec![create(), create(), create()])])
            .await
            .unwrap();
        assert_eq!(applied.len(), 1);
        let at: Vec<u64> = applied[0].outcomes.iter().map(|(i, _)| *i).collect();
        assert_eq!(at, vec![7 << 16, (7 << 16) + 1, (7 << 16) + 2]);
        let ids: Vec<u64> = applied[0]
            .outcomes
            .iter()
            .map(|(_, o)| session_id(o))
            .collect();
        assert_eq!(ids, at, "a session's id is the index it applied at");

        let applied = sm
            .apply(vec![entry(8, vec![acquire(ids[0], 1), acquire(ids[1], 2)])])
            .await
            .unwrap();
        let first = match &applied[0].outcomes[0].1.reply {
            Ok(Reply::Acquired(g)) => g.token,
            other => panic!("{other:?}"),
        };
        assert_eq!(first, batch_index(8, 0));
        assert!(matches!(
            applied[0].outcomes[1].1.reply,
            Ok(Reply::Queued { .. })
        ));
        // A blank entry between keeps the numbering of the next one.
        sm.apply(vec![Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), 9),
            payload: EntryPayload::Blank,
        }])
        .await
        .unwrap();
        let applied = sm
            .apply(vec![entry(
                10,
                vec![
                    create(),
                    Command::Release {
                        session: ids[0],
                        name: "l".into(),
                        token: first,
                    },
                ],
            )])
            .await
            .unwrap();
        let handed = applied[0].outcomes[1]
            .1
            .events
            .iter()
            .find_map(|e| match e {
                crate::machine::Event::HandedOver(g) => Some(g.token),
                _ => None,
            })
            .expect("the waiter is granted in the release's step");
        assert_eq!(handed, batch_index(10, 1));
        assert!(handed > first);
    }

    /// openraft builds snapshots in a task of their own and may install one
    /// from the leader meanwhile. Whatever the interleaving, the file left
    /// on disk is whole and is the newer of the two: an older built snapshot
    /// must never replace an installed newer one (whose install let the log
    /// be purged up to it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_build_racing_an_install_never_leaves_the_older_snapshot() {
        for round in 0..200u64 {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("snap");
            let mut follower = StateMachineStore::open(file.clone()).unwrap();
            follower
                .apply(vec![entry(1, vec![create()])])
                .await
                .unwrap();
            let mut leader = StateMachineStore::open(dir.path().join("leader")).unwrap();
            leader
                .apply(vec![entry(1, vec![create()]), entry(2, vec![create()])])
                .await
                .unwrap();
            let newer = leader.build_snapshot().await.unwrap();
            let mut builder = follower.get_snapshot_builder().await;
            let (built, installed) = tokio::join!(
                tokio::spawn(async move { builder.build_snapshot().await }),
                follower.install_snapshot(&newer.meta, newer.snapshot),
            );
            built.unwrap().unwrap();
            installed.unwrap();
            let (meta, data) = read_snapshot_file(&file)
                .unwrap_or_else(|e| panic!("round {round}: snapshot file unreadable: {e}"))
                .expect("a snapshot file");
            assert_eq!(
                meta.last_log_id.map(|l| l.index),
                Some(2),
                "round {round}: the older built snapshot replaced the installed one"
            );
            LeaseMachine::from_snapshot(&data).unwrap();
            // Nor does a later, older build overwrite it.
            let again = follower.build_snapshot().await.unwrap();
            assert_eq!(again.meta.last_log_id.map(|l| l.index), Some(2));
        }
    }
}
