//! What the fault matrix does to a stopped node's data dir: which file,
//! where in it, and which fault.

use rand::rngs::StdRng;
use rand::Rng;
use serde::Serialize;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A block: faults land on 4 KiB-aligned offsets, the unit a disk loses.
pub const BLOCK: u64 = 4096;

/// A file of a data dir, named by what it is rather than by its name
/// (segments rotate and are purged as the cluster runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The log segment being written.
    NewestSegment,
    /// A segment between the oldest and the newest (when there are three
    /// or more).
    MiddleSegment,
    /// The oldest segment kept.
    OldestSegment,
    /// `wal.end`, the record of where the log ends.
    LogEnd,
    /// `wal/synced`, how far the last sync reached.
    SyncedHint,
    /// The state machine's snapshot.
    Snapshot,
    /// `raftlock.json`: the node's id, cluster, incarnation and standing.
    Identity,
    /// `LOCK`, held by the running node.
    LockFile,
    /// The whole data dir.
    DataDir,
}

impl Target {
    /// Every file target, in the order the table lists them.
    pub const FILES: [Target; 8] = [
        Target::NewestSegment,
        Target::MiddleSegment,
        Target::OldestSegment,
        Target::LogEnd,
        Target::SyncedHint,
        Target::Snapshot,
        Target::Identity,
        Target::LockFile,
    ];

    /// How the table names it.
    pub fn label(&self) -> &'static str {
        match self {
            Target::NewestSegment => "wal newest segment",
            Target::MiddleSegment => "wal middle segment",
            Target::OldestSegment => "wal oldest segment",
            Target::LogEnd => "wal.end",
            Target::SyncedHint => "wal/synced",
            Target::Snapshot => "snapshot",
            Target::Identity => "raftlock.json",
            Target::LockFile => "LOCK",
            Target::DataDir => "data dir",
        }
    }

    /// The file this target is in `data_dir` now, if there is one.
    pub fn resolve(&self, data_dir: &Path) -> Option<PathBuf> {
        let segments = || crate::disk::segments(data_dir).unwrap_or_default();
        let existing = |p: PathBuf| p.exists().then_some(p);
        match self {
            Target::NewestSegment => segments().pop(),
            Target::OldestSegment => segments().into_iter().next(),
            Target::MiddleSegment => {
                let s = segments();
                (s.len() >= 3).then(|| s[s.len() / 2].clone())
            }
            Target::LogEnd => existing(data_dir.join("wal.end")),
            Target::SyncedHint => existing(data_dir.join("wal").join("synced")),
            Target::Snapshot => existing(data_dir.join("snapshot")),
            Target::Identity => existing(data_dir.join("raftlock.json")),
            Target::LockFile => existing(data_dir.join("LOCK")),
            Target::DataDir => existing(data_dir.to_owned()),
        }
    }
}

/// What happens to the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The 4 KiB block at the offset reads as zeros (a lost write, a
    /// remapped sector).
    Zero,
    /// One byte of that block is flipped (bit rot the disk did not catch).
    Flip,
    /// The file ends at the offset (a file system that lost its tail).
    Truncate,
    /// Reads of the 4 KiB block at the offset fail with EIO (a latent
    /// sector error), through the FUSE layer the data dirs are on.
    ReadError,
    /// The file is gone (fsck moved it to `lost+found`).
    Remove,
    /// The whole data dir is gone (a replaced disk, a lost volume).
    Lost,
}

impl Kind {
    /// The kinds that take an offset.
    pub const AT_OFFSETS: [Kind; 4] = [Kind::Zero, Kind::Flip, Kind::Truncate, Kind::ReadError];

    /// How the table names it.
    pub fn label(&self) -> &'static str {
        match self {
            Kind::Zero => "zero block",
            Kind::Flip => "flip byte",
            Kind::Truncate => "truncate",
            Kind::ReadError => "EIO on read",
            Kind::Remove => "remove",
            Kind::Lost => "lose all",
        }
    }
}

/// How far a file holds anything but zeros: segments are preallocated, and
/// damage to never-written zeros tests nothing.
pub fn written_len(file: &Path) -> std::io::Result<u64> {
    let mut f = std::fs::File::open(file)?;
    let len = f.metadata()?.len();
    let mut end = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    let mut at = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if let Some(last) = buf[..n].iter().rposition(|b| *b != 0) {
            end = at + last as u64 + 1;
        }
        at += n as u64;
    }
    // A file of zeros only (or empty) still has its first block.
    Ok(if end == 0 { len.min(BLOCK) } else { end })
}

/// `slots` block offsets spread over the first `written` bytes, always
/// with the first and the last block (a header, and the tail where a torn
/// write and a lost durable block look most alike); all of them when there
/// are fewer blocks than slots, none for an empty file.
pub fn offsets(written: u64, slots: usize) -> Vec<u64> {
    let blocks = written.div_ceil(BLOCK);
    if blocks == 0 || slots == 0 {
        return Vec::new();
    }
    if blocks <= slots as u64 {
        return (0..blocks).map(|b| b * BLOCK).collect();
    }
    let mut out: Vec<u64> = (0..slots as u64 - 1)
        .map(|i| i * blocks / (slots as u64 - 1) * BLOCK)
        .collect();
    out.push((blocks - 1) * BLOCK);
    out.dedup();
    out
}

/// Removes everything in `dir`, which stays (it may be a mount point).
pub fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    Ok(())
}

/// Applies `kind` at `offset` of `path` (the data dir itself for
/// [`Kind::Lost`]); says what it did. [`Kind::ReadError`] is not a change
/// to the file: the caller switches it on the node's FUSE layer.
pub fn apply(kind: Kind, path: &Path, offset: u64, rng: &mut StdRng) -> std::io::Result<String> {
    match kind {
        Kind::Lost => {
            empty_dir(path)?;
            Ok(format!("removed everything in {}", path.display()))
        }
        Kind::ReadError => Ok(format!(
            "reads of the block at {offset} of {} fail with EIO",
            path.display()
        )),
        Kind::Remove => {
            std::fs::remove_file(path)?;
            Ok(format!("removed {}", path.display()))
        }
        Kind::Truncate => {
            let f = std::fs::OpenOptions::new().write(true).open(path)?;
            f.set_len(offset)?;
            f.sync_all()?;
            Ok(format!("truncated {} at {offset}", path.display()))
        }
        Kind::Zero | Kind::Flip => {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)?;
            let len = f.metadata()?.len();
            let n = BLOCK.min(len.saturating_sub(offset));
            if n == 0 {
                return Ok(format!("nothing at {offset} of {}", path.display()));
            }
            let what = if kind == Kind::Zero {
                f.seek(SeekFrom::Start(offset))?;
                f.write_all(&vec![0u8; n as usize])?;
                format!("zeroed {n} bytes at {offset} of {}", path.display())
            } else {
                let at = offset + rng.gen_range(0..n);
                let mut b = [0u8; 1];
                f.seek(SeekFrom::Start(at))?;
                f.read_exact(&mut b)?;
                b[0] ^= 1 << rng.gen_range(0..8);
                f.seek(SeekFrom::Start(at))?;
                f.write_all(&b)?;
                format!("flipped a bit of byte {at} of {}", path.display())
            };
            f.sync_all()?;
            Ok(what)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn offsets_cover_the_first_and_last_block() {
        assert_eq!(offsets(0, 16), Vec::<u64>::new());
        assert_eq!(offsets(10, 16), vec![0]);
        assert_eq!(offsets(3 * BLOCK, 16), vec![0, BLOCK, 2 * BLOCK]);
        let o = offsets(100 * BLOCK + 1, 16);
        assert_eq!(o.len(), 16);
        assert_eq!(o[0], 0);
        assert_eq!(*o.last().unwrap(), 100 * BLOCK);
        assert!(o.windows(2).all(|w| w[0] < w[1]), "{o:?}");
    }

    #[test]
    fn written_len_ignores_preallocated_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("seg");
        let mut bytes = vec![0u8; 1 << 20];
        bytes[5000] = 1;
        std::fs::write(&f, &bytes).unwrap();
        assert_eq!(written_len(&f).unwrap(), 5001);
        std::fs::write(&f, vec![0u8; 100]).unwrap();
        assert_eq!(written_len(&f).unwrap(), 100);
    }

    #[test]
    fn each_fault_changes_what_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("file");
        let mut rng = StdRng::seed_from_u64(1);
        std::fs::write(&f, vec![7u8; 3 * BLOCK as usize]).unwrap();
        apply(Kind::Zero, &f, BLOCK, &mut rng).unwrap();
        let b = std::fs::read(&f).unwrap();
        assert!(b[..BLOCK as usize].iter().all(|x| *x == 7));
        assert!(b[BLOCK as usize..2 * BLOCK as usize]
            .iter()
            .all(|x| *x == 0));
        assert!(b[2 * BLOCK as usize..].iter().all(|x| *x == 7));

        std::fs::write(&f, vec![7u8; 3 * BLOCK as usize]).unwrap();
        apply(Kind::Flip, &f, 2 * BLOCK, &mut rng).unwrap();
        let b = std::fs::read(&f).unwrap();
        let changed: Vec<usize> = (0..b.len()).filter(|i| b[*i] != 7).collect();
        assert_eq!(changed.len(), 1);
        assert!(changed[0] >= 2 * BLOCK as usize);
        assert_eq!((b[changed[0]] ^ 7).count_ones(), 1);

        apply(Kind::Truncate, &f, BLOCK, &mut rng).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().len(), BLOCK);
        apply(Kind::Remove, &f, 0, &mut rng).unwrap();
        assert!(!f.exists());
    }
}
