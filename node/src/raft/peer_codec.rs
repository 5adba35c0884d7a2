//! How openraft's messages are encoded inside `RaftPayload.data` between
//! nodes. This release sends postcard, a byte `BINARY` first; releases
//! before it sent JSON, which never starts with that byte. A node reads
//! both and answers in the format it was asked in, and a sender whose
//! binary request a peer cannot decode (a node of an older release, during
//! a rolling upgrade) falls back to JSON for that peer. Binary messages are
//! a fraction of the size (a grant's metadata is bytes, which JSON writes
//! as an array of numbers) and far cheaper to encode and decode.
//!
//! Replies: an `Ok` answer to a binary request is `BINARY` + postcard of
//! the value; an error is JSON of the whole `Result`, as before (errors are
//! rare, and openraft's error types are not all postcard-friendly).

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The first byte of a binary message.
pub const BINARY: u8 = 0x01;

/// Encodes a request, binary or as JSON.
pub fn encode_request<T: Serialize>(value: &T, binary: bool) -> Result<Vec<u8>, String> {
    if binary {
        postcard::to_io(value, vec![BINARY]).map_err(|e| e.to_string())
    } else {
        serde_json::to_vec(value).map_err(|e| e.to_string())
    }
}

/// Decodes a request in either format; says whether it was binary.
pub fn decode_request<T: DeserializeOwned>(data: &[u8]) -> Result<(T, bool), String> {
    match data.split_first() {
        Some((&BINARY, body)) => postcard::from_bytes(body)
            .map(|v| (v, true))
            .map_err(|e| e.to_string()),
        _ => serde_json::from_slice(data)
            .map(|v| (v, false))
            .map_err(|e| e.to_string()),
    }
}

/// Encodes a reply in the format of its request.
pub fn encode_reply<T: Serialize, E: Serialize>(
    result: &Result<T, E>,
    binary: bool,
) -> Result<Vec<u8>, String> {
    match result {
        Ok(value) if binary => postcard::to_io(value, vec![BINARY]).map_err(|e| e.to_string()),
        _ => serde_json::to_vec(result).map_err(|e| e.to_string()),
    }
}

/// Decodes a reply in either format.
pub fn decode_reply<T: DeserializeOwned, E: DeserializeOwned>(
    data: &[u8],
) -> Result<Result<T, E>, String> {
    match data.split_first() {
        Some((&BINARY, body)) => postcard::from_bytes(body)
            .map(Ok)
            .map_err(|e| e.to_string()),
        _ => serde_json::from_slice(data).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::error::RaftError;
    use openraft::raft::{
        AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, VoteRequest,
        VoteResponse,
    };
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Membership, Vote};
    use raftlock_store::machine::{Command, Mode, RequestId};
    use raftlock_store::{NodeId, NodeInfo, Proposal, TypeConfig};
    use std::collections::{BTreeMap, BTreeSet};

    fn round_trip<T: Serialize + DeserializeOwned>(v: &T) -> T {
        for binary in [true, false] {
            let bytes = encode_request(v, binary).unwrap();
            assert_eq!(bytes[0] == BINARY, binary);
            let (back, was_binary): (T, bool) = decode_request(&bytes).unwrap();
            assert_eq!(was_binary, binary);
            // Compare through JSON: openraft's messages have no PartialEq.
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(v).unwrap()
            );
        }
        decode_request::<T>(&encode_request(v, true).unwrap())
            .unwrap()
            .0
    }

    #[test]
    fn every_peer_message_round_trips_in_both_formats() {
        let log_id = LogId::new(CommittedLeaderId::new(3, 1), 42);
        let members: BTreeMap<NodeId, NodeInfo> = (1..=3)
            .map(|i| {
                (
                    i,
                    NodeInfo {
                        peer_addr: format!("127.0.0.1:71{i}0"),
                        client_addr: format!("127.0.0.1:70{i}0"),
                    },
                )
            })
            .collect();
        let membership = Membership::new(vec![BTreeSet::from([1, 2, 3])], members);
        let entries: Vec<Entry<TypeConfig>> = vec![
            Entry {
                log_id,
                payload: EntryPayload::Blank,
            },
            Entry {
                log_id,
                payload: EntryPayload::Membership(membership.clone()),
            },
            Entry {
                log_id,
                payload: EntryPayload::Normal(Proposal::single(
                    7,
                    Command::Acquire {
                        session: 9,
                        name: "l".into(),
                        request_id: RequestId(u128::MAX),
                        mode: Mode::Shared,
                        permits: Some(2),
                        wait_ms: Some(5),
                        metadata: vec![0xff; 4096],
                    },
                )),
            },
        ];
        let append = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(log_id),
            leader_commit: None,
            entries,
        };
        round_trip(&append);
        let binary = encode_request(&append, true).unwrap();
        let json = encode_request(&append, false).unwrap();
        assert!(
            binary.len() * 3 < json.len(),
            "{} vs {}",
            binary.len(),
            json.len()
        );
        round_trip(&VoteRequest::<NodeId>::new(Vote::new(4, 2), Some(log_id)));
        round_trip(&InstallSnapshotRequest::<TypeConfig> {
            vote: Vote::new_committed(3, 1),
            meta: openraft::SnapshotMeta {
                last_log_id: Some(log_id),
                last_membership: openraft::StoredMembership::new(Some(log_id), membership),
                snapshot_id: "s".into(),
            },
            offset: 0,
            data: vec![1, 2, 3],
            done: true,
        });
        for resp in [
            AppendEntriesResponse::<NodeId>::Success,
            AppendEntriesResponse::PartialSuccess(Some(log_id)),
            AppendEntriesResponse::Conflict,
            AppendEntriesResponse::HigherVote(Vote::new(9, 3)),
        ] {
            let ok: Result<_, RaftError<NodeId>> = Ok(resp);
            let bytes = encode_reply(&ok, true).unwrap();
            let back: Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> =
                decode_reply(&bytes).unwrap();
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(&ok).unwrap()
            );
        }
        let vote: Result<VoteResponse<NodeId>, RaftError<NodeId>> = Ok(VoteResponse {
            vote: Vote::new(4, 2),
            vote_granted: true,
            last_log_id: Some(log_id),
        });
        let back: Result<VoteResponse<NodeId>, RaftError<NodeId>> =
            decode_reply(&encode_reply(&vote, true).unwrap()).unwrap();
        assert!(back.unwrap().vote_granted);
    }

    /// A node of the previous release sends JSON and reads only JSON: it is
    /// answered in JSON, errors included.
    #[test]
    fn json_requests_get_json_replies() {
        let req = VoteRequest::<NodeId>::new(Vote::new(4, 2), None);
        let (back, binary): (VoteRequest<NodeId>, bool) =
            decode_request(&serde_json::to_vec(&req).unwrap()).unwrap();
        assert!(!binary);
        let reply: Result<VoteResponse<NodeId>, RaftError<NodeId>> = Ok(VoteResponse {
            vote: back.vote,
            vote_granted: false,
            last_log_id: None,
        });
        let bytes = encode_reply(&reply, binary).unwrap();
        assert_eq!(bytes[0], b'{');
        let _: Result<VoteResponse<NodeId>, RaftError<NodeId>> =
            serde_json::from_slice(&bytes).unwrap();
    }
}
