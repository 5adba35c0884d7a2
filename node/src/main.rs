//! `raftlockd`: a raftlock server node, or (`raftlockd dev`) a local
//! cluster of them for development.

mod allocator;
mod dev;
mod disk;

use anyhow::Context;
use clap::{Parser, Subcommand};
use raftlock_node::config::NodeArgs;

/// A Raft-replicated lock server node.
#[derive(Parser)]
#[command(
    name = "raftlockd",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Every setting is a flag, an environment variable and a key of the --config \
    file: --data-dir, RAFTLOCK_DATA_DIR, data_dir (limits and TLS settings in the file's [limits] \
    and [tls] tables). Flags win over the environment, which wins over the file, which wins over \
    the defaults; --print-config shows the result and where each value came from.\n\n\
    Examples:\n  \
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
    /// Seed an empty data dir from a backup (`raftlock snapshot save FILE`)
    /// for a new cluster; run it for every node of the new cluster with the
    /// same file and --initial-cluster, then start the nodes normally.
    Restore(RestoreArgs),
    /// Quorum loss: turn this stopped node's data dir into a one-node
    /// cluster with the same sessions and locks, from which the others are
    /// added back (docs/operations.md, "Losing a majority"). The old data
    /// dir is kept beside it.
    Recover(RecoverArgs),
    /// Verify a stopped node's data dir offline, reading and changing
    /// nothing else: every WAL segment header, batch and record checksum,
    /// the vote, committed index and purge point, and the snapshot's
    /// checksum. Prints a report; exits 1 if anything is damaged. Run it
    /// before a restore and after a disk incident (docs/operations.md,
    /// "When a disk fails").
    Check(disk::CheckArgs),
    /// Rebuild this stopped node, whose data dir is damaged, from the
    /// healthy majority: remove it from the voters, set its data dir
    /// aside, and leave an empty one that rejoins as a learner when the
    /// node starts (docs/operations.md, "When a disk fails").
    Repair(disk::RepairArgs),
    /// Probe this node's admin listener (for container HEALTHCHECKs, which
    /// may have no shell or curl): exit 0 if /ready (or --path) answers
    /// 200.
    Healthcheck(HealthcheckArgs),
}

#[derive(clap::Args)]
struct HealthcheckArgs {
    /// The admin listener to ask (0.0.0.0 means this host).
    #[arg(
        long,
        env = "RAFTLOCK_LISTEN_METRICS",
        default_value = "127.0.0.1:7200"
    )]
    listen_metrics: String,
    /// The path: /ready (serving as a member) or /health (process up).
    #[arg(long, default_value = "/ready")]
    path: String,
}

async fn healthcheck(a: HealthcheckArgs) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = a.listen_metrics.replace("0.0.0.0", "127.0.0.1");
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(&addr).await?;
        s.write_all(format!("GET {} HTTP/1.0\r\nHost: {addr}\r\n\r\n", a.path).as_bytes())
            .await?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(std::time::Duration::from_secs(3), probe)
        .await
        .map_err(|_| anyhow::anyhow!("{addr} did not answer within 3 s"))?
        .with_context(|| format!("cannot reach {addr}"))?;
    let status = raw.split_whitespace().nth(1).unwrap_or("?");
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim())
        .unwrap_or("");
    if status != "200" {
        anyhow::bail!("{}{}: {status} {body}", addr, a.path);
    }
    println!("{body}");
    Ok(())
}

#[derive(clap::Args)]
struct RecoverArgs {
    /// Required: this forgets the other members and may lose what only
    /// they had stored.
    #[arg(long, required = true)]
    force_new_cluster: bool,
    /// This node's id.
    #[arg(long)]
    id: u64,
    /// This node's data dir (the node must be stopped).
    #[arg(long)]
    data_dir: std::path::PathBuf,
    /// The new one-node cluster: `ID=peer_addr/client_addr` of this node.
    #[arg(long)]
    initial_cluster: String,
    /// Log entries left unused between this node's last entry and the new
    /// cluster's first, so that a token the lost members issued from
    /// entries this node never saw cannot be issued again: at least how
    /// far this node may have trailed them.
    #[arg(long, default_value_t = 1_000_000)]
    token_gap: u64,
}

async fn recover(a: RecoverArgs) -> anyhow::Result<()> {
    use raftlock_node::config::{cluster_id, parse_initial_cluster};
    use raftlock_store::{backup, data_dir::DataDir, data_dir::Standing};
    anyhow::ensure!(a.force_new_cluster, "recover needs --force-new-cluster");
    let members = parse_initial_cluster(&a.initial_cluster).context("--initial-cluster")?;
    anyhow::ensure!(
        members.len() == 1 && members.contains_key(&a.id),
        "--initial-cluster must name this node ({}) alone: the others are added back afterwards",
        a.id
    );
    let (machine, last_index) = {
        let old = DataDir::open(&a.data_dir, a.id, None)?;
        anyhow::ensure!(
            !old.is_fresh(),
            "{} holds no data to recover",
            a.data_dir.display()
        );
        backup::export_everything(&old).await?
    };
    let floor = token_floor(last_index, a.token_gap)?;
    let now = raftlock_node::raft::batch::now_ms();
    let kept = a
        .data_dir
        .with_extension(format!("before-recovery-{}", now / 1000));
    std::fs::rename(&a.data_dir, &kept)
        .with_context(|| format!("cannot move {} aside", a.data_dir.display()))?;
    let mut data = DataDir::open(&a.data_dir, a.id, Some(&cluster_id(&members)))?;
    let bytes = backup::encode(&machine, floor, now, "recovered");
    backup::seed(&data, &bytes, raftlock_node::config::member_nodes(&members)).await?;
    // Seeded with everything the new cluster starts from: a full member.
    data.set_standing(Standing::Member, None)?;
    println!(
        "node {} is now a one-node cluster with the state of index {last_index} ({} sessions, {} locks); \
         new entries and tokens start above index {floor}. The old data dir is kept at {}. \
         Start the node with --initial-cluster {}, then add the others back as learners and promote them.",
        a.id,
        machine.counts().0,
        machine.counts().1,
        kept.display(),
        a.initial_cluster
    );
    Ok(())
}

/// The log index a new cluster starts issuing above: `gap` entries past
/// `last_index`, the last one the copy it starts from holds, so that no
/// token the old cluster issued after that copy can be issued again.
fn token_floor(last_index: u64, gap: u64) -> anyhow::Result<u64> {
    // Tokens are index × 2^16 + position in a u64: an index past 2^48
    // would wrap them back below tokens already issued. Half that space is
    // left for the new cluster to run in.
    const MAX_FLOOR: u64 = 1 << 47;
    last_index
        .checked_add(gap)
        .filter(|f| *f <= MAX_FLOOR)
        .with_context(|| {
            format!(
                "--token-gap {gap} would start the new cluster at log index {}, past {MAX_FLOOR}: its fencing tokens (index × 65536) would wrap below tokens already issued; use at most {}",
                u128::from(last_index) + u128::from(gap),
                MAX_FLOOR.saturating_sub(last_index)
            )
        })
}

#[derive(clap::Args)]
struct RestoreArgs {
    /// The backup file.
    #[arg(long)]
    snapshot: std::path::PathBuf,
    /// This node's id in the new cluster.
    #[arg(long)]
    id: u64,
    /// The new node's data dir (must be empty or absent).
    #[arg(long)]
    data_dir: std::path::PathBuf,
    /// The new cluster's members, as for a first start.
    #[arg(long)]
    initial_cluster: String,
    /// Log entries left unused between the backup's last entry and the new
    /// cluster's first: the old cluster may have gone on issuing tokens
    /// after the backup was taken, and none of them may be issued again.
    /// At least how many entries the old cluster wrote after the backup;
    /// every member of the new cluster must be restored with the same gap.
    #[arg(long, default_value_t = 1_000_000)]
    token_gap: u64,
}

async fn restore(a: RestoreArgs) -> anyhow::Result<()> {
    use raftlock_node::config::{cluster_id, parse_initial_cluster};
    use raftlock_store::{backup, data_dir::DataDir, data_dir::Standing};
    let members = parse_initial_cluster(&a.initial_cluster).context("--initial-cluster")?;
    if !members.contains_key(&a.id) {
        anyhow::bail!("--initial-cluster does not name node {}", a.id);
    }
    let bytes = std::fs::read(&a.snapshot)
        .with_context(|| format!("cannot read {}", a.snapshot.display()))?;
    let (header, machine) = backup::decode(&bytes)?;
    let floor = token_floor(header.last_index, a.token_gap)?;
    let mut data = DataDir::open(&a.data_dir, a.id, Some(&cluster_id(&members)))?;
    if !data.is_fresh() {
        anyhow::bail!(
            "{} already holds data; restore needs an empty data dir",
            a.data_dir.display()
        );
    }
    let nodes = raftlock_node::config::member_nodes(&members);
    // Every member restored from the same file with the same gap starts
    // at the same index, so their logs agree.
    let seeded = backup::encode(&machine, floor, header.created_at_ms, &header.cluster_id);
    let index = backup::seed(&data, &seeded, nodes).await?;
    // Seeded with everything the new cluster starts from: a full member.
    data.set_standing(Standing::Member, None)?;
    println!(
        "restored node {} from {} (taken at index {} from cluster {:?}); start it with the same --data-dir; new entries and tokens start above index {index}",
        a.id,
        a.snapshot.display(),
        header.last_index,
        header.cluster_id
    );
    Ok(())
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
        Some(Command::Healthcheck(args)) => healthcheck(args).await,
        Some(Command::Check(args)) => {
            init_logging("text", Some("warn"));
            if !disk::check(args)? {
                std::process::exit(1);
            }
            Ok(())
        }
        Some(Command::Repair(args)) => {
            init_logging("text", Some("warn"));
            disk::repair(args).await
        }
        Some(Command::Restore(args)) => {
            init_logging("text", Some("warn"));
            restore(args).await
        }
        Some(Command::Recover(args)) => {
            init_logging("text", Some("warn"));
            recover(args).await
        }
        None if cli.node.print_config => {
            print!(
                "{}",
                cli.node.print_config().context("invalid configuration")?
            );
            // Printed first, so the operator sees what was merged; checked
            // after, so a bad value still fails the command.
            cli.node.resolve().context("invalid configuration")?;
            Ok(())
        }
        None => {
            let config = cli.node.resolve().context("invalid configuration")?;
            init_logging(&config.log_format, config.log_level.as_deref());
            let node = raftlock_node::server::start(config)
                .await
                .context("raftlockd cannot start")?;
            if let Err(e) = node.run_until(shutdown_signal()).await {
                // Exit here, not by returning: dropping the runtime waits
                // for its threads, and one may be stuck in a write to a
                // disk that hangs.
                eprintln!("Error: {e}");
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
