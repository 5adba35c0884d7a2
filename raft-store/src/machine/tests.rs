//! Unit tests, one group per command.

use super::*;

/// Applies commands at consecutive log indexes, as a Raft log would.
#[derive(Clone)]
struct Log {
    m: LeaseMachine,
    next: LogIndex,
}

impl Log {
    fn new() -> Self {
        Log {
            m: LeaseMachine::default(),
            next: 1,
        }
    }

    fn apply(&mut self, cmd: Command) -> Outcome {
        let i = self.next;
        self.next += 1;
        self.m.apply(&cmd, i, i * 10)
    }

    fn session(&mut self) -> SessionId {
        match self.apply(Command::CreateSession {
            ttl_ms: 5_000,
            client_name: "t".into(),
            owner: String::new(),
        }) {
            Outcome {
                reply: Ok(Reply::SessionCreated { session, .. }),
                ..
            } => session,
            o => panic!("unexpected {o}"),
        }
    }

    fn acquire(&mut self, session: SessionId, name: &str, req: u128, wait: Option<u64>) -> Outcome {
        self.acquire_mode(session, name, req, Mode::Exclusive, None, wait)
    }

    fn acquire_mode(
        &mut self,
        session: SessionId,
        name: &str,
        req: u128,
        mode: Mode,
        permits: Option<u32>,
        wait_ms: Option<u64>,
    ) -> Outcome {
        self.apply(Command::Acquire {
            session,
            name: name.into(),
            request_id: RequestId(req),
            mode,
            permits,
            wait_ms,
            metadata: vec![],
        })
    }
}

fn granted(o: &Outcome) -> Grant {
    match &o.reply {
        Ok(Reply::Acquired(g)) => g.clone(),
        _ => panic!("expected a grant, got {o}"),
    }
}

fn err(o: &Outcome) -> &'static str {
    match &o.reply {
        Err(e) => e.code(),
        Ok(_) => panic!("expected an error, got {o}"),
    }
}

mod create_session {
    use super::*;

    #[test]
    fn id_is_the_log_index() {
        let mut log = Log::new();
        log.next = 42;
        assert_eq!(log.session(), 42);
        assert_eq!(log.m.session(42).map(|s| s.ttl_ms), Some(5_000));
    }

    #[test]
    fn ttl_out_of_range_is_refused() {
        let mut log = Log::new();
        for ttl_ms in [0, 999, 600_001, u64::MAX] {
            let o = log.apply(Command::CreateSession {
                ttl_ms,
                client_name: String::new(),
                owner: String::new(),
            });
            assert_eq!(err(&o), "ttl-out-of-range");
        }
        assert_eq!(log.m.sessions().count(), 0);
    }

    #[test]
    fn oversized_client_name_is_refused() {
        let mut log = Log::new();
        let o = log.apply(Command::CreateSession {
            ttl_ms: 5_000,
            client_name: "x".repeat(257),
            owner: String::new(),
        });
        assert_eq!(err(&o), "invalid-argument");
    }
}

mod acquire {
    use super::*;

    #[test]
    fn token_is_the_granting_entrys_index() {
        let mut log = Log::new();
        let s = log.session();
        let g = granted(&log.acquire(s, "a", 1, None));
        assert_eq!(g.token, 2);
        assert_eq!(g.granted_at_ms, 20);
    }

    #[test]
    fn try_lock_on_a_held_lock_is_busy_and_leaves_no_waiter() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        granted(&log.acquire(a, "l", 1, None));
        let o = log.acquire(b, "l", 2, None);
        assert!(matches!(o.reply, Ok(Reply::Busy { ref holders }) if holders.len() == 1));
        assert!(log.m.describe("l").waiters.is_empty());
    }

    #[test]
    fn retry_with_same_request_id_returns_same_grant() {
        let mut log = Log::new();
        let s = log.session();
        let first = granted(&log.acquire(s, "a", 9, None));
        let retry = log.acquire(s, "a", 9, None);
        assert_eq!(granted(&retry), first);
        assert!(retry.events.is_empty(), "a retry changes nothing");
    }

    #[test]
    fn retry_of_queued_request_returns_its_position() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        granted(&log.acquire(a, "l", 1, None));
        assert!(matches!(
            log.acquire(b, "l", 2, Some(1000)).reply,
            Ok(Reply::Queued { position: 0 })
        ));
        assert!(matches!(
            log.acquire(b, "l", 2, Some(1000)).reply,
            Ok(Reply::Queued { position: 0 })
        ));
        assert_eq!(log.m.describe("l").waiters.len(), 1);
    }

    #[test]
    fn second_acquisition_by_holder_is_refused() {
        let mut log = Log::new();
        let s = log.session();
        granted(&log.acquire(s, "a", 1, None));
        assert_eq!(err(&log.acquire(s, "a", 2, None)), "already-held");
    }

    #[test]
    fn retry_after_release_is_refused_not_regranted() {
        let mut log = Log::new();
        let s = log.session();
        let g = granted(&log.acquire(s, "a", 1, None));
        log.apply(Command::Release {
            session: s,
            name: "a".into(),
            token: g.token,
        });
        assert_eq!(err(&log.acquire(s, "a", 1, None)), "request-released");
    }

    #[test]
    fn bad_input_is_refused() {
        let mut log = Log::new();
        let s = log.session();
        assert_eq!(err(&log.acquire(s, "", 1, None)), "invalid-name");
        assert_eq!(
            err(&log.acquire(s, &"n".repeat(513), 1, None)),
            "invalid-name"
        );
        assert_eq!(err(&log.acquire(s, "a\nb", 1, None)), "invalid-name");
        assert_eq!(err(&log.acquire(99, "a", 1, None)), "session-not-found");
        assert_eq!(
            err(&log.acquire_mode(s, "a", 1, Mode::Shared, Some(0), None)),
            "invalid-argument"
        );
        assert_eq!(
            err(&log.acquire(s, "a", 1, Some(u64::MAX))),
            "invalid-argument"
        );
        let o = log.apply(Command::Acquire {
            session: s,
            name: "a".into(),
            request_id: RequestId(1),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms: None,
            metadata: vec![0; 4097],
        });
        assert_eq!(err(&o), "invalid-argument");
        assert_eq!(log.m.counts(), (1, 0, 0));
    }

    #[test]
    fn shared_holders_coexist_up_to_permits() {
        let mut log = Log::new();
        let (a, b, c) = (log.session(), log.session(), log.session());
        granted(&log.acquire_mode(a, "sem", 1, Mode::Shared, Some(2), None));
        granted(&log.acquire_mode(b, "sem", 2, Mode::Shared, Some(2), None));
        let o = log.acquire_mode(c, "sem", 3, Mode::Shared, Some(2), None);
        assert!(matches!(o.reply, Ok(Reply::Busy { .. })));
        assert_eq!(
            err(&log.acquire_mode(c, "sem", 3, Mode::Shared, Some(3), None)),
            "permits-mismatch"
        );
    }

    #[test]
    fn exclusive_waits_for_shared_and_blocks_later_shared() {
        let mut log = Log::new();
        let (a, b, c) = (log.session(), log.session(), log.session());
        granted(&log.acquire_mode(a, "rw", 1, Mode::Shared, None, None));
        assert!(matches!(
            log.acquire(b, "rw", 2, Some(1000)).reply,
            Ok(Reply::Queued { position: 0 })
        ));
        // A reader arriving after a queued writer waits behind it (no barging).
        assert!(matches!(
            log.acquire_mode(c, "rw", 3, Mode::Shared, None, Some(1000))
                .reply,
            Ok(Reply::Queued { position: 1 })
        ));
    }

    #[test]
    fn too_many_waiters_is_refused() {
        let mut log = Log::new();
        let holder = log.session();
        granted(&log.acquire(holder, "hot", 1, None));
        for i in 0..raftlock_proto::limits::MAX_WAITERS_PER_LOCK {
            let s = log.session();
            log.acquire(s, "hot", i as u128, Some(1000));
        }
        let s = log.session();
        assert_eq!(
            err(&log.acquire(s, "hot", 1, Some(1000))),
            "too-many-waiters"
        );
    }
}

mod release {
    use super::*;

    #[test]
    fn hands_over_to_first_waiter_in_the_same_entry() {
        let mut log = Log::new();
        let (a, b, c) = (log.session(), log.session(), log.session());
        let g = granted(&log.acquire(a, "l", 1, None));
        log.acquire(b, "l", 2, Some(1000));
        log.acquire(c, "l", 3, Some(1000));
        let index = log.next;
        let o = log.apply(Command::Release {
            session: a,
            name: "l".into(),
            token: g.token,
        });
        let Ok(Reply::Released { granted }) = o.reply else {
            panic!("{o}")
        };
        assert_eq!(granted.len(), 1);
        assert_eq!((granted[0].session, granted[0].token), (b, index));
        assert_eq!(log.m.describe("l").waiters.len(), 1);
    }

    #[test]
    fn wrong_token_or_non_holder_is_refused() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        let g = granted(&log.acquire(a, "l", 1, None));
        let rel = |s, t| Command::Release {
            session: s,
            name: "l".into(),
            token: t,
        };
        assert_eq!(err(&log.apply(rel(a, g.token + 1))), "stale-token");
        assert_eq!(err(&log.apply(rel(b, g.token))), "not-holder");
        assert_eq!(err(&log.apply(rel(77, g.token))), "session-not-found");
        assert!(log.m.validate("l", g.token).valid);
    }

    #[test]
    fn last_release_forgets_the_lock() {
        let mut log = Log::new();
        let a = log.session();
        let g = granted(&log.acquire_mode(a, "l", 1, Mode::Shared, Some(3), None));
        log.apply(Command::Release {
            session: a,
            name: "l".into(),
            token: g.token,
        });
        assert_eq!(log.m.locks().count(), 0);
        // The permit count went with it.
        granted(&log.acquire_mode(a, "l", 2, Mode::Shared, Some(5), None));
    }
}

mod sessions_end {
    use super::*;

    #[test]
    fn close_releases_locks_cancels_waits_and_grants_next() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        granted(&log.acquire(a, "x", 1, None));
        granted(&log.acquire(b, "y", 2, None));
        log.acquire(a, "y", 3, Some(1000));
        log.acquire(b, "x", 4, Some(1000));
        let index = log.next;
        let o = log.apply(Command::CloseSession { session: a });
        assert!(matches!(o.reply, Ok(Reply::SessionClosed { ref released }) if released == &["x"]));
        let x = log.m.describe("x");
        assert_eq!((x.holders[0].session, x.holders[0].token), (b, index));
        assert!(log.m.describe("y").waiters.is_empty());
        assert!(log.m.session(a).is_none());
        assert_eq!(
            err(&log.apply(Command::CloseSession { session: a })),
            "session-not-found"
        );
    }

    #[test]
    fn expiring_holder_and_first_waiter_together_grants_the_second() {
        let mut log = Log::new();
        let (a, b, c) = (log.session(), log.session(), log.session());
        granted(&log.acquire(a, "l", 1, None));
        log.acquire(b, "l", 2, Some(1000));
        log.acquire(c, "l", 3, Some(1000));
        let o = log.apply(Command::ExpireSessions {
            sessions: vec![a, b, 999],
        });
        assert!(
            matches!(o.reply, Ok(Reply::SessionsExpired { ref expired }) if expired == &[a, b])
        );
        let grants: Vec<_> = o
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Granted(g) | Event::HandedOver(g) => Some(g.session),
                _ => None,
            })
            .collect();
        assert_eq!(
            grants,
            vec![c],
            "no grant to a session ending in the same entry"
        );
    }
}

mod cancel_wait {
    use super::*;

    #[test]
    fn removes_the_waiter_and_refuses_its_retry() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        granted(&log.acquire(a, "l", 1, None));
        log.acquire(b, "l", 2, Some(1000));
        let o = log.apply(Command::CancelWait {
            session: b,
            name: "l".into(),
            request_id: RequestId(2),
        });
        assert!(matches!(o.reply, Ok(Reply::WaitCancelled)));
        assert!(log.m.describe("l").waiters.is_empty());
        assert_eq!(err(&log.acquire(b, "l", 2, Some(1000))), "wait-cancelled");
    }

    #[test]
    fn losing_the_race_to_a_grant_returns_the_grant() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        let g = granted(&log.acquire(a, "l", 1, None));
        log.acquire(b, "l", 2, Some(1000));
        log.apply(Command::Release {
            session: a,
            name: "l".into(),
            token: g.token,
        });
        let o = log.apply(Command::CancelWait {
            session: b,
            name: "l".into(),
            request_id: RequestId(2),
        });
        assert_eq!(granted(&o).session, b);
    }

    #[test]
    fn cancelling_a_blocking_exclusive_waiter_grants_readers_behind_it() {
        let mut log = Log::new();
        let (a, b, c) = (log.session(), log.session(), log.session());
        granted(&log.acquire_mode(a, "rw", 1, Mode::Shared, None, None));
        log.acquire(b, "rw", 2, Some(1000));
        log.acquire_mode(c, "rw", 3, Mode::Shared, None, Some(1000));
        let o = log.apply(Command::CancelWait {
            session: b,
            name: "rw".into(),
            request_id: RequestId(2),
        });
        assert!(o
            .events
            .iter()
            .any(|e| e.grant().is_some_and(|g| g.session == c)));
        assert_eq!(log.m.describe("rw").holders.len(), 2);
    }

    #[test]
    fn a_cancel_that_overtakes_its_acquire_refuses_it() {
        let mut log = Log::new();
        let a = log.session();
        let o = log.apply(Command::CancelWait {
            session: a,
            name: "l".into(),
            request_id: RequestId(5),
        });
        assert!(matches!(o.reply, Ok(Reply::WaitCancelled)), "{o:?}");
        let o = log.apply(Command::Acquire {
            session: a,
            name: "l".into(),
            request_id: RequestId(5),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms: Some(1_000),
            metadata: vec![],
        });
        assert_eq!(err(&o), "wait-cancelled");
        assert!(log.m.describe("l").holders.is_empty());
    }

    #[test]
    fn a_cancel_of_an_ended_acquisition_is_not_found() {
        let mut log = Log::new();
        let a = log.session();
        let acquire = Command::Acquire {
            session: a,
            name: "l".into(),
            request_id: RequestId(5),
            mode: Mode::Exclusive,
            permits: None,
            wait_ms: None,
            metadata: vec![],
        };
        let token = match log.apply(acquire.clone()).reply {
            Ok(Reply::Acquired(g)) => g.token,
            other => panic!("{other:?}"),
        };
        log.apply(Command::Release {
            session: a,
            name: "l".into(),
            token,
        });
        let o = log.apply(Command::CancelWait {
            session: a,
            name: "l".into(),
            request_id: RequestId(5),
        });
        assert_eq!(err(&o), "wait-not-found");
        assert_eq!(err(&log.apply(acquire)), "request-released");
    }
}

mod proclaim {
    use super::*;

    #[test]
    fn holder_replaces_metadata_and_keeps_its_token() {
        let mut log = Log::new();
        let a = log.session();
        let g = granted(&log.acquire(a, "election", 1, None));
        let o = log.apply(Command::Proclaim {
            session: a,
            name: "election".into(),
            token: g.token,
            value: b"10.0.0.7:8080".to_vec(),
        });
        let Ok(Reply::Proclaimed(p)) = o.reply else {
            panic!("{o}")
        };
        assert_eq!(
            (p.token, p.metadata.as_slice()),
            (g.token, &b"10.0.0.7:8080"[..])
        );
        assert_eq!(
            log.m.describe("election").holders[0].metadata,
            b"10.0.0.7:8080"
        );
    }

    #[test]
    fn non_holder_cannot_proclaim() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        let g = granted(&log.acquire(a, "e", 1, None));
        let o = log.apply(Command::Proclaim {
            session: b,
            name: "e".into(),
            token: g.token,
            value: vec![],
        });
        assert_eq!(err(&o), "not-holder");
    }
}

mod queries {
    use super::*;

    #[test]
    fn list_pages_by_prefix_in_name_order() {
        let mut log = Log::new();
        let s = log.session();
        for (i, n) in ["a/1", "a/2", "a/3", "b/1"].iter().enumerate() {
            granted(&log.acquire(s, n, i as u128, None));
        }
        let names = |v: Vec<LockSummary>| v.into_iter().map(|l| l.name).collect::<Vec<_>>();
        assert_eq!(names(log.m.list("a/", "", 2)), ["a/1", "a/2"]);
        assert_eq!(names(log.m.list("a/", "a/2", 2)), ["a/3"]);
        assert_eq!(names(log.m.list("", "", 10)).len(), 4);
    }

    #[test]
    fn list_shows_a_sized_semaphore_nobody_holds_once() {
        let names = |v: Vec<LockSummary>| v.into_iter().map(|l| l.name).collect::<Vec<_>>();
        let mut log = Log::new();
        let s = log.session();
        granted(&log.acquire(s, "g/held", 1, None));
        let resize = |log: &mut Log, name: &str, permits: u32| {
            log.apply(Command::Resize {
                name: name.into(),
                permits,
            })
        };
        resize(&mut log, "g/empty", 5);
        resize(&mut log, "g/held", 3);
        let listed = log.m.list("g/", "", 10);
        let shown: Vec<_> = listed
            .iter()
            .map(|l| (l.name.as_str(), l.permits, l.resized, l.holders.len()))
            .collect();
        assert_eq!(
            shown,
            [("g/empty", Some(5), true, 0), ("g/held", Some(3), true, 1)]
        );
        // Paging goes through both kinds of names in one order.
        assert_eq!(names(log.m.list("g/", "", 1)), ["g/empty"]);
        assert_eq!(names(log.m.list("g/", "g/empty", 1)), ["g/held"]);
        // Forgetting the size removes the unheld name from the listing.
        resize(&mut log, "g/empty", 0);
        assert_eq!(names(log.m.list("g/", "", 10)), ["g/held"]);
    }

    #[test]
    fn snapshot_round_trips_and_rejects_newer_versions() {
        let mut log = Log::new();
        let (a, b) = (log.session(), log.session());
        granted(&log.acquire(a, "l", 1, None));
        log.acquire(b, "l", 2, Some(1000));
        let bytes = log.m.to_snapshot();
        let restored = LeaseMachine::from_snapshot(&bytes).unwrap();
        assert_eq!(restored, log.m);
        assert_eq!(restored.to_snapshot(), bytes);
        // Version 1 (JSON) still restores, to the same state.
        let json = log.m.to_json_snapshot();
        assert_eq!(LeaseMachine::from_snapshot(&json).unwrap(), log.m);
        let newer = String::from_utf8(json)
            .unwrap()
            .replace("\"version\":1", "\"version\":9");
        assert!(matches!(
            LeaseMachine::from_snapshot(newer.as_bytes()),
            Err(SnapshotError::UnsupportedVersion { found: 9, .. })
        ));
        let mut newer_binary = bytes.clone();
        newer_binary[8..12].copy_from_slice(&9u32.to_le_bytes());
        assert!(matches!(
            LeaseMachine::from_snapshot(&newer_binary),
            Err(SnapshotError::UnsupportedVersion { found: 9, .. })
        ));
        assert!(LeaseMachine::from_snapshot(b"garbage").is_err());
        assert!(LeaseMachine::from_snapshot(&bytes[..bytes.len() - 1]).is_err());
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(LeaseMachine::from_snapshot(&trailing).is_err());
    }
}

mod acquire_all;
mod acquire_all_once;
mod exactly_once;
mod history;
mod terms;

/// Grants and waiters as snapshot versions 2 to 4 wrote them (no terms),
/// for tests that write those versions' bytes. Postcard is positional, so
/// tuples of the old fields in order are the old structs' encoding.
type OldGrant = (
    String,
    SessionId,
    RequestId,
    Mode,
    FencingToken,
    u64,
    Vec<u8>,
);
type OldWaiter = (SessionId, RequestId, Mode, u64, u64, Vec<u8>);
type OldLock = (Option<u32>, Vec<OldGrant>, Vec<OldWaiter>);

fn old_grant(g: &Grant) -> OldGrant {
    assert!(g.terms.is_plain(), "versions before 5 had no terms");
    (
        g.name.clone(),
        g.session,
        g.request_id,
        g.mode,
        g.token,
        g.granted_at_ms,
        g.metadata.clone(),
    )
}

fn old_locks(m: &LeaseMachine) -> BTreeMap<String, OldLock> {
    m.locks
        .iter()
        .map(|(name, l)| {
            let waiters = l
                .waiters
                .iter()
                .map(|w| {
                    (
                        w.session,
                        w.request_id,
                        w.mode,
                        w.enqueued_at_ms,
                        w.timeout_ms,
                        w.metadata.clone(),
                    )
                })
                .collect();
            let holders = l.holders.iter().map(old_grant).collect();
            (name.clone(), (l.permits, holders, waiters))
        })
        .collect()
}
