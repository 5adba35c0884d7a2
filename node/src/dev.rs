//! `raftlockd dev`: a local cluster of real `raftlockd` processes on
//! loopback. Each node is a child process of this one, with its own data
//! dir and log file; Ctrl-C or SIGTERM stops them all with SIGTERM (so a
//! leader hands over first) and removes a temporary data dir.

use anyhow::{bail, Context};
use clap::Args;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::StatusRequest;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Flags of `raftlockd dev`.
#[derive(Args, Debug)]
pub struct DevArgs {
    /// Number of nodes (1, 3 or 5 make sense).
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Keep data here (reused by the next run, with the same ports);
    /// default: a temporary directory removed on exit.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Loopback address the nodes bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
}

/// Ports chosen on a first run, reused when the data dir is reused (the
/// cluster's membership records them).
#[derive(Serialize, Deserialize)]
struct Layout {
    nodes: Vec<(u64, u16, u16)>,
}

fn free_port(host: &str) -> anyhow::Result<u16> {
    Ok(TcpListener::bind((host, 0))?.local_addr()?.port())
}

fn layout(dir: &Path, nodes: u64, host: &str) -> anyhow::Result<Layout> {
    let file = dir.join("dev.json");
    if let Ok(bytes) = std::fs::read(&file) {
        let layout: Layout = serde_json::from_slice(&bytes).context("dev.json is damaged")?;
        if layout.nodes.len() as u64 != nodes {
            bail!(
                "{} holds a {}-node cluster; pass --nodes {}",
                dir.display(),
                layout.nodes.len(),
                layout.nodes.len()
            );
        }
        return Ok(layout);
    }
    let mut list = Vec::new();
    for id in 1..=nodes {
        list.push((id, free_port(host)?, free_port(host)?));
    }
    let layout = Layout { nodes: list };
    std::fs::write(&file, serde_json::to_vec_pretty(&layout)?)?;
    Ok(layout)
}

fn stop(children: &mut [(u64, Child)]) {
    for (_, child) in children.iter() {
        // SIGTERM, not kill: a leader hands leadership over before exiting.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for (id, child) in children.iter_mut() {
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    eprintln!("node {id} did not stop in time; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
    }
}

async fn wait_for_leader(endpoints: &[String], within: Duration) -> anyhow::Result<u64> {
    let deadline = Instant::now() + within;
    loop {
        for e in endpoints {
            if let Ok(mut c) = ClusterClient::connect(format!("http://{e}")).await {
                if let Ok(s) = c.status(StatusRequest::default()).await {
                    let s = s.into_inner();
                    if s.leader_id != 0 && s.node_id == s.leader_id {
                        return Ok(s.leader_id);
                    }
                }
            }
        }
        if Instant::now() > deadline {
            bail!("no leader elected within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the dev cluster until `signal`.
pub async fn run(args: DevArgs, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 9 {
        bail!("--nodes must be between 1 and 9");
    }
    let temp;
    let dir = match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            temp = tempfile::Builder::new().prefix("raftlock-dev-").tempdir()?;
            temp.path().to_owned()
        }
    };
    let layout = layout(&dir, args.nodes, &args.host)?;
    let host = &args.host;
    let initial: Vec<String> = layout
        .nodes
        .iter()
        .map(|(id, client, peer)| format!("{id}={host}:{peer}/{host}:{client}"))
        .collect();
    let initial = initial.join(",");
    let exe = std::env::current_exe().context("cannot find the raftlockd executable")?;
    let mut children = Vec::new();
    let mut metrics = Vec::new();
    for (id, client, peer) in &layout.nodes {
        // Admin ports are picked afresh on every start: nothing refers to
        // them across restarts.
        let metrics_addr = format!("{host}:{}", free_port(host)?);
        metrics.push(metrics_addr.clone());
        let log = std::fs::File::create(dir.join(format!("node-{id}.log")))?;
        let child = Command::new(&exe)
            .arg("--id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(dir.join(format!("node-{id}")))
            .arg("--listen-client")
            .arg(format!("{host}:{client}"))
            .arg("--listen-peer")
            .arg(format!("{host}:{peer}"))
            .arg("--initial-cluster")
            .arg(&initial)
            .arg("--listen-metrics")
            .arg(&metrics_addr)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start node {id}"))?;
        children.push((*id, child));
    }
    let endpoints: Vec<String> = layout
        .nodes
        .iter()
        .map(|(_, client, _)| format!("{host}:{client}"))
        .collect();
    let leader = match wait_for_leader(&endpoints, Duration::from_secs(30)).await {
        Ok(l) => l,
        Err(e) => {
            stop(&mut children);
            bail!("{e}; node logs are in {}", dir.display());
        }
    };
    println!("RAFTLOCK_ENDPOINTS={}", endpoints.join(","));
    println!(
        "# {} nodes up, leader is node {leader}; data and logs (node-N.log) in {}",
        args.nodes,
        dir.display()
    );
    println!(
        "# metrics, /health and /ready: {}",
        metrics
            .iter()
            .map(|m| format!("http://{m}/metrics"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "# try: export RAFTLOCK_ENDPOINTS={} && cargo run --release --bin raftlock -- status",
        endpoints.join(",")
    );
    println!(
        "# Ctrl-C stops the cluster{}",
        if args.data_dir.is_none() {
            " and deletes its data"
        } else {
            ""
        }
    );

    let exited = async {
        loop {
            for (id, child) in children.iter_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return (*id, status);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let result = tokio::select! {
        _ = signal => Ok(()),
        (id, status) = exited => Err(anyhow::anyhow!("node {id} exited unexpectedly ({status}); see {}", dir.join(format!("node-{id}.log")).display())),
    };
    eprintln!("stopping the cluster");
    stop(&mut children);
    result
}
