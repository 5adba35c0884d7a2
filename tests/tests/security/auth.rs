//! Bearer-token and certificate identities, per-prefix rights, session ownership and force-release.

use crate::support::*;

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

/// The inspector page and the session list show an identity only what it
/// may read: no token, no page; team-a sees team-a's locks and its own
/// sessions; root sees everything.
#[tokio::test(flavor = "multi_thread")]
async fn the_inspector_and_the_session_list_follow_the_rights() {
    use base64::Engine;
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
    let a = client_as(&cluster, "token-a").await;
    let b = client_as(&cluster, "token-b").await;
    let sa = a.session(Duration::from_secs(10)).await.unwrap();
    let sb = b.session(Duration::from_secs(10)).await.unwrap();
    let _ga = sa.lock("team-a/x").acquire().await.unwrap();
    let _gb = sb.lock("team-b/y").acquire().await.unwrap();

    // Session.List: a sees its own; root all of them.
    let mine = a.sessions("").await.unwrap();
    assert_eq!(
        mine.iter().map(|s| s.session_id).collect::<Vec<_>>(),
        vec![sa.id()]
    );
    let root = client_as(&cluster, "token-root").await;
    assert!(root.sessions("").await.unwrap().len() >= 2);

    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let admin = cluster.node(leader).metrics_addr.clone().unwrap();
    let get = |auth: Option<String>| {
        let admin = admin.clone();
        async move {
            let headers: Vec<(&str, String)> =
                auth.into_iter().map(|v| ("authorization", v)).collect();
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            raftlock_tests::http_call(&admin, "GET", "/ui/state", &headers, "")
                .await
                .unwrap()
        }
    };
    let anon = get(None).await;
    assert_eq!(anon.status, 401, "{anon:?}");
    assert!(anon
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Basic")));
    let page = raftlock_tests::http_call(&admin, "GET", "/ui", &[], "")
        .await
        .unwrap();
    assert_eq!(page.status, 401, "the page too asks for the token");
    // A browser sends the token as the basic-auth password.
    let basic = |token: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("ops:{token}"))
        )
    };
    let seen_by_a = get(Some(basic("token-a"))).await;
    assert_eq!(seen_by_a.status, 200, "{seen_by_a:?}");
    let v = seen_by_a.json();
    let names: Vec<&str> = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["team-a/x"], "{v}");
    assert_eq!(v["sessions"].as_array().unwrap().len(), 1, "{v}");
    let seen_by_root = get(Some("Bearer token-root".into())).await.json();
    assert_eq!(
        seen_by_root["locks"].as_array().unwrap().len(),
        2,
        "{seen_by_root}"
    );
    assert_eq!(get(Some(basic("token-x"))).await.status, 401);
}

/// A token lease was not tied to who took it: any identity with the `lock`
/// right on the limit could credit back another client's lease (its id is
/// the take's log index, easy to guess). Only its taker may return it now.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_identity_that_took_a_token_lease_may_return_it() {
    use raftlock_proto::v1::rate_limit_client::RateLimitClient;
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
    let (a, b) = (
        raw_as(&cluster, Some("token-a")),
        raw_as(&cluster, Some("token-b")),
    );
    let taken = on_leader(&cluster, |leader| {
        let a = a.clone();
        async move {
            RateLimitClient::new(a.channel(&leader).await.unwrap())
                .take(a.request(TakeRequest {
                    name: "team-a/api".into(),
                    n: 4,
                    limit: Some(LimitSpec {
                        rate: 1,
                        per_ms: 60_000,
                        burst: 4,
                    }),
                    lease_ms: 10_000,
                    ..Default::default()
                }))
                .await
        }
    })
    .await
    .unwrap()
    .into_inner();
    assert!(taken.admitted && taken.lease_id != 0, "{taken:?}");
    let give_back = |who: Access| {
        let lease_id = taken.lease_id;
        move |leader: String| {
            let who = who.clone();
            async move {
                RateLimitClient::new(who.channel(&leader).await.unwrap())
                    .r#return(who.request(ReturnTokensRequest {
                        name: "team-a/api".into(),
                        lease_id,
                        unused: 4,
                    }))
                    .await
            }
        }
    };
    // b may lock under team-a/, but did not take this lease.
    expect(
        on_leader(&cluster, give_back(b.clone())).await,
        Code::PermissionDenied,
        "taken by \"a\"",
    );
    let r = on_leader(&cluster, give_back(a.clone()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.credited, 4, "{r:?}");
}
