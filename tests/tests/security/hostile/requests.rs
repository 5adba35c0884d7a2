//! Bad requests on the client port: every field of every call, wrong in
//! every way that matters. Most cases are rows of a table (input, call,
//! expected code and what the message says); the cases that need a
//! sequence (raw bytes, an expiring session) follow them.

use super::fixtures::*;

/// Where a case is sent.
#[derive(Clone, Copy)]
enum To {
    Leader,
    Follower,
}

/// One request of the table.
enum Call {
    Acquire(AcquireRequest),
    Release(ReleaseRequest),
    Describe(DescribeRequest),
    Create(CreateSessionRequest),
    Close(CloseSessionRequest),
    KeepAlive(u64),
    Campaign(CampaignRequest),
    Proclaim(ProclaimRequest),
    Resign(ResignRequest),
}

impl Call {
    fn method(&self) -> &'static str {
        match self {
            Call::Acquire(_) => "Lock.Acquire",
            Call::Release(_) => "Lock.Release",
            Call::Describe(_) => "Lock.Describe",
            Call::Create(_) => "Session.Create",
            Call::Close(_) => "Session.Close",
            Call::KeepAlive(_) => "Session.KeepAlive",
            Call::Campaign(_) => "Election.Campaign",
            Call::Proclaim(_) => "Election.Proclaim",
            Call::Resign(_) => "Election.Resign",
        }
    }

    /// Sends the request; the answer as text, or the refusal.
    async fn send(self, ch: Channel) -> Result<String, Status> {
        let text = |r: &dyn std::fmt::Debug| format!("{r:?}");
        Ok(match self {
            Call::Acquire(r) => text(&LockClient::new(ch).acquire(r).await?),
            Call::Release(r) => text(&LockClient::new(ch).release(r).await?),
            Call::Describe(r) => text(&LockClient::new(ch).describe(r).await?),
            Call::Create(r) => text(&SessionClient::new(ch).create(r).await?),
            Call::Close(r) => text(&SessionClient::new(ch).close(r).await?),
            Call::KeepAlive(id) => text(&keep_alive_once(ch, id).await?),
            Call::Campaign(r) => text(&ElectionClient::new(ch).campaign(r).await?),
            Call::Proclaim(r) => text(&ElectionClient::new(ch).proclaim(r).await?),
            Call::Resign(r) => text(&ElectionClient::new(ch).resign(r).await?),
        })
    }
}

/// A hostile input, the call that carries it, and the refusal it must get:
/// its code and words its message must contain.
struct Case {
    input: String,
    to: To,
    call: Call,
    code: Code,
    says: String,
}

fn case(input: impl Into<String>, call: Call, code: Code, says: impl Into<String>) -> Case {
    Case {
        input: input.into(),
        to: To::Leader,
        call,
        code,
        says: says.into(),
    }
}

impl Case {
    fn on_follower(mut self) -> Case {
        self.to = To::Follower;
        self
    }
}

/// Sends every case and checks its refusal (printing the `OBSERVED` rows
/// docs/security.md is made from).
async fn refuse_all(cases: Vec<Case>, leader: &Channel, follower: &Channel) {
    for c in cases {
        let (ch, port) = match c.to {
            To::Leader => (leader.clone(), "client port"),
            To::Follower => (follower.clone(), "client port (follower)"),
        };
        let place = format!("{port}, {}", c.call.method());
        refused(&c.input, &place, c.call.send(ch).await, c.code, &c.says);
    }
}

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
    let follower_ch = connect(&follower).await;
    use Call::*;
    use Code::{AlreadyExists, FailedPrecondition, InvalidArgument, NotFound};

    // --- Names ---
    let before = applied(&acc, &leader).await;
    let campaign = |name: &str, value: Vec<u8>, wait: u64| CampaignRequest {
        name: name.into(),
        session_id: other,
        request_id: rid(),
        value,
        wait_timeout_ms: Some(wait),
        ..Default::default()
    };
    refuse_all(
        vec![
            case(
                "lock name empty",
                Acquire(acquire(String::new())),
                InvalidArgument,
                "must not be empty",
            ),
            case(
                "lock name 513 bytes",
                Acquire(acquire("n".repeat(513))),
                InvalidArgument,
                "513 bytes, longer than the limit of 512",
            ),
            case(
                "lock name 514 bytes of 2-byte UTF-8 (\"é\" x 257)",
                Acquire(acquire("é".repeat(257))),
                InvalidArgument,
                "514 bytes",
            ),
            case(
                "lock name empty, sent to a follower",
                Acquire(acquire(String::new())),
                InvalidArgument,
                "must not be empty",
            )
            .on_follower(),
            case(
                "lock name 513 bytes",
                Describe(DescribeRequest {
                    name: "n".repeat(513),
                }),
                InvalidArgument,
                "longer than the limit",
            ),
            case(
                "lock name empty",
                Release(ReleaseRequest {
                    session_id: other,
                    name: String::new(),
                    token: 1,
                }),
                InvalidArgument,
                "must not be empty",
            ),
            case(
                "election name empty",
                Campaign(campaign("", vec![], 0)),
                InvalidArgument,
                "must not be empty",
            ),
        ],
        &ch,
        &follower_ch,
    )
    .await;
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
    let create = |ttl_ms, client_name: String| CreateSessionRequest {
        ttl_ms,
        client_name,
        ..Default::default()
    };
    let mut table: Vec<Case> = [0, 999, 600_001, u64::MAX]
        .into_iter()
        .map(|ttl| {
            case(
                format!("session TTL {ttl} ms"),
                Create(create(ttl, "ttl".into())),
                InvalidArgument,
                format!("ttl_ms {ttl} is out of this cluster's range 1000..=600000 ms"),
            )
        })
        .collect();
    table.extend([
        case(
            "session TTL 0 ms, sent to a follower",
            Create(create(0, "ttl".into())),
            InvalidArgument,
            "out of this cluster's range",
        )
        .on_follower(),
        case(
            "client_name 257 bytes",
            Create(create(5_000, "c".repeat(257))),
            InvalidArgument,
            "client name is 257 bytes, more than the limit of 256",
        ),
        case(
            "wait_timeout_ms u64::MAX",
            Acquire(AcquireRequest {
                wait_timeout_ms: Some(u64::MAX),
                ..acquire("hostile/w".into())
            }),
            InvalidArgument,
            "more than the limit of 3600000 ms",
        ),
        case(
            "wait_timeout_ms 3600001",
            Campaign(campaign("hostile/e", vec![], 3_600_001)),
            InvalidArgument,
            "more than the limit of 3600000 ms",
        ),
    ]);
    table.extend([0, 3, 17].map(|len| {
        case(
            format!("request_id of {len} bytes"),
            Acquire(AcquireRequest {
                request_id: vec![7; len],
                ..acquire("hostile/r".into())
            }),
            InvalidArgument,
            format!("request_id must be 16 bytes (a UUID), got {len}"),
        )
    }));
    table.push(case(
        "lock mode 7 (not in the enum)",
        Acquire(AcquireRequest {
            mode: 7,
            ..acquire("hostile/m".into())
        }),
        InvalidArgument,
        "unknown lock mode 7",
    ));
    refuse_all(table, &ch, &follower_ch).await;
    let before = applied(&acc, &leader).await;
    refuse_all(
        vec![
            case(
                "metadata 4097 bytes",
                Acquire(AcquireRequest {
                    metadata: vec![0; 4097],
                    ..acquire("hostile/meta".into())
                }),
                InvalidArgument,
                "metadata is 4097 bytes, more than the limit of 4096",
            ),
            case(
                "election value 4097 bytes",
                Campaign(campaign("hostile/e", vec![0; 4097], 0)),
                InvalidArgument,
                "value is 4097 bytes, more than the limit of 4096",
            ),
        ],
        &ch,
        &follower_ch,
    )
    .await;
    let written = applied(&acc, &leader).await - before;
    println!("INFO oversized metadata and values were refused at the edge: {written} log entries written");
    assert_eq!(written, 0, "oversized metadata is refused before the log");
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
    refuse_all(
        vec![case(
            "unknown session 999999",
            Acquire(AcquireRequest {
                session_id: 999_999,
                ..acquire("hostile/s".into())
            }),
            NotFound,
            "session 999999 not found",
        )],
        &ch,
        &follower_ch,
    )
    .await;
    println!(
        "INFO an acquire by an unknown session wrote {} log entries",
        applied(&acc, &leader).await - before
    );
    refuse_all(
        vec![
            case(
                "unknown session 999999, waiting acquire (wait 10 s)",
                Acquire(AcquireRequest {
                    session_id: 999_999,
                    wait_timeout_ms: Some(10_000),
                    ..acquire("hostile/s".into())
                }),
                NotFound,
                "session 999999 not found",
            ),
            case(
                "unknown session 999999",
                KeepAlive(999_999),
                NotFound,
                "session 999999 not found",
            ),
            case(
                "unknown session 999999",
                Close(CloseSessionRequest {
                    session_id: 999_999,
                }),
                NotFound,
                "session 999999 not found",
            ),
            case(
                "session 0",
                Acquire(AcquireRequest {
                    session_id: 0,
                    ..acquire("hostile/s".into())
                }),
                InvalidArgument,
                "session_id is required",
            ),
            case(
                "session 0",
                Close(CloseSessionRequest { session_id: 0 }),
                InvalidArgument,
                "session_id is required",
            ),
            case(
                "session 0",
                KeepAlive(0),
                InvalidArgument,
                "session_id is required",
            ),
            case(
                "session u64::MAX",
                Acquire(AcquireRequest {
                    session_id: u64::MAX,
                    ..acquire("hostile/s".into())
                }),
                NotFound,
                "not found",
            ),
        ],
        &ch,
        &follower_ch,
    )
    .await;
    assert_intact(&cluster, &b, "unknown sessions").await;

    // --- Tokens and other sessions' locks ---
    let release = |session_id, name: &str, token| ReleaseRequest {
        session_id,
        name: name.into(),
        token,
    };
    let proclaim = |session_id, token| ProclaimRequest {
        name: SENTINEL.into(),
        session_id,
        token,
        value: b"mine".to_vec(),
    };
    let mut table: Vec<Case> = [b.token + 1_000, 0, u64::MAX]
        .into_iter()
        .map(|wrong| {
            case(
                format!("release by the holder with wrong token {wrong}"),
                Release(release(b.session, SENTINEL, wrong)),
                FailedPrecondition,
                format!("token {wrong} is stale"),
            )
        })
        .collect();
    table.extend([
        case(
            "release of a lock held by another session (right token)",
            Release(release(other, SENTINEL, b.token)),
            FailedPrecondition,
            format!("session {other} does not hold lock"),
        ),
        case(
            "release by a session that holds nothing",
            Release(release(other, "hostile/nothing", 1)),
            FailedPrecondition,
            "does not hold lock",
        ),
        case(
            "acquire of a lock held by another session, second request id of the holder",
            Acquire(AcquireRequest {
                session_id: b.session,
                name: SENTINEL.into(),
                request_id: rid(),
                ..Default::default()
            }),
            AlreadyExists,
            "already holds lock",
        ),
        case(
            "proclaim on another session's lock",
            Proclaim(proclaim(other, b.token)),
            FailedPrecondition,
            "does not hold lock",
        ),
        case(
            "proclaim by the holder with a wrong token",
            Proclaim(proclaim(b.session, b.token + 1)),
            FailedPrecondition,
            "is stale",
        ),
        case(
            "resign of another session's leadership",
            Resign(ResignRequest {
                name: SENTINEL.into(),
                session_id: other,
                token: b.token,
            }),
            FailedPrecondition,
            "does not hold lock",
        ),
    ]);
    refuse_all(table, &ch, &follower_ch).await;
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
