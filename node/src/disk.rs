//! Offline tools for a stopped node's data dir: `raftlockd check` reads
//! it and says what is damaged; `raftlockd repair` rebuilds a damaged node
//! from the healthy majority (docs/operations.md, "When a disk fails";
//! docs/design.md, "Disks that fail", for why that is safe).

use anyhow::Context;
use raftlock_store::data_dir::DataDir;
use std::time::Duration;

/// `raftlockd check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The data dir (the node must be stopped: its lock is taken).
    #[arg(long)]
    pub data_dir: std::path::PathBuf,
}

/// Prints what the stopped node's data dir at `a.data_dir` holds; whether
/// it is sound.
pub fn check(a: CheckArgs) -> anyhow::Result<bool> {
    let data = DataDir::open_existing(&a.data_dir)?;
    let id = data.identity();
    println!(
        "data dir   {} (node {}, cluster {})",
        a.data_dir.display(),
        id.node_id,
        id.cluster_id.as_deref().unwrap_or("none")
    );
    let problems = verify(&data, true);
    if problems.is_empty() {
        println!("result     ok");
        return Ok(true);
    }
    for p in &problems {
        println!("DAMAGED    {p}");
    }
    Ok(false)
}

/// Reads the log and the snapshot of `data` without writing anything;
/// prints what they hold when `print`. Returns what is damaged.
fn verify(data: &DataDir, print: bool) -> Vec<String> {
    use raftlock_store::{state_machine, wal};
    let say = |line: String| {
        if print {
            println!("{line}");
        }
    };
    let mut problems = Vec::new();
    let log = match wal::read_only(&data.wal_dir()) {
        Ok((image, report)) => {
            let first = image.entries.keys().next().copied();
            let last = image.last_log_id().map(|l| l.index);
            say(format!(
                "wal        ok: {} segments ({} of format 1), {} batches, {} records",
                report.segments, report.v1_segments, report.batches, report.records
            ));
            say(format!(
                "entries    {} ({}..={}), purged up to {}",
                image.entries.len(),
                first.map_or("-".into(), |i| i.to_string()),
                last.map_or("-".into(), |i| i.to_string()),
                image.purged.map_or("-".into(), |p| p.index.to_string())
            ));
            say(format!(
                "vote       {}",
                image.vote.map_or("none".into(), |v| format!(
                    "term {}, node {}, {}",
                    v.leader_id().term,
                    v.leader_id()
                        .voted_for()
                        .map_or("-".into(), |n| n.to_string()),
                    if v.is_committed() {
                        "committed"
                    } else {
                        "not committed"
                    }
                ))
            ));
            say(format!(
                "committed  {}",
                image
                    .committed
                    .map_or("none".into(), |c| c.index.to_string())
            ));
            if let Some((seq, offset)) = report.stopped_at {
                say(format!(
                    "torn tail  segment {seq:016x}.wal from offset {offset} ({} bytes): written after the last sync before a crash; a start drops it",
                    report.torn_bytes
                ));
            }
            if let (Some(c), Some(l)) = (image.committed, last) {
                if c.index > l {
                    problems.push(format!(
                        "the committed index {} is beyond the log's last entry {l}",
                        c.index
                    ));
                }
            }
            Some(image)
        }
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    match state_machine::verify_snapshot_file(&data.snapshot_file()) {
        Ok(None) => say("snapshot   none".into()),
        Ok(Some((last, bytes))) => {
            let index = last.map_or(0, |l| l.index);
            say(format!(
                "snapshot   ok: index {index}, {bytes} bytes, checksum and state verified"
            ));
            if let Some(purged) = log.as_ref().and_then(|l| l.purged) {
                if purged.index > index {
                    problems.push(format!(
                        "the log is purged up to {} but the snapshot covers only {index}: entries {}..={} are gone",
                        purged.index,
                        index + 1,
                        purged.index
                    ));
                }
            }
        }
        Err(e) => problems.push(format!("snapshot: {e}")),
    }
    if log.as_ref().and_then(|l| l.purged).is_some() && !data.snapshot_file().exists() {
        problems.push("the log is purged but there is no snapshot".into());
    }
    problems
}

/// `raftlockd repair`.
#[derive(clap::Args)]
pub struct RepairArgs {
    /// This node's id.
    #[arg(long)]
    pub id: u64,
    /// This node's data dir (the node must be stopped).
    #[arg(long)]
    pub data_dir: std::path::PathBuf,
    /// Client addresses of the other members, comma-separated.
    #[arg(
        long,
        env = "RAFTLOCK_ENDPOINTS",
        value_delimiter = ',',
        required = true
    )]
    pub endpoints: Vec<String>,
    /// PEM CA of the nodes' certificates, when the client port is TLS.
    #[arg(long, env = "RAFTLOCK_CACERT")]
    pub cacert: Option<std::path::PathBuf>,
    /// Bearer token of an identity with admin rights, when authentication
    /// is on.
    #[arg(
        long = "auth-token",
        env = "RAFTLOCK_AUTH_TOKEN",
        hide_env_values = true
    )]
    pub auth_token: Option<String>,
    /// Repair even if `check` finds nothing damaged (a disk the operator
    /// no longer trusts).
    #[arg(long)]
    pub force: bool,
}

/// Removes the node from the voters through the healthy majority, sets its
/// data dir aside and leaves an empty one marked to rejoin. Nothing is
/// changed unless the majority commits the removal first: from then on
/// nothing the node lost can count toward a vote or a commit.
pub async fn repair(a: RepairArgs) -> anyhow::Result<()> {
    let data = DataDir::open_damaged(&a.data_dir)?;
    anyhow::ensure!(
        data.identity().node_id == a.id,
        "{} belongs to node {}, not node {}",
        a.data_dir.display(),
        data.identity().node_id,
        a.id
    );
    let problems = if data.wal_dir().exists() {
        verify(&data, false)
    } else {
        vec!["no write-ahead log (wal/)".into()]
    };
    if problems.is_empty() && !a.force {
        anyhow::bail!(
            "{} checks clean (`raftlockd check`): repair would throw away a good log; start the node normally, or pass --force if the disk is not to be trusted",
            a.data_dir.display()
        );
    }
    for p in &problems {
        println!("damaged: {p}");
    }
    let mut options = raftlock_client::Options {
        token: a.auth_token.clone(),
        deadline: Duration::from_secs(20),
        ..Default::default()
    };
    if let Some(ca) = &a.cacert {
        let pem = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
        options.tls = Some(raftlock_client::Tls::new(pem));
    }
    let client = raftlock_client::Client::connect_with(&a.endpoints, options)
        .await
        .context("cannot reach a leader among the other members: with no healthy majority there is nothing to repair from (docs/operations.md, \"Losing a majority\"); nothing was changed here")?;
    let status = client.status().await.context(
        "the other members do not answer with a leader: with no healthy majority there is nothing to repair from (docs/operations.md, \"Losing a majority\")",
    )?;
    let me = status.members.iter().find(|m| m.id == a.id).cloned();
    let voters: Vec<u64> = status.members.iter().map(|m| m.id).collect();
    let others: Vec<u64> = voters.iter().copied().filter(|v| *v != a.id).collect();
    anyhow::ensure!(
        !others.is_empty(),
        "node {} is the only voter: there is no majority to repair it from",
        a.id
    );
    if me.is_some() {
        // Not kept as a learner: its replication state (how far it had the
        // log) is what it lost; it is added back afresh.
        // A healthy majority commits a membership change in well under a
        // second; one that cannot is reported, with nothing changed here.
        tokio::time::timeout(
            Duration::from_secs(10),
            client.change_membership(&others, false),
        )
        .await
        .map_err(|_| anyhow::anyhow!("removing node {} from the voters did not commit within 10 s: the other members may not form a healthy majority; nothing was changed here", a.id))?
        .with_context(|| {
            format!(
                "cannot remove node {} from the voters: that needs a healthy majority of the current voters; nothing was changed here",
                a.id
            )
        })?;
        println!("removed node {} from the voters (now {others:?})", a.id);
    } else {
        println!("node {} is not a voter (voters {voters:?})", a.id);
        let _ = client.remove_learner(a.id).await;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let aside = a.data_dir.with_extension(format!("damaged-{now}"));
    data.replace_with_joining(&aside)?;
    let (peer, addr) = me
        .map(|m| (m.peer_addr, m.client_addr))
        .unwrap_or_else(|| ("PEER_ADDR".into(), "CLIENT_ADDR".into()));
    println!(
        "the damaged data dir is kept at {}; {} is empty and set to rejoin.\n\
         Next: start node {} as usual (it waits to be added and never bootstraps), then\n  \
         raftlock members add-learner {} {peer} {addr}\n  \
         raftlock members promote {}\n\
         (add-learner returns once it has caught up).",
        aside.display(),
        a.data_dir.display(),
        a.id,
        a.id,
        a.id
    );
    Ok(())
}
