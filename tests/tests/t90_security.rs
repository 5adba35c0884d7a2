//! Security with real processes: TLS on both ports (certificates made by
//! the documented openssl recipe, `deploy/tls/make-certs.sh`), peers
//! refusing a certificate from another CA, bearer-token and certificate
//! identities, per-prefix rights, session ownership, force-release, and
//! every operator limit answered with its status while others are served.

use raftlock_client::{Client, Error, Options, Tls};
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::election_client::ElectionClient;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::raft_client::RaftClient;
use raftlock_proto::v1::session_client::SessionClient;
use raftlock_proto::v1::*;
use raftlock_tests::{binary, Access, Cluster};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
use tonic::Code;

fn workspace_root() -> PathBuf {
    // target/debug/raftlockd -> the checkout.
    binary("raftlockd")
        .ancestors()
        .nth(3)
        .expect("binary under <root>/target/<profile>")
        .to_owned()
}

/// Runs the documented recipe: `make-certs.sh DIR 127.0.0.1 localhost`.
fn make_certs(dir: &Path, extra: &[&str]) {
    let script = workspace_root().join("deploy/tls/make-certs.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(dir)
        .args(extra)
        .output()
        .expect("bash runs the recipe");
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn tls_flags(dir: &Path) -> Vec<String> {
    let p = |f: &str| dir.join(f).display().to_string();
    vec![
        "--tls-cert".into(),
        p("node.pem"),
        "--tls-key".into(),
        p("node-key.pem"),
        "--tls-ca".into(),
        p("ca.pem"),
        "--peer-tls-cert".into(),
        p("node.pem"),
        "--peer-tls-key".into(),
        p("node-key.pem"),
        "--peer-tls-ca".into(),
        p("ca.pem"),
    ]
}

/// What the auth file stores: `printf %s TOKEN | sha256sum`.
fn hash(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// An auth file: `a` may lock under team-a/, `b` under team-a/ and team-b/,
/// `root` may do everything, and the certificate named `ops` is root too.
fn auth_file(dir: &Path) -> PathBuf {
    let path = dir.join("auth.toml");
    let text = format!(
        r#"
[roles.team-a]
rules = [{{ prefix = "team-a/", allow = ["read", "lock"] }}]
[roles.team-b]
rules = [{{ prefix = "team-b/", allow = ["read", "lock"] }}]
[roles.root]
rules = [{{ prefix = "", allow = ["read", "lock", "admin"] }}]

[[identities]]
name = "a"
token_sha256 = "{}"
roles = ["team-a"]

[[identities]]
name = "b"
token_sha256 = "{}"
roles = ["team-a", "team-b"]

[[identities]]
name = "root"
token_sha256 = "{}"
cert_cn = "ops"
roles = ["root"]
"#,
        hash("token-a"),
        hash("token-b"),
        hash("token-root")
    );
    std::fs::write(&path, text).expect("auth file");
    path
}

async fn client_as(cluster: &Cluster, token: &str) -> Client {
    let opts = Options {
        token: Some(token.into()),
        tls: cluster.access.ca_pem.clone().map(Tls::new),
        ..Default::default()
    };
    Client::connect_with(cluster.endpoints(), opts)
        .await
        .expect("client connects")
}

/// A raw access as `token` (for calls the library would never make).
fn raw_as(cluster: &Cluster, token: Option<&str>) -> Access {
    Access {
        ca_pem: cluster.access.ca_pem.clone(),
        token: token.map(str::to_owned),
    }
}

fn uuid() -> Vec<u8> {
    uuid::Uuid::now_v7().as_bytes().to_vec()
}

async fn leader_addr(cluster: &Cluster) -> String {
    let id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.nodes()[(id - 1) as usize].client_addr.clone()
}

/// Runs a raw call against the current leader, again if the leader moved
/// meanwhile (two loaded cores can cost a test cluster its first leader):
/// these tests are about the answers, not about failover.
async fn on_leader<T, F, Fut>(cluster: &Cluster, mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let give_up = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match call(leader_addr(cluster).await).await {
            Err(e) if e.code() == Code::Unavailable && tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            r => return r,
        }
    }
}

/// The call was refused with `code`, and its message names `text`.
fn expect<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, text: &str) {
    let e = r.expect_err("refused");
    assert_eq!(e.code(), code, "{e:?}");
    assert!(
        e.message().contains(text),
        "{:?} lacks {text:?}",
        e.message()
    );
    println!("{code:?}: {}", e.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_cluster_works_end_to_end_and_peers_refuse_a_foreign_ca() {
    let certs = tempfile::tempdir().unwrap();
    let ours = certs.path().join("ours");
    let foreign = certs.path().join("foreign");
    make_certs(&ours, &["127.0.0.1", "localhost"]);
    make_certs(&ours, &["--client", "ops"]);
    make_certs(&foreign, &["127.0.0.1", "localhost"]);
    let auth = auth_file(certs.path());
    let mut flags = tls_flags(&ours);
    flags.extend(["--auth-file".into(), auth.display().to_string()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // A leader is elected only if the peers' mutual TLS works.
    let cluster = Cluster::start_secure(
        3,
        &flags,
        Access {
            ca_pem: Some(read(ours.join("ca.pem"))),
            token: Some("token-root".into()),
        },
    )
    .await;

    // End to end over TLS: session, lock with a token, release.
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let guard = session.lock("tls/x").acquire().await.unwrap();
    assert!(guard.token() > 0);
    guard.release().await.unwrap();
    session.close().await.unwrap();

    // A client certificate from our CA is an identity (ops = root).
    let by_cert = Options {
        tls: Some(
            Tls::new(read(ours.join("ca.pem")))
                .with_identity(read(ours.join("ops.pem")), read(ours.join("ops-key.pem"))),
        ),
        ..Default::default()
    };
    let c = Client::connect_with(cluster.endpoints(), by_cert)
        .await
        .unwrap();
    let s = c.session(Duration::from_secs(5)).await.unwrap();
    let g = s
        .lock("tls/by-cert")
        .try_acquire()
        .await
        .unwrap()
        .expect("free lock");
    g.release().await.unwrap();
    s.close().await.unwrap();

    // Plain HTTP/2 to a TLS port, and TLS trusting another CA, both fail.
    let plain = Options {
        deadline: Duration::from_secs(2),
        token: Some("token-root".into()),
        ..Default::default()
    };
    assert!(Client::connect_with(cluster.endpoints(), plain)
        .await
        .is_err());
    let wrong_ca = Options {
        deadline: Duration::from_secs(2),
        tls: Some(Tls::new(read(foreign.join("ca.pem")))),
        token: Some("token-root".into()),
        ..Default::default()
    };
    let e = Client::connect_with(cluster.endpoints(), wrong_ca)
        .await
        .err()
        .expect("a server certificate from another CA is not trusted");
    println!("client trusting another CA: {e}");

    // The peer port: a caller presenting our CA's certificate reaches the
    // Raft service (and is told its payload is garbage); one presenting a
    // certificate from another CA, or none, is refused in the handshake.
    let peer = &cluster.nodes()[0].peer_addr;
    let call = |identity: Option<(Vec<u8>, Vec<u8>)>| {
        let ca = read(ours.join("ca.pem"));
        let peer = peer.clone();
        async move {
            let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
            if let Some((c, k)) = identity {
                tls = tls.identity(Identity::from_pem(c, k));
            }
            let channel = Endpoint::from_shared(format!("https://{peer}"))
                .unwrap()
                .tls_config(tls)
                .unwrap()
                .connect_timeout(Duration::from_secs(2))
                .timeout(Duration::from_secs(3))
                .connect()
                .await;
            match channel {
                Err(e) => Err(format!("connect: {e:?}")),
                Ok(ch) => RaftClient::new(ch)
                    .vote(RaftPayload {
                        data: b"not a vote".to_vec(),
                    })
                    .await
                    .map(|_| ())
                    .map_err(|s| format!("{:?}: {}", s.code(), s.message())),
            }
        }
    };
    let ours_answer = call(Some((
        read(ours.join("node.pem")),
        read(ours.join("node-key.pem")),
    )))
    .await
    .expect_err("garbage vote is refused");
    assert!(
        ours_answer.contains("InvalidArgument") && ours_answer.contains("undecodable"),
        "a peer with our CA's certificate reaches the service: {ours_answer}"
    );
    for (what, identity) in [
        (
            "another CA's certificate",
            Some((
                read(foreign.join("node.pem")),
                read(foreign.join("node-key.pem")),
            )),
        ),
        ("no certificate", None),
    ] {
        let answer = call(identity).await.expect_err("refused");
        println!("peer port with {what}: {answer}");
        assert!(
            !answer.contains("undecodable"),
            "a peer with {what} must not reach the Raft service: {answer}"
        );
    }
    // Still one healthy cluster afterwards.
    cluster.wait_for_leader(Duration::from_secs(5)).await;
    assert!(c.status().await.is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn identities_rights_and_session_ownership_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let auth = auth_file(dir.path());
    let auth = auth.display().to_string();
    let cluster = Cluster::start_secure(
        3,
        &["--auth-file", &auth],
        Access {
            token: Some("token-root".into()),
            ..Default::default()
        },
    )
    .await;
    let leader = leader_addr(&cluster).await;

    // No token, or an unknown one: UNAUTHENTICATED, with what to send.
    for token in [None, Some("token-x")] {
        let access = raw_as(&cluster, token);
        let e = SessionClient::new(access.channel(&leader).await.unwrap())
            .create(access.request(CreateSessionRequest {
                ttl_ms: 5_000,
                client_name: "anon".into(),
                ..Default::default()
            }))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        assert_eq!(reason::of(&e), Some(Reason::Unauthenticated), "{e:?}");
        println!("token {token:?}: {}", e.message());
    }

    let a = client_as(&cluster, "token-a").await;
    let b = client_as(&cluster, "token-b").await;
    let root = client_as(&cluster, "token-root").await;
    let sa = a.session(Duration::from_secs(10)).await.unwrap();
    let sb = b.session(Duration::from_secs(10)).await.unwrap();

    // a has no right under team-b/.
    match sa.lock("team-b/x").try_acquire().await {
        Err(Error::PermissionDenied(m)) => {
            assert!(m.contains("team-b/x") && m.contains("team-a/"), "{m}")
        }
        Err(e) => panic!("expected PERMISSION_DENIED, got {e:?}"),
        Ok(_) => panic!("expected PERMISSION_DENIED, got the lock"),
    }
    let gbx = sb.lock("team-b/x").try_acquire().await.unwrap().unwrap();
    let job = sb.lock("team-a/job").try_acquire().await.unwrap().unwrap();

    // a cannot use b's session, even on a name a may lock.
    let access_a = raw_as(&cluster, Some("token-a"));
    let e = LockClient::new(access_a.channel(&leader).await.unwrap())
        .release(access_a.request(ReleaseRequest {
            session_id: sb.id(),
            name: "team-a/job".into(),
            token: job.token(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(reason::of(&e), Some(Reason::PermissionDenied), "{e:?}");
    assert!(e.message().contains("another identity"), "{}", e.message());
    let e = LockClient::new(access_a.channel(&leader).await.unwrap())
        .acquire(access_a.request(AcquireRequest {
            session_id: sb.id(),
            name: "team-a/other".into(),
            request_id: uuid(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // Nor close it, nor keep it alive.
    let e = SessionClient::new(access_a.channel(&leader).await.unwrap())
        .close(access_a.request(CloseSessionRequest {
            session_id: sb.id(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // A session id nobody has created yet is refused, so a guessed future
    // id cannot be used once someone else gets it.
    let e = LockClient::new(access_a.channel(&leader).await.unwrap())
        .acquire(access_a.request(AcquireRequest {
            session_id: 1 << 40,
            name: "team-a/other".into(),
            request_id: uuid(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    // Nor force-release it: that takes the admin right.
    match a.force_release("team-a/job").await {
        Err(Error::PermissionDenied(m)) => assert!(m.contains("admin"), "{m}"),
        other => panic!("expected PERMISSION_DENIED, got {other:?}"),
    }
    match a.transfer_leader(0).await {
        Err(Error::PermissionDenied(_)) => {}
        other => panic!("expected PERMISSION_DENIED, got {other:?}"),
    }

    // a queues for team-a/job; root frees it by force: a is granted in the
    // same entry, with a larger token, and b's old token is refused.
    let waiter = {
        let sa = sa.clone();
        tokio::spawn(async move {
            sa.lock("team-a/job")
                .timeout(Duration::from_secs(10))
                .acquire()
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while root
        .describe("team-a/job")
        .await
        .unwrap()
        .waiters
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "a never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (taken, granted) = root.force_release("team-a/job").await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].token, job.token());
    assert_eq!(granted.len(), 1);
    assert!(granted[0].token > job.token());
    let ga = waiter.await.unwrap().unwrap();
    assert_eq!(ga.token(), granted[0].token);
    assert!(root.validate("team-a/job", ga.token()).await.unwrap().valid);
    assert!(
        !root
            .validate("team-a/job", job.token())
            .await
            .unwrap()
            .valid
    );
    match job.release().await {
        Err(Error::NotHolder(_)) => {}
        other => panic!("the old holder's release must be refused, got {other:?}"),
    }
    assert!(cluster
        .logs()
        .contains("lock force-released by an administrator"));

    // a sees only names it may read.
    let names: Vec<String> = a
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(names, vec!["team-a/job".to_owned()]);
    let all = root.list("").await.unwrap();
    assert_eq!(all.len(), 2);

    // The CLI: without a token it says what is missing; with root's token
    // (from RAFTLOCK_AUTH_TOKEN) it frees a lock.
    let cli = |token: Option<&str>, args: &[&str]| {
        let mut cmd = std::process::Command::new(binary("raftlock"));
        cmd.env("RAFTLOCK_ENDPOINTS", cluster.endpoints().join(","))
            .env_remove("RAFTLOCK_AUTH_TOKEN")
            .args(args);
        if let Some(t) = token {
            cmd.env("RAFTLOCK_AUTH_TOKEN", t);
        }
        cmd.output().expect("raftlock runs")
    };
    let out = cli(None, &["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not authenticated"));
    let out = cli(Some("token-a"), &["force-release", "team-b/x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"));
    let out = cli(Some("token-root"), &["force-release", "team-b/x"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "taken from session {} (token {})",
            sb.id(),
            gbx.token()
        )),
        "{text}"
    );
    ga.release().await.unwrap();
}

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
    let mut waiting = Vec::new();
    for _ in 0..8 {
        let s = client.session(Duration::from_secs(10)).await.unwrap();
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
