//! AcquireAll under its session's exactly-once sequence, on Acquire's
//! terms: a late duplicate is refused unexecuted, a retry gets the answer
//! of its first attempt (the grants, its place in the queues, the busy
//! holders of then, or how the set ended).

use super::*;

fn seq_set(
    session: SessionId,
    names: &[&str],
    req: u128,
    seq: u64,
    acked_below: u64,
    wait_ms: Option<u64>,
) -> Command {
    Command::SequencedSet {
        seq,
        acked_below,
        in_flight: vec![],
        command: Box::new(Command::AcquireAll {
            session,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            request_id: RequestId(req),
            wait_ms,
            metadata: b"m".to_vec(),
        }),
    }
}

fn set_granted(o: &Outcome) -> Vec<Grant> {
    match &o.reply {
        Ok(Reply::AcquiredAll(g)) => g.clone(),
        _ => panic!("expected a set granted, got {o}"),
    }
}

fn release_all(log: &mut Log, grants: &[Grant]) {
    for g in grants {
        let o = log.apply(Command::Release {
            session: g.session,
            name: g.name.clone(),
            token: g.token,
        });
        assert!(o.reply.is_ok(), "{o}");
    }
}

fn grants(o: &Outcome) -> usize {
    o.events.iter().filter(|e| e.grant().is_some()).count()
}

/// A set's duplicate was recognised only through the session's last 256
/// finished acquisitions: one delayed past that was granted again.
#[test]
fn a_late_duplicate_of_a_released_set_is_never_granted_again() {
    let mut log = Log::new();
    let s = log.session();
    let first = seq_set(s, &["a", "b"], 1, 1, 1, None);
    let g = set_granted(&log.apply(first.clone()));
    release_all(&mut log, &g);
    for seq in 2..=300u64 {
        let g = set_granted(&log.apply(seq_set(s, &["a", "b"], seq as u128, seq, seq, None)));
        release_all(&mut log, &g);
    }
    let late = log.apply(first);
    assert!(
        matches!(
            late.reply,
            Err(LeaseError::RequestAcknowledged { seq: 1, .. })
        ),
        "{late}"
    );
    assert_eq!(grants(&late), 0);
    assert!(log.m.lock("a").is_none_or(|l| l.holders.is_empty()));
}

/// The same late duplicate without sequence numbers: what the numbers fix.
#[test]
fn without_sequence_numbers_a_late_set_duplicate_is_granted_again() {
    let mut log = Log::new();
    let s = log.session();
    let first = seq_set(s, &["a", "b"], 1, 1, 1, None);
    let Command::SequencedSet { command, .. } = first else {
        unreachable!()
    };
    let g = set_granted(&log.apply((*command).clone()));
    release_all(&mut log, &g);
    for n in 2..=300u128 {
        let Command::SequencedSet { command, .. } = seq_set(s, &["a", "b"], n, 1, 1, None) else {
            unreachable!()
        };
        let g = set_granted(&log.apply(*command));
        release_all(&mut log, &g);
    }
    assert_eq!(grants(&log.apply(*command)), 2);
}

#[test]
fn a_retried_set_gets_its_grants_then_how_it_ended() {
    let mut log = Log::new();
    let s = log.session();
    let call = seq_set(s, &["a", "b"], 9, 1, 1, None);
    let first = set_granted(&log.apply(call.clone()));
    let again = log.apply(call.clone());
    assert_eq!(set_granted(&again), first);
    assert_eq!(grants(&again), 0);
    assert_eq!(
        first[0].metadata, b"m",
        "the grants come from the lock table"
    );
    release_all(&mut log, &first);
    let after = log.apply(call);
    assert!(
        matches!(after.reply, Err(LeaseError::RequestReleased { .. })),
        "{after}"
    );
    assert_eq!(grants(&after), 0);
}

/// A try that found the set busy stays busy, naming the holders of then,
/// with their lock's name, after the lock is freed.
#[test]
fn a_busy_set_retried_after_its_lock_is_freed_stays_busy_with_then_s_holders() {
    let mut log = Log::new();
    let (s, t) = (log.session(), log.session());
    let held = granted(&log.apply(Command::Acquire {
        session: t,
        name: "b".into(),
        request_id: RequestId(1),
        mode: Mode::Exclusive,
        permits: None,
        wait_ms: None,
        metadata: vec![],
    }));
    let call = seq_set(s, &["a", "b", "c"], 2, 1, 1, None);
    let first = log.apply(call.clone());
    let Ok(Reply::Busy { holders }) = &first.reply else {
        panic!("{first}")
    };
    assert_eq!(holders.len(), 1);
    assert_eq!(
        (holders[0].name.as_str(), holders[0].token),
        ("b", held.token)
    );
    log.apply(Command::Release {
        session: t,
        name: "b".into(),
        token: held.token,
    });
    let again = log.apply(call);
    let Ok(Reply::Busy { holders: then }) = &again.reply else {
        panic!("{again}")
    };
    assert_eq!(
        then.iter()
            .map(|h| (h.name.as_str(), h.session, h.token))
            .collect::<Vec<_>>(),
        vec![("b", t, held.token)]
    );
    assert_eq!(grants(&again), 0);
}

#[test]
fn a_retried_waiting_set_keeps_its_place_and_a_cancelled_one_stays_cancelled() {
    let mut log = Log::new();
    let (s, t) = (log.session(), log.session());
    let held = granted(&log.apply(Command::Acquire {
        session: t,
        name: "a".into(),
        request_id: RequestId(1),
        mode: Mode::Exclusive,
        permits: None,
        wait_ms: None,
        metadata: vec![],
    }));
    let call = seq_set(s, &["a", "b"], 3, 1, 1, Some(60_000));
    assert!(matches!(
        log.apply(call.clone()).reply,
        Ok(Reply::Queued { position: 0 })
    ));
    assert!(matches!(
        log.apply(call.clone()).reply,
        Ok(Reply::Queued { position: 0 })
    ));
    let cancel = log.apply(Command::CancelWait {
        session: s,
        name: "a".into(),
        request_id: RequestId(3),
    });
    assert!(matches!(cancel.reply, Ok(Reply::WaitCancelled)), "{cancel}");
    log.apply(Command::Release {
        session: t,
        name: "a".into(),
        token: held.token,
    });
    let after = log.apply(call);
    assert!(
        matches!(after.reply, Err(LeaseError::WaitCancelled { .. })),
        "{after}"
    );
    assert_eq!(grants(&after), 0);
    assert!(log.m.lock("a").is_none_or(|l| l.holders.is_empty()));
}

/// A number and id reused for another set, or for a single lock, is the
/// client's mistake, not a replay.
#[test]
fn a_sequence_number_reused_for_another_set_is_refused() {
    let mut log = Log::new();
    let s = log.session();
    set_granted(&log.apply(seq_set(s, &["a", "b"], 4, 1, 1, None)));
    let other = log.apply(seq_set(s, &["a", "c"], 4, 1, 1, None));
    assert!(
        matches!(other.reply, Err(LeaseError::InvalidArgument(_))),
        "{other}"
    );
    let single = log.apply(Command::Sequenced {
        seq: 1,
        acked_below: 1,
        command: Box::new(Command::Acquire {
            session: s,
            name: "a".into(),
            request_id: RequestId(4),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms: None,
            metadata: vec![],
        }),
    });
    assert!(
        matches!(single.reply, Err(LeaseError::InvalidArgument(_))),
        "{single}"
    );
}
