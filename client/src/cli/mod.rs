//! Command-line parsing and the shared bits of every subcommand.

mod describe;
mod list;
mod lock;
mod status;
mod validate;

use clap::{Parser, Subcommand, ValueEnum};
use raftlock_client::Client;

/// Client for a raftlock cluster.
#[derive(Parser)]
#[command(
    name = "raftlock",
    version,
    after_help = "Examples:\n  \
    export RAFTLOCK_ENDPOINTS=127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002\n  \
    raftlock status\n  \
    raftlock lock --ttl 10s --timeout 1m jobs/nightly -- ./nightly-report.sh\n  \
    raftlock describe jobs/nightly --output json\n  \
    raftlock validate jobs/nightly 4711"
)]
pub struct Cli {
    /// Client endpoints of some cluster nodes (host:port, comma-separated).
    #[arg(
        long,
        env = "RAFTLOCK_ENDPOINTS",
        value_delimiter = ',',
        default_value = "127.0.0.1:7000",
        global = true
    )]
    pub endpoints: Vec<String>,
    /// Output format of read commands.
    #[arg(long, value_enum, default_value_t = Output::Text, global = true)]
    pub output: Output,
    #[command(subcommand)]
    pub command: Command,
}

/// How read commands print.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Text,
    /// One JSON document.
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Show the cluster: leader, term, indexes, members, counts.
    Status(status::Args),
    /// Show the holders and waiters of a lock.
    Describe(describe::Args),
    /// List locks by name prefix.
    List(list::Args),
    /// Check whether a fencing token is still current.
    Validate(validate::Args),
    /// Run a command while holding a lock; the command is stopped before the
    /// lease can run out if the lock is lost.
    Lock(lock::Args),
}

pub async fn connect(cli: &Cli) -> anyhow::Result<Client> {
    Client::connect(&cli.endpoints).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach the cluster at {}: {e}",
            cli.endpoints.join(",")
        )
    })
}

pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Runs the chosen subcommand; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Status(a) => status::run(&cli, a).await,
        Command::Describe(a) => describe::run(&cli, a).await,
        Command::List(a) => list::run(&cli, a).await,
        Command::Validate(a) => validate::run(&cli, a).await,
        Command::Lock(a) => lock::run(&cli, a).await,
    }
}
