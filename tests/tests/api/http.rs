//! The HTTP/JSON API on the client port: the documented calls are the
//! served ones, a lock works end to end over JSON (tokens, waiting in the
//! queue, elections and observe), a follower names the leader, and the
//! README's curl examples run against `raftlockd dev`.

use raftlock_tests::{binary, http_call, Cluster};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn request_id() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::now_v7().as_bytes())
}

async fn post(addr: &str, path: &str, body: Value) -> raftlock_tests::HttpAnswer {
    http_call(addr, "POST", path, &[], &body.to_string())
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `path` answered 200; its JSON. A node that no longer leads (an election
/// on a loaded machine) names the leader, and the call goes there, as the
/// API asks of clients: NOT_LEADER means the node did not act on it.
async fn ok(addr: &str, path: &str, body: Value) -> Value {
    let mut addr = addr.to_owned();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let a = post(&addr, path, body.clone()).await;
        if a.status == 503 && Instant::now() < deadline {
            let why = a.json();
            if why["reason"] == "NOT_LEADER" {
                seen.push(format!("{addr}: {}", why["message"]));
                // Until the election settles, a node may name the leader it
                // knew: look again a moment later.
                if let Some(leader) = why["leader"].as_str().filter(|l| !l.is_empty()) {
                    addr = leader.to_owned();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        }
        assert_eq!(a.status, 200, "{path}: {a:?} (after {seen:?})");
        return a.json();
    }
}

async fn leader_addr(cluster: &Cluster) -> String {
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.node(leader).client_addr.clone()
}

#[test]
fn the_openapi_document_is_generated_from_the_served_api() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    let want = serde_json::to_string_pretty(&raftlock_tests::openapi::document()).unwrap() + "\n";
    if std::env::var_os("REWRITE_OPENAPI").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/openapi.json is not the document of the API as served; regenerate it with \
         REWRITE_OPENAPI=1 cargo test -p raftlock-tests --test api http::the_openapi"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_call_is_served_and_answers_json() {
    let cluster = Cluster::start(3).await;
    let leader = leader_addr(&cluster).await;
    for r in raftlock_proto::http::ROUTES {
        if r.streams {
            // An empty message may be a valid stream that never ends (a
            // watch of every lock): served if it answers a status line.
            let a = tokio::time::timeout(Duration::from_secs(2), post(&leader, r.path, json!({})))
                .await;
            if let Ok(a) = a {
                assert!(a.status == 200 || a.status == 400, "{}: {a:?}", r.path);
            }
            continue;
        }
        // An empty message: most calls refuse it, none may be unknown.
        let a = post(&leader, r.path, json!({})).await;
        assert_ne!(
            a.status, 404,
            "{} is documented but not served: {a:?}",
            r.path
        );
        let body = a.json();
        if a.status != 200 {
            assert!(
                body["reason"].is_string() && body["code"].is_string(),
                "{}: {a:?}",
                r.path
            );
        }
        if r.get {
            let g = http_call(&leader, "GET", r.path, &[], "").await.unwrap();
            assert_eq!(g.status, 200, "GET {}: {g:?}", r.path);
        }
    }
    let a = post(&leader, "/v1/lock/acquir", json!({})).await;
    assert_eq!(
        (a.status, a.json()["code"].as_str()),
        (404, Some("UNIMPLEMENTED"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lock_over_json_queues_hands_over_and_fences() {
    let cluster = Cluster::start(3).await;
    let l = leader_addr(&cluster).await;
    let session = |name: &'static str| {
        let l = l.clone();
        async move {
            ok(
                &l,
                "/v1/session/create",
                json!({"ttlMs": 10000, "clientName": name}),
            )
            .await["sessionId"]
                .as_str()
                .expect("64-bit ids are strings")
                .to_owned()
        }
    };
    let (a, b) = (session("a").await, session("b").await);
    let first = ok(
        &l,
        "/v1/lock/acquire",
        json!({"sessionId": a, "name": "http/job", "requestId": request_id(), "metadata": "aG9zdC0x"}),
    )
    .await;
    assert_eq!(first["acquired"], true);
    let token_a: u64 = first["grant"]["token"].as_str().unwrap().parse().unwrap();
    // A try-lock by b finds a holding it; a waiting acquire by b holds the
    // request open until a releases.
    let busy = ok(
        &l,
        "/v1/lock/acquire",
        json!({"sessionId": b, "name": "http/job", "requestId": request_id()}),
    )
    .await;
    assert!(busy.get("acquired").is_none() && busy["holders"][0]["sessionId"] == a);
    let waiter = {
        let (l, b) = (l.clone(), b.clone());
        tokio::spawn(async move {
            ok(
                &l,
                "/v1/lock/acquire",
                json!({"sessionId": b, "name": "http/job", "requestId": request_id(), "waitTimeoutMs": "20000"}),
            )
            .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while ok(&l, "/v1/lock/describe", json!({"name": "http/job"})).await["waiters"]
        .as_array()
        .map_or(0, Vec::len)
        == 0
    {
        assert!(Instant::now() < deadline, "b never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let released = ok(
        &l,
        "/v1/lock/release",
        json!({"sessionId": a, "name": "http/job", "token": token_a.to_string()}),
    )
    .await;
    let handed: u64 = released["granted"][0]["token"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let got = waiter.await.unwrap();
    assert_eq!(
        got["grant"]["token"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        handed
    );
    assert!(handed > token_a, "tokens only grow");
    let v = ok(
        &l,
        "/v1/lock/validate",
        json!({"name": "http/job", "token": token_a.to_string()}),
    )
    .await;
    assert!(
        v.get("valid").is_none(),
        "a's token is no longer valid: {v}"
    );
    // The stale holder is refused with a reason a client can match.
    let stale = post(
        &l,
        "/v1/lock/release",
        json!({"sessionId": a, "name": "http/job", "token": token_a.to_string()}),
    )
    .await;
    assert_eq!(stale.status, 409);
    assert_eq!(stale.json()["reason"], "NOT_HOLDER");
    // Keep-alive and close over JSON.
    let k = ok(&l, "/v1/session/keepalive", json!({"sessionId": b})).await;
    assert_eq!(k["ttlMs"], "10000");
    let closed = ok(&l, "/v1/session/close", json!({"sessionId": b})).await;
    assert_eq!(closed["released"], json!(["http/job"]));
    let gone = post(&l, "/v1/session/keepalive", json!({"sessionId": b})).await;
    assert_eq!(
        (gone.status, gone.json()["reason"].clone()),
        (404, json!("SESSION_NOT_FOUND"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_names_the_leader_and_observe_streams_changes() {
    let cluster = Cluster::start(3).await;
    let l = leader_addr(&cluster).await;
    let follower = cluster
        .nodes()
        .iter()
        .find(|n| n.client_addr != l)
        .unwrap()
        .client_addr
        .clone();
    let a = post(&follower, "/v1/session/create", json!({"ttlMs": 10000})).await;
    assert_eq!(a.status, 503, "{a:?}");
    assert_eq!(a.json()["reason"], "NOT_LEADER");
    assert_eq!(a.header("raftlock-leader"), Some(l.as_str()));
    assert_eq!(a.json()["leader"], l.as_str());

    // Observe: the current leader (none), then the campaign's winner.
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(&l).await.unwrap();
    let body = json!({"name": "http/election"}).to_string();
    s.write_all(
        format!(
            "POST /v1/election/observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut lines = tokio::io::BufReader::new(s).lines();
    async fn next_json(
        lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::net::TcpStream>>,
    ) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                .await
                .expect("an observe line within 10 s")
                .unwrap()
                .expect("the stream goes on");
            // Chunk sizes and headers sit between the JSON lines.
            if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
                if v.is_object() {
                    return v;
                }
            }
        }
    }
    assert_eq!(next_json(&mut lines).await, json!({}), "no leader yet");
    let s = ok(&l, "/v1/session/create", json!({"ttlMs": 10000})).await["sessionId"].clone();
    let won = ok(
        &l,
        "/v1/election/campaign",
        json!({"sessionId": s, "name": "http/election", "requestId": request_id(), "value": "bm9kZS1h"}),
    )
    .await;
    let seen = next_json(&mut lines).await;
    assert_eq!(seen["leader"]["token"], won["leader"]["token"]);
    assert_eq!(seen["leader"]["metadata"], "bm9kZS1h");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_curl_examples_work_against_raftlockd_dev() {
    let _serial = raftlock_tests::exclusive();
    for tool in ["curl", "jq"] {
        assert!(
            std::process::Command::new(tool)
                .arg("--version")
                .output()
                .is_ok(),
            "{tool} is needed to run the README's curl examples (apt-get install {tool})"
        );
    }
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .unwrap();
    let script = readme
        .split("<!-- curl-example -->")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("README.md has a ```sh block after <!-- curl-example -->");
    let mut dev = std::process::Command::new(binary("raftlockd"))
        .arg("dev")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = scopeguard(dev.id());
    let mut out = std::io::BufReader::new(dev.stdout.take().unwrap());
    let endpoints = loop {
        let mut line = String::new();
        use std::io::BufRead;
        assert!(out.read_line(&mut line).unwrap() > 0, "dev exited early");
        if let Some(e) = line.trim().strip_prefix("RAFTLOCK_ENDPOINTS=") {
            break e.to_owned();
        }
    };
    let first = endpoints.split(',').next().unwrap();
    let run = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .env("RAFTLOCK_HTTP", format!("http://{first}"))
        .output()
        .unwrap();
    drop(guard);
    let _ = dev.wait();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "the README's curl example failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for want in ["\"acquired\": true", "STALE_TOKEN"] {
        assert!(
            stdout.contains(want),
            "the example's output lacks {want}:\n{stdout}"
        );
    }
    // The release and the close answer empty messages: nothing was waiting.
    assert_eq!(
        stdout.lines().filter(|l| l.trim() == "{}").count(),
        2,
        "the release and the close succeed:\n{stdout}"
    );
}

/// SIGTERMs the `raftlockd dev` this test started (by PID) when dropped,
/// so it stops its nodes even when the test fails.
fn scopeguard(pid: u32) -> impl Drop {
    struct Stop(u32);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0 as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
    Stop(pid)
}
