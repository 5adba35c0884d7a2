//! The wait loops: a queued acquire is answered by the entry that grants
//! or ends it, in FIFO order, on time, and a caller that leaves takes its
//! wait with it, whenever it leaves.

use super::*;
use tokio::task::JoinHandle;

fn wait_for(
    f: &Fixture,
    session: SessionId,
    name: &str,
    wait: Duration,
) -> JoinHandle<Result<Acquired, NodeError>> {
    let (locks, anyone) = (f.locks.clone(), f.anyone.clone());
    let op = acquire(session, name, Some(wait));
    tokio::spawn(async move { locks.run(&anyone, op).await })
}

#[tokio::test]
async fn queued_acquires_are_granted_in_arrival_order_with_rising_tokens() {
    let f = fixture().await;
    let holder = f.session().await;
    let mut g = f.hold(holder, "x").await;
    let mut queued = Vec::new();
    for i in 0..3 {
        let s = f.session().await;
        queued.push((s, wait_for(&f, s, "x", Duration::from_secs(30))));
        f.until_waiters("x", i + 1).await;
    }
    for (s, task) in queued {
        let granted = f.release(&g).await.unwrap();
        let next = match task.await.unwrap().unwrap() {
            Acquired::Granted(next) => next,
            other => panic!("{other:?}"),
        };
        assert_eq!(granted, vec![next.clone()]);
        assert_eq!(next.session, s, "FIFO");
        assert!(next.token > g.token, "{} after {}", next.token, g.token);
        g = next;
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_ends_on_time_and_leaves_the_queue() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    f.hold(a, "x").await;
    let started = tokio::time::Instant::now();
    let r = wait_for(&f, b, "x", Duration::from_secs(2)).await.unwrap();
    assert_eq!(reason_of(r), Reason::WaitTimedOut);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_millis(2_300),
        "{waited:?}"
    );
    assert_eq!(f.waiters("x").await, 0);
}

#[tokio::test]
async fn a_leader_cut_off_ends_its_waits_with_no_quorum() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    f.hold(a, "x").await;
    let task = wait_for(&f, b, "x", Duration::from_secs(30));
    f.until_waiters("x", 1).await;
    f.fake.lose_quorum();
    let r = tokio::time::timeout(Duration::from_secs(5), task).await;
    assert_eq!(
        reason_of(r.expect("answered at once").unwrap()),
        Reason::NoQuorum
    );
}

#[tokio::test]
async fn a_caller_gone_after_queuing_leaves_no_wait_behind() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    let g = f.hold(a, "x").await;
    let task = wait_for(&f, b, "x", Duration::from_secs(30));
    f.until_waiters("x", 1).await;
    task.abort();
    let _ = task.await;
    f.until_waiters("x", 0).await;
    f.release(&g).await.unwrap();
    assert!(
        f.holders("x").await.is_empty(),
        "granted to a caller that left"
    );
}

/// A caller that leaves while its acquire is still being committed must
/// not be queued (and later granted) for nobody: its wait is cancelled
/// once the acquire applies.
#[tokio::test]
async fn a_caller_gone_while_its_acquire_commits_is_never_granted() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    let g = f.hold(a, "x").await;
    let before = f.fake.next_entry();
    f.fake.let_proposals_through(false);
    let task = wait_for(&f, b, "x", Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(50)).await;
    task.abort();
    let _ = task.await;
    f.fake.let_proposals_through(true);
    // The acquire queues when it applies; the cancel follows it.
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let s = f
            .locks
            .list_sessions(&f.anyone, SessionQuery::default())
            .await
            .unwrap();
        let waiting: usize = s.sessions.iter().map(|v| v.session.waiting.len()).sum();
        // Two entries: the acquire, then the cancel that follows it.
        if waiting == 0 && f.fake.next_entry() >= before + 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the gone caller's wait stayed queued"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f.release(&g).await.unwrap();
    assert!(
        f.holders("x").await.is_empty(),
        "granted to a caller that left"
    );
}

#[tokio::test]
async fn cancel_wait_takes_a_queued_acquire_out_and_is_an_answer_when_there_is_none() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    f.hold(a, "x").await;
    let op = acquire(b, "x", Some(Duration::from_secs(30)));
    let request_id = op.request_id;
    let task = {
        let (locks, anyone) = (f.locks.clone(), f.anyone.clone());
        tokio::spawn(async move { locks.run(&anyone, op).await })
    };
    f.until_waiters("x", 1).await;
    let cancel = CancelWait {
        session: b,
        name: "x".into(),
        request_id,
    };
    let r = f.locks.run(&f.anyone, cancel.clone()).await.unwrap();
    assert!(matches!(r, Cancelled::Removed), "{r:?}");
    assert_eq!(reason_of(task.await.unwrap()), Reason::WaitCancelled);
    let r = f.locks.run(&f.anyone, cancel).await.unwrap();
    assert!(matches!(r, Cancelled::NotWaiting), "{r:?}");
}

#[tokio::test]
async fn a_downgrade_lets_the_readers_at_the_front_in_and_keeps_the_writer_behind_them_waiting() {
    let f = fixture().await;
    let (w, r1, w2, r2) = (
        f.session().await,
        f.session().await,
        f.session().await,
        f.session().await,
    );
    let held = f.hold(w, "rw").await;
    let reader = |s| {
        let (locks, anyone) = (f.locks.clone(), f.anyone.clone());
        let op = Acquire {
            mode: Mode::Shared,
            ..acquire(s, "rw", Some(Duration::from_secs(30)))
        };
        tokio::spawn(async move { locks.run(&anyone, op).await })
    };
    let first_reader = reader(r1);
    f.until_waiters("rw", 1).await;
    let writer = wait_for(&f, w2, "rw", Duration::from_secs(30));
    f.until_waiters("rw", 2).await;
    let second_reader = reader(r2);
    f.until_waiters("rw", 3).await;

    let stale = Downgrade {
        session: w,
        name: "rw".into(),
        token: held.token + 1,
    };
    assert_eq!(
        reason_of(f.locks.run(&f.anyone, stale).await),
        Reason::StaleToken
    );
    let op = Downgrade {
        session: w,
        name: "rw".into(),
        token: held.token,
    };
    let out = f.locks.run(&f.anyone, op.clone()).await.unwrap();
    assert_eq!(out.hold.token, held.token, "the token names the same hold");
    assert_eq!(out.hold.mode, Mode::Shared);
    let granted = match first_reader.await.unwrap().unwrap() {
        Acquired::Granted(g) => g,
        other => panic!("{other:?}"),
    };
    assert_eq!(out.granted, vec![granted.clone()]);
    assert!(granted.token > held.token);
    assert_eq!(
        f.waiters("rw").await,
        2,
        "the writer queued next, and the reader behind it, still wait"
    );
    let again = f.locks.run(&f.anyone, op).await.unwrap();
    assert_eq!(
        (again.hold, again.granted),
        (out.hold, vec![]),
        "a retry changes nothing"
    );
    writer.abort();
    second_reader.abort();
}
