//! Whether this node may vote and acknowledge with what it stores, and how
//! a node that may not earns it back from its peers.
//!
//! Raft is safe only while every voter keeps what it voted and
//! acknowledged. A member whose data dir was replaced, or whose log lost
//! its end, would grant any candidate its vote and accept any leader's
//! entries: with one stale member it completes a quorum on the stale log,
//! and the next grant reissues fencing tokens already given out. So such a
//! node keeps a [`Gate`] closed: it refuses every vote, and it refuses
//! entries from any leader of a term older than its peers have seen. It
//! learns that term, and how far the log may have been committed, by
//! asking the others ([`ProbeAnswer`]) until enough of them answer that
//! every quorum includes one ([`others_needed`]); it votes again once its
//! own log, written by a leader of that term or later, reaches the longest
//! log they reported. Every committed entry is on a quorum, so on one of
//! the members that answered, so in what it now holds.
//!
//! A data dir created empty with `--initial-cluster` cannot tell a new
//! cluster from a lost member: it is [`Standing::Forming`] and asks. A
//! quorum of members all forming (and none with data) is a new cluster; a
//! member that already formed lists who formed with it, by incarnation, so
//! a late member of that formation joins it; any other answer from a member
//! with data makes the node [`Standing::Rejoining`].

use raftlock_store::data_dir::Standing;
use raftlock_store::planted::{planted, Bug};
use raftlock_store::{NodeId, NodeInfo, Raft};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tracing::{info, warn};

use super::gate::Admits;
pub use super::gate::Gate;
pub use super::network::probe::ProbeAnswer;

/// How many members other than this one must answer so that every quorum
/// of `members` includes one of them: a quorum may hold a committed entry
/// on this node and `quorum - 1` others, so the answers must come from
/// more than the `members - quorum` others that can be outside it.
pub fn others_needed(members: usize) -> usize {
    let quorum = members / 2 + 1;
    members - quorum + 1
}

/// How long forming members wait for the rest before a quorum of them
/// forms the cluster alone.
const FORM_ALONE_AFTER: Duration = Duration::from_secs(1);

/// How a forming node ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Earned {
    /// It was a full member already, or caught up after losing its state.
    Member,
    /// It forms a new cluster with the others: bootstrap it.
    Formed,
}

/// What a round of probes decides.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    /// Not enough answers yet.
    Wait(String),
    /// A new cluster, formed with these (node, incarnation).
    Form(Vec<(u64, u64)>),
    /// Another member holds data this node is not known to have formed
    /// with: it lost its state.
    Rejoin,
    /// Entries from leaders of this term or later, and a log up to this
    /// index, make it whole.
    CatchUp { term: u64, index: u64 },
}

/// Decides from the answers of the other members (of `members` in all)
/// what a node of `standing` and incarnation `me` does next.
fn decide(
    id: NodeId,
    me: u64,
    standing: Standing,
    members: usize,
    answers: &[ProbeAnswer],
) -> Decision {
    let quorum = members / 2 + 1;
    if standing == Standing::Forming {
        let with_data: Vec<&ProbeAnswer> = answers
            .iter()
            .filter(|a| a.standing != Standing::Forming)
            .collect();
        if with_data.is_empty() {
            let forming = 1 + answers.len();
            if forming >= quorum {
                let mut formed: Vec<(u64, u64)> =
                    answers.iter().map(|a| (a.node, a.incarnation)).collect();
                formed.push((id, me));
                formed.sort_unstable();
                return Decision::Form(formed);
            }
            return Decision::Wait(format!(
                "forming a new cluster needs {quorum} of {members} members empty and reachable; {forming} are"
            ));
        }
        if let Some(a) = with_data.iter().find(|a| a.formed_with.contains(&(id, me))) {
            return Decision::Form(a.formed_with.clone());
        }
        return Decision::Rejoin;
    }
    let members_answering: Vec<&ProbeAnswer> = answers
        .iter()
        .filter(|a| a.standing == Standing::Member)
        .collect();
    let needed = others_needed(members);
    if members_answering.len() < needed {
        return Decision::Wait(format!(
            "catching up needs {needed} full members to answer; {} do",
            members_answering.len()
        ));
    }
    Decision::CatchUp {
        term: members_answering.iter().map(|a| a.term).max().unwrap_or(0),
        index: members_answering
            .iter()
            .filter_map(|a| a.last_log_index)
            .max()
            .unwrap_or(0),
    }
}

/// Probes the other `members` until this node is a full member again (or
/// forms a new cluster with them). A full member returns at once. Votes
/// stay off (`raft`'s elections too) until then.
pub async fn earn(
    gate: Gate,
    raft: Raft,
    members: BTreeMap<NodeId, NodeInfo>,
    network: super::network::PeerNetwork,
    flushed: tokio::sync::watch::Receiver<Option<raftlock_store::types::LogId>>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> Earned {
    if gate.is_member() {
        return Earned::Member;
    }
    let id = gate.node;
    if planted(Bug::LostStateVotes) && gate.identity().1 == Standing::Rejoining {
        // Planted: a node that knows it lost its state takes itself back.
        if gate.become_(Standing::Member, None).is_ok() {
            return Earned::Member;
        }
    }
    raft.runtime_config().elect(false);
    let began = Instant::now();
    let mut said = began - Duration::from_secs(60);
    let mut members = members;
    if members.is_empty() {
        // Started empty without `--initial-cluster`: it does not know its
        // peers until a leader sends it the membership. It takes entries
        // to learn it (no votes meanwhile). A node that first finds itself
        // a learner is one being added (`members add-learner`): its log
        // comes from the leader adding it, and it has acknowledged nothing
        // as a voter, so it is a member at once, before any promotion. One
        // that finds itself a voter is a voter whose disk was replaced: it
        // asks the voters as any rejoining node does.
        *gate.admits.write() = Admits::EntriesFrom(0);
        let mut metrics = raft.metrics();
        loop {
            let config = metrics.borrow_and_update().membership_config.clone();
            let membership = config.membership();
            if membership.learner_ids().any(|l| l == id) {
                match gate.become_(Standing::Member, None) {
                    Ok(()) => {
                        info!(node = id, "added as a learner: a member from now on");
                        raft.runtime_config().elect(true);
                        return Earned::Member;
                    }
                    Err(e) => warn!(node = id, error = %e, "cannot record its standing"),
                }
            }
            let voters: BTreeMap<NodeId, NodeInfo> = membership
                .voter_ids()
                .filter_map(|v| membership.get_node(&v).map(|n| (v, n.clone())))
                .collect();
            if voters.contains_key(&id) {
                members = voters;
                break;
            }
            if said.elapsed() >= Duration::from_secs(5) {
                info!(
                    node = id,
                    "empty and started without --initial-cluster: waiting to be added (raftlock members add-learner)"
                );
                said = Instant::now();
            }
            tokio::select! {
                _ = metrics.changed() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stopped.wait_for(|s| *s) => return Earned::Member,
            }
        }
    }
    let mut floor = (0u64, 0u64);
    loop {
        let (me, standing) = gate.identity();
        let probes = members
            .iter()
            .filter(|(n, _)| **n != id)
            .map(|(n, info)| network.probe(*n, &info.peer_addr));
        let answers: Vec<ProbeAnswer> = futures::future::join_all(probes)
            .await
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        let mut decision = decide(id, me, standing, members.len(), &answers);
        if let Decision::Form(formed) = &decision {
            // A member that misses a formation has to rejoin it (it cannot
            // tell itself from a lost one): a quorum forms without the rest
            // only once they have had a moment to start.
            let ours = formed.contains(&(id, me)) && formed.len() == 1 + answers.len();
            if ours && formed.len() < members.len() && began.elapsed() < FORM_ALONE_AFTER {
                decision = Decision::Wait(format!(
                    "{} of {} members are empty and reachable: waiting up to {FORM_ALONE_AFTER:?} for the rest before forming without them",
                    formed.len(),
                    members.len()
                ));
            }
        }
        let wait = match decision {
            Decision::Form(formed) => match gate.become_(Standing::Member, Some(formed.clone())) {
                Ok(()) => {
                    info!(node = id, with = ?formed, "every member forming a new cluster is empty: forming it");
                    raft.runtime_config().elect(true);
                    return Earned::Formed;
                }
                Err(e) => format!("cannot record its standing: {e}"),
            },
            Decision::Rejoin if planted(Bug::LostStateVotes) => {
                // Planted: a blank node among members with data takes
                // itself for one of them.
                match gate.become_(Standing::Member, None) {
                    Ok(()) => {
                        raft.runtime_config().elect(true);
                        return Earned::Member;
                    }
                    Err(e) => format!("cannot record its standing: {e}"),
                }
            }
            Decision::Rejoin => match gate.become_(Standing::Rejoining, None) {
                Ok(()) => {
                    warn!(node = id, "this node's data dir is empty but other members hold the cluster's log: it lost its state and rejoins; it votes again once it has caught up");
                    continue;
                }
                Err(e) => format!("cannot record its standing: {e}"),
            },
            Decision::Wait(why) => why,
            Decision::CatchUp { term, index } => {
                floor = (floor.0.max(term), floor.1.max(index));
                *gate.admits.write() = Admits::EntriesFrom(floor.0);
                let m = raft.metrics().borrow().clone();
                let held = flushed.borrow().map_or(0, |l| l.index);
                if m.current_term >= floor.0 && m.current_leader.is_some() && held >= floor.1 {
                    match gate.become_(Standing::Member, None) {
                        Ok(()) => {
                            info!(
                                node = id,
                                term = floor.0,
                                index = held,
                                "caught up with what the other members may have committed (term {}, index {}): this node votes again",
                                floor.0,
                                floor.1
                            );
                            raft.runtime_config().elect(true);
                            return Earned::Member;
                        }
                        Err(e) => format!("cannot record its standing: {e}"),
                    }
                } else {
                    format!(
                        "catching up: holds index {held} of term {}, needs index {} from a leader of term {} or later",
                        m.current_term, floor.1, floor.0
                    )
                }
            }
        };
        if said.elapsed() >= Duration::from_secs(5) {
            warn!(node = id, "does not vote yet: {wait}");
            said = Instant::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stopped.wait_for(|s| *s) => return Earned::Member,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(node: u64, standing: Standing, term: u64, last: Option<u64>) -> ProbeAnswer {
        ProbeAnswer {
            node,
            incarnation: node * 10,
            standing,
            term,
            last_log_index: last,
            formed_with: Vec::new(),
            space_low: None,
        }
    }

    #[test]
    fn every_quorum_includes_one_of_the_others_needed() {
        assert_eq!(others_needed(1), 1);
        assert_eq!(others_needed(3), 2);
        assert_eq!(others_needed(5), 3);
    }

    #[test]
    fn a_quorum_of_empty_members_forms_and_one_member_with_data_means_rejoin() {
        let forming = Standing::Forming;
        assert!(matches!(decide(1, 7, forming, 3, &[]), Decision::Wait(_)));
        assert_eq!(
            decide(1, 7, forming, 3, &[answer(2, forming, 0, None)]),
            Decision::Form(vec![(1, 7), (2, 20)])
        );
        assert_eq!(
            decide(
                3,
                7,
                forming,
                3,
                &[
                    answer(1, forming, 0, None),
                    answer(2, Standing::Member, 4, Some(9))
                ]
            ),
            Decision::Rejoin
        );
        // A late member of a formation joins it; a replaced one (another
        // incarnation) does not.
        let mut formed = answer(1, Standing::Member, 1, Some(1));
        formed.formed_with = vec![(1, 10), (2, 20), (3, 7)];
        assert_eq!(
            decide(3, 7, forming, 3, std::slice::from_ref(&formed)),
            Decision::Form(vec![(1, 10), (2, 20), (3, 7)])
        );
        assert_eq!(decide(3, 8, forming, 3, &[formed]), Decision::Rejoin);
    }

    #[test]
    fn a_rejoining_member_needs_members_that_every_quorum_includes() {
        let rejoining = Standing::Rejoining;
        // A stale member alone is not enough: the committed log may be on
        // the member that does not answer.
        assert!(matches!(
            decide(
                3,
                7,
                rejoining,
                3,
                &[answer(2, Standing::Member, 3, Some(12))]
            ),
            Decision::Wait(_)
        ));
        assert_eq!(
            decide(
                3,
                7,
                rejoining,
                3,
                &[
                    answer(2, Standing::Member, 3, Some(12)),
                    answer(1, Standing::Member, 5, Some(40))
                ]
            ),
            Decision::CatchUp { term: 5, index: 40 }
        );
        // Another rejoining member does not vouch for the log.
        assert!(matches!(
            decide(
                3,
                7,
                rejoining,
                3,
                &[
                    answer(2, Standing::Member, 3, Some(12)),
                    answer(1, rejoining, 5, None)
                ]
            ),
            Decision::Wait(_)
        ));
    }
}
