//! A FUSE passthrough that fails on demand: every operation goes to a
//! backing directory, except that writes, `fsync`s and `fallocate`s can be
//! made to hang (a fail-slow disk, a stuck controller: the calls neither
//! fail nor return, while reads and `stat` still answer), and reads of one
//! file can be made to fail with EIO (a latent sector error).
//!
//! A hung call is not blocked in the file system's loop: its reply is
//! parked and sent when the hang is lifted, so that everything else the
//! node does to its disk keeps being answered, as on a real disk whose
//! write queue is stuck.

use fuser::{
    FileAttr, FileType, Filesystem, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// Attributes and entries are not cached by the kernel: the harness
/// changes backing files behind the mount while a node is stopped.
const TTL: Duration = Duration::ZERO;

/// The switches of a mounted [`FaultFs`], shared with whoever flips them.
#[derive(Default)]
pub struct Switches {
    hang: AtomicBool,
    /// A file (relative to the backing root) whose reads of one block
    /// fail with EIO: the file and the block's offset.
    eio: Mutex<Option<(PathBuf, u64)>>,
    parked: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Switches {
    /// Makes writes, `fsync`s and `fallocate`s hang (`true`) or go on
    /// (`false`, which also finishes every call parked meanwhile).
    pub fn set_hang(&self, on: bool) {
        self.hang.store(on, Ordering::SeqCst);
        if !on {
            let parked = std::mem::take(&mut *self.parked.lock());
            for call in parked {
                call();
            }
        }
    }

    /// Makes reads of `file` (relative to the backing root) that touch
    /// the 4 KiB block at `offset` fail with EIO (a latent sector error),
    /// or none with `None`.
    pub fn set_eio(&self, block: Option<(PathBuf, u64)>) {
        *self.eio.lock() = block;
    }

    /// Runs `call` now, or when the hang is lifted.
    fn run_or_park(&self, call: Box<dyn FnOnce() + Send>) {
        let mut parked = self.parked.lock();
        if self.hang.load(Ordering::SeqCst) {
            parked.push(call);
        } else {
            drop(parked);
            call();
        }
    }
}

/// The file system.
pub struct FaultFs {
    root: PathBuf,
    switches: Arc<Switches>,
    /// Inode number to backing path (1 is the root).
    paths: HashMap<u64, PathBuf>,
    inodes: HashMap<PathBuf, u64>,
    next_ino: u64,
    files: HashMap<u64, Arc<File>>,
    next_fh: u64,
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn attr(ino: u64, m: &std::fs::Metadata) -> FileAttr {
    let time = |s: i64, ns: i64| {
        UNIX_EPOCH + Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32)
    };
    let kind = if m.is_dir() {
        FileType::Directory
    } else if m.file_type().is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        ino,
        size: m.len(),
        blocks: m.blocks(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        crtime: time(m.ctime(), m.ctime_nsec()),
        kind,
        perm: (m.permissions().mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: m.blksize() as u32,
        flags: 0,
    }
}

/// A mounted [`FaultFs`]: unmounted when dropped, even while a process
/// still has files open on it.
pub struct Mounted {
    mountpoint: PathBuf,
    switches: Arc<Switches>,
    session: Option<fuser::BackgroundSession>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // Parked calls are answered before the mount goes away.
        self.switches.set_hang(false);
        self.switches.set_eio(None);
        // With auto_unmount, dropping the session only tells fusermount3,
        // which unmounts later and not at all while a file is busy: a
        // lazy unmount now leaves no dead mount behind a process that
        // exits at once.
        let _ = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(&self.mountpoint)
            .stderr(std::process::Stdio::null())
            .status();
        drop(self.session.take());
    }
}

impl FaultFs {
    /// A passthrough to `root`, switched by `switches`.
    pub fn new(root: &Path, switches: Arc<Switches>) -> FaultFs {
        let mut fs = FaultFs {
            root: root.to_owned(),
            switches,
            paths: HashMap::new(),
            inodes: HashMap::new(),
            next_ino: 2,
            files: HashMap::new(),
            next_fh: 1,
        };
        fs.paths.insert(fuser::FUSE_ROOT_ID, root.to_owned());
        fs.inodes.insert(root.to_owned(), fuser::FUSE_ROOT_ID);
        fs
    }

    /// Mounts it at `mountpoint` in a thread of its own; unmounted when
    /// the returned session is dropped.
    pub fn mount(
        root: &Path,
        mountpoint: &Path,
        switches: Arc<Switches>,
    ) -> std::io::Result<Mounted> {
        let fs = FaultFs::new(root, switches.clone());
        let session = fuser::spawn_mount2(
            fs,
            mountpoint,
            &[
                MountOption::FSName("raftlock-faultfs".into()),
                // Unmounted by fusermount3 even if this process is
                // killed; it asks for allow_other, which root may set.
                MountOption::AutoUnmount,
                MountOption::AllowOther,
            ],
        )?;
        Ok(Mounted {
            mountpoint: mountpoint.to_owned(),
            switches,
            session: Some(session),
        })
    }

    /// Removes `name` in `parent` with `how` (a file or a directory).
    fn remove(
        &mut self,
        parent: u64,
        name: &OsStr,
        reply: ReplyEmpty,
        how: fn(&Path) -> std::io::Result<()>,
    ) {
        let Some(p) = self.child(parent, name) else {
            return reply.error(libc::ENOENT);
        };
        match how(&p) {
            Ok(()) => {
                self.forget_path(&p);
                reply.ok()
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn path(&self, ino: u64) -> Option<PathBuf> {
        self.paths.get(&ino).cloned()
    }

    fn ino_of(&mut self, path: &Path) -> u64 {
        if let Some(i) = self.inodes.get(path) {
            return *i;
        }
        let i = self.next_ino;
        self.next_ino += 1;
        self.paths.insert(i, path.to_owned());
        self.inodes.insert(path.to_owned(), i);
        i
    }

    fn forget_path(&mut self, path: &Path) {
        if let Some(i) = self.inodes.remove(path) {
            self.paths.remove(&i);
        }
    }

    fn entry(&mut self, path: &Path, reply: ReplyEntry) {
        match std::fs::symlink_metadata(path) {
            Ok(m) => {
                let ino = self.ino_of(path);
                reply.entry(&TTL, &attr(ino, &m), 0);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn child(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        self.path(parent).map(|p| p.join(name))
    }

    fn add_file(&mut self, f: File) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.files.insert(fh, Arc::new(f));
        fh
    }

    fn is_eio(&self, path: &Path, offset: u64, len: u64) -> bool {
        let eio = self.switches.eio.lock();
        eio.as_ref().is_some_and(|(f, at)| {
            path.strip_prefix(&self.root).is_ok_and(|rel| rel == f)
                && offset < at + 4096
                && *at < offset + len.max(1)
        })
    }
}

fn open_options(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    o.custom_flags(flags & !(libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC));
    if flags & libc::O_TRUNC != 0 {
        o.truncate(true);
    }
    o
}

impl Filesystem for FaultFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name) {
            Some(p) => self.entry(&p, reply),
            None => reply.error(libc::ENOENT),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.path(ino).map(std::fs::symlink_metadata) {
            Some(Ok(m)) => reply.attr(&TTL, &attr(ino, &m)),
            Some(Err(e)) => reply.error(errno(&e)),
            None => reply.error(libc::ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<u64>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let Some(path) = self.path(ino) else {
            return reply.error(libc::ENOENT);
        };
        let result = (|| {
            if let Some(len) = size {
                match fh.and_then(|fh| self.files.get(&fh)) {
                    Some(f) => f.set_len(len)?,
                    None => OpenOptions::new().write(true).open(&path)?.set_len(len)?,
                }
            }
            if let Some(mode) = mode {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            }
            std::fs::symlink_metadata(&path)
        })();
        match result {
            Ok(m) => reply.attr(&TTL, &attr(ino, &m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let Some(p) = self.child(parent, name) else {
            return reply.error(libc::ENOENT);
        };
        let made = std::fs::DirBuilder::new().mode(mode).create(&p);
        match made {
            Ok(()) => self.entry(&p, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, reply, |p| std::fs::remove_file(p));
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, reply, |p| std::fs::remove_dir(p));
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        _flags: u32,
        reply: ReplyEmpty,
    ) {
        let (Some(from), Some(to)) = (self.child(parent, name), self.child(newparent, newname))
        else {
            return reply.error(libc::ENOENT);
        };
        if let Err(e) = std::fs::rename(&from, &to) {
            return reply.error(errno(&e));
        }
        // The renamed path and everything under it keep their inodes.
        self.forget_path(&to);
        let moved: Vec<(PathBuf, u64)> = self
            .inodes
            .iter()
            .filter(|(p, _)| p.starts_with(&from))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (old, ino) in moved {
            let rest = old
                .strip_prefix(&from)
                .map(Path::to_owned)
                .unwrap_or_default();
            let new = if rest.as_os_str().is_empty() {
                to.clone()
            } else {
                to.join(rest)
            };
            self.inodes.remove(&old);
            self.inodes.insert(new.clone(), ino);
            self.paths.insert(ino, new);
        }
        reply.ok();
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let Some(path) = self.path(ino) else {
            return reply.error(libc::ENOENT);
        };
        match open_options(flags).open(&path) {
            Ok(f) => {
                let fh = self.add_file(f);
                reply.opened(fh, 0)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let Some(path) = self.child(parent, name) else {
            return reply.error(libc::ENOENT);
        };
        let mut o = open_options(flags);
        o.create(true).mode(mode);
        if flags & libc::O_EXCL != 0 {
            o.create_new(true);
        }
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            // create(2) with O_RDONLY still makes the file.
            o.write(true);
        }
        match o.open(&path).and_then(|f| f.metadata().map(|m| (f, m))) {
            Ok((f, m)) => {
                let ino = self.ino_of(&path);
                let fh = self.add_file(f);
                reply.created(&TTL, &attr(ino, &m), 0, fh, 0)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        if self
            .path(ino)
            .is_some_and(|p| self.is_eio(&p, offset as u64, size as u64))
        {
            return reply.error(libc::EIO);
        }
        let Some(f) = self.files.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            match f.read_at(&mut buf[got..], offset as u64 + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return reply.error(errno(&e)),
            }
        }
        reply.data(&buf[..got]);
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let Some(f) = self.files.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        let data = data.to_vec();
        self.switches.run_or_park(Box::new(move || {
            match f.write_all_at(&data, offset as u64) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(errno(&e)),
            }
        }));
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.files.remove(&fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        let Some(f) = self.files.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        self.switches.run_or_park(Box::new(move || {
            let r = if datasync {
                f.sync_data()
            } else {
                f.sync_all()
            };
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        }));
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(f) = self.files.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        self.switches.run_or_park(Box::new(move || {
            // SAFETY: a valid open descriptor, kept alive by `f`.
            let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset, length) };
            if r == 0 {
                reply.ok()
            } else {
                reply.error(errno(&std::io::Error::last_os_error()))
            }
        }));
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let Some(path) = self.path(ino) else {
            return reply.error(libc::ENOENT);
        };
        let entries = match std::fs::read_dir(&path) {
            Ok(rd) => rd.filter_map(Result::ok).collect::<Vec<_>>(),
            Err(e) => return reply.error(errno(&e)),
        };
        let mut all = vec![
            (ino, FileType::Directory, OsStr::new(".").to_owned()),
            (ino, FileType::Directory, OsStr::new("..").to_owned()),
        ];
        for e in entries {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            let child = self.ino_of(&e.path());
            all.push((child, kind, e.file_name()));
        }
        for (i, (ino, kind, name)) in all.into_iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(ino, i as i64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(path) = self.path(ino) else {
            return reply.error(libc::ENOENT);
        };
        self.switches.run_or_park(Box::new(move || {
            match File::open(&path).and_then(|d| d.sync_all()) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        }));
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let Ok(c) = std::ffi::CString::new(self.root.as_os_str().as_encoded_bytes()) else {
            return reply.error(libc::EINVAL);
        };
        // SAFETY: a NUL-terminated path and a zeroed struct statvfs fills.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return reply.error(errno(&std::io::Error::last_os_error()));
        }
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            s.f_namemax as u32,
            s.f_frsize as u32,
        );
    }
}
