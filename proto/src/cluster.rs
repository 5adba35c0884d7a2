//! The `--initial-cluster` list (`1=peer/client,2=peer/client,...`): parsed
//! by `raftlockd`, written by everything that starts nodes (the local
//! cluster launcher, deploy scripts), so both directions live here.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A member named in `--initial-cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialMember {
    /// Peer address (`host:port`).
    pub peer: String,
    /// Client address (`host:port`).
    pub client: String,
}

impl fmt::Display for InitialMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.peer, self.client)
    }
}

/// The members a new cluster starts with, by node id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitialCluster(pub BTreeMap<u64, InitialMember>);

/// Why an `--initial-cluster` value is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InitialClusterError(String);

impl FromStr for InitialCluster {
    type Err = InitialClusterError;

    /// Parses `1=host:port/host:port,2=host:port`; a member without a
    /// client address gets its peer port minus 100.
    fn from_str(spec: &str) -> Result<Self, InitialClusterError> {
        let invalid = |reason: String| InitialClusterError(reason);
        let mut members = BTreeMap::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, addrs) = part
                .split_once('=')
                .ok_or_else(|| invalid(format!("{part:?} is not id=peer_addr[/client_addr]")))?;
            let id: u64 = id
                .trim()
                .parse()
                .map_err(|_| invalid(format!("{id:?} is not a node id")))?;
            if id == 0 {
                return Err(invalid("node ids start at 1".into()));
            }
            let (peer, client) = match addrs.split_once('/') {
                Some((p, c)) => (p.to_owned(), c.to_owned()),
                None => (
                    addrs.to_owned(),
                    default_client_addr(addrs).ok_or_else(|| {
                        invalid(format!(
                            "{addrs:?}: cannot derive a client address; write peer/client"
                        ))
                    })?,
                ),
            };
            for a in [&peer, &client] {
                if a.rsplit_once(':')
                    .and_then(|(_, p)| p.parse::<u16>().ok())
                    .is_none()
                {
                    return Err(invalid(format!("{a:?} is not host:port")));
                }
            }
            if members.insert(id, InitialMember { peer, client }).is_some() {
                return Err(invalid(format!("node {id} is named twice")));
            }
        }
        if members.is_empty() {
            return Err(invalid("names no members".into()));
        }
        Ok(InitialCluster(members))
    }
}

impl fmt::Display for InitialCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (id, m)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{id}={m}")?;
        }
        Ok(())
    }
}

impl InitialCluster {
    /// A stable id for the cluster this list describes, so that every member
    /// started with the same list derives the same id, and a data dir from
    /// another cluster is recognised.
    pub fn cluster_id(&self) -> String {
        // FNV-1a over the canonical member list: stable across builds and
        // platforms, unlike std's DefaultHasher.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (id, m) in &self.0 {
            for b in format!("{id}={};", m.peer).bytes() {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        format!("{hash:016x}")
    }
}

fn default_client_addr(peer: &str) -> Option<String> {
    let (host, port) = peer.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    Some(format!("{host}:{}", port.checked_sub(100)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_derives_client_ports() {
        let m: InitialCluster = "1=127.0.0.1:7101,2=127.0.0.2:7101/127.0.0.2:9000"
            .parse()
            .unwrap();
        assert_eq!(m.0[&1].client, "127.0.0.1:7001");
        assert_eq!(m.0[&2].client, "127.0.0.2:9000");
        for bad in ["1=x", "0=127.0.0.1:7101", "1=a:7101,1=b:7101", "", "x=a:1"] {
            assert!(bad.parse::<InitialCluster>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn what_is_written_parses_back_to_the_same_members() {
        let c: InitialCluster =
            "2=[::1]:7102/[::1]:7002, 1=h:7101/h:9001, 10=10.0.0.1:1/10.0.0.1:2"
                .parse()
                .unwrap();
        let text = c.to_string();
        assert_eq!(
            text,
            "1=h:7101/h:9001,2=[::1]:7102/[::1]:7002,10=10.0.0.1:1/10.0.0.1:2"
        );
        assert_eq!(text.parse::<InitialCluster>().unwrap(), c);
    }

    #[test]
    fn cluster_id_depends_on_members_only() {
        let id = |s: &str| s.parse::<InitialCluster>().unwrap().cluster_id();
        assert_eq!(id("1=h:7101,2=h:7102"), id("2=h:7102, 1=h:7101"));
        assert_ne!(id("1=h:7101,2=h:7102"), id("1=h:7101,2=h:7103"));
    }
}
