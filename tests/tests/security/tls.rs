//! TLS on both ports (certificates made by `deploy/tls/make-certs.sh`), and peers refusing a certificate from another CA.

use crate::support::*;

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

    // The CLI's environment variables, read by the library: https://
    // endpoints, the CA, the client certificate and a client name.
    let file = |name: &str| ours.join(name).display().to_string();
    let vars = std::collections::HashMap::from([
        (
            "RAFTLOCK_ENDPOINTS",
            cluster
                .endpoints()
                .iter()
                .map(|e| format!("https://{e}"))
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("RAFTLOCK_CACERT", file("ca.pem")),
        ("RAFTLOCK_CERT", file("ops.pem")),
        ("RAFTLOCK_KEY", file("ops-key.pem")),
        ("RAFTLOCK_CLIENT_NAME", "from-env".to_string()),
    ]);
    let (endpoints, options) = Options::from_vars(|name| vars.get(name).cloned()).unwrap();
    let c = Client::connect_with(endpoints, options).await.unwrap();
    let s = c.session(Duration::from_secs(5)).await.unwrap();
    let g = s.lock("tls/from-env").acquire().await.unwrap();
    let info = c.describe("tls/from-env").await.unwrap();
    assert_eq!(
        info.session(s.id()).map(|i| i.client_name.as_str()),
        Some("from-env"),
        "{info:?}"
    );
    g.release().await.unwrap();
    s.close().await.unwrap();
    // Without the CA, https:// endpoints are refused before any connection.
    let no_ca = |name: &str| {
        (name != "RAFTLOCK_CACERT")
            .then(|| vars.get(name).cloned())
            .flatten()
    };
    assert!(matches!(
        Options::from_vars(no_ca),
        Err(raftlock_client::Error::Tls(m)) if m.contains("RAFTLOCK_CACERT")
    ));

    // The HTTP/JSON API on the same TLS port, over HTTP/1.1 and HTTP/2
    // (ALPN offers both), with a token and with the client certificate.
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let url = format!(
        "https://{}/v1/cluster/status",
        cluster.node(leader).client_addr
    );
    let ca = ours.join("ca.pem");
    let curl = |extra: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(&ca)
            .args(extra)
            .arg(&url)
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    for version in ["--http1.1", "--http2"] {
        let body = curl(&[version, "-H", "authorization: Bearer token-root"]);
        assert!(
            body.contains("\"nodeId\""),
            "{version} with a token: {body}"
        );
    }
    let ops_cert = ours.join("ops.pem");
    let ops_key = ours.join("ops-key.pem");
    let body = curl(&[
        "--http1.1",
        "--cert",
        ops_cert.to_str().unwrap(),
        "--key",
        ops_key.to_str().unwrap(),
    ]);
    assert!(
        body.contains("\"nodeId\""),
        "with the client certificate: {body}"
    );
    assert!(
        curl(&["--http1.1"]).contains("UNAUTHENTICATED"),
        "no credentials over HTTP are refused"
    );

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
