//! Fencing: why the token matters. A storage service keeps, per key, the
//! highest lock token it has seen and refuses writes that carry a lower one.
//! A writer that lost its lock without noticing (a GC pause, a partition)
//! then cannot overwrite the newer holder's data.
//!
//! ```sh
//! cargo run --release --bin raftlockd -- dev      # prints RAFTLOCK_ENDPOINTS=...
//! RAFTLOCK_ENDPOINTS=... cargo run --example fenced_writer
//! ```
//!
//! To keep the example short the "pause" is staged: writer A keeps its
//! token after giving up the lock, as a paused process would keep it after
//! its lease ran out, and writes late.

use raftlock_client::Client;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The protected resource. In a real system this check lives in the
/// database (a conditional write on a `fence` column) or the storage
/// service, not in the client.
#[derive(Default)]
struct FencedStore {
    data: Mutex<HashMap<String, (u64, String)>>,
}

impl FencedStore {
    fn write(&self, key: &str, token: u64, value: &str) -> Result<(), String> {
        let mut data = self.data.lock().unwrap();
        let highest = data.get(key).map(|(t, _)| *t).unwrap_or(0);
        if token < highest {
            return Err(format!("refused: token {token} is older than {highest}"));
        }
        data.insert(key.to_owned(), (token, value.to_owned()));
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), raftlock_client::Error> {
    let endpoints = std::env::var("RAFTLOCK_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:7000".into());
    let client = Client::connect(endpoints.split(',')).await?;
    let store = FencedStore::default();
    let lock = format!("accounts/42/{}", std::process::id());

    let a = client.session(Duration::from_secs(5)).await?;
    let b = client.session(Duration::from_secs(5)).await?;

    let guard_a = a.lock(&lock).acquire().await?;
    let stale_token = guard_a.token();
    store
        .write("balance", stale_token, "100 (by A)")
        .expect("A holds the lock");
    println!("A wrote with token {stale_token}");

    // A "pauses"; meanwhile its lock passes to B.
    guard_a.release().await?;
    let guard_b = b
        .lock(&lock)
        .timeout(Duration::from_secs(5))
        .acquire()
        .await?;
    store
        .write("balance", guard_b.token(), "80 (by B)")
        .expect("B holds the lock");
    println!("B wrote with token {}", guard_b.token());

    // A wakes up and writes with the token it still has.
    match store.write("balance", stale_token, "120 (by A, late)") {
        Ok(()) => panic!("a stale write was accepted"),
        Err(e) => println!("A's late write: {e}"),
    }
    // The cluster agrees: A's token no longer belongs to a holder.
    let v = client.validate(&lock, stale_token).await?;
    println!(
        "validate({stale_token}) = {} (current token {})",
        v.valid, v.current_token
    );
    assert!(!v.valid);

    guard_b.release().await?;
    a.close().await?;
    b.close().await?;
    let final_value = store.data.lock().unwrap()["balance"].1.clone();
    println!("balance = {final_value}");
    assert_eq!(final_value, "80 (by B)");
    Ok(())
}
