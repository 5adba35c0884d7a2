//! Nemeses: faults injected in rounds (fault, hold, heal, quiet), each round
//! recorded as a [`FaultWindow`] for the report and plots.

use crate::cluster::Cluster;
use crate::history::FaultWindow;
use crate::net::{self, Net};
use crate::workload::Recorder;
use raftlock_client::Client;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Which faults to inject.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// No faults (a baseline).
    None,
    /// `kill -9` and restart: a random node, the leader, or a minority.
    Kill,
    /// SIGSTOP then SIGCONT: a random node or the leader.
    Pause,
    /// Cut peer links with iptables: isolate the leader, halves, bridge,
    /// majorities ring.
    Partition,
    /// Remove a voter, add it back as a learner, promote it, under load.
    Membership,
    /// A random mix of all of the above.
    Chaos,
}

impl Kind {
    /// Every nemesis that injects faults.
    pub const ALL: [Kind; 5] = [
        Kind::Kill,
        Kind::Pause,
        Kind::Partition,
        Kind::Membership,
        Kind::Chaos,
    ];
}

/// Shared state of a nemesis run.
pub struct Nemesis {
    /// The cluster.
    pub cluster: Arc<tokio::sync::Mutex<Cluster>>,
    /// Link control, when iptables works here.
    pub net: Option<Net>,
    /// An admin client for membership changes.
    pub admin: Client,
    /// Fault windows so far.
    pub windows: Arc<Mutex<Vec<FaultWindow>>>,
    /// The history's clock.
    pub rec: Arc<Recorder>,
    /// The full voter set, restored when healing.
    pub members: Vec<raftlock_client::Member>,
    /// Faults the nemesis could not inject or undo (no iptables, no
    /// permission, a node that would not restart): a run with any of these
    /// did not test what it says, so it fails.
    pub failures: Arc<Mutex<Vec<String>>>,
}

impl Nemesis {
    fn failed(&self, what: String) {
        tracing::error!(failure = %what, "the nemesis could not act: the run will fail");
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(what);
    }

    /// Runs rounds until `stop`, then heals everything.
    pub async fn run(&self, kind: Kind, seed: u64, mut stop: watch::Receiver<bool>) {
        let mut rng = StdRng::seed_from_u64(seed);
        loop {
            // Quiet time first: the workload gets going, and after each heal
            // the cluster recovers before the next fault.
            if sleep_or_stop(&mut stop, Duration::from_millis(rng.gen_range(2000..4000))).await {
                break;
            }
            if kind == Kind::None {
                continue;
            }
            let round = match kind {
                Kind::Chaos => *[Kind::Kill, Kind::Pause, Kind::Partition, Kind::Membership]
                    .choose(&mut rng)
                    .unwrap_or(&Kind::Kill),
                k => k,
            };
            let start = self.rec.now_ns();
            let name = match self.inject(round, &mut rng).await {
                Ok(name) => name,
                Err(e) => {
                    // A membership change can be refused by a cluster under
                    // load (and that is tested); a kill, pause or cut that
                    // did not happen means the run tested nothing.
                    if round != Kind::Membership {
                        self.failed(format!("could not inject {round:?}: {e:#}"));
                    }
                    tracing::warn!(error = %e, "nemesis round failed");
                    format!("{round:?} (failed: {e})")
                }
            };
            // Membership rounds are a sequence of changes, already done.
            if round != Kind::Membership {
                sleep_or_stop(&mut stop, Duration::from_millis(rng.gen_range(3000..6000))).await;
            }
            self.heal().await;
            self.windows
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(FaultWindow {
                    name,
                    start_ns: start,
                    end_ns: self.rec.now_ns(),
                });
            if *stop.borrow() {
                break;
            }
        }
        self.heal().await;
    }

    async fn inject(&self, kind: Kind, rng: &mut StdRng) -> anyhow::Result<String> {
        let mut c = self.cluster.lock().await;
        let n = c.nodes.len() as u64;
        let leader = c.leader().await.unwrap_or(1);
        let random = rng.gen_range(1..=n);
        match kind {
            Kind::Kill => {
                let targets: Vec<u64> = match rng.gen_range(0..3) {
                    0 => vec![random],
                    1 => vec![leader],
                    _ => {
                        let mut ids: Vec<u64> = (1..=n).collect();
                        ids.shuffle(rng);
                        ids.truncate(((n - 1) / 2) as usize);
                        ids
                    }
                };
                for &t in &targets {
                    c.kill(t);
                }
                Ok(format!("kill {targets:?}"))
            }
            Kind::Pause => {
                let t = if rng.gen_bool(0.5) { leader } else { random };
                c.pause(t);
                Ok(format!(
                    "pause n{t}{}",
                    if t == leader { " (leader)" } else { "" }
                ))
            }
            Kind::Partition => {
                let Some(netctl) = &self.net else {
                    anyhow::bail!("iptables unavailable");
                };
                let shape = *net::SHAPES.choose(rng).unwrap_or(&"isolate-leader");
                let links = net::shape(shape, n, leader);
                netctl.apply(&links)?;
                Ok(format!("partition {shape} (leader n{leader})"))
            }
            Kind::Membership => {
                drop(c);
                let victim = loop {
                    let v = rng.gen_range(1..=n);
                    if v != leader || n == 1 {
                        break v;
                    }
                };
                self.cycle_member(victim).await?;
                Ok(format!("membership: remove n{victim}, re-add, promote"))
            }
            Kind::None | Kind::Chaos => Ok("none".into()),
        }
    }

    /// Removes `id` from the voters, adds it back as a learner, and
    /// promotes it: three membership changes under load.
    async fn cycle_member(&self, id: u64) -> anyhow::Result<()> {
        let status = self.admin.status().await?;
        let member = status
            .members
            .iter()
            .find(|m| m.id == id)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("n{id} is not a voter"))?;
        let voters: Vec<u64> = status.members.iter().map(|m| m.id).collect();
        let without: Vec<u64> = voters.iter().copied().filter(|&v| v != id).collect();
        self.admin.change_membership(&without, true).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.admin
            .add_learner(id, &member.peer_addr, &member.client_addr, true)
            .await?;
        self.admin.change_membership(&voters, false).await?;
        Ok(())
    }

    /// Heals the network and brings every process back.
    pub async fn heal(&self) {
        if let Some(net) = &self.net {
            if let Err(e) = net.heal() {
                self.failed(format!("cannot heal the network: {e:#}"));
            }
        }
        {
            let mut c = self.cluster.lock().await;
            if let Err(e) = c.heal_processes() {
                self.failed(format!("cannot restart a node: {e:#}"));
            }
        }
        if let Err(e) = self.restore_membership().await {
            tracing::warn!(error = %e, "cannot restore the membership");
        }
    }

    /// Makes every original node a voter again, should a membership round
    /// have stopped halfway.
    async fn restore_membership(&self) -> anyhow::Result<()> {
        let status = self.admin.status().await?;
        if status.members.len() == self.members.len() {
            return Ok(());
        }
        for m in &self.members {
            if !status.members.iter().any(|v| v.id == m.id) {
                self.admin
                    .add_learner(m.id, &m.peer_addr, &m.client_addr, true)
                    .await?;
            }
        }
        let all: Vec<u64> = self.members.iter().map(|m| m.id).collect();
        self.admin.change_membership(&all, false).await?;
        Ok(())
    }
}

/// Sleeps `d`; true if `stop` turned true meanwhile.
async fn sleep_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    let stopped = tokio::select! {
        _ = tokio::time::sleep(d) => false,
        r = stop.wait_for(|s| *s) => r.is_ok(),
    };
    stopped || *stop.borrow()
}
