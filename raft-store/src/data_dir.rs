//! A node's data directory: who it belongs to, and the sled database inside.
//!
//! ```text
//! <data-dir>/raftlock.json   identity: format version, node id, cluster id
//! <data-dir>/raft/           sled: the Raft log and its metadata
//! <data-dir>/snapshot        the latest state-machine snapshot
//! ```
//!
//! Opening checks the identity before touching anything else, so a node
//! pointed at another node's or another cluster's directory, or at one
//! written by a newer release, refuses to start instead of joining with the
//! wrong history.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// sled's page cache.
const SLED_CACHE_BYTES: u64 = 64 << 20;

/// The data-directory format this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
const IDENTITY_FILE: &str = "raftlock.json";

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
    /// sled could not open its database.
    #[error("data dir {path}: the Raft database cannot be opened ({source}); it may be damaged")]
    Database {
        /// The path.
        path: PathBuf,
        /// sled's error.
        source: sled::Error,
    },
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
}

/// An opened, checked data directory.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    identity: Identity,
    fresh: bool,
    db: sled::Db,
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
            (identity, false)
        } else {
            if fs::read_dir(path).map_err(io(path))?.next().is_some() {
                return Err(DataDirError::NotADataDir(path.to_owned()));
            }
            let identity = Identity {
                format_version: FORMAT_VERSION,
                node_id,
                cluster_id: cluster_id.map(str::to_owned),
            };
            write_durably(
                &identity_path,
                &serde_json::to_vec_pretty(&identity).unwrap_or_default(),
            )
            .map_err(io(path))?;
            (identity, true)
        };
        let db = sled::Config::new()
            .path(path.join("raft"))
            // sled's default cache is 1 GiB. The log is read back mostly
            // right after it is written (replication), and the state lives
            // in memory already, so a small cache keeps RSS near the state.
            .cache_capacity(SLED_CACHE_BYTES)
            .open()
            .map_err(|source| DataDirError::Database {
                path: path.to_owned(),
                source,
            })?;
        Ok(DataDir {
            path: path.to_owned(),
            identity,
            fresh,
            db,
        })
    }

    /// Records the cluster a joining node was added to.
    pub fn set_cluster_id(&mut self, cluster_id: &str) -> Result<(), DataDirError> {
        if self.identity.cluster_id.as_deref() == Some(cluster_id) {
            return Ok(());
        }
        self.identity.cluster_id = Some(cluster_id.to_owned());
        let bytes = serde_json::to_vec_pretty(&self.identity).unwrap_or_default();
        write_durably(&self.path.join(IDENTITY_FILE), &bytes).map_err(io(&self.path))
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

    /// The sled database.
    pub fn db(&self) -> &sled::Db {
        &self.db
    }

    /// sled's data file, which must be fsynced after a flush (see
    /// [`crate::log_store`]).
    pub fn db_file(&self) -> PathBuf {
        self.path.join("raft").join("db")
    }

    /// Where the snapshot lives.
    pub fn snapshot_file(&self) -> PathBuf {
        self.path.join("snapshot")
    }
}

fn read_identity(path: &Path) -> Result<Identity, DataDirError> {
    let bytes = fs::read(path).map_err(io(path))?;
    serde_json::from_slice(&bytes).map_err(|e| DataDirError::Corrupt {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Writes a file so that after a crash it is either the old or the new
/// content, never a torn mix: write a temporary, fsync it, rename it over the
/// target, fsync the directory.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
