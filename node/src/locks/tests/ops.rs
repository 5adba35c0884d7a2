//! Each operation's answer, and the refusals that are its own.

use super::*;
use raftlock_store::machine::LimitSpec;

#[tokio::test]
async fn create_session_answers_its_id_and_ttl_and_refuses_a_ttl_out_of_range() {
    let f = fixture().await;
    let (id, ttl) = f.locks.run(&f.anyone, create(5_000)).await.unwrap();
    assert!(id > 0);
    assert_eq!(ttl, Duration::from_secs(5));
    let before = f.fake.next_entry();
    let r = f.locks.run(&f.anyone, create(1)).await;
    assert_eq!(reason_of(r), Reason::TtlOutOfRange);
    assert_eq!(
        f.fake.next_entry(),
        before,
        "a refused creation wrote nothing"
    );
}

#[tokio::test]
async fn a_retried_creation_returns_the_session_the_first_made() {
    let f = fixture().await;
    let mut op = create(5_000);
    op.creation_key = Some(42);
    let first = f.locks.run(&f.anyone, op.clone()).await.unwrap().0;
    let again = f.locks.run(&f.anyone, op).await.unwrap().0;
    assert_eq!(first, again);
}

#[tokio::test]
async fn keep_alive_renews_a_live_session_and_refuses_an_unknown_one() {
    let f = fixture().await;
    let s = f.session().await;
    let (id, ttl) = f
        .locks
        .run(&f.anyone, KeepAlive { session: s })
        .await
        .unwrap();
    assert_eq!((id, ttl), (s, Duration::from_secs(10)));
    let r = f.locks.run(&f.anyone, KeepAlive { session: s + 1 }).await;
    assert_eq!(reason_of(r), Reason::SessionNotFound);
}

#[tokio::test]
async fn a_try_lock_is_granted_when_free_and_busy_with_its_holder_when_not() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    let g = f.hold(a, "x").await;
    assert_eq!((g.session, g.name.as_str()), (a, "x"));
    match f.locks.run(&f.anyone, acquire(b, "x", None)).await.unwrap() {
        Acquired::Busy(holders) => assert_eq!(holders, vec![g.clone()]),
        other => panic!("not busy: {other:?}"),
    }
    assert_eq!(f.holders("x").await, vec![g]);
}

#[tokio::test]
async fn release_frees_the_lock_and_refuses_another_token() {
    let f = fixture().await;
    let a = f.session().await;
    let g = f.hold(a, "x").await;
    let stale = Grant {
        token: g.token + 1,
        ..g.clone()
    };
    assert_eq!(reason_of(f.release(&stale).await), Reason::StaleToken);
    assert_eq!(f.release(&g).await.unwrap(), vec![]);
    assert!(f.holders("x").await.is_empty());
    assert_eq!(reason_of(f.release(&g).await), Reason::NotHolder);
}

#[tokio::test]
async fn shared_holds_count_permits_and_resize_changes_them() {
    let f = fixture().await;
    let (a, b, c) = (f.session().await, f.session().await, f.session().await);
    let shared = |s, name: &str| Acquire {
        mode: Mode::Shared,
        permits: Some(2),
        ..acquire(s, name, None)
    };
    for s in [a, b] {
        let r = f.locks.run(&f.anyone, shared(s, "sem")).await.unwrap();
        assert!(matches!(r, Acquired::Granted(_)), "{r:?}");
    }
    let r = f.locks.run(&f.anyone, shared(c, "sem")).await.unwrap();
    assert!(matches!(r, Acquired::Busy(ref h) if h.len() == 2), "{r:?}");
    let resize = Resize {
        name: "sem".into(),
        permits: 3,
    };
    f.locks.run(&f.anyone, resize).await.unwrap();
    let mut third = shared(c, "sem");
    third.permits = Some(3);
    let r = f.locks.run(&f.anyone, third).await.unwrap();
    assert!(matches!(r, Acquired::Granted(_)), "{r:?}");
    let r = f.locks.run(&f.anyone, shared(c, "sem")).await;
    assert_eq!(reason_of(r), Reason::AlreadyHeld);
}

#[tokio::test]
async fn a_lock_set_is_granted_whole_under_one_token_or_not_at_all() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    let set = |s, names: &[&str]| AcquireAll {
        session: s,
        names: names.iter().map(|n| n.to_string()).collect(),
        request_id: request(),
        wait: None,
        metadata: Vec::new(),
        sequence: None,
    };
    let held = f.hold(b, "q").await;
    match f.locks.run(&f.anyone, set(a, &["p", "q"])).await.unwrap() {
        AcquiredAll::Busy(h) => assert_eq!(h, vec![held.clone()]),
        other => panic!("{other:?}"),
    }
    assert!(
        f.holders("p").await.is_empty(),
        "nothing of a refused set is held"
    );
    f.release(&held).await.unwrap();
    match f.locks.run(&f.anyone, set(a, &["q", "p"])).await.unwrap() {
        AcquiredAll::Granted(g) => {
            let names: Vec<_> = g.iter().map(|g| g.name.as_str()).collect();
            assert_eq!(names, ["p", "q"]);
            assert_eq!(g[0].token, g[1].token);
        }
        other => panic!("{other:?}"),
    }
    let r = f.locks.run(&f.anyone, set(a, &["p", "p"])).await;
    assert_eq!(reason_of(r), Reason::InvalidArgument);
}

#[tokio::test]
async fn close_session_releases_what_it_held() {
    let f = fixture().await;
    let a = f.session().await;
    f.hold(a, "x").await;
    f.hold(a, "y").await;
    let released = f.locks.run(&f.anyone, CloseSession { session: a }).await;
    assert_eq!(released.unwrap(), vec!["x".to_string(), "y".to_string()]);
    assert!(f.holders("x").await.is_empty());
    let r = f.locks.run(&f.anyone, KeepAlive { session: a }).await;
    assert_eq!(reason_of(r), Reason::SessionNotFound);
}

#[tokio::test]
async fn force_release_frees_a_held_lock_and_hands_it_over() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    let g = f.hold(a, "x").await;
    let waiting = {
        let locks = f.locks.clone();
        let anyone = f.anyone.clone();
        tokio::spawn(async move {
            let wait = acquire(b, "x", Some(Duration::from_secs(10)));
            locks.run(&anyone, wait).await
        })
    };
    f.until_waiters("x", 1).await;
    let forced = ForceRelease { name: "x".into() };
    let out = f.locks.run(&f.anyone, forced).await.unwrap();
    assert_eq!(out.released, vec![g]);
    assert_eq!(out.granted.len(), 1);
    match waiting.await.unwrap().unwrap() {
        Acquired::Granted(next) => assert_eq!(next, out.granted[0]),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn campaign_elects_proclaim_changes_the_value_and_resign_ends_it() {
    let f = fixture().await;
    let a = f.session().await;
    let campaign = Campaign {
        session: a,
        name: "e".into(),
        request_id: request(),
        value: b"one".to_vec(),
        wait: None,
        sequence: None,
    };
    let g = f.locks.run(&f.anyone, campaign).await.unwrap();
    let leader = f.locks.leader(&f.anyone, "e").await.unwrap().unwrap();
    assert_eq!(
        (leader.token, leader.metadata.as_slice()),
        (g.token, &b"one"[..])
    );
    let proclaim = Proclaim {
        session: a,
        name: "e".into(),
        token: g.token,
        value: b"two".to_vec(),
    };
    f.locks.run(&f.anyone, proclaim).await.unwrap();
    let leader = f.locks.leader(&f.anyone, "e").await.unwrap().unwrap();
    assert_eq!(leader.metadata, b"two");
    let resign = Resign {
        session: a,
        name: "e".into(),
        token: g.token,
    };
    f.locks.run(&f.anyone, resign).await.unwrap();
    assert!(f.locks.leader(&f.anyone, "e").await.unwrap().is_none());
}

#[tokio::test]
async fn a_rate_limit_is_defined_taken_from_returned_to_and_deleted() {
    let f = fixture().await;
    let spec = LimitSpec {
        rate: 10,
        per_ms: 60_000,
        burst: 10,
    };
    let define = DefineLimit {
        name: "api".into(),
        spec,
    };
    assert!(f.locks.run(&f.anyone, define).await.unwrap());
    let take = |n, lease_ms| Take {
        name: "api".into(),
        n,
        spec: None,
        wait: None,
        lease_ms,
    };
    let t = f.locks.run(&f.anyone, take(4, 5_000)).await.unwrap();
    assert!(t.admitted);
    let lease = t.lease.expect("a token lease");
    let back = ReturnTokens {
        name: "api".into(),
        lease,
        unused: 3,
    };
    assert_eq!(f.locks.run(&f.anyone, back).await.unwrap(), 3);
    let t = f.locks.run(&f.anyone, take(9, 0)).await.unwrap();
    assert!(t.admitted, "the returned tokens are there again: {t:?}");
    let t = f.locks.run(&f.anyone, take(1, 0)).await.unwrap();
    assert!(!t.admitted && t.retry_after > Duration::ZERO, "{t:?}");
    let limit = f.locks.describe_limit(&f.anyone, "api").await.unwrap();
    assert_eq!(limit.bucket.spec, spec);
    let delete = DeleteLimit { name: "api".into() };
    assert!(f.locks.run(&f.anyone, delete).await.unwrap());
    let r = f.locks.run(&f.anyone, take(1, 0)).await;
    assert_eq!(reason_of(r), Reason::LimitNotFound);
}

#[tokio::test]
async fn validate_says_whether_a_token_is_the_holders_now() {
    let f = fixture().await;
    let a = f.session().await;
    let g = f.hold(a, "x").await;
    let v = f.locks.validate(&f.anyone, "x", g.token).await.unwrap();
    assert!(v.valid);
    f.release(&g).await.unwrap();
    let v = f.locks.validate(&f.anyone, "x", g.token).await.unwrap();
    assert!(!v.valid);
}

#[tokio::test]
async fn list_and_sessions_page_through_what_is_held() {
    let f = fixture().await;
    let a = f.session().await;
    for name in ["a/1", "a/2", "b/1"] {
        f.hold(a, name).await;
    }
    let q = ListQuery {
        prefix: "a/".into(),
        page_token: String::new(),
        limit: 1,
    };
    let page = f.locks.list(&f.anyone, q.clone()).await.unwrap();
    assert_eq!(page.locks.len(), 1);
    assert_eq!(page.locks[0].name, "a/1");
    let next = ListQuery {
        page_token: page.next_page_token,
        ..q
    };
    let page = f.locks.list(&f.anyone, next).await.unwrap();
    let names: Vec<_> = page.locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["a/2"]);
    let sessions = f
        .locks
        .list_sessions(&f.anyone, SessionQuery::default())
        .await
        .unwrap();
    assert_eq!(sessions.sessions.len(), 1);
    assert_eq!(sessions.sessions[0].session.held.len(), 3);
}
