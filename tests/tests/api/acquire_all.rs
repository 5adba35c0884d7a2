//! AcquireAll on a real cluster: a set of locks is granted in one log
//! entry or not at all, sets that share locks queue without deadlock
//! whatever order they name them in, and a wait given up on (a dropped
//! Rust future, a cancel of any one of its locks) leaves every queue of
//! the set; a cancel that lost the race to the grant releases the whole
//! set.

use raftlock_proto::v1 as pb;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_tests::{http_call, raw as grpc, Cluster};
use std::time::{Duration, Instant};

async fn leader_addr(cluster: &Cluster) -> String {
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.node(leader).client_addr.clone()
}

/// Sessions holding `name`, and sessions waiting for it, on `node`.
async fn who(node: &str, name: &str) -> (Vec<u64>, Vec<u64>) {
    let d = grpc::describe(node, name).await.expect("describe");
    (
        d.holders.iter().map(|h| h.session_id).collect(),
        d.waiters.iter().map(|w| w.session_id).collect(),
    )
}

/// Waits (at most 10 s) until `check` holds of `name` on `node`.
async fn until(node: &str, name: &str, check: impl Fn(&(Vec<u64>, Vec<u64>)) -> bool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let now = who(node, name).await;
        if check(&now) {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "{name}: holders and waiters {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sets_are_granted_whole_and_crossing_sets_never_deadlock() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let client = cluster.client().await;
    let ttl = Duration::from_secs(30);
    let (s1, s2, s3) = (
        client.session(ttl).await.unwrap(),
        client.session(ttl).await.unwrap(),
        client.session(ttl).await.unwrap(),
    );
    let first = s1
        .lock_all(["set/b", "set/a"])
        .acquire()
        .await
        .expect("free locks are granted together");
    let tokens: Vec<(String, u64)> = first
        .tokens()
        .into_iter()
        .map(|(n, t)| (n.to_owned(), t))
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_eq!(tokens[0].0, "set/a", "grants come in name order");
    assert_eq!(tokens[0].1, tokens[1].1, "one entry, one token: {tokens:?}");
    // A try of a set that shares a lock takes nothing, not even the free one.
    assert!(s2
        .lock_all(["set/b", "set/c"])
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert_eq!(who(&leader, "set/c").await, (vec![], vec![]));

    // Two sets queue behind the first, naming their locks in opposite
    // orders: {c, b} waits for b, then {a, c} for a and c.
    let second = {
        let s2 = s2.clone();
        tokio::spawn(async move { s2.lock_all(["set/c", "set/b"]).acquire().await })
    };
    until(&leader, "set/c", |(_, w)| w == &[s2.id()]).await;
    let third = {
        let s3 = s3.clone();
        tokio::spawn(async move { s3.lock_all(["set/a", "set/c"]).acquire().await })
    };
    until(&leader, "set/c", |(_, w)| w == &[s2.id(), s3.id()]).await;
    // c is free, but the set at the front of its queue waits for b: the
    // lock is not handed to anyone in part.
    assert_eq!(who(&leader, "set/c").await.0, Vec::<u64>::new());
    first.release().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the second set is granted")
        .unwrap()
        .unwrap();
    let t2 = second.tokens();
    assert!(t2[0].1 > tokens[0].1 && t2[0].1 == t2[1].1, "{t2:?}");
    assert_eq!(who(&leader, "set/a").await, (vec![], vec![s3.id()]));
    second.release().await.unwrap();
    let third = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("the third set is granted")
        .unwrap()
        .unwrap();
    assert_eq!(
        third.guards().iter().map(|g| g.name()).collect::<Vec<_>>(),
        ["set/a", "set/c"]
    );
    third.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_set_acquire_leaves_every_queue() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let client = cluster.client().await;
    let ttl = Duration::from_secs(30);
    let (s1, s2) = (
        client.session(ttl).await.unwrap(),
        client.session(ttl).await.unwrap(),
    );
    let held = s1.lock("drop/b").acquire().await.unwrap();
    let gave_up = {
        let s2 = s2.clone();
        tokio::spawn(async move {
            tokio::time::timeout(
                Duration::from_millis(1_500),
                s2.lock_all(["drop/a", "drop/b"])
                    .timeout(Duration::from_secs(60))
                    .acquire(),
            )
            .await
            .is_err()
        })
    };
    until(&leader, "drop/a", |(_, w)| w == &[s2.id()]).await;
    assert!(gave_up.await.unwrap(), "the set should still be waiting");
    let dropped = Instant::now();
    until(&leader, "drop/a", |now| now == &(vec![], vec![])).await;
    until(&leader, "drop/b", |(_, w)| w.is_empty()).await;
    eprintln!(
        "set gone from both queues {:?} after the drop",
        dropped.elapsed()
    );
    held.release().await.unwrap();
    assert_eq!(who(&leader, "drop/b").await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_and_grpc_a_cancel_of_one_lock_ends_the_whole_set() {
    use base64::Engine;
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{leader}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let a = grpc::silent_session(&leader, 30_000).await;
    let b = grpc::silent_session(&leader, 30_000).await;
    let b64 = |id: &[u8]| base64::engine::general_purpose::STANDARD.encode(id);

    // Over HTTP, a try of a free set: granted, one token.
    let id_a = *uuid::Uuid::now_v7().as_bytes();
    let got = http_call(
        &leader,
        "POST",
        "/v1/lock/acquire-all",
        &[],
        &format!(
            r#"{{"sessionId":"{a}","names":["http/y","http/x"],"requestId":"{}"}}"#,
            b64(&id_a)
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200, "{got:?}");
    let body = got.json();
    assert_eq!(body["acquired"], true, "{body}");
    let grants = body["grants"].as_array().unwrap();
    assert_eq!(grants.len(), 2);
    assert_eq!(grants[0]["name"], "http/x");
    assert_eq!(grants[0]["token"], grants[1]["token"]);
    // A malformed set is refused with a reason.
    let bad = http_call(
        &leader,
        "POST",
        "/v1/lock/acquire-all",
        &[],
        &format!(
            r#"{{"sessionId":"{a}","names":["http/x"],"requestId":"{}"}}"#,
            b64(uuid::Uuid::now_v7().as_bytes())
        ),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{bad:?}");

    // b waits for {x, z}; a cancel naming z takes it out of x's queue too.
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
            .acquire_all(pb::AcquireAllRequest {
                session_id: b,
                names: vec!["http/z".into(), "http/x".into()],
                request_id: id_b.to_vec(),
                wait_timeout_ms: Some(60_000),
                ..Default::default()
            })
            .await
        })
    };
    until(&leader, "http/x", |(_, w)| w == &[b]).await;
    let cancel = |id: [u8; 16], session: u64, name: &str| pb::CancelWaitRequest {
        session_id: session,
        name: name.into(),
        request_id: id.to_vec(),
    };
    let r = LockClient::new(ch.clone())
        .cancel_wait(cancel(id_b, b, "http/z"))
        .await
        .unwrap()
        .into_inner();
    assert!(r.cancelled && !r.released, "{r:?}");
    let status = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting call ends at once")
        .unwrap()
        .expect_err("a cancelled set is not granted");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(who(&leader, "http/x").await, (vec![a], vec![]));
    assert_eq!(who(&leader, "http/z").await, (vec![], vec![]));

    // A cancel after the set was granted (it lost the race) releases every
    // lock of the set.
    let r = LockClient::new(ch)
        .cancel_wait(cancel(id_a, a, "http/y"))
        .await
        .unwrap()
        .into_inner();
    assert!(r.released, "{r:?}");
    assert_eq!(who(&leader, "http/x").await, (vec![], vec![]));
    assert_eq!(who(&leader, "http/y").await, (vec![], vec![]));
}
