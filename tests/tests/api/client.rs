//! The client library against real clusters: failover under a blocked
//! acquire, idempotent retries, lease loss, background release, and
//! election observation across a leader kill.

use futures::StreamExt;
use raftlock_client::{Error, Grant};
use raftlock_tests::{raw, Cluster};
use std::time::{Duration, Instant};

#[tokio::test]
async fn failover_during_a_blocked_acquire_yields_exactly_one_grant() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let holder = client.session(Duration::from_secs(5)).await.unwrap();
    let waiter = client.session(Duration::from_secs(5)).await.unwrap();
    let held = holder
        .lock("failover/blocked")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let blocked = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            waiter
                .lock("failover/blocked")
                .timeout(Duration::from_secs(20))
                .acquire()
                .await
        }
    });
    // The waiter is queued before the leader dies.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client
        .describe("failover/blocked")
        .await
        .unwrap()
        .waiters
        .is_empty()
    {
        assert!(Instant::now() < deadline, "waiter never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let old = cluster.leader().await.unwrap();
    cluster.kill(old);
    let new = cluster
        .wait_for_new_leader(old, Duration::from_secs(10))
        .await;
    eprintln!("leader {old} killed; {new} leads");
    held.release().await.unwrap();
    let guard = blocked
        .await
        .unwrap()
        .expect("the blocked acquire is granted");
    assert!(guard.token() > 0);
    let d = client.describe("failover/blocked").await.unwrap();
    assert_eq!(d.holders.len(), 1, "exactly one grant: {d:?}");
    assert_eq!(d.holders[0].session_id, waiter.id());
    assert_eq!(d.holders[0].token, guard.token());
    assert!(d.waiters.is_empty(), "no waiter left behind: {d:?}");
}

#[tokio::test]
async fn a_retried_acquire_returns_the_same_token() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    let addr = &cluster.endpoints()[(leader - 1) as usize];
    let session = raw::silent_session(addr, 10_000).await;
    let id = *uuid::Uuid::now_v7().as_bytes();
    let first = raw::acquire_with_id(addr, session, "retry/same", id)
        .await
        .unwrap();
    let again = raw::acquire_with_id(addr, session, "retry/same", id)
        .await
        .unwrap();
    assert!(first.acquired && again.acquired);
    assert_eq!(
        first.grant.as_ref().unwrap().token,
        again.grant.as_ref().unwrap().token,
        "a retry finds the first grant instead of making a second"
    );
    // A different logical acquisition by the same holder is refused.
    let other = raw::acquire_with_id(
        addr,
        session,
        "retry/same",
        *uuid::Uuid::now_v7().as_bytes(),
    )
    .await;
    assert!(other.is_err() || !other.unwrap().acquired);
}

#[tokio::test]
async fn a_scope_run_under_a_lock_is_dropped_when_the_lock_is_lost() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let ttl = Duration::from_secs(2);
    let session = client.session(ttl).await.unwrap();
    let guard = session.lock("scope/a").acquire().await.unwrap();

    // Work that runs under the lock and would never end by itself. Every
    // node frozen: no keep-alive is acknowledged, so the lock is lost by
    // the local deadline while this process runs on.
    let last_tick = std::sync::Mutex::new(Instant::now());
    let work = async {
        loop {
            *last_tick.lock().unwrap() = Instant::now();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    for id in 1..=3 {
        cluster.pause(id);
    }
    let frozen = Instant::now();
    let outcome = tokio::time::timeout(ttl + Duration::from_secs(1), guard.run(work))
        .await
        .expect("the scope ends once the lock is lost");
    let stopped = Instant::now();
    for id in 1..=3 {
        cluster.resume(id);
    }
    assert!(matches!(outcome, Err(Error::SessionLost(_))), "{outcome:?}");
    assert!(!guard.is_valid());
    // Stopped before the leader could expire the session (it saw the last
    // renewal no later than the freeze), and the work did not run after.
    assert!(
        stopped - frozen < ttl,
        "stopped {:?} after the freeze",
        stopped - frozen
    );
    assert!(*last_tick.lock().unwrap() <= stopped);

    // A scope whose work ends first returns its output.
    let s2 = client.session(Duration::from_secs(5)).await.unwrap();
    let g2 = s2.lock("scope/b").acquire().await.unwrap();
    assert_eq!(g2.run(async { 7 }).await.unwrap(), 7);
    g2.release().await.unwrap();
}

#[tokio::test]
async fn lost_fires_when_the_lease_lapses_and_dropped_guards_are_released() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;

    // Dropping a guard releases it in the background.
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let guard = session
        .lock("drop/me")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !client.describe("drop/me").await.unwrap().holders.is_empty() {
        assert!(Instant::now() < deadline, "dropped guard still holds");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // With every node frozen no keep-alive is acknowledged: the guard is
    // lost by the local rule, before the TTL could pass on any server.
    let ttl = Duration::from_secs(2);
    let short = client.session(ttl).await.unwrap();
    let guard = short.lock("lapse").try_acquire().await.unwrap().unwrap();
    for id in 1..=3 {
        cluster.pause(id);
    }
    let frozen = Instant::now();
    let reason = tokio::time::timeout(ttl + Duration::from_secs(1), guard.lost())
        .await
        .expect("lost() fires after the lease lapses");
    let after = frozen.elapsed();
    assert!(matches!(reason, Error::SessionLost(_)), "{reason}");
    assert!(
        after < ttl,
        "lost {after:?} after the freeze: later than the TTL"
    );
    assert!(!guard.is_valid());
    for id in 1..=3 {
        cluster.resume(id);
    }
}

async fn next<S>(changes: &mut S) -> Option<Grant>
where
    S: futures::Stream<Item = Result<Option<Grant>, Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(15), changes.next())
        .await
        .expect("a change is reported")
        .expect("the stream goes on")
        .expect("no error")
}

#[tokio::test]
async fn observe_reports_each_leader_change_once_in_order_across_a_failover() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let mut changes = Box::pin(client.election("sched").observe());
    assert_eq!(next(&mut changes).await, None, "no leader at first");

    let a = client.session(Duration::from_secs(5)).await.unwrap();
    let b = client.session(Duration::from_secs(5)).await.unwrap();
    let lead_a = a.election("sched").campaign("a-1").await.unwrap();
    let seen = |g: Option<Grant>| g.map(|g| (g.session_id, g.metadata));
    assert_eq!(
        seen(next(&mut changes).await),
        Some((a.id(), b"a-1".to_vec()))
    );
    let campaign_b = tokio::spawn({
        let b = b.clone();
        async move { b.election("sched").campaign("b-1").await }
    });
    lead_a.proclaim("a-2").await.unwrap();
    assert_eq!(
        seen(next(&mut changes).await),
        Some((a.id(), b"a-2".to_vec()))
    );
    assert_eq!(lead_a.value(), b"a-2");

    // The observer's node (the Raft leader) dies; the stream reconnects and
    // must not report a-2 again.
    let old = cluster.leader().await.unwrap();
    cluster.kill(old);
    cluster
        .wait_for_new_leader(old, Duration::from_secs(10))
        .await;
    let leader_now = client.election("sched").leader().await.unwrap();
    assert_eq!(seen(leader_now), Some((a.id(), b"a-2".to_vec())));

    lead_a.resign().await.unwrap();
    assert_eq!(
        seen(next(&mut changes).await),
        Some((b.id(), b"b-1".to_vec()))
    );
    let lead_b = campaign_b.await.unwrap().unwrap();
    assert!(lead_b.token() > 0);
    lead_b.resign().await.unwrap();
    assert_eq!(next(&mut changes).await, None);
    // Nothing else was reported.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), changes.next())
            .await
            .is_err(),
        "an extra report"
    );
}

/// A client keeps all its sessions alive over one stream: on nodes that
/// allow a connection only two long-lived streams, forty sessions of one
/// client all outlive several TTLs. A session ended elsewhere is reported
/// gone on that stream without disturbing the others.
#[tokio::test]
async fn many_sessions_share_one_keepalive_stream() {
    let cluster = Cluster::start_with(3, &["--max-keepalive-streams-per-connection", "2"]).await;
    let client = cluster.client().await;
    let ttl = Duration::from_secs(2);
    let mut sessions = Vec::new();
    for _ in 0..40 {
        sessions.push(client.session(ttl).await.unwrap());
    }
    // Closed through another client: this client's stream learns it is gone.
    let other = cluster.client().await;
    let victim = sessions.pop().unwrap();
    raw::close_session(&other.status().await.unwrap().leader_addr, victim.id())
        .await
        .unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), victim.lost())
        .await
        .expect("the closed session is reported within a renewal interval");
    assert!(matches!(reason, Error::SessionGone(_)), "{reason}");
    tokio::time::sleep(ttl * 3).await;
    for s in &sessions {
        assert!(
            s.is_valid(),
            "session {} lost: {:?}",
            s.id(),
            s.valid_until()
        );
    }
    let held = sessions[0]
        .lock("shared/stream")
        .try_acquire()
        .await
        .unwrap();
    assert!(held.is_some());
}

/// A cluster whose operator allows shorter waits than the library's own
/// ceiling: an acquire or campaign without a timeout waits as long as the
/// cluster allows instead of being refused.
#[tokio::test(flavor = "multi_thread")]
async fn default_waits_fit_the_clusters_advertised_limit() {
    let cluster = Cluster::start_with(3, &["--max-wait-ms", "5000"]).await;
    let client = cluster.client().await;
    let limits = client.status().await.unwrap().limits.expect("advertised");
    assert_eq!(limits.max_wait, Duration::from_secs(5));
    let (a, b) = (
        client.session(Duration::from_secs(10)).await.unwrap(),
        client.session(Duration::from_secs(10)).await.unwrap(),
    );
    let held = a.lock("limits/x").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let r = b.lock("limits/x").acquire().await;
        (r.map(|g| g.token()), started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    held.release().await.unwrap();
    let (got, _) = waiter.await.unwrap();
    assert!(got.is_ok(), "a default wait was refused: {got:?}");
    // With nobody releasing, the default wait ends at the cluster's limit.
    let c = client.session(Duration::from_secs(10)).await.unwrap();
    let d = client.session(Duration::from_secs(10)).await.unwrap();
    let _held = c.lock("limits/y").acquire().await.unwrap();
    let started = std::time::Instant::now();
    let r = d.lock("limits/y").acquire().await;
    assert!(
        matches!(r, Err(raftlock_client::Error::WaitTimedOut(_))),
        "{:?}",
        r.map(|g| g.token())
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(4500) && waited < Duration::from_secs(15),
        "waited {waited:?} for a 5 s limit"
    );
}

#[tokio::test]
async fn closing_the_client_releases_its_sessions_locks_at_once() {
    let cluster = Cluster::start(3).await;
    let other = cluster.client().await;
    let watcher = other.session(Duration::from_secs(30)).await.unwrap();
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(30)).await.unwrap();
    let guard = session.lock("close/held").acquire().await.unwrap();
    client.close().await;
    assert!(matches!(session.lost().await, Error::SessionGone(_)));
    assert!(!guard.is_valid());
    // Granted to the next caller at once, not after the 30 s TTL.
    let started = Instant::now();
    let next = watcher
        .lock("close/held")
        .timeout(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    next.release().await.unwrap();
}

#[tokio::test]
async fn a_downgraded_writer_keeps_its_token_and_lets_the_queued_readers_in() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let session = |name| {
        let client = client.clone();
        async move {
            client
                .session_named(Duration::from_secs(10), name)
                .await
                .unwrap()
        }
    };
    let (writer, reader, other_writer) = (
        session("writer").await,
        session("reader").await,
        session("other").await,
    );
    let mut guard = writer.lock("config/routes").acquire().await.unwrap();
    let token = guard.token();
    let read = tokio::spawn({
        let reader = reader.clone();
        async move {
            reader
                .lock("config/routes")
                .shared()
                .timeout(Duration::from_secs(20))
                .acquire()
                .await
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while client
        .describe("config/routes")
        .await
        .unwrap()
        .waiters
        .is_empty()
    {
        assert!(Instant::now() < deadline, "the reader never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    guard.downgrade().await.unwrap();
    assert_eq!(guard.token(), token, "the token names the same hold");
    assert_eq!(guard.grant().mode, raftlock_client::Mode::Shared);
    let read = tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("the reader is let in by the downgrade")
        .unwrap()
        .unwrap();
    assert!(read.token() > token);
    // The two readers hold it together; a writer still cannot.
    assert!(other_writer
        .lock("config/routes")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    // A retried downgrade changes nothing.
    guard.downgrade().await.unwrap();
    assert_eq!(
        client
            .describe("config/routes")
            .await
            .unwrap()
            .holders
            .len(),
        2
    );
    read.release().await.unwrap();
    guard.release().await.unwrap();
}
