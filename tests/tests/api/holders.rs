//! "Who holds deploy/prod, since when, and who waits?": sessions carry
//! their client's name, identity, host and pid; `describe`, `sessions` and
//! the CLI answer with them, and JSON output prints text as text.

use raftlock_tests::Cluster;
use std::time::Duration;

#[tokio::test]
async fn describe_and_sessions_say_who_holds_and_who_waits() {
    let cluster = Cluster::start(3).await;
    let web1 = cluster.client_on("web-1", 4242).await;
    let web2 = cluster.client_on("web-2", 77).await;
    let holder = web1
        .session_named(Duration::from_secs(20), "deployer")
        .await
        .unwrap();
    let guard = holder
        .lock("deploy/prod")
        .metadata(b"release 2026.11".to_vec())
        .acquire()
        .await
        .unwrap();
    let waiter = web2
        .session_named(Duration::from_secs(20), "deployer-b")
        .await
        .unwrap();
    let queued = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .lock("deploy/prod")
                .timeout(Duration::from_secs(30))
                .acquire()
                .await
        })
    };
    let info = loop {
        let info = web1.describe("deploy/prod").await.unwrap();
        if info.waiters.len() == 1 {
            break info;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let h = info
        .session(guard.grant().session_id)
        .expect("the holder's session");
    assert_eq!(
        (h.client_name.as_str(), h.host.as_str(), h.pid),
        ("deployer", "web-1", 4242)
    );
    assert_eq!(h.held, vec!["deploy/prod".to_string()]);
    assert!(h.expires_in_ms > 0 && h.expires_in_ms <= 20_000, "{h:?}");
    let w = info.session(waiter.id()).expect("the waiter's session");
    assert_eq!((w.host.as_str(), w.pid), ("web-2", 77));
    assert_eq!(w.waiting, vec!["deploy/prod".to_string()]);

    // Every session, and only those with the prefix.
    let all = web1.sessions("").await.unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    let b = web1.sessions("deployer-").await.unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].session_id, waiter.id());

    // The CLI's answer to the incident question, in one screen.
    let text = cluster.cli(&["describe", "deploy/prod"]);
    assert!(
        text.contains("deploy/prod: held exclusively, 1 waiting"),
        "{text}"
    );
    assert!(text.contains("deployer on web-1 pid 4242"), "{text}");
    assert!(text.contains("deployer-b on web-2 pid 77"), "{text}");
    assert!(text.contains(r#"metadata "release 2026.11""#), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&cluster.cli(&["--output", "json", "describe", "deploy/prod"]))
            .unwrap();
    assert_eq!(
        json["holders"][0]["metadata"],
        serde_json::json!({"utf8": "release 2026.11"}),
        "{json}"
    );
    assert_eq!(json["sessions"][0]["host"], "web-1", "{json}");
    let listed = cluster.cli(&["sessions"]);
    assert!(
        listed.contains("on web-2 pid 77") && listed.contains("waits deploy/prod"),
        "{listed}"
    );

    // The same over HTTP/JSON, in the proto3 JSON mapping.
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let answer = raftlock_tests::http_call(
        &cluster.node(leader).client_addr,
        "POST",
        "/v1/session/list",
        &[],
        r#"{"clientNamePrefix": "deployer-"}"#,
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    let listed = answer.json();
    assert_eq!(listed["sessions"][0]["host"], "web-2", "{listed}");
    assert_eq!(listed["sessions"][0]["pid"], 77, "{listed}");

    guard.release().await.unwrap();
    let granted = queued.await.unwrap().unwrap();
    let info = web1.describe("deploy/prod").await.unwrap();
    assert_eq!(info.holders[0].session_id, granted.grant().session_id);
    assert_eq!(info.session(waiter.id()).unwrap().held.len(), 1);
}

/// Binary metadata is printed as base64, said so in the key.
#[tokio::test]
async fn json_output_prints_bytes_that_are_not_text_as_base64() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let s = client.session(Duration::from_secs(10)).await.unwrap();
    let _g = s
        .lock("bin/x")
        .metadata(vec![0xff, 0x00, 0x80])
        .acquire()
        .await
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&cluster.cli(&["--output", "json", "describe", "bin/x"])).unwrap();
    assert_eq!(
        json["holders"][0]["metadata"],
        serde_json::json!({"base64": "/wCA"}),
        "{json}"
    );
    // The Rust client reports this process by default.
    assert_eq!(json["sessions"][0]["pid"], std::process::id(), "{json}");
}
