//! `raftlock list [PREFIX]`

use super::{connect, print_json, Cli, Output};

#[derive(clap::Args)]
pub struct Args {
    /// Only locks whose names start with this.
    #[arg(default_value = "")]
    prefix: String,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let locks = connect(cli).await?.list(&a.prefix).await?;
    if cli.output == Output::Json {
        print_json(&locks)?;
        return Ok(0);
    }
    for l in &locks {
        let tokens: Vec<String> = l.holders.iter().map(|h| h.token.to_string()).collect();
        println!(
            "{}  holders {} (tokens {})  waiters {}",
            l.name,
            l.holders.len(),
            tokens.join(","),
            l.waiter_count
        );
    }
    Ok(0)
}
