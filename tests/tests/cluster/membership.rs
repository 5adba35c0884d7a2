//! Membership under load: growing 3 -> 5 and shrinking back, and replacing
//! a dead node whose replacement catches up from a snapshot.

use raftlock_client::Client;
use raftlock_tests::Cluster;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<(u64, Vec<String>)>>,
}

/// Workers that acquire and release their own lock in a loop; each returns
/// how many grants it got and every error it saw (after the client's own
/// retries).
fn load(client: &Client, workers: usize) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = (0..workers)
        .map(|w| {
            let client = client.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut errors = Vec::new();
                let mut grants = 0u64;
                let mut last = 0u64;
                let session = match client.session(Duration::from_secs(5)).await {
                    Ok(s) => s,
                    Err(e) => return (0, vec![e.to_string()]),
                };
                while !stop.load(Ordering::SeqCst) {
                    let name = format!("load/{w}");
                    match session
                        .lock(&name)
                        .timeout(Duration::from_secs(10))
                        .acquire()
                        .await
                    {
                        Ok(g) => {
                            if g.token() <= last {
                                errors.push(format!("token {} after {last}", g.token()));
                            }
                            last = g.token();
                            grants += 1;
                            if let Err(e) = g.release().await {
                                errors.push(format!("release: {e}"));
                            }
                        }
                        Err(e) => errors.push(format!("acquire: {e}")),
                    }
                }
                if !session.is_valid() {
                    errors.push(format!("session lost: {}", session.lost().await));
                }
                (grants, errors)
            })
        })
        .collect();
    Load { stop, tasks }
}

impl Load {
    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let mut total = 0;
        for t in self.tasks {
            let (grants, errors) = t.await.unwrap();
            assert!(errors.is_empty(), "errors visible to a client: {errors:?}");
            total += grants;
        }
        total
    }
}

async fn voters(client: &Client) -> Vec<u64> {
    let mut v: Vec<u64> = client
        .status()
        .await
        .unwrap()
        .members
        .iter()
        .map(|m| m.id)
        .collect();
    v.sort_unstable();
    v
}

#[tokio::test]
async fn grow_to_five_and_shrink_back_under_load() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let load = load(&client, 4);
    tokio::time::sleep(Duration::from_millis(500)).await;

    for _ in 0..2 {
        let id = cluster.start_new_node();
        let n = &cluster.nodes()[(id - 1) as usize];
        client
            .add_learner(id, &n.peer_addr, &n.client_addr, true)
            .await
            .unwrap();
    }
    client
        .change_membership(&[1, 2, 3, 4, 5], false)
        .await
        .unwrap();
    assert_eq!(voters(&client).await, vec![1, 2, 3, 4, 5]);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Shrink back, even if 4 or 5 leads now.
    client.change_membership(&[1, 2, 3], false).await.unwrap();
    assert_eq!(voters(&client).await, vec![1, 2, 3]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    for id in [4, 5] {
        assert!(
            cluster.terminate(id).await,
            "node {id} did not stop cleanly"
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let grants = load.finish().await;
    assert!(grants > 20, "the load made progress ({grants} grants)");
    eprintln!("{grants} grants through grow and shrink, no client-visible error");
}

#[tokio::test]
async fn a_dead_node_is_replaced_and_the_replacement_catches_up_by_snapshot() {
    let mut cluster = Cluster::start_with(3, &["--snapshot-every", "100"]).await;
    let client = cluster.client().await;
    let leader = cluster.leader().await.unwrap();
    let dead = (1..=3).find(|&i| i != leader).unwrap();
    cluster.kill(dead);

    // Enough writes that the log the dead node missed is purged behind a
    // snapshot.
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let mut last = 0;
    for i in 0..250 {
        // Every fifth grant stays held (under its own name); the rest are
        // released, so the log grows while the state stays small.
        let name = if i % 5 == 0 {
            format!("snap/held/{i}")
        } else {
            format!("snap/{}", i % 5)
        };
        let g = session.lock(name).try_acquire().await.unwrap().unwrap();
        last = g.token();
        if i % 5 != 0 {
            g.release().await.unwrap();
        } else {
            std::mem::forget(g);
        }
    }
    // Who holds what (a listing's sessions also say how long they have
    // left, which moves).
    let holders = |locks: Vec<raftlock_client::LockInfo>| {
        locks
            .into_iter()
            .map(|l| (l.name, l.holders))
            .collect::<Vec<_>>()
    };
    let held = holders(client.list("snap/").await.unwrap());

    let remaining: Vec<u64> = (1..=3).filter(|&i| i != dead).collect();
    client.change_membership(&remaining, false).await.unwrap();
    let id = cluster.start_new_node();
    let n = &cluster.nodes()[(id - 1) as usize];
    client
        .add_learner(id, &n.peer_addr, &n.client_addr, true)
        .await
        .unwrap();
    let mut voters_now = remaining.clone();
    voters_now.push(id);
    client.change_membership(&voters_now, false).await.unwrap();
    assert!(
        cluster
            .log_of(id)
            .contains("installed a snapshot from the leader"),
        "the replacement did not catch up by snapshot:\n{}",
        cluster.logs()
    );
    let s = client
        .node_status(&cluster.nodes()[(id - 1) as usize].client_addr)
        .await
        .unwrap();
    // Tokens are entry index × 2^16 + position (DESIGN.md).
    assert!(
        s.applied_index >= last >> 16,
        "replacement applied {} < the entry of token {last}",
        s.applied_index
    );

    // The replacement carries the cluster: with the old leader gone, it is
    // one of the two voters left, and holders and token order survived.
    let old_leader = cluster.leader().await.unwrap();
    cluster.kill(old_leader);
    cluster
        .wait_for_new_leader(old_leader, Duration::from_secs(10))
        .await;
    assert_eq!(holders(client.list("snap/").await.unwrap()), held);
    let g = session
        .lock("snap/fresh")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(g.token() > last);
}

#[tokio::test]
async fn rolling_restart_under_load_loses_no_session_and_shows_no_error() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let load = load(&client, 4);
    // And `raftlock bench` as an outside client would run it: it exits
    // non-zero on any error or lost session.
    let bench = tokio::process::Command::new(raftlock_tests::binary("raftlock"))
        .env("RAFTLOCK_ENDPOINTS", cluster.endpoints().join(","))
        .args([
            "bench",
            "--clients",
            "4",
            "--duration",
            "12s",
            "--runs",
            "1",
            "--ttl",
            "4s",
        ])
        .kill_on_drop(true)
        .output();
    let bench = tokio::spawn(bench);
    // Idle sessions with a short TTL: the most fragile thing to keep alive
    // across three leader changes.
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(client.session(Duration::from_secs(4)).await.unwrap());
    }
    for round in 0..3 {
        // Leader last, as the runbook says; its SIGTERM hands leadership on.
        let leader = cluster.leader().await.unwrap();
        let order: Vec<u64> = (1..=3).filter(|&i| i != leader).chain([leader]).collect();
        let id = order[round];
        assert!(
            cluster.terminate(id).await,
            "node {id} did not stop cleanly"
        );
        cluster.start_node(id);
        // Wait until it is ready again before the next one.
        let addr = cluster.nodes()[(id - 1) as usize]
            .metrics_addr
            .clone()
            .expect("a metrics listener");
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while raftlock_tests::http_get(&addr, "/ready")
            .await
            .map(|r| r.0)
            .unwrap_or(0)
            != 200
        {
            assert!(
                std::time::Instant::now() < deadline,
                "node {id} not ready after restart"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let lost: Vec<u64> = idle
        .iter()
        .filter(|s| !s.is_valid())
        .map(|s| s.id())
        .collect();
    assert!(
        lost.is_empty(),
        "sessions lost in a rolling restart: {lost:?}"
    );
    let grants = load.finish().await;
    eprintln!(
        "{grants} grants through a rolling restart, 0 lost sessions, 0 client-visible errors"
    );
    let out = bench.await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "raftlock bench saw errors or lost sessions:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", text.lines().nth(2).unwrap_or_default());
    for s in &idle {
        s.close().await.unwrap();
    }
}

/// A node that joins without `--initial-cluster` never learned its
/// cluster's id: its data dir said none, and so would its backups once it
/// led. It now takes the id from the leader's first call and records it.
#[tokio::test]
async fn a_joining_node_records_the_cluster_it_joined() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let id = cluster.start_new_node();
    let (peer, addr, dir) = {
        let n = &cluster.nodes()[(id - 1) as usize];
        (
            n.peer_addr.clone(),
            n.client_addr.clone(),
            n.data_dir.clone(),
        )
    };
    client.add_learner(id, &peer, &addr, true).await.unwrap();
    let identity = |dir: &std::path::Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join("raftlock.json")).unwrap()).unwrap()
    };
    let founder = identity(&cluster.nodes()[0].data_dir);
    let joined = identity(&dir);
    assert!(
        founder["cluster_id"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "{founder}"
    );
    assert_eq!(joined["cluster_id"], founder["cluster_id"], "{joined}");
    assert!(
        cluster.log_of(id).contains("joined cluster"),
        "{}",
        cluster.log_of(id)
    );
}
