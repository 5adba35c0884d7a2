//! Bad requests on the client port: every field of every call, wrong in every way that matters.

use super::fixtures::*;

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_with_a_reason_and_change_nothing() {
    let cluster = Cluster::start(3).await;
    let b = baseline(&cluster).await;
    let leader = b.leader_addr.clone();
    let follower = cluster
        .nodes()
        .iter()
        .find(|n| n.id != b.leader)
        .unwrap()
        .client_addr
        .clone();
    let acc = Access::default();
    let ch = connect(&leader).await;
    let mut locks = LockClient::new(ch.clone());
    let mut sessions = SessionClient::new(ch.clone());
    let mut election = ElectionClient::new(ch.clone());
    let other = sessions
        .create(CreateSessionRequest {
            ttl_ms: 60_000,
            client_name: "other".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let acquire = |name: String| AcquireRequest {
        session_id: other,
        name,
        request_id: rid(),
        ..Default::default()
    };
    let place = "client port, Lock.Acquire";

    // --- Names ---
    let before = applied(&acc, &leader).await;
    refused(
        "lock name empty",
        place,
        locks.acquire(acquire(String::new())).await,
        Code::InvalidArgument,
        "must not be empty",
    );
    refused(
        "lock name 513 bytes",
        place,
        locks.acquire(acquire("n".repeat(513))).await,
        Code::InvalidArgument,
        "513 bytes, longer than the limit of 512",
    );
    refused(
        "lock name 514 bytes of 2-byte UTF-8 (\"é\" x 257)",
        place,
        locks.acquire(acquire("é".repeat(257))).await,
        Code::InvalidArgument,
        "514 bytes",
    );
    refused(
        "lock name empty, sent to a follower",
        "client port (follower), Lock.Acquire",
        LockClient::new(connect(&follower).await)
            .acquire(acquire(String::new()))
            .await,
        Code::InvalidArgument,
        "must not be empty",
    );
    refused(
        "lock name 513 bytes",
        "client port, Lock.Describe",
        locks
            .describe(DescribeRequest {
                name: "n".repeat(513),
            })
            .await,
        Code::InvalidArgument,
        "longer than the limit",
    );
    refused(
        "lock name empty",
        "client port, Lock.Release",
        locks
            .release(ReleaseRequest {
                session_id: other,
                name: String::new(),
                token: 1,
            })
            .await,
        Code::InvalidArgument,
        "must not be empty",
    );
    refused(
        "election name empty",
        "client port, Election.Campaign",
        election
            .campaign(CampaignRequest {
                name: String::new(),
                session_id: other,
                request_id: rid(),
                value: vec![],
                wait_timeout_ms: Some(0),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "must not be empty",
    );
    let edge = applied(&acc, &leader).await - before;
    let before = applied(&acc, &leader).await;
    // Invalid UTF-8 in a proto3 string: refused by the decoder, before any
    // handler runs. The field's length cuts "é" (C3 A9) after its first byte.
    let bad_utf8 = "\u{8}\u{1}\u{12}\u{1}é"; // session_id=1, name=[C3], then A9
    refused(
        "lock name invalid UTF-8 (name field = byte C3)",
        place,
        LockClient::new(raw(&ch, grpc_message(0, 6, bad_utf8)))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "not UTF-8",
    );
    refused(
        "lock name invalid UTF-8 (name field = byte C3)",
        "client port, Lock.Release",
        LockClient::new(raw(&ch, grpc_message(0, 6, bad_utf8)))
            .release(ReleaseRequest::default())
            .await,
        Code::Internal,
        "not UTF-8",
    );
    refused(
        "client_name invalid UTF-8",
        "client port, Session.Create",
        SessionClient::new(raw(&ch, grpc_message(0, 4, "\u{12}\u{1}é")))
            .create(CreateSessionRequest::default())
            .await,
        Code::Internal,
        "not UTF-8",
    );
    refused(
        "lock name with a control character (\"a\\nb\")",
        place,
        locks.acquire(acquire("a\nb".into())).await,
        Code::InvalidArgument,
        "control characters",
    );
    let written = applied(&acc, &leader).await - before;
    println!("INFO invalid UTF-8 x3 and a control-character name wrote {written} log entries");
    assert_eq!(
        written, 0,
        "the decoder and the edge refuse these before the log"
    );
    // The longest name is fine.
    let g = locks
        .acquire(acquire("n".repeat(512)))
        .await
        .unwrap()
        .into_inner();
    assert!(g.acquired);
    locks
        .release(ReleaseRequest {
            session_id: other,
            name: "n".repeat(512),
            token: g.grant.unwrap().token,
        })
        .await
        .unwrap();
    observed_ok(
        "lock name 512 bytes (the limit)",
        place,
        "acquired, then released",
    );
    println!("INFO edge refusals of names wrote {edge} log entries");
    assert_eq!(edge, 0, "bad names are refused before the log");
    assert_intact(&cluster, &b, "names").await;

    // --- TTLs, waits, sizes, fields ---
    let create = |ttl_ms| CreateSessionRequest {
        ttl_ms,
        client_name: "ttl".into(),
        ..Default::default()
    };
    for ttl in [0, 999, 600_001, u64::MAX] {
        refused(
            &format!("session TTL {ttl} ms"),
            "client port, Session.Create",
            sessions.create(create(ttl)).await,
            Code::InvalidArgument,
            &format!("ttl_ms {ttl} is out of this cluster's range 1000..=600000 ms"),
        );
    }
    refused(
        "session TTL 0 ms, sent to a follower",
        "client port (follower), Session.Create",
        SessionClient::new(connect(&follower).await)
            .create(create(0))
            .await,
        Code::InvalidArgument,
        "out of this cluster's range",
    );
    refused(
        "client_name 257 bytes",
        "client port, Session.Create",
        sessions
            .create(CreateSessionRequest {
                ttl_ms: 5_000,
                client_name: "c".repeat(257),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "client name is 257 bytes, more than the limit of 256",
    );
    refused(
        "wait_timeout_ms u64::MAX",
        place,
        locks
            .acquire(AcquireRequest {
                wait_timeout_ms: Some(u64::MAX),
                ..acquire("hostile/w".into())
            })
            .await,
        Code::InvalidArgument,
        "more than the limit of 3600000 ms",
    );
    refused(
        "wait_timeout_ms 3600001",
        "client port, Election.Campaign",
        election
            .campaign(CampaignRequest {
                name: "hostile/e".into(),
                session_id: other,
                request_id: rid(),
                value: vec![],
                wait_timeout_ms: Some(3_600_001),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "more than the limit of 3600000 ms",
    );
    for len in [0, 3, 17] {
        refused(
            &format!("request_id of {len} bytes"),
            place,
            locks
                .acquire(AcquireRequest {
                    request_id: vec![7; len],
                    ..acquire("hostile/r".into())
                })
                .await,
            Code::InvalidArgument,
            &format!("request_id must be 16 bytes (a UUID), got {len}"),
        );
    }
    refused(
        "lock mode 7 (not in the enum)",
        place,
        locks
            .acquire(AcquireRequest {
                mode: 7,
                ..acquire("hostile/m".into())
            })
            .await,
        Code::InvalidArgument,
        "unknown lock mode 7",
    );
    let before = applied(&acc, &leader).await;
    refused(
        "metadata 4097 bytes",
        place,
        locks
            .acquire(AcquireRequest {
                metadata: vec![0; 4097],
                ..acquire("hostile/meta".into())
            })
            .await,
        Code::InvalidArgument,
        "metadata is 4097 bytes, more than the limit of 4096",
    );
    let written = applied(&acc, &leader).await - before;
    println!("INFO metadata 4097 bytes was refused at the edge: {written} log entries written");
    assert_eq!(written, 0, "oversized metadata is refused before the log");
    refused(
        "election value 4097 bytes",
        "client port, Election.Campaign",
        election
            .campaign(CampaignRequest {
                name: "hostile/e".into(),
                session_id: other,
                request_id: rid(),
                value: vec![0; 4097],
                wait_timeout_ms: Some(0),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "value is 4097 bytes, more than the limit of 4096",
    );
    refused(
        "request message 70000 bytes (metadata), over --max-request-bytes 65536",
        place,
        locks
            .acquire(AcquireRequest {
                metadata: vec![0; 70_000],
                ..acquire("hostile/big".into())
            })
            .await,
        Code::OutOfRange,
        "the limit is: 65536 bytes",
    );
    let mut big_header = tonic::Request::new(acquire("hostile/hdr".into()));
    big_header
        .metadata_mut()
        .insert("x-junk", "j".repeat(16 << 10).parse().unwrap());
    // Refused by HTTP/2 before gRPC sees it: an HTTP 431 answer, which
    // gRPC clients report as UNKNOWN.
    refused(
        "gRPC metadata (HTTP/2 headers) 16 KiB, over --max-metadata-bytes 8192",
        place,
        locks.acquire(big_header).await,
        Code::Unknown,
        "HTTP status code 431",
    );
    let v = locks
        .list(ListRequest {
            prefix: String::new(),
            page_token: "\u{10FFFF}".into(),
            limit: u32::MAX,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(v.locks.is_empty());
    observed_ok(
        "List limit u32::MAX, page_token U+10FFFF",
        "client port, Lock.List",
        "empty page (limit clamped to 1000)",
    );
    assert_intact(&cluster, &b, "TTLs, waits and sizes").await;

    // --- Sessions ---
    let before = applied(&acc, &leader).await;
    refused(
        "unknown session 999999",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: 999_999,
                ..acquire("hostile/s".into())
            })
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    println!(
        "INFO an acquire by an unknown session wrote {} log entries",
        applied(&acc, &leader).await - before
    );
    refused(
        "unknown session 999999, waiting acquire (wait 10 s)",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: 999_999,
                wait_timeout_ms: Some(10_000),
                ..acquire("hostile/s".into())
            })
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    refused(
        "unknown session 999999",
        "client port, Session.KeepAlive",
        keep_alive_once(ch.clone(), 999_999).await,
        Code::NotFound,
        "session 999999 not found",
    );
    refused(
        "unknown session 999999",
        "client port, Session.Close",
        sessions
            .close(CloseSessionRequest {
                session_id: 999_999,
            })
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    refused(
        "session 0",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: 0,
                ..acquire("hostile/s".into())
            })
            .await,
        Code::InvalidArgument,
        "session_id is required",
    );
    refused(
        "session 0",
        "client port, Session.Close",
        sessions.close(CloseSessionRequest { session_id: 0 }).await,
        Code::InvalidArgument,
        "session_id is required",
    );
    refused(
        "session 0",
        "client port, Session.KeepAlive",
        keep_alive_once(ch.clone(), 0).await,
        Code::InvalidArgument,
        "session_id is required",
    );
    refused(
        "session u64::MAX",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: u64::MAX,
                ..acquire("hostile/s".into())
            })
            .await,
        Code::NotFound,
        "not found",
    );
    assert_intact(&cluster, &b, "unknown sessions").await;

    // --- Tokens and other sessions' locks ---
    let release = |session_id, name: &str, token| ReleaseRequest {
        session_id,
        name: name.into(),
        token,
    };
    for wrong in [b.token + 1_000, 0, u64::MAX] {
        refused(
            &format!("release by the holder with wrong token {wrong}"),
            "client port, Lock.Release",
            locks.release(release(b.session, SENTINEL, wrong)).await,
            Code::FailedPrecondition,
            &format!("token {wrong} is stale"),
        );
    }
    refused(
        "release of a lock held by another session (right token)",
        "client port, Lock.Release",
        locks.release(release(other, SENTINEL, b.token)).await,
        Code::FailedPrecondition,
        &format!("session {other} does not hold lock"),
    );
    refused(
        "release by a session that holds nothing",
        "client port, Lock.Release",
        locks.release(release(other, "hostile/nothing", 1)).await,
        Code::FailedPrecondition,
        "does not hold lock",
    );
    refused(
        "acquire of a lock held by another session, second request id of the holder",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: b.session,
                name: SENTINEL.into(),
                request_id: rid(),
                ..Default::default()
            })
            .await,
        Code::AlreadyExists,
        "already holds lock",
    );
    let busy = locks
        .acquire(acquire(SENTINEL.into()))
        .await
        .unwrap()
        .into_inner();
    assert!(!busy.acquired && busy.holders[0].token == b.token);
    observed_ok(
        "try-acquire of a lock another session holds",
        place,
        "acquired=false, holders=[the holder's grant]",
    );
    refused(
        "proclaim on another session's lock",
        "client port, Election.Proclaim",
        election
            .proclaim(ProclaimRequest {
                name: SENTINEL.into(),
                session_id: other,
                token: b.token,
                value: b"mine".to_vec(),
            })
            .await,
        Code::FailedPrecondition,
        "does not hold lock",
    );
    refused(
        "proclaim by the holder with a wrong token",
        "client port, Election.Proclaim",
        election
            .proclaim(ProclaimRequest {
                name: SENTINEL.into(),
                session_id: b.session,
                token: b.token + 1,
                value: b"mine".to_vec(),
            })
            .await,
        Code::FailedPrecondition,
        "is stale",
    );
    refused(
        "resign of another session's leadership",
        "client port, Election.Resign",
        election
            .resign(ResignRequest {
                name: SENTINEL.into(),
                session_id: other,
                token: b.token,
            })
            .await,
        Code::FailedPrecondition,
        "does not hold lock",
    );
    let v = locks
        .validate(ValidateRequest {
            name: SENTINEL.into(),
            token: u64::MAX,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!v.valid && v.current_token == b.token);
    observed_ok(
        "validate token u64::MAX",
        "client port, Lock.Validate",
        "valid=false, current_token=the holder's",
    );
    let d = locks
        .describe(DescribeRequest {
            name: SENTINEL.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        d.holders[0].metadata, b"before",
        "proclaims changed nothing"
    );
    assert_intact(&cluster, &b, "wrong tokens and other sessions' locks").await;

    // --- An expired session ---
    let expiring = sessions
        .create(CreateSessionRequest {
            ttl_ms: 1_000,
            client_name: "expiring".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let held = locks
        .acquire(AcquireRequest {
            session_id: expiring,
            name: "hostile/expiring".into(),
            request_id: rid(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .grant
        .unwrap();
    let started = Instant::now();
    // Never kept alive: release of a name it does not hold says "does not
    // hold" while it lives and "not found" once the leader expired it.
    let gone = loop {
        let r = locks
            .release(release(expiring, "hostile/not-held", 1))
            .await;
        match r {
            Err(s) if s.code() == Code::NotFound => break started.elapsed(),
            Err(s) if s.code() == Code::FailedPrecondition => {}
            other => panic!("expiring session: unexpected {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "a 1 s session never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("INFO the 1000 ms session expired after {gone:?}");
    refused(
        "expired session (TTL 1000 ms, no keep-alive)",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: expiring,
                ..acquire("hostile/after-expiry".into())
            })
            .await,
        Code::NotFound,
        &format!("session {expiring} not found"),
    );
    refused(
        "expired session, release of the lock it held",
        "client port, Lock.Release",
        locks
            .release(release(expiring, "hostile/expiring", held.token))
            .await,
        Code::NotFound,
        &format!("session {expiring} not found"),
    );
    refused(
        "expired session",
        "client port, Session.KeepAlive",
        keep_alive_once(ch.clone(), expiring).await,
        Code::NotFound,
        &format!("session {expiring} not found"),
    );
    let d = locks
        .describe(DescribeRequest {
            name: "hostile/expiring".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(d.holders.is_empty(), "expiry released the lock: {d:?}");
    assert_intact(&cluster, &b, "expired session").await;
}
