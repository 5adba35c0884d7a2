//! The write-ahead log's format: what its files hold, record by record.
//!
//! Format 2 (see `docs/wal.md`): a directory of segment files named
//! `<seq:016x>.wal`, each preallocated, starting with a 16-byte header
//! (`RLWAL\0\0\0`, format version u32 LE, 4 zero bytes) followed by
//! batches, one per write, each 8-aligned: a 32-byte header (magic, CRC-32C
//! of the rest of the header, batch number, the offset up to which the
//! segment was durable when the batch was written, body length, CRC-32C of
//! the body), then the body: records `[payload length u32 LE][crc32c of
//! payload u32 LE][payload]`, then zeros to the next multiple of 8. A zero
//! header ends the segment. A payload is one postcard record (`Entry`,
//! `Vote`, `Committed`, `Truncate`, `Purge`). Every segment starts with a
//! checkpoint batch of the vote, committed index and purge point, so whole
//! segments whose entries are all purged can be deleted.

use crate::types::{Entry, LogId, NodeId};
use openraft::Vote;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

/// What every segment starts with.
pub const MAGIC: &[u8; 8] = b"RLWAL\0\0\0";
/// The segment format this build writes.
pub const WAL_VERSION: u32 = 2;
/// The format before batches, still read (`recover::read_v1`).
pub(crate) const V1: u32 = 1;
pub(crate) const HEADER_LEN: u64 = 16;
pub(crate) const FRAME_LEN: usize = 8;
/// Larger payloads are corrupt by definition (an entry is at most a batch
/// of 65,536 commands of a few KiB).
pub(crate) const MAX_RECORD: usize = 1 << 30;
/// What a batch header starts with.
pub(crate) const BATCH_MAGIC: [u8; 4] = *b"RLB\x02";
/// Bytes of a batch header.
pub(crate) const BATCH_HEADER: usize = 32;
/// Batches start at multiples of this.
pub(crate) const ALIGN: u64 = 8;
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
pub(crate) enum RecordIn {
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

    pub(crate) fn apply(&mut self, record: RecordIn) {
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

/// `n` rounded up to a multiple of [`ALIGN`].
pub(crate) fn padded(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

/// The header of a batch: what lets recovery tell a torn write from damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    /// Numbered from 1 without gaps across segments.
    pub seq: u64,
    /// The segment was durable up to this offset when the batch was
    /// written: whatever lies before it cannot have been torn.
    pub synced_to: u64,
    /// Bytes of records after the header.
    pub body_len: u32,
    /// CRC-32C of those bytes.
    pub body_crc: u32,
}

impl BatchHeader {
    pub(crate) fn encode(&self) -> [u8; BATCH_HEADER] {
        let mut h = [0u8; BATCH_HEADER];
        h[..4].copy_from_slice(&BATCH_MAGIC);
        h[8..16].copy_from_slice(&self.seq.to_le_bytes());
        h[16..24].copy_from_slice(&self.synced_to.to_le_bytes());
        h[24..28].copy_from_slice(&self.body_len.to_le_bytes());
        h[28..32].copy_from_slice(&self.body_crc.to_le_bytes());
        let crc = crc32c::crc32c(&h[8..]);
        h[4..8].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// The header in `h`, if it is one and its checksum holds.
    pub(crate) fn decode(h: &[u8]) -> Option<BatchHeader> {
        let h = h.get(..BATCH_HEADER)?;
        if h[..4] != BATCH_MAGIC {
            return None;
        }
        let u32_at = |i: usize| h[i..i + 4].try_into().ok().map(u32::from_le_bytes);
        let u64_at = |i: usize| h[i..i + 8].try_into().ok().map(u64::from_le_bytes);
        if u32_at(4)? != crc32c::crc32c(&h[8..]) {
            return None;
        }
        Some(BatchHeader {
            seq: u64_at(8)?,
            synced_to: u64_at(16)?,
            body_len: u32_at(24)?,
            body_crc: u32_at(28)?,
        })
    }
}

/// Where the log is known to reach, kept durably outside its segments
/// (`wal.end`, JSON): segment `segment` exists and every batch numbered
/// below `batch` was written. Replaced each time a segment is started and
/// each time the log is opened; both only grow. A log read back that ends
/// before it lost durable records (a zeroed segment header, a missing
/// newest segment, an emptied directory), which no crash can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEnd {
    /// The newest segment.
    pub segment: u64,
    /// The number of the next batch.
    pub batch: u64,
}

/// The file in the log's directory that says where the last completed
/// `fdatasync` reached: a [`LogEnd`] rewritten in place after every sync,
/// before the batches it covers are reported durable, and never synced
/// itself. A process crash keeps it (the page cache does); a power loss may
/// lose it or leave an older one, and then it says less, never more. So
/// when it is readable it proves the batches below it durable, which the
/// batches themselves cannot do for the last ones written: a lost block at
/// the very end of the log would otherwise read as a torn write.
pub const SYNCED_HINT: &str = "synced";

const SYNCED_MAGIC: [u8; 4] = *b"RLS\x01";

/// The bytes of the synced hint: magic, segment, batch, crc32c of those.
pub fn encode_synced(end: &LogEnd) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[..4].copy_from_slice(&SYNCED_MAGIC);
    b[4..12].copy_from_slice(&end.segment.to_le_bytes());
    b[12..20].copy_from_slice(&end.batch.to_le_bytes());
    let crc = crc32c::crc32c(&b[..20]);
    b[20..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The synced hint in `b`, or `None` when it is not one whole (a damaged
/// or torn hint proves nothing and is ignored).
pub fn decode_synced(b: &[u8]) -> Option<LogEnd> {
    let b = b.get(..24)?;
    if b[..4] != SYNCED_MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(b[20..24].try_into().ok()?);
    if crc32c::crc32c(&b[..20]) != crc {
        return None;
    }
    Some(LogEnd {
        segment: u64::from_le_bytes(b[4..12].try_into().ok()?),
        batch: u64::from_le_bytes(b[12..20].try_into().ok()?),
    })
}

pub(crate) fn segment_name(seq: u64) -> String {
    format!("{seq:016x}.wal")
}

pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".wal")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}
