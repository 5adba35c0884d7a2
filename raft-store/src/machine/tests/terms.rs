//! Terms beyond a plain hold (several permits, hold cap, lock-delay),
//! semaphore resizes, and the snapshot version that added them.

use super::*;

fn termed(session: SessionId, name: &str, req: u128, mode: Mode, terms: Terms) -> Command {
    Command::WithTerms {
        terms,
        command: Box::new(Command::Acquire {
            session,
            name: name.into(),
            request_id: RequestId(req),
            mode,
            permits: Some(5),
            wait_ms: Some(1_000),
            metadata: vec![],
        }),
    }
}

fn permits(count: u32) -> Terms {
    Terms {
        count,
        ..Terms::default()
    }
}

fn delay(ms: u64) -> Terms {
    Terms {
        lock_delay_ms: ms,
        ..Terms::default()
    }
}

fn holders(log: &Log, name: &str) -> Vec<SessionId> {
    log.m
        .describe(name)
        .holders
        .iter()
        .map(|h| h.session)
        .collect()
}

fn waiters(log: &Log, name: &str) -> Vec<SessionId> {
    log.m
        .describe(name)
        .waiters
        .iter()
        .map(|w| w.session)
        .collect()
}

#[test]
fn holds_take_the_permits_they_ask_for_in_fifo_order() {
    let mut log = Log::new();
    let (a, b, c) = (log.session(), log.session(), log.session());
    let ga = granted(&log.apply(termed(a, "s", 1, Mode::Shared, permits(3))));
    assert_eq!(ga.terms.count, 3);
    // 3 + 3 > 5: b waits, and c (2 would fit) queues behind it.
    assert!(matches!(
        log.apply(termed(b, "s", 2, Mode::Shared, permits(3))).reply,
        Ok(Reply::Queued { position: 0 })
    ));
    assert!(matches!(
        log.apply(termed(c, "s", 3, Mode::Shared, permits(2))).reply,
        Ok(Reply::Queued { position: 1 })
    ));
    let o = log.apply(Command::Release {
        session: a,
        name: "s".into(),
        token: ga.token,
    });
    let Ok(Reply::Released { granted }) = o.reply else {
        panic!("{o}")
    };
    assert_eq!(granted.len(), 2, "3 + 2 permits fit in 5");
    assert_eq!(holders(&log, "s"), [b, c]);
}

#[test]
fn asking_for_more_permits_than_exist_or_several_exclusive_ones_is_refused() {
    let mut log = Log::new();
    let a = log.session();
    let before = log.m.clone();
    assert_eq!(
        err(&log.apply(termed(a, "s", 1, Mode::Shared, permits(6)))),
        "permits-exceeded"
    );
    assert_eq!(
        err(&log.apply(termed(a, "x", 1, Mode::Exclusive, permits(2)))),
        "invalid-argument"
    );
    assert_eq!(
        err(&log.apply(termed(a, "x", 1, Mode::Shared, delay(1_000)))),
        "invalid-argument"
    );
    let long_hold = Terms {
        max_hold_ms: raftlock_proto::limits::MAX_HOLD_MS + 1,
        ..Terms::default()
    };
    assert_eq!(
        err(&log.apply(termed(a, "x", 1, Mode::Exclusive, long_hold))),
        "invalid-argument"
    );
    assert_eq!(log.m, before, "refusals change nothing");
}

#[test]
fn a_resize_wins_over_stated_sizes_grants_when_it_grows_and_takes_nothing_when_it_shrinks() {
    let mut log = Log::new();
    let (a, b, c) = (log.session(), log.session(), log.session());
    granted(&log.apply(termed(a, "s", 1, Mode::Shared, permits(3))));
    granted(&log.apply(termed(b, "s", 2, Mode::Shared, permits(2))));
    log.apply(termed(c, "s", 3, Mode::Shared, permits(2)));
    assert_eq!(waiters(&log, "s"), [c]);
    let o = log.apply(Command::Resize {
        name: "s".into(),
        permits: 7,
    });
    let Ok(Reply::Resized { granted: let_in }) = o.reply else {
        panic!("{o}")
    };
    assert_eq!(let_in.len(), 1);
    assert_eq!(log.m.describe("s").permits, Some(7));
    // Shrinking keeps every holder and grants nobody until they fit.
    log.apply(Command::Resize {
        name: "s".into(),
        permits: 2,
    });
    assert_eq!(holders(&log, "s"), [a, b, c]);
    let d = log.session();
    // The stated size (5) differs from the resized one: accepted, queued.
    assert!(matches!(
        log.apply(termed(d, "s", 4, Mode::Shared, permits(1))).reply,
        Ok(Reply::Queued { .. })
    ));
    // The size outlives the holders.
    for s in [a, b, c, d] {
        log.apply(Command::CloseSession { session: s });
    }
    assert_eq!(log.m.describe("s").permits, Some(2));
    let e = log.session();
    assert_eq!(
        err(&log.apply(termed(e, "s", 5, Mode::Shared, permits(3)))),
        "permits-exceeded"
    );
    // Resize 0 forgets it: the stated size counts again.
    log.apply(Command::Resize {
        name: "s".into(),
        permits: 0,
    });
    assert_eq!(
        granted(&log.apply(termed(e, "s", 5, Mode::Shared, permits(3))))
            .terms
            .count,
        3
    );
}

#[test]
fn an_expired_holders_lock_delay_holds_everyone_back_until_the_leader_ends_it() {
    let mut log = Log::new();
    let (a, b, c) = (log.session(), log.session(), log.session());
    granted(&log.apply(termed(a, "x", 1, Mode::Exclusive, delay(5_000))));
    log.apply(log_acquire(b, "x", 2));
    let o = log.apply(Command::ExpireSessions { sessions: vec![a] });
    assert!(o.events.contains(&Event::LockDelayed {
        name: "x".into(),
        delay_ms: 5_000
    }));
    assert!(!o.events.iter().any(|e| e.grant().is_some()));
    assert_eq!(log.m.describe("x").lock_delay_ms, Some(5_000));
    assert_eq!(waiters(&log, "x"), [b]);
    // A try-lock finds it busy, with no holder to name.
    let o = log.acquire(c, "x", 3, None);
    assert!(
        matches!(&o.reply, Ok(Reply::Busy { holders }) if holders.is_empty()),
        "{o}"
    );
    let o = log.apply(Command::EndLockDelay { name: "x".into() });
    let Ok(Reply::LockDelayEnded { granted }) = o.reply else {
        panic!("{o}")
    };
    assert_eq!(granted.len(), 1);
    assert_eq!(holders(&log, "x"), [b]);
    assert_eq!(log.m.lock_delay("x"), None);
}

/// Two leaders (or one retrying an ambiguous proposal) may both end the
/// same delay; the second end used to apply after a newer delay had
/// started, and end that one early. An end names the delay it ends now.
#[test]
fn a_late_end_of_an_earlier_lock_delay_leaves_a_newer_one_running() {
    let mut log = Log::new();
    let (a, b) = (log.session(), log.session());
    granted(&log.apply(termed(a, "x", 1, Mode::Exclusive, delay(5_000))));
    log.apply(termed(b, "x", 2, Mode::Exclusive, delay(3_000)));
    log.apply(Command::ExpireSessions { sessions: vec![a] });
    let (_, _, first) = log.m.lock_delays().next().expect("a's delay runs");
    let o = log.apply(Command::EndLockDelayAt {
        name: "x".into(),
        started: first,
    });
    assert!(
        matches!(&o.reply, Ok(Reply::LockDelayEnded { granted }) if granted.len() == 1),
        "{o}"
    );
    // b held it and lost it: a second delay.
    log.apply(Command::ExpireSessions { sessions: vec![b] });
    let (_, ms, second) = log.m.lock_delays().next().expect("b's delay runs");
    assert_eq!(ms, 3_000);
    assert_ne!(second, first);
    // The other end of the first delay arrives late: nothing ends.
    let mut stale = log.m.clone();
    let o = log.apply(Command::EndLockDelayAt {
        name: "x".into(),
        started: first,
    });
    assert!(
        matches!(&o.reply, Ok(Reply::LockDelayEnded { granted }) if granted.is_empty()),
        "{o}"
    );
    assert_eq!(log.m.lock_delay("x"), Some(3_000));
    // What the unnamed end, all a leader proposed before, did instead (it
    // is still applied as written, for entries already in logs).
    stale.apply(&Command::EndLockDelay { name: "x".into() }, 1_000, 1_000);
    assert_eq!(
        stale.lock_delay("x"),
        None,
        "the unnamed end ends whatever runs"
    );
    // Its own end ends it.
    log.apply(Command::EndLockDelayAt {
        name: "x".into(),
        started: second,
    });
    assert_eq!(log.m.lock_delay("x"), None);
}

#[test]
fn a_clean_release_or_close_starts_no_lock_delay_and_a_force_release_does() {
    let mut log = Log::new();
    let (a, b) = (log.session(), log.session());
    let g = granted(&log.apply(termed(a, "x", 1, Mode::Exclusive, delay(5_000))));
    log.apply(Command::Release {
        session: a,
        name: "x".into(),
        token: g.token,
    });
    granted(&log.apply(termed(a, "x", 2, Mode::Exclusive, delay(5_000))));
    log.apply(Command::CloseSession { session: a });
    assert_eq!(log.m.lock_delay("x"), None);
    granted(&log.apply(termed(b, "x", 3, Mode::Exclusive, delay(5_000))));
    log.apply(Command::ForceRelease { name: "x".into() });
    assert_eq!(log.m.lock_delay("x"), Some(5_000));
    // With nobody waiting the delay still holds the lock back.
    let c = log.session();
    assert!(matches!(
        log.acquire(c, "x", 4, None).reply,
        Ok(Reply::Busy { .. })
    ));
}

#[test]
fn a_hold_cap_ends_only_the_hold_it_was_set_for() {
    let mut log = Log::new();
    let (a, b) = (log.session(), log.session());
    let capped = Terms {
        max_hold_ms: 2_000,
        lock_delay_ms: 1_000,
        ..Terms::default()
    };
    let g = granted(&log.apply(termed(a, "x", 1, Mode::Exclusive, capped)));
    log.apply(log_acquire(b, "x", 2));
    let uncapped = granted(&log.apply(termed(b, "y", 3, Mode::Exclusive, delay(1_000))));
    let before = log.m.clone();
    let o = log.apply(Command::EndHold {
        name: "y".into(),
        session: b,
        token: uncapped.token,
    });
    assert!(
        matches!(o.reply, Ok(Reply::HoldEnded { released: None, .. })),
        "{o}"
    );
    let stale = log.apply(Command::EndHold {
        name: "x".into(),
        session: a,
        token: g.token + 1,
    });
    assert!(matches!(
        stale.reply,
        Ok(Reply::HoldEnded { released: None, .. })
    ));
    assert_eq!(log.m, before, "another hold's end changes nothing");
    let o = log.apply(Command::EndHold {
        name: "x".into(),
        session: a,
        token: g.token,
    });
    assert!(
        matches!(
            o.reply,
            Ok(Reply::HoldEnded {
                released: Some(_),
                ..
            })
        ),
        "{o}"
    );
    // The holder did not let go: its lock-delay holds b back.
    assert_eq!(holders(&log, "x"), Vec::<SessionId>::new());
    assert_eq!(log.m.lock_delay("x"), Some(1_000));
    // A retry of the ended acquisition learns it was released.
    assert_eq!(
        err(&log.apply(termed(a, "x", 1, Mode::Exclusive, capped))),
        "request-released"
    );
    log.apply(Command::EndLockDelay { name: "x".into() });
    assert_eq!(holders(&log, "x"), [b]);
}

#[test]
fn a_sequenced_acquire_keeps_its_terms_through_a_replay() {
    let mut log = Log::new();
    let a = log.session();
    let cmd = Command::Sequenced {
        seq: 1,
        acked_below: 1,
        command: Box::new(termed(a, "s", 1, Mode::Shared, permits(2))),
    };
    let first = granted(&log.apply(cmd.clone()));
    assert_eq!(first.terms.count, 2);
    assert_eq!(granted(&log.apply(cmd)), first);
}

#[test]
fn version_4_snapshots_read_with_plain_terms() {
    let mut log = Log::new();
    let a = log.session();
    let b = log.session();
    let g = granted(&log.apply(Command::Sequenced {
        seq: 1,
        acked_below: 1,
        command: Box::new(log_acquire(a, "x", 1)),
    }));
    log.apply(log_acquire(b, "x", 2));

    // `Reply` as version 4 had it, up to the variant used here.
    #[derive(serde::Serialize)]
    #[allow(dead_code)]
    enum OldReply {
        SessionCreated { session: SessionId, ttl_ms: u64 },
        SessionClosed { released: Vec<String> },
        SessionsExpired { expired: Vec<SessionId> },
        Acquired(super::OldGrant),
    }
    #[derive(serde::Serialize)]
    struct OldRecorded {
        request_id: RequestId,
        first: Result<OldReply, LeaseError>,
        call: Option<(String, bool)>,
    }
    #[derive(serde::Serialize)]
    struct OldOnce {
        key: Option<u128>,
        acked_below: u64,
        answers: BTreeMap<u64, OldRecorded>,
    }
    #[derive(serde::Serialize)]
    struct V4 {
        sessions: BTreeMap<SessionId, Session>,
        locks: BTreeMap<String, super::OldLock>,
        owners: BTreeMap<String, u64>,
        once: BTreeMap<SessionId, OldOnce>,
        session_keys: BTreeMap<String, SessionId>,
        origins: BTreeMap<SessionId, Origin>,
    }
    let recorded = OldRecorded {
        request_id: RequestId(1),
        first: Ok(OldReply::Acquired(super::old_grant(&g))),
        call: Some(("x".into(), true)),
    };
    let once = OldOnce {
        key: None,
        acked_below: 1,
        answers: BTreeMap::from([(1, recorded)]),
    };
    let mut v4 = b"\0RLSNAP\0".to_vec();
    v4.extend_from_slice(&4u32.to_le_bytes());
    v4.extend(
        postcard::to_allocvec(&V4 {
            sessions: log.m.sessions.clone(),
            locks: super::old_locks(&log.m),
            owners: log.m.owners.clone(),
            once: BTreeMap::from([(a, once)]),
            session_keys: BTreeMap::new(),
            origins: BTreeMap::new(),
        })
        .unwrap(),
    );
    let read = LeaseMachine::from_snapshot(&v4).unwrap();
    assert_eq!(read, log.m);
}

fn log_acquire(session: SessionId, name: &str, req: u128) -> Command {
    Command::Acquire {
        session,
        name: name.into(),
        request_id: RequestId(req),
        mode: Mode::Exclusive,
        permits: None,
        wait_ms: Some(1_000),
        metadata: vec![],
    }
}
