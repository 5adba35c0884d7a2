//! `raftlock lock NAME -- CMD ARGS...`: hold a lock while a command runs.
//! The command gets the fencing token in `RAFTLOCK_TOKEN`. If the session is
//! lost, the command gets SIGTERM at once (the local validity deadline
//! already leaves a margin before the leader can expire the lease), then
//! SIGKILL after `--kill-after`.

use super::{connect, Cli};
use std::time::Duration;
use tokio::process::Command;

#[derive(clap::Args)]
pub struct Args {
    /// Lock name.
    name: String,
    /// Session TTL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// How long to wait for the lock (0 = try once).
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Hold the lock shared.
    #[arg(long, conflicts_with = "permits")]
    shared: bool,
    /// Hold one of N permits (a semaphore).
    #[arg(long)]
    permits: Option<u32>,
    /// Grace period between SIGTERM and SIGKILL when the lock is lost.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    kill_after: Duration,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let client = connect(cli).await?;
    let session = client.session(a.ttl).await?;
    let mut builder = session.lock(&a.name);
    if a.shared {
        builder = builder.shared();
    }
    if let Some(n) = a.permits {
        builder = builder.permits(n);
    }
    let guard = if a.timeout.is_zero() {
        match builder.try_acquire().await? {
            Some(g) => g,
            None => {
                eprintln!("raftlock: {} is held by someone else", a.name);
                session.close().await.ok();
                return Ok(2);
            }
        }
    } else {
        builder.timeout(a.timeout).acquire().await?
    };
    let mut child = Command::new(&a.command[0])
        .args(&a.command[1..])
        .env("RAFTLOCK_TOKEN", guard.token().to_string())
        .env("RAFTLOCK_LOCK", &a.name)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {:?}: {e}", a.command[0]))?;
    let code = tokio::select! {
        status = child.wait() => status?.code().unwrap_or(1),
        reason = guard.lost() => {
            eprintln!("raftlock: lock {} lost ({reason}); stopping the command", a.name);
            if let Some(pid) = child.id() {
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM); }
            }
            if tokio::time::timeout(a.kill_after, child.wait()).await.is_err() {
                child.kill().await.ok();
            }
            return Ok(4);
        }
    };
    guard.release().await.ok();
    session.close().await.ok();
    Ok(code)
}
