//! Lock.Watch on real clusters: every kind of event, resumption through a
//! leader kill with nothing missed or repeated, a history that ran out,
//! and the CLI and HTTP forms.

use futures::StreamExt;
use raftlock_client::{Error, LockEventKind, WatchBatch};
use raftlock_tests::{binary, raw, Cluster};
use std::collections::HashSet;
use std::time::Duration;

/// The next batch, or a panic naming what was awaited.
async fn next(
    events: &mut (impl futures::Stream<Item = Result<WatchBatch, Error>> + Unpin),
    what: &str,
) -> WatchBatch {
    match tokio::time::timeout(Duration::from_secs(20), events.next()).await {
        Ok(Some(Ok(b))) => b,
        other => panic!("{what}: {other:?}"),
    }
}

#[tokio::test]
async fn watch_names_grants_handoffs_releases_expiries_and_force_releases() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    // From a log point read first: the events after it, however long
    // the watch takes to open.
    let from = client.status().await.unwrap().applied_index;
    let mut events = client.watch_after("w/", from);
    let leader_addr = client.status().await.unwrap().leader_addr;

    // A holder that goes silent, and a waiter queued behind it.
    let silent = raw::silent_session(&leader_addr, 1_000).await;
    let held = raw::acquire(&leader_addr, silent, "w/a", None)
        .await
        .unwrap()
        .grant
        .unwrap();
    let waiter = client.session(Duration::from_secs(10)).await.unwrap();
    let queued = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .lock("w/a")
                .timeout(Duration::from_secs(20))
                .acquire()
                .await
        })
    };
    let b = next(&mut events, "the grant").await;
    assert_eq!(b.events[0].kind, LockEventKind::Granted);
    assert_eq!(
        (b.events[0].session_id, b.events[0].token),
        (silent, held.token)
    );
    // The silent session expires: its lock goes, the waiter gets it, in
    // one command.
    let b = next(&mut events, "the expiry").await;
    let kinds: Vec<_> = b.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [LockEventKind::Expired, LockEventKind::Handoff],
        "{b:?}"
    );
    let guard = queued.await.unwrap().unwrap();
    assert_eq!(b.events[1].token, guard.token());

    // An administrator takes it away.
    client.force_release("w/a").await.unwrap();
    let b = next(&mut events, "the force-release").await;
    assert_eq!(b.events[0].kind, LockEventKind::ForceReleased);
    assert_eq!(b.events[0].token, guard.token());

    // A plain grant and release, under the prefix; a lock outside it is
    // not seen.
    let other = waiter.lock("elsewhere").acquire().await.unwrap();
    let g = waiter.lock("w/b").acquire().await.unwrap();
    let token = g.token();
    g.release().await.unwrap();
    let b = next(&mut events, "the second grant").await;
    assert_eq!(
        (b.events[0].kind, b.events[0].name.as_str()),
        (LockEventKind::Granted, "w/b")
    );
    let b = next(&mut events, "the release").await;
    assert_eq!(
        (b.events[0].kind, b.events[0].token),
        (LockEventKind::Released, token)
    );
    other.release().await.unwrap();

    // A set of free locks is granted at once, not handed off: it was
    // reported as a handoff when only a single acquire counted as direct.
    let set = waiter.lock_all(["w/c", "w/d"]).acquire().await.unwrap();
    let b = next(&mut events, "the set's grant").await;
    let seen: Vec<_> = b
        .events
        .iter()
        .map(|e| (e.kind, e.name.as_str(), e.session_id))
        .collect();
    assert_eq!(
        seen,
        [
            (LockEventKind::Granted, "w/c", waiter.id()),
            (LockEventKind::Granted, "w/d", waiter.id())
        ],
        "{b:?}"
    );
    set.release().await.unwrap();
}

/// A writer grants and releases while the leader is killed; the watcher,
/// connected to that leader, resumes elsewhere and sees every grant and
/// release the writer saw acknowledged, each once, in log order.
#[tokio::test]
async fn a_watch_resumes_through_a_leader_kill_without_gaps_or_repeats() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let client = cluster.client().await;
    // From a log point read first: the events after it, however long
    // the watch takes to open.
    let from = client.status().await.unwrap().applied_index;
    let mut events = client.watch_after("kill/", from);

    let writer = {
        let client = client.clone();
        tokio::spawn(async move {
            let session = client.session(Duration::from_secs(30)).await.unwrap();
            let mut acked = Vec::new();
            for i in 0..60 {
                let name = format!("kill/{}", i % 3);
                let g = session.lock(&name).acquire().await.unwrap();
                let token = g.token();
                g.release().await.unwrap();
                acked.push(token);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            session.close().await.unwrap();
            acked
        })
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    cluster.kill(leader);
    let acked = writer.await.unwrap();

    let mut granted = Vec::new();
    let mut released = Vec::new();
    let mut indexes = Vec::new();
    while released.len() < acked.len() {
        let b = next(&mut events, "an event after the kill").await;
        indexes.push(b.index);
        for e in b.events {
            match e.kind {
                LockEventKind::Granted => granted.push(e.token),
                LockEventKind::Released => released.push(e.token),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert!(
        indexes.windows(2).all(|w| w[0] < w[1]),
        "indexes go up: {indexes:?}"
    );
    assert_eq!(granted, acked, "every acknowledged grant, once, in order");
    assert_eq!(
        released, acked,
        "every acknowledged release, once, in order"
    );
    let unique: HashSet<_> = granted.iter().collect();
    assert_eq!(unique.len(), granted.len());
}

/// A watch that asks for more than the node remembers is told so, with a
/// reason, instead of silently missing events.
#[tokio::test]
async fn a_watch_past_the_history_is_refused_as_compacted() {
    let cluster = Cluster::start_with(3, &["--watch-history", "2"]).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(10)).await.unwrap();
    let mut first = 0;
    for i in 0..5 {
        let g = session.lock(format!("c/{i}")).acquire().await.unwrap();
        if i == 0 {
            first = g.token();
        }
    }
    let mut events = client.watch_after("c/", first);
    match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
        Ok(Some(Err(Error::WatchCompacted(_)))) => {}
        other => panic!("expected WatchCompacted, got {other:?}"),
    }
    // The raw status carries the reason.
    let leader_addr = client.status().await.unwrap().leader_addr;
    let mut api =
        raftlock_proto::v1::lock_client::LockClient::connect(format!("http://{leader_addr}"))
            .await
            .unwrap();
    let status = match api
        .watch(raftlock_proto::v1::WatchRequest {
            prefix: "c/".into(),
            after_index: first,
        })
        .await
    {
        Err(s) => s,
        Ok(_) => panic!("a compacted watch opened"),
    };
    assert_eq!(
        raftlock_proto::reason::of(&status),
        Some(raftlock_proto::reason::Reason::WatchCompacted),
        "{status:?}"
    );
    assert_eq!(status.code(), tonic::Code::OutOfRange);
    // From now on works.
    let mut events = client.watch("c/");
    tokio::time::sleep(Duration::from_millis(300)).await;
    session
        .lock("c/new")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let b = next(&mut events, "a grant after the refusal").await;
    assert_eq!(b.events[0].name, "c/new");
}

/// `raftlock watch` prints each event as a line as it happens, and the
/// HTTP form streams them as newline-delimited JSON.
#[tokio::test]
async fn the_cli_and_http_stream_watch_events() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let cluster = Cluster::start(3).await;
    let mut cli = tokio::process::Command::new(binary("raftlock"))
        .env("RAFTLOCK_ENDPOINTS", cluster.endpoints().join(","))
        .args(["watch", "cli/"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(cli.stdout.take().unwrap()).lines();

    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let addr = cluster.node(leader).client_addr.clone();
    let mut http = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let body = r#"{"prefix": "cli/"}"#;
    http.write_all(
        format!(
            "POST /v1/lock/watch HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut http = tokio::io::BufReader::new(http).lines();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(10)).await.unwrap();
    let g = session
        .lock("cli/job")
        .metadata(b"host-a".to_vec())
        .acquire()
        .await
        .unwrap();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the CLI printed the grant")
        .unwrap()
        .unwrap();
    assert!(
        line.contains(&format!(
            "granted cli/job session {} token {}",
            session.id(),
            g.token()
        )) && line.contains(r#"metadata "host-a""#),
        "{line}"
    );

    // The HTTP answer: headers, then the opening object, then the grant.
    let mut objects = Vec::new();
    while objects.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(10), http.next_line())
            .await
            .expect("the HTTP stream goes on")
            .unwrap()
            .unwrap();
        if let Some(json) = line.trim().strip_prefix('{').map(|_| line.trim()) {
            objects.push(serde_json::from_str::<serde_json::Value>(json).unwrap());
        }
    }
    assert!(
        objects[0]["events"].as_array().is_none_or(|e| e.is_empty()),
        "{objects:?}"
    );
    assert_eq!(
        objects[1]["events"][0]["kind"], "LOCK_EVENT_KIND_GRANTED",
        "{objects:?}"
    );
    assert_eq!(objects[1]["events"][0]["name"], "cli/job", "{objects:?}");
    g.release().await.unwrap();
    cli.kill().await.unwrap();
}

/// A watcher that stops and comes back later, on another node, with the
/// last index it saw gets exactly what happened meanwhile: nothing it had,
/// nothing missed.
#[tokio::test]
async fn a_watch_resumed_on_another_node_gets_exactly_what_came_after() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let addr = |id: u64| vec![cluster.node(id).client_addr.clone()];
    let first = raftlock_client::Client::connect(&addr(followers[0]))
        .await
        .unwrap();
    // From a log point read first: the events after it, however long
    // the watch takes to open.
    let from = first.status().await.unwrap().applied_index;
    let mut events = first.watch_after("res/", from);
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(30)).await.unwrap();
    let mut guards = Vec::new();
    for i in 0..20 {
        guards.push(session.lock(format!("res/{i}")).acquire().await.unwrap());
    }
    let acked: Vec<u64> = guards.iter().map(|g| g.token()).collect();
    let mut seen = Vec::new();
    let mut last = 0;
    while seen.len() < 10 {
        let b = next(&mut events, "one of the first grants").await;
        last = b.index;
        seen.extend(b.events.iter().map(|e| e.token));
    }
    drop(events);
    let second = raftlock_client::Client::connect(&addr(followers[1]))
        .await
        .unwrap();
    let mut events = second.watch_after("res/", last);
    while seen.len() < acked.len() {
        let b = next(&mut events, "a grant after the resume").await;
        assert!(b.index > last, "{b:?} is not after {last}");
        seen.extend(b.events.iter().map(|e| e.token));
    }
    assert_eq!(seen, acked, "every grant once, in order");
}
