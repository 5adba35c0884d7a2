//! The few file operations the write-ahead log needs, behind a trait, so
//! that tests can run it on a simulated disk that keeps written-but-unsynced
//! bytes apart and loses them (or tears the last write) on a crash.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One file of the log.
pub trait WalFile: Send + 'static {
    /// Writes all of `buf` at `offset`.
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Reads into `buf` from `offset`; returns how many bytes were read
    /// (fewer only at the end of the file).
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Makes every write so far durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Sets the file's length, preallocating it; durable once synced.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
}

/// The directory of the log.
pub trait WalDir: Send + Sync + 'static {
    /// Its files.
    type File: WalFile;
    /// Names of the files in it.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Creates (or truncates) a file.
    fn create(&self, name: &str) -> io::Result<Self::File>;
    /// Opens an existing file for reading and writing.
    fn open(&self, name: &str) -> io::Result<Self::File>;
    /// Removes a file.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Makes creations and removals durable (fsync of the directory).
    fn sync(&self) -> io::Result<()>;
    /// The durable record of where the log ends (`format::LogEnd`), kept
    /// outside the directory's segments so that a directory emptied of
    /// them still says it had a log.
    fn read_end(&self) -> io::Result<Option<Vec<u8>>>;
    /// Replaces that record durably.
    fn write_end(&self, bytes: &[u8]) -> io::Result<()>;
}

/// A directory of the real file system.
#[derive(Clone, Debug)]
pub struct FsDir {
    path: PathBuf,
    read_only: bool,
}

impl FsDir {
    /// The directory at `path`, created if absent.
    pub fn new(path: impl Into<PathBuf>) -> io::Result<FsDir> {
        let path = path.into();
        fs::create_dir_all(&path)?;
        Ok(FsDir {
            path,
            read_only: false,
        })
    }

    /// The existing directory at `path`, its files opened for reading
    /// only: creating or removing one fails (offline tools).
    pub fn read_only(path: impl Into<PathBuf>) -> io::Result<FsDir> {
        let path = path.into();
        if !path.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such directory", path.display()),
            ));
        }
        Ok(FsDir {
            path,
            read_only: true,
        })
    }

    fn refuse_write(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is open read-only", self.path.display()),
            ));
        }
        Ok(())
    }
}

impl WalFile for fs::File {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match FileExt::read_at(self, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        fs::File::sync_data(self)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // Allocate the blocks now, not on each write (a sparse file would
        // make every fdatasync allocate and journal them).
        // SAFETY: a valid open descriptor; posix_fallocate reads nothing else.
        let r = unsafe { libc::posix_fallocate(self.as_raw_fd(), 0, len as libc::off_t) };
        if r != 0 {
            // Not every file system can (tmpfs can; some cannot): a plain
            // length is still correct, only slower.
            fs::File::set_len(self, len)?;
        }
        Ok(())
    }
}

impl FsDir {
    /// `<dir>.end` beside the directory (`wal.end` for `wal/`).
    fn end_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".end");
        self.path.with_file_name(name)
    }
}

impl WalDir for FsDir {
    type File = fs::File;

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in fs::read_dir(&self.path)? {
            if let Some(name) = e?.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn create(&self, name: &str) -> io::Result<fs::File> {
        self.refuse_write()?;
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.path.join(name))
    }

    fn open(&self, name: &str) -> io::Result<fs::File> {
        fs::OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .open(self.path.join(name))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.refuse_write()?;
        fs::remove_file(self.path.join(name))
    }

    fn sync(&self) -> io::Result<()> {
        fs::File::open(&self.path)?.sync_all()
    }

    fn read_end(&self) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.end_path()) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_end(&self, bytes: &[u8]) -> io::Result<()> {
        self.refuse_write()?;
        write_durably(&self.end_path(), bytes)
    }
}

/// Real files whose writes stay in this process's memory until synced, so
/// that killing the process loses exactly what a power loss would: every
/// write not yet made durable. Fault injection for tests and chaos drills
/// (`raftlockd --fault-lose-unsynced`), never for production: a crash of
/// the process then costs what a power loss costs.
#[derive(Clone, Debug)]
pub struct LoseUnsyncedDir {
    inner: FsDir,
}

impl LoseUnsyncedDir {
    /// The directory at `path`, created if absent.
    pub fn new(path: impl Into<PathBuf>) -> io::Result<LoseUnsyncedDir> {
        Ok(LoseUnsyncedDir {
            inner: FsDir::new(path)?,
        })
    }
}

/// A file of [`LoseUnsyncedDir`]: writes wait in `pending` until synced.
pub struct LoseUnsyncedFile {
    file: fs::File,
    pending: Vec<(u64, Vec<u8>)>,
}

impl WalFile for LoseUnsyncedFile {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        // A write over exactly what an earlier one wrote replaces it: a
        // file rewritten in place and never synced (the log's synced hint)
        // does not pile up.
        self.pending
            .retain(|(at, b)| !(*at == offset && b.len() <= buf.len()));
        self.pending.push((offset, buf.to_vec()));
        Ok(())
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let n = WalFile::read_at(&mut self.file, buf, offset)?;
        // Later writes over earlier ones, as the page cache would show them.
        let end = offset + buf.len() as u64;
        let mut seen = n;
        for (at, bytes) in &self.pending {
            let (from, to) = (*at.max(&offset), (at + bytes.len() as u64).min(end));
            if from < to {
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&bytes[(from - at) as usize..(to - at) as usize]);
                seen = seen.max((to - offset) as usize);
            }
        }
        Ok(seen)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        for (at, bytes) in self.pending.drain(..) {
            FileExt::write_all_at(&self.file, &bytes, at)?;
        }
        fs::File::sync_data(&self.file)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        WalFile::set_len(&mut self.file, len)
    }
}

impl WalDir for LoseUnsyncedDir {
    type File = LoseUnsyncedFile;

    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }

    fn create(&self, name: &str) -> io::Result<LoseUnsyncedFile> {
        Ok(LoseUnsyncedFile {
            file: self.inner.create(name)?,
            pending: Vec::new(),
        })
    }

    fn open(&self, name: &str) -> io::Result<LoseUnsyncedFile> {
        Ok(LoseUnsyncedFile {
            file: self.inner.open(name)?,
            pending: Vec::new(),
        })
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn read_end(&self) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_end()
    }

    fn write_end(&self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_end(bytes)
    }
}

/// A directory whose every `fdatasync` takes `delay` longer: a slow or
/// overloaded disk, for fault-injection runs (`raftlockd
/// --fault-sync-delay-ms`), never for production.
#[derive(Clone, Debug)]
pub struct SlowSyncDir<D> {
    inner: D,
    delay: std::time::Duration,
}

impl<D> SlowSyncDir<D> {
    /// `inner`, with `delay` added to every sync.
    pub fn new(inner: D, delay: std::time::Duration) -> Self {
        SlowSyncDir { inner, delay }
    }
}

/// A file of a [`SlowSyncDir`].
pub struct SlowSyncFile<F> {
    inner: F,
    delay: std::time::Duration,
}

impl<F: WalFile> WalFile for SlowSyncFile<F> {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        std::thread::sleep(self.delay);
        self.inner.sync_data()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
}

impl<D: WalDir> WalDir for SlowSyncDir<D> {
    type File = SlowSyncFile<D::File>;

    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }

    fn create(&self, name: &str) -> io::Result<Self::File> {
        Ok(SlowSyncFile {
            inner: self.inner.create(name)?,
            delay: self.delay,
        })
    }

    fn open(&self, name: &str) -> io::Result<Self::File> {
        Ok(SlowSyncFile {
            inner: self.inner.open(name)?,
            delay: self.delay,
        })
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }

    fn sync(&self) -> io::Result<()> {
        std::thread::sleep(self.delay);
        self.inner.sync()
    }

    fn read_end(&self) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_end()
    }

    fn write_end(&self, bytes: &[u8]) -> io::Result<()> {
        std::thread::sleep(self.delay);
        self.inner.write_end(bytes)
    }
}

/// A simulated disk: what was written is visible at once, but only what was
/// synced survives [`SimDir::crash`], as after a power loss. Cheap to clone;
/// clones share the disk.
#[derive(Clone, Default)]
pub struct SimDir {
    disk: Arc<Mutex<SimDisk>>,
}

#[derive(Default)]
struct SimDisk {
    /// Live view: name -> (contents, unsynced writes since the last sync,
    /// in order).
    files: BTreeMap<String, SimFileState>,
    /// What survives a crash: the directory as of its last sync, each file
    /// with its contents as of its last sync.
    durable_names: Vec<String>,
    /// Files removed since the last directory sync: a crash brings them back.
    removed: BTreeMap<String, SimFileState>,
    /// Incremented on every crash, so handles from before it stop working.
    epoch: u64,
    /// The end record, written durably at once (as `write_durably` does).
    end: Option<Vec<u8>>,
    /// Testing the test: pretend every sync worked without making anything
    /// durable, like a WAL that skips its fdatasync.
    syncs_do_nothing: bool,
    /// The next file write fails with this error (EIO), writing nothing.
    fail_write: Option<i32>,
    /// The next file sync fails with this error (EIO): what it would have
    /// made durable is dropped, as Linux drops the dirty pages of a failed
    /// `fdatasync` (they stay readable until the crash, never durable).
    fail_sync: Option<i32>,
    /// Bytes the files may hold in all; writing past it fails with ENOSPC.
    capacity: Option<u64>,
    /// File syncs done so far, failed ones included.
    syncs: u64,
}

#[derive(Clone, Default)]
struct SimFileState {
    contents: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<(u64, Vec<u8>)>,
    /// A sync of it failed: the writes it covered will never be durable.
    lost: bool,
}

/// A file of a [`SimDir`].
pub struct SimFile {
    disk: Arc<Mutex<SimDisk>>,
    name: String,
    epoch: u64,
}

impl SimDir {
    /// An empty simulated disk.
    pub fn new() -> SimDir {
        SimDir::default()
    }

    /// Makes every sync a no-op that still reports success: a broken log
    /// that skips its fdatasync, which the crash tests must catch.
    pub fn break_syncs(&self) {
        self.lock().syncs_do_nothing = true;
    }

    /// Makes the next file write fail with EIO, writing nothing.
    pub fn fail_next_write(&self) {
        self.lock().fail_write = Some(libc::EIO);
    }

    /// Makes the next file sync fail with EIO, dropping what it would have
    /// made durable.
    pub fn fail_next_sync(&self) {
        self.lock().fail_write = None;
        self.lock().fail_sync = Some(libc::EIO);
    }

    /// Fills the disk: no file may grow past the bytes they hold now.
    pub fn fill(&self) {
        let mut d = self.lock();
        let used = d.files.values().map(|f| f.contents.len() as u64).sum();
        d.capacity = Some(used);
    }

    /// Ends every fault set with the calls above: the disk is replaced or
    /// space freed (what a failed sync dropped stays lost).
    pub fn heal(&self) {
        let mut d = self.lock();
        d.capacity = None;
        d.fail_write = None;
        d.fail_sync = None;
    }

    /// File syncs so far, failed ones included.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, SimDisk> {
        self.disk.lock()
    }

    /// A power loss: every file goes back to its last synced contents, and
    /// files created or removed since the last directory sync are undone.
    /// With `tear = Some(n)`, the first `n` bytes of the most recent
    /// unsynced write of each file survive (a torn write).
    pub fn crash(&self, tear: Option<usize>) {
        let mut d = self.lock();
        d.epoch += 1;
        let durable_names = d.durable_names.clone();
        let mut files = BTreeMap::new();
        for name in durable_names {
            let Some(f) = d.files.get(&name).or_else(|| d.removed.get(&name)) else {
                continue;
            };
            let mut contents = f.durable.clone();
            if let (Some(n), Some((offset, bytes))) = (tear, f.unsynced.last()) {
                let kept = &bytes[..n.min(bytes.len())];
                write_into(&mut contents, *offset, kept);
            }
            files.insert(
                name,
                SimFileState {
                    durable: contents.clone(),
                    contents,
                    unsynced: Vec::new(),
                    lost: false,
                },
            );
        }
        d.files = files;
        d.removed.clear();
    }
}

fn write_into(contents: &mut Vec<u8>, offset: u64, buf: &[u8]) {
    let end = offset as usize + buf.len();
    if contents.len() < end {
        contents.resize(end, 0);
    }
    contents[offset as usize..end].copy_from_slice(buf);
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut SimDisk, &str) -> io::Result<T>) -> io::Result<T> {
        let mut d = self.disk.lock();
        if d.epoch != self.epoch {
            return Err(io::Error::other(
                "the disk crashed since this file was opened",
            ));
        }
        f(&mut d, &self.name)
    }
}

fn missing(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{name}: no such file"))
}

impl WalFile for SimFile {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.with(|d, name| {
            if let Some(errno) = d.fail_write.take() {
                return Err(io::Error::from_raw_os_error(errno));
            }
            let used: u64 = d.files.values().map(|f| f.contents.len() as u64).sum();
            let f = d.files.get_mut(name).ok_or_else(|| missing(name))?;
            let grows = (offset + buf.len() as u64).saturating_sub(f.contents.len() as u64);
            if d.capacity.is_some_and(|c| used + grows > c) {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            write_into(&mut f.contents, offset, buf);
            f.unsynced.push((offset, buf.to_vec()));
            Ok(())
        })
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.with(|d, name| {
            let f = d.files.get(name).ok_or_else(|| missing(name))?;
            let start = (offset as usize).min(f.contents.len());
            let n = buf.len().min(f.contents.len() - start);
            buf[..n].copy_from_slice(&f.contents[start..start + n]);
            Ok(n)
        })
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.with(|d, name| {
            d.syncs += 1;
            if let Some(errno) = d.fail_sync.take() {
                let f = d.files.get_mut(name).ok_or_else(|| missing(name))?;
                // Dropped: a crash loses them, and no later sync saves them.
                f.unsynced.clear();
                f.lost = true;
                return Err(io::Error::from_raw_os_error(errno));
            }
            let skip = d.syncs_do_nothing;
            let f = d.files.get_mut(name).ok_or_else(|| missing(name))?;
            if f.lost {
                // Linux reports a failed writeback once; a later fsync
                // succeeds without writing the dropped pages. Only what was
                // written after the failure becomes durable.
                let mut durable = f.durable.clone();
                for (at, bytes) in f.unsynced.drain(..) {
                    write_into(&mut durable, at, &bytes);
                }
                if !skip {
                    f.durable = durable;
                }
                return Ok(());
            }
            if !skip {
                f.durable = f.contents.clone();
                f.unsynced.clear();
            }
            Ok(())
        })
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.with(|d, name| {
            let used: u64 = d.files.values().map(|f| f.contents.len() as u64).sum();
            let f = d.files.get_mut(name).ok_or_else(|| missing(name))?;
            let grows = len.saturating_sub(f.contents.len() as u64);
            if d.capacity.is_some_and(|c| used + grows > c) {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            f.contents.resize(len as usize, 0);
            Ok(())
        })
    }
}

impl WalDir for SimDir {
    type File = SimFile;

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.lock().files.keys().cloned().collect())
    }

    fn create(&self, name: &str) -> io::Result<SimFile> {
        let mut d = self.lock();
        d.files.insert(name.to_owned(), SimFileState::default());
        Ok(SimFile {
            disk: self.disk.clone(),
            name: name.to_owned(),
            epoch: d.epoch,
        })
    }

    fn open(&self, name: &str) -> io::Result<SimFile> {
        let d = self.lock();
        if !d.files.contains_key(name) {
            return Err(missing(name));
        }
        Ok(SimFile {
            disk: self.disk.clone(),
            name: name.to_owned(),
            epoch: d.epoch,
        })
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut d = self.lock();
        let f = d.files.remove(name).ok_or_else(|| missing(name))?;
        d.removed.insert(name.to_owned(), f);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut d = self.lock();
        if !d.syncs_do_nothing {
            d.durable_names = d.files.keys().cloned().collect();
            d.removed.clear();
        }
        Ok(())
    }

    fn read_end(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.lock().end.clone())
    }

    fn write_end(&self, bytes: &[u8]) -> io::Result<()> {
        let mut d = self.lock();
        if !d.syncs_do_nothing {
            d.end = Some(bytes.to_vec());
        }
        Ok(())
    }
}

/// Writes a file so that after a crash it is either the old or the new
/// content, never a torn mix: write a temporary, fsync it, rename it over the
/// target, fsync the directory. An error names the file it happened on: an
/// operator reads it in the node's last words before it exits.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let named = |p: &Path| {
        let p = p.to_owned();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    };
    let tmp = path.with_extension("tmp");
    {
        let mut f = fs::File::create(&tmp).map_err(named(&tmp))?;
        std::io::Write::write_all(&mut f, bytes).map_err(named(&tmp))?;
        f.sync_all().map_err(named(&tmp))?;
    }
    fs::rename(&tmp, path).map_err(named(path))?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(named(dir))?;
    }
    Ok(())
}
