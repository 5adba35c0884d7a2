//! The write-ahead log's file format and its synchronous core: framing,
//! segments, recovery. `super` runs it on a writer thread with group
//! commit and serves openraft from memory.
//!
//! Format (see `docs/wal.md`): a directory of segment files named
//! `<seq:016x>.wal`, each preallocated, starting with a 16-byte header
//! (`RLWAL\0\0\0`, format version u32 LE, 4 zero bytes) followed by records
//! `[payload length u32 LE][crc32c of payload u32 LE][payload]`; a length
//! of 0 (the preallocated zeros) ends the segment. A payload is one postcard
//! record (`Entry`, `Vote`, `Committed`, `Truncate`, `Purge`). Every segment after the first starts with a checkpoint of
//! the vote, committed index and purge point, so whole segments whose
//! entries are all purged can be deleted.

use crate::types::{Entry, LogId, NodeId};
use openraft::Vote;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

use super::disk::{WalDir, WalFile};

/// What every segment starts with.
pub const MAGIC: &[u8; 8] = b"RLWAL\0\0\0";
/// The segment format this build writes and reads.
pub const WAL_VERSION: u32 = 1;
const HEADER_LEN: u64 = 16;
const FRAME_LEN: usize = 8;
/// Larger payloads are corrupt by definition (an entry is at most a batch
/// of 65,536 commands of a few KiB).
const MAX_RECORD: usize = 1 << 30;
/// The default size segments are preallocated to.
pub const SEGMENT_BYTES: u64 = 64 << 20;

/// One record as written. Variants are numbered by position: append only.
#[derive(Serialize)]
enum RecordOut<'a> {
    Entry(&'a Entry),
    Vote(&'a Vote<NodeId>),
    Committed(&'a Option<LogId>),
    Truncate(u64),
    Purge(&'a LogId),
}

/// One record as read.
#[derive(Deserialize)]
enum RecordIn {
    Entry(Entry),
    Vote(Vote<NodeId>),
    Committed(Option<LogId>),
    Truncate(u64),
    Purge(LogId),
}

/// What a record does, kept beside its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// An entry at this index (it replaces any at or after it).
    Entry(u64),
    /// The vote.
    Vote(Vote<NodeId>),
    /// The committed log id.
    Committed(Option<LogId>),
    /// Entries from this index on are gone.
    Truncate(u64),
    /// Entries up to this log id are gone.
    Purge(LogId),
}

/// A record framed and ready to write.
#[derive(Clone, Debug)]
pub struct Encoded {
    /// Frame and payload.
    pub bytes: Vec<u8>,
    /// What it does.
    pub effect: Effect,
}

fn frame(record: &RecordOut<'_>) -> io::Result<Vec<u8>> {
    let mut bytes = postcard::to_io(record, vec![0u8; FRAME_LEN]).map_err(io::Error::other)?;
    let payload_len = bytes.len() - FRAME_LEN;
    if payload_len > MAX_RECORD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a log record of {payload_len} bytes is over the limit"),
        ));
    }
    let crc = crc32c::crc32c(&bytes[FRAME_LEN..]);
    bytes[..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(bytes)
}

impl Encoded {
    /// An entry.
    pub fn entry(entry: &Entry) -> io::Result<Encoded> {
        Ok(Encoded {
            bytes: frame(&RecordOut::Entry(entry))?,
            effect: Effect::Entry(entry.log_id.index),
        })
    }

    /// The vote.
    pub fn vote(vote: &Vote<NodeId>) -> io::Result<Encoded> {
        Ok(Encoded {
            bytes: frame(&RecordOut::Vote(vote))?,
            effect: Effect::Vote(*vote),
        })
    }

    /// The committed log id.
    pub fn committed(committed: &Option<LogId>) -> io::Result<Encoded> {
        Ok(Encoded {
            bytes: frame(&RecordOut::Committed(committed))?,
            effect: Effect::Committed(*committed),
        })
    }

    /// Drops entries from `since` on.
    pub fn truncate(since: u64) -> io::Result<Encoded> {
        Ok(Encoded {
            bytes: frame(&RecordOut::Truncate(since))?,
            effect: Effect::Truncate(since),
        })
    }

    /// Drops entries up to `upto`.
    pub fn purge(upto: &LogId) -> io::Result<Encoded> {
        Ok(Encoded {
            bytes: frame(&RecordOut::Purge(upto))?,
            effect: Effect::Purge(*upto),
        })
    }
}

/// The log as recovered from disk.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogImage {
    /// Entries by index, all above `purged`.
    pub entries: BTreeMap<u64, Entry>,
    /// The last saved vote.
    pub vote: Option<Vote<NodeId>>,
    /// The last saved committed log id.
    pub committed: Option<LogId>,
    /// The last purge point.
    pub purged: Option<LogId>,
}

impl LogImage {
    /// The last entry, or the purge point when nothing follows it.
    pub fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(self.purged)
    }

    fn apply(&mut self, record: RecordIn) {
        match record {
            RecordIn::Entry(e) => {
                let index = e.log_id.index;
                if self.purged.is_some_and(|p| index <= p.index) {
                    return;
                }
                // Raft only appends after truncating a conflict, but the
                // log must never hold a suffix older than a rewritten entry.
                let _ = self.entries.split_off(&index);
                self.entries.insert(index, e);
            }
            RecordIn::Vote(v) => self.vote = Some(v),
            RecordIn::Committed(c) => self.committed = c,
            RecordIn::Truncate(since) => {
                let _ = self.entries.split_off(&since);
            }
            RecordIn::Purge(upto) => {
                if self.purged.is_none_or(|p| p.index < upto.index) {
                    self.purged = Some(upto);
                }
                self.entries = self.entries.split_off(&(upto.index + 1));
            }
        }
    }

    /// Applies what a record written now does (the same rules as reading).
    pub fn apply_effect(&mut self, effect: &Effect, entry: Option<Entry>) {
        let record = match (effect, entry) {
            (Effect::Entry(_), Some(e)) => RecordIn::Entry(e),
            (Effect::Entry(_), None) => return,
            (Effect::Vote(v), _) => RecordIn::Vote(*v),
            (Effect::Committed(c), _) => RecordIn::Committed(*c),
            (Effect::Truncate(s), _) => RecordIn::Truncate(*s),
            (Effect::Purge(p), _) => RecordIn::Purge(*p),
        };
        self.apply(record);
    }
}

/// Reads a segment front to back in large chunks, so recovery reads only
/// as far as the records go, not the preallocated rest.
struct Reader<'f, F: WalFile> {
    file: &'f mut F,
    buf: Vec<u8>,
    /// Bytes of `buf` that hold file data.
    filled: usize,
    /// File offset of `buf[0]`.
    start: u64,
}

const READ_CHUNK: usize = 256 << 10;

impl<'f, F: WalFile> Reader<'f, F> {
    fn new(file: &'f mut F) -> Self {
        Reader {
            file,
            buf: Vec::new(),
            filled: 0,
            start: 0,
        }
    }

    /// Up to `len` bytes at `offset`: fewer only at the end of the file.
    fn get(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        let have = offset >= self.start && offset + len as u64 <= self.start + self.filled as u64;
        if !have {
            // Grow only as far as the file has bytes: a corrupt length can
            // claim up to a gigabyte, which must not be allocated blindly.
            self.start = offset;
            self.filled = 0;
            // A whole chunk even for a small read: the records that follow
            // come from memory.
            let mut size = READ_CHUNK;
            loop {
                if self.buf.len() < size {
                    self.buf.resize(size, 0);
                }
                let n = self.file.read_at(
                    &mut self.buf[self.filled..size],
                    offset + self.filled as u64,
                )?;
                self.filled += n;
                if self.filled >= len || self.filled < size {
                    break;
                }
                size *= 2;
            }
        }
        let from = (offset - self.start) as usize;
        let to = (from + len).min(self.filled);
        Ok(&self.buf[from.min(to)..to])
    }
}

struct Segment {
    seq: u64,
    /// The highest entry index ever written to it.
    max_index: Option<u64>,
}

fn segment_name(seq: u64) -> String {
    format!("{seq:016x}.wal")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".wal")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// How a recovery ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments read.
    pub segments: usize,
    /// Records read.
    pub records: u64,
    /// Where the log stopped on a torn or corrupt record: segment and
    /// offset. `None` when it ended cleanly.
    pub stopped_at: Option<(u64, u64)>,
    /// Later segments removed because an earlier one ended in a bad record.
    pub dropped_segments: usize,
}

/// The log's files, written synchronously: the writer thread owns one.
pub struct Core<D: WalDir> {
    dir: D,
    segment_bytes: u64,
    segments: Vec<Segment>,
    file: D::File,
    offset: u64,
    /// The vote, committed and purge point as written (for checkpoints).
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

impl<D: WalDir> Core<D> {
    /// Opens the log in `dir` (creating it when empty), recovering what it
    /// holds: reading stops at the first torn or corrupt record, which is
    /// where the log continues.
    pub fn open(dir: D, segment_bytes: u64) -> io::Result<(Core<D>, LogImage, RecoveryReport)> {
        let mut seqs: Vec<u64> = dir
            .list()?
            .iter()
            .filter_map(|n| parse_segment_name(n))
            .collect();
        seqs.sort_unstable();
        let mut image = LogImage::default();
        let mut report = RecoveryReport::default();
        let mut segments = Vec::new();
        let mut current: Option<(D::File, u64)> = None;
        let mut stop = false;
        let last = seqs.last().copied();
        for seq in seqs {
            if stop {
                dir.remove(&segment_name(seq))?;
                report.dropped_segments += 1;
                continue;
            }
            let mut file = dir.open(&segment_name(seq))?;
            let mut reader = Reader::new(&mut file);
            let header = reader.get(0, HEADER_LEN as usize)?.to_vec();
            report.segments += 1;
            if header.len() < HEADER_LEN as usize
                || &header[..8] != MAGIC
                || u32::from_le_bytes(header[8..12].try_into().unwrap_or_default()) != WAL_VERSION
            {
                if Some(seq) == last && header.iter().all(|b| *b == 0) {
                    // Created, but its header never reached the disk.
                    drop(reader);
                    dir.remove(&segment_name(seq))?;
                    report.segments -= 1;
                    continue;
                }
                let version = header
                    .get(8..12)
                    .map(|v| u32::from_le_bytes(v.try_into().unwrap_or_default()));
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} is not a raftlock WAL segment of format {WAL_VERSION} (found {version:?})",
                        segment_name(seq)
                    ),
                ));
            }
            let mut max_index = None;
            let mut at = HEADER_LEN;
            let end = loop {
                let frame = reader.get(at, FRAME_LEN)?;
                if frame.len() < FRAME_LEN {
                    break at;
                }
                let len = u32::from_le_bytes(frame[..4].try_into().unwrap_or_default()) as usize;
                if len == 0 {
                    break at;
                }
                let crc = u32::from_le_bytes(frame[4..].try_into().unwrap_or_default());
                let body = if len <= MAX_RECORD {
                    reader.get(at + FRAME_LEN as u64, len)?
                } else {
                    &[]
                };
                if body.len() != len || crc32c::crc32c(body) != crc {
                    stop = true;
                    break at;
                }
                let record = match postcard::from_bytes::<RecordIn>(body) {
                    Ok(r) => r,
                    Err(_) => {
                        stop = true;
                        break at;
                    }
                };
                if let RecordIn::Entry(e) = &record {
                    max_index = max_index.max(Some(e.log_id.index));
                }
                image.apply(record);
                report.records += 1;
                at += (FRAME_LEN + len) as u64;
            };
            drop(reader);
            if stop {
                report.stopped_at = Some((seq, end));
            }
            segments.push(Segment { seq, max_index });
            current = Some((file, end));
        }
        let (vote, committed, purged) = (image.vote, image.committed, image.purged);
        let Some((mut file, end)) = current else {
            let mut core = Core::<D>::fresh(dir, segment_bytes, 0)?;
            core.vote = vote;
            core.committed = committed;
            core.purged = purged;
            return Ok((core, image, report));
        };
        // Seal the last segment where its records end: a zero length there
        // ends it for every later reader, whatever a torn write left after
        // it, and nothing is ever written after it again (writing goes on
        // in a new segment), so those remains can never be read as records.
        file.write_at(&[0; FRAME_LEN], end)?;
        file.sync_data()?;
        let mut core = Core {
            dir,
            segment_bytes,
            segments,
            file,
            offset: end,
            vote,
            committed,
            purged,
        };
        core.rotate(0)?;
        Ok((core, image, report))
    }

    /// A log with one empty segment numbered `seq`.
    fn fresh(dir: D, segment_bytes: u64, seq: u64) -> io::Result<Core<D>> {
        let file = Self::new_segment(&dir, seq, segment_bytes, &[])?;
        Ok(Core {
            dir,
            segment_bytes,
            segments: vec![Segment {
                seq,
                max_index: None,
            }],
            file,
            offset: HEADER_LEN,
            vote: None,
            committed: None,
            purged: None,
        })
    }

    fn new_segment(dir: &D, seq: u64, len: u64, first: &[u8]) -> io::Result<D::File> {
        let mut file = dir.create(&segment_name(seq))?;
        let mut header = Vec::with_capacity(HEADER_LEN as usize + first.len());
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&WAL_VERSION.to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        header.extend_from_slice(first);
        // Preallocated: later writes do not change the file's size, so
        // fdatasync has no metadata to write.
        file.set_len(len.max(HEADER_LEN + first.len() as u64))?;
        file.write_at(&header, 0)?;
        file.sync_data()?;
        dir.sync()?;
        Ok(file)
    }

    /// Starts a new segment that begins with a checkpoint of the metadata,
    /// so older segments are never needed for it.
    fn rotate(&mut self, need: u64) -> io::Result<()> {
        // The checkpoint must not be durable before what precedes it: a
        // committed index that survived a crash without its entries would
        // point past the end of the log.
        self.file.sync_data()?;
        let mut checkpoint = Vec::new();
        if let Some(v) = &self.vote {
            checkpoint.extend(Encoded::vote(v)?.bytes);
        }
        checkpoint.extend(Encoded::committed(&self.committed)?.bytes);
        if let Some(p) = &self.purged {
            checkpoint.extend(Encoded::purge(p)?.bytes);
        }
        let seq = self.segments.last().map_or(0, |s| s.seq + 1);
        let len = self
            .segment_bytes
            .max(HEADER_LEN + checkpoint.len() as u64 + need);
        self.file = Self::new_segment(&self.dir, seq, len, &checkpoint)?;
        self.offset = HEADER_LEN + checkpoint.len() as u64;
        self.segments.push(Segment {
            seq,
            max_index: None,
        });
        Ok(())
    }

    /// Writes `records` after everything written so far, without syncing.
    pub fn write(&mut self, records: &[Encoded]) -> io::Result<()> {
        let len: usize = records.iter().map(|r| r.bytes.len()).sum();
        if len == 0 {
            return Ok(());
        }
        if self.offset + len as u64 > self.segment_bytes.max(self.offset) {
            self.rotate(len as u64)?;
        }
        let mut buf = Vec::with_capacity(len);
        for r in records {
            buf.extend_from_slice(&r.bytes);
        }
        self.file.write_at(&buf, self.offset)?;
        self.offset += len as u64;
        let seg = self.segments.last_mut().expect("the log has a segment");
        for r in records {
            match &r.effect {
                Effect::Entry(i) => seg.max_index = seg.max_index.max(Some(*i)),
                Effect::Vote(v) => self.vote = Some(*v),
                Effect::Committed(c) => self.committed = *c,
                Effect::Truncate(_) => {}
                Effect::Purge(p) => {
                    if self.purged.is_none_or(|q| q.index < p.index) {
                        self.purged = Some(*p);
                    }
                }
            }
        }
        Ok(())
    }

    /// Makes everything written durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Deletes the oldest segments whose entries are all purged. Call only
    /// once the purge record is durable: until then a crash needs them.
    pub fn drop_purged(&mut self) -> io::Result<usize> {
        let Some(purged) = self.purged else {
            return Ok(0);
        };
        let mut dropped = 0;
        while self.segments.len() > 1
            && self.segments[0].max_index.is_none_or(|m| m <= purged.index)
        {
            let seg = self.segments.remove(0);
            self.dir.remove(&segment_name(seg.seq))?;
            dropped += 1;
        }
        if dropped > 0 {
            self.dir.sync()?;
        }
        Ok(dropped)
    }

    /// Number of segment files.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }
}
