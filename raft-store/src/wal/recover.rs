//! Reading a log back: which bytes may have been torn by a crash, and which
//! can only have been damaged after they were made durable.
//!
//! The rule (`docs/wal.md`, "Recovery"): only bytes written after the last
//! completed `fdatasync` of the last segment may be torn. Every batch of
//! format 2 states the offset up to which its segment was durable when it
//! was written (`synced_to`), and batches are numbered without gaps across
//! segments. So a bad batch is a torn tail only when it is in the last
//! segment and no later batch says that it had been synced; anything else
//! (a bad batch in an earlier segment, a gap in the numbering, a bad batch
//! that a later one proves durable) is damage, and recovery refuses with a
//! [`Damage`] that names the file, the offset and the last good entry.

use super::disk::{WalDir, WalFile};
use super::format::{
    decode_synced, segment_name, BatchHeader, LogEnd, LogImage, RecordIn, BATCH_HEADER,
    BATCH_MAGIC, FRAME_LEN, HEADER_LEN, MAGIC, MAX_RECORD, SYNCED_HINT, V1, WAL_VERSION,
};
use std::io;

/// A log that cannot be trusted: bytes that were durable are damaged. The
/// node must not start on it (it could vote twice, or serve a shorter log
/// than it acknowledged); it is rebuilt from the other members instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the write-ahead log is damaged: {file} at offset {offset}: {what}; {why}. \
     The last good entry is {last}. Refusing to start on a log that lost durable records: \
     rebuild this node from the other members (`raftlockd repair`, docs/operations.md, \
     \"When a disk fails\"), or, if no healthy majority is left, recover from a backup. \
     `raftlockd check --data-dir DIR` reports the whole log.",
    last = match .last_good_index { Some(i) => format!("index {i}"), None => "none (no entry read)".into() }
)]
pub struct Damage {
    /// The segment file.
    pub file: String,
    /// Where in it the damage starts.
    pub offset: u64,
    /// The last entry read whole before it.
    pub last_good_index: Option<u64>,
    /// What is wrong there.
    pub what: String,
    /// Why it cannot be a torn write.
    pub why: String,
    /// The log ends before where it is known to have reached (`wal.end`):
    /// what it holds may be whole, but it lost its end, so the node may
    /// have acknowledged entries it no longer has.
    pub ends_early: bool,
}

impl Damage {
    /// The damage as an I/O error of kind `InvalidData` that keeps it (see
    /// [`Damage::find`]).
    pub fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, self)
    }

    /// The damage behind an I/O error, if that is what it is.
    pub fn find(e: &io::Error) -> Option<&Damage> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<Damage>())
    }
}

/// How a recovery ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments read.
    pub segments: usize,
    /// Batches read (format 2).
    pub batches: u64,
    /// Records read.
    pub records: u64,
    /// Where a torn tail started: segment and offset. `None` when the log
    /// ended cleanly.
    pub stopped_at: Option<(u64, u64)>,
    /// Bytes of the last segment past the end of the log that were not
    /// zero (the remains of a torn write), zeroed on open.
    pub torn_bytes: u64,
    /// Segments of format 1 read (with that format's rules; writing goes on
    /// in a new segment of the current format).
    pub v1_segments: usize,
}

/// What reading the segments found, before anything is written.
pub(crate) struct Recovered {
    pub image: LogImage,
    pub report: RecoveryReport,
    /// Each segment read: number, highest entry index, format version,
    /// where its batches end.
    pub segments: Vec<(u64, Option<u64>, u32, u64)>,
    /// The highest `synced_to` of the last segment's batches.
    pub claimed: u64,
    /// The last segment's end of log (where writing may go on), when the
    /// log has a segment.
    pub end: Option<u64>,
    /// Ranges of the last segment after `end` that hold stale bytes.
    pub stale: Vec<(u64, u64)>,
    /// The number the next batch takes.
    pub next_seq: u64,
    /// A last segment whose header never reached the disk.
    pub unborn: Option<u64>,
}

/// Reads a segment front to back in large chunks, so recovery reads only
/// as far as the records go, not the preallocated rest.
pub(crate) struct Reader<'f, F: WalFile> {
    file: &'f mut F,
    /// The segment's name, for errors.
    name: &'f str,
    buf: Vec<u8>,
    /// Bytes of `buf` that hold file data.
    filled: usize,
    /// File offset of `buf[0]`.
    start: u64,
}

const READ_CHUNK: usize = 256 << 10;

impl<'f, F: WalFile> Reader<'f, F> {
    pub(crate) fn new(file: &'f mut F, name: &'f str) -> Self {
        Reader {
            file,
            name,
            buf: Vec::new(),
            filled: 0,
            start: 0,
        }
    }

    /// Up to `len` bytes at `offset`: fewer only at the end of the file.
    pub(crate) fn get(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
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
                let at = offset + self.filled as u64;
                let n = self
                    .file
                    .read_at(&mut self.buf[self.filled..size], at)
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!(
                                "reading write-ahead log segment {} at offset {at}: {e}",
                                self.name
                            ),
                        )
                    })?;
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

/// Records framed back to back in `bytes`, each checked; `None` if any
/// fails or they do not fill `bytes` exactly.
fn records(bytes: &[u8]) -> Option<Vec<RecordIn>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let frame = bytes.get(at..at + FRAME_LEN)?;
        let len = u32::from_le_bytes(frame[..4].try_into().ok()?) as usize;
        let crc = u32::from_le_bytes(frame[4..].try_into().ok()?);
        let body = bytes.get(at + FRAME_LEN..(at + FRAME_LEN).checked_add(len)?)?;
        if len == 0 || crc32c::crc32c(body) != crc {
            return None;
        }
        out.push(postcard::from_bytes::<RecordIn>(body).ok()?);
        at += FRAME_LEN + len;
    }
    Some(out)
}

/// The last entry index the image holds, for messages.
fn last_index(image: &LogImage) -> Option<u64> {
    image.last_log_id().map(|l| l.index)
}

#[cfg(test)]
thread_local! {
    /// Plants [`damage_as_torn`] for the tests of this thread.
    pub(crate) static TEST_DAMAGE_AS_TORN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A planted bug (never in a normal build): read damage as a torn tail,
/// to show that the tests and the fault-injection harness catch it.
fn damage_as_torn() -> bool {
    if crate::planted::planted(crate::planted::Bug::DamageAsTorn) {
        return true;
    }
    #[cfg(test)]
    if TEST_DAMAGE_AS_TORN.with(|c| c.get()) {
        return true;
    }
    false
}

/// Where a segment's batches stopped.
enum Stop {
    /// At a zero batch header: the end of what was written, unless later
    /// batches say otherwise.
    Zeros(u64),
    /// At a batch that is not whole: offset and what is wrong.
    Bad(u64, String),
}

/// Reads every segment of `dir` and decides where the log ends. Writes
/// nothing: the caller zeroes the stale tail it reports.
pub(crate) fn read_log<D: WalDir>(dir: &D) -> io::Result<Recovered> {
    let mut seqs: Vec<u64> = dir
        .list()?
        .iter()
        .filter_map(|n| super::format::parse_segment_name(n))
        .collect();
    seqs.sort_unstable();
    let mut out = Recovered {
        image: LogImage::default(),
        report: RecoveryReport::default(),
        segments: Vec::new(),
        end: None,
        stale: Vec::new(),
        next_seq: 1,
        unborn: None,
        claimed: HEADER_LEN,
    };
    // The number the next batch must carry; unknown at the start of the log
    // (its first segments may have been deleted) and after a format 1
    // segment.
    let mut expected: Option<u64> = None;
    let count = seqs.len();
    for (i, seq) in seqs.into_iter().enumerate() {
        let is_last = i + 1 == count;
        let name = segment_name(seq);
        let mut file = dir.open(&name).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("opening write-ahead log segment {name}: {e}"),
            )
        })?;
        let mut reader = Reader::new(&mut file, &name);
        let header = reader.get(0, HEADER_LEN as usize)?.to_vec();
        let version = header
            .get(8..12)
            .map(|v| u32::from_le_bytes(v.try_into().unwrap_or_default()));
        if header.len() < HEADER_LEN as usize || &header[..8] != MAGIC {
            if is_last && header.iter().all(|b| *b == 0) {
                // Created, but its header never reached the disk: a crash
                // while a segment was started. Nothing in it was durable.
                out.unborn = Some(seq);
                continue;
            }
            return Err(Damage {
                file: name,
                offset: 0,
                last_good_index: last_index(&out.image),
                what: "the segment header is not a raftlock WAL header".into(),
                why: if is_last {
                    "a segment's header is synced before anything is written after it".into()
                } else {
                    "only the last segment can end in a torn write".into()
                },
                ends_early: false,
            }
            .into_io());
        }
        out.report.segments += 1;
        let (max_index, stop) = match version {
            Some(WAL_VERSION) => {
                let mut max_index = None;
                let stop = read_batches(&mut reader, &mut out, &mut expected, &mut max_index)?;
                (max_index, stop)
            }
            Some(V1) => {
                out.report.v1_segments += 1;
                expected = None;
                let (max_index, stop) = read_v1(&mut reader, &mut out)?;
                (max_index, stop)
            }
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{name} is a raftlock WAL segment of format {}, which this build does not read (it reads {V1} and {WAL_VERSION}); run a newer raftlockd",
                        other.map_or("?".into(), |v| v.to_string())
                    ),
                ));
            }
        };
        let stop_at = match &stop {
            Stop::Zeros(at) | Stop::Bad(at, _) => *at,
        };
        out.segments
            .push((seq, max_index, version.unwrap_or_default(), stop_at));
        if !is_last && !damage_as_torn() {
            if let Stop::Bad(at, what) = stop {
                return Err(Damage {
                    file: name,
                    offset: at,
                    last_good_index: last_index(&out.image),
                    what,
                    why: "it is not in the last segment, and a segment is synced in full before the next one starts".into(),
                    ends_early: false,
                }
                .into_io());
            }
            continue;
        }
        // The last segment: what follows the stop point was either never
        // written, or written after the last sync (torn), or durable and
        // damaged. Later batches tell which.
        let tail = scan_tail(&mut reader, stop_at, expected)?;
        if let Some((at, later)) = tail.proof.filter(|_| !damage_as_torn()) {
            let what = match &stop {
                Stop::Bad(_, what) => what.clone(),
                Stop::Zeros(_) => "zeros where a batch should be (a lost write)".into(),
            };
            return Err(Damage {
                file: name,
                offset: stop_at,
                last_good_index: last_index(&out.image),
                what,
                why: format!(
                    "batch {} at offset {at} was written after bytes up to offset {} were synced, so these bytes were durable",
                    later.seq, later.synced_to
                ),
                ends_early: false,
            }
            .into_io());
        }
        if matches!(stop, Stop::Bad(..)) || !tail.stale.is_empty() {
            out.report.stopped_at = Some((seq, stop_at));
        }
        out.report.torn_bytes = tail.stale.iter().map(|(a, b)| b - a).sum();
        out.stale = tail.stale;
        out.end = Some(stop_at);
    }
    out.next_seq = expected.unwrap_or(1);
    check_end(dir, &out, expected)?;
    Ok(out)
}

/// Refuses a log that ends before `wal.end` says it reached: every segment
/// header and batch before that point was synced before the record was
/// written, so no crash can take them; a lost block, a lost file or an
/// emptied directory can.
fn check_end<D: WalDir>(dir: &D, out: &Recovered, expected: Option<u64>) -> io::Result<()> {
    let mut claims = Vec::new();
    if let Some(bytes) = dir.read_end()? {
        let end: LogEnd = serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("wal.end, the record of where the log ends, is damaged ({e}); refusing to start on a log whose end cannot be checked"),
            )
        })?;
        claims.push((end, "wal.end", "wal.end is written only once everything before that point was synced, so the missing part was durable (a lost block, a missing segment file, an emptied wal/)"));
    }
    if let Some(end) = read_synced_hint(dir) {
        claims.push((end, "wal/synced", "wal/synced is rewritten after every completed fdatasync, before what it covers is acknowledged, so the missing part was durable (a lost or truncated block at the end of the log)"));
    }
    let newest = out.segments.last().map(|(seq, ..)| *seq);
    for (end, source, why) in claims {
        let short = match (newest, expected) {
            (None, _) => Some("no segment at all".to_string()),
            (Some(n), _) if n < end.segment => {
                Some(format!("segment {} as the newest", segment_name(n)))
            }
            (Some(_), Some(next)) if next < end.batch => {
                Some(format!("batches up to number {}", next.saturating_sub(1)))
            }
            _ => None,
        };
        let Some(found) = short else {
            continue;
        };
        let (file, offset) = match out.segments.last() {
            Some((seq, _, _, stop)) if *seq >= end.segment => (segment_name(*seq), *stop),
            _ => (segment_name(end.segment), 0),
        };
        return Err(Damage {
            file,
            offset,
            last_good_index: last_index(&out.image),
            what: format!(
                "the log ends early: {source} says it reached segment {} and batch {}, but it holds {found}",
                segment_name(end.segment),
                end.batch.saturating_sub(1)
            ),
            why: why.into(),
            ends_early: true,
        }
        .into_io());
    }
    Ok(())
}

/// The synced hint (`format::SYNCED_HINT`), when there is a whole one.
fn read_synced_hint<D: WalDir>(dir: &D) -> Option<LogEnd> {
    let mut f = dir.open(SYNCED_HINT).ok()?;
    let mut b = [0u8; 24];
    let n = f.read_at(&mut b, 0).ok()?;
    decode_synced(&b[..n])
}

/// Reads format 2 batches from the segment's header on. Each batch is
/// applied only when it is whole.
fn read_batches<F: WalFile>(
    reader: &mut Reader<'_, F>,
    out: &mut Recovered,
    expected: &mut Option<u64>,
    max_index: &mut Option<u64>,
) -> io::Result<Stop> {
    let mut at = HEADER_LEN;
    out.claimed = HEADER_LEN;
    loop {
        let head = reader.get(at, BATCH_HEADER)?;
        if head.iter().all(|b| *b == 0) {
            return Ok(Stop::Zeros(at));
        }
        let Some(batch) = BatchHeader::decode(head) else {
            return Ok(Stop::Bad(
                at,
                "a batch header that fails its checksum".into(),
            ));
        };
        if let Some(e) = *expected {
            if batch.seq != e {
                return Ok(Stop::Bad(
                    at,
                    format!("batch {} where batch {e} was expected (a gap)", batch.seq),
                ));
            }
        }
        let len = batch.body_len as usize;
        if len > MAX_RECORD {
            return Ok(Stop::Bad(at, format!("a batch that claims {len} bytes")));
        }
        let padded = super::format::padded(BATCH_HEADER as u64 + len as u64);
        let whole = reader.get(at, padded as usize)?;
        if whole.len() as u64 != padded {
            return Ok(Stop::Bad(
                at,
                "a batch cut short by the end of the file".into(),
            ));
        }
        let body = &whole[BATCH_HEADER..BATCH_HEADER + len];
        if crc32c::crc32c(body) != batch.body_crc {
            return Ok(Stop::Bad(
                at,
                format!("batch {} whose records fail their checksum", batch.seq),
            ));
        }
        if whole[BATCH_HEADER + len..].iter().any(|b| *b != 0) {
            return Ok(Stop::Bad(
                at,
                format!("batch {} whose padding is not zero", batch.seq),
            ));
        }
        let Some(recs) = records(body) else {
            return Ok(Stop::Bad(
                at,
                format!("batch {} with a record that does not decode", batch.seq),
            ));
        };
        for r in recs {
            if let RecordIn::Entry(e) = &r {
                *max_index = (*max_index).max(Some(e.log_id.index));
            }
            out.image.apply(r);
            out.report.records += 1;
        }
        out.report.batches += 1;
        out.claimed = out.claimed.max(batch.synced_to);
        *expected = Some(batch.seq + 1);
        at += padded;
    }
}

/// Reads a format 1 segment (records back to back, no batches): it cannot
/// tell a torn write from damage, so it stops at the first bad record as
/// that format always did; only the last segment may end so.
fn read_v1<F: WalFile>(
    reader: &mut Reader<'_, F>,
    out: &mut Recovered,
) -> io::Result<(Option<u64>, Stop)> {
    let mut max_index = None;
    let mut at = HEADER_LEN;
    loop {
        let frame = reader.get(at, FRAME_LEN)?;
        if frame.len() < FRAME_LEN {
            return Ok((max_index, Stop::Zeros(at)));
        }
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap_or_default()) as usize;
        if len == 0 {
            return Ok((max_index, Stop::Zeros(at)));
        }
        let crc = u32::from_le_bytes(frame[4..].try_into().unwrap_or_default());
        let body = if len <= MAX_RECORD {
            reader.get(at + FRAME_LEN as u64, len)?
        } else {
            &[]
        };
        if body.len() != len || crc32c::crc32c(body) != crc {
            return Ok((
                max_index,
                Stop::Bad(at, "a record that fails its checksum".into()),
            ));
        }
        let Ok(record) = postcard::from_bytes::<RecordIn>(body) else {
            return Ok((
                max_index,
                Stop::Bad(at, "a record that does not decode".into()),
            ));
        };
        if let RecordIn::Entry(e) = &record {
            max_index = max_index.max(Some(e.log_id.index));
        }
        out.image.apply(record);
        out.report.records += 1;
        at += (FRAME_LEN + len) as u64;
    }
}

/// What lies after the end of the log in the last segment.
struct Tail {
    /// A later whole batch header that says the end was already synced.
    proof: Option<(u64, BatchHeader)>,
    /// Ranges that are not zero.
    stale: Vec<(u64, u64)>,
}

const SCAN_CHUNK: usize = 1 << 20;

/// Looks at everything after `from` to the end of the file: a torn write
/// leaves pieces of batches there, never a batch written after a sync
/// that covered `from`.
fn scan_tail<F: WalFile>(
    reader: &mut Reader<'_, F>,
    from: u64,
    expected: Option<u64>,
) -> io::Result<Tail> {
    let mut tail = Tail {
        proof: None,
        stale: Vec::new(),
    };
    let mut at = from;
    loop {
        // Read a little past the chunk so a header that straddles its end
        // is seen whole.
        let chunk = reader.get(at, SCAN_CHUNK + BATCH_HEADER)?.to_vec();
        if chunk.is_empty() {
            break;
        }
        let own = chunk.len().min(SCAN_CHUNK);
        if chunk[..own].iter().any(|b| *b != 0) {
            match tail.stale.last_mut() {
                Some((_, end)) if *end == at => *end = at + own as u64,
                _ => tail.stale.push((at, at + own as u64)),
            }
            // Batches start 8-aligned (`from` is).
            let mut o = 0usize;
            while o < own {
                if chunk[o..].starts_with(&BATCH_MAGIC) {
                    if let Some(h) = chunk.get(o..o + BATCH_HEADER).and_then(BatchHeader::decode) {
                        let later = expected.is_none_or(|e| h.seq >= e);
                        if later && h.synced_to > from {
                            tail.proof = Some((at + o as u64, h));
                            return Ok(tail);
                        }
                    }
                }
                o += super::format::ALIGN as usize;
            }
        }
        if chunk.len() < SCAN_CHUNK {
            break;
        }
        at += SCAN_CHUNK as u64;
    }
    Ok(tail)
}
