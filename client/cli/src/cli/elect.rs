//! `raftlock elect`, `raftlock leader`, `raftlock observe`.

use super::{connect, print_json, Cli, Output, EXIT_LOST};
use futures::StreamExt;
use raftlock_client::Grant;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ElectArgs {
    /// Election name.
    name: String,
    /// The value to publish while leading (e.g. this host's address).
    value: String,
    /// Session TTL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// Grace period between SIGTERM and SIGKILL when keep-alives stop being
    /// acknowledged (as for `raftlock lock`).
    #[arg(long, value_parser = humantime::parse_duration)]
    kill_after: Option<Duration>,
    /// A command to run while leading (without one, lead until Ctrl-C).
    #[arg(last = true)]
    command: Vec<String>,
}

/// Campaigns, then leads while CMD runs (or until Ctrl-C/SIGTERM).
pub async fn elect(cli: &Cli, a: &ElectArgs) -> anyhow::Result<i32> {
    let kill_after = a
        .kill_after
        .unwrap_or_else(|| super::lock::default_kill_after(a.ttl));
    super::lock::check_kill_after(a.ttl, kill_after)?;
    let client = connect(cli).await?;
    let session = client
        .session_named(a.ttl, &super::client_name(cli, "elect", &a.command))
        .await?;
    let leadership = session
        .election(&a.name)
        .campaign(a.value.as_bytes())
        .await?;
    eprintln!(
        "raftlock: leading {} with token {} (session {})",
        a.name,
        leadership.token(),
        session.id()
    );
    if a.command.is_empty() {
        let code = tokio::select! {
            reason = leadership.lost() => {
                eprintln!("raftlock: leadership of {} lost ({reason})", a.name);
                return Ok(EXIT_LOST);
            }
            _ = super::lock::terminated() => 0,
        };
        leadership.resign().await.ok();
        session.close().await.ok();
        return Ok(code);
    }
    let env = [
        ("RAFTLOCK_LOCK", a.name.clone()),
        ("RAFTLOCK_TOKEN", leadership.token().to_string()),
        ("RAFTLOCK_SESSION", session.id().to_string()),
    ];
    let outcome = super::lock::supervise(
        &a.command,
        &env,
        kill_after,
        leadership.lost(),
        &session,
        None,
    )
    .await?;
    match outcome {
        super::lock::Outcome::Exited(code) => {
            leadership.resign().await.ok();
            session.close().await.ok();
            Ok(code)
        }
        super::lock::Outcome::Lost(reason) => {
            eprintln!(
                "raftlock: leadership of {} lost ({reason}); command stopped",
                a.name
            );
            Ok(EXIT_LOST)
        }
    }
}

#[derive(clap::Args)]
pub struct LeaderArgs {
    /// Election name.
    name: String,
}

fn print_leader(name: &str, leader: &Option<Grant>) {
    match leader {
        Some(l) => println!(
            "{name}: session {} token {} value {:?}",
            l.session_id,
            l.token,
            String::from_utf8_lossy(&l.metadata)
        ),
        None => println!("{name}: no leader"),
    }
}

/// Prints the current leader; exits 3 when there is none.
pub async fn leader(cli: &Cli, a: &LeaderArgs) -> anyhow::Result<i32> {
    let leader = connect(cli).await?.election(&a.name).leader().await?;
    if cli.output == Output::Json {
        print_json(&leader)?;
    } else {
        print_leader(&a.name, &leader);
    }
    Ok(if leader.is_some() { 0 } else { 3 })
}

/// Prints the leader, then every change, until interrupted.
pub async fn observe(cli: &Cli, a: &LeaderArgs) -> anyhow::Result<i32> {
    let client = connect(cli).await?;
    let mut changes = Box::pin(client.election(&a.name).observe());
    loop {
        let change = tokio::select! {
            c = changes.next() => c,
            _ = super::lock::terminated() => return Ok(0),
        };
        let Some(change) = change else { return Ok(0) };
        let leader = change?;
        if cli.output == Output::Json {
            // One document per line, so a consumer can read them as they come.
            println!("{}", serde_json::to_string(&leader)?);
        } else {
            print_leader(&a.name, &leader);
        }
    }
}
