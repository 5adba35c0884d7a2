//! Who a node is and which cluster it starts: node ids (given, or from a
//! StatefulSet hostname) and `--initial-cluster`, its members and the
//! cluster id derived from them.

use super::ConfigError;
use std::collections::BTreeMap;

pub use raftlock_proto::cluster::InitialMember;

/// The members of `--initial-cluster` as Raft knows nodes.
pub fn member_nodes(
    members: &BTreeMap<u64, InitialMember>,
) -> BTreeMap<u64, raftlock_store::NodeInfo> {
    members
        .iter()
        .map(|(id, m)| {
            (
                *id,
                raftlock_store::NodeInfo {
                    peer_addr: m.peer.clone(),
                    client_addr: m.client.clone(),
                },
            )
        })
        .collect()
}

pub(super) fn hostname() -> Result<String, ConfigError> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(ConfigError::Invalid {
            setting: "--id-from-hostname",
            reason: format!("gethostname failed: {}", std::io::Error::last_os_error()),
        });
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// `raftlock-2` -> 3: the StatefulSet ordinal plus one (ids start at 1).
pub fn id_from_hostname(host: &str) -> Result<u64, ConfigError> {
    let short = host.split('.').next().unwrap_or(host);
    short
        .rsplit('-')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .map(|n| n + 1)
        .ok_or_else(|| ConfigError::Invalid {
            setting: "--id-from-hostname",
            reason: format!("host name {host:?} does not end in -<number>"),
        })
}

/// Parses `1=host:port/host:port,2=host:port` (the format's one parser
/// is [`raftlock_proto::cluster::InitialCluster`]).
pub fn parse_initial_cluster(spec: &str) -> Result<BTreeMap<u64, InitialMember>, ConfigError> {
    spec.parse::<raftlock_proto::cluster::InitialCluster>()
        .map(|c| c.0)
        .map_err(|e| ConfigError::Invalid {
            setting: "--initial-cluster",
            reason: e.to_string(),
        })
}

/// A stable id for the cluster an `--initial-cluster` describes, so that
/// every member started with the same list derives the same id, and a data
/// dir from another cluster is recognised.
pub fn cluster_id(members: &BTreeMap<u64, InitialMember>) -> String {
    raftlock_proto::cluster::InitialCluster(members.clone()).cluster_id()
}
