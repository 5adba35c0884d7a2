//! `raftlock watch [PREFIX]`: every grant, handoff, release, expiry and
//! force-release under a prefix, as it happens, until interrupted.

use super::{connect, Cli, Output};
use futures::StreamExt;
use raftlock_client::LockEventKind;

#[derive(clap::Args)]
pub struct Args {
    /// Only locks whose names start with this.
    #[arg(default_value = "")]
    prefix: String,
    /// Resume after this index (printed with every event) instead of
    /// starting from now.
    #[arg(long, default_value_t = 0)]
    after_index: u64,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let client = connect(cli).await?;
    let mut events = client.watch_after(&a.prefix, a.after_index);
    loop {
        let batch = tokio::select! {
            b = events.next() => b,
            _ = tokio::signal::ctrl_c() => return Ok(0),
        };
        let Some(batch) = batch else {
            return Ok(0);
        };
        let batch = batch?;
        if cli.output == Output::Json {
            // One object per line, so that a pipe can read as it goes.
            println!("{}", serde_json::to_string(&batch)?);
            continue;
        }
        for e in &batch.events {
            let what = match e.kind {
                LockEventKind::Granted => "granted",
                LockEventKind::Handoff => "handoff",
                LockEventKind::Released => "released",
                LockEventKind::Expired => "expired",
                LockEventKind::ForceReleased => "force-released",
                LockEventKind::HoldExpired => "hold-expired",
                LockEventKind::LockDelayStarted => {
                    println!(
                        "{} lock-delay {} for {}ms: nobody is granted it until it ends",
                        batch.index, e.name, e.lock_delay_ms
                    );
                    continue;
                }
                LockEventKind::LockDelayEnded => {
                    println!("{} lock-delay-ended {}", batch.index, e.name);
                    continue;
                }
            };
            let metadata = match std::str::from_utf8(&e.metadata) {
                Ok("") => String::new(),
                Ok(text) => format!(" metadata {text:?}"),
                Err(_) => format!(" metadata {} bytes", e.metadata.len()),
            };
            println!(
                "{} {what} {} session {} token {}{metadata}",
                batch.index, e.name, e.session_id, e.token
            );
        }
    }
}
