//! Certificates and the auth file replaced without a restart, under load:
//! a rotated client-port certificate and a new auth file take effect on
//! SIGHUP (and when the files change), a broken new auth file or
//! certificate is refused with the old one kept, a CA bundle that gains a CA
//! is taken, and the client running throughout sees no error.

use crate::support::*;
use raftlock_tests::{http_get, metric};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn hangup(cluster: &Cluster) {
    for n in cluster.nodes() {
        if let Some(pid) = n.pid() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGHUP,
            )
            .expect("SIGHUP to a node this test started");
        }
    }
}

/// `raftlock_reloads_total{what, result}` summed over the nodes.
async fn reloads(cluster: &Cluster, what: &str, result: &str) -> f64 {
    let mut total = 0.0;
    for n in cluster.nodes() {
        let (_, text) = http_get(n.metrics_addr.as_deref().expect("metrics"), "/metrics")
            .await
            .unwrap();
        total += metric(
            &text,
            &format!(r#"raftlock_reloads_total{{what="{what}",result="{result}"}}"#),
        )
        .unwrap_or(0.0);
    }
    total
}

/// Waits until the nodes' reloads of `what` with `result` reach `total`.
async fn wait_for_reloads(cluster: &Cluster, what: &str, result: &str, total: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while reloads(cluster, what, result).await < total {
        assert!(
            Instant::now() < deadline,
            "{what} {result}: fewer than {total} reloads within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn certificates_and_the_auth_file_rotate_under_load_without_an_error() {
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path().join("ours");
    make_certs(&dir, &["127.0.0.1", "localhost"]);
    let auth = auth_file(certs.path());
    let mut flags = tls_flags(&dir);
    flags.extend(["--auth-file".into(), auth.display().to_string()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let cluster = Cluster::start_secure(
        3,
        &flags,
        Access {
            ca_pem: Some(read(dir.join("ca.pem"))),
            token: Some("token-root".into()),
        },
    )
    .await;

    // Load for the whole test: one client locking and releasing.
    let client = cluster.client().await;
    let stop = Arc::new(AtomicBool::new(false));
    let (done, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load = {
        let (stop, done, errors) = (stop.clone(), done.clone(), errors.clone());
        tokio::spawn(async move {
            let session = client.session(Duration::from_secs(10)).await.unwrap();
            while !stop.load(Ordering::SeqCst) {
                let r = async {
                    let g = session.lock("reload/x").acquire().await?;
                    g.release().await
                }
                .await;
                match r {
                    Ok(()) => done.fetch_add(1, Ordering::SeqCst),
                    Err(e) => {
                        eprintln!("load: {e}");
                        errors.fetch_add(1, Ordering::SeqCst)
                    }
                };
            }
            session.close().await.unwrap();
        })
    };

    // A new certificate from the same CA, written over the old files: the
    // nodes notice the change by themselves.
    let before = reloads(&cluster, "client_tls", "ok").await;
    let peer_before = reloads(&cluster, "peer_tls", "ok").await;
    make_certs(&dir, &["127.0.0.1", "localhost", "raftlock.example"]);
    wait_for_reloads(&cluster, "client_tls", "ok", before + 3.0).await;
    // The same certificate serves the peer port: reloaded there too, and
    // replication goes on over connections made with it.
    wait_for_reloads(&cluster, "peer_tls", "ok", peer_before + 3.0).await;
    let done_at_rotation = done.load(Ordering::SeqCst);
    // New connections get the new certificate and work.
    let fresh = client_as(&cluster, "token-root").await;
    let s = fresh.session(Duration::from_secs(5)).await.unwrap();
    s.lock("reload/fresh")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    s.close().await.unwrap();

    // A new identity, on SIGHUP.
    let text = std::fs::read_to_string(&auth).unwrap()
        + &format!(
            "\n[[identities]]\nname = \"late\"\ntoken_sha256 = \"{}\"\nroles = [\"team-a\"]\n",
            hash("token-late")
        );
    let before = reloads(&cluster, "auth", "ok").await;
    std::fs::write(&auth, text).unwrap();
    hangup(&cluster);
    wait_for_reloads(&cluster, "auth", "ok", before + 3.0).await;
    let late = client_as(&cluster, "token-late").await;
    let s = late.session(Duration::from_secs(5)).await.unwrap();
    s.lock("team-a/late")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    s.close().await.unwrap();

    // A broken auth file is refused and the one in force stays.
    std::fs::write(&auth, "[[identities]\nthis is not TOML").unwrap();
    hangup(&cluster);
    wait_for_reloads(&cluster, "auth", "refused", 3.0).await;
    let still = client_as(&cluster, "token-late").await;
    let s = still.session(Duration::from_secs(5)).await.unwrap();
    s.close().await.unwrap();
    for n in cluster.nodes() {
        assert!(
            cluster
                .log_of(n.id)
                .contains("new auth file refused; the previous one stays in force"),
            "node {} logs the refusal",
            n.id
        );
    }

    // A certificate file that is not a certificate (a half-written copy,
    // say) is refused and the certificate in force keeps serving.
    let good_cert = read(dir.join("node.pem"));
    let refused_before = reloads(&cluster, "client_tls", "refused").await;
    std::fs::write(
        dir.join("node.pem"),
        "-----BEGIN CERTIFICATE-----\ngarbage\n",
    )
    .unwrap();
    hangup(&cluster);
    wait_for_reloads(&cluster, "client_tls", "refused", refused_before + 3.0).await;
    for n in cluster.nodes() {
        assert!(
            cluster
                .log_of(n.id)
                .contains("new client port certificates refused; the previous ones stay in force"),
            "node {} logs the refused certificate",
            n.id
        );
    }
    let still = client_as(&cluster, "token-root").await;
    let s = still.session(Duration::from_secs(5)).await.unwrap();
    s.close().await.unwrap();
    std::fs::write(dir.join("node.pem"), &good_cert).unwrap();

    // A CA bundle that gains a second CA (the first step of a CA rotation)
    // is taken, and clients trusting the first CA go on working.
    let next = certs.path().join("next");
    make_certs(&next, &["127.0.0.1"]);
    let mut bundle = read(dir.join("ca.pem"));
    bundle.extend(read(next.join("ca.pem")));
    let before = reloads(&cluster, "client_tls", "ok").await;
    std::fs::write(dir.join("ca.pem"), bundle).unwrap();
    hangup(&cluster);
    wait_for_reloads(&cluster, "client_tls", "ok", before + 3.0).await;
    let after_ca = client_as(&cluster, "token-root").await;
    let s = after_ca.session(Duration::from_secs(5)).await.unwrap();
    s.close().await.unwrap();

    assert!(
        done.load(Ordering::SeqCst) > done_at_rotation + 5,
        "writes went on after the peer certificates were replaced"
    );
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    println!(
        "INFO {} acquire+release under rotation, {} errors",
        done.load(Ordering::SeqCst),
        errors.load(Ordering::SeqCst)
    );
    assert!(done.load(Ordering::SeqCst) > 10, "the load ran");
    assert_eq!(
        errors.load(Ordering::SeqCst),
        0,
        "no client error during the rotations"
    );
}

/// Streams captured their caller when they opened: an identity removed
/// from the auth file on SIGHUP had its unary calls refused, but its
/// sessions went on renewing over their keep-alive stream (their locks
/// held for good) and its watch went on receiving events. Each stream now
/// looks its caller up again as it goes.
#[tokio::test(flavor = "multi_thread")]
async fn an_identity_removed_on_reload_loses_its_open_streams() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let auth = auth_file(dir.path());
    let auth_arg = auth.display().to_string();
    let cluster = Cluster::start_secure(
        3,
        &["--auth-file", &auth_arg],
        Access {
            token: Some("token-root".into()),
            ..Default::default()
        },
    )
    .await;
    let root = client_as(&cluster, "token-root").await;
    let a = client_as(&cluster, "token-a").await;
    let session = a.session(Duration::from_secs(2)).await.unwrap();
    let guard = session.lock("team-a/held").acquire().await.unwrap();
    let mut events = a.watch("team-a/");
    // The watch is open once it delivers an event.
    let probe = root.session(Duration::from_secs(10)).await.unwrap();
    probe
        .lock("team-a/probe")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the watch delivers")
        .expect("an event")
        .expect("not an error");

    // a is removed: only b and root stay.
    let text = std::fs::read_to_string(&auth).unwrap();
    let start = text
        .find("[[identities]]\nname = \"a\"")
        .expect("a's entry");
    let end = start + text[start..].find("\n\n").expect("entry end");
    std::fs::write(&auth, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let before = reloads(&cluster, "auth", "ok").await;
    hangup(&cluster);
    wait_for_reloads(&cluster, "auth", "ok", before + 3.0).await;
    let removed = Instant::now();

    // Its session stops being renewed and expires, releasing its lock.
    let freed = loop {
        let d = root.describe("team-a/held").await.unwrap();
        if d.holders.is_empty() {
            break removed.elapsed();
        }
        assert!(
            removed.elapsed() < Duration::from_secs(15),
            "a's lock is still held {:?} after a was removed: {d:?}",
            removed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!guard.is_valid(), "a's guard knows it lost the lock");
    // Its watch ends with UNAUTHENTICATED at the next event.
    probe
        .lock("team-a/probe")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.next().await {
                Some(Ok(_)) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("the watch ends");
    assert!(
        matches!(ended, Some(Err(Error::Unauthenticated(_))) | None),
        "{ended:?}"
    );
    println!("INFO a's lock freed {freed:?} after the reload");
}
