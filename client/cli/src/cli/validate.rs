//! `raftlock validate NAME TOKEN`: exit 0 if current, 3 if not.

use super::{connect, print_json, Cli, Output};

#[derive(clap::Args)]
pub struct Args {
    /// Lock name.
    name: String,
    /// Fencing token to check.
    token: u64,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let v = connect(cli).await?.validate(&a.name, a.token).await?;
    if cli.output == Output::Json {
        print_json(&v)?;
    } else if v.valid {
        println!("token {} is current for {}", a.token, a.name);
    } else {
        println!(
            "token {} is stale for {} (current: {})",
            a.token, a.name, v.current_token
        );
    }
    Ok(if v.valid { 0 } else { 3 })
}
