//! A leader-elected scheduler loop: several replicas campaign, one leads and
//! schedules work; when it steps down (or dies), the next in line takes over.
//!
//! ```sh
//! cargo run --release --bin raftlockd -- dev      # prints RAFTLOCK_ENDPOINTS=...
//! RAFTLOCK_ENDPOINTS=... cargo run --example leader_scheduler
//! ```
//!
//! Each replica publishes its address as the election value so that others
//! (and `raftlock leader NAME`) can find the current scheduler. A leader
//! stops scheduling as soon as `is_valid()` turns false, that is, before its
//! session could have expired on the cluster, and stamps every scheduled
//! task with its leadership token so that workers can refuse a deposed
//! leader's orders.

use futures::StreamExt;
use raftlock_client::Client;
use std::time::Duration;

const TICKS: u32 = 3;

#[tokio::main]
async fn main() -> Result<(), raftlock_client::Error> {
    let endpoints = std::env::var("RAFTLOCK_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:7000".into());
    let client = Client::connect(endpoints.split(',')).await?;
    let election = format!("scheduler/{}", std::process::id());

    // Someone watching who leads, as a dashboard or a worker would.
    let mut changes = Box::pin(client.election(&election).observe());
    let watcher = tokio::spawn(async move {
        let mut leaders = Vec::new();
        while let Some(Ok(change)) = changes.next().await {
            match change {
                Some(l) => {
                    let who = String::from_utf8_lossy(&l.metadata).into_owned();
                    println!("observer: {who} leads (token {})", l.token);
                    leaders.push(who);
                }
                None => {
                    println!("observer: no leader");
                    if leaders.len() == 2 {
                        return leaders;
                    }
                }
            }
        }
        leaders
    });

    let replicas = ["replica-a:8080", "replica-b:8080"].map(|me| {
        let client = client.clone();
        let election = election.clone();
        tokio::spawn(async move {
            let session = client.session(Duration::from_secs(5)).await?;
            let leadership = session.election(&election).campaign(me).await?;
            for tick in 1..=TICKS {
                if !leadership.is_valid() {
                    println!("{me}: leadership lost; stop scheduling");
                    return Ok(());
                }
                println!(
                    "{me}: tick {tick}: scheduling work under token {}",
                    leadership.token()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            println!("{me}: stepping down");
            leadership.resign().await?;
            session.close().await?;
            Ok::<(), raftlock_client::Error>(())
        })
    });
    for r in futures::future::join_all(replicas).await {
        r.expect("replica task")?;
    }
    let leaders = tokio::time::timeout(Duration::from_secs(10), watcher)
        .await
        .expect("observer saw both terms")
        .expect("observer task");
    assert_eq!(
        leaders.len(),
        2,
        "each replica led once, one after the other"
    );
    Ok(())
}
