//! Every operator limit answered with its status and reason while other clients are served.

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn every_limit_is_answered_and_others_are_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let auth = auth_file(dir.path()).display().to_string();
    let cluster = Cluster::start_secure(
        3,
        &[
            "--auth-file",
            &auth,
            "--max-request-bytes",
            "2048",
            "--max-metadata-bytes",
            "1024",
            "--min-ttl-ms",
            "2000",
            "--max-ttl-ms",
            "60000",
            "--max-wait-ms",
            "5000",
            "--max-sessions-per-identity",
            "2",
            "--max-locks-per-session",
            "2",
            "--max-waiters-per-lock",
            "1",
        ],
        Access {
            token: Some("token-root".into()),
            ..Default::default()
        },
    )
    .await;
    let leader = leader_addr(&cluster).await;
    let a = raw_as(&cluster, Some("token-a"));
    let b = raw_as(&cluster, Some("token-b"));
    let sessions = |acc: &Access| {
        let acc = acc.clone();
        let leader = leader.clone();
        async move { SessionClient::new(acc.channel(&leader).await.unwrap()) }
    };
    let create = |acc: Access, ttl_ms: u64| {
        let cluster = &cluster;
        async move {
            on_leader(cluster, |leader| {
                let acc = acc.clone();
                async move {
                    SessionClient::new(acc.channel(&leader).await.unwrap())
                        .create(acc.request(CreateSessionRequest {
                            ttl_ms,
                            client_name: "limits".into(),
                            ..Default::default()
                        }))
                        .await
                        .map(|r| r.into_inner().session_id)
                }
            })
            .await
        }
    };
    let acquire =
        |acc: Access, session: u64, name: &str, request_id: Vec<u8>, wait: Option<u64>| {
            let cluster = &cluster;
            let name = name.to_owned();
            async move {
                on_leader(cluster, |leader| {
                    let (acc, name, request_id) = (acc.clone(), name.clone(), request_id.clone());
                    async move {
                        LockClient::new(acc.channel(&leader).await.unwrap())
                            .acquire(acc.request(AcquireRequest {
                                session_id: session,
                                name,
                                request_id,
                                wait_timeout_ms: wait,
                                ..Default::default()
                            }))
                            .await
                            .map(|r| r.into_inner())
                    }
                })
                .await
            }
        };
    let describe = |acc: Access, name: &str| {
        let cluster = &cluster;
        let name = name.to_owned();
        async move {
            on_leader(cluster, |leader| {
                let (acc, name) = (acc.clone(), name.clone());
                async move {
                    LockClient::new(acc.channel(&leader).await.unwrap())
                        .describe(acc.request(DescribeRequest { name }))
                        .await
                        .map(|r| r.into_inner())
                }
            })
            .await
        }
    };

    // TTL bounds.
    expect(
        create(a.clone(), 1_000).await,
        Code::InvalidArgument,
        "2000..=60000",
    );
    expect(
        create(a.clone(), 120_000).await,
        Code::InvalidArgument,
        "2000..=60000",
    );
    // Sessions per identity: a gets two; b is not affected.
    let s1 = create(a.clone(), 10_000).await.unwrap();
    let s2 = create(a.clone(), 10_000).await.unwrap();
    expect(
        create(a.clone(), 10_000).await,
        Code::ResourceExhausted,
        "limit per identity",
    );
    let sb = create(b.clone(), 10_000).await.unwrap();
    // Keep the sessions alive through the test from a's connection.
    let mut keep = Vec::new();
    for (acc, s) in [(a.clone(), s1), (a.clone(), s2), (b.clone(), sb)] {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut sc = sessions(&acc).await;
        let req = acc.request(tokio_stream::wrappers::ReceiverStream::new(rx));
        let task = tokio::spawn(async move {
            let mut out = sc.keep_alive(req).await.expect("keep-alive").into_inner();
            while out.message().await.ok().flatten().is_some() {}
        });
        let ticker = tokio::spawn(async move {
            loop {
                if tx
                    .send(KeepAliveRequest {
                        session_id: s,
                        shared: false,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(1_000)).await;
            }
        });
        keep.push((task, ticker));
    }
    // Locks per session: two, then refused; a retry of a held one passes.
    let r1 = uuid();
    acquire(a.clone(), s1, "team-a/l1", r1.clone(), None)
        .await
        .unwrap();
    acquire(a.clone(), s1, "team-a/l2", uuid(), None)
        .await
        .unwrap();
    expect(
        acquire(a.clone(), s1, "team-a/l3", uuid(), None).await,
        Code::ResourceExhausted,
        "already holds or waits for 2 locks",
    );
    let retry = acquire(a.clone(), s1, "team-a/l1", r1, None).await.unwrap();
    assert!(retry.acquired, "an idempotent retry is not a new lock");
    // Waiters per lock: s1 holds l1; s2 waits; b's wait is refused.
    let waiting = {
        let (a, leader) = (a.clone(), leader_addr(&cluster).await);
        tokio::spawn(async move {
            LockClient::new(a.channel(&leader).await.unwrap())
                .acquire(a.request(AcquireRequest {
                    session_id: s2,
                    name: "team-a/l1".into(),
                    request_id: uuid(),
                    wait_timeout_ms: Some(4_000),
                    ..Default::default()
                }))
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let d = describe(a.clone(), "team-a/l1").await.unwrap();
        if !d.waiters.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "s2 never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    expect(
        acquire(b.clone(), sb, "team-a/l1", uuid(), Some(1_000)).await,
        Code::ResourceExhausted,
        "already has 1 waiters",
    );
    // Waits are bounded.
    expect(
        acquire(b.clone(), sb, "team-a/w", uuid(), Some(10_000)).await,
        Code::InvalidArgument,
        "limit of 5000 ms",
    );
    let e = waiting.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    // Request size: 3 KiB of metadata in a 2 KiB request limit.
    let big = on_leader(&cluster, |leader| {
        let a = a.clone();
        async move {
            LockClient::new(a.channel(&leader).await.unwrap())
                .acquire(a.request(AcquireRequest {
                    session_id: s1,
                    name: "team-a/big".into(),
                    request_id: uuid(),
                    metadata: vec![7; 3_000],
                    ..Default::default()
                }))
                .await
        }
    })
    .await;
    expect(big, Code::OutOfRange, "too large");
    // Metadata (headers) size: 2 KiB of headers in a 1 KiB limit.
    let mut req = a.request(DescribeRequest {
        name: "team-a/l1".into(),
    });
    req.metadata_mut()
        .insert("x-padding", "p".repeat(2_048).parse().unwrap());
    let e = LockClient::new(a.channel(&leader).await.unwrap())
        .describe(req)
        .await
        .expect_err("oversized headers are refused");
    // Refused by HTTP/2 itself (431 Request Header Fields Too Large),
    // before any handler runs.
    println!("oversized metadata: {:?}: {}", e.code(), e.message());
    assert!(e.message().contains("431"), "{e:?}");

    // The node still serves everyone: b locks and releases normally, and
    // every node answers.
    let g = acquire(b.clone(), sb, "team-b/after", uuid(), None)
        .await
        .unwrap();
    assert!(g.acquired);
    let root = cluster.client().await;
    for n in cluster.nodes() {
        assert!(root.node_status(&n.client_addr).await.is_ok());
    }
    for (t, k) in keep {
        t.abort();
        k.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn per_connection_limits_refuse_the_flooder_only() {
    let cluster = Cluster::start_with(
        3,
        &[
            "--max-concurrent-requests-per-connection",
            "4",
            "--max-keepalive-streams-per-connection",
            "2",
        ],
    )
    .await;
    let leader = leader_addr(&cluster).await;
    let access = Access::default();
    let client = cluster.client().await;
    let holder = client.session(Duration::from_secs(10)).await.unwrap();
    let _held = holder.lock("busy").try_acquire().await.unwrap().unwrap();

    // Eight waiting acquires on ONE connection: four are admitted (and wait),
    // the rest are refused at once.
    let flooder = access.channel(&leader).await.unwrap();
    // Sessions first: all eight calls must arrive within the first one's
    // 3 s wait, which eight session commits on the way could outlast.
    let mut sessions = Vec::new();
    for _ in 0..8 {
        sessions.push(client.session(Duration::from_secs(10)).await.unwrap());
    }
    let mut waiting = Vec::new();
    for s in sessions {
        let ch = flooder.clone();
        waiting.push(tokio::spawn(async move {
            let r = LockClient::new(ch)
                .acquire(AcquireRequest {
                    session_id: s.id(),
                    name: "busy".into(),
                    request_id: uuid(),
                    wait_timeout_ms: Some(3_000),
                    ..Default::default()
                })
                .await;
            drop(s);
            r
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // Meanwhile another connection is served at once.
    let started = std::time::Instant::now();
    let d = client.describe("busy").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(d.holders.len(), 1);
    let mut refused = 0;
    let mut timed_out = 0;
    for w in waiting {
        match w.await.unwrap() {
            Err(e) if e.code() == Code::ResourceExhausted => {
                assert!(
                    e.message().contains("concurrent requests"),
                    "{}",
                    e.message()
                );
                refused += 1;
            }
            Err(e) if e.code() == Code::DeadlineExceeded => timed_out += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((refused, timed_out), (4, 4));

    // Long-lived streams: two per connection, the third refused.
    let s = client.session(Duration::from_secs(10)).await.unwrap();
    let ch = access.channel(&leader).await.unwrap();
    let mut open = Vec::new();
    for i in 0..3 {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(KeepAliveRequest {
            session_id: s.id(),
            shared: false,
        })
        .await
        .unwrap();
        let r = raftlock_proto::v1::session_client::SessionClient::new(ch.clone())
            .keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await;
        match (i, r) {
            (0 | 1, Ok(mut stream)) => {
                assert!(stream.get_mut().message().await.unwrap().is_some());
                open.push((tx, stream));
            }
            (2, Err(e)) => {
                assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                assert!(e.message().contains("streams"), "{}", e.message());
            }
            (i, r) => panic!("stream {i}: unexpected {:?}", r.map(|_| ())),
        }
    }
    // Observe streams count against the same allowance.
    let Err(e) = ElectionClient::new(ch.clone())
        .observe(LeaderRequest {
            name: "busy".into(),
        })
        .await
    else {
        panic!("a third stream on the connection was admitted");
    };
    assert_eq!(e.code(), Code::ResourceExhausted);
    // Closing one frees a slot.
    drop(open.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ok = ElectionClient::new(ch)
        .observe(LeaderRequest {
            name: "busy".into(),
        })
        .await;
    assert!(ok.is_ok(), "a freed slot admits a new stream");
}

/// Creates `n` sessions at once on the leader as `acc`: the ones created,
/// with every refusal checked to be the session limit.
async fn create_at_once(cluster: &Cluster, acc: &Access, n: usize) -> Vec<u64> {
    let leader = leader_addr(cluster).await;
    let mut calls = Vec::new();
    for _ in 0..n {
        let (acc, leader) = (acc.clone(), leader.clone());
        calls.push(tokio::spawn(async move {
            let mut sessions = SessionClient::new(acc.channel(&leader).await.unwrap());
            sessions
                .create(acc.request(CreateSessionRequest {
                    ttl_ms: 30_000,
                    client_name: "at-once".into(),
                    ..Default::default()
                }))
                .await
        }));
    }
    let mut created = Vec::new();
    for call in calls {
        match call.await.unwrap() {
            Ok(r) => created.push(r.into_inner().session_id),
            Err(e) => {
                assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                assert_eq!(reason::of(&e), Some(Reason::LimitExceeded), "{e:?}");
                assert!(e.message().contains("limit per identity"), "{e:?}");
            }
        }
    }
    created
}

/// The leader's check before proposing sees committed sessions only, so
/// creations that arrive together all pass it; the limit holds because
/// the log orders them and each entry carries it.
#[tokio::test(flavor = "multi_thread")]
async fn creations_at_once_stay_within_the_limit_per_identity() {
    let dir = tempfile::tempdir().unwrap();
    let auth = auth_file(dir.path()).display().to_string();
    let cluster = Cluster::start_secure(
        3,
        &["--auth-file", &auth, "--max-sessions-per-identity", "3"],
        Access {
            token: Some("token-root".into()),
            ..Default::default()
        },
    )
    .await;
    let a = raw_as(&cluster, Some("token-a"));
    let created = create_at_once(&cluster, &a, 24).await;
    assert_eq!(
        created.len(),
        3,
        "identity a got {created:?}, over its limit of 3"
    );
    // Another identity is not affected.
    let b = raw_as(&cluster, Some("token-b"));
    assert_eq!(create_at_once(&cluster, &b, 1).await.len(), 1);
}

/// Without authentication every caller is the one anonymous identity, so
/// the limit bounds the cluster's sessions rather than nothing.
#[tokio::test(flavor = "multi_thread")]
async fn without_authentication_the_limit_bounds_all_sessions() {
    let cluster = Cluster::start_with(3, &["--max-sessions-per-identity", "4"]).await;
    let anyone = Access::default();
    let created = create_at_once(&cluster, &anyone, 16).await;
    assert_eq!(created.len(), 4, "{created:?}: over the limit of 4");
    assert!(create_at_once(&cluster, &anyone, 1).await.is_empty());
    // Closing one makes room for one.
    let leader = leader_addr(&cluster).await;
    raftlock_tests::raw::close_session(&leader, created[0])
        .await
        .unwrap();
    assert_eq!(create_at_once(&cluster, &anyone, 2).await.len(), 1);
}
