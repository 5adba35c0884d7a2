//! `raftlock lock NAME -- CMD ARGS...`: hold a lock while a command runs.
//! The command gets the fencing token in `RAFTLOCK_TOKEN`. If the session is
//! lost, the command gets SIGTERM at once (the local validity deadline
//! already leaves a margin before the leader can expire the lease), then
//! SIGKILL after `--kill-after`.

use super::{connect, Cli, EXIT_LOST, EXIT_NOT_ACQUIRED};
use raftlock_client::Error;
use std::future::Future;
use std::time::Duration;
use tokio::process::Command;

#[derive(clap::Args)]
pub struct Args {
    /// Lock name.
    name: String,
    /// Session TTL: how long the cluster keeps the lock after this process
    /// stops renewing it (crash, partition).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// How long to wait for the lock (0s = try once).
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
    let acquired = if a.timeout.is_zero() {
        builder.try_acquire().await
    } else {
        builder.timeout(a.timeout).acquire().await.map(Some)
    };
    let guard = match acquired {
        Ok(Some(g)) => g,
        Ok(None) => {
            eprintln!("raftlock: {} is held by someone else", a.name);
            session.close().await.ok();
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(Error::WaitTimedOut(_)) => {
            eprintln!("raftlock: {} not acquired within {:?}", a.name, a.timeout);
            session.close().await.ok();
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(e) => return Err(e.into()),
    };
    let env = [
        ("RAFTLOCK_LOCK", a.name.clone()),
        ("RAFTLOCK_TOKEN", guard.token().to_string()),
        ("RAFTLOCK_SESSION", session.id().to_string()),
    ];
    match supervise(&a.command, &env, a.kill_after, guard.lost()).await? {
        Outcome::Exited(code) => {
            guard.release().await.ok();
            session.close().await.ok();
            Ok(code)
        }
        Outcome::Lost(reason) => {
            eprintln!("raftlock: lock {} lost ({reason}); command stopped", a.name);
            Ok(EXIT_LOST)
        }
    }
}

/// How a supervised command ended.
pub enum Outcome {
    /// It exited by itself (or after a forwarded SIGTERM) with this code.
    Exited(i32),
    /// The lock was lost and the command was stopped.
    Lost(Error),
}

/// Runs `command` with `env` until it exits or `lost` resolves; then it gets
/// SIGTERM and, after `kill_after`, SIGKILL. SIGINT/SIGTERM to this process
/// are passed on to the command, which decides when to exit.
pub async fn supervise(
    command: &[String],
    env: &[(&str, String)],
    kill_after: Duration,
    lost: impl Future<Output = Error>,
) -> anyhow::Result<Outcome> {
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {:?}: {e}", command[0]))?;
    let term = |child: &tokio::process::Child| {
        if let Some(pid) = child.id() {
            // SAFETY: kill(2) with a pid we spawned and still own (not yet
            // reaped), so it cannot name another process.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
    };
    tokio::pin!(lost);
    let mut forwarded = false;
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status?;
                // A command killed by a signal reports 128 + the signal, as
                // shells do.
                let code = status.code().unwrap_or_else(|| {
                    use std::os::unix::process::ExitStatusExt;
                    128 + status.signal().unwrap_or(0)
                });
                return Ok(Outcome::Exited(code));
            }
            reason = &mut lost => {
                term(&child);
                if tokio::time::timeout(kill_after, child.wait()).await.is_err() {
                    child.kill().await.ok();
                }
                return Ok(Outcome::Lost(reason));
            }
            _ = terminated(), if !forwarded => {
                forwarded = true;
                term(&child);
            }
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! {
                _ = i.recv() => {}
                _ = t.recv() => {}
            }
        }
        // No signal handling available: never resolve, so the caller keeps
        // waiting for its command.
        _ => std::future::pending().await,
    }
}
