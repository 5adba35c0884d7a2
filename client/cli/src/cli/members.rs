//! `raftlock members ...` and `raftlock transfer-leader ID`.

use super::{connect, print_json, Cli, Output};
use raftlock_client::{Member, Membership};

#[derive(clap::Subcommand)]
pub enum Args {
    /// List voters and learners.
    List,
    /// Add a node as a learner (it replicates but does not vote yet).
    AddLearner {
        /// The new node's id.
        id: u64,
        /// Its peer address (host:port).
        peer_addr: String,
        /// Its client address (host:port).
        client_addr: String,
        /// Return at once instead of waiting until it has caught up.
        #[arg(long)]
        no_wait: bool,
    },
    /// Make a learner a voter.
    Promote {
        /// The learner's id.
        id: u64,
    },
    /// Remove a node from the cluster (voter or learner).
    Remove {
        /// The node's id.
        id: u64,
    },
}

fn print_members(cli: &Cli, m: &Membership) -> anyhow::Result<()> {
    if cli.output == Output::Json {
        return print_json(m);
    }
    let line = |kind: &str, m: &Member| {
        println!(
            "{kind:<8} {:>4}  client {}  peer {}",
            m.id, m.client_addr, m.peer_addr
        )
    };
    m.members.iter().for_each(|m| line("voter", m));
    m.learners.iter().for_each(|m| line("learner", m));
    Ok(())
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let client = connect(cli).await?;
    let status = client.status().await?;
    let current = Membership {
        log_index: status.applied_index,
        members: status.members,
        learners: status.learners,
    };
    let voters: Vec<u64> = current.members.iter().map(|m| m.id).collect();
    let is_learner = |id: u64| current.learners.iter().any(|m| m.id == id);
    let changed = match a {
        Args::List => current.clone(),
        Args::AddLearner {
            id,
            peer_addr,
            client_addr,
            no_wait,
        } => {
            client
                .add_learner(*id, peer_addr, client_addr, !no_wait)
                .await?
        }
        Args::Promote { id } => {
            if voters.contains(id) {
                anyhow::bail!("node {id} is already a voter");
            }
            if !is_learner(*id) {
                anyhow::bail!(
                    "node {id} is not a learner; add it with `raftlock members add-learner` first"
                );
            }
            let mut v = voters.clone();
            v.push(*id);
            client.change_membership(&v, true).await?
        }
        Args::Remove { id } => {
            if voters.contains(id) {
                let v: Vec<u64> = voters.iter().copied().filter(|v| v != id).collect();
                if v.is_empty() {
                    anyhow::bail!("refusing to remove the last voter");
                }
                client.change_membership(&v, false).await?
            } else if is_learner(*id) {
                client.remove_learner(*id).await?
            } else {
                anyhow::bail!("node {id} is not a member");
            }
        }
    };
    print_members(cli, &changed)?;
    Ok(0)
}

#[derive(clap::Args)]
pub struct TransferArgs {
    /// The voter that should lead (0 = the most caught-up other voter).
    id: u64,
}

pub async fn transfer(cli: &Cli, a: &TransferArgs) -> anyhow::Result<i32> {
    let leader = connect(cli).await?.transfer_leader(a.id).await?;
    if cli.output == Output::Json {
        print_json(&serde_json::json!({ "leader_id": leader }))?;
    } else {
        println!("node {leader} leads");
    }
    Ok(0)
}
