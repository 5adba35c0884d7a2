//! The Raft log as releases before the write-ahead log kept it, in sled:
//! entries in the `log` tree keyed by big-endian index, vote / committed /
//! last-purged in the `meta` tree (JSON). Read only now, to migrate such a
//! data dir into the WAL (`data_dir.rs`); and the entry encoding, which the
//! WAL's records share.

use crate::types::{Entry, LogId, NodeId};
use crate::wal::format::LogImage;
use openraft::{StorageIOError, Vote};
use std::io;
use std::path::Path;

use crate::types::StorageError;

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// sled's page cache while reading an old log.
const SLED_CACHE_BYTES: u64 = 64 << 20;

/// Reads the whole log of the sled database at `path`.
pub fn read_sled(path: &Path) -> Result<LogImage, sled::Error> {
    let db = sled::Config::new()
        .path(path)
        .cache_capacity(SLED_CACHE_BYTES)
        .open()?;
    let log = db.open_tree("log")?;
    let meta = db.open_tree("meta")?;
    let read_meta = |key: &[u8]| -> Result<Option<Vec<u8>>, sled::Error> {
        Ok(meta.get(key)?.map(|v| v.to_vec()))
    };
    let mut image = LogImage::default();
    if let Some(b) = read_meta(VOTE)? {
        image.vote = Some(json::<Vote<NodeId>>("vote", &b)?);
    }
    if let Some(b) = read_meta(COMMITTED)? {
        image.committed = json::<Option<LogId>>("committed", &b)?;
    }
    if let Some(b) = read_meta(LAST_PURGED)? {
        image.purged = Some(json::<LogId>("last_purged", &b)?);
    }
    for kv in log.iter() {
        let (_, v) = kv?;
        let entry = decode(&v).map_err(|e| {
            sled::Error::Io(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
        })?;
        // Entries at or below the purge point may remain after a crash
        // between the two steps of the old purge; they were never needed.
        if image.purged.is_some_and(|p| entry.log_id.index <= p.index) {
            continue;
        }
        image.entries.insert(entry.log_id.index, entry);
    }
    Ok(image)
}

fn json<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, sled::Error> {
    serde_json::from_slice(bytes).map_err(|e| {
        sled::Error::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("sled meta {what}: {e}"),
        ))
    })
}

/// Marks an entry stored in the binary (postcard) format. Entries written
/// by earlier releases are JSON and start with `{`; both are read. Binary
/// entries are about a third of the size and decode several times faster,
/// which is most of the time a restart spends replaying the log after the
/// snapshot.
const BINARY_ENTRY: u8 = 0x01;

/// Encodes one log entry as the sled store wrote it.
pub fn encode(entry: &Entry) -> Result<Vec<u8>, StorageError> {
    postcard::to_io(entry, vec![BINARY_ENTRY]).map_err(|e| StorageIOError::write_logs(&e).into())
}

/// Decodes one stored log entry (a value of the `log` tree). Public so that
/// the fuzz targets and property tests feed it exactly what the store reads.
pub fn decode(bytes: &[u8]) -> Result<Entry, StorageError> {
    match bytes.split_first() {
        Some((&BINARY_ENTRY, body)) => {
            let (entry, rest) = postcard::take_from_bytes::<Entry>(body)
                .map_err(|e| StorageIOError::read_logs(&e))?;
            if !rest.is_empty() {
                let e = io::Error::new(io::ErrorKind::InvalidData, "bytes after a log entry");
                return Err(StorageIOError::read_logs(&e).into());
            }
            Ok(entry)
        }
        _ => serde_json::from_slice(bytes).map_err(|e| StorageIOError::read_logs(&e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Command, Mode, RequestId};
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry() -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 2), 42),
            payload: EntryPayload::Normal(crate::Proposal::batch(
                1_700_000_000_000,
                vec![Command::Acquire {
                    session: 7,
                    name: "jobs/nightly".into(),
                    request_id: RequestId(u128::MAX - 1),
                    mode: Mode::Shared,
                    permits: Some(3),
                    wait_ms: None,
                    metadata: b"worker-1".to_vec(),
                }],
            )),
        }
    }

    /// Entries are written binary, and entries an earlier release wrote as
    /// JSON still read back the same.
    #[test]
    fn binary_and_json_entries_decode_alike() {
        let e = entry();
        let binary = encode(&e).unwrap();
        assert_eq!(binary[0], BINARY_ENTRY);
        let json = serde_json::to_vec(&e).unwrap();
        assert!(binary.len() < json.len());
        // Entries have no PartialEq; their JSON (u128 request ids and all)
        // stands in for it.
        let from_binary = serde_json::to_vec(&decode(&binary).unwrap()).unwrap();
        let from_json = serde_json::to_vec(&decode(&json).unwrap()).unwrap();
        assert_eq!(from_binary, json);
        assert_eq!(from_json, json);
        let mut trailing = binary.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        assert!(decode(&binary[..binary.len() - 1]).is_err());
        assert!(decode(&[BINARY_ENTRY]).is_err());
    }
}
