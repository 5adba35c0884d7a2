//! `raftlock lock NAME... -- CMD ARGS...`: hold a lock (or several, taken
//! together in one log entry) while a command runs.
//! The command gets the fencing token in `RAFTLOCK_TOKEN`; it runs in a
//! process group of its own. If keep-alives stop being acknowledged, the
//! group gets SIGTERM `--kill-after` before the client's local deadline and
//! SIGKILL at that deadline at the latest, which is still a margin before
//! the leader can expire the lease.

use super::{connect, Cli, EXIT_LOST, EXIT_NOT_ACQUIRED};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use raftlock_client::{Error, Session};
use std::future::Future;
use std::time::Duration;
use tokio::process::Command;
use tokio::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Lock name; several names take every one of those locks together
    /// (exclusively, in one log entry, or none), so commands that need
    /// overlapping sets never deadlock.
    #[arg(required = true, num_args = 1..)]
    names: Vec<String>,
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
    /// Take this many permits of the semaphore at once.
    #[arg(long, conflicts_with = "shared")]
    count: Option<u32>,
    /// Hold cap: the cluster releases the lock this long after granting it
    /// even if this process lives; the command is stopped (SIGTERM, then
    /// SIGKILL) before then.
    #[arg(long, value_parser = humantime::parse_duration)]
    max_hold: Option<Duration>,
    /// Lock-delay: if the lock is lost without a release (this process
    /// dies, is cut off, or runs past --max-hold), nobody gets it for this
    /// long (at most 60s), so that a command that missed the loss has time
    /// to stop.
    #[arg(long, value_parser = humantime::parse_duration)]
    lock_delay: Option<Duration>,
    /// Grace period between SIGTERM and SIGKILL when keep-alives stop being
    /// acknowledged: SIGTERM goes out this long before the lease could run
    /// out. Default: 2s, or a quarter of the TTL less the safety margin if
    /// that is shorter; at most half of it.
    #[arg(long, value_parser = humantime::parse_duration)]
    kill_after: Option<Duration>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let kill_after = a.kill_after.unwrap_or_else(|| default_kill_after(a.ttl));
    check_kill_after(a.ttl, kill_after)?;
    if a.names.len() > 1 {
        return run_set(cli, a, kill_after).await;
    }
    let name = &a.names[0];
    let client = connect(cli).await?;
    let session = client
        .session_named(a.ttl, &super::client_name(cli, "lock", &a.command))
        .await?;
    let mut builder = session.lock(name);
    if a.shared {
        builder = builder.shared();
    }
    if let Some(n) = a.permits {
        builder = builder.permits(n);
    }
    if let Some(n) = a.count {
        builder = builder.count(n);
    }
    if let Some(cap) = a.max_hold {
        builder = builder.max_hold(cap);
    }
    if let Some(delay) = a.lock_delay {
        builder = builder.lock_delay(delay);
    }
    let acquired = if a.timeout.is_zero() {
        builder.try_acquire().await
    } else {
        builder.timeout(a.timeout).acquire().await.map(Some)
    };
    let guard = match acquired {
        Ok(Some(g)) => g,
        Ok(None) => {
            eprintln!("raftlock: {name} is held by someone else");
            session.close().await.ok();
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(Error::WaitTimedOut(_)) => {
            eprintln!("raftlock: {name} not acquired within {:?}", a.timeout);
            session.close().await.ok();
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(e) => return Err(e.into()),
    };
    let env = [
        ("RAFTLOCK_LOCK", name.clone()),
        ("RAFTLOCK_TOKEN", guard.token().to_string()),
        ("RAFTLOCK_SESSION", session.id().to_string()),
    ];
    let hold_until = guard.hold_until();
    match supervise(
        &a.command,
        &env,
        kill_after,
        guard.lost(),
        &session,
        hold_until,
    )
    .await?
    {
        Outcome::Exited(code) => {
            guard.release().await.ok();
            session.close().await.ok();
            Ok(code)
        }
        Outcome::Lost(reason) => {
            eprintln!("raftlock: lock {name} lost ({reason}); command stopped");
            Ok(EXIT_LOST)
        }
    }
}

/// Several locks, taken together; the command sees their names one per
/// line in `RAFTLOCK_LOCK` (a name never holds a newline) and their one
/// token in `RAFTLOCK_TOKEN`.
async fn run_set(cli: &Cli, a: &Args, kill_after: Duration) -> anyhow::Result<i32> {
    anyhow::ensure!(
        !a.shared && a.permits.is_none() && a.count.is_none(),
        "several locks are taken exclusively: --shared, --permits and --count take one lock"
    );
    anyhow::ensure!(
        a.max_hold.is_none() && a.lock_delay.is_none(),
        "--max-hold and --lock-delay take one lock"
    );
    let client = connect(cli).await?;
    let session = client
        .session_named(a.ttl, &super::client_name(cli, "lock", &a.command))
        .await?;
    let builder = session.lock_all(a.names.iter().cloned());
    let acquired = if a.timeout.is_zero() {
        builder.try_acquire().await
    } else {
        builder.timeout(a.timeout).acquire().await.map(Some)
    };
    let names = a.names.join(", ");
    let set = match acquired {
        Ok(Some(set)) => set,
        Ok(None) => {
            eprintln!("raftlock: one of {names} is held by someone else");
            session.close().await.ok();
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(Error::WaitTimedOut(_)) => {
            eprintln!("raftlock: {names} not acquired within {:?}", a.timeout);
            session.close().await.ok();
            return Ok(EXIT_NOT_ACQUIRED);
        }
        Err(e) => return Err(e.into()),
    };
    let token = set.tokens().first().map_or(0, |(_, t)| *t);
    let held: Vec<&str> = set.tokens().iter().map(|(n, _)| *n).collect();
    let env = [
        ("RAFTLOCK_LOCK", held.join("\n")),
        ("RAFTLOCK_TOKEN", token.to_string()),
        ("RAFTLOCK_SESSION", session.id().to_string()),
    ];
    match supervise(&a.command, &env, kill_after, set.lost(), &session, None).await? {
        Outcome::Exited(code) => {
            set.release().await.ok();
            session.close().await.ok();
            Ok(code)
        }
        Outcome::Lost(reason) => {
            eprintln!("raftlock: locks {names} lost ({reason}); command stopped");
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

/// The SIGTERM-to-SIGKILL grace used when none is given: short enough that
/// a command that ignores SIGTERM is killed well before the lease can end,
/// long enough for a clean shutdown.
pub fn default_kill_after(ttl: Duration) -> Duration {
    Duration::from_secs(2).min(usable(ttl) / 4)
}

/// What of a TTL the client can count on after an acknowledged keep-alive.
fn usable(ttl: Duration) -> Duration {
    ttl.saturating_sub(raftlock_client::safety_margin(ttl))
}

/// Checks that a `--kill-after` leaves room: SIGTERM goes out `kill_after`
/// before the local deadline, so the grace cannot exceed what keep-alives
/// leave of the TTL without the command being stopped while healthy.
pub fn check_kill_after(ttl: Duration, kill_after: Duration) -> anyhow::Result<()> {
    let most = usable(ttl) / 2;
    anyhow::ensure!(
        kill_after <= most,
        "--kill-after {kill_after:?} is too long for --ttl {ttl:?}: at most {most:?}, \
         so that SIGKILL lands before the lease can run out"
    );
    Ok(())
}

/// Runs `command` with `env` in a process group of its own until it exits
/// or the lease is in danger, signalling the whole group, so that a `sh -c`
/// child's children stop too.
///
/// The session's `valid_until` is the client library's local deadline (DESIGN.md rule 4),
/// read afresh each time since keep-alives move it. If keep-alives stop
/// being acknowledged, the group gets SIGTERM `kill_after` before that
/// deadline and SIGKILL at it at the latest, so nothing of the command runs
/// once the server could grant the lock to someone else. If `lost`
/// resolves first (the server ended the session or released the lock),
/// the group gets SIGKILL at once: the lock may already be someone else's.
/// SIGINT/SIGTERM to this process are passed on to the group, which decides
/// when to exit. When the command exits by itself, whatever it left running
/// in its group is killed before the lock is released.
pub async fn supervise(
    command: &[String],
    env: &[(&str, String)],
    kill_after: Duration,
    lost: impl Future<Output = Error>,
    session: &Session,
    hold_until: Option<std::time::Instant>,
) -> anyhow::Result<Outcome> {
    // A hold cap ends the claim like a lost session, at a time known now.
    let valid_until = || {
        session
            .valid_until()
            .map(|u| hold_until.map_or(u, |h| u.min(h)))
    };
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .process_group(0)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {:?}: {e}", command[0]))?;
    let group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .map(Pid::from_raw)
        .ok_or_else(|| anyhow::anyhow!("{:?} exited before it could be watched", command[0]))?;
    // The group outlives the child's reaping only while members remain, and
    // a group id is not reused while the group exists, so this never
    // signals a stranger; ESRCH (nobody left) is fine.
    let signal = |sig: Signal| {
        let _ = killpg(group, sig);
    };
    let exit_code = |status: std::process::ExitStatus| {
        // A command killed by a signal reports 128 + the signal, as shells do.
        use std::os::unix::process::ExitStatusExt;
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    };
    tokio::pin!(lost);
    let mut forwarded = false;
    loop {
        // Re-read every round: an acknowledged keep-alive moves it on.
        let until = match valid_until() {
            Ok(u) => Instant::from_std(u),
            Err(reason) => {
                signal(Signal::SIGKILL);
                child.wait().await?;
                return Ok(Outcome::Lost(reason));
            }
        };
        let warn_at = until.checked_sub(kill_after).unwrap_or(until);
        tokio::select! {
            status = child.wait() => {
                let status = status?;
                signal(Signal::SIGKILL);
                return Ok(Outcome::Exited(exit_code(status)));
            }
            reason = &mut lost => {
                signal(Signal::SIGKILL);
                child.wait().await?;
                return Ok(Outcome::Lost(reason));
            }
            _ = tokio::time::sleep_until(warn_at) => {
                // Only if the deadline did not move meanwhile.
                let moved = valid_until().map(Instant::from_std).ok().is_some_and(|u| u > until);
                if moved {
                    continue;
                }
                signal(Signal::SIGTERM);
                let kill_at = (Instant::now() + kill_after).min(until);
                tokio::select! {
                    _ = tokio::time::sleep_until(kill_at) => signal(Signal::SIGKILL),
                    status = child.wait() => {
                        status?;
                        signal(Signal::SIGKILL);
                    }
                }
                child.wait().await?;
                // Stopped a little before the library would say so itself.
                let reason = valid_until()
                    .err()
                    .unwrap_or(Error::SessionLost(session.id()));
                return Ok(Outcome::Lost(reason));
            }
            _ = terminated(), if !forwarded => {
                forwarded = true;
                signal(Signal::SIGTERM);
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
