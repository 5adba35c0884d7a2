//! `raftlock describe NAME`

use super::{connect, print_json, Cli, Output};

#[derive(clap::Args)]
pub struct Args {
    /// Lock name.
    name: String,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let info = connect(cli).await?.describe(&a.name).await?;
    if cli.output == Output::Json {
        print_json(&info)?;
        return Ok(0);
    }
    if info.holders.is_empty() {
        println!("{}: free", info.name);
        return Ok(0);
    }
    println!("{}:", info.name);
    for h in &info.holders {
        println!(
            "  holder  session {} token {} {:?} metadata {:?}",
            h.session_id,
            h.token,
            h.mode,
            String::from_utf8_lossy(&h.metadata)
        );
    }
    for (i, w) in info.waiters.iter().enumerate() {
        println!(
            "  waiter {i} session {} {:?} timeout {} ms",
            w.session_id, w.mode, w.timeout_ms
        );
    }
    Ok(0)
}

/// `raftlock force-release NAME`
#[derive(clap::Args)]
pub struct ForceArgs {
    /// Lock name.
    name: String,
}

pub async fn force_release(cli: &Cli, a: &ForceArgs) -> anyhow::Result<i32> {
    let (taken, granted) = connect(cli).await?.force_release(&a.name).await?;
    if cli.output == Output::Json {
        print_json(&serde_json::json!({ "released": taken, "granted": granted }))?;
        return Ok(0);
    }
    if taken.is_empty() {
        println!("{}: nobody held it", a.name);
    }
    for g in &taken {
        println!(
            "{}: taken from session {} (token {})",
            a.name, g.session_id, g.token
        );
    }
    for g in &granted {
        println!(
            "{}: granted to waiting session {} (token {})",
            a.name, g.session_id, g.token
        );
    }
    Ok(0)
}
