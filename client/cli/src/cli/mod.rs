//! Command-line parsing and the shared bits of every subcommand.

mod bench;
mod describe;
mod elect;
mod list;
mod lock;
mod members;
mod rate;
mod snapshot;
mod status;
mod validate;
mod watch;

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
    raftlock lock accounts/17 accounts/42 -- ./transfer.sh 17 42\n  \
    raftlock elect scheduler \"$(hostname)\" -- ./run-scheduler\n  \
    raftlock leader scheduler --output json\n  \
    raftlock describe jobs/nightly --output json\n  \
    raftlock validate jobs/nightly 4711\n  \
    raftlock rate partner-api --rate 10/s --burst 5 --wait 2s -- ./call-partner.sh\n  \
    raftlock completions bash > /etc/bash_completion.d/raftlock\n\n\
Exit status:\n  \
    0      success (lock/elect: the command's own status is passed on)\n  \
    1      error talking to the cluster (unreachable, refused)\n  \
    2      bad command line\n  \
    3      validate: token not current; leader: no leader\n  \
    5      status: some node unreachable, lagging or without a leader\n  \
    75     lock: not acquired (held elsewhere with --timeout 0s, or the wait timed out);\n  \
           rate: not admitted\n  \
    76     lock/elect: lock or leadership lost while the command ran; it was stopped"
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
    /// PEM CA of the nodes' certificates: talk TLS to the client port.
    #[arg(long, env = "RAFTLOCK_CACERT", global = true)]
    pub cacert: Option<std::path::PathBuf>,
    /// PEM client certificate, for clusters that authenticate by certificate.
    #[arg(long, env = "RAFTLOCK_CERT", global = true, requires_all = ["cacert", "key"])]
    pub cert: Option<std::path::PathBuf>,
    /// PEM key of --cert.
    #[arg(long, env = "RAFTLOCK_KEY", global = true, requires = "cert")]
    pub key: Option<std::path::PathBuf>,
    /// Bearer token, for clusters with authentication on (prefer the
    /// RAFTLOCK_AUTH_TOKEN variable: flags show up in `ps`). Not to be
    /// confused with RAFTLOCK_TOKEN, the fencing token `lock` hands its
    /// command.
    #[arg(
        long = "auth-token",
        env = "RAFTLOCK_AUTH_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub auth_token: Option<String>,
    /// The name sessions of `lock` and `elect` show in `describe` and
    /// `sessions` (default: "raftlock lock COMMAND"). The host and pid are
    /// added by themselves.
    #[arg(long, env = "RAFTLOCK_CLIENT_NAME", global = true)]
    pub client_name: Option<String>,
    /// How long opening a connection to one node may take.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, global = true)]
    pub dial_timeout: std::time::Duration,
    /// How long each call to the cluster may take, retries and leader
    /// changes included (a lock's --timeout wait comes on top), so that a
    /// dead cluster is reported in seconds. Default 5s; `bench` keeps the
    /// client library's 15s unless this is given.
    #[arg(long, value_parser = humantime::parse_duration, global = true)]
    pub command_timeout: Option<std::time::Duration>,
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
    #[command(visible_alias = "locks")]
    List(list::Args),
    /// Live sessions: who they are, where they run, what they hold and wait
    /// for, and how long they have left.
    Sessions(describe::SessionsArgs),
    /// Print every grant, handoff, release, expiry and force-release under
    /// a prefix as it happens (until Ctrl-C); resumes across leader changes.
    Watch(watch::Args),
    /// Check whether a fencing token is still current.
    Validate(validate::Args),
    /// Run a command while holding a lock; the command is stopped before the
    /// lease can run out if the lock is lost.
    Lock(lock::Args),
    /// Campaign in an election, then lead while a command runs (or until
    /// Ctrl-C); the command is stopped if leadership is lost.
    Elect(elect::ElectArgs),
    /// Show an election's current leader.
    Leader(elect::LeaderArgs),
    /// Take tokens of a rate limit (creating it with --rate and --burst),
    /// optionally waiting; run a command only when admitted.
    Rate(rate::Args),
    /// Print an election's leader, then every change, until Ctrl-C.
    Observe(elect::LeaderArgs),
    /// List or change the cluster's members.
    #[command(subcommand)]
    Members(members::Args),
    /// Free a lock whoever holds it (admin); its waiters are granted with
    /// larger tokens.
    ForceRelease(describe::ForceArgs),
    /// Set a semaphore's number of permits, held or not (0 forgets it).
    Resize(describe::ResizeArgs),
    /// Hand leadership of the Raft cluster to another voter.
    TransferLeader(members::TransferArgs),
    /// Back up the cluster's state (`snapshot save FILE`).
    #[command(subcommand, visible_alias = "backup")]
    Snapshot(snapshot::Args),
    /// Load the cluster and print throughput and latency percentiles
    /// (median of several runs).
    Bench(bench::Args),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `lock`: the lock was not acquired.
pub const EXIT_NOT_ACQUIRED: i32 = 75;
/// `lock`/`elect`: the lock or leadership was lost while the command ran.
pub const EXIT_LOST: i32 = 76;

/// The client options the global flags ask for.
pub fn options(cli: &Cli) -> anyhow::Result<raftlock_client::Options> {
    let tls = match &cli.cacert {
        Some(ca) => Some(raftlock_client::Tls::from_files(
            ca,
            cli.cert.as_ref().zip(cli.key.as_ref()),
        )?),
        None => None,
    };
    let deadline = cli.command_timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT);
    let defaults = raftlock_client::Options::default();
    Ok(raftlock_client::Options {
        tls,
        token: cli.auth_token.clone(),
        connect_timeout: cli.dial_timeout,
        deadline,
        attempt_timeout: defaults.attempt_timeout.min(deadline),
        ..defaults
    })
}

/// The client name for a session of `what` (`lock`, `elect`) running
/// `command`, unless --client-name says another; cut to what servers take.
pub fn client_name(cli: &Cli, what: &str, command: &[String]) -> String {
    let mut name = cli.client_name.clone().unwrap_or_else(|| {
        let program = command.first().map(String::as_str).unwrap_or_default();
        format!("raftlock {what} {program}").trim_end().to_string()
    });
    let max = raftlock_proto::limits::MAX_CLIENT_NAME_LEN;
    if name.len() > max {
        let mut cut = max;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

/// A one-shot command against a dead cluster gives up after this (etcdctl's
/// default too); a leader change takes well under it.
pub const DEFAULT_COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// [`options`] for a benchmark: the client library's own deadline unless
/// `--command-timeout` says otherwise, since a benchmark that kills leaders
/// measures how long calls wait through a failover rather than cutting them.
pub fn bench_options(cli: &Cli) -> anyhow::Result<raftlock_client::Options> {
    let deadline = cli
        .command_timeout
        .unwrap_or(raftlock_client::Options::default().deadline);
    Ok(raftlock_client::Options {
        deadline,
        attempt_timeout: raftlock_client::Options::default()
            .attempt_timeout
            .min(deadline),
        ..options(cli)?
    })
}

pub async fn connect(cli: &Cli) -> anyhow::Result<Client> {
    Client::connect_with(&cli.endpoints, options(cli)?)
        .await
        .map_err(|e| {
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
        Command::Sessions(a) => describe::sessions(&cli, a).await,
        Command::Watch(a) => watch::run(&cli, a).await,
        Command::Validate(a) => validate::run(&cli, a).await,
        Command::Lock(a) => lock::run(&cli, a).await,
        Command::Elect(a) => elect::elect(&cli, a).await,
        Command::Leader(a) => elect::leader(&cli, a).await,
        Command::Rate(a) => rate::run(&cli, a).await,
        Command::Observe(a) => elect::observe(&cli, a).await,
        Command::Members(a) => members::run(&cli, a).await,
        Command::TransferLeader(a) => members::transfer(&cli, a).await,
        Command::ForceRelease(a) => describe::force_release(&cli, a).await,
        Command::Resize(a) => describe::resize(&cli, a).await,
        Command::Snapshot(a) => snapshot::run(&cli, a).await,
        Command::Bench(a) => bench::run(&cli, a).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "raftlock",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a command's definition only when it parses a line that
    /// reaches the broken part; a global flag whose field shares a name with a
    /// subcommand's argument once made `raftlock validate` panic. This walks
    /// every subcommand's definition.
    #[test]
    fn every_subcommand_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn validate_parses_its_numeric_token_beside_the_global_auth_token() {
        use clap::Parser;
        let cli = super::Cli::try_parse_from([
            "raftlock",
            "--auth-token",
            "secret",
            "validate",
            "a/b",
            "42",
        ])
        .expect("parses");
        assert_eq!(cli.auth_token.as_deref(), Some("secret"));
        assert!(matches!(cli.command, super::Command::Validate(_)));
    }
}
