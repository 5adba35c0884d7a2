//! Rate limits on real clusters: what is admitted stays within
//! `rate × span + burst` at 1, 16 and 64 clients and through a leader kill;
//! bad parameters and unknown limits get precise errors and change
//! nothing; token leases give back what was not spent; the CLI runs a
//! command only when admitted.

use raftlock_client::{Client, Error, RateLimit};
use raftlock_tests::{binary, http_call, Cluster};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rate 50/s, burst 10: the limit the load tests share.
fn limit(client: &Client, name: &str) -> RateLimit {
    client
        .rate_limit(name)
        .rate(50, Duration::from_secs(1))
        .burst(10)
}

/// One admitted take: when it was sent and when its answer came.
type Admitted = (Instant, Instant);

/// `clients` tasks take one token at a time for `run`, each on its own
/// client connection every fourth task; returns the admitted takes.
async fn load(cluster: &Cluster, name: &str, clients: usize, run: Duration) -> Vec<Admitted> {
    let mut conns = Vec::new();
    for _ in 0..clients.div_ceil(4) {
        conns.push(cluster.client().await);
    }
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let end = Instant::now() + run;
    let mut tasks = Vec::new();
    for i in 0..clients {
        let l = limit(&conns[i / 4], name);
        let admitted = admitted.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let sent = Instant::now();
                match l.try_take(1).await {
                    Ok(a) if a.admitted => admitted.lock().unwrap().push((sent, Instant::now())),
                    // Not yet: come back when it would fit.
                    Ok(a) => {
                        tokio::time::sleep(a.retry_after.min(Duration::from_millis(200))).await
                    }
                    // A leader change: the library retried for its deadline.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let v = admitted.lock().unwrap().clone();
    v
}

/// The promise, judged from what clients saw: the takes sent at or after
/// `a` and answered by `b` were admitted within `[a, b]`, so there are at
/// most `50 × (b − a) + 10` of them (with 1 % for the clocks' rates).
fn check_bound(admitted: &[Admitted]) {
    for (a, _) in admitted {
        for (_, b) in admitted {
            if b <= a {
                continue;
            }
            let inside = admitted.iter().filter(|(s, r)| s >= a && r <= b).count() as f64;
            let bound = 50.0 * (*b - *a).as_secs_f64() * 1.01 + 10.0;
            assert!(
                inside <= bound,
                "{inside} takes admitted within {:?}, more than the bound {bound:.1}",
                *b - *a
            );
        }
    }
}

#[tokio::test]
async fn admitted_takes_stay_within_the_bound_at_1_16_and_64_clients() {
    let cluster = Cluster::start(3).await;
    for clients in [1usize, 16, 64] {
        let name = format!("rl/load-{clients}");
        let run = Duration::from_secs(3);
        let started = Instant::now();
        let admitted = load(&cluster, &name, clients, run).await;
        check_bound(&admitted);
        let span = started.elapsed().as_secs_f64();
        let n = admitted.len() as f64;
        assert!(n <= 50.0 * span * 1.01 + 10.0, "{n} admitted in {span:.2}s");
        // And the limit is not starved: most of what it allows is taken.
        // One client takes a token every 20 ms plus the round trip of the
        // refused take before it (come back after `retry_after`), which a
        // debug cluster on a loaded machine can make 15 ms or more.
        let floor = if clients == 1 { 0.4 } else { 0.6 };
        assert!(
            n >= 50.0 * run.as_secs_f64() * floor,
            "{clients} clients got only {n} tokens in {run:?} at 50/s"
        );
        let client = cluster.client().await;
        let info = limit(&client, &name).describe().await.unwrap();
        assert_eq!(
            info.admitted,
            admitted.len() as u64,
            "the server counts what clients got"
        );
    }
}

#[tokio::test]
async fn a_leader_kill_mid_run_stays_within_the_bound() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let name = "rl/failover";
    limit(&client, name).define().await.unwrap();
    let defined = Instant::now();
    let loader = {
        let conns: Vec<Client> = vec![cluster.client().await, cluster.client().await];
        let admitted = Arc::new(Mutex::new(Vec::new()));
        let end = Instant::now() + Duration::from_secs(6);
        let mut tasks = Vec::new();
        for i in 0..16 {
            let l = limit(&conns[i % 2], name);
            let admitted = admitted.clone();
            tasks.push(tokio::spawn(async move {
                while Instant::now() < end {
                    let sent = Instant::now();
                    match l.try_take(1).await {
                        Ok(a) if a.admitted => {
                            admitted.lock().unwrap().push((sent, Instant::now()))
                        }
                        Ok(a) => {
                            tokio::time::sleep(a.retry_after.min(Duration::from_millis(200))).await
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            }));
        }
        (tasks, admitted)
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.kill(leader);
    cluster
        .wait_for_new_leader(leader, Duration::from_secs(20))
        .await;
    let (tasks, admitted) = loader;
    for t in tasks {
        t.await.unwrap();
    }
    let admitted = admitted.lock().unwrap().clone();
    check_bound(&admitted);
    // Everything the cluster admitted, acknowledged or not (answers lost in
    // the kill included), fits the bound over the whole run.
    let info = limit(&client, name).describe().await.unwrap();
    let span = defined.elapsed().as_secs_f64();
    assert!(
        info.admitted as f64 <= 50.0 * span * 1.01 + 10.0,
        "the cluster admitted {} in {span:.2}s at 50/s with burst 10",
        info.admitted
    );
    assert!(info.admitted >= admitted.len() as u64);
    assert!(
        admitted.len() >= 100,
        "only {} takes admitted in 6 s with a failover",
        admitted.len()
    );
}

/// A bucket refills while its limit is idle across a failover: a new
/// leader counts the rate clock from when its term began, not from the
/// limit's first call after it (which stood the clock still for as long as
/// nobody took, and refused a take whose tokens had long refilled).
#[tokio::test]
async fn an_idle_limit_refills_across_a_failover() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let l = client
        .rate_limit("rl/idle-failover")
        .rate(10, Duration::from_secs(1))
        .burst(5);
    assert!(l.try_take(5).await.unwrap().admitted, "the burst");
    assert!(!l.try_take(5).await.unwrap().admitted, "past the burst");
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.kill(leader);
    cluster
        .wait_for_new_leader(leader, Duration::from_secs(20))
        .await;
    // Five tokens refill in 0.5 s at 10/s; wait three times that on the
    // new leader before its first rate-limit call.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let a = l.try_take(5).await.unwrap();
    assert!(
        a.admitted,
        "5 tokens refused 1.5 s into a new term at 10/s with burst 5 (retry after {:?})",
        a.retry_after
    );
}

#[tokio::test]
async fn bad_parameters_and_unknown_limits_get_precise_errors_and_change_nothing() {
    let cluster = Cluster::start(1).await;
    let client = cluster.client().await;
    let err = client.rate_limit("rl/none").try_take(1).await.unwrap_err();
    assert!(matches!(err, Error::LimitNotFound(_)), "{err:?}");
    let zero = client
        .rate_limit("rl/a")
        .rate(0, Duration::from_secs(1))
        .burst(5);
    let err = zero.try_take(1).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let a = limit(&client, "rl/a");
    let err = a.try_take(11).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "n above the burst: {err:?}"
    );
    let err = client.rate_limit("rl/a").describe().await.unwrap_err();
    assert!(
        matches!(err, Error::LimitNotFound(_)),
        "nothing was created: {err:?}"
    );

    assert!(a.define().await.unwrap());
    assert!(!a.define().await.unwrap(), "defining it again is a no-op");
    let other = client
        .rate_limit("rl/a")
        .rate(50, Duration::from_secs(1))
        .burst(11);
    let err = other.try_take(1).await.unwrap_err();
    assert!(matches!(err, Error::LimitConflict(_)), "{err:?}");
    let info = a.describe().await.unwrap();
    assert_eq!(
        (info.rate, info.per_ms, info.burst, info.admitted),
        (50, 1_000, 10, 0)
    );
    assert_eq!(info.available, 10);

    for _ in 0..10 {
        assert!(a.try_take(1).await.unwrap().admitted);
    }
    // One token a minute: the second is refused with the wait until it
    // fits, and a take that may wait less is answered at once, refused.
    let slow = client
        .rate_limit("rl/slow")
        .rate(1, Duration::from_secs(60))
        .burst(1);
    assert!(slow.try_take(1).await.unwrap().admitted);
    let refused = slow.try_take(1).await.unwrap();
    assert!(
        !refused.admitted && refused.retry_after > Duration::from_secs(50),
        "{refused:?}"
    );
    let started = Instant::now();
    assert!(!slow.take(1, Duration::from_secs(2)).await.unwrap().admitted);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "it did not wait in vain"
    );
    // Ten a second: a take that waits is admitted once the token is due.
    let fast = client
        .rate_limit("rl/fast")
        .rate(10, Duration::from_secs(1))
        .burst(1);
    // Timed from before the first take: the next token is due 100 ms
    // after it was proposed, however late its answer came back.
    let started = Instant::now();
    assert!(fast.try_take(1).await.unwrap().admitted);
    assert!(fast.take(1, Duration::from_secs(2)).await.unwrap().admitted);
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "{:?}",
        started.elapsed()
    );

    // Over HTTP: a negative rate is not a number of tokens; a zero one and
    // an unknown limit are refused with their reasons, and nothing changed.
    let addr = client.status().await.unwrap().leader_addr;
    let refused = [
        (
            r#"{"name": "rl/b", "limit": {"rate": -5, "burst": 2}}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        (
            r#"{"name": "rl/b", "limit": {"rate": 0, "burst": 2}}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        (
            r#"{"name": "rl/b", "n": 3, "limit": {"rate": 5, "burst": 2}}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        (r#"{"name": "rl/b"}"#, 404, "LIMIT_NOT_FOUND"),
        (
            r#"{"name": "rl/a", "limit": {"rate": 5, "burst": 2}}"#,
            409,
            "LIMIT_CONFLICT",
        ),
        // Well formed, but more than the existing limit's burst of 10.
        (r#"{"name": "rl/a", "n": 11}"#, 409, "LIMIT_CONFLICT"),
    ];
    for (body, status, reason) in refused {
        let r = http_call(&addr, "POST", "/v1/ratelimit/take", &[], body)
            .await
            .unwrap();
        assert_eq!(r.status, status, "{body}: {r:?}");
        assert_eq!(r.json()["reason"], reason, "{body}: {r:?}");
    }
    let err = client.rate_limit("rl/b").describe().await.unwrap_err();
    assert!(
        matches!(err, Error::LimitNotFound(_)),
        "nothing was created: {err:?}"
    );
    assert_eq!(
        a.describe().await.unwrap().admitted,
        10,
        "the refusals admitted nothing"
    );
    assert!(client.rate_limit("rl/a").delete().await.unwrap());
}

#[tokio::test]
async fn a_token_lease_is_one_write_for_a_block_and_gives_back_what_was_not_spent() {
    let cluster = Cluster::start(1).await;
    let client = cluster.client().await;
    let l = client
        .rate_limit("rl/block")
        .rate(10, Duration::from_secs(60))
        .burst(10);
    let block = l
        .reserve(8, Duration::from_secs(2))
        .await
        .unwrap()
        .expect("8 of 10 fit");
    assert_eq!(
        l.describe().await.unwrap().available,
        2,
        "the block counts at once"
    );
    assert!(l
        .reserve(8, Duration::from_secs(2))
        .await
        .unwrap()
        .is_none());
    for _ in 0..3 {
        assert!(block.try_spend());
    }
    assert_eq!(block.left(), 5);
    assert_eq!(block.finish().await.unwrap(), 5);
    let info = l.describe().await.unwrap();
    assert_eq!((info.available, info.admitted, info.leases), (7, 3, 0));

    // A block is not spent past its validity.
    let short = l
        .reserve(2, Duration::from_millis(300))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(!short.try_spend());
}

fn cli(cluster: &Cluster, args: &[&str]) -> std::process::Output {
    Command::new(binary("raftlock"))
        .env("RAFTLOCK_ENDPOINTS", cluster.endpoints().join(","))
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn the_cli_runs_a_command_only_when_admitted() {
    let cluster = Cluster::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let args = [
        "rate", "rl/cli", "--rate", "1/m", "--burst", "1", "--", "sh", "-c", &touch,
    ];
    let first = cli(&cluster, &args);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    let second = cli(&cluster, &args);
    assert_eq!(
        second.status.code(),
        Some(75),
        "not admitted within a minute's rate"
    );
    assert!(!marker.exists(), "the command did not run");
    let out = cli(&cluster, &["rate", "rl/cli", "--describe"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1 per 60000ms, burst 1") && text.contains("refused 1"),
        "{text}"
    );
    let bad = cli(&cluster, &["rate", "rl/cli", "--rate", "0/s"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "a zero rate is a bad command line"
    );
}

/// Per-limit series lived in the metrics registry for good: a deleted
/// limit's histogram stayed in every scrape, and names that came and went
/// grew the label set without bound. They are read from the replicated
/// state at scrape time now, at most 100 of them.
#[tokio::test(flavor = "multi_thread")]
async fn per_limit_series_go_with_their_limit_and_stay_bounded() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    let metrics_addr = cluster.nodes()[(leader - 1) as usize]
        .metrics_addr
        .clone()
        .expect("a metrics listener");
    let scrape = || async {
        raftlock_tests::http_get(&metrics_addr, "/metrics")
            .await
            .unwrap()
            .1
    };
    let a = limit(&client, "metrics/a");
    assert!(a.try_take(3).await.unwrap().admitted);
    let text = scrape().await;
    assert_eq!(
        raftlock_tests::metric(
            &text,
            r#"raftlock_ratelimit_limit_admitted_total{limit="metrics/a"}"#
        ),
        Some(3.0),
        "{text}"
    );
    assert!(a.delete().await.unwrap());
    let text = scrape().await;
    assert!(
        !text.contains(r#"limit="metrics/a""#),
        "a deleted limit still has series:\n{}",
        text.lines()
            .filter(|l| l.contains("metrics/a"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Many limits: 100 series of their own and one for the rest.
    for i in 0..130 {
        assert!(
            limit(&client, &format!("many/{i:03}"))
                .try_take(1)
                .await
                .unwrap()
                .admitted
        );
    }
    let text = scrape().await;
    let series = text
        .lines()
        .filter(|l| l.starts_with("raftlock_ratelimit_limit_admitted_total{"))
        .count();
    assert_eq!(series, 101, "{text}");
    assert_eq!(
        raftlock_tests::metric(
            &text,
            r#"raftlock_ratelimit_limit_admitted_total{limit="_other"}"#
        ),
        Some(30.0)
    );
    // The cluster-wide counters carry no limit label.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("raftlock_ratelimit_wait_seconds") && l.contains("limit=")),
        "{text}"
    );
}
