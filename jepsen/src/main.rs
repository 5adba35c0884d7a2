//! `raftlock-jepsen`: fault injection and history checking for raftlock.

use clap::{Parser, Subcommand};
use raftlock_jepsen::backend::Fault;
use raftlock_jepsen::run::{self, Outcome, RunConfig};
use raftlock_jepsen::{nemesis, workload};
use std::path::PathBuf;
use std::time::Duration;

/// Runs workloads against a real raftlockd cluster while injecting faults,
/// and checks the recorded history.
#[derive(Parser)]
#[command(
    name = "raftlock-jepsen",
    version,
    after_help = "Examples:\n  \
    raftlock-jepsen run --workload fenced --nemesis partition --time 2m\n  \
    raftlock-jepsen suite --short          # what CI runs (about 3 minutes)\n  \
    raftlock-jepsen suite --long           # every nemesis x workload, 2 minutes each\n  \
    raftlock-jepsen suite --long --workloads mutex,fenced --each 1m   # some workloads\n  \
    raftlock-jepsen matrix                 # storage fault matrix, sampled (CI); --full for every case\n  \
    raftlock-jepsen fake --fault split-brain --workload mutex   # a planted bug the checkers must catch\n  \
    raftlock-jepsen --docker run --nemesis partition --time 5m   # nodes in containers of raftlock:dev\n\n\
Each run writes a folder with history.jsonl, results.json, summary.txt,\n\
latency.svg and throughput.svg, and node logs under cluster/.\n\
Exit status: 0 every run valid (or unknown without --strict), 1 a run invalid, 2 bad usage."
)]
struct Cli {
    /// The raftlockd binary (default: next to this executable).
    #[arg(long, global = true)]
    raftlockd: Option<PathBuf>,
    /// Where run folders go.
    #[arg(long, default_value = "jepsen-runs", global = true)]
    out: PathBuf,
    /// Treat an `unknown` verdict as a failure.
    #[arg(long, global = true)]
    strict: bool,
    /// Run the nodes as containers of this image (built by
    /// deploy/build-image.sh) on a private network, instead of processes.
    #[arg(long, global = true, num_args = 0..=1, default_missing_value = "raftlock:dev")]
    docker: Option<String>,
    /// The loopback /24 that nodes and client processes bind (host mode):
    /// two harnesses running at once on one host need two, since
    /// partitions are iptables rules on these addresses.
    #[arg(long, default_value = "127.0.0", global = true)]
    loopback_net: String,
    /// Half the workers run as processes of this program instead of
    /// `raftlock-jepsen worker` (which only the client nemesis starts),
    /// with the same arguments, under any nemesis: another client library
    /// judged by the same checkers (the Go client's
    /// `clients/go/cmd/raftlock-jepsen-worker`, the Java client's
    /// `clients/java/scripts/jepsen-worker`).
    #[arg(long, global = true)]
    client_worker: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One workload under one nemesis.
    Run {
        /// Workload.
        #[arg(long, value_enum, default_value = "mutex")]
        workload: workload::Kind,
        /// Nemesis.
        #[arg(long, value_enum, default_value = "kill")]
        nemesis: nemesis::Kind,
        /// Nodes (3 or 5).
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Concurrent client processes.
        #[arg(long, default_value_t = 6)]
        concurrency: usize,
        /// How long the workload runs.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        time: Duration,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Clock rates the clock nemesis picks from (default: slow ones and
        /// fast ones inside the documented drift bound). A rate beyond the
        /// bound shows what the bound is for.
        #[arg(long, value_delimiter = ',')]
        clock_rates: Vec<f64>,
    },
    /// A fixed set of runs: `--short` for CI, `--long` for every nemesis ×
    /// workload.
    Suite {
        /// About 3 minutes: four runs covering every workload and the
        /// kill, pause, partition and membership nemeses.
        #[arg(long, conflicts_with = "long")]
        short: bool,
        /// Every nemesis × every workload.
        #[arg(long)]
        long: bool,
        /// Length of each long run.
        #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
        each: Duration,
        /// Nodes (3 or 5).
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Only these workloads of the long suite (default: all).
        #[arg(long, value_enum, value_delimiter = ',', requires = "long")]
        workloads: Vec<workload::Kind>,
    },
    /// Check a recorded history again (a run folder's history.jsonl).
    Check {
        /// The history file.
        history: PathBuf,
    },
    /// One client process of a run (started by the harness for the client
    /// nemesis): runs workers through the real client library and prints
    /// every op as a JSON line on the harness's clock, until SIGTERM.
    #[command(hide = true)]
    Worker {
        /// Client endpoints, comma-separated.
        #[arg(long, value_delimiter = ',')]
        endpoints: Vec<String>,
        /// Workload.
        #[arg(long, value_enum)]
        workload: workload::Kind,
        /// Random seed.
        #[arg(long)]
        seed: u64,
        /// The harness's start on CLOCK_MONOTONIC, in ns.
        #[arg(long)]
        clock_base: u64,
        /// The first process id this worker may use.
        #[arg(long)]
        first_process: u64,
        /// The local IP its connections come from.
        #[arg(long)]
        local_address: Option<std::net::IpAddr>,
    },
    /// The storage fault matrix: damage each file of a stopped follower's
    /// data dir at sampled offsets (zero a block, flip a byte, truncate,
    /// remove; or lose the whole dir), alone and beside a stale peer, and
    /// check that no token is issued twice, no acknowledged grant is lost,
    /// the node refuses or rejoins, and the healthy pair keeps serving.
    /// Prints a table; `--full` is every file at 16 offsets.
    Matrix {
        /// Every case: about 430 that apply (an hour or so).
        #[arg(long, conflicts_with = "sample")]
        full: bool,
        /// Run this many cases that apply, drawn by `--seed` (the first is
        /// always the whole data dir lost beside a stale peer).
        #[arg(long, default_value_t = 10)]
        sample: usize,
        /// Random seed (which cases, which bytes).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// A FUSE passthrough of BACKING mounted at MOUNT, for tests of disks
    /// that hang: after SIGUSR1 its writes, fsyncs and fallocates hang
    /// (reads and stat still answer) until SIGUSR2. Prints `mounted` once
    /// it is; unmounts on SIGTERM or SIGINT.
    #[command(hide = true)]
    Faultfs {
        /// The directory the files really live in.
        backing: PathBuf,
        /// Where the file system is mounted.
        mount: PathBuf,
    },
    /// A workload against the in-memory fake with a planted fault: shows
    /// the checkers catch it.
    Fake {
        /// The planted fault.
        #[arg(long, value_enum)]
        fault: Fault,
        /// Workload.
        #[arg(long, value_enum, default_value = "mutex")]
        workload: workload::Kind,
        /// How long.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        time: Duration,
    },
}

fn default_raftlockd() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .map(|d| d.join("raftlockd"))
        .ok_or_else(|| anyhow::anyhow!("cannot locate raftlockd"))?;
    if !path.exists() {
        anyhow::bail!(
            "{} not found: build it (cargo build --bins) or pass --raftlockd",
            path.display()
        );
    }
    Ok(path)
}

fn print(o: &Outcome) {
    println!("{:<8} {:>6} ops  {}", o.verdict, o.ops, o.dir.display());
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,fuser=error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // On Ctrl-C the run's future is dropped, and with it the cluster (its
    // nodes are killed by PID) and the iptables chain.
    let result = tokio::select! {
        r = go(&cli) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    match result {
        Ok(outcomes) => {
            let invalid = outcomes.iter().any(|o| o.verdict == "invalid");
            let unknown = outcomes.iter().any(|o| o.verdict == "unknown");
            println!(
                "{} run(s), {} op(s): {}",
                outcomes.len(),
                outcomes.iter().map(|o| o.ops).sum::<usize>(),
                if invalid {
                    "INVALID"
                } else if unknown {
                    "unknown"
                } else {
                    "valid"
                }
            );
            std::process::exit(if invalid || (cli.strict && unknown) {
                1
            } else {
                0
            });
        }
        Err(e) => {
            eprintln!("raftlock-jepsen: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn go(cli: &Cli) -> anyhow::Result<Vec<Outcome>> {
    raftlock_jepsen::loopback::set_loopback_net(&cli.loopback_net)?;
    let raftlockd = || match (&cli.raftlockd, &cli.docker) {
        (Some(p), _) => Ok(p.clone()),
        // The image brings its own binary.
        (None, Some(_)) => Ok(PathBuf::new()),
        (None, None) => default_raftlockd(),
    };
    let mut outcomes = Vec::new();
    match &cli.command {
        Command::Run {
            workload,
            nemesis,
            nodes,
            concurrency,
            time,
            seed,
            clock_rates,
        } => {
            let cfg = RunConfig {
                clock_rates: clock_rates.clone(),
                raftlockd: raftlockd()?,
                workload: *workload,
                nemesis: *nemesis,
                nodes: *nodes,
                concurrency: *concurrency,
                time: *time,
                seed: *seed,
                out: cli.out.clone(),
                docker: cli.docker.clone(),
                client_worker: cli.client_worker.clone(),
            };
            let o = run::run(&cfg).await?;
            print(&o);
            outcomes.push(o);
        }
        Command::Suite {
            short,
            long,
            each,
            nodes,
            workloads,
        } => {
            let plan: Vec<(workload::Kind, nemesis::Kind, Duration)> = if *long {
                let chosen: Vec<workload::Kind> = workload::Kind::ALL
                    .into_iter()
                    .filter(|w| workloads.is_empty() || workloads.contains(w))
                    .collect();
                nemesis::Kind::ALL
                    .iter()
                    .flat_map(|&n| chosen.iter().map(move |&w| (w, n, *each)))
                    .collect()
            } else if *short {
                let t = Duration::from_secs(25);
                vec![
                    (workload::Kind::Mutex, nemesis::Kind::Kill, t),
                    (workload::Kind::Fenced, nemesis::Kind::Pause, t),
                    (workload::Kind::Election, nemesis::Kind::Partition, t),
                    (workload::Kind::Semaphore, nemesis::Kind::Membership, t),
                    (workload::Kind::RateLimit, nemesis::Kind::Kill, t),
                    (workload::Kind::MultiLock, nemesis::Kind::Pause, t),
                ]
            } else {
                anyhow::bail!("say --short or --long");
            };
            // A run whose nemesis cannot act fails; a suite of 100 runs
            // should say so before its first, not an hour in.
            if cli.docker.is_none() && plan.iter().any(|p| p.1 == nemesis::Kind::Clock) {
                raftlock_jepsen::cluster::faketime_library()
                    .map_err(|e| anyhow::anyhow!("the clock nemesis cannot run: {e}"))?;
            }
            for (i, (w, n, t)) in plan.into_iter().enumerate() {
                let cfg = RunConfig {
                    clock_rates: Vec::new(),
                    raftlockd: raftlockd()?,
                    workload: w,
                    nemesis: n,
                    nodes: *nodes,
                    concurrency: 6,
                    time: t,
                    seed: 1 + i as u64,
                    out: cli.out.clone(),
                    docker: cli.docker.clone(),
                    client_worker: cli.client_worker.clone(),
                };
                let o = run::run(&cfg).await?;
                print(&o);
                outcomes.push(o);
            }
        }
        Command::Check { history } => {
            let text = std::fs::read_to_string(history)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", history.display()))?;
            let ops: Vec<raftlock_jepsen::history::Op> = text
                .lines()
                .enumerate()
                .map(|(i, l)| {
                    serde_json::from_str(l)
                        .map_err(|e| anyhow::anyhow!("{}:{}: {e}", history.display(), i + 1))
                })
                .collect::<anyhow::Result<_>>()?;
            // The nemesis's windows are kept beside the history, in the
            // run's results.json.
            let faults: Vec<raftlock_jepsen::history::FaultWindow> = history
                .parent()
                .map(|d| d.join("results.json"))
                .and_then(|f| std::fs::read(f).ok())
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| serde_json::from_value(v["faults"].clone()).ok())
                .unwrap_or_default();
            let results = raftlock_jepsen::checker::check_run(&ops, &faults);
            let mut verdict = "valid";
            for r in &results {
                println!(
                    "{:<18} {:<8} {}",
                    r.checker,
                    format!("{:?}", r.verdict).to_lowercase(),
                    r.explanation
                );
                match r.verdict {
                    raftlock_jepsen::checker::Verdict::Invalid => verdict = "invalid",
                    raftlock_jepsen::checker::Verdict::Unknown if verdict == "valid" => {
                        verdict = "unknown"
                    }
                    _ => {}
                }
            }
            outcomes.push(Outcome {
                verdict: verdict.into(),
                dir: history.clone(),
                ops: ops
                    .iter()
                    .filter(|o| o.kind == raftlock_jepsen::history::Type::Invoke)
                    .count(),
                checks: serde_json::to_value(&results)?,
            });
        }
        Command::Worker {
            endpoints,
            workload,
            seed,
            clock_base,
            first_process,
            local_address,
        } => {
            worker(
                endpoints.clone(),
                *workload,
                *seed,
                *clock_base,
                *first_process,
                *local_address,
            )
            .await?;
            std::process::exit(0);
        }
        Command::Matrix { full, sample, seed } => {
            use raftlock_jepsen::matrix;
            let (plan, want) = if *full {
                (matrix::full_plan(), None)
            } else {
                (matrix::sampled_plan(*seed), Some(*sample))
            };
            let cfg = matrix::Config {
                raftlockd: raftlockd()?,
                out: cli.out.clone(),
                plan,
                want,
                seed: *seed,
            };
            let (dir, results) = matrix::run(&cfg).await?;
            print!("{}", matrix::table::render(&results));
            let invalid: Vec<_> = results
                .iter()
                .filter(|r| !r.violations.is_empty())
                .collect();
            for r in &invalid {
                println!(
                    "VIOLATION {} / {} / slot {}{}: {}",
                    r.case.target.label(),
                    r.case.kind.label(),
                    r.case.slot,
                    if r.case.stale_peer {
                        " / stale peer"
                    } else {
                        ""
                    },
                    r.violations.join("; ")
                );
            }
            let o = Outcome {
                verdict: if invalid.is_empty() {
                    "valid"
                } else {
                    "invalid"
                }
                .into(),
                dir,
                ops: results.len(),
                checks: serde_json::to_value(&results)?,
            };
            print(&o);
            outcomes.push(o);
        }
        Command::Faultfs { backing, mount } => {
            use tokio::signal::unix::{signal, SignalKind};
            let switches = std::sync::Arc::new(raftlock_jepsen::faultfs::Switches::default());
            let session =
                raftlock_jepsen::faultfs::FaultFs::mount(backing, mount, switches.clone())
                    .map_err(|e| anyhow::anyhow!("cannot mount on {}: {e}", mount.display()))?;
            let mut hang = signal(SignalKind::user_defined1())?;
            let mut go_on = signal(SignalKind::user_defined2())?;
            let mut term = signal(SignalKind::terminate())?;
            println!("mounted");
            loop {
                tokio::select! {
                    _ = hang.recv() => switches.set_hang(true),
                    _ = go_on.recv() => switches.set_hang(false),
                    _ = term.recv() => break,
                }
            }
            drop(session);
            std::process::exit(0);
        }
        Command::Fake {
            fault,
            workload,
            time,
        } => {
            let o = run::run_fake(*workload, *fault, 6, *time, 1, &cli.out).await?;
            print(&o);
            outcomes.push(o);
        }
    }
    Ok(outcomes)
}

/// The client process behind `raftlock-jepsen worker`.
async fn worker(
    endpoints: Vec<String>,
    kind: workload::Kind,
    seed: u64,
    clock_base: u64,
    first_process: u64,
    local_address: Option<std::net::IpAddr>,
) -> anyhow::Result<()> {
    use std::sync::Arc;
    let backend: Arc<dyn raftlock_jepsen::backend::Backend> =
        Arc::new(raftlock_jepsen::backend::Real::connect_from(endpoints, local_address).await?);
    let rec = workload::Recorder::child(clock_base, first_process, Box::new(std::io::stdout()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let work = tokio::spawn(workload::run(
        backend,
        rec,
        kind,
        1,
        seed,
        run::CLIENT_PROCESS_LONG_HOLDS,
        stop_rx,
    ));
    term.recv().await;
    let _ = stop_tx.send(true);
    let _ = work.await;
    Ok(())
}
