//! Nemeses: faults injected in rounds (fault, hold, heal, quiet), each round
//! recorded as a [`FaultWindow`] for the report and plots.

pub mod disk;

use crate::clients::ClientProcs;
use crate::cluster::Cluster;
use crate::history::FaultWindow;
use crate::net::{self, Net};
use crate::workload::Recorder;
use parking_lot::Mutex;
use raftlock_client::Client;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
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
    /// A random mix of kill, pause, partition, membership and kill-all.
    Chaos,
    /// Faults of the clients, not the nodes: a client process running the
    /// real client library is SIGSTOPped (from well under to well past its
    /// TTL) or its links to the leader are cut, while it holds locks.
    Client,
    /// `kill -9` of every node at once, and a restart from disk, while
    /// clients hold locks and keep their sessions alive through it.
    KillAll,
    /// One node's clock runs fast or slow (libfaketime, within the drift
    /// bound of docs/design.md), and leadership is moved to it.
    Clock,
    /// Leadership handed from node to node under load (what a rolling
    /// restart's graceful SIGTERM does), so leaders meet sessions they knew
    /// in an earlier term.
    Transfer,
    /// Disks that fail, each node on a tmpfs of its own: a durable byte of
    /// a minority's logs or of a majority's damaged (the nodes must refuse
    /// to start; a minority is rebuilt from the majority, a majority's
    /// bytes are put back), the leader's disk full (it must stop), a node's
    /// fdatasync slowed.
    Disk,
}

impl Kind {
    /// Every nemesis that injects faults.
    pub const ALL: [Kind; 10] = [
        Kind::Kill,
        Kind::Pause,
        Kind::Partition,
        Kind::Membership,
        Kind::Chaos,
        Kind::Client,
        Kind::KillAll,
        Kind::Clock,
        Kind::Transfer,
        Kind::Disk,
    ];
}

/// Clock rates of the clock nemesis: slow ones, and fast ones inside the
/// 11 % by which docs/design.md lets a leader's clock outrun a client's at
/// the default margin.
pub const CLOCK_RATES: [f64; 4] = [0.5, 0.9, 1.05, 1.08];

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
    /// The rates the clock nemesis picks from.
    pub clock_rates: Vec<f64>,
    /// The client processes (for the client nemesis).
    pub clients: Option<Arc<tokio::sync::Mutex<ClientProcs>>>,
    /// Faults the nemesis could not inject or undo (no iptables, no
    /// permission, a node that would not restart): a run with any of these
    /// did not test what it says, so it fails.
    pub failures: Arc<Mutex<Vec<String>>>,
    /// What the disk rounds must undo, and what they saw.
    pub disk: disk::DiskState,
    /// The clock rate the round under way set, for its fault window.
    pub clock_rate: Mutex<Option<f64>>,
}

impl Nemesis {
    fn failed(&self, what: String) {
        tracing::error!(failure = %what, "the nemesis could not act: the run will fail");
        self.failures.lock().push(what);
    }

    /// Runs rounds until `stop`, then heals everything.
    pub async fn run(&self, kind: Kind, seed: u64, mut stop: watch::Receiver<bool>) {
        let mut rng = StdRng::seed_from_u64(seed);
        self.disk.begin(seed);
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
                Kind::Chaos => *[
                    Kind::Kill,
                    Kind::Pause,
                    Kind::Partition,
                    Kind::Membership,
                    Kind::KillAll,
                    Kind::Transfer,
                ]
                .choose(&mut rng)
                .unwrap_or(&Kind::Kill),
                k => k,
            };
            let start = self.rec.now_ns();
            let mut hold = Duration::from_millis(rng.gen_range(3000..6000));
            let name = match self.inject(round, &mut rng).await {
                Ok((name, h)) => {
                    hold = h.unwrap_or(hold);
                    name
                }
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
                sleep_or_stop(&mut stop, hold).await;
            }
            self.heal().await;
            let (observations, majority_down) = self.disk.take_round();
            self.windows.lock().push(FaultWindow {
                name,
                start_ns: start,
                end_ns: self.rec.now_ns(),
                majority_down: majority_down || round == Kind::KillAll,
                observations,
                clock_rate: self.clock_rate.lock().take(),
            });
            if *stop.borrow() {
                break;
            }
        }
        self.heal().await;
    }

    /// Injects one fault; its name, and how long to keep it if not the
    /// usual few seconds.
    async fn inject(
        &self,
        kind: Kind,
        rng: &mut StdRng,
    ) -> anyhow::Result<(String, Option<Duration>)> {
        let mut c = self.cluster.lock().await;
        let n = c.node_count();
        let leader = c.leader().await.unwrap_or(1);
        match kind {
            Kind::KillAll => {
                for id in 1..=n {
                    c.kill(id);
                }
                c.heal_processes()?;
                return Ok(("kill -9 every node, restart".into(), None));
            }
            Kind::Clock => {
                let target = if rng.gen_bool(0.5) {
                    leader
                } else {
                    rng.gen_range(1..=n)
                };
                let rate = *self.clock_rates.choose(rng).unwrap_or(&1.05);
                c.restart_skewed(target, rate)?;
                drop(c);
                *self.clock_rate.lock() = Some(rate);
                // A skewed clock matters most on the leader, whose clock
                // times the leases: hand leadership to it once it is back.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let moved = self.admin.transfer_leader(target).await.is_ok();
                return Ok((
                    format!(
                        "clock of n{target} at x{rate}{}",
                        if moved {
                            ", made leader"
                        } else {
                            " (leadership not moved)"
                        }
                    ),
                    Some(Duration::from_millis(rng.gen_range(6000..10000))),
                ));
            }
            Kind::Disk => {
                drop(c);
                return Ok((self.inject_disk(rng).await?, None));
            }
            Kind::Transfer => {
                drop(c);
                let to = loop {
                    let t = rng.gen_range(1..=n);
                    if t != leader || n == 1 {
                        break t;
                    }
                };
                let now = self.admin.transfer_leader(to).await?;
                return Ok((format!("leadership n{leader} -> n{to} (now n{now})"), None));
            }
            Kind::Client => {
                drop(c);
                let Some(clients) = &self.clients else {
                    anyhow::bail!("no client processes in this run");
                };
                let mut cp = clients.lock().await;
                anyhow::ensure!(!cp.procs.is_empty(), "no client processes in this run");
                let k = rng.gen_range(0..cp.procs.len());
                // From well under to well past the workers' TTL.
                let ttl = crate::workload::TTL.as_millis() as u64;
                let length = Duration::from_millis(rng.gen_range(ttl / 5..ttl * 3));
                if rng.gen_bool(0.5) {
                    cp.pause(k)?;
                    return Ok((format!("pause client {k} for {length:?}"), Some(length)));
                }
                let Some(netctl) = &self.net else {
                    anyhow::bail!("iptables unavailable");
                };
                let leader_ip = self.cluster.lock().await.ip(leader);
                netctl.cut_ips(&cp.procs[k].ip, &leader_ip)?;
                return Ok((
                    format!("cut client {k} from the leader n{leader} for {length:?}"),
                    Some(length),
                ));
            }
            _ => {}
        }
        drop(c);
        self.inject_node_fault(kind, rng).await.map(|n| (n, None))
    }

    async fn inject_node_fault(&self, kind: Kind, rng: &mut StdRng) -> anyhow::Result<String> {
        let mut c = self.cluster.lock().await;
        let n = c.node_count();
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
                Ok(format!(
                    "kill {targets:?}{}",
                    if targets.contains(&leader) {
                        " (leader)"
                    } else {
                        ""
                    }
                ))
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
            Kind::None
            | Kind::Chaos
            | Kind::Client
            | Kind::KillAll
            | Kind::Clock
            | Kind::Transfer
            | Kind::Disk => Ok("none".into()),
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
        self.undo_disk().await;
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
        if let Some(clients) = &self.clients {
            if let Err(e) = clients.lock().await.resume_all() {
                self.failed(format!("cannot resume a client process: {e:#}"));
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
