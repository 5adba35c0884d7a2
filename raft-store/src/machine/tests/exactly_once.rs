//! Exactly-once requests (sequence numbers, creation keys, replays), where
//! sessions' clients run, and the snapshot formats that carry them.

use super::*;

fn seq_acquire(
    session: SessionId,
    name: &str,
    req: u128,
    seq: u64,
    acked_below: u64,
    wait_ms: Option<u64>,
) -> Command {
    Command::Sequenced {
        seq,
        acked_below,
        command: Box::new(Command::Acquire {
            session,
            name: name.into(),
            request_id: RequestId(req),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms,
            metadata: vec![],
        }),
    }
}

fn release(log: &mut Log, session: SessionId, name: &str, token: FencingToken) {
    let o = log.apply(Command::Release {
        session,
        name: name.into(),
        token,
    });
    assert!(o.reply.is_ok(), "{o}");
}

fn grants(o: &Outcome) -> usize {
    o.events
        .iter()
        .filter(|e| matches!(e, Event::Granted(_)))
        .count()
}

/// Request ids alone were remembered for the last 256 finished
/// acquisitions: a duplicate delayed past that got a second grant the
/// client never saw. With sequence numbers it is refused unexecuted.
#[test]
fn a_late_duplicate_of_a_released_acquisition_is_never_granted_again() {
    let mut log = Log::new();
    let s = log.session();
    let first = seq_acquire(s, "l", 1, 1, 1, None);
    let token = granted(&log.apply(first.clone())).token;
    release(&mut log, s, "l", token);
    for seq in 2..=300u64 {
        // The client acknowledges each answer before its next request.
        let g = granted(&log.apply(seq_acquire(s, "l", seq as u128, seq, seq, None)));
        release(&mut log, s, "l", g.token);
    }
    // The first attempt's packet, delayed all this time, arrives.
    let late = log.apply(first);
    assert_eq!(err(&late), "request-acknowledged");
    assert_eq!(grants(&late), 0);
    assert!(log.m.lock("l").is_none(), "nobody holds the lock");
}

/// A seq and request id reused for another lock, or by a wait for a
/// try-lock's, is a client's mistake: refused, never answered with the
/// first call's verdict as if it were this one's.
#[test]
fn a_sequence_number_reused_by_another_call_is_refused() {
    let mut log = Log::new();
    let owner = log.session();
    granted(&log.apply(seq_acquire(owner, "a", 9, 1, 1, None)));
    let s = log.session();
    let busy = log.apply(seq_acquire(s, "a", 7, 1, 1, None));
    assert!(matches!(busy.reply, Ok(Reply::Busy { .. })), "{busy}");
    let other_lock = log.apply(seq_acquire(s, "b", 7, 1, 1, None));
    assert_eq!(err(&other_lock), "invalid-argument");
    let now_waits = log.apply(seq_acquire(s, "a", 7, 1, 1, Some(1_000)));
    assert_eq!(err(&now_waits), "invalid-argument");
    assert!(log.m.lock("b").is_none());
    // The true duplicate is still answered as the first.
    let again = log.apply(seq_acquire(s, "a", 7, 1, 1, None));
    assert!(matches!(again.reply, Ok(Reply::Busy { .. })), "{again}");
}

#[test]
fn a_duplicate_of_a_busy_try_lock_stays_busy_after_the_lock_is_freed() {
    let mut log = Log::new();
    let (a, b) = (log.session(), log.session());
    let held = granted(&log.acquire(b, "l", 9, None));
    let try_lock = seq_acquire(a, "l", 1, 1, 1, None);
    assert!(matches!(
        log.apply(try_lock.clone()).reply,
        Ok(Reply::Busy { .. })
    ));
    // Kept as a verdict, without the holders and their metadata.
    assert_eq!(
        log.m.once[&a].answers[&1].first,
        Ok(Reply::Busy { holders: vec![] })
    );
    release(&mut log, b, "l", held.token);
    // Not yet acknowledged (the answer may have been lost): the retry
    // gets the first answer, not a grant the caller has given up on.
    let dup = log.apply(try_lock);
    assert!(matches!(dup.reply, Ok(Reply::Busy { .. })), "{dup}");
    assert_eq!(grants(&dup), 0);
    assert!(log.m.lock("l").is_none());
}

#[test]
fn a_duplicate_of_a_queued_acquire_gets_where_it_stands_now() {
    let mut log = Log::new();
    let (a, b) = (log.session(), log.session());
    let held = granted(&log.acquire(b, "l", 9, None));
    let wait = seq_acquire(a, "l", 1, 1, 1, Some(10_000));
    assert!(matches!(
        log.apply(wait.clone()).reply,
        Ok(Reply::Queued { position: 0 })
    ));
    assert!(matches!(
        log.apply(wait.clone()).reply,
        Ok(Reply::Queued { position: 0 })
    ));
    release(&mut log, b, "l", held.token);
    let handed = log.m.lock("l").unwrap().holder(a).unwrap().clone();
    let dup = log.apply(wait.clone());
    assert_eq!(granted(&dup), handed);
    assert_eq!(grants(&dup), 0, "the same grant, not a new one");
    // Released since: the retry says so, and grants nothing.
    release(&mut log, a, "l", handed.token);
    let dup = log.apply(wait);
    assert_eq!(err(&dup), "request-released");
    assert_eq!(grants(&dup), 0);
}

#[test]
fn answers_are_kept_until_acknowledged_and_then_forgotten() {
    let mut log = Log::new();
    let s = log.session();
    for seq in 1..=5u64 {
        log.apply(seq_acquire(
            s,
            &format!("l{seq}"),
            seq as u128,
            seq,
            1,
            None,
        ));
    }
    assert_eq!(log.m.once[&s].answers.len(), 5);
    // Out of order is fine: several requests may be in flight.
    log.apply(seq_acquire(s, "l7", 7, 7, 4, None));
    assert_eq!(
        log.m.once[&s].answers.keys().copied().collect::<Vec<_>>(),
        vec![4, 5, 7]
    );
    assert_eq!(
        err(&log.apply(seq_acquire(s, "l2", 2, 2, 1, None))),
        "request-acknowledged"
    );
    assert_eq!(
        err(&log.apply(seq_acquire(s, "other", 99, 5, 4, None))),
        "invalid-argument",
        "a seq belongs to one request"
    );
    assert_eq!(
        err(&log.apply(seq_acquire(s, "x", 100, 0, 0, None))),
        "invalid-argument"
    );
    // A session's bookkeeping ends with it.
    log.apply(Command::CloseSession { session: s });
    assert!(!log.m.once.contains_key(&s));
}

#[test]
fn unacknowledged_answers_are_bounded() {
    let mut log = Log::new();
    let s = log.session();
    let max = raftlock_proto::limits::MAX_UNACKED_REQUESTS_PER_SESSION as u64;
    for seq in 1..=max {
        // Try-locks on one held name: each answers, none holds a lock.
        let o = log.apply(seq_acquire(s, "l", seq as u128, seq, 1, None));
        assert!(o.reply.is_ok() || err(&o) == "already-held", "{o}");
    }
    let o = log.apply(seq_acquire(s, "m", 0, max + 1, 1, None));
    assert_eq!(err(&o), "too-many-unacknowledged");
    assert!(log.m.lock("m").is_none(), "refused unexecuted");
    // Acknowledging makes room.
    let o = log.apply(seq_acquire(s, "m", 0, max + 1, max, None));
    granted(&o);
}

fn create_once(owner: &str, key: u128) -> Command {
    Command::CreateSessionOnce {
        ttl_ms: 5_000,
        client_name: "t".into(),
        owner: owner.into(),
        key,
    }
}

fn created(o: &Outcome) -> SessionId {
    match o.reply {
        Ok(Reply::SessionCreated { session, .. }) => session,
        _ => panic!("expected a session, got {o}"),
    }
}

#[test]
fn a_retried_creation_finds_the_session_the_first_attempt_made() {
    let mut log = Log::new();
    let s = created(&log.apply(create_once("alice", 42)));
    assert_eq!(created(&log.apply(create_once("alice", 42))), s);
    assert_eq!(log.m.sessions().count(), 1, "no orphan session");
    // Keys are per identity.
    let other = created(&log.apply(create_once("bob", 42)));
    assert_ne!(other, s);
    // Once the session ended, the key is free again.
    log.apply(Command::CloseSession { session: s });
    assert!(log.m.session_keys.len() == 1);
    let again = created(&log.apply(create_once("alice", 42)));
    assert_ne!(again, s);
    assert_eq!(log.m.sessions().count(), 2);
}

#[test]
fn exactly_once_state_survives_a_snapshot_and_version_2_still_reads() {
    let mut log = Log::new();
    let s = created(&log.apply(create_once("", 7)));
    log.apply(seq_acquire(s, "l", 1, 1, 1, None));
    let bytes = log.m.to_snapshot();
    assert_eq!(LeaseMachine::from_snapshot(&bytes).unwrap(), log.m);
    assert_eq!(
        LeaseMachine::from_snapshot(&log.m.to_json_snapshot()).unwrap(),
        log.m
    );

    // What a version 2 build wrote: the first three fields, in order.
    #[derive(serde::Serialize)]
    struct V2<'a> {
        sessions: &'a BTreeMap<SessionId, Session>,
        locks: &'a BTreeMap<String, super::OldLock>,
        owners: &'a BTreeMap<String, u64>,
    }
    let mut v2 = b"\0RLSNAP\0".to_vec();
    v2.extend_from_slice(&2u32.to_le_bytes());
    v2.extend(
        postcard::to_allocvec(&V2 {
            sessions: &log.m.sessions,
            locks: &super::old_locks(&log.m),
            owners: &log.m.owners,
        })
        .unwrap(),
    );
    let read = LeaseMachine::from_snapshot(&v2).unwrap();
    assert_eq!(read.sessions, log.m.sessions);
    assert_eq!(read.locks, log.m.locks);
    assert!(read.once.is_empty() && read.session_keys.is_empty());
}

#[test]
fn a_sessions_origin_lives_as_long_as_the_session_and_version_3_still_reads() {
    let mut log = Log::new();
    let at = |host: &str, pid, key| Command::CreateSessionAt {
        ttl_ms: 10_000,
        client_name: "billing".into(),
        owner: String::new(),
        key,
        origin: Origin {
            host: host.into(),
            pid,
        },
    };
    let s = created(&log.apply(at("web-1", 4242, Some(9))));
    assert_eq!(
        log.m.origin(s),
        Some(&Origin {
            host: "web-1".into(),
            pid: 4242
        })
    );
    // A retry with the key gets the same session, and its first origin.
    assert_eq!(created(&log.apply(at("web-2", 1, Some(9)))), s);
    assert_eq!(log.m.origin(s).map(|o| o.pid), Some(4242));
    let t = created(&log.apply(at("web-3", 7, None)));
    assert_ne!(t, s);
    // An oversized host is refused and creates nothing.
    let before = log.m.clone();
    let long = "h".repeat(raftlock_proto::limits::MAX_CLIENT_NAME_LEN + 1);
    assert!(log.apply(at(&long, 1, None)).reply.is_err());
    assert_eq!(log.m.sessions, before.sessions);
    assert_eq!(log.m.origins, before.origins);

    let bytes = log.m.to_snapshot();
    assert_eq!(LeaseMachine::from_snapshot(&bytes).unwrap(), log.m);

    // What a version 3 build wrote: every field but the origins.
    #[derive(serde::Serialize)]
    struct V3<'a> {
        sessions: &'a BTreeMap<SessionId, Session>,
        locks: &'a BTreeMap<String, super::OldLock>,
        owners: &'a BTreeMap<String, u64>,
        once: &'a BTreeMap<SessionId, super::once::Once>,
        session_keys: &'a BTreeMap<String, SessionId>,
    }
    let mut v3 = b"\0RLSNAP\0".to_vec();
    v3.extend_from_slice(&3u32.to_le_bytes());
    v3.extend(
        postcard::to_allocvec(&V3 {
            sessions: &log.m.sessions,
            locks: &super::old_locks(&log.m),
            owners: &log.m.owners,
            once: &log.m.once,
            session_keys: &log.m.session_keys,
        })
        .unwrap(),
    );
    let read = LeaseMachine::from_snapshot(&v3).unwrap();
    assert_eq!(read.sessions, log.m.sessions);
    assert_eq!(read.session_keys, log.m.session_keys);
    assert!(read.origins.is_empty());

    // Ending a session forgets where it ran.
    log.apply(Command::CloseSession { session: s });
    assert_eq!(log.m.origin(s), None);
    log.apply(Command::ExpireSessions { sessions: vec![t] });
    assert!(log.m.origins.is_empty());
}

/// A million held locks: what each keeps in every replica's memory. A
/// grant's recorded answer is a verdict (a duplicate is answered from the
/// lock table), so its metadata is not kept twice; a lock's only holder
/// takes one slot, not the four a `Vec`'s first push reserves.
#[test]
fn a_held_lock_keeps_its_metadata_once_and_one_holder_slot() {
    let mut log = Log::new();
    let s = log.session();
    let mut acquire = seq_acquire(s, "l", 1, 1, 1, None);
    if let Command::Sequenced { command, .. } = &mut acquire {
        if let Command::Acquire { metadata, .. } = command.as_mut() {
            *metadata = vec![7; 4096];
        }
    }
    let g = granted(&log.apply(acquire.clone()));
    assert_eq!(g.metadata.len(), 4096);
    match &log.m.once[&s].answers[&1].first {
        Ok(Reply::Acquired(recorded)) => {
            assert!(recorded.metadata.is_empty());
            assert_eq!(recorded.token, g.token);
        }
        other => panic!("recorded {other:?}"),
    }
    assert_eq!(log.m.locks["l"].holders.capacity(), 1);
    // The duplicate still gets the grant as it stands, metadata and all.
    let dup = granted(&log.apply(acquire));
    assert_eq!(dup, g);
}
