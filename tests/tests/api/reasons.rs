//! Every refusal carries a machine-readable reason (`google.rpc.ErrorInfo`,
//! domain `raftlock.v1`) that clients map without reading the message: a
//! real cluster is made to refuse in each way a client can cause, and both
//! the raw status and the client library's typed error are checked.

use raftlock_client::Error;
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::session_client::SessionClient;
use raftlock_proto::v1::*;
use raftlock_tests::raw::sequenced;
use raftlock_tests::{raw, Cluster};
use std::time::Duration;

fn expect<T: std::fmt::Debug>(res: Result<T, tonic::Status>, want: Reason) {
    match res {
        Ok(v) => panic!("expected {want}, got {v:?}"),
        Err(s) => {
            assert_eq!(reason::of(&s), Some(want), "{s:?}");
            assert_eq!(s.code(), want.code(), "{s:?}");
        }
    }
}

#[tokio::test]
async fn every_refusal_a_client_can_cause_names_its_reason() {
    let cluster = Cluster::start_with(
        3,
        &[
            "--max-locks-per-session",
            "2",
            "--max-waiters-per-lock",
            "2",
            "--max-concurrent-requests-per-connection",
            "1",
        ],
    )
    .await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.wait_for_followers(Duration::from_secs(10)).await;
    let leader = cluster.nodes()[(leader_id - 1) as usize]
        .client_addr
        .clone();
    let follower = cluster
        .nodes()
        .iter()
        .find(|n| n.id != leader_id)
        .map(|n| n.client_addr.clone())
        .unwrap();

    // NOT_LEADER, with the leader's address beside it.
    let s = raw::create_session(&follower, 10_000).await.unwrap_err();
    assert_eq!(reason::of(&s), Some(Reason::NotLeader), "{s:?}");
    assert!(s
        .metadata()
        .get(raftlock_proto::LEADER_METADATA_KEY)
        .is_some());

    // Malformed requests.
    expect(raw::create_session(&leader, 1).await, Reason::TtlOutOfRange);
    let s1 = raw::silent_session(&leader, 60_000).await;
    expect(
        raw::acquire(&leader, s1, "", None).await,
        Reason::InvalidName,
    );
    let mut locks = LockClient::new(cluster.access.channel(&leader).await.unwrap());
    expect(
        locks
            .acquire(AcquireRequest {
                session_id: s1,
                name: "r/a".into(),
                request_id: vec![1, 2, 3],
                ..Default::default()
            })
            .await,
        Reason::InvalidArgument,
    );
    expect(
        raw::acquire(&leader, 987_654_321, "r/a", None).await,
        Reason::SessionNotFound,
    );

    // The lock's state.
    expect(raw::release(&leader, s1, "r/a", 1).await, Reason::NotHolder);
    let held = raw::acquire(&leader, s1, "r/b", None).await.unwrap();
    let token = held.grant.unwrap().token;
    expect(
        raw::release(&leader, s1, "r/b", token + 1).await,
        Reason::StaleToken,
    );
    expect(
        raw::acquire(&leader, s1, "r/b", None).await,
        Reason::AlreadyHeld,
    );
    let sem = |session: u64, permits: u32| AcquireRequest {
        session_id: session,
        name: "r/sem".into(),
        request_id: uuid::Uuid::now_v7().as_bytes().to_vec(),
        permits,
        ..Default::default()
    };
    let s2 = raw::silent_session(&leader, 60_000).await;
    locks.acquire(sem(s2, 3)).await.unwrap();
    let s3 = raw::silent_session(&leader, 60_000).await;
    expect(locks.acquire(sem(s3, 2)).await, Reason::PermitsMismatch);

    // Waits: s2 and s3 queue behind s1's "r/b" (the limit is 2 waiters).
    let wait = |session: u64| {
        let leader = leader.clone();
        tokio::spawn(async move { raw::acquire(&leader, session, "r/b", Some(20_000)).await })
    };
    // One after the other, so the queue's order is known.
    let w2 = wait(s2);
    raw::wait_for_waiters(&leader, "r/b", 1).await;
    let w3 = wait(s3);
    raw::wait_for_waiters(&leader, "r/b", 2).await;
    expect(
        raw::acquire(&leader, s2, "r/b", Some(20_000)).await,
        Reason::AlreadyWaiting,
    );
    let s4 = raw::silent_session(&leader, 60_000).await;
    expect(
        raw::acquire(&leader, s4, "r/b", Some(20_000)).await,
        Reason::TooManyWaiters,
    );
    raw::release(&leader, s1, "r/b", token).await.unwrap();
    let granted = w2.await.unwrap().unwrap().grant.unwrap();
    raw::release(&leader, s2, "r/b", granted.token)
        .await
        .unwrap();
    w3.await.unwrap().unwrap();

    // A wait that runs out: s4 behind s3's "r/b".
    let timed_out = raw::acquire(&leader, s4, "r/b", Some(300))
        .await
        .unwrap_err();
    assert!(
        matches!(
            reason::of(&timed_out),
            Some(Reason::WaitTimedOut | Reason::WaitCancelled)
        ),
        "{timed_out:?}"
    );

    // Per-session limit: s1 holds "r/c" and "r/d" (two), not a third.
    raw::acquire(&leader, s1, "r/c", None).await.unwrap();
    raw::acquire(&leader, s1, "r/d", None).await.unwrap();
    expect(
        raw::acquire(&leader, s1, "r/e", None).await,
        Reason::TooManyLocks,
    );

    // Exactly-once retries.
    let s5 = raw::silent_session(&leader, 60_000).await;
    let first = locks
        .acquire(sequenced(s5, "r/x", 11, 1, 1))
        .await
        .unwrap()
        .into_inner();
    raw::release(&leader, s5, "r/x", first.grant.unwrap().token)
        .await
        .unwrap();
    expect(
        locks.acquire(sequenced(s5, "r/x", 11, 1, 1)).await,
        Reason::RequestReleased,
    );
    locks.acquire(sequenced(s5, "r/y", 12, 2, 2)).await.unwrap();
    expect(
        locks.acquire(sequenced(s5, "r/x", 11, 1, 1)).await,
        Reason::RequestAcknowledged,
    );

    // Per-connection limit: one call at a time on a connection.
    let channel = cluster.access.channel(&leader).await.unwrap();
    let s6 = raw::silent_session(&leader, 60_000).await;
    let mut busy = LockClient::new(channel.clone());
    let waiting = tokio::spawn(async move {
        busy.acquire(AcquireRequest {
            session_id: s6,
            name: "r/c".into(),
            request_id: uuid::Uuid::now_v7().as_bytes().to_vec(),
            wait_timeout_ms: Some(2_000),
            ..Default::default()
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    expect(
        SessionClient::new(channel)
            .create(CreateSessionRequest {
                ttl_ms: 10_000,
                ..Default::default()
            })
            .await,
        Reason::LimitExceeded,
    );
    let _ = waiting.await;

    // Membership: an unknown node cannot become a voter.
    expect(
        ClusterClient::new(cluster.access.channel(&leader).await.unwrap())
            .change_membership(ChangeMembershipRequest {
                voters: vec![1, 2, 3, 99],
                retain_as_learners: true,
                ..Default::default()
            })
            .await,
        Reason::MembershipChangeRefused,
    );
}

/// The client library turns reasons into typed errors: the common ones,
/// through its own API on a real cluster.
#[tokio::test]
async fn the_client_library_reports_reasons_as_typed_errors() {
    let cluster = Cluster::start_with(3, &["--max-locks-per-session", "1"]).await;
    let client = cluster.client().await;
    let s = client.session(Duration::from_secs(30)).await.unwrap();
    let g = s.lock("typed/a").acquire().await.unwrap();
    let other = client.session(Duration::from_secs(30)).await.unwrap();
    let stale = raftlock_client::Grant {
        token: g.token() + 1,
        ..g.grant().clone()
    };
    match s.release(&stale).await {
        Err(Error::StaleToken(_)) => {}
        other => panic!("expected StaleToken, got {other:?}"),
    }
    match s.lock("typed/b").try_acquire().await {
        Err(Error::TooManyLocks(_)) => {}
        Err(other) => panic!("expected TooManyLocks, got {other:?}"),
        Ok(_) => panic!("expected TooManyLocks, got a grant"),
    }
    match s.lock("").acquire().await {
        Err(Error::InvalidName(_)) => {}
        Err(other) => panic!("expected InvalidName, got {other:?}"),
        Ok(_) => panic!("expected InvalidName, got a grant"),
    }
    let mine = g.grant().clone();
    g.release().await.unwrap();
    match s.release(&mine).await {
        Err(Error::NotHolder(_)) => {}
        other => panic!("expected NotHolder, got {other:?}"),
    }
    drop(other);
    match client.change_membership(&[1, 2, 3, 99], true).await {
        Err(Error::MembershipChangeRefused(_)) => {}
        other => panic!("expected MembershipChangeRefused, got {other:?}"),
    }
}
