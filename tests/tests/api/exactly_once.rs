//! Exactly-once requests on real clusters (DESIGN.md, "Grant"): a late
//! duplicate never produces a second grant, and a retried session creation
//! never leaves an orphan session.

use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::session_client::SessionClient;
use raftlock_proto::v1::*;
use raftlock_tests::raw::sequenced;
use raftlock_tests::{raw, Cluster};
use std::time::Duration;

async fn lock_client(addr: &str) -> LockClient<tonic::transport::Channel> {
    LockClient::connect(format!("http://{addr}")).await.unwrap()
}

async fn leader_addr(cluster: &Cluster) -> String {
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.nodes()[(leader - 1) as usize].client_addr.clone()
}

/// Request ids alone were remembered for a session's last 256 finished
/// acquisitions: a duplicate delayed past that was granted again, a grant
/// its client never saw, held until the session ended.
#[tokio::test]
async fn a_late_duplicate_of_an_acquire_is_refused_not_granted_again() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let session = raw::silent_session(&leader, 60_000).await;
    let mut locks = lock_client(&leader).await;
    let first = sequenced(session, "once/l", 1, 1, 1);
    let g = locks.acquire(first.clone()).await.unwrap().into_inner();
    assert!(g.acquired);
    raw::release(&leader, session, "once/l", g.grant.unwrap().token)
        .await
        .unwrap();
    for seq in 2..=300u64 {
        // A client acknowledges each answer before its next request.
        let r = locks
            .acquire(sequenced(session, "once/l", seq as u128, seq, seq))
            .await
            .unwrap()
            .into_inner();
        raw::release(&leader, session, "once/l", r.grant.unwrap().token)
            .await
            .unwrap();
    }
    // The first attempt, delayed in the network all this time, arrives.
    let late = locks.acquire(first).await;
    let status = late.expect_err("a late duplicate must not be granted");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    let d = raw::describe(&leader, "once/l").await.unwrap();
    assert!(d.holders.is_empty(), "nobody holds the lock: {d:?}");
}

/// A lock set's duplicate was recognised only through the session's last
/// 256 finished acquisitions, as an unnumbered acquire's: one delayed past
/// that was granted again, every lock of the set held by a session whose
/// client never saw the grant.
#[tokio::test]
async fn a_late_duplicate_of_a_lock_set_is_refused_not_granted_again() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let session = raw::silent_session(&leader, 60_000).await;
    let mut locks = lock_client(&leader).await;
    let set = |seq: u64| AcquireAllRequest {
        session_id: session,
        names: vec!["once/a".into(), "once/b".into()],
        request_id: u128::from(seq).to_be_bytes().to_vec(),
        seq,
        acked_below: seq,
        ..Default::default()
    };
    let release_all = |grants: Vec<Grant>| {
        let leader = leader.clone();
        async move {
            for g in grants {
                raw::release(&leader, session, &g.name, g.token)
                    .await
                    .unwrap();
            }
        }
    };
    let first = locks.acquire_all(set(1)).await.unwrap().into_inner();
    assert!(first.acquired);
    release_all(first.grants).await;
    for seq in 2..=300u64 {
        // A client acknowledges each answer before its next request.
        let r = locks.acquire_all(set(seq)).await.unwrap().into_inner();
        assert!(r.acquired, "{r:?}");
        release_all(r.grants).await;
    }
    // The first attempt, delayed in the network all this time, arrives.
    let late = locks.acquire_all(set(1)).await;
    let status = late.expect_err("a late duplicate of a set must not be granted");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert_eq!(
        raftlock_proto::reason::of(&status).map(|r| r.as_str()),
        Some("REQUEST_ACKNOWLEDGED"),
        "{status:?}"
    );
    for name in ["once/a", "once/b"] {
        let d = raw::describe(&leader, name).await.unwrap();
        assert!(d.holders.is_empty(), "nobody holds {name}: {d:?}");
    }
}

#[tokio::test]
async fn a_busy_try_lock_retried_after_the_lock_is_freed_stays_busy() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let (a, b) = (
        raw::silent_session(&leader, 60_000).await,
        raw::silent_session(&leader, 60_000).await,
    );
    let held = raw::acquire(&leader, b, "once/busy", None).await.unwrap();
    let held = held.grant.unwrap();
    let mut locks = lock_client(&leader).await;
    let try_lock = sequenced(a, "once/busy", 7, 1, 1);
    let first = locks.acquire(try_lock.clone()).await.unwrap().into_inner();
    assert!(!first.acquired);
    let named = |r: &AcquireResponse| -> Vec<(u64, u64, String)> {
        r.holders
            .iter()
            .map(|h| (h.session_id, h.token, h.name.clone()))
            .collect()
    };
    assert_eq!(named(&first), vec![(b, held.token, "once/busy".to_owned())]);
    raw::release(&leader, b, "once/busy", held.token)
        .await
        .unwrap();
    // The caller lost the answer and retries: it gets the answer the first
    // attempt had, not a grant it would not know to release, and not that
    // verdict beside the holders of now (busy, held by nobody).
    let retry = locks.acquire(try_lock).await.unwrap().into_inner();
    assert!(!retry.acquired, "{retry:?}");
    assert_eq!(named(&retry), named(&first), "{retry:?}");
    let d = raw::describe(&leader, "once/busy").await.unwrap();
    assert!(d.holders.is_empty(), "{d:?}");
}

#[tokio::test]
async fn a_retried_session_creation_returns_the_session_the_first_attempt_made() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let mut sessions = SessionClient::connect(format!("http://{leader}"))
        .await
        .unwrap();
    let create = CreateSessionRequest {
        ttl_ms: 60_000,
        client_name: "retry".into(),
        creation_key: 42u128.to_be_bytes().to_vec(),
        ..Default::default()
    };
    let first = sessions.create(create.clone()).await.unwrap().into_inner();
    // Its answer was lost; the retry:
    let again = sessions.create(create.clone()).await.unwrap().into_inner();
    assert_eq!(first.session_id, again.session_id);
    let client = cluster.client().await;
    let status = client.status().await.unwrap();
    assert_eq!(status.sessions, 1, "no orphan session");
    // A malformed key is refused, not ignored.
    let bad = sessions
        .create(CreateSessionRequest {
            creation_key: vec![1, 2, 3],
            ..create
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    // And so is an acknowledgement above the request's own number.
    let mut locks = lock_client(&leader).await;
    let bad = locks
        .acquire(sequenced(first.session_id, "x", 1, 1, 2))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
}

/// One long wait pinned the exactly-once window: with a campaign waiting,
/// the 4,096th short lock after it was refused TOO_MANY_UNACKNOWLEDGED
/// (about seven minutes for a service taking ten locks a second). The
/// client now acknowledges its answers call by call: ten minutes' worth
/// of twenty locks a second beside one hour-long wait, none refused.
#[tokio::test(flavor = "multi_thread")]
async fn short_locks_beside_a_long_wait_are_never_refused_for_unacknowledged_answers() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let holder = client.session(Duration::from_secs(60)).await.unwrap();
    let _leading = holder.lock("stall/campaign").acquire().await.unwrap();
    let s = client.session(Duration::from_secs(60)).await.unwrap();
    let waiting = {
        let s = s.clone();
        tokio::spawn(async move {
            s.lock("stall/campaign")
                .timeout(Duration::from_secs(3_600))
                .acquire()
                .await
        })
    };
    raftlock_tests::raw::wait_for_waiters(&leader_addr(&cluster).await, "stall/campaign", 1).await;
    // Ten minutes of twenty short locks a second: three times the window.
    let n = 20 * 600 + 200;
    let started = std::time::Instant::now();
    for i in 0..n {
        let g = s
            .lock("stall/short")
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("short lock {i} beside the wait: {e}"));
        g.release().await.unwrap();
    }
    eprintln!("{n} short locks beside one wait in {:?}", started.elapsed());
    assert!(!waiting.is_finished(), "the long wait still waits");
    waiting.abort();
}
