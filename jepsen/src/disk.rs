//! Disks for the disk nemesis: a tmpfs of its own for each node, a byte of
//! a node's write-ahead log flipped and later put back (a bad sector, then
//! a reseated disk), and a file that fills a disk to its last byte.
//!
//! The log's layout is `docs/wal.md`'s format 2: segments
//! `<data-dir>/wal/<16 hex>.wal`, a 16-byte segment header (version at
//! 8..12), then 8-aligned batches of a 32-byte header (`RLB\x02`, crcs,
//! seq, synced_to, body length at 24..28) and a body; a zero header ends
//! them.

use anyhow::Context;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Size of each node's tmpfs: room for the log of a long run with 1 MiB
/// segments, and little enough RAM for five of them.
pub const TMPFS_MB: u64 = 48;

/// Segment size the nodes run with under the disk nemesis: a full disk is
/// met once the current segment fills, within a few hundred large grants.
pub const SEGMENT_MB: u64 = 1;

/// Tmpfs file systems this process mounted; unmounted (lazily, so a
/// process still inside cannot keep them) when dropped.
pub struct Tmpfs {
    dirs: Vec<PathBuf>,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_mb` MiB on each of `dirs` (created if
    /// missing): all of them, or none and why.
    pub fn mount(dirs: &[PathBuf], size_mb: u64) -> anyhow::Result<Tmpfs> {
        let mut mounted = Tmpfs { dirs: Vec::new() };
        for d in dirs {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
                .arg(d)
                .output()
                .context("cannot run mount")?;
            if !out.status.success() {
                // `mounted` unmounts the earlier ones as it drops.
                anyhow::bail!(
                    "mount -t tmpfs on {}: {}",
                    d.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            mounted.dirs.push(d.clone());
        }
        Ok(mounted)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        for d in &self.dirs {
            match Command::new("umount").arg("-l").arg(d).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => tracing::error!(
                    dir = %d.display(),
                    error = %String::from_utf8_lossy(&o.stderr).trim(),
                    "cannot unmount a tmpfs of the disk nemesis"
                ),
                Err(e) => tracing::error!(dir = %d.display(), error = %e, "cannot run umount"),
            }
        }
    }
}

/// The log segments of the data dir `data_dir`, oldest first.
pub fn segments(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir.join("wal"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    files.sort();
    Ok(files)
}

/// Offsets of the batches of a format 2 segment, in order, up to the
/// first zero (or not whole) header.
pub fn batches(segment: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    if segment.len() < 16 || segment[8..12] != 2u32.to_le_bytes() {
        return out;
    }
    let mut at = 16usize;
    while at + 32 <= segment.len() && segment[at..at + 32].iter().any(|b| *b != 0) {
        if &segment[at..at + 4] != b"RLB\x02" {
            break;
        }
        out.push(at as u64);
        let len = u32::from_le_bytes([
            segment[at + 24],
            segment[at + 25],
            segment[at + 26],
            segment[at + 27],
        ]) as usize;
        at += (32 + len).div_ceil(8) * 8;
    }
    out
}

/// How many batches the newest segment of `data_dir` holds (0 when it has
/// no log yet).
pub fn newest_batches(data_dir: &Path) -> usize {
    let Some(file) = segments(data_dir).ok().and_then(|mut s| s.pop()) else {
        return 0;
    };
    std::fs::read(&file).map(|b| batches(&b).len()).unwrap_or(0)
}

/// A byte of a log segment the nemesis flipped, and what it was.
#[derive(Clone, Debug)]
pub struct Damage {
    /// The segment.
    pub file: PathBuf,
    /// The batch whose header holds the byte.
    pub batch: u64,
    /// The byte's offset in the segment.
    pub offset: u64,
    original: u8,
    flipped: u8,
}

impl Damage {
    /// `wal/<name>.wal at offset N`, for fault names.
    pub fn describe(&self) -> String {
        format!(
            "{} at offset {}",
            self.file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            self.batch
        )
    }

    /// Puts the original byte back. A file whose byte is no longer the
    /// flipped one was written since (a node that served on it), and is
    /// left alone.
    pub fn undo(&self) -> anyhow::Result<bool> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.file)
            .with_context(|| format!("cannot open {}", self.file.display()))?;
        let mut now = [0u8];
        f.read_exact_at(&mut now, self.offset)?;
        if now[0] != self.flipped {
            return Ok(false);
        }
        f.write_all_at(&[self.original], self.offset)?;
        f.sync_all()?;
        Ok(true)
    }
}

/// Flips a byte in the header of the batch a third of the way into the
/// newest segment of the stopped node's `data_dir`: written and synced
/// long before the batches after it, so durable by the log's own proof
/// (a torn write can only be after the last sync). The segment must hold
/// at least `min_batches`.
pub fn damage(data_dir: &Path, min_batches: usize) -> anyhow::Result<Damage> {
    let file = segments(data_dir)
        .with_context(|| format!("no log in {}", data_dir.display()))?
        .pop()
        .with_context(|| format!("no log segment in {}", data_dir.display()))?;
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let offsets = batches(&bytes);
    anyhow::ensure!(
        offsets.len() >= min_batches,
        "{} holds {} batches, fewer than the {min_batches} a durable damage needs",
        file.display(),
        offsets.len()
    );
    let batch = offsets[offsets.len() / 3];
    // Inside the header's synced_to field, which its checksum covers.
    let offset = batch + 20;
    let original = bytes[offset as usize];
    let d = Damage {
        file,
        batch,
        offset,
        original,
        flipped: original ^ 0x5a,
    };
    let f = std::fs::OpenOptions::new().write(true).open(&d.file)?;
    f.write_all_at(&[d.flipped], offset)?;
    f.sync_all()?;
    Ok(d)
}

/// Fills the file system of `dir` to its last byte with `dir/filler`;
/// returns the filler's path and size.
pub fn fill(dir: &Path) -> std::io::Result<(PathBuf, u64)> {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path)?;
    let chunk = vec![0xaau8; 64 << 10];
    while f.write_all(&chunk).is_ok() {}
    // Then ever smaller pieces, down to one byte, into what is left.
    let mut size = 4096;
    while size > 0 {
        if f.write_all(&chunk[..size]).is_err() {
            size /= 2;
        }
    }
    let _ = f.sync_all();
    let len = f.metadata()?.len();
    Ok((path, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A format 2 segment of `n` batches with bodies of 1..n bytes.
    fn segment(n: usize) -> Vec<u8> {
        let mut s = vec![0u8; 16];
        s[..8].copy_from_slice(b"RLWALSEG");
        s[8..12].copy_from_slice(&2u32.to_le_bytes());
        for i in 0..n {
            let mut h = vec![0u8; 32];
            h[..4].copy_from_slice(b"RLB\x02");
            h[8..16].copy_from_slice(&(i as u64 + 1).to_le_bytes());
            h[24..28].copy_from_slice(&(i as u32 + 1).to_le_bytes());
            s.extend_from_slice(&h);
            s.extend(std::iter::repeat_n(7u8, i + 1));
            s.resize(s.len().div_ceil(8) * 8, 0);
        }
        s.extend(std::iter::repeat_n(0u8, 4096));
        s
    }

    #[test]
    fn batches_are_found_at_their_aligned_offsets_up_to_the_zero_header() {
        let s = segment(10);
        let b = batches(&s);
        assert_eq!(b.len(), 10);
        assert_eq!(b[0], 16);
        assert_eq!(b[1], 16 + 40);
        assert!(b.iter().all(|o| o % 8 == 0));
        // Another format is not read as batches.
        let mut v1 = s.clone();
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        assert!(batches(&v1).is_empty());
    }

    #[test]
    fn a_damage_is_undone_to_the_original_bytes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("wal")).unwrap();
        let original = segment(30);
        let file = dir.path().join("wal/0000000000000001.wal");
        std::fs::write(&file, &original).unwrap();
        assert_eq!(newest_batches(dir.path()), 30);
        assert!(damage(dir.path(), 31).is_err(), "too few batches");
        let d = damage(dir.path(), 24).unwrap();
        assert_eq!(d.batch, batches(&original)[10]);
        let damaged = std::fs::read(&file).unwrap();
        let differ: Vec<usize> = (0..original.len())
            .filter(|&i| original[i] != damaged[i])
            .collect();
        assert_eq!(differ, vec![d.offset as usize]);
        assert!(d.undo().unwrap());
        assert_eq!(std::fs::read(&file).unwrap(), original);
        // Written over since: left alone.
        let d = damage(dir.path(), 24).unwrap();
        std::fs::write(&file, &original).unwrap();
        assert!(!d.undo().unwrap());
    }

    #[test]
    fn a_filler_takes_every_byte_a_small_file_system_has() {
        let dir = tempfile::tempdir().unwrap();
        let Ok(mounted) = Tmpfs::mount(&[dir.path().join("t")], 1) else {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        };
        let (path, len) = fill(&dir.path().join("t")).unwrap();
        assert!(len > 512 << 10, "{len}");
        assert!(std::fs::File::create(dir.path().join("t/more"))
            .and_then(|mut f| f.write_all(&[1u8; 4096]))
            .is_err());
        std::fs::remove_file(path).unwrap();
        drop(mounted);
    }
}
