//! The inspector page (`/ui` on the admin listener): its JSON on a real
//! cluster, and the page as a browser renders it (headless Chromium from
//! Debian's `chromium` package).

use raftlock_client::{Client, Options};
use raftlock_tests::{http_get, Cluster};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Debian's Chromium, if installed; CI installs it and sets
/// RAFTLOCK_REQUIRE_CHROMIUM so that a missing one fails there.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = std::process::Command::new("which").arg(name).output() {
            if out.status.success() {
                return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
            }
        }
    }
    assert!(
        std::env::var_os("RAFTLOCK_REQUIRE_CHROMIUM").is_none(),
        "chromium is required here (apt-get install chromium)"
    );
    None
}

/// Chromium renders `url`, runs its script for a while, and prints the
/// resulting DOM; with `screenshot`, also writes a PNG of the page.
fn render(chromium: &Path, url: &str, screenshot: Option<&Path>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1400,1000",
        "--virtual-time-budget=4000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        Some(p) => cmd.arg(format!("--screenshot={}", p.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(url).output().expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn the_inspector_shows_holders_waiters_and_sessions() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let admin = cluster
        .node(leader)
        .metrics_addr
        .clone()
        .expect("the test cluster serves an admin listener");
    let on = |host: &'static str, pid| {
        Client::connect_with(
            cluster.endpoints(),
            Options {
                host: Some(host.into()),
                pid: Some(pid),
                ..Default::default()
            },
        )
    };
    let web1 = on("web-1", 4242).await.unwrap();
    let web2 = on("web-2", 77).await.unwrap();
    let holder = web1
        .session_named(Duration::from_secs(30), "deployer")
        .await
        .unwrap();
    let _guard = holder
        .lock("deploy/prod")
        .metadata(b"release 2026.11".to_vec())
        .acquire()
        .await
        .unwrap();
    // A name a client chose, shown as text and never run as HTML.
    let _odd = holder.lock("deploy/<b>bold</b>").acquire().await.unwrap();
    let waiter = web2
        .session_named(Duration::from_secs(30), "deployer-b")
        .await
        .unwrap();
    let queued = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .lock("deploy/prod")
                .timeout(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let state = loop {
        let (code, body) = http_get(&admin, "/ui/state?prefix=deploy/").await.unwrap();
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let queued = v["locks"].as_array().is_some_and(|locks| {
            locks
                .iter()
                .any(|l| l["waiters"].as_array().is_some_and(|w| !w.is_empty()))
        });
        if queued {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never showed: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let prod = state["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "deploy/prod")
        .expect("deploy/prod listed");
    assert_eq!(
        prod["holders"][0]["who"], "deployer on web-1 pid 4242",
        "{state}"
    );
    assert_eq!(prod["holders"][0]["metadata"], "release 2026.11");
    assert_eq!(prod["waiters"][0]["who"], "deployer-b on web-2 pid 77");
    assert_eq!(state["node"]["role"], "Leader");
    assert_eq!(state["members"].as_array().unwrap().len(), 3);
    assert!(
        state["members"][0]["lag"].is_u64(),
        "the leader knows each lag: {state}"
    );
    assert!(state["sessions"].as_array().unwrap().len() >= 2);
    assert_eq!(state["sessions_more"], false);
    assert!(
        state["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "deploy/prod" && e["kind"] == "granted"),
        "{state}"
    );
    let (code, page) = http_get(&admin, "/ui").await.unwrap();
    assert_eq!(code, 200);
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "the page loads nothing from elsewhere"
    );

    let Some(chromium) = chromium() else {
        eprintln!("chromium not installed: the page was not rendered");
        return;
    };
    let url = format!("http://{admin}/ui");
    let dom = tokio::task::spawn_blocking({
        let (chromium, url) = (chromium.clone(), url.clone());
        move || render(&chromium, &url, None)
    })
    .await
    .unwrap();
    for want in [
        "deploy/prod",
        "deployer on web-1 pid 4242",
        "1. deployer-b on web-2 pid 77",
        "release 2026.11",
        "deploy/&lt;b&gt;bold&lt;/b&gt;",
    ] {
        assert!(
            dom.contains(want),
            "the rendered page lacks {want:?}:\n{dom}"
        );
    }
    assert!(!dom.contains("<b>bold</b>"), "a lock name became HTML");
    assert!(
        dom.contains(r#"<span id="status" class="ok">updated"#),
        "the page loaded its state: {dom}"
    );
    // RAFTLOCK_UI_SCREENSHOT=docs/inspector.png refreshes the picture in
    // the docs from this very state.
    if let Some(path) = std::env::var_os("RAFTLOCK_UI_SCREENSHOT") {
        let path = PathBuf::from(path);
        let path = if path.is_relative() {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
        } else {
            path
        };
        tokio::task::spawn_blocking(move || render(&chromium, &url, Some(&path)))
            .await
            .unwrap();
    }
    queued.abort();
}

/// The page reads a bounded page of the applied state, not the whole lock
/// table: applies wait while it reads, and it refreshes every second per
/// open browser.
#[tokio::test(flavor = "multi_thread")]
async fn the_inspector_reads_a_page_of_a_large_lock_table() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let admin = cluster.node(leader).metrics_addr.clone().unwrap();
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(60)).await.unwrap();
    // 2,100 locks: more than the 2,000 one read may look at.
    let mut guards = Vec::new();
    for chunk in (0..2_100).collect::<Vec<_>>().chunks(100) {
        let tries = chunk.iter().map(|i| {
            let s = session.clone();
            async move { s.lock(format!("bulk/{i:05}")).acquire().await }
        });
        for g in futures::future::join_all(tries).await {
            guards.push(g.unwrap());
        }
    }
    let _last = session.lock("tail/last").acquire().await.unwrap();
    let state = |prefix: &'static str| {
        let admin = admin.clone();
        async move {
            let (code, body) = http_get(&admin, &format!("/ui/state?prefix={prefix}"))
                .await
                .unwrap();
            assert_eq!(code, 200, "{body}");
            serde_json::from_str::<serde_json::Value>(&body).unwrap()
        }
    };
    let all = state("").await;
    assert_eq!(all["locks"].as_array().unwrap().len(), 500);
    assert_eq!(all["locks_more"], true, "the page says it is not all");
    assert_eq!(all["locks"][0]["name"], "bulk/00000");
    // A prefix starts the read at its first name.
    let tail = state("tail/").await;
    let names: Vec<_> = tail["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["name"])
        .collect();
    assert_eq!(names, ["tail/last"]);
    assert_eq!(tail["locks_more"], false);
    assert_eq!(tail["sessions_more"], false);
}
