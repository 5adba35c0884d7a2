//! The Raft log on sled: entries in the `log` tree keyed by big-endian
//! index (so key order is index order), vote / committed / last-purged in
//! the `meta` tree.
//!
//! Durability is the point of a Raft log: an entry acknowledged as appended
//! may already count towards a commit, so it must survive a power cut.
//! sled 0.34's `flush` writes its buffers with `sync_file_range`, which
//! neither flushes the drive's cache nor covers file metadata, so a flush
//! alone is not durable. Every flush here is followed by `fdatasync` of
//! sled's data file. Both happen on one flusher thread that takes every
//! request waiting at that moment, does one flush + fdatasync for all of
//! them, and completes their callbacks in order: group commit, so many
//! appends share one fsync under load.

use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader, StorageIOError, Vote};
use std::fmt::Debug;
use std::fs::File;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// The sled-backed openraft log. Cheap to clone: clones share one database
/// and one flusher.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Inner>,
}

struct Inner {
    log: sled::Tree,
    meta: sled::Tree,
    flusher: mpsc::Sender<Waiting>,
    stats: Arc<FlushStats>,
}

/// Counters that explain log write throughput.
#[derive(Debug, Default)]
pub struct FlushStats {
    /// flush + fdatasync rounds done.
    pub fsyncs: AtomicU64,
    /// Append batches (and vote saves) made durable by those rounds.
    pub batches: AtomicU64,
    /// Entries made durable.
    pub entries: AtomicU64,
}

/// Something waiting for the next flush.
enum Waiting {
    Append(LogFlushed<TypeConfig>, u64),
    Notify(tokio::sync::oneshot::Sender<io::Result<()>>),
}

impl LogStore {
    /// Opens the log in `db`, whose data file is `db_file`.
    pub fn open(db: &sled::Db, db_file: &Path) -> Result<Self, StorageError> {
        let log = db
            .open_tree("log")
            .map_err(|e| StorageIOError::read_logs(&e))?;
        let meta = db
            .open_tree("meta")
            .map_err(|e| StorageIOError::read_logs(&e))?;
        let stats = Arc::new(FlushStats::default());
        let (tx, rx) = mpsc::channel();
        let file = File::open(db_file).map_err(|e| StorageIOError::read_logs(&e))?;
        let flusher_db = db.clone();
        let flusher_stats = stats.clone();
        std::thread::Builder::new()
            .name("raftlock-log-flusher".into())
            .spawn(move || flusher(flusher_db, file, rx, flusher_stats))
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(LogStore {
            inner: Arc::new(Inner {
                log,
                meta,
                flusher: tx,
                stats,
            }),
        })
    }

    /// Write-path counters.
    pub fn stats(&self) -> Arc<FlushStats> {
        self.inner.stats.clone()
    }

    /// Waits until everything written so far is on disk.
    async fn durable(&self) -> io::Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.inner
            .flusher
            .send(Waiting::Notify(tx))
            .map_err(|_| io::Error::other("log flusher stopped"))?;
        rx.await
            .map_err(|_| io::Error::other("log flusher stopped"))?
    }

    fn read_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
    ) -> Result<Option<T>, StorageError> {
        let Some(bytes) = self
            .inner
            .meta
            .get(key)
            .map_err(|e| StorageIOError::read(&e))?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StorageIOError::read(&e).into())
    }

    fn write_meta<T: serde::Serialize>(&self, key: &[u8], value: &T) -> Result<(), StorageError> {
        let bytes = serde_json::to_vec(value).map_err(|e| StorageIOError::write(&e))?;
        self.inner
            .meta
            .insert(key, bytes)
            .map_err(|e| StorageIOError::write(&e))?;
        Ok(())
    }
}

/// The flusher thread: one flush + fdatasync per batch of waiting requests.
fn flusher(db: sled::Db, file: File, rx: mpsc::Receiver<Waiting>, stats: Arc<FlushStats>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let started = std::time::Instant::now();
        let result = db
            .flush()
            .map_err(io::Error::other)
            .and_then(|_| file.sync_data());
        metrics::histogram!("raftlock_fsync_seconds").record(started.elapsed().as_secs_f64());
        let entries: u64 = batch
            .iter()
            .map(|w| match w {
                Waiting::Append(_, n) => *n,
                Waiting::Notify(_) => 0,
            })
            .sum();
        if entries > 0 {
            metrics::histogram!("raftlock_append_batch_entries").record(entries as f64);
        }
        stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        stats
            .batches
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        for waiting in batch {
            let result = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            match waiting {
                Waiting::Append(callback, entries) => {
                    stats.entries.fetch_add(entries, Ordering::Relaxed);
                    callback.log_io_completed(result);
                }
                Waiting::Notify(tx) => {
                    let _ = tx.send(result);
                }
            }
        }
    }
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// Marks an entry stored in the binary (postcard) format. Entries written
/// by earlier releases are JSON and start with `{`; both are read. Binary
/// entries are about a third of the size and decode several times faster,
/// which is most of the time a restart spends replaying the log after the
/// snapshot.
const BINARY_ENTRY: u8 = 0x01;

/// Encodes one log entry as the store writes it.
pub fn encode(entry: &Entry) -> Result<Vec<u8>, StorageError> {
    postcard::to_io(entry, vec![BINARY_ENTRY]).map_err(|e| StorageIOError::write_logs(&e).into())
}

/// Decodes one stored log entry (a value of the `log` tree). Public so that
/// the fuzz targets and property tests feed it exactly what the store reads.
pub fn decode(bytes: &[u8]) -> Result<Entry, StorageError> {
    match bytes.split_first() {
        Some((&BINARY_ENTRY, body)) => {
            let (entry, rest) = postcard::take_from_bytes::<Entry>(body)
                .map_err(|e| StorageIOError::read_logs(&e))?;
            if !rest.is_empty() {
                let e = io::Error::new(io::ErrorKind::InvalidData, "bytes after a log entry");
                return Err(StorageIOError::read_logs(&e).into());
            }
            Ok(entry)
        }
        _ => serde_json::from_slice(bytes).map_err(|e| StorageIOError::read_logs(&e).into()),
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(i) => Bound::Included(key(*i)),
            Bound::Excluded(i) => Bound::Excluded(key(*i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => Bound::Included(key(*i)),
            Bound::Excluded(i) => Bound::Excluded(key(*i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        self.inner
            .log
            .range::<[u8; 8], _>((start, end))
            .map(|kv| {
                let (_, v) = kv.map_err(|e| StorageIOError::read_logs(&e))?;
                decode(&v)
            })
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id: Option<LogId> = self.read_meta(LAST_PURGED)?;
        let last = self
            .inner
            .log
            .last()
            .map_err(|e| StorageIOError::read_logs(&e))?
            .map(|(_, v)| decode(&v))
            .transpose()?
            .map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id: last.or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        self.write_meta(VOTE, vote)?;
        // A vote must be on disk before it is sent: forgetting it after a
        // crash would let this node vote twice in one term.
        self.durable()
            .await
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.read_meta(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not fsynced on its own: losing it only means re-applying from the
        // snapshot up to a commit point the cluster will confirm again.
        self.write_meta(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.read_meta::<Option<LogId>>(COMMITTED)?.flatten())
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
        let mut batch = sled::Batch::default();
        let mut count = 0u64;
        for entry in entries {
            let bytes = encode(&entry)?;
            batch.insert(&key(entry.log_id.index), bytes);
            count += 1;
        }
        self.inner
            .log
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.inner
            .flusher
            .send(Waiting::Append(callback, count))
            .map_err(|_| StorageIOError::write_logs(&io::Error::other("log flusher stopped")))?;
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for kv in self.inner.log.range(key(log_id.index)..) {
            let (k, _) = kv.map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(k);
        }
        self.inner
            .log
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.durable()
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: a crash between the two steps then
        // leaves extra entries below it, which are ignored, never a hole.
        self.write_meta(LAST_PURGED, &log_id)?;
        let mut batch = sled::Batch::default();
        for kv in self.inner.log.range(..=key(log_id.index)) {
            let (k, _) = kv.map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(k);
        }
        self.inner
            .log
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Command, Mode, RequestId};
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry() -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 2), 42),
            payload: EntryPayload::Normal(crate::Proposal::batch(
                1_700_000_000_000,
                vec![Command::Acquire {
                    session: 7,
                    name: "jobs/nightly".into(),
                    request_id: RequestId(u128::MAX - 1),
                    mode: Mode::Shared,
                    permits: Some(3),
                    wait_ms: None,
                    metadata: b"worker-1".to_vec(),
                }],
            )),
        }
    }

    /// Entries are written binary, and entries an earlier release wrote as
    /// JSON still read back the same.
    #[test]
    fn binary_and_json_entries_decode_alike() {
        let e = entry();
        let binary = encode(&e).unwrap();
        assert_eq!(binary[0], BINARY_ENTRY);
        let json = serde_json::to_vec(&e).unwrap();
        assert!(binary.len() < json.len());
        // Entries have no PartialEq; their JSON (u128 request ids and all)
        // stands in for it.
        let from_binary = serde_json::to_vec(&decode(&binary).unwrap()).unwrap();
        let from_json = serde_json::to_vec(&decode(&json).unwrap()).unwrap();
        assert_eq!(from_binary, json);
        assert_eq!(from_json, json);
        let mut trailing = binary.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        assert!(decode(&binary[..binary.len() - 1]).is_err());
        assert!(decode(&[BINARY_ENTRY]).is_err());
    }
}
