//! A 3-node cluster of real processes: forming, serving through any node,
//! fencing tokens as log indexes, handoff, waits, and the leader's death.

use raftlock_client::{Client, Error};
use raftlock_tests::{raw, Cluster};
use std::time::{Duration, Instant};

#[tokio::test]
async fn acquire_release_through_any_node_with_log_index_tokens() {
    let cluster = Cluster::start(3).await;
    let mut last_token = 0;
    for endpoint in cluster.endpoints() {
        // A client that knows only this node finds the leader through it.
        let client = Client::connect([endpoint.as_str()])
            .await
            .expect("connects via any node");
        let session = client.session(Duration::from_secs(5)).await.unwrap();
        let before = client.status().await.unwrap().applied_index;
        let guard = session
            .lock("shared/resource")
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let after = client.status().await.unwrap();
        // token = entry index × 2^16 + position in the entry (DESIGN.md).
        assert!(
            guard.token() >> 16 > before,
            "token comes from a new log entry"
        );
        assert_eq!(
            guard.token() >> 16,
            after.applied_index,
            "token comes from the granting entry's index (nothing else was written)"
        );
        assert!(guard.token() > last_token, "tokens grow");
        last_token = guard.token();
        let described = client.describe("shared/resource").await.unwrap();
        assert_eq!(described.holders[0].token, guard.token());
        assert!(
            client
                .validate("shared/resource", guard.token())
                .await
                .unwrap()
                .valid
        );
        guard.release().await.unwrap();
        assert!(
            !client
                .validate("shared/resource", last_token)
                .await
                .unwrap()
                .valid
        );
        session.close().await.unwrap();
    }
}

#[tokio::test]
async fn blocked_acquire_is_granted_by_the_release_entry_and_timeouts_leave_no_waiter() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let leader_addr = client.status().await.unwrap().leader_addr;
    let holder = raw::silent_session(&leader_addr, 60_000).await;
    let held = raw::acquire(&leader_addr, holder, "queue", None)
        .await
        .unwrap();
    assert!(held.acquired);

    let waiter = client.session(Duration::from_secs(10)).await.unwrap();
    let w = waiter.clone();
    let pending = tokio::spawn(async move {
        w.lock("queue")
            .timeout(Duration::from_secs(20))
            .acquire()
            .await
    });
    // Wait until the waiter is queued on the server.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.describe("queue").await.unwrap().waiters.is_empty() {
        assert!(Instant::now() < deadline, "waiter never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let released_at = Instant::now();
    let release = raw::release(&leader_addr, holder, "queue", held.grant.unwrap().token)
        .await
        .unwrap();
    let guard = pending.await.unwrap().expect("granted after the release");
    let handoff = released_at.elapsed();
    assert_eq!(
        release.granted.len(),
        1,
        "the release entry itself granted the waiter"
    );
    assert_eq!(
        guard.token(),
        release.granted[0].token,
        "the waiter's token is the release entry's index"
    );
    assert!(
        handoff < Duration::from_secs(2),
        "handoff took {handoff:?}: the waiter must not poll"
    );

    // A wait that times out returns DEADLINE_EXCEEDED and leaves nothing queued.
    let other = client.session(Duration::from_secs(10)).await.unwrap();
    let started = Instant::now();
    let res = other
        .lock("queue")
        .timeout(Duration::from_millis(600))
        .acquire()
        .await;
    assert!(
        matches!(res, Err(Error::WaitTimedOut(_))),
        "{:?}",
        res.err()
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    let d = client.describe("queue").await.unwrap();
    assert!(
        d.waiters.is_empty(),
        "timed-out waiter left behind: {:?}",
        d.waiters
    );
    assert_eq!(d.holders.len(), 1);
}

#[tokio::test]
async fn leader_kill_keeps_holders_tokens_and_sessions() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let a = session.lock("a").try_acquire().await.unwrap().unwrap();
    let b = session.lock("b").try_acquire().await.unwrap().unwrap();
    let old = cluster.leader().await.unwrap();

    let killed = Instant::now();
    cluster.kill(old);
    let new = cluster
        .wait_for_new_leader(old, Duration::from_secs(10))
        .await;
    assert_ne!(new, old);
    eprintln!("new leader {new} after {:?}", killed.elapsed());

    // Keep-alives go on through the new leader: well past the TTL the
    // session and its locks are still there.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(
        session.is_valid(),
        "session lost across failover; logs:\n{}",
        cluster.logs()
    );
    for (name, guard) in [("a", &a), ("b", &b)] {
        let d = client.describe(name).await.unwrap();
        assert_eq!(d.holders.len(), 1, "{name} lost its holder");
        assert_eq!(d.holders[0].token, guard.token(), "{name} changed token");
        assert_eq!(d.holders[0].session_id, session.id());
    }
    let c = session.lock("c").try_acquire().await.unwrap().unwrap();
    assert!(
        c.token() > a.token().max(b.token()),
        "tokens keep growing under the new leader"
    );
    b.release().await.unwrap();
    let other = client.session(Duration::from_secs(3)).await.unwrap();
    let b2 = other.lock("b").try_acquire().await.unwrap().unwrap();
    assert!(b2.token() > c.token());
}

#[tokio::test]
async fn silent_session_expires_after_ttl_not_before_and_hands_over() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let leader_addr = client.status().await.unwrap().leader_addr;
    let ttl = Duration::from_millis(2_000);
    let created = Instant::now();
    let silent = raw::silent_session(&leader_addr, ttl.as_millis() as u64).await;
    let held = raw::acquire(&leader_addr, silent, "lease", None)
        .await
        .unwrap();
    let held_token = held.grant.unwrap().token;

    let waiter = client.session(Duration::from_secs(10)).await.unwrap();
    let w = waiter.clone();
    let pending = tokio::spawn(async move {
        let g = w
            .lock("lease")
            .timeout(Duration::from_secs(20))
            .acquire()
            .await;
        (g, Instant::now())
    });
    // Not before TTL minus the client's margin.
    tokio::time::sleep(
        ttl.saturating_sub(Duration::from_millis(400))
            .saturating_sub(created.elapsed()),
    )
    .await;
    let d = client.describe("lease").await.unwrap();
    assert_eq!(
        d.holders.first().map(|h| h.session_id),
        Some(silent),
        "expired early, at {:?}",
        created.elapsed()
    );

    let (guard, granted_at) = pending.await.unwrap();
    let guard = guard.expect("the waiter is granted when the silent session expires");
    let after = granted_at.duration_since(created);
    assert!(
        after >= ttl.saturating_sub(Duration::from_millis(300)),
        "granted after {after:?}, before the TTL"
    );
    assert!(
        after < ttl + Duration::from_secs(3),
        "granted only after {after:?}"
    );
    assert!(
        guard.token() > held_token,
        "the new holder's token is larger"
    );
    let d = client.describe("lease").await.unwrap();
    assert_eq!(d.holders[0].session_id, waiter.id());
}

#[tokio::test]
async fn follower_answers_unavailable_with_the_leader_address() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    let endpoints = cluster.endpoints();
    let leader_addr = &endpoints[(leader - 1) as usize];
    let follower_addr = endpoints
        .iter()
        .find(|e| *e != leader_addr)
        .expect("a follower");
    let status = raw::create_session(follower_addr, 5_000)
        .await
        .expect_err("a follower does not serve writes");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    let hint = status
        .metadata()
        .get(raftlock_proto::LEADER_METADATA_KEY)
        .expect("leader hint in metadata")
        .to_str()
        .unwrap();
    assert_eq!(hint, leader_addr.as_str());
    assert!(
        status.message().contains(leader_addr),
        "{}",
        status.message()
    );
    // The hint is usable as is.
    let session = raw::create_session(hint, 5_000)
        .await
        .expect("the leader serves");
    assert!(session > 0);
}

/// A leader that no quorum acknowledges any more (its followers paused
/// here; cut off by a partition in the Jepsen runs) kept leading, as far as
/// it knew, and a call on it hung: a waiting acquire for its whole wait,
/// while on the other side of a partition a new leader served. It now
/// answers UNAVAILABLE within about the leader lease, so the client
/// retries elsewhere; and it serves again once a quorum answers.
#[tokio::test]
async fn a_leader_without_a_quorum_answers_unavailable_instead_of_hanging() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let addr = cluster.node(leader).client_addr.clone();
    let holder = raw::silent_session(&addr, 60_000).await;
    let waiter = raw::silent_session(&addr, 60_000).await;
    assert!(
        raw::acquire(&addr, holder, "cut/x", None)
            .await
            .unwrap()
            .acquired
    );
    let waiting = {
        let addr = addr.clone();
        tokio::spawn(async move { raw::acquire(&addr, waiter, "cut/x", Some(60_000)).await })
    };
    raw::wait_for_waiters(&addr, "cut/x", 1).await;
    let followers: Vec<u64> = cluster
        .nodes()
        .iter()
        .map(|n| n.id)
        .filter(|id| *id != leader)
        .collect();
    for f in &followers {
        cluster.pause(*f);
    }
    let cut = std::time::Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting acquire on the cut-off leader ends well before its wait")
        .unwrap()
        .expect_err("it is not granted");
    let after = cut.elapsed();
    assert_eq!(ended.code(), tonic::Code::Unavailable, "{ended:?}");
    // A new call is refused at once, not left to the client's timeout.
    let t = std::time::Instant::now();
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        raw::acquire(&addr, holder, "cut/y", None),
    )
    .await
    .expect("answered")
    .expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    println!("INFO the waiting acquire ended {after:?} after the followers stopped");
    for f in &followers {
        cluster.resume(*f);
    }
    // Once a quorum answers, the cluster serves again.
    let give_up = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
        let addr = cluster.node(leader).client_addr.clone();
        if raw::acquire(&addr, holder, "cut/z", None).await.is_ok() {
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no service after resume"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
