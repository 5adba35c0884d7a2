//! Network partitions between nodes with iptables rules on the nodes'
//! loopback IPs. Rules live in a chain of their own, named after this
//! process, which is the only thing touched: created at start, flushed to
//! heal, removed on drop. Only traffic between two node IPs is dropped, so
//! the harness's clients (from 127.0.0.1) still reach every node, as
//! clients on a healthy network would while the cluster's links are cut.

use std::collections::BTreeSet;
use std::process::Command;

/// Cuts and heals links between nodes: iptables rules on the host for
/// process clusters, or inside each container's network namespace for
/// docker clusters.
pub enum Net {
    /// Nodes are host processes on loopback IPs.
    Host(HostNet),
    /// Nodes are containers (named, index = id - 1).
    Docker(Vec<String>),
}

/// Rules in a chain of the host's INPUT.
pub struct HostNet {
    chain: String,
    ips: Vec<String>,
}

/// Runs iptables inside container `name`'s network namespace. The image
/// has no iptables of its own; the host's binary is entered into the
/// namespace instead, so the rules touch only that container.
fn in_container(name: &str, args: &[&str]) -> anyhow::Result<()> {
    let pid = crate::cluster::docker(&["inspect", "-f", "{{.State.Pid}}", name])?;
    if pid == "0" {
        return Ok(()); // not running: nothing to cut or heal
    }
    let out = Command::new("nsenter")
        .args(["-t", &pid, "-n", "iptables", "-w"])
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run nsenter: {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "iptables in {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn container_ip(name: &str) -> anyhow::Result<String> {
    crate::cluster::docker(&[
        "inspect",
        "-f",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        name,
    ])
}

fn iptables(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("iptables")
        .args(["-w"])
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run iptables: {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "iptables {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Net {
    /// Host mode: sets up the chain for nodes at `ips` (index = node id -
    /// 1), or says why iptables cannot be used here.
    pub fn new(ips: Vec<String>) -> anyhow::Result<Net> {
        let chain = format!("RLJ-{}", std::process::id());
        iptables(&["-N", &chain])?;
        let net = HostNet { chain, ips };
        iptables(&["-I", "INPUT", "1", "-j", &net.chain])?;
        Ok(Net::Host(net))
    }

    /// Docker mode for the containers `names`; checks that rules can be
    /// set inside them.
    pub fn docker(names: Vec<String>) -> anyhow::Result<Net> {
        for n in &names {
            in_container(n, &["-L", "INPUT", "-n"])?;
        }
        Ok(Net::Docker(names))
    }

    /// How partitions are made, for the report.
    pub fn mode(&self) -> &'static str {
        match self {
            Net::Host(_) => "iptables on the host (loopback IPs)",
            Net::Docker(_) => "iptables in each container's network namespace",
        }
    }

    /// Cuts every link in `links` (both directions), after healing what
    /// was cut before.
    pub fn apply(&self, links: &[(u64, u64)]) -> anyhow::Result<()> {
        match self {
            Net::Host(h) => h.apply(links),
            Net::Docker(names) => {
                self.heal()?;
                // Addresses are looked up now: a restarted container may
                // have a new one.
                let ips: Vec<String> = names
                    .iter()
                    .map(|n| container_ip(n).unwrap_or_default())
                    .collect();
                for &(a, b) in links {
                    let (ia, ib) = ((a - 1) as usize, (b - 1) as usize);
                    if !ips[ib].is_empty() {
                        in_container(&names[ia], &["-A", "INPUT", "-s", &ips[ib], "-j", "DROP"])?;
                    }
                    if !ips[ia].is_empty() {
                        in_container(&names[ib], &["-A", "INPUT", "-s", &ips[ia], "-j", "DROP"])?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Drops traffic between the addresses `a` and `b` (both directions),
    /// on top of the cuts already made: a client process's link to a node.
    pub fn cut_ips(&self, a: &str, b: &str) -> anyhow::Result<()> {
        match self {
            Net::Host(h) => {
                iptables(&["-A", &h.chain, "-s", a, "-d", b, "-j", "DROP"])?;
                iptables(&["-A", &h.chain, "-s", b, "-d", a, "-j", "DROP"])
            }
            Net::Docker(_) => {
                anyhow::bail!("client links are cut only on process clusters")
            }
        }
    }

    /// Removes every cut.
    pub fn heal(&self) -> anyhow::Result<()> {
        match self {
            Net::Host(h) => h.heal(),
            Net::Docker(names) => {
                for n in names {
                    in_container(n, &["-F", "INPUT"])?;
                }
                Ok(())
            }
        }
    }
}

impl HostNet {
    /// Cuts every link in `links` (both directions), after healing what
    /// was cut before.
    pub fn apply(&self, links: &[(u64, u64)]) -> anyhow::Result<()> {
        self.heal()?;
        for &(a, b) in links {
            self.cut(a, b)?;
            self.cut(b, a)?;
        }
        Ok(())
    }

    /// Drops traffic from node `a` to node `b` (one direction; callers cut
    /// both for a symmetric partition).
    pub fn cut(&self, a: u64, b: u64) -> anyhow::Result<()> {
        let (src, dst) = (&self.ips[(a - 1) as usize], &self.ips[(b - 1) as usize]);
        iptables(&["-A", &self.chain, "-s", src, "-d", dst, "-j", "DROP"])
    }

    /// Removes every cut.
    pub fn heal(&self) -> anyhow::Result<()> {
        iptables(&["-F", &self.chain])
    }
}

impl Drop for HostNet {
    fn drop(&mut self) {
        let _ = iptables(&["-D", "INPUT", "-j", &self.chain]);
        let _ = iptables(&["-F", &self.chain]);
        let _ = iptables(&["-X", &self.chain]);
    }
}

/// The partition shapes the nemesis knows.
pub const SHAPES: [&str; 4] = ["isolate-leader", "halves", "bridge", "majorities-ring"];

/// The links to cut for partition `name` of `n` nodes, given the current
/// leader.
pub fn shape(name: &str, n: u64, leader: u64) -> Vec<(u64, u64)> {
    let all: Vec<u64> = (1..=n).collect();
    let between = |a: &BTreeSet<u64>, b: &BTreeSet<u64>| {
        let mut links = Vec::new();
        for &x in a {
            for &y in b {
                links.push((x, y));
            }
        }
        links
    };
    let others: Vec<u64> = all.iter().copied().filter(|&i| i != leader).collect();
    match name {
        // The leader alone against the rest.
        "isolate-leader" => between(&BTreeSet::from([leader]), &others.iter().copied().collect()),
        // A minority holding the old leader, which must stop serving, and a
        // majority that must elect a new one.
        "halves" => {
            let minority = ((n - 1) / 2) as usize;
            let small: BTreeSet<u64> = std::iter::once(leader)
                .chain(others.iter().copied())
                .take(minority)
                .collect();
            let big: BTreeSet<u64> = all.iter().copied().filter(|i| !small.contains(i)).collect();
            between(&small, &big)
        }
        // Two halves that cannot talk, and the leader in the middle seeing
        // both.
        "bridge" => {
            let (a, b) = others.split_at(others.len() / 2);
            between(&a.iter().copied().collect(), &b.iter().copied().collect())
        }
        // Every node sees a majority, but each a different one: on a ring,
        // only neighbours talk. With 3 nodes every pair is neighbours, so
        // the leader loses one follower instead.
        _ => {
            if n < 5 {
                return vec![(leader, others[0])];
            }
            let mut links = Vec::new();
            for a in 1..=n {
                for b in a + 1..=n {
                    let d = (b - a).min(n - (b - a));
                    if d > 1 {
                        links.push((a, b));
                    }
                }
            }
            links
        }
    }
}
