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
