//! Arbitrary bytes decoded with prost as each message of
//! `raftlock_proto::v1` a server (client, session, lock, election, cluster
//! and Raft peer services) or a client decodes. Decoding must never panic;
//! a decoded message must re-encode to the length it claims and decode back
//! to itself, plain and length-delimited.
//!
//! A decoded request then goes through the edge's checks (the rules of
//! `node/src/wire/convert.rs` and the services, restated here against
//! `raftlock_proto::limits`, since this crate does not build the node) and,
//! whether they pass or not, is applied as the node would propose it to a
//! busy state machine with every step check: the machine must be at least
//! as strict as the edge, so what the edge refuses the machine refuses too.
//! Read requests run the machine's queries. A `RaftPayload` goes on to the
//! openraft message decoders. A panic here is a finding.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use raftlock_fuzz::support::decoders::{peer_messages, prepared, PREPARED_NEXT};
use raftlock_fuzz::support::invariants::{checked_apply, Tracker};
use raftlock_proto::{limits, v1 as pb};
use raftlock_store::machine::{Command, Mode, Outcome, RequestId};
use std::fmt::Debug;

#[derive(Arbitrary, Debug)]
enum Which {
    CreateSession,
    KeepAlive,
    CloseSession,
    Acquire,
    Release,
    ForceRelease,
    Describe,
    List,
    Validate,
    Campaign,
    Proclaim,
    Resign,
    Leader,
    Status,
    AddLearner,
    ChangeMembership,
    TransferLeader,
    Backup,
    RaftPayload,
    Responses,
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(which) = Which::arbitrary(&mut u) else {
        return;
    };
    let body = u.take_rest();
    match which {
        Which::CreateSession => {
            if let Some(r) = round_trip::<pb::CreateSessionRequest>(body) {
                let bad_ttl = !(limits::MIN_TTL_MS..=limits::MAX_TTL_MS).contains(&r.ttl_ms);
                let bad = bad_ttl || r.client_name.len() > limits::MAX_CLIENT_NAME_LEN;
                // Without authentication, and with the client name as the
                // authenticated identity.
                for owner in [String::new(), r.client_name.clone()] {
                    let o = apply(Command::CreateSession {
                        ttl_ms: r.ttl_ms,
                        client_name: r.client_name.clone(),
                        owner,
                    });
                    assert!(!bad || o.reply.is_err(), "the machine took {r:?}");
                }
            }
        }
        Which::KeepAlive => {
            if let Some(r) = round_trip::<pb::KeepAliveRequest>(body) {
                let _ = prepared().session(r.session_id);
            }
        }
        Which::CloseSession => {
            if let Some(r) = round_trip::<pb::CloseSessionRequest>(body) {
                let edge = edge_session(r.session_id);
                let o = apply(Command::CloseSession {
                    session: r.session_id,
                });
                refused_if(edge.is_err(), &o, &r);
            }
        }
        Which::Acquire => {
            if let Some(r) = round_trip::<pb::AcquireRequest>(body) {
                let wait_ok = r.wait_timeout_ms.is_none_or(|w| w <= limits::MAX_WAIT_MS);
                // Checked by the edge only: the machine takes typed values.
                let _ = edge_session(r.session_id);
                let _ = edge_request_id(&r.request_id);
                let o = apply(Command::Acquire {
                    session: r.session_id,
                    name: r.name.clone(),
                    request_id: lenient_request_id(&r.request_id),
                    mode: edge_mode(r.mode).unwrap_or(Mode::Exclusive),
                    permits: (r.permits > 0).then_some(r.permits),
                    wait_ms: r.wait_timeout_ms,
                    metadata: r.metadata.clone(),
                });
                let refused = edge_name(&r.name).is_err()
                    || !wait_ok
                    || r.metadata.len() > limits::MAX_METADATA_LEN;
                refused_if(refused, &o, &r);
            }
        }
        Which::Release => {
            if let Some(r) = round_trip::<pb::ReleaseRequest>(body) {
                release(&r.name, r.session_id, r.token, &r);
            }
        }
        Which::Resign => {
            if let Some(r) = round_trip::<pb::ResignRequest>(body) {
                release(&r.name, r.session_id, r.token, &r);
            }
        }
        Which::ForceRelease => {
            if let Some(r) = round_trip::<pb::ForceReleaseRequest>(body) {
                let o = apply(Command::ForceRelease {
                    name: r.name.clone(),
                });
                refused_if(edge_name(&r.name).is_err(), &o, &r);
            }
        }
        Which::Describe => {
            if let Some(r) = round_trip::<pb::DescribeRequest>(body) {
                let view = prepared().describe(&r.name);
                assert!(edge_name(&r.name).is_ok() || view.holders.is_empty());
            }
        }
        Which::Leader => {
            if let Some(r) = round_trip::<pb::LeaderRequest>(body) {
                let view = prepared().describe(&r.name);
                let _ = view.holders.iter().find(|h| h.mode == Mode::Exclusive);
            }
        }
        Which::List => {
            if let Some(r) = round_trip::<pb::ListRequest>(body) {
                list(&r);
            }
        }
        Which::Validate => {
            if let Some(r) = round_trip::<pb::ValidateRequest>(body) {
                let m = prepared();
                let v = m.validate(&r.name, r.token);
                let held = m
                    .describe(&r.name)
                    .holders
                    .iter()
                    .any(|h| h.token == r.token);
                assert_eq!(v.valid, held, "validate({:?}, {})", r.name, r.token);
            }
        }
        Which::Campaign => {
            if let Some(r) = round_trip::<pb::CampaignRequest>(body) {
                let wait = r
                    .wait_timeout_ms
                    .unwrap_or(limits::MAX_WAIT_MS)
                    .min(limits::MAX_WAIT_MS);
                let o = apply(Command::Acquire {
                    session: r.session_id,
                    name: r.name.clone(),
                    request_id: lenient_request_id(&r.request_id),
                    mode: Mode::Exclusive,
                    permits: None,
                    wait_ms: Some(wait),
                    metadata: r.value.clone(),
                });
                let refused =
                    edge_name(&r.name).is_err() || r.value.len() > limits::MAX_METADATA_LEN;
                refused_if(refused, &o, &r);
            }
        }
        Which::Proclaim => {
            if let Some(r) = round_trip::<pb::ProclaimRequest>(body) {
                let o = apply(Command::Proclaim {
                    session: r.session_id,
                    name: r.name.clone(),
                    token: r.token,
                    value: r.value.clone(),
                });
                let refused =
                    edge_name(&r.name).is_err() || r.value.len() > limits::MAX_METADATA_LEN;
                refused_if(refused, &o, &r);
            }
        }
        Which::Status => {
            round_trip::<pb::StatusRequest>(body);
        }
        Which::AddLearner => {
            round_trip::<pb::AddLearnerRequest>(body);
        }
        Which::ChangeMembership => {
            if let Some(r) = round_trip::<pb::ChangeMembershipRequest>(body) {
                let voters: std::collections::BTreeSet<u64> = r.voters.iter().copied().collect();
                assert!(voters.len() <= r.voters.len());
            }
        }
        Which::TransferLeader => {
            round_trip::<pb::TransferLeaderRequest>(body);
        }
        Which::Backup => {
            round_trip::<pb::BackupRequest>(body);
        }
        Which::RaftPayload => {
            if let Some(p) = round_trip::<pb::RaftPayload>(body) {
                if let Err(finding) = peer_messages(&p.data) {
                    panic!("{finding}");
                }
            }
        }
        Which::Responses => responses(body),
    }
});

/// Decodes `body` as `M`; what decodes must re-encode to the length it
/// claims and decode back to itself, plain and length-delimited.
fn round_trip<M: Message + Default + PartialEq + Debug>(body: &[u8]) -> Option<M> {
    let _ = M::decode_length_delimited(body);
    let m = M::decode(body).ok()?;
    let bytes = m.encode_to_vec();
    assert_eq!(bytes.len(), m.encoded_len(), "encoded_len of {m:?}");
    match M::decode(bytes.as_slice()) {
        Ok(again) => assert_eq!(again, m, "decode(encode(m)) != m"),
        Err(e) => panic!(
            "a re-encoded {} does not decode: {e}",
            std::any::type_name::<M>()
        ),
    }
    let framed = m.encode_length_delimited_to_vec();
    match M::decode_length_delimited(framed.as_slice()) {
        Ok(again) => assert_eq!(again, m, "length-delimited round trip"),
        Err(e) => panic!(
            "a length-delimited {} does not decode: {e}",
            std::any::type_name::<M>()
        ),
    }
    Some(m)
}

/// Applies `cmd` to a busy machine at the next index, checking the step.
fn apply(cmd: Command) -> Outcome {
    let mut m = prepared();
    let mut t = Tracker::after(&m);
    match checked_apply(&mut m, &cmd, PREPARED_NEXT, 1_700_000_000_000, &mut t) {
        Ok(o) => o,
        Err(finding) => panic!("{finding}"),
    }
}

/// The machine must refuse what the edge refuses.
fn refused_if(edge_refuses: bool, o: &Outcome, req: &dyn Debug) {
    if edge_refuses {
        assert!(
            o.reply.is_err(),
            "the edge refuses {req:?} but the machine answered {:?}",
            o.reply
        );
    }
}

fn release(name: &str, session: u64, token: u64, req: &dyn Debug) {
    let o = apply(Command::Release {
        session,
        name: name.to_owned(),
        token,
    });
    refused_if(
        edge_name(name).is_err() || edge_session(session).is_err(),
        &o,
        req,
    );
}

fn list(r: &pb::ListRequest) {
    let limit = match r.limit {
        0 => limits::DEFAULT_LIST_LIMIT,
        n => n.min(limits::MAX_LIST_LIMIT),
    } as usize;
    let m = prepared();
    let page = m.list(&r.prefix, &r.page_token, limit + 1);
    let want: Vec<String> = m
        .locks()
        .map(|(n, _)| n.to_owned())
        .filter(|n| n.starts_with(&r.prefix) && (r.page_token.is_empty() || *n > r.page_token))
        .take(limit + 1)
        .collect();
    let got: Vec<String> = page.into_iter().map(|l| l.name).collect();
    assert_eq!(
        got, want,
        "list({:?}, {:?}, {limit})",
        r.prefix, r.page_token
    );
}

/// Responses a client decodes.
fn responses(body: &[u8]) {
    round_trip::<pb::CreateSessionResponse>(body);
    round_trip::<pb::KeepAliveResponse>(body);
    round_trip::<pb::CloseSessionResponse>(body);
    round_trip::<pb::ReleaseResponse>(body);
    round_trip::<pb::ForceReleaseResponse>(body);
    round_trip::<pb::DescribeResponse>(body);
    round_trip::<pb::ListResponse>(body);
    round_trip::<pb::ValidateResponse>(body);
    round_trip::<pb::CampaignResponse>(body);
    round_trip::<pb::ProclaimResponse>(body);
    round_trip::<pb::ResignResponse>(body);
    round_trip::<pb::StatusResponse>(body);
    round_trip::<pb::MembershipResponse>(body);
    round_trip::<pb::TransferLeaderResponse>(body);
    round_trip::<pb::BackupChunk>(body);
    if let Some(r) = round_trip::<pb::AcquireResponse>(body) {
        for g in r.grant.iter().chain(&r.holders) {
            let _ = edge_request_id(&g.request_id);
            let _ = edge_mode(g.mode);
        }
    }
    if let Some(r) = round_trip::<pb::LeaderResponse>(body) {
        if let Some(g) = r.leader {
            let _ = edge_request_id(&g.request_id);
            let _ = edge_mode(g.mode);
        }
    }
}

// The edge's checks, as node/src/wire/convert.rs makes them.

fn edge_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("lock name must not be empty".into());
    }
    if name.len() > limits::MAX_NAME_LEN {
        return Err(format!("lock name is {} bytes", name.len()));
    }
    Ok(())
}

fn edge_session(id: u64) -> Result<(), String> {
    if id == 0 {
        return Err("session_id is required".into());
    }
    Ok(())
}

fn edge_request_id(bytes: &[u8]) -> Result<(), String> {
    let id = RequestId::from_bytes(bytes);
    assert_eq!(
        id.is_some(),
        bytes.len() == limits::REQUEST_ID_LEN,
        "request id of {} bytes",
        bytes.len()
    );
    match id {
        Some(id) => {
            assert_eq!(id.to_bytes().as_slice(), bytes, "request id round trip");
            Ok(())
        }
        None => Err(format!("request_id must be 16 bytes, got {}", bytes.len())),
    }
}

fn edge_mode(value: i32) -> Result<Mode, String> {
    match pb::LockMode::try_from(value) {
        Ok(pb::LockMode::Unspecified) | Ok(pb::LockMode::Exclusive) => Ok(Mode::Exclusive),
        Ok(pb::LockMode::Shared) => Ok(Mode::Shared),
        Err(_) => Err(format!("unknown lock mode {value}")),
    }
}

/// A request id for a request the edge would refuse, so the machine still
/// sees the rest of it.
fn lenient_request_id(bytes: &[u8]) -> RequestId {
    let mut arr = [0u8; 16];
    for (a, b) in arr.iter_mut().zip(bytes) {
        *a = *b;
    }
    RequestId(u128::from_be_bytes(arr))
}
