//! `raftlock status`: the cluster as the leader sees it, then one line per
//! node as that node sees itself.

use super::{connect, print_json, Cli, Output};
use raftlock_client::Status;
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {}

/// How far a node's applied index may trail the leader's commit index
/// before it is reported as lagging.
const LAG: u64 = 1_000;

#[derive(Serialize)]
struct NodeLine {
    id: u64,
    address: String,
    voter: bool,
    health: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
}

#[derive(Serialize)]
struct Report {
    cluster: Status,
    nodes: Vec<NodeLine>,
}

pub async fn run(cli: &Cli, _: &Args) -> anyhow::Result<i32> {
    let client = connect(cli).await?;
    let cluster = client.status().await?;
    let members = cluster
        .members
        .iter()
        .map(|m| (m, true))
        .chain(cluster.learners.iter().map(|m| (m, false)));
    let probes = members.map(|(m, voter)| {
        let client = client.clone();
        async move {
            let res = client.node_status(&m.client_addr).await;
            (m.id, m.client_addr.clone(), voter, res)
        }
    });
    let mut nodes = Vec::new();
    let mut unhealthy = false;
    for (id, address, voter, res) in futures::future::join_all(probes).await {
        let line = match res {
            Ok(s) => {
                let health = if s.applied_index + LAG < cluster.commit_index {
                    "lagging"
                } else if s.leader_id == 0 {
                    "no-leader"
                } else {
                    "ok"
                };
                NodeLine {
                    id,
                    address,
                    voter,
                    health,
                    error: None,
                    status: Some(s),
                }
            }
            Err(e) => NodeLine {
                id,
                address,
                voter,
                health: "unreachable",
                error: Some(e.to_string()),
                status: None,
            },
        };
        unhealthy |= line.health != "ok";
        nodes.push(line);
    }
    if cli.output == Output::Json {
        print_json(&Report { cluster, nodes })?;
        return Ok(if unhealthy { 5 } else { 0 });
    }
    println!(
        "leader node {} at {}, term {}, commit {}; sessions {}, locks {}, waiters {}",
        cluster.leader_id,
        cluster.leader_addr,
        cluster.term,
        cluster.commit_index,
        cluster.sessions,
        cluster.locks,
        cluster.waiters
    );
    println!(
        "{:>4}  {:<22} {:<9} {:>6} {:>10} {:>10}  health",
        "id", "address", "role", "term", "commit", "applied"
    );
    for n in &nodes {
        match &n.status {
            Some(s) => println!(
                "{:>4}  {:<22} {:<9} {:>6} {:>10} {:>10}  {}",
                n.id,
                n.address,
                if n.voter { s.role.as_str() } else { "learner" },
                s.term,
                s.commit_index,
                s.applied_index,
                n.health
            ),
            None => println!(
                "{:>4}  {:<22} {:<9} {:>6} {:>10} {:>10}  unreachable: {}",
                n.id,
                n.address,
                "?",
                "-",
                "-",
                "-",
                n.error.as_deref().unwrap_or_default()
            ),
        }
    }
    Ok(if unhealthy { 5 } else { 0 })
}
