//! Arbitrary bytes into every decoder a node runs on bytes it did not make
//! itself in this process: the log store's entry decoder, the snapshot file
//! and snapshot decoders, the backup decoder, the log's meta values, and the
//! openraft messages peers send inside `RaftPayload`. Decoding must never
//! panic; whatever decodes must re-encode to the same thing; a command that
//! decodes is applied (checked) to an empty machine and to a busy one; a
//! state that decodes and keeps the invariants keeps them under commands.

use super::invariants::{check_invariants, checked_apply, Tracker};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{CommittedLeaderId, EntryPayload, Membership, SnapshotMeta, StoredMembership, Vote};
use raftlock_store::machine::{Command, LeaseMachine, Mode, RequestId};
use raftlock_store::types::{Entry, LogId, NodeId, NodeInfo, Proposal, TypeConfig};
use raftlock_store::{backup, log_store, state_machine};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// The first index free after [`prepared`].
pub const PREPARED_NEXT: u64 = 11;

/// The commands that build [`prepared`], at indexes 1..=10.
pub fn prepared_commands() -> Vec<Command> {
    let session = |n: &str, owner: &str| Command::CreateSession {
        ttl_ms: 10_000,
        client_name: n.into(),
        owner: owner.into(),
    };
    let acquire =
        |session, name: &str, rid, mode, permits, wait_ms, metadata: &[u8]| Command::Acquire {
            session,
            name: name.into(),
            request_id: RequestId(rid),
            mode,
            permits,
            wait_ms,
            metadata: metadata.to_vec(),
        };
    vec![
        session("s1", ""),
        session("s2", "team-a"),
        session("s3", "team-b"),
        session("s4", "team-a"),
        acquire(1, "a", 1, Mode::Exclusive, None, None, b""),
        acquire(2, "a", 2, Mode::Exclusive, None, Some(30_000), b"next"),
        acquire(3, "b", 3, Mode::Shared, Some(2), None, b""),
        acquire(4, "b", 4, Mode::Shared, None, None, b""),
        acquire(1, "b", 5, Mode::Shared, None, Some(1_000), b""),
        acquire(2, "c", 6, Mode::Exclusive, None, None, b"leader-2"),
    ]
}

/// Four sessions (two of one owner); `a` held with a waiter, `b` shared at
/// its two permits with a waiter, `c` held with metadata.
pub fn prepared() -> LeaseMachine {
    static PREPARED: OnceLock<LeaseMachine> = OnceLock::new();
    PREPARED
        .get_or_init(|| {
            let mut m = LeaseMachine::default();
            for (i, cmd) in prepared_commands().iter().enumerate() {
                m.apply(cmd, i as u64 + 1, 1_000 + i as u64);
            }
            m
        })
        .clone()
}

/// Valid encodings of everything [`decode_all`] reads, to start mutating
/// from: commands, proposals and log entries (normal, blank, membership),
/// a snapshot, a snapshot file, a backup, the log's meta values, and peer
/// requests and replies.
pub fn seeds() -> Vec<Vec<u8>> {
    let machine = prepared();
    let log_id = |index| LogId::new(CommittedLeaderId::new(3, 1), index);
    let members: BTreeMap<NodeId, NodeInfo> = [1, 2, 3]
        .into_iter()
        .map(|id| {
            let info = NodeInfo {
                peer_addr: format!("10.0.0.{id}:7001"),
                client_addr: format!("10.0.0.{id}:7000"),
            };
            (id, info)
        })
        .collect();
    let voters: BTreeSet<NodeId> = members.keys().copied().collect();
    let membership = Membership::new(vec![voters], members);
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(10)),
        last_membership: StoredMembership::new(Some(log_id(2)), membership.clone()),
        snapshot_id: "3-1-10-0".into(),
    };
    let mut entries: Vec<Entry> = prepared_commands()
        .into_iter()
        .enumerate()
        .map(|(i, command)| Entry {
            log_id: log_id(i as u64 + 1),
            payload: EntryPayload::Normal(Proposal::single(1_700_000_000_000 + i as u64, command)),
        })
        .collect();
    entries.push(Entry {
        log_id: log_id(11),
        payload: EntryPayload::Normal(Proposal::batch(
            1_700_000_000_011,
            vec![
                Command::ForceRelease { name: "a".into() },
                Command::ForceRelease { name: "b".into() },
            ],
        )),
    });
    let blank = Entry {
        log_id: log_id(12),
        payload: EntryPayload::Blank,
    };
    let member_entry = Entry {
        log_id: log_id(13),
        payload: EntryPayload::Membership(membership),
    };
    let vote = Vote::new_committed(3, 1);
    let mut out = Vec::new();
    for e in &entries {
        out.push(json(e));
        if let EntryPayload::Normal(p) = &e.payload {
            out.push(json(p));
            for c in p.commands.iter() {
                out.push(json(c));
            }
        }
    }
    // The exactly-once commands, which no prepared entry holds: decoded,
    // each is applied twice to the prepared state, a duplicate.
    out.push(json(&sequenced_acquire(2, "b", 5, 1)));
    out.push(json(&Command::CreateSessionOnce {
        ttl_ms: 10_000,
        client_name: "s5".into(),
        owner: "team-a".into(),
        key: u128::MAX,
    }));
    out.push(json(&blank));
    out.push(json(&member_entry));
    out.push(machine.to_snapshot());
    let mut file = json(&SnapshotFileHeader { meta: meta.clone() });
    file.push(b'\n');
    file.extend_from_slice(&machine.to_snapshot());
    out.push(file);
    out.push(backup::encode(&machine, 10, 1_700_000_000_000, "cluster-1"));
    out.push(json(&vote));
    out.push(json(&Some(log_id(9))));
    let append = AppendEntriesRequest::<TypeConfig> {
        vote,
        prev_log_id: Some(log_id(0)),
        entries: entries.clone(),
        leader_commit: Some(log_id(5)),
    };
    out.push(json(&append));
    let install = InstallSnapshotRequest::<TypeConfig> {
        vote,
        meta,
        offset: 0,
        data: machine.to_snapshot(),
        done: true,
    };
    out.push(json(&install));
    out.push(json(&VoteRequest::new(vote, Some(log_id(10)))));
    let vote_reply: VoteReply = Ok(VoteResponse::new(vote, Some(log_id(10)), true));
    out.push(json(&vote_reply));
    let append_reply: AppendReply = Ok(AppendEntriesResponse::Success);
    out.push(json(&append_reply));
    let snapshot_reply: SnapshotReply = Ok(InstallSnapshotResponse { vote });
    out.push(json(&snapshot_reply));
    out
}

/// A sequenced shared acquire with a wait.
fn sequenced_acquire(session: u64, name: &str, seq: u64, acked_below: u64) -> Command {
    Command::Sequenced {
        seq,
        acked_below,
        command: Box::new(Command::Acquire {
            session,
            name: name.into(),
            request_id: RequestId(1_000 + u128::from(seq)),
            mode: Mode::Shared,
            permits: None,
            wait_ms: Some(1_000),
            metadata: Vec::new(),
        }),
    }
}

/// The snapshot file's header line, as `state_machine` writes it.
#[derive(Serialize)]
struct SnapshotFileHeader {
    meta: SnapshotMeta<NodeId, NodeInfo>,
}

/// Seeds are made from values that always encode.
fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

type VoteReply = Result<VoteResponse<NodeId>, RaftError<NodeId>>;
type AppendReply = Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>;
type SnapshotReply =
    Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>;

/// Runs every decoder on `bytes`.
pub fn decode_all(bytes: &[u8]) -> Result<(), String> {
    // The log store's entries (the `log` tree's values).
    if let Ok(entry) = log_store::decode(bytes) {
        json_round_trip(&entry, "log entry")?;
        if let EntryPayload::Normal(p) = &entry.payload {
            for c in p.commands.iter().take(32) {
                apply_decoded(c, p.at_ms)?;
            }
        }
    }
    if let Ok(p) = serde_json::from_slice::<Proposal>(bytes) {
        json_round_trip(&p, "proposal")?;
        for c in p.commands.iter().take(32) {
            apply_decoded(c, p.at_ms)?;
        }
    }
    if let Ok(c) = serde_json::from_slice::<Command>(bytes) {
        let again: Result<Command, _> =
            serde_json::to_vec(&c).and_then(|b| serde_json::from_slice(&b));
        if again.as_ref().ok() != Some(&c) {
            return Err(format!("command {c:?} did not round-trip: {again:?}"));
        }
        apply_decoded(&c, 0)?;
    }
    // The snapshot file a restart reads, and the snapshot bytes a follower
    // installs.
    if let Ok((meta, data)) = state_machine::decode_snapshot_file(bytes) {
        json_round_trip(&meta, "snapshot meta")?;
        restored_machine(&data)?;
    }
    restored_machine(bytes)?;
    // A backup file `raftlockd restore` reads.
    if let Ok((header, machine)) = backup::decode(bytes) {
        let again = backup::encode(
            &machine,
            header.last_index,
            header.created_at_ms,
            &header.cluster_id,
        );
        match backup::decode(&again) {
            Ok((h, m)) => {
                if (h.last_index, h.created_at_ms, &h.cluster_id)
                    != (header.last_index, header.created_at_ms, &header.cluster_id)
                    || m != machine
                {
                    return Err("a decoded backup did not round-trip".into());
                }
            }
            Err(e) => return Err(format!("a re-encoded backup does not decode: {e}")),
        }
        probe(machine)?;
    }
    // The log store's `meta` tree values.
    if let Ok(v) = serde_json::from_slice::<Vote<NodeId>>(bytes) {
        json_round_trip(&v, "vote")?;
    }
    if let Ok(l) = serde_json::from_slice::<Option<LogId>>(bytes) {
        json_round_trip(&l, "log id")?;
    }
    peer_messages(bytes)
}

/// The openraft messages a peer decodes from `RaftPayload.data`: requests
/// on the server side, `Result<reply, error>` on the client side.
pub fn peer_messages(bytes: &[u8]) -> Result<(), String> {
    if let Ok(r) = serde_json::from_slice::<AppendEntriesRequest<TypeConfig>>(bytes) {
        json_round_trip(&r, "append-entries request")?;
        let mut m = prepared();
        let mut t = Tracker::after(&m);
        for e in r.entries.iter().take(32) {
            if let EntryPayload::Normal(p) = &e.payload {
                for c in p.commands.iter().take(32) {
                    let Some(index) = t.next_index() else {
                        break;
                    };
                    checked_apply(&mut m, c, index, p.at_ms, &mut t)?;
                }
            }
        }
    }
    if let Ok(r) = serde_json::from_slice::<InstallSnapshotRequest<TypeConfig>>(bytes) {
        json_round_trip(&r, "install-snapshot request")?;
        restored_machine(&r.data)?;
    }
    if let Ok(r) = serde_json::from_slice::<VoteRequest<NodeId>>(bytes) {
        json_round_trip(&r, "vote request")?;
    }
    if let Ok(r) = serde_json::from_slice::<VoteReply>(bytes) {
        json_round_trip(&r, "vote reply")?;
    }
    if let Ok(r) = serde_json::from_slice::<AppendReply>(bytes) {
        json_round_trip(&r, "append-entries reply")?;
    }
    if let Ok(r) = serde_json::from_slice::<SnapshotReply>(bytes) {
        json_round_trip(&r, "install-snapshot reply")?;
    }
    Ok(())
}

/// A decoded command, applied to an empty machine, and twice (the second a
/// retry) to [`prepared`].
pub fn apply_decoded(cmd: &Command, at_ms: u64) -> Result<(), String> {
    let mut m = LeaseMachine::default();
    checked_apply(&mut m, cmd, 1, at_ms, &mut Tracker::default())?;
    let mut m = prepared();
    let mut t = Tracker::after(&m);
    checked_apply(&mut m, cmd, PREPARED_NEXT, at_ms, &mut t)?;
    checked_apply(&mut m, cmd, PREPARED_NEXT + 1, at_ms, &mut t)?;
    Ok(())
}

/// Snapshot bytes: if they restore, the state snapshots to itself, and if
/// it keeps the invariants it keeps them under the probe commands.
pub fn restored_machine(data: &[u8]) -> Result<(), String> {
    let Ok(m) = LeaseMachine::from_snapshot(data) else {
        return Ok(());
    };
    match LeaseMachine::from_snapshot(&m.to_snapshot()) {
        Ok(again) if again == m => {}
        Ok(_) => return Err("a restored machine did not round-trip".into()),
        Err(e) => {
            return Err(format!(
                "a restored machine's snapshot does not restore: {e}"
            ))
        }
    }
    probe(m)
}

/// Applies commands made from the state itself (each holder releases and
/// proclaims, each waiter cancels, each session acquires, plainly and
/// sequenced (twice, and once more after acknowledging), closes, expires,
/// each lock is force-released, a keyed session is created twice) to a
/// state that keeps the invariants. A
/// state that breaks them came from damaged bytes, not from `apply`; it is
/// only required to decode without panicking.
pub fn probe(mut m: LeaseMachine) -> Result<(), String> {
    if check_invariants(&m).is_err() {
        return Ok(());
    }
    let mut cmds = Vec::new();
    let sessions: Vec<u64> = m.sessions().map(|s| s.id).take(4).collect();
    let mut names: Vec<String> = Vec::new();
    for (name, lock) in m.locks().take(4) {
        names.push(name.to_owned());
        for h in lock.holders.iter().take(3) {
            cmds.push(Command::Proclaim {
                session: h.session,
                name: name.to_owned(),
                token: h.token,
                value: b"v".to_vec(),
            });
        }
        for w in lock.waiters.iter().take(3) {
            cmds.push(Command::CancelWait {
                session: w.session,
                name: name.to_owned(),
                request_id: w.request_id,
            });
        }
        for h in lock.holders.iter().take(3) {
            cmds.push(Command::Release {
                session: h.session,
                name: name.to_owned(),
                token: h.token,
            });
        }
    }
    names.push("a".into());
    for (i, s) in sessions.iter().enumerate() {
        for name in names.iter().take(3) {
            cmds.push(Command::Acquire {
                session: *s,
                name: name.clone(),
                request_id: RequestId(u128::MAX - i as u128),
                mode: if i % 2 == 0 {
                    Mode::Exclusive
                } else {
                    Mode::Shared
                },
                permits: None,
                wait_ms: Some(1_000),
                metadata: Vec::new(),
            });
        }
    }
    if let Some(s) = sessions.last() {
        let (acked, kept) = m.exactly_once(*s);
        let seq = kept.last().map_or(acked, |k| k.saturating_add(1)).max(1);
        let first = sequenced_acquire(*s, "a", seq, acked);
        cmds.push(first.clone());
        cmds.push(first);
        cmds.push(sequenced_acquire(*s, "a", seq, seq.saturating_add(1)));
    }
    for name in &names {
        cmds.push(Command::ForceRelease { name: name.clone() });
    }
    if let Some(s) = sessions.first() {
        cmds.push(Command::CloseSession { session: *s });
    }
    cmds.push(Command::ExpireSessions {
        sessions: m.sessions().map(|s| s.id).collect(),
    });
    cmds.push(Command::CreateSession {
        ttl_ms: 10_000,
        client_name: "probe".into(),
        owner: "team-a".into(),
    });
    let keyed = Command::CreateSessionOnce {
        ttl_ms: 10_000,
        client_name: "probe".into(),
        owner: "team-a".into(),
        key: 1,
    };
    cmds.push(keyed.clone());
    cmds.push(keyed);
    let mut t = Tracker::after(&m);
    for cmd in &cmds {
        let Some(index) = t.next_index() else {
            break;
        };
        checked_apply(&mut m, cmd, index, 0, &mut t)?;
    }
    Ok(())
}

/// Whatever decoded re-encodes, and decodes again to the same encoding.
pub fn json_round_trip<T: Serialize + DeserializeOwned>(v: &T, what: &str) -> Result<(), String> {
    let a = serde_json::to_vec(v).map_err(|e| format!("a decoded {what} does not encode: {e}"))?;
    let back: T = serde_json::from_slice(&a).map_err(|e| {
        format!(
            "a re-encoded {what} does not decode: {e}\n  {}",
            String::from_utf8_lossy(&a)
        )
    })?;
    let b = serde_json::to_vec(&back)
        .map_err(|e| format!("a re-decoded {what} does not encode: {e}"))?;
    if a != b {
        return Err(format!(
            "a {what} changed on a round trip:\n  {}\n  {}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        ));
    }
    Ok(())
}
