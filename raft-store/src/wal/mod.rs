//! raftlock's own write-ahead log for the Raft log, the vote and the
//! committed index, in the way of etcd's `wal` and hashicorp's raft-wal:
//! preallocated segment files of checksummed records (`format`, written
//! by `core`), one writer
//! thread that takes every record queued meanwhile and makes them durable
//! with one write and one `fdatasync` (group commit), the vote synced
//! before it is answered, and recovery that stops at the first torn or
//! corrupt record. openraft reads entries from memory: the log between two
//! snapshots is kept decoded (`purge` drops what a snapshot covers), so
//! replication and apply never read the disk.

pub mod core;
pub mod disk;
pub mod format;
pub mod recover;

use self::core::{Core, RecoveryReport};
use self::disk::{FsDir, WalDir};
use self::format::{Effect, Encoded, LogImage};
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader, StorageIOError, Vote};
use parking_lot::RwLock;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

pub use self::format::SEGMENT_BYTES;

/// Reads the log in directory `path` without writing anything (offline
/// tools: `raftlockd check`, `recover`): the image recovery would start
/// from, and how it went. Damage is an error carrying a
/// [`recover::Damage`]; a torn tail is reported, not repaired.
pub fn read_only(path: &Path) -> io::Result<(LogImage, RecoveryReport)> {
    let dir = FsDir::read_only(path)?;
    let found = recover::read_log(&dir)?;
    Ok((found.image, found.report))
}

/// Counters that explain log write throughput.
#[derive(Debug, Default)]
pub struct FlushStats {
    /// write + fdatasync rounds done.
    pub fsyncs: std::sync::atomic::AtomicU64,
    /// Append batches (and vote saves) made durable by those rounds.
    pub batches: std::sync::atomic::AtomicU64,
    /// Entries made durable.
    pub entries: std::sync::atomic::AtomicU64,
}

/// The most commands an append may carry and still be written on the
/// appending task. openraft applies the entries an append commits after
/// the append returns, so a sync in place also holds up that apply; with
/// the writer thread they overlap. Under load, when entries carry many
/// commands, that apply is long and the overlap is worth more than the
/// two wake-ups saved (64 clients: 0.86-0.92x ops/s written in place at
/// every size, the performance history in `CHANGELOG.md`).
const INLINE_MAX_COMMANDS: usize = 4;

/// Commands in `entries`.
fn commands(entries: &[Entry]) -> usize {
    entries
        .iter()
        .map(|e| match &e.payload {
            openraft::EntryPayload::Normal(p) => p.commands.len(),
            _ => 0,
        })
        .sum()
}

/// Who waits for a write to be durable.
enum Done {
    /// Nobody: written, and synced with the next record somebody waits for.
    Nobody,
    /// Told the result once durable (openraft's append callback).
    Call(Box<dyn FnOnce(io::Result<()>) + Send>),
    Notify(tokio::sync::oneshot::Sender<io::Result<()>>),
    /// A leader's own entries, already reported to openraft as flushed:
    /// only the [`Wal::flushed`] watch learns when they are durable, and
    /// they are synced at once like any record somebody waits for.
    Watch,
}

struct Job {
    records: Vec<Encoded>,
    entries: u64,
    done: Done,
    /// The log's last entry once this job is durable, if the job changes
    /// it (an append or a truncation).
    last: Option<Option<LogId>>,
}

/// The write-ahead log as openraft's log storage. Cheap to clone: clones
/// share the log and its writer.
#[derive(Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

struct Inner {
    image: RwLock<LogImage>,
    writer: mpsc::Sender<Job>,
    stats: Arc<FlushStats>,
    /// The last entry known durable, which the state machine waits for
    /// before applying and a leader caps the commit index it sends at.
    flushed: tokio::sync::watch::Sender<Option<LogId>>,
    /// The log's last entry as appended, durable or not: a leader's peer
    /// network learns from it that an append is about to go out.
    appended: tokio::sync::watch::Sender<Option<LogId>>,
    /// Why the log stopped writing, once it has.
    failed: tokio::sync::watch::Sender<Option<String>>,
    /// The latest committed-index record not yet handed to the writer: it
    /// goes out with the next write somebody waits for, not in a write (and
    /// a wake-up of the writer thread) of its own.
    committed: parking_lot::Mutex<Option<Encoded>>,
    /// This node's id once it answers its own appends as leader before
    /// they are durable (see [`Wal::flush_leader_appends_in_parallel`]).
    early_for: std::sync::OnceLock<NodeId>,
    /// The writer's state, shared by its thread and, for writes done on
    /// the caller's thread, by `send`.
    process: Arc<parking_lot::Mutex<dyn Process>>,
    /// Jobs handed to the writer thread and not yet done.
    queued: Arc<std::sync::atomic::AtomicUsize>,
    /// This node's id once it writes the appends of other leaders on the
    /// calling thread (see [`Wal::flush_follower_appends_inline`]).
    inline_for: std::sync::OnceLock<NodeId>,
    /// When the write (and sync) under way began, in ms since `epoch`; 0
    /// while none is. Read without the writer's lock, which a write that
    /// hangs holds (see [`Wal::end_on_stall`]).
    busy_since: Arc<std::sync::atomic::AtomicU64>,
    epoch: std::time::Instant,
    /// How long the last write and sync took, in µs (`u64::MAX` before
    /// the first).
    last_sync_us: Arc<std::sync::atomic::AtomicU64>,
    /// Appends are written on the calling thread only while the last sync
    /// took less than this, in µs (see [`Wal::flush_follower_appends_inline`]).
    inline_below_us: std::sync::atomic::AtomicU64,
}

impl Wal {
    /// Opens (or creates) the log in directory `path`.
    pub fn open(path: &Path) -> Result<Wal, StorageError> {
        let dir = FsDir::new(path).map_err(|e| StorageIOError::read_logs(&e))?;
        Wal::open_in(dir, SEGMENT_BYTES).map(|(wal, _)| wal)
    }

    /// Opens the log in `dir` with segments of `segment_bytes`, and says
    /// how recovery went.
    pub fn open_in<D: WalDir>(
        dir: D,
        segment_bytes: u64,
    ) -> Result<(Wal, RecoveryReport), StorageError> {
        let (core, image, report) =
            Core::open(dir, segment_bytes).map_err(|e| StorageIOError::read_logs(&e))?;
        if let Some((seq, offset)) = report.stopped_at {
            tracing::warn!(
                segment = seq,
                offset,
                torn_bytes = report.torn_bytes,
                "the log ends in a torn write (bytes written after the last sync before a crash, never acknowledged): continuing from the last whole batch"
            );
        }
        let stats = Arc::new(FlushStats::default());
        let (tx, rx) = mpsc::channel();
        let writer_stats = stats.clone();
        // Everything recovery found is on disk.
        let (flushed, _) = tokio::sync::watch::channel(image.last_log_id());
        let (appended, _) = tokio::sync::watch::channel(image.last_log_id());
        let writer_flushed = flushed.clone();
        let (failed, _) = tokio::sync::watch::channel(None);
        let busy_since = Arc::new(std::sync::atomic::AtomicU64::new(0));
        // Unknown until the first sync: as slow as can be, so that a node
        // restarted on a slow disk does not stall its core on its first
        // append before it has measured one.
        let last_sync_us = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let epoch = std::time::Instant::now();
        let process: Arc<parking_lot::Mutex<dyn Process>> =
            Arc::new(parking_lot::Mutex::new(Writer {
                busy_since: busy_since.clone(),
                last_sync_us: last_sync_us.clone(),
                epoch,
                core,
                stats: writer_stats,
                flushed: writer_flushed,
                failed: None,
                failure: failed.clone(),
                written_last: None,
                purge_pending: false,
                fsync_seconds: metrics::histogram!("raftlock_fsync_seconds"),
                batch_entries: metrics::histogram!("raftlock_append_batch_entries"),
            }));
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (thread_process, thread_queued) = (process.clone(), queued.clone());
        std::thread::Builder::new()
            .name("raftlock-wal".into())
            .spawn(move || writer(thread_process, thread_queued, rx))
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok((
            Wal {
                inner: Arc::new(Inner {
                    image: RwLock::new(image),
                    writer: tx,
                    stats,
                    flushed,
                    appended,
                    failed,
                    committed: parking_lot::Mutex::new(None),
                    early_for: std::sync::OnceLock::new(),
                    process,
                    queued,
                    inline_for: std::sync::OnceLock::new(),
                    busy_since,
                    epoch,
                    last_sync_us,
                    inline_below_us: std::sync::atomic::AtomicU64::new(0),
                }),
            },
            report,
        ))
    }

    /// The last entry known to be durable. It can go back: a follower's
    /// conflicting suffix is truncated.
    pub fn flushed(&self) -> tokio::sync::watch::Receiver<Option<LogId>> {
        self.inner.flushed.subscribe()
    }

    /// Why the log stopped taking writes, once a write or a sync failed.
    /// It never takes one again: after a failed `fdatasync` the kernel may
    /// have dropped the dirty pages, so what the file holds is unknown
    /// until it is read back by a restart. A leader's own appends are
    /// answered before they are durable, so openraft may never hear of the
    /// failure: the node watches this and stops.
    pub fn failed(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.inner.failed.subscribe()
    }

    /// Ends the log, as a failed write does ([`Wal::failed`]), when a write
    /// or sync has not returned within `limit`: a disk that hangs instead
    /// of failing (a stuck controller, a hung network volume) would keep a
    /// leader sending heartbeats while nothing commits, and its followers
    /// would never elect another. Checked every `limit / 10` on a thread of
    /// its own, since the writer is the one that hangs.
    ///
    /// Only time this thread was awake to see counts against the disk: a
    /// check that comes late (the process was stopped by SIGSTOP, its
    /// virtual machine paused, or it was starved of CPU) counts at most two
    /// intervals, since the writer was not running either. Counted by the
    /// wall clock, a node paused for longer than `limit` in the middle of a
    /// sync took its own pause for a hung disk and stopped when it woke.
    pub fn end_on_stall(&self, limit: std::time::Duration) {
        let inner = Arc::downgrade(&self.inner);
        let every = (limit / 10).max(std::time::Duration::from_millis(10));
        let spawned = std::thread::Builder::new()
            .name("raftlock-wal-stall".into())
            .spawn(move || {
                let mut watching = 0;
                let mut stalled = std::time::Duration::ZERO;
                let mut last = std::time::Instant::now();
                loop {
                    std::thread::sleep(every);
                    let slept = last.elapsed();
                    last = std::time::Instant::now();
                    let Some(inner) = inner.upgrade() else { return };
                    let since = inner.busy_since.load(Ordering::Relaxed);
                    if since == 0 || inner.failed.borrow().is_some() {
                        watching = 0;
                        continue;
                    }
                    if since != watching {
                        // Another write or sync: it started within the
                        // last interval.
                        watching = since;
                        let now = inner.epoch.elapsed().as_millis() as u64;
                        stalled = std::time::Duration::from_millis(now.saturating_sub(since))
                            .min(every);
                        continue;
                    }
                    stalled += slept.min(2 * every);
                    if stalled >= limit {
                        let why = format!(
                            "a write or sync of the log has not returned for {stalled:?} (the limit is {limit:?}): the disk hangs"
                        );
                        tracing::error!(error = %why, "the write-ahead log stalled: the node stops");
                        inner.failed.send_replace(Some(why));
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the log's stall watch");
        }
    }

    /// The log's last entry as appended, before it is durable; goes back
    /// with a truncation.
    pub fn appended(&self) -> tokio::sync::watch::Receiver<Option<LogId>> {
        self.inner.appended.subscribe()
    }

    /// Lets node `id`, while it leads, replicate its own entries while they
    /// are still being written: `append` reports them flushed at once, so
    /// openraft's core (which in 0.9 awaits the leader's flush before it
    /// sends anything) replicates without waiting for this disk, and the
    /// commit costs one fsync in series instead of two (the leader's and a
    /// follower's run side by side, as etcd does; Raft thesis §10.2.1).
    ///
    /// openraft then counts the leader towards a majority before its copy
    /// is durable, so the node must not let anyone see such a commit early:
    /// the state machine waits for [`Wal::flushed`] before it applies an
    /// entry (no client is answered from a commit this disk does not hold),
    /// and the peer network caps the commit index it sends followers at the
    /// same point (no follower applies one either). What anyone sees as
    /// committed is then durable on the leader and on the followers
    /// openraft counted, a majority, as before. Followers' appends, and a
    /// leader's re-appends of entries of other terms, are answered only
    /// when durable.
    pub fn flush_leader_appends_in_parallel(&self, id: NodeId) {
        let _ = self.inner.early_for.set(id);
    }

    /// Lets node `id` write and sync the entries another leader sends it on
    /// the thread that appends them (openraft's core task), instead of
    /// handing them to the writer thread and waiting for it.
    ///
    /// A follower has nothing to do while its append is synced but wait:
    /// openraft 0.9 sends it the next append only after this one is
    /// answered. The hand-off to the writer thread and back cost it two
    /// thread wake-ups and about a tenth of its CPU per entry
    /// (the performance history in `CHANGELOG.md`). The writer thread still takes everything
    /// else, and any append that finds it busy, so the log keeps its order.
    /// This node's own entries, while it leads, never block its core, and
    /// appends of many commands (a loaded cluster) go to the thread too
    /// (at most `INLINE_MAX_COMMANDS`, 4, are written in place).
    ///
    /// Only while the last sync took less than `while_syncs_take_under`:
    /// a core blocked in a slow sync hears nothing from its leader, and
    /// its election timer, read when the sync returns, would make it
    /// campaign and unseat a leader that is doing fine (openraft 0.9 has
    /// no pre-vote). On a slow disk the core stays free, and the writer
    /// thread's syncs tell when the disk is fast again.
    pub fn flush_follower_appends_inline(&self, id: NodeId, while_syncs_take_under: Duration) {
        let _ = self.inner.inline_for.set(id);
        self.inner
            .inline_below_us
            .store(while_syncs_take_under.as_micros() as u64, Ordering::Relaxed);
    }

    /// Whether the last sync was quick enough to write on the caller's
    /// thread.
    fn syncs_are_quick(&self) -> bool {
        self.inner.last_sync_us.load(Ordering::Relaxed)
            < self.inner.inline_below_us.load(Ordering::Relaxed)
    }

    /// Appends `entries` and calls `done` once they are durable, or at once
    /// for a leader's own entries (see
    /// [`Wal::flush_leader_appends_in_parallel`]).
    pub(crate) fn append_then(
        &self,
        entries: Vec<Entry>,
        done: Box<dyn FnOnce(io::Result<()>) + Send>,
    ) -> io::Result<()> {
        let mut records = Vec::with_capacity(entries.len());
        for entry in &entries {
            records.push(Encoded::entry(entry)?);
        }
        let last = entries.iter().map(|e| e.log_id).max_by_key(|l| l.index);
        let (early, here) = {
            let mut image = self.image_mut();
            let early = self.own_leader_entries(image.vote.as_ref(), &entries);
            let here = self.another_leaders_entries(image.vote.as_ref())
                && commands(&entries) <= INLINE_MAX_COMMANDS
                && self.syncs_are_quick();
            for e in entries {
                image.apply_effect(&Effect::Entry(e.log_id.index), Some(e));
            }
            self.inner.appended.send_replace(image.last_log_id());
            (early, here)
        };
        let count = records.len() as u64;
        let done = if early {
            // Readable from the image now, which is all replication needs.
            done(Ok(()));
            Done::Watch
        } else {
            Done::Call(done)
        };
        self.dispatch(
            Job {
                records,
                entries: count,
                done,
                last: last.map(Some),
            },
            here,
        )
    }

    /// Whether this node writes inline and `vote` names another leader.
    fn another_leaders_entries(&self, vote: Option<&Vote<NodeId>>) -> bool {
        let (Some(me), Some(vote)) = (self.inner.inline_for.get(), vote) else {
            return false;
        };
        vote.leader_id().voted_for() != Some(*me)
    }

    /// Whether `entries` are this node's own, appended while it leads.
    fn own_leader_entries(&self, vote: Option<&Vote<NodeId>>, entries: &[Entry]) -> bool {
        let (Some(me), Some(vote)) = (self.inner.early_for.get(), vote) else {
            return false;
        };
        vote.is_committed()
            && vote.leader_id().voted_for() == Some(*me)
            && entries
                .iter()
                .all(|e| e.log_id.leader_id == *vote.leader_id())
    }

    /// Write-path counters.
    pub fn stats(&self) -> Arc<FlushStats> {
        self.inner.stats.clone()
    }

    fn image(&self) -> parking_lot::RwLockReadGuard<'_, LogImage> {
        self.inner.image.read()
    }

    fn image_mut(&self) -> parking_lot::RwLockWriteGuard<'_, LogImage> {
        self.inner.image.write()
    }

    fn send(&self, job: Job) -> io::Result<()> {
        self.dispatch(job, false)
    }

    /// Hands `job` to the writer thread, or with `here` writes it on this
    /// thread when the writer thread has nothing queued.
    fn dispatch(&self, mut job: Job, here: bool) -> io::Result<()> {
        if !matches!(job.done, Done::Nobody) {
            let committed = self.inner.committed.lock().take();
            job.records.extend(committed);
        }
        if here {
            if let Some(mut process) = self.inner.process.try_lock() {
                // Nothing queued before this job, and nothing can be
                // written while the lock is held: the log keeps its order.
                if self.inner.queued.load(Ordering::SeqCst) == 0 {
                    process.process(vec![job]);
                    return Ok(());
                }
            }
        }
        self.inner.queued.fetch_add(1, Ordering::SeqCst);
        self.inner.writer.send(job).map_err(|_| {
            self.inner.queued.fetch_sub(1, Ordering::SeqCst);
            io::Error::other("the log writer stopped")
        })
    }

    /// Queues `records` and waits until they are durable; `last` is the
    /// log's last entry after them, if they change it.
    async fn write_durably(
        &self,
        records: Vec<Encoded>,
        last: Option<Option<LogId>>,
    ) -> io::Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Job {
            records,
            entries: 0,
            done: Done::Notify(tx),
            last,
        })?;
        rx.await
            .map_err(|_| io::Error::other("the log writer stopped"))?
    }

    /// Waits until everything queued so far is durable.
    pub async fn sync(&self) -> io::Result<()> {
        self.write_durably(Vec::new(), None).await
    }

    /// The whole log as it stands (for migration checks and tests).
    pub fn snapshot_image(&self) -> LogImage {
        self.image().clone()
    }

    /// Writes a recovered image into an empty log: used to migrate a data
    /// dir of an older release. Durable when it returns.
    pub async fn import(&self, image: &LogImage) -> io::Result<()> {
        let mut records = Vec::new();
        if let Some(p) = &image.purged {
            records.push(Encoded::purge(p)?);
        }
        if let Some(v) = &image.vote {
            records.push(Encoded::vote(v)?);
        }
        for e in image.entries.values() {
            records.push(Encoded::entry(e)?);
        }
        records.push(Encoded::committed(&image.committed)?);
        *self.image_mut() = image.clone();
        self.inner.appended.send_replace(image.last_log_id());
        self.write_durably(records, Some(image.last_log_id())).await
    }
}

/// Writes jobs: on the writer thread, or on the caller's thread when the
/// writer thread is idle.
trait Process: Send {
    /// Writes `batch` in one write, syncs it if anybody waits for one of
    /// its jobs, then tells their waiters in order.
    fn process(&mut self, batch: Vec<Job>);
}

struct Writer<D: WalDir> {
    core: Core<D>,
    /// See `Inner::busy_since`.
    busy_since: Arc<std::sync::atomic::AtomicU64>,
    epoch: std::time::Instant,
    /// See `Inner::last_sync_us`.
    last_sync_us: Arc<std::sync::atomic::AtomicU64>,
    stats: Arc<FlushStats>,
    flushed: tokio::sync::watch::Sender<Option<LogId>>,
    /// After a failed write the file's tail is unknown: everything after
    /// is refused rather than written after a hole.
    failed: Option<(io::ErrorKind, String)>,
    /// Tells the node (see [`Wal::failed`]).
    failure: tokio::sync::watch::Sender<Option<String>>,
    /// The log's last entry as of the records written so far, published
    /// to `flushed` at each sync.
    written_last: Option<Option<LogId>>,
    /// A purge record written but not yet synced: its segments may be
    /// deleted only after the next sync.
    purge_pending: bool,
    // Looked up once: the registry lookup of `histogram!` hashes the key
    // on every call, a few percent of a follower's CPU per entry.
    fsync_seconds: metrics::Histogram,
    batch_entries: metrics::Histogram,
}

/// The writer thread: every job queued at the moment goes out in one write
/// and one fdatasync; then their waiters are told, in order.
fn writer(
    process: Arc<parking_lot::Mutex<dyn Process>>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
    rx: mpsc::Receiver<Job>,
) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let count = batch.len();
        let mut process = process.lock();
        process.process(batch);
        // Under the lock: a caller that finds nothing queued while it holds
        // it may write in its place.
        queued.fetch_sub(count, Ordering::SeqCst);
    }
}

impl<D: WalDir> Process for Writer<D> {
    fn process(&mut self, mut batch: Vec<Job>) {
        // The committed index and purge points are written as they come but
        // synced only with the next record somebody waits for: an fdatasync
        // of their own would double the syncs of a lightly loaded node.
        let needs_sync = batch.iter().any(|j| !matches!(j.done, Done::Nobody));
        let started = std::time::Instant::now();
        // Never 0, which means idle.
        let since = (self.epoch.elapsed().as_millis() as u64).max(1);
        self.busy_since.store(since, Ordering::Relaxed);
        let result = match &self.failed {
            Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            None => {
                let records: Vec<Encoded> =
                    batch.iter_mut().flat_map(|j| j.records.drain(..)).collect();
                self.purge_pending |= records.iter().any(|r| matches!(r.effect, Effect::Purge(_)));
                let mut r = self.core.write(&records);
                if let Some(last) = batch.iter().rev().find_map(|j| j.last) {
                    self.written_last = Some(last);
                }
                if r.is_ok() && needs_sync {
                    r = self.core.sync();
                    if r.is_ok() {
                        if let Some(last) = self.written_last.take() {
                            self.flushed.send_replace(last);
                        }
                    }
                    if r.is_ok() && self.purge_pending {
                        self.purge_pending = false;
                        r = self.core.drop_purged().map(|_| ());
                    }
                }
                if let Err(e) = &r {
                    tracing::error!(error = %e, "the write-ahead log failed to write or sync; it takes no further writes");
                    self.failed = Some((e.kind(), e.to_string()));
                    self.failure.send_replace(Some(e.to_string()));
                }
                r
            }
        };
        self.busy_since.store(0, Ordering::Relaxed);
        let stats = &self.stats;
        if needs_sync {
            let took = started.elapsed();
            self.last_sync_us
                .store(took.as_micros() as u64, Ordering::Relaxed);
            self.fsync_seconds.record(took.as_secs_f64());
            stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        let entries: u64 = batch.iter().map(|j| j.entries).sum();
        if entries > 0 {
            self.batch_entries.record(entries as f64);
        }
        stats
            .batches
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        for job in batch {
            let result = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            stats.entries.fetch_add(job.entries, Ordering::Relaxed);
            match job.done {
                Done::Nobody | Done::Watch => {}
                Done::Call(callback) => callback(result),
                Done::Notify(tx) => {
                    let _ = tx.send(result);
                }
            }
        }
    }
}

impl RaftLogReader<TypeConfig> for Wal {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self
            .image()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for Wal {
    type LogReader = Wal;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let image = self.image();
        Ok(LogState {
            last_purged_log_id: image.purged,
            last_log_id: image.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let record = Encoded::vote(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.image_mut().vote = Some(*vote);
        // On disk before it is answered: forgetting a vote after a crash
        // would let this node vote twice in one term.
        self.write_durably(vec![record], None)
            .await
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        // openraft reads the vote once, at start, and a node whose saved
        // vote is its own committed one resumes leading in that term at
        // once. But a leader that replicates while it writes may have sent
        // entries its own disk lost in a power loss: leading again in the
        // same term, it would write other entries under the same log ids
        // its followers hold, and the logs would fork (an acknowledged
        // grant then vanishes when leadership moves). Started as a voter
        // for itself that has not won, it stands for a new term instead,
        // whose entries replace the lost ones; the vote still binds it in
        // its old term.
        let vote = self.image().vote;
        Ok(match (vote, self.inner.early_for.get()) {
            (Some(v), Some(me)) if v.is_committed() && v.leader_id().voted_for() == Some(*me) => {
                Some(Vote::new(v.leader_id().term, *me))
            }
            _ => vote,
        })
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let record = Encoded::committed(&committed).map_err(|e| StorageIOError::write(&e))?;
        self.image_mut().committed = committed;
        // Rides with the next write somebody waits for: losing it only
        // means re-applying from the snapshot up to a commit point the
        // cluster confirms again. It is written after the entries it
        // covers, which openraft appended before it committed them.
        *self.inner.committed.lock() = Some(record);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.image().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.append_then(
            entries.into_iter().collect(),
            Box::new(move |r| callback.log_io_completed(r)),
        )
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let record = Encoded::truncate(log_id.index).map_err(|e| StorageIOError::write_logs(&e))?;
        let last = {
            let mut image = self.image_mut();
            image.apply_effect(&Effect::Truncate(log_id.index), None);
            self.inner.appended.send_replace(image.last_log_id());
            image.last_log_id()
        };
        self.write_durably(vec![record], Some(last))
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let record = Encoded::purge(&log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        self.image_mut().apply_effect(&Effect::Purge(log_id), None);
        // Segments are deleted by the writer once this record is durable
        // (with the next sync).
        self.send(Job {
            records: vec![record],
            entries: 0,
            done: Done::Nobody,
            last: None,
        })
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}

#[cfg(test)]
mod damage_tests;
#[cfg(test)]
mod tests;
