//! A node's data directory: who it belongs to, and the logs inside.
//!
//! ```text
//! <data-dir>/raftlock.json   identity: format version, node id, cluster id
//! <data-dir>/wal/            the write-ahead log: Raft log, vote, committed index
//! <data-dir>/snapshot        the latest state-machine snapshot
//! <data-dir>/LOCK            held (flock) by the one process using it; its PID
//! ```
//!
//! Format 1 (releases before the write-ahead log) kept the Raft log in a
//! sled database under `raft/`. Opening such a directory migrates it: the
//! whole log, the vote, the committed index and the purge point are written
//! into a new WAL under `wal.migrating/`, synced, renamed to `wal/`, and
//! `raft/` is moved aside to `raft.sled-migrated/` (delete it once the node
//! runs well). A crash at any point leaves either the old or the new log.
//!
//! Opening takes an exclusive lock on `LOCK` for as long as the
//! [`DataDir`] lives, so a second process (a node started twice, or an
//! offline tool run beside a live node) is refused before it reads or
//! writes anything, with the PID of the holder. A directory with an
//! identity but no log refuses to open: an empty log would come back with
//! no vote and no entries, and could vote twice in a term.
//!
//! Opening checks the identity before touching anything else, so a node
//! pointed at another node's or another cluster's directory, or at one
//! written by a newer release, refuses to start instead of joining with the
//! wrong history.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;

pub use crate::wal::disk::write_durably;
use std::path::{Path, PathBuf};

/// The data-directory format this build writes and the newest it reads
/// (1: sled log, migrated on open; 2: write-ahead log).
pub const FORMAT_VERSION: u32 = 2;
const WAL_DIR: &str = "wal";
const MIGRATING_DIR: &str = "wal.migrating";
const SLED_DIR: &str = "raft";
const SLED_MIGRATED_DIR: &str = "raft.sled-migrated";
const IDENTITY_FILE: &str = "raftlock.json";
const LOCK_FILE: &str = "LOCK";

/// Why a data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// An I/O failure.
    #[error("data dir {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The directory has files but no identity: not a raftlock data dir.
    #[error("data dir {0} is not empty and has no raftlock.json: it is not a raftlock data directory (refusing to use it)")]
    NotADataDir(PathBuf),
    /// The identity file cannot be read.
    #[error("data dir {path}: raftlock.json is damaged ({reason}); restore the directory from a backup or start the node with an empty one")]
    Corrupt {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Written by a newer raftlock.
    #[error("data dir {path} has format version {found}, newer than this build supports ({supported}); run a newer raftlockd")]
    NewerFormat {
        /// The path.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Newest supported.
        supported: u32,
    },
    /// Belongs to another node.
    #[error(
        "data dir {path} belongs to node {found}, not node {expected}; check --id and --data-dir"
    )]
    WrongNode {
        /// The path.
        path: PathBuf,
        /// Node id in the directory.
        found: u64,
        /// Node id this process was started as.
        expected: u64,
    },
    /// Belongs to another cluster.
    #[error("data dir {path} belongs to cluster {found}, but this node was started for cluster {expected}; check --initial-cluster and --data-dir")]
    WrongCluster {
        /// The path.
        path: PathBuf,
        /// Cluster id in the directory.
        found: String,
        /// Cluster id from the flags.
        expected: String,
    },
    /// Another process holds the directory.
    #[error("data dir {path} is in use by another process{}: a data dir belongs to one raftlockd (or offline tool) at a time; stop it first", .pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    InUse {
        /// The path.
        path: PathBuf,
        /// The holder's PID, as it wrote it.
        pid: Option<u32>,
    },
    /// The identity is there but the log is not.
    #[error("data dir {0} has an identity (raftlock.json) but no write-ahead log (wal/): its log, vote and committed index are gone, and starting on an empty log could vote twice in a term. Refusing to start: rebuild this node from the other members (docs/operations.md, \"When a disk fails\"), or restore the directory from a backup")]
    MissingLog(PathBuf),
    /// The sled log of an earlier release could not be read to migrate it.
    #[error("data dir {path}: the sled Raft log of an earlier release cannot be read for migration ({source}); it may be damaged")]
    Database {
        /// The path.
        path: PathBuf,
        /// sled's error.
        source: sled::Error,
    },
}

/// What a migration of a sled log did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    /// Entries carried over.
    pub entries: usize,
    /// The last entry's index, if any.
    pub last_index: Option<u64>,
    /// The purge point carried over.
    pub purged_index: Option<u64>,
}

/// Who a data directory belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Data-directory format version.
    pub format_version: u32,
    /// The node that owns it.
    pub node_id: u64,
    /// The cluster it belongs to; `None` for a node that has not yet been
    /// added to one.
    pub cluster_id: Option<String>,
    /// Set up to rejoin its cluster (by `raftlockd repair`): the node must
    /// never bootstrap from `--initial-cluster`, only wait to be added. An
    /// empty log that bootstrapped would count itself a voter with no vote
    /// and no entries.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joining: bool,
    /// Random, drawn when the directory is created and never changed:
    /// which copy of the node's state this is. A node whose directory is
    /// replaced comes back under a new one, so peers that knew the old one
    /// (a formation, `formed_with`) do not take the new for it. Directories
    /// of releases before it get one on their next start.
    #[serde(default)]
    pub incarnation: u64,
    /// Whether the node may vote and acknowledge with what it stores
    /// (docs/design.md, "A node that lost its state").
    #[serde(default, skip_serializing_if = "Standing::is_member")]
    pub standing: Standing,
    /// The members (id, incarnation) that were all empty when this node
    /// formed its cluster with them: a member among them that is still
    /// forming may join that formation; any other empty member rejoins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formed_with: Vec<(u64, u64)>,
}

/// Whether a node may vote and acknowledge with what its data dir holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// It holds everything it ever acknowledged: a full member.
    #[default]
    Member,
    /// Created empty with `--initial-cluster`: either a new cluster is
    /// being formed (every member empty) or this node lost its state and
    /// must rejoin. It asks its peers before it votes.
    Forming,
    /// It lost state it may have acknowledged (a replaced directory, a log
    /// that ends before where it is known to end): it neither votes nor
    /// acknowledges entries of a term older than its peers' until it holds
    /// everything a majority may have committed.
    Rejoining,
}

impl Standing {
    /// A full member.
    pub fn is_member(&self) -> bool {
        *self == Standing::Member
    }
}

/// An opened, checked data directory.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    identity: Identity,
    fresh: bool,
    migrated: Option<Migration>,
    /// The exclusive lock, released when this is dropped.
    _lock: fs::File,
}

/// Takes the exclusive lock of the data dir at `path` and writes this
/// process's PID into it.
fn lock(path: &Path) -> Result<fs::File, DataDirError> {
    use std::os::fd::AsRawFd;
    let lock_path = path.join(LOCK_FILE);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io(path))?;
    // SAFETY: a valid open descriptor; flock reads nothing else.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let pid = fs::read_to_string(&lock_path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            return Err(DataDirError::InUse {
                path: path.to_owned(),
                pid,
            });
        }
        return Err(io(path)(e));
    }
    file.set_len(0).map_err(io(path))?;
    writeln!(file, "{}", std::process::id()).map_err(io(path))?;
    Ok(file)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataDirError + '_ {
    move |source| DataDirError::Io {
        path: path.to_owned(),
        source,
    }
}

impl DataDir {
    /// Opens `path` for node `node_id`, creating it if absent or empty.
    /// `cluster_id`, when known, must match the directory's.
    pub fn open(path: &Path, node_id: u64, cluster_id: Option<&str>) -> Result<Self, DataDirError> {
        fs::create_dir_all(path).map_err(io(path))?;
        let identity_path = path.join(IDENTITY_FILE);
        if !identity_path.exists() {
            for e in fs::read_dir(path).map_err(io(path))? {
                if e.map_err(io(path))?.file_name() != LOCK_FILE {
                    return Err(DataDirError::NotADataDir(path.to_owned()));
                }
            }
        }
        let lock = lock(path)?;
        let (identity, fresh) = if identity_path.exists() {
            let identity = read_identity(&identity_path)?;
            if identity.format_version > FORMAT_VERSION {
                return Err(DataDirError::NewerFormat {
                    path: path.to_owned(),
                    found: identity.format_version,
                    supported: FORMAT_VERSION,
                });
            }
            if identity.node_id != node_id {
                return Err(DataDirError::WrongNode {
                    path: path.to_owned(),
                    found: identity.node_id,
                    expected: node_id,
                });
            }
            if let (Some(found), Some(expected)) = (&identity.cluster_id, cluster_id) {
                if found != expected {
                    return Err(DataDirError::WrongCluster {
                        path: path.to_owned(),
                        found: found.clone(),
                        expected: expected.to_owned(),
                    });
                }
            }
            if !path.join(WAL_DIR).exists() && !path.join(SLED_DIR).exists() {
                return Err(DataDirError::MissingLog(path.to_owned()));
            }
            (identity, false)
        } else {
            // The log's directory before the identity: a crash between the
            // two must not leave an identity without a log.
            fs::create_dir_all(path.join(WAL_DIR)).map_err(io(path))?;
            fs::File::open(path)
                .and_then(|d| d.sync_all())
                .map_err(io(path))?;
            // Empty and told its cluster: a new cluster's member, or a
            // member whose state is gone. Only its peers can tell which.
            // Empty and not told: a node waiting to be added, or a voter
            // whose disk was replaced and that was started without
            // `--initial-cluster`; either way it holds nothing to vote
            // with until it has caught up.
            let standing = match cluster_id {
                Some(_) => Standing::Forming,
                None => Standing::Rejoining,
            };
            let identity = Identity {
                format_version: FORMAT_VERSION,
                node_id,
                cluster_id: cluster_id.map(str::to_owned),
                joining: false,
                incarnation: new_incarnation(),
                standing,
                formed_with: Vec::new(),
            };
            write_durably(
                &identity_path,
                &serde_json::to_vec_pretty(&identity).unwrap_or_default(),
            )
            .map_err(io(path))?;
            (identity, true)
        };
        let mut dir = DataDir {
            path: path.to_owned(),
            identity,
            fresh,
            migrated: None,
            _lock: lock,
        };
        dir.migrate_sled()?;
        if dir.identity.format_version < FORMAT_VERSION || dir.identity.incarnation == 0 {
            dir.identity.format_version = FORMAT_VERSION;
            if dir.identity.incarnation == 0 {
                dir.identity.incarnation = new_incarnation();
            }
            dir.write_identity()?;
        }
        Ok(dir)
    }

    /// Opens the existing data dir at `path` for an offline tool, whatever
    /// node it belongs to: it takes the lock (so the node must be stopped)
    /// and creates, migrates and writes nothing.
    pub fn open_existing(path: &Path) -> Result<Self, DataDirError> {
        let dir = Self::open_damaged(path)?;
        if !path.join(WAL_DIR).exists() {
            return Err(DataDirError::MissingLog(path.to_owned()));
        }
        Ok(dir)
    }

    /// [`DataDir::open_existing`], with or without a log: for repair,
    /// which replaces whatever the directory holds.
    pub fn open_damaged(path: &Path) -> Result<Self, DataDirError> {
        let identity_path = path.join(IDENTITY_FILE);
        if !identity_path.exists() {
            return Err(DataDirError::NotADataDir(path.to_owned()));
        }
        let identity = read_identity(&identity_path)?;
        if identity.format_version != FORMAT_VERSION {
            return Err(DataDirError::Corrupt {
                path: path.to_owned(),
                reason: format!(
                    "format version {} (this build reads {FORMAT_VERSION} offline; start the node once to migrate it)",
                    identity.format_version
                ),
            });
        }
        let lock = lock(path)?;
        Ok(DataDir {
            path: path.to_owned(),
            identity,
            fresh: false,
            migrated: None,
            _lock: lock,
        })
    }

    /// Moves this data dir aside to `aside` (kept for a post-mortem) and
    /// creates in its place an empty one of the same node and cluster,
    /// marked [`Identity::joining`]: the node then starts with no log and
    /// waits to be added back as a learner.
    pub fn replace_with_joining(self, aside: &Path) -> Result<DataDir, DataDirError> {
        let path = self.path.clone();
        let identity = Identity {
            format_version: FORMAT_VERSION,
            node_id: self.identity.node_id,
            cluster_id: self.identity.cluster_id.clone(),
            joining: true,
            incarnation: new_incarnation(),
            standing: Standing::Member,
            formed_with: Vec::new(),
        };
        fs::rename(&path, aside).map_err(io(&path))?;
        // The lock moved with the old directory; the new one takes its own
        // before anything is written in it.
        fs::create_dir_all(&path).map_err(io(&path))?;
        let lock = lock(&path)?;
        fs::create_dir_all(path.join(WAL_DIR)).map_err(io(&path))?;
        let parent = path.parent().unwrap_or(Path::new("."));
        fs::File::open(&path)
            .and_then(|d| d.sync_all())
            .and_then(|_| fs::File::open(parent)?.sync_all())
            .map_err(io(&path))?;
        write_durably(
            &path.join(IDENTITY_FILE),
            &serde_json::to_vec_pretty(&identity).unwrap_or_default(),
        )
        .map_err(io(&path))?;
        drop(self);
        Ok(DataDir {
            path,
            identity,
            fresh: false,
            migrated: None,
            _lock: lock,
        })
    }

    /// Moves a sled log of an earlier release into the write-ahead log.
    fn migrate_sled(&mut self) -> Result<(), DataDirError> {
        let path = self.path.clone();
        let sled_dir = path.join(SLED_DIR);
        if path.join(WAL_DIR).exists() || !sled_dir.exists() {
            return Ok(());
        }
        let image =
            crate::log_store::read_sled(&sled_dir).map_err(|source| DataDirError::Database {
                path: path.clone(),
                source,
            })?;
        let migrating = path.join(MIGRATING_DIR);
        if migrating.exists() {
            // A migration that a crash interrupted: start it over.
            fs::remove_dir_all(&migrating).map_err(io(&migrating))?;
        }
        let wal_io = |e: std::io::Error| DataDirError::Io {
            path: migrating.clone(),
            source: e,
        };
        let dir = crate::wal::disk::FsDir::new(&migrating).map_err(wal_io)?;
        let (mut core, _, _) =
            crate::wal::core::Core::open(dir, crate::wal::SEGMENT_BYTES).map_err(wal_io)?;
        let mut records = Vec::new();
        if let Some(p) = &image.purged {
            records.push(crate::wal::format::Encoded::purge(p).map_err(wal_io)?);
        }
        if let Some(v) = &image.vote {
            records.push(crate::wal::format::Encoded::vote(v).map_err(wal_io)?);
        }
        for e in image.entries.values() {
            records.push(crate::wal::format::Encoded::entry(e).map_err(wal_io)?);
        }
        records.push(crate::wal::format::Encoded::committed(&image.committed).map_err(wal_io)?);
        core.write(&records).map_err(wal_io)?;
        core.sync().map_err(wal_io)?;
        drop(core);
        fs::rename(&migrating, path.join(WAL_DIR)).map_err(io(&path))?;
        fs::rename(&sled_dir, path.join(SLED_MIGRATED_DIR)).map_err(io(&path))?;
        fs::File::open(&path)
            .and_then(|d| d.sync_all())
            .map_err(io(&path))?;
        let migration = Migration {
            entries: image.entries.len(),
            last_index: image.entries.keys().next_back().copied(),
            purged_index: image.purged.map(|p| p.index),
        };
        tracing::info!(
            entries = migration.entries,
            last_index = ?migration.last_index,
            purged_index = ?migration.purged_index,
            "migrated the sled Raft log of an earlier release into the write-ahead log; {}/ can be deleted once the node runs well",
            SLED_MIGRATED_DIR
        );
        self.migrated = Some(migration);
        Ok(())
    }

    fn write_identity(&self) -> Result<(), DataDirError> {
        let bytes = serde_json::to_vec_pretty(&self.identity).unwrap_or_default();
        write_durably(&self.path.join(IDENTITY_FILE), &bytes).map_err(io(&self.path))
    }

    /// Records this node's standing, durably, before it acts on it: a
    /// node that restarts must not vote on a standing it had only in
    /// memory. `formed_with` is kept unless given.
    pub fn set_standing(
        &mut self,
        standing: Standing,
        formed_with: Option<Vec<(u64, u64)>>,
    ) -> Result<(), DataDirError> {
        self.identity.standing = standing;
        if let Some(f) = formed_with {
            self.identity.formed_with = f;
        }
        self.write_identity()
    }

    /// Moves the log (`wal/`, `wal.end`) and the snapshot aside into
    /// `lost-<unix seconds>/` inside the directory, kept for a post-mortem,
    /// and starts an empty log in their place, standing
    /// [`Standing::Rejoining`]: for a log that lost durable records, whose
    /// node must catch up from the others before it votes again. Returns
    /// where they went.
    pub fn set_aside_lost_log(&mut self) -> Result<PathBuf, DataDirError> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let aside = self.path.join(format!("lost-{secs}"));
        fs::create_dir_all(&aside).map_err(io(&aside))?;
        for name in [WAL_DIR, "wal.end", "snapshot"] {
            let from = self.path.join(name);
            if from.exists() {
                fs::rename(&from, aside.join(name)).map_err(io(&from))?;
            }
        }
        fs::create_dir_all(self.wal_dir()).map_err(io(&self.path))?;
        fs::File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.path))?;
        self.set_standing(Standing::Rejoining, Some(Vec::new()))?;
        Ok(aside)
    }

    /// Records the cluster a joining node was added to.
    pub fn set_cluster_id(&mut self, cluster_id: &str) -> Result<(), DataDirError> {
        if self.identity.cluster_id.as_deref() == Some(cluster_id) {
            return Ok(());
        }
        self.identity.cluster_id = Some(cluster_id.to_owned());
        self.write_identity()
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// True when this start created the directory (nothing to recover).
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Where the write-ahead log lives.
    pub fn wal_dir(&self) -> PathBuf {
        self.path.join(WAL_DIR)
    }

    /// What this open migrated from a sled log, if it did.
    pub fn migrated(&self) -> Option<&Migration> {
        self.migrated.as_ref()
    }

    /// Where the snapshot lives.
    pub fn snapshot_file(&self) -> PathBuf {
        self.path.join("snapshot")
    }
}

/// A new incarnation id: random, never 0 (0 is "none yet").
fn new_incarnation() -> u64 {
    rand::random::<u64>().max(1)
}

fn read_identity(path: &Path) -> Result<Identity, DataDirError> {
    let bytes = fs::read(path).map_err(io(path))?;
    serde_json::from_slice(&bytes).map_err(|e| DataDirError::Corrupt {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}
