//! `raftlockd`: a raftlock server node, or (`raftlockd dev`) a local
//! cluster of them for development.

mod dev;

use anyhow::Context;
use clap::{Parser, Subcommand};
use raftlock_node::config::NodeArgs;

/// A Raft-replicated lock server node.
#[derive(Parser)]
#[command(
    name = "raftlockd",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  \
    raftlockd dev                               # a local 3-node cluster\n  \
    raftlockd --id 1 --data-dir /var/lib/raftlock \\\n    \
      --listen-client 0.0.0.0:7000 --listen-peer 0.0.0.0:7100 \\\n    \
      --advertise-client 10.0.0.1:7000 --advertise-peer 10.0.0.1:7100 \\\n    \
      --initial-cluster 1=10.0.0.1:7100/10.0.0.1:7000,2=10.0.0.2:7100/10.0.0.2:7000,3=10.0.0.3:7100/10.0.0.3:7000"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    node: NodeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Start a local cluster of real nodes on loopback, print its endpoints,
    /// and stop every node on Ctrl-C.
    Dev(dev::DevArgs),
}

fn init_logging(format: &str, level: Option<&str>) {
    let filter = match level {
        Some(l) => tracing_subscriber::EnvFilter::new(l),
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Dev(args)) => {
            init_logging("text", None);
            dev::run(args, shutdown_signal()).await
        }
        None => {
            let config = cli.node.resolve().context("invalid configuration")?;
            init_logging(&config.log_format, config.log_level.as_deref());
            let node = raftlock_node::server::start(config)
                .await
                .context("raftlockd cannot start")?;
            node.run_until(shutdown_signal()).await?;
            Ok(())
        }
    }
}
