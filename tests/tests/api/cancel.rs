//! A wait its caller gives up on ends on the server too: a dropped Rust
//! acquire, a closed HTTP connection and an explicit `CancelWait` take the
//! waiter out of the queue within a second, the lock goes to the next live
//! waiter, and a grant that raced the cancel is released, never left held.

use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::CancelWaitRequest;
use raftlock_tests::{http_call, raw as grpc, Cluster};
use std::time::{Duration, Instant};

/// Waits (at most `within`) until `name`'s waiters are exactly `sessions`,
/// in order; panics with what it saw otherwise.
async fn waiters_become(node: &str, name: &str, sessions: &[u64], within: Duration) {
    let give_up = Instant::now() + within;
    loop {
        let d = grpc::describe(node, name).await.expect("describe");
        let now: Vec<u64> = d.waiters.iter().map(|w| w.session_id).collect();
        if now == sessions {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "{name}: waiters {now:?} after {within:?}, expected {sessions:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn leader_addr(cluster: &Cluster) -> String {
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.node(leader).client_addr.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_rust_acquire_leaves_the_queue_and_the_next_live_waiter_is_granted() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let client = cluster.client().await;
    let ttl = Duration::from_secs(30);
    let (a, b, c) = (
        client.session(ttl).await.unwrap(),
        client.session(ttl).await.unwrap(),
        client.session(ttl).await.unwrap(),
    );
    let held = a.lock("cancel/rust").acquire().await.unwrap();
    // b's caller stops waiting after a moment: the future is dropped.
    let gave_up = {
        let b = b.clone();
        tokio::spawn(async move {
            tokio::time::timeout(
                Duration::from_millis(800),
                b.lock("cancel/rust")
                    .timeout(Duration::from_secs(60))
                    .acquire(),
            )
            .await
            .is_err()
        })
    };
    grpc::wait_for_waiters(&leader, "cancel/rust", 1).await;
    let next = {
        let c = c.clone();
        tokio::spawn(async move {
            c.lock("cancel/rust")
                .timeout(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    waiters_become(
        &leader,
        "cancel/rust",
        &[b.id(), c.id()],
        Duration::from_secs(10),
    )
    .await;
    assert!(
        gave_up.await.unwrap(),
        "b's acquire should still be waiting"
    );
    let dropped = Instant::now();
    waiters_become(&leader, "cancel/rust", &[c.id()], Duration::from_secs(1)).await;
    eprintln!("waiter gone {:?} after the drop", dropped.elapsed());
    held.release().await.unwrap();
    let granted = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("c is granted")
        .unwrap()
        .expect("c's acquire");
    let d = grpc::describe(&leader, "cancel/rust").await.unwrap();
    let holders: Vec<u64> = d.holders.iter().map(|h| h.session_id).collect();
    assert_eq!(holders, vec![c.id()], "{d:?}");
    assert_eq!(granted.grant().session_id, c.id());
    assert!(d.waiters.is_empty(), "{d:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_http_connection_cancels_its_wait() {
    use base64::Engine;
    use tokio::io::AsyncWriteExt;
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let a = grpc::silent_session(&leader, 30_000).await;
    let b = grpc::silent_session(&leader, 30_000).await;
    let held = grpc::acquire(&leader, a, "cancel/http", None)
        .await
        .unwrap();
    assert!(held.acquired);
    let request_id =
        base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::now_v7().as_bytes());
    let body = format!(
        r#"{{"sessionId":"{b}","name":"cancel/http","requestId":"{request_id}","waitTimeoutMs":"60000"}}"#
    );
    // An HTTP/1.1 client that sends a waiting acquire, then goes away.
    let mut s = tokio::net::TcpStream::connect(&leader).await.unwrap();
    let req = format!(
        "POST /v1/lock/acquire HTTP/1.1\r\nHost: {leader}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    waiters_become(&leader, "cancel/http", &[b], Duration::from_secs(10)).await;
    drop(s);
    let closed = Instant::now();
    waiters_become(&leader, "cancel/http", &[], Duration::from_secs(1)).await;
    eprintln!("waiter gone {:?} after the close", closed.elapsed());
    // The lock stays with a; releasing it leaves it free, not b's.
    grpc::release(&leader, a, "cancel/http", held.grant.unwrap().token)
        .await
        .unwrap();
    let d = grpc::describe(&leader, "cancel/http").await.unwrap();
    assert!(d.holders.is_empty() && d.waiters.is_empty(), "{d:?}");
    // An explicit cancel over HTTP answers in JSON: nothing to cancel now.
    let a2 = http_call(
        &leader,
        "POST",
        "/v1/lock/cancel-wait",
        &[],
        &format!(r#"{{"sessionId":"{b}","name":"cancel/http","requestId":"{request_id}"}}"#),
    )
    .await
    .unwrap();
    assert_eq!(a2.status, 200, "{a2:?}");
    assert_eq!(a2.json(), serde_json::json!({}), "{a2:?}");
}

/// A caller that goes away while its waiting acquire is still committing
/// (both followers paused for a moment) cancels it too: the wait was
/// guarded only once the acquire was answered QUEUED, so it stayed queued,
/// and the lock went to the gone caller's session at the next release.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_closed_while_its_acquire_commits_cancels_its_wait() {
    use base64::Engine;
    use tokio::io::AsyncWriteExt;
    let mut cluster = Cluster::start(3).await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let leader = cluster.node(leader_id).client_addr.clone();
    let a = grpc::silent_session(&leader, 60_000).await;
    let b = grpc::silent_session(&leader, 60_000).await;
    let held = grpc::acquire(&leader, a, "cancel/early", None)
        .await
        .unwrap();
    let request_id =
        base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::now_v7().as_bytes());
    let body = format!(
        r#"{{"sessionId":"{b}","name":"cancel/early","requestId":"{request_id}","waitTimeoutMs":"60000"}}"#
    );
    let req = format!(
        "POST /v1/lock/acquire HTTP/1.1\r\nHost: {leader}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(&leader).await.unwrap();
    // Nothing commits while both followers are stopped: for less than an
    // election timeout, so that no one stands when they resume.
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader_id).collect();
    for id in &followers {
        cluster.pause(*id);
    }
    s.write_all(req.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    // Gone before its acquire can have committed.
    drop(s);
    tokio::time::sleep(Duration::from_millis(90)).await;
    for id in &followers {
        cluster.resume(*id);
    }
    // The acquire commits and queues; its cancel, proposed a moment after
    // the close, follows it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = grpc::describe(&leader, "cancel/early").await.unwrap();
    assert!(d.waiters.is_empty(), "the gone caller still waits: {d:?}");
    grpc::release(&leader, a, "cancel/early", held.grant.unwrap().token)
        .await
        .unwrap();
    let d = grpc::describe(&leader, "cancel/early").await.unwrap();
    assert!(d.holders.is_empty() && d.waiters.is_empty(), "{d:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_wait_removes_a_waiter_and_releases_a_grant_that_won_the_race() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{leader}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let a = grpc::silent_session(&leader, 30_000).await;
    let b = grpc::silent_session(&leader, 30_000).await;
    let held = grpc::acquire(&leader, a, "cancel/rpc", None).await.unwrap();
    let token_a = held.grant.unwrap().token;

    // A waiting call cancelled by another call fails with WAIT_CANCELLED
    // at once, long before its own timeout.
    let id_b = *uuid::Uuid::now_v7().as_bytes();
    let waiting = {
        let leader = leader.clone();
        tokio::spawn(async move {
            LockClient::new(
                tonic::transport::Endpoint::from_shared(format!("http://{leader}"))
                    .unwrap()
                    .connect()
                    .await
                    .unwrap(),
            )
            .acquire(raftlock_proto::v1::AcquireRequest {
                session_id: b,
                name: "cancel/rpc".into(),
                request_id: id_b.to_vec(),
                wait_timeout_ms: Some(60_000),
                ..Default::default()
            })
            .await
        })
    };
    grpc::wait_for_waiters(&leader, "cancel/rpc", 1).await;
    let cancel = |id: [u8; 16], session: u64| CancelWaitRequest {
        session_id: session,
        name: "cancel/rpc".into(),
        request_id: id.to_vec(),
    };
    let r = LockClient::new(ch.clone())
        .cancel_wait(cancel(id_b, b))
        .await
        .unwrap()
        .into_inner();
    assert!(r.cancelled && !r.released, "{r:?}");
    let status = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting call ends at once")
        .unwrap()
        .expect_err("a cancelled wait is not granted");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(
        raftlock_proto::reason::of(&status).map(|r| r.as_str()),
        Some("WAIT_CANCELLED"),
        "{status:?}"
    );
    // Again: idempotent, nothing left to do.
    let again = LockClient::new(ch.clone())
        .cancel_wait(cancel(id_b, b))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.cancelled && !again.released, "{again:?}");

    // The grant won: b's new acquire is granted on a's release before b's
    // cancel arrives. The cancel releases it.
    let id_b2 = *uuid::Uuid::now_v7().as_bytes();
    let waiting = {
        let leader = leader.clone();
        tokio::spawn(async move {
            grpc::acquire_waiting_with_id(&leader, b, "cancel/rpc", id_b2, 60_000).await
        })
    };
    grpc::wait_for_waiters(&leader, "cancel/rpc", 1).await;
    grpc::release(&leader, a, "cancel/rpc", token_a)
        .await
        .unwrap();
    let granted = waiting.await.unwrap().unwrap();
    let token_b = granted.grant.unwrap().token;
    let r = LockClient::new(ch.clone())
        .cancel_wait(cancel(id_b2, b))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.cancelled && r.released && r.token == token_b, "{r:?}");
    let d = grpc::describe(&leader, "cancel/rpc").await.unwrap();
    assert!(d.holders.is_empty(), "the raced grant is released: {d:?}");

    // The cancel overtook its acquire (the caller gave up while the acquire
    // was still on its way): the acquire is refused when it lands, and the
    // free lock is not granted to a caller that is gone.
    let id_b3 = *uuid::Uuid::now_v7().as_bytes();
    let r = LockClient::new(ch.clone())
        .cancel_wait(cancel(id_b3, b))
        .await
        .unwrap()
        .into_inner();
    assert!(r.cancelled && !r.released, "{r:?}");
    let late = grpc::acquire_waiting_with_id(&leader, b, "cancel/rpc", id_b3, 60_000)
        .await
        .expect_err("an acquire cancelled before it landed is refused");
    assert_eq!(
        raftlock_proto::reason::of(&late).map(|r| r.as_str()),
        Some("WAIT_CANCELLED"),
        "{late:?}"
    );
    let d = grpc::describe(&leader, "cancel/rpc").await.unwrap();
    assert!(d.holders.is_empty() && d.waiters.is_empty(), "{d:?}");
}

/// A grant that raced the cancel of its wait, or a guard dropped without a
/// release, leaves the lock the session's until the cancel or release
/// lands: the same session's next acquisition of that lock waits for it
/// instead of being refused `ALREADY_HELD` for a hold its caller never saw.
#[tokio::test(flavor = "multi_thread")]
async fn acquiring_again_right_after_giving_up_a_wait_is_not_refused_already_held() {
    let cluster = Cluster::start(1).await;
    let leader = leader_addr(&cluster).await;
    let client = cluster.client().await;
    let ttl = Duration::from_secs(30);
    let a = client.session(ttl).await.unwrap();
    let b = client.session(ttl).await.unwrap();
    let name = "cancel/again";
    for round in 0..5 {
        let held = a.lock(name).acquire().await.unwrap();
        let waiting = {
            let b = b.clone();
            tokio::spawn(async move {
                b.lock(name)
                    .timeout(Duration::from_secs(60))
                    .acquire()
                    .await
            })
        };
        grpc::wait_for_waiters(&leader, name, 1).await;
        held.release().await.unwrap();
        // Granted on the server; b's caller gives up just then, whether or
        // not its answer arrived (a dropped guard is given back as well).
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let d = grpc::describe(&leader, name).await.unwrap();
            if d.holders.iter().any(|h| h.session_id == b.id()) {
                break;
            }
            assert!(
                Instant::now() < give_up,
                "round {round}: b never granted: {d:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        waiting.abort();
        let _ = waiting.await;
        let again = b
            .lock(name)
            .try_acquire()
            .await
            .unwrap_or_else(|e| panic!("round {round}: b's next acquisition refused: {e}"));
        let guard =
            again.unwrap_or_else(|| panic!("round {round}: lock busy, held by nobody else"));
        guard.release().await.unwrap();
    }
}
