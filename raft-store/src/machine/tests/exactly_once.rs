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

/// A sequenced acquire from a client that lists its calls in flight.
fn acked_acquire(
    session: SessionId,
    name: &str,
    req: u128,
    seq: u64,
    acked_below: u64,
    in_flight: &[u64],
) -> Command {
    let Command::Sequenced { command, .. } =
        seq_acquire(session, name, req, seq, acked_below, None)
    else {
        unreachable!()
    };
    Command::SequencedAcks {
        seq,
        acked_below,
        in_flight: in_flight.to_vec(),
        command,
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
    o.events.iter().filter(|e| e.grant().is_some()).count()
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
    // Kept with who held it and the token, without the lock's name (the
    // call's own) and the holder's metadata.
    let kept = Grant {
        name: String::new(),
        metadata: Vec::new(),
        ..held.clone()
    };
    assert_eq!(
        log.m.once[&a].answers[&1].first,
        Ok(Reply::Busy {
            holders: vec![kept]
        })
    );
    release(&mut log, b, "l", held.token);
    // Not yet acknowledged (the answer may have been lost): the retry
    // gets the first answer, not a grant the caller has given up on, and
    // that answer names the holder of then, not today's nobody.
    let dup = log.apply(try_lock);
    let named: Vec<_> = match &dup.reply {
        Ok(Reply::Busy { holders }) => holders
            .iter()
            .map(|h| (h.session, h.token, h.name.as_str()))
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(named, vec![(b, held.token, "l")]);
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

    // What a version 3 build wrote: every field but the origins, and each
    // session's bookkeeping without the runs acknowledged one by one.
    #[derive(serde::Serialize)]
    struct OnceV3 {
        key: Option<u128>,
        acked_below: u64,
        answers: BTreeMap<u64, ()>,
    }
    #[derive(serde::Serialize)]
    struct V3<'a> {
        sessions: &'a BTreeMap<SessionId, Session>,
        locks: &'a BTreeMap<String, super::OldLock>,
        owners: &'a BTreeMap<String, u64>,
        once: &'a BTreeMap<SessionId, OnceV3>,
        session_keys: &'a BTreeMap<String, SessionId>,
    }
    assert!(log.m.once.values().all(|o| o.answers.is_empty()));
    let once_v3: BTreeMap<SessionId, OnceV3> = log
        .m
        .once
        .iter()
        .map(|(s, o)| {
            let v3 = OnceV3 {
                key: o.key,
                acked_below: o.acked_below,
                answers: BTreeMap::new(),
            };
            (*s, v3)
        })
        .collect();
    let mut v3 = b"\0RLSNAP\0".to_vec();
    v3.extend_from_slice(&3u32.to_le_bytes());
    v3.extend(
        postcard::to_allocvec(&V3 {
            sessions: &log.m.sessions,
            locks: &super::old_locks(&log.m),
            owners: &log.m.owners,
            once: &once_v3,
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

/// One wait pinned the acknowledged mark, so every later answer was kept
/// until the session was refused TOO_MANY_UNACKNOWLEDGED: about seven
/// minutes of a campaign beside ten short locks a second. Acknowledged
/// call by call, the session keeps only the wait's answer.
#[test]
fn one_long_wait_does_not_stall_a_session_that_acknowledges_call_by_call() {
    let mut log = Log::new();
    let (holder, s) = (log.session(), log.session());
    granted(&log.apply(seq_acquire(holder, "campaign", 1, 1, 1, None)));
    granted(&log.apply(seq_acquire(holder, "short", 2, 2, 2, None)));
    // s waits for the campaign lock: seq 1 stays in flight all along.
    let o = log.apply(seq_acquire(s, "campaign", 1, 1, 1, Some(3_600_000)));
    assert!(matches!(o.reply, Ok(Reply::Queued { .. })), "{o}");
    let n = raftlock_proto::limits::MAX_UNACKED_REQUESTS_PER_SESSION as u64 + 1_000;

    // Acknowledging by the mark alone: refused once the window fills.
    let mut by_mark = log.clone();
    let refused = (2..=n).find(|&seq| {
        let o = by_mark.apply(seq_acquire(s, "short", seq as u128, seq, 1, None));
        matches!(o.reply, Err(LeaseError::TooManyUnacknowledged { .. }))
    });
    assert_eq!(
        refused,
        Some(raftlock_proto::limits::MAX_UNACKED_REQUESTS_PER_SESSION as u64 + 1)
    );

    // Listing what is in flight: never refused, one answer kept besides
    // the newest.
    for seq in 2..=n {
        let o = log.apply(acked_acquire(s, "short", seq as u128, seq, 1, &[1, seq]));
        assert!(matches!(o.reply, Ok(Reply::Busy { .. })), "seq {seq}: {o}");
    }
    let (mark, kept) = log.m.exactly_once(s);
    assert_eq!((mark, kept), (1, vec![1, n]));
    assert_eq!(log.m.once[&s].acked.len(), 1, "one run: 2 up to the newest");
    // The wait still answers its retries, and is granted when freed.
    let Command::Sequenced { command, .. } = seq_acquire(s, "campaign", 1, 1, 1, Some(3_600_000))
    else {
        unreachable!()
    };
    let o = log.apply(Command::SequencedAcks {
        seq: 1,
        acked_below: 1,
        in_flight: vec![1],
        command,
    });
    assert!(matches!(o.reply, Ok(Reply::Queued { .. })), "{o}");
}

/// A number acknowledged one by one is refused like one below the mark,
/// however late its duplicate comes, and never runs again.
#[test]
fn a_late_duplicate_of_a_call_acknowledged_one_by_one_is_refused() {
    let mut log = Log::new();
    let (holder, s) = (log.session(), log.session());
    granted(&log.apply(seq_acquire(holder, "busy", 1, 1, 1, None)));
    log.apply(seq_acquire(s, "busy", 1, 1, 1, Some(60_000)));
    // seq 2 takes a free lock; its answer comes back; seq 3 acknowledges it.
    let late = acked_acquire(s, "free", 2, 2, 1, &[1, 2]);
    let token = granted(&log.apply(late.clone())).token;
    release(&mut log, s, "free", token);
    let o = log.apply(acked_acquire(s, "other", 3, 3, 1, &[1, 3]));
    assert!(o.reply.is_ok(), "{o}");
    assert_eq!(log.m.exactly_once(s), (1, vec![1, 3]));
    // seq 2's first packet, delayed all this time: refused, not granted.
    let o = log.apply(late);
    assert!(
        matches!(o.reply, Err(LeaseError::RequestAcknowledged { seq: 2, .. })),
        "{o}"
    );
    assert_eq!(grants(&o), 0);
    // The wait ends; the mark then moves past everything answered.
    log.apply(Command::CancelWait {
        session: s,
        name: "busy".into(),
        request_id: RequestId(1),
    });
    log.apply(acked_acquire(s, "other2", 4, 4, 4, &[4]));
    assert_eq!(log.m.exactly_once(s), (4, vec![4]));
    assert!(log.m.once[&s].acked.is_empty());
    // A list longer than a client may send is refused.
    let many: Vec<u64> = (5..5 + raftlock_proto::limits::MAX_IN_FLIGHT_LISTED as u64 + 1).collect();
    let o = log.apply(acked_acquire(s, "other3", 5, 5, 4, &many));
    assert!(
        matches!(o.reply, Err(LeaseError::InvalidArgument(_))),
        "{o}"
    );
}

/// Version 6 keeps the runs acknowledged one by one and each delay's
/// start; version 5 snapshots read with none and delays started at 0.
#[test]
fn version_6_keeps_acknowledged_runs_and_version_5_still_reads() {
    let mut log = Log::new();
    let (holder, s) = (log.session(), log.session());
    granted(&log.apply(seq_acquire(holder, "busy", 1, 1, 1, None)));
    log.apply(seq_acquire(s, "busy", 1, 1, 1, Some(60_000)));
    log.apply(acked_acquire(s, "busy", 2, 2, 1, &[1, 2]));
    log.apply(acked_acquire(s, "busy", 3, 3, 1, &[1, 3]));
    log.apply(acked_acquire(s, "busy", 5, 5, 1, &[1, 4, 5]));
    assert_eq!(
        log.m.once[&s].acked,
        BTreeMap::from([(2, 4)]),
        "2 and 3 acknowledged, 4 in flight"
    );
    let bytes = log.m.to_snapshot();
    assert_eq!(&bytes[8..12], &7u32.to_le_bytes());
    assert_eq!(LeaseMachine::from_snapshot(&bytes).unwrap(), log.m);

    // What a version 5 build wrote: the same fields, without the runs,
    // and each delay's length alone.
    #[derive(serde::Serialize)]
    struct RecordedV5<'a> {
        request_id: RequestId,
        first: &'a Result<Reply, LeaseError>,
        call: &'a Option<(String, bool)>,
    }
    #[derive(serde::Serialize)]
    struct OnceV5<'a> {
        key: Option<u128>,
        acked_below: u64,
        answers: BTreeMap<u64, RecordedV5<'a>>,
    }
    #[derive(serde::Serialize)]
    struct V5<'a> {
        sessions: &'a BTreeMap<SessionId, Session>,
        locks: &'a BTreeMap<String, LockState>,
        owners: &'a BTreeMap<String, u64>,
        once: BTreeMap<SessionId, OnceV5<'a>>,
        session_keys: &'a BTreeMap<String, SessionId>,
        origins: &'a BTreeMap<SessionId, Origin>,
        delayed: BTreeMap<String, u64>,
        sizes: &'a BTreeMap<String, u32>,
        rate_clock_ns: u64,
        buckets: &'a BTreeMap<String, Bucket>,
    }
    let m = &log.m;
    let v5 = V5 {
        sessions: &m.sessions,
        locks: &m.locks,
        owners: &m.owners,
        once: m
            .once
            .iter()
            .map(|(id, o)| {
                let once = OnceV5 {
                    key: o.key,
                    acked_below: o.acked_below,
                    answers: o
                        .answers
                        .iter()
                        .map(|(seq, r)| {
                            let r = RecordedV5 {
                                request_id: r.request_id,
                                first: &r.first,
                                call: &r.call,
                            };
                            (*seq, r)
                        })
                        .collect(),
                };
                (*id, once)
            })
            .collect(),
        session_keys: &m.session_keys,
        origins: &m.origins,
        delayed: BTreeMap::from([("x".to_string(), 5_000)]),
        sizes: &m.sizes,
        rate_clock_ns: m.rate_clock_ns,
        buckets: &m.buckets,
    };
    let mut bytes = b"\0RLSNAP\0".to_vec();
    bytes.extend_from_slice(&5u32.to_le_bytes());
    bytes.extend(postcard::to_allocvec(&v5).unwrap());
    let read = LeaseMachine::from_snapshot(&bytes).unwrap();
    assert_eq!(read.sessions, log.m.sessions);
    assert_eq!(read.once[&s].answers, log.m.once[&s].answers);
    assert!(read.once[&s].acked.is_empty());
    assert_eq!(
        read.lock_delays().collect::<Vec<_>>(),
        vec![("x", 5_000, 0)]
    );
}

/// A numbered acquisition's end is kept with its answer, and goes when
/// the client acknowledges the answer: a session taking a short lock at a
/// time for weeks keeps nothing more than its newest call. It went to the
/// session's history of 256 ends, which every long-lived session filled
/// (the soak's memory grew for its first 15 minutes, and its snapshots
/// sixfold).
#[test]
fn numbered_acquisitions_leave_no_history_once_acknowledged() {
    let mut log = Log::new();
    let s = log.session();
    for seq in 1..=1_000u64 {
        let g = granted(&log.apply(acked_acquire(s, "l", seq as u128, seq, seq, &[seq])));
        release(&mut log, s, "l", g.token);
    }
    assert!(log.m.session(s).unwrap().finished.is_empty());
    assert_eq!(log.m.exactly_once(s), (1_000, vec![1_000]));
    assert!(log.m.once[&s].standing.is_empty());

    // Until acknowledged, a duplicate learns how its acquisition ended:
    // released with its token, or its wait cancelled.
    let late = acked_acquire(s, "l", 1_000, 1_000, 1_000, &[1_000]);
    let o = log.apply(late);
    assert!(
        matches!(o.reply, Err(LeaseError::RequestReleased { .. })),
        "{o}"
    );
    let holder = log.session();
    let g = granted(&log.apply(seq_acquire(holder, "busy", 1, 1, 1, None)));
    let wait = seq_acquire(s, "busy", 2_000, 1_001, 1_001, Some(60_000));
    assert!(matches!(
        log.apply(wait.clone()).reply,
        Ok(Reply::Queued { .. })
    ));
    log.apply(Command::CancelWait {
        session: s,
        name: "busy".into(),
        request_id: RequestId(2_000),
    });
    release(&mut log, holder, "busy", g.token);
    let o = log.apply(wait);
    assert!(
        matches!(o.reply, Err(LeaseError::WaitCancelled { .. })),
        "{o}"
    );
    assert_eq!(grants(&o), 0);
    // It survives a snapshot.
    let bytes = log.m.to_snapshot();
    assert_eq!(LeaseMachine::from_snapshot(&bytes).unwrap(), log.m);

    // Unnumbered acquisitions still go to the history.
    let o = log.apply(Command::Acquire {
        session: s,
        name: "plain".into(),
        request_id: RequestId(9_999),
        mode: Mode::Exclusive,
        permits: None,
        wait_ms: None,
        metadata: vec![],
    });
    release(&mut log, s, "plain", granted(&o).token);
    assert_eq!(log.m.session(s).unwrap().finished.len(), 1);
}

#[test]
fn a_creation_past_its_owners_session_limit_is_refused_but_its_retry_is_not() {
    let mut log = Log::new();
    let limited = |owner: &str, key: Option<u128>, max| Command::WithinSessionLimit {
        max_sessions: max,
        command: Box::new(Command::CreateSessionAt {
            ttl_ms: 10_000,
            client_name: "billing".into(),
            owner: owner.into(),
            key,
            origin: Origin::default(),
        }),
    };
    let first = created(&log.apply(limited("a", Some(1), 2)));
    created(&log.apply(limited("a", Some(2), 2)));
    let before = log.m.clone();
    let refused = log.apply(limited("a", Some(3), 2));
    assert_eq!(
        refused.reply,
        Err(LeaseError::TooManySessions {
            owner: "a".into(),
            max: 2
        })
    );
    assert_eq!(log.m, before, "a refused creation changes nothing");
    // A retry of a creation that succeeded adds no session: it passes.
    assert_eq!(created(&log.apply(limited("a", Some(1), 2))), first);
    // Another owner has its own count; the empty owner counts every session.
    created(&log.apply(limited("b", None, 2)));
    assert!(log.apply(limited("", None, 3)).reply.is_err());
    created(&log.apply(limited("", None, 4)));
    // Only a creation takes a session limit.
    let wrapped = log.apply(Command::WithinSessionLimit {
        max_sessions: 9,
        command: Box::new(Command::CloseSession { session: first }),
    });
    assert!(matches!(wrapped.reply, Err(LeaseError::InvalidArgument(_))));
}
