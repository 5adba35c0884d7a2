//! `raftlock status`

use super::{connect, print_json, Cli, Output};

#[derive(clap::Args)]
pub struct Args {}

pub async fn run(cli: &Cli, _: &Args) -> anyhow::Result<i32> {
    let s = connect(cli).await?.status().await?;
    if cli.output == Output::Json {
        print_json(&s)?;
        return Ok(0);
    }
    println!("node {} is {} in term {}", s.node_id, s.role, s.term);
    println!("leader: node {} at {}", s.leader_id, s.leader_addr);
    println!(
        "commit index {}, applied index {}",
        s.commit_index, s.applied_index
    );
    println!(
        "sessions {}, locks {}, waiters {}",
        s.sessions, s.locks, s.waiters
    );
    for m in &s.members {
        println!(
            "  voter   {} client {} peer {}",
            m.id, m.client_addr, m.peer_addr
        );
    }
    for m in &s.learners {
        println!(
            "  learner {} client {} peer {}",
            m.id, m.client_addr, m.peer_addr
        );
    }
    Ok(0)
}
