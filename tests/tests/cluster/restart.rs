//! Whole-cluster restart from data dirs, and a paused node that must not
//! expire anyone when it wakes.

use raftlock_tests::{raw, Cluster};
use std::time::Duration;

#[tokio::test]
async fn full_restart_keeps_holders_waiters_and_token_order() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let leader_addr = client.status().await.unwrap().leader_addr;
    let s1 = raw::silent_session(&leader_addr, 60_000).await;
    let s2 = raw::silent_session(&leader_addr, 60_000).await;
    let mut tokens = Vec::new();
    for name in ["r/1", "r/2", "r/3"] {
        let g = raw::acquire(&leader_addr, s1, name, None).await.unwrap();
        tokens.push(g.grant.unwrap().token);
    }
    // A queued waiter: the call gives up once it is queued, the wait stays.
    let at = leader_addr.clone();
    let queued = tokio::spawn(async move { raw::acquire(&at, s2, "r/1", Some(600_000)).await });
    raw::wait_for_waiters(&leader_addr, "r/1", 1).await;
    queued.abort();
    let before = client.describe("r/1").await.unwrap();
    assert_eq!(before.waiters.len(), 1);
    let max_before = client.status().await.unwrap().applied_index;

    for id in 1..=3 {
        cluster.kill(id);
    }
    for id in 1..=3 {
        cluster.start_node(id);
    }
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    let client = cluster.client().await;
    for (name, token) in ["r/1", "r/2", "r/3"].iter().zip(&tokens) {
        let d = client.describe(name).await.unwrap();
        assert_eq!(d.holders.len(), 1, "{name} lost its holder");
        assert_eq!((d.holders[0].session_id, d.holders[0].token), (s1, *token));
    }
    let after = client.describe("r/1").await.unwrap();
    assert_eq!(after.waiters.len(), 1, "the waiter survived");
    assert_eq!(after.waiters[0].session_id, s2);

    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let g = session.lock("r/new").try_acquire().await.unwrap().unwrap();
    // Every token issued before came from an entry at most max_before.
    assert!(
        g.token() >> 16 > max_before,
        "token {} reissued or went back (applied before restart: {max_before})",
        g.token()
    );
}

/// A node that led before a full restart comes back with the committed
/// index it last saved, which may be behind the last entries it applied
/// and answered reads from, and (it stands for a new term rather than
/// resume the old one) may win the first election again. Its first reads
/// must still see those entries: here the queued waiter, the last entry
/// before the crash. The old leader comes back alone first, so its
/// replication to the others has failed and backs off when they return,
/// which leaves the window open for the read.
#[tokio::test]
async fn a_leader_back_from_a_full_restart_reads_everything_it_answered_before() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let leader_addr = cluster.node(leader).client_addr.clone();
    let s1 = raw::silent_session(&leader_addr, 60_000).await;
    let s2 = raw::silent_session(&leader_addr, 60_000).await;
    raw::acquire(&leader_addr, s1, "w/1", None).await.unwrap();
    let at = leader_addr.clone();
    let queued = tokio::spawn(async move { raw::acquire(&at, s2, "w/1", Some(600_000)).await });
    raw::wait_for_waiters(&leader_addr, "w/1", 1).await;
    queued.abort();
    let before = raw::describe(&leader_addr, "w/1").await.unwrap();
    assert_eq!(before.waiters.len(), 1);

    for id in 1..=3 {
        cluster.kill(id);
    }
    cluster.start_node(leader);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for id in (1..=3).filter(|id| *id != leader) {
        cluster.start_node(id);
    }
    // The first read any node answers (only a leader answers one; it is
    // the old leader unless a follower's election timer won the race).
    let addrs: Vec<String> = (1..=3)
        .map(|id| cluster.node(id).client_addr.clone())
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let after = 'read: loop {
        for addr in &addrs {
            // Not listening yet: raw::describe would panic on connect.
            if tokio::net::TcpStream::connect(addr).await.is_err() {
                continue;
            }
            if let Ok(d) = raw::describe(addr, "w/1").await {
                break 'read d;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no node answered a read after the restart"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        after.waiters.len(),
        1,
        "the first read after the restart lost the waiter it saw before: {after:?}"
    );
}

/// kill -9 of every node in the middle of load: every grant a client saw
/// acknowledged is there after the restart, with its token, every release
/// it saw acknowledged too, and no token is issued twice.
#[tokio::test]
async fn kill_9_of_every_node_under_load_loses_no_acknowledged_grant() {
    kill_every_node_under_load(&[]).await;
}

/// The same as a power loss of the whole cluster: the nodes keep their log
/// writes in memory until they are synced (`--fault-lose-unsynced`), so the
/// kill drops every write that was not yet durable, as the page cache
/// would. Each leader replicates while it writes (the default), so this
/// also shows that no commit is seen before the leader's copy is durable.
#[tokio::test]
async fn power_loss_of_every_node_under_load_loses_no_acknowledged_grant() {
    kill_every_node_under_load(&["--fault-lose-unsynced"]).await;
}

async fn kill_every_node_under_load(args: &[&str]) {
    use std::sync::{Arc, Mutex};
    let mut cluster = Cluster::start_with(3, args).await;
    let client = cluster.client().await;
    // (name, session, token) held, and names released, as acknowledged.
    let acked: Arc<Mutex<Vec<(String, u64, u64)>>> = Arc::default();
    let released: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut workers = Vec::new();
    for w in 0..8 {
        let client = client.clone();
        let (acked, released) = (acked.clone(), released.clone());
        workers.push(tokio::spawn(async move {
            let Ok(session) = client.session(Duration::from_secs(60)).await else {
                return;
            };
            for i in 0.. {
                let name = format!("kill9/{w}/{i}");
                // 4 KiB of metadata: the largest allowed, so entries are big.
                match session
                    .lock(&name)
                    .metadata(vec![w as u8; 4096])
                    .try_acquire()
                    .await
                {
                    Ok(Some(g)) if i % 3 == 2 => match g.release().await {
                        Ok(()) => released.lock().unwrap().push(name),
                        Err(_) => return,
                    },
                    Ok(Some(g)) => {
                        let g = g.detach();
                        acked.lock().unwrap().push((name, g.session_id, g.token));
                    }
                    _ => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for id in 1..=3 {
        cluster.kill(id);
    }
    for w in workers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    let released = released.lock().unwrap().clone();
    assert!(
        acked.len() > 20 && !released.is_empty(),
        "only {} grants and {} releases before the kill",
        acked.len(),
        released.len()
    );
    for id in 1..=3 {
        cluster.start_node(id);
    }
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    let client = cluster.client().await;
    let mut tokens = std::collections::BTreeSet::new();
    for (name, session, token) in &acked {
        let d = client
            .describe(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", cluster.logs()));
        assert_eq!(d.holders.len(), 1, "{name} lost its acknowledged grant");
        assert_eq!(
            (d.holders[0].session_id, d.holders[0].token),
            (*session, *token)
        );
        assert!(tokens.insert(*token), "token {token} issued twice");
    }
    for name in &released {
        let d = client
            .describe(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", cluster.logs()));
        assert!(d.holders.is_empty(), "{name} came back after its release");
    }
    let max = tokens.iter().next_back().copied().unwrap_or(0);
    let session = client
        .session(Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    let g = session
        .lock("kill9/after")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(g.token() > max, "token {} is not above {max}", g.token());
}

#[tokio::test]
async fn paused_leader_does_not_expire_sessions_when_it_wakes() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    // The TTL outlasts a failover (about 2 s here) with a renewal stalled
    // on the frozen leader before and maybe after it (2 s each), not the
    // pause.
    let session = client.session(Duration::from_secs(10)).await.unwrap();
    let guard = session.lock("held").try_acquire().await.unwrap().unwrap();
    let old = cluster.leader().await.unwrap();

    cluster.pause(old);
    let new = cluster
        .wait_for_new_leader(old, Duration::from_secs(10))
        .await;
    // Paused well past the TTL, while the session renews through the new leader.
    tokio::time::sleep(Duration::from_secs(12)).await;
    cluster.resume(old);
    tokio::time::sleep(Duration::from_secs(3)).await;

    assert!(
        session.is_valid(),
        "session lost; logs:\n{}",
        cluster.logs()
    );
    let d = client.describe("held").await.unwrap();
    assert_eq!(d.holders.len(), 1, "lock freed after the old leader woke");
    assert_eq!(d.holders[0].token, guard.token());
    let log = cluster.log_of(old);
    assert!(
        !log.contains("expiring sessions"),
        "the woken leader proposed an expiry:\n{log}"
    );
    let _ = new;
}

#[tokio::test]
async fn paused_follower_wakes_without_disturbing_leases() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let session = client.session(Duration::from_secs(2)).await.unwrap();
    let guard = session.lock("steady").try_acquire().await.unwrap().unwrap();
    let leader = cluster.leader().await.unwrap();
    let follower = (1..=3).find(|i| *i != leader).unwrap();
    cluster.pause(follower);
    tokio::time::sleep(Duration::from_secs(4)).await;
    cluster.resume(follower);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(session.is_valid());
    let d = client.describe("steady").await.unwrap();
    assert_eq!(d.holders[0].token, guard.token());
}

/// A leader that replicates while it writes can lose, in a power loss,
/// entries its followers already hold. Restarted before anyone else
/// stands, it must not lead again in the same term: it would write other
/// entries under the log ids its followers hold, the logs would fork, and
/// grants it acknowledged would be gone once another node leads.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_restarted_after_losing_its_tail_does_not_fork_the_log() {
    // A slow disk everywhere keeps many entries sent but not yet synced.
    let mut cluster =
        Cluster::start_with(3, &["--fault-lose-unsynced", "--fault-sync-delay-ms", "50"]).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await;
    let client = cluster.client().await;
    let granted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..6 {
        let (client, granted, stop) = (client.clone(), granted.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let session = client.session(Duration::from_secs(60)).await.unwrap();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("fork/{w}/{i}");
                if let Ok(Some(g)) = session.lock(name.clone()).try_acquire().await {
                    granted.lock().unwrap().push((name, g.token()));
                    std::mem::forget(g);
                    i += 1;
                }
            }
            session
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = granted.lock().unwrap().len();
    cluster.kill(leader);
    cluster.start_node(leader);
    // Until the clients have gone on past the restart (a call stuck on
    // the killed process waits out its attempt timeout first).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while granted.lock().unwrap().len() < before + 60 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut sessions = Vec::new();
    for w in workers {
        sessions.push(w.await.unwrap());
    }
    // Leadership to a node that never lost anything.
    cluster.kill(leader);
    cluster
        .wait_for_new_leader(leader, Duration::from_secs(20))
        .await;
    let granted = granted.lock().unwrap().clone();
    assert!(granted.len() > 20, "{} grants", granted.len());
    let mut lost = Vec::new();
    for (name, token) in &granted {
        let d = client.describe(name).await.unwrap();
        if d.holders.first().map(|h| h.token) != Some(*token) {
            lost.push((name.clone(), *token, d.holders.first().map(|h| h.token)));
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged grants lost or changed: {:?}",
        lost.len(),
        granted.len(),
        &lost[..lost.len().min(5)]
    );
    drop(sessions);
}
