//! The snapshot file on disk: a JSON header line (the snapshot's metadata
//! and a checksum), then the machine's bytes.

use crate::data_dir::write_durably;
use crate::machine::LeaseMachine;
use crate::types::{LogId, NodeId, NodeInfo, StorageError};
use openraft::{SnapshotMeta, StorageIOError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The snapshot file: a JSON header line, then the machine's bytes.
#[derive(Serialize, Deserialize)]
struct SnapshotHeader {
    meta: SnapshotMeta<NodeId, NodeInfo>,
    /// CRC-32C of the machine's bytes; absent in files of releases before
    /// it, which are read unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crc32c: Option<u32>,
}

/// A snapshot's metadata and the machine's bytes.
pub type StoredSnapshot = (SnapshotMeta<NodeId, NodeInfo>, Vec<u8>);

/// Reads and checks the snapshot file at `path` (its checksum, and that
/// the machine decodes): `None` when there is none. For offline checks.
pub fn verify_snapshot_file(path: &Path) -> std::io::Result<Option<(Option<LogId>, usize)>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(std::io::Error::new(
                e.kind(),
                format!("reading {}: {e}", path.display()),
            ))
        }
    };
    let (meta, data) = decode_snapshot_file(&bytes)?;
    LeaseMachine::from_snapshot(&data).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the snapshot's state does not decode: {e}"),
        )
    })?;
    Ok(Some((meta.last_log_id, data.len())))
}

pub(super) fn read_snapshot_file(path: &Path) -> Result<Option<StoredSnapshot>, StorageError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            let e = std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display()));
            return Err(StorageIOError::read_snapshot(None, &e).into());
        }
    };
    decode_snapshot_file(&bytes).map(Some).map_err(|e| {
        let e = std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        StorageIOError::read_snapshot(None, &e).into()
    })
}

/// Splits the bytes of a snapshot file into its header's metadata and the
/// machine's bytes (which [`LeaseMachine::from_snapshot`] reads). Public so
/// that the fuzz targets and property tests feed it exactly what a restart
/// reads.
pub fn decode_snapshot_file(bytes: &[u8]) -> std::io::Result<StoredSnapshot> {
    let split = bytes.iter().position(|b| *b == b'\n').ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "no snapshot header")
    })?;
    let header: SnapshotHeader = serde_json::from_slice(&bytes[..split])
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let data = &bytes[split + 1..];
    if let Some(expected) = header.crc32c {
        let found = crc32c::crc32c(data);
        if found != expected {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the snapshot is damaged: its {} bytes have checksum {found:08x}, its header says {expected:08x}; \
                     refusing to start on it: rebuild this node from the other members (docs/operations.md, \"When a disk fails\")",
                    data.len()
                ),
            ));
        }
    }
    Ok((header.meta, data.to_vec()))
}

pub(super) fn write_snapshot_file(
    path: &Path,
    meta: &SnapshotMeta<NodeId, NodeInfo>,
    data: &[u8],
) -> Result<(), StorageError> {
    let mut bytes = serde_json::to_vec(&SnapshotHeader {
        meta: meta.clone(),
        crc32c: Some(crc32c::crc32c(data)),
    })
    .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
    bytes.push(b'\n');
    bytes.extend_from_slice(data);
    write_durably(path, &bytes)
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e).into())
}
