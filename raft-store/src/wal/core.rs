//! The write-ahead log's synchronous core: segments and writing, in the
//! format of `format`. `recover` reads a log back; `super` runs this on a
//! writer thread with group commit and serves openraft from memory.

use crate::types::{LogId, NodeId};
use openraft::Vote;
use std::io;

use super::disk::{WalDir, WalFile};
use super::format::{
    encode_synced, padded, segment_name, BatchHeader, Effect, Encoded, LogEnd, LogImage,
    BATCH_HEADER, FRAME_LEN, HEADER_LEN, MAGIC, MAX_RECORD, SYNCED_HINT, WAL_VERSION,
};
pub use super::recover::RecoveryReport;

struct Segment {
    seq: u64,
    /// The highest entry index ever written to it.
    max_index: Option<u64>,
    /// Where its batches end, once it is no longer written to.
    end: u64,
}

/// The log's files, written synchronously: the writer thread owns one.
pub struct Core<D: WalDir> {
    dir: D,
    segment_bytes: u64,
    segments: Vec<Segment>,
    file: D::File,
    offset: u64,
    /// The current segment is durable up to here (the end of the last
    /// batch a completed `fdatasync` covered).
    synced: u64,
    /// The number of the next batch.
    next_seq: u64,
    /// The highest `synced_to` a batch of the current segment carries:
    /// recovery can prove everything before it durable.
    claimed: u64,
    /// The vote, committed and purge point as written (for checkpoints).
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId>,
    purged: Option<LogId>,
    /// The synced hint (`format::SYNCED_HINT`), opened at the first sync.
    hint: Option<D::File>,
}

/// Records durably that the log reaches segment `segment` and batch
/// `batch` (`format::LogEnd`).
fn record_end<D: WalDir>(dir: &D, segment: u64, batch: u64) -> io::Result<()> {
    let bytes = serde_json::to_vec(&LogEnd { segment, batch }).map_err(io::Error::other)?;
    dir.write_end(&bytes)
}

impl<D: WalDir> Core<D> {
    /// Opens the log in `dir` (creating it when empty), recovering what it
    /// holds. A torn tail (bytes written after the last sync of the last
    /// segment) is dropped and zeroed, and writing goes on in that segment;
    /// any other damage is refused with a [`Damage`](super::recover::Damage)
    /// error and nothing is written.
    pub fn open(dir: D, segment_bytes: u64) -> io::Result<(Core<D>, LogImage, RecoveryReport)> {
        let found = super::recover::read_log(&dir)?;
        let image = found.image;
        let report = found.report;
        if let Some(seq) = found.unborn {
            dir.remove(&segment_name(seq))?;
            dir.sync()?;
        }
        let segments: Vec<Segment> = found
            .segments
            .iter()
            .map(|(seq, max_index, _, end)| Segment {
                seq: *seq,
                max_index: *max_index,
                end: *end,
            })
            .collect();
        let last = found.segments.last().copied();
        let (vote, committed, purged) = (image.vote, image.committed, image.purged);
        let (Some((seq, _, version, _)), Some(end)) = (last, found.end) else {
            // No segment, or the newest was never started: begin one.
            let seq = found.unborn.or(last.map(|(s, _, _, _)| s + 1)).unwrap_or(0);
            let core = Core::fresh(dir, segment_bytes, seq, found.next_seq, &image, segments)?;
            return Ok((core, image, report));
        };
        let mut file = dir.open(&segment_name(seq))?;
        // What a torn write left after the end is zeroed, so it can never be
        // read together with the batches written there next; and everything
        // read is synced before it is trusted (a process crash leaves
        // unsynced writes in the page cache, readable but not durable).
        for (from, to) in &found.stale {
            let zeros = vec![0u8; (to - from) as usize];
            file.write_at(&zeros, *from)?;
        }
        if version != WAL_VERSION {
            // A format 1 segment: seal it where its records end, and go on
            // in a new segment of this format.
            file.write_at(&[0; FRAME_LEN], end)?;
        }
        file.sync_data()?;
        let mut core = Core {
            dir,
            segment_bytes,
            segments,
            file,
            offset: end,
            synced: end,
            next_seq: found.next_seq,
            claimed: found.claimed,
            vote,
            committed,
            purged,
            hint: None,
        };
        if version != WAL_VERSION {
            core.rotate(0)?;
        } else {
            record_end(&core.dir, seq, core.next_seq)?;
        }
        Ok((core, image, report))
    }

    /// A log that goes on in a new segment numbered `seq`, after
    /// `segments`, starting with a checkpoint of `image`.
    fn fresh(
        dir: D,
        segment_bytes: u64,
        seq: u64,
        next_seq: u64,
        image: &LogImage,
        mut segments: Vec<Segment>,
    ) -> io::Result<Core<D>> {
        let checkpoint = checkpoint(image.vote.as_ref(), &image.committed, image.purged.as_ref())?;
        let first = BatchHeader {
            seq: next_seq,
            synced_to: HEADER_LEN,
            body_len: 0,
            body_crc: 0,
        };
        let batch = framed(first, &checkpoint)?;
        let file = Self::new_segment(&dir, seq, segment_bytes, &batch)?;
        record_end(&dir, seq, next_seq + 1)?;
        let offset = HEADER_LEN + batch.len() as u64;
        segments.push(Segment {
            seq,
            max_index: None,
            end: 0,
        });
        Ok(Core {
            dir,
            segment_bytes,
            segments,
            file,
            offset,
            synced: offset,
            next_seq: next_seq + 1,
            claimed: HEADER_LEN,
            vote: image.vote,
            committed: image.committed,
            purged: image.purged,
            hint: None,
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
        let checkpoint = checkpoint(self.vote.as_ref(), &self.committed, self.purged.as_ref())?;
        let batch = framed(
            BatchHeader {
                seq: self.next_seq,
                synced_to: HEADER_LEN,
                body_len: 0,
                body_crc: 0,
            },
            &checkpoint,
        )?;
        let seq = self.segments.last().map_or(0, |s| s.seq + 1);
        let len = self
            .segment_bytes
            .max(HEADER_LEN + batch.len() as u64 + need);
        self.file = Self::new_segment(&self.dir, seq, len, &batch)?;
        self.next_seq += 1;
        record_end(&self.dir, seq, self.next_seq)?;
        if let Some(s) = self.segments.last_mut() {
            s.end = self.offset;
        }
        self.offset = HEADER_LEN + batch.len() as u64;
        self.synced = self.offset;
        self.claimed = HEADER_LEN;
        self.segments.push(Segment {
            seq,
            max_index: None,
            end: 0,
        });
        Ok(())
    }

    /// Writes `records` as one batch after everything written so far,
    /// without syncing.
    pub fn write(&mut self, records: &[Encoded]) -> io::Result<()> {
        let len: usize = records.iter().map(|r| r.bytes.len()).sum();
        if len == 0 {
            return Ok(());
        }
        if len > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a log batch of {len} bytes is over the limit"),
            ));
        }
        let total = padded((BATCH_HEADER + len) as u64);
        if self.offset + total > self.segment_bytes.max(self.offset) {
            self.rotate(total)?;
        }
        let mut body = Vec::with_capacity(total as usize);
        body.extend_from_slice(&[0; BATCH_HEADER]);
        for r in records {
            body.extend_from_slice(&r.bytes);
        }
        let header = BatchHeader {
            seq: self.next_seq,
            synced_to: self.synced,
            body_len: len as u32,
            body_crc: crc32c::crc32c(&body[BATCH_HEADER..]),
        };
        body[..BATCH_HEADER].copy_from_slice(&header.encode());
        body.resize(total as usize, 0);
        self.file.write_at(&body, self.offset)?;
        self.claimed = self.synced;
        self.offset += total;
        self.next_seq += 1;
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
        self.file.sync_data()?;
        self.synced = self.offset;
        self.note_synced();
        Ok(())
    }

    /// Rewrites the synced hint, before the caller reports the batches
    /// durable. Not synced, and a failure is not the log's: a hint that is
    /// older than the log, or missing, only proves less.
    fn note_synced(&mut self) {
        let Some(segment) = self.segments.last().map(|s| s.seq) else {
            return;
        };
        if self.hint.is_none() {
            self.hint = self
                .dir
                .open(SYNCED_HINT)
                .or_else(|_| self.dir.create(SYNCED_HINT))
                .ok();
        }
        if let Some(f) = &mut self.hint {
            let end = LogEnd {
                segment,
                batch: self.next_seq,
            };
            let _ = f.write_at(&encode_synced(&end), 0);
        }
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

    /// Each segment's file name and the offset before which recovery can
    /// prove every byte durable: a whole earlier segment, and in the
    /// current one what a later batch says was synced. Damage there is
    /// refused; only bytes after it may be read as a torn tail.
    pub fn provably_durable(&self) -> Vec<(String, u64)> {
        let last = self.segments.len().saturating_sub(1);
        self.segments
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    segment_name(s.seq),
                    if i == last { self.claimed } else { s.end },
                )
            })
            .collect()
    }
}

/// The checkpoint records a segment starts with.
fn checkpoint(
    vote: Option<&Vote<NodeId>>,
    committed: &Option<LogId>,
    purged: Option<&LogId>,
) -> io::Result<Vec<u8>> {
    let mut records = Vec::new();
    if let Some(v) = vote {
        records.extend(Encoded::vote(v)?.bytes);
    }
    records.extend(Encoded::committed(committed)?.bytes);
    if let Some(p) = purged {
        records.extend(Encoded::purge(p)?.bytes);
    }
    Ok(records)
}

/// A batch: `header` with the body's length and checksum filled in, the
/// body, and the padding.
fn framed(mut header: BatchHeader, body: &[u8]) -> io::Result<Vec<u8>> {
    header.body_len = u32::try_from(body.len()).map_err(io::Error::other)?;
    header.body_crc = crc32c::crc32c(body);
    let mut out = header.encode().to_vec();
    out.extend_from_slice(body);
    out.resize(padded(out.len() as u64) as usize, 0);
    Ok(out)
}
