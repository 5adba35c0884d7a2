//! AcquireAll: a set is granted in one entry or not at all, waits in every
//! queue of its locks, and leaves them all when it is cancelled or its
//! session ends.

use super::*;

fn set(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

impl Log {
    fn acquire_all(
        &mut self,
        session: SessionId,
        names: &[&str],
        req: u128,
        wait: Option<u64>,
    ) -> Outcome {
        self.apply(Command::AcquireAll {
            session,
            names: set(names),
            request_id: RequestId(req),
            wait_ms: wait,
            metadata: vec![],
        })
    }

    fn release_grant(&mut self, g: &Grant) -> Outcome {
        self.apply(Command::Release {
            session: g.session,
            name: g.name.clone(),
            token: g.token,
        })
    }

    fn holder(&self, name: &str) -> Option<SessionId> {
        self.m
            .lock(name)
            .and_then(|l| l.holders.first())
            .map(|g| g.session)
    }
}

fn all_granted(o: &Outcome) -> Vec<Grant> {
    match &o.reply {
        Ok(Reply::AcquiredAll(g)) => g.clone(),
        _ => panic!("expected a set granted, got {o}"),
    }
}

fn set_grants(o: &Outcome, session: SessionId) -> Vec<Grant> {
    o.events
        .iter()
        .filter_map(|e| match e {
            Event::Granted(g) | Event::HandedOver(g) if g.session == session => Some(g.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn free_locks_are_granted_together_with_the_entrys_token() {
    let mut log = Log::new();
    let s = log.session();
    let o = log.acquire_all(s, &["a", "b", "c"], 1, None);
    let grants = all_granted(&o);
    assert_eq!(grants.len(), 3);
    assert!(grants.iter().all(|g| g.token == 2 && g.session == s));
    assert_eq!(
        grants.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    // A retry gets the same grants, not new ones.
    let again = all_granted(&log.acquire_all(s, &["a", "b", "c"], 1, None));
    assert_eq!(again, grants);
}

#[test]
fn a_try_on_a_busy_set_takes_nothing() {
    let mut log = Log::new();
    let (s1, s2) = (log.session(), log.session());
    granted(&log.acquire(s1, "b", 1, None));
    let o = log.acquire_all(s2, &["a", "b"], 2, None);
    assert!(matches!(&o.reply, Ok(Reply::Busy { holders }) if holders[0].session == s1));
    assert_eq!(log.holder("a"), None, "a was taken without b");
}

#[test]
fn a_waiting_set_is_granted_whole_when_its_last_lock_frees() {
    let mut log = Log::new();
    let (s1, s2, s3) = (log.session(), log.session(), log.session());
    let a = granted(&log.acquire(s1, "a", 1, None));
    let b = granted(&log.acquire(s2, "b", 1, None));
    assert!(matches!(
        log.acquire_all(s3, &["a", "b"], 7, Some(10_000)).reply,
        Ok(Reply::Queued { .. })
    ));
    let o = log.release_grant(&a);
    assert!(set_grants(&o, s3).is_empty(), "granted a without b");
    assert_eq!(log.holder("a"), None);
    let o = log.release_grant(&b);
    let grants = set_grants(&o, s3);
    assert_eq!(grants.len(), 2);
    assert_eq!(grants[0].token, grants[1].token);
    assert_eq!(log.holder("a"), Some(s3));
    assert_eq!(log.holder("b"), Some(s3));
}

#[test]
fn a_set_at_the_front_keeps_its_place_against_later_single_acquires() {
    let mut log = Log::new();
    let (s1, s2, s3) = (log.session(), log.session(), log.session());
    granted(&log.acquire(s1, "b", 1, None));
    log.acquire_all(s2, &["a", "b"], 2, Some(10_000));
    // "a" is free, but the set queued first: a try waits its turn.
    assert!(matches!(
        log.acquire(s3, "a", 3, None).reply,
        Ok(Reply::Busy { .. })
    ));
}

#[test]
fn crossing_sets_never_deadlock() {
    let mut log = Log::new();
    let (s1, s2, s3, s4) = (log.session(), log.session(), log.session(), log.session());
    let a = granted(&log.acquire(s1, "a", 1, None));
    let c = granted(&log.acquire(s1, "c", 2, None));
    // Each set wants a lock the other's set holds next: named in any order,
    // they queue in log order on every lock.
    log.acquire_all(s2, &["a", "b"], 3, Some(10_000));
    log.acquire_all(s3, &["b", "c"], 4, Some(10_000));
    log.acquire_all(s4, &["a", "c"], 5, Some(10_000));
    log.release_grant(&c);
    assert_eq!(log.holder("c"), None, "s3 waits behind s2 on b");
    let o = log.release_grant(&a);
    assert_eq!(set_grants(&o, s2).len(), 2);
    let s2_grants = set_grants(&o, s2);
    for g in &s2_grants {
        log.release_grant(g);
    }
    assert_eq!(log.holder("b"), Some(s3));
    assert_eq!(log.holder("c"), Some(s3));
    assert_eq!(log.holder("a"), None, "s4 needs c too");
}

#[test]
fn cancelling_one_lock_of_a_set_cancels_the_set() {
    let mut log = Log::new();
    let (s1, s2, s3) = (log.session(), log.session(), log.session());
    granted(&log.acquire(s1, "b", 1, None));
    log.acquire_all(s2, &["a", "b"], 2, Some(10_000));
    log.acquire(s3, "a", 3, Some(10_000));
    let o = log.apply(Command::CancelWait {
        session: s2,
        name: "b".into(),
        request_id: RequestId(2),
    });
    assert!(matches!(o.reply, Ok(Reply::WaitCancelled)));
    // Out of a's queue too, so the waiter behind it on a is granted.
    assert_eq!(log.holder("a"), Some(s3));
    let s = log.m.session(s2).unwrap();
    assert!(s.waiting.is_empty() && s.held.is_empty());
    assert!(log.m.sets.is_empty());
}

#[test]
fn a_cancel_that_lost_the_race_gets_every_grant_of_the_set() {
    let mut log = Log::new();
    let (s1, s2) = (log.session(), log.session());
    let b = granted(&log.acquire(s1, "b", 1, None));
    log.acquire_all(s2, &["a", "b"], 2, Some(10_000));
    log.release_grant(&b);
    let o = log.apply(Command::CancelWait {
        session: s2,
        name: "a".into(),
        request_id: RequestId(2),
    });
    assert_eq!(all_granted(&o).len(), 2);
}

#[test]
fn a_session_that_ends_leaves_every_queue_of_its_sets() {
    let mut log = Log::new();
    let (s1, s2, s3) = (log.session(), log.session(), log.session());
    granted(&log.acquire(s1, "b", 1, None));
    log.acquire_all(s2, &["a", "b"], 2, Some(10_000));
    log.acquire(s3, "a", 3, Some(10_000));
    log.apply(Command::CloseSession { session: s2 });
    assert_eq!(log.holder("a"), Some(s3));
    assert!(log.m.sets.is_empty());
}

#[test]
fn a_set_waits_out_a_lock_delay_on_any_of_its_locks() {
    let mut log = Log::new();
    let (s1, s2) = (log.session(), log.session());
    log.apply(Command::WithTerms {
        terms: Terms {
            count: 1,
            max_hold_ms: 0,
            lock_delay_ms: 2_000,
        },
        command: Box::new(Command::Acquire {
            session: s1,
            name: "b".into(),
            request_id: RequestId(1),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms: None,
            metadata: vec![],
        }),
    });
    log.acquire_all(s2, &["a", "b"], 2, Some(10_000));
    let expired = log.apply(Command::ExpireSessions { sessions: vec![s1] });
    assert!(set_grants(&expired, s2).is_empty(), "b is in lock-delay");
    let started = log.next - 1;
    let o = log.apply(Command::EndLockDelayAt {
        name: "b".into(),
        started,
    });
    assert_eq!(set_grants(&o, s2).len(), 2);
}

#[test]
fn malformed_sets_are_refused() {
    let mut log = Log::new();
    let s = log.session();
    for names in [&["a"][..], &["b", "a"], &["a", "a"], &["a", ""]] {
        let o = log.acquire_all(s, names, 1, None);
        assert!(o.reply.is_err(), "{names:?} accepted: {o}");
    }
    let many: Vec<String> = (0..=raftlock_proto::limits::MAX_LOCKS_PER_SET)
        .map(|i| format!("l{i:03}"))
        .collect();
    let o = log.apply(Command::AcquireAll {
        session: s,
        names: many,
        request_id: RequestId(2),
        wait_ms: None,
        metadata: vec![],
    });
    assert!(o.reply.is_err());
}

#[test]
fn a_set_already_partly_held_by_the_session_is_refused() {
    let mut log = Log::new();
    let s = log.session();
    granted(&log.acquire(s, "a", 1, None));
    assert_eq!(
        err(&log.acquire_all(s, &["a", "b"], 2, None)),
        "already-held"
    );
    assert_eq!(log.holder("b"), None);
}

#[test]
fn a_waiting_set_survives_a_snapshot() {
    let mut log = Log::new();
    let (s1, s2) = (log.session(), log.session());
    let b = granted(&log.acquire(s1, "b", 1, None));
    log.acquire_all(s2, &["a", "b"], 2, Some(10_000));
    let restored = LeaseMachine::from_snapshot(&log.m.to_snapshot()).unwrap();
    assert_eq!(restored, log.m);
    let json = LeaseMachine::from_snapshot(&log.m.to_json_snapshot()).unwrap();
    assert_eq!(json, log.m);
    log.m = restored;
    let o = log.release_grant(&b);
    assert_eq!(set_grants(&o, s2).len(), 2);
}

/// Version 7 adds the waiting sets after every field of version 6: a
/// version 6 snapshot is a version 7 one without that last (empty) map.
#[test]
fn a_version_6_snapshot_still_reads() {
    let mut log = Log::new();
    let (s1, s2) = (log.session(), log.session());
    granted(&log.acquire(s1, "a", 1, None));
    log.acquire(s2, "a", 2, Some(10_000));
    let mut bytes = log.m.to_snapshot();
    assert_eq!(&bytes[8..12], &7u32.to_le_bytes());
    assert_eq!(bytes.pop(), Some(0), "an empty map of sets is one byte");
    bytes[8..12].copy_from_slice(&6u32.to_le_bytes());
    assert_eq!(LeaseMachine::from_snapshot(&bytes).unwrap(), log.m);
}
