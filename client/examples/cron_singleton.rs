//! A singleton cron job: every instance of a service runs this at the same
//! minute, and exactly one of them does the work.
//!
//! ```sh
//! cargo run --release --bin raftlockd -- dev      # prints RAFTLOCK_ENDPOINTS=...
//! RAFTLOCK_ENDPOINTS=... cargo run --example cron_singleton
//! ```
//!
//! Each of three simulated instances tries the lock once (no waiting: a
//! cron run that is already being done elsewhere is skipped, not queued).
//! The winner holds the lock until the run's window closes, not just while
//! the job runs: instances fire at the same minute but not the same
//! instant, and one whose clock or scheduler is late must find the lock
//! taken rather than free again and run the job a second time.

use raftlock_client::Client;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), raftlock_client::Error> {
    let endpoints = std::env::var("RAFTLOCK_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:7000".into());
    let client = Client::connect(endpoints.split(',')).await?;
    let run = format!("cron/nightly-report/{}", std::process::id());
    // How late an instance may fire and still count as this run; a real
    // job would use most of its period here.
    let window_closes = tokio::time::Instant::now() + Duration::from_secs(2);

    let instances = (1..=3).map(|instance| {
        let client = client.clone();
        let run = run.clone();
        tokio::spawn(async move {
            let session = client.session(Duration::from_secs(10)).await?;
            let outcome = match session.lock(&run).try_acquire().await? {
                Some(guard) => {
                    println!(
                        "instance {instance}: running the job with token {}",
                        guard.token()
                    );
                    // The job itself; it checks that it may still write
                    // before each step.
                    for step in 1..=3 {
                        if !guard.is_valid() {
                            println!("instance {instance}: lock lost at step {step}; stopping");
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    tokio::time::sleep_until(window_closes).await;
                    guard.release().await?;
                    true
                }
                None => {
                    println!("instance {instance}: another instance runs it; skipping");
                    false
                }
            };
            session.close().await?;
            Ok::<bool, raftlock_client::Error>(outcome)
        })
    });
    let mut ran = 0;
    for i in futures::future::join_all(instances).await {
        if i.expect("instance task")? {
            ran += 1;
        }
    }
    println!("the job ran {ran} time(s)");
    assert_eq!(ran, 1, "exactly one instance runs a singleton job");
    Ok(())
}
