//! Cluster administration: per-node status, membership changes, leadership
//! transfer, backups, and freeing a stuck lock.

use crate::client::Client;
use crate::error::Error;
use crate::types::{Grant, Member, Status};
use raftlock_proto::v1 as pb;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::lock_client::LockClient;

/// Voters and learners after a membership change.
///
/// ```no_run
/// # fn f(m: raftlock_client::Membership) { println!("{} voters", m.members.len()); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Membership {
    /// Log index of the membership entry.
    pub log_index: u64,
    /// Voters.
    pub members: Vec<Member>,
    /// Learners.
    pub learners: Vec<Member>,
}

impl From<pb::MembershipResponse> for Membership {
    fn from(m: pb::MembershipResponse) -> Self {
        let member = |m: pb::Member| Member {
            id: m.id,
            peer_addr: m.peer_addr,
            client_addr: m.client_addr,
        };
        Membership {
            log_index: m.log_index,
            members: m.members.into_iter().map(member).collect(),
            learners: m.learners.into_iter().map(member).collect(),
        }
    }
}

/// A backup of the cluster's lease state, from [`Client::backup`].
///
/// ```no_run
/// # async fn f(client: raftlock_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let b = client.backup().await?;
/// std::fs::write("raftlock.backup", &b.bytes)?;
/// println!("backup at index {}", b.last_index);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Backup {
    /// The backup file's contents (`raftlockd restore --snapshot FILE`).
    pub bytes: Vec<u8>,
    /// The log index the backup is at: every token in it comes from this
    /// entry or an earlier one.
    pub last_index: u64,
}

impl Client {
    /// Takes a consistent backup on the leader: everything acknowledged
    /// before the call is in it.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let backup = client.backup().await?;
    /// # Ok(()) }
    /// ```
    pub async fn backup(&self) -> Result<Backup, Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                let mut stream = ClusterClient::new(ch)
                    .backup(pb::BackupRequest {})
                    .await?
                    .into_inner();
                let mut bytes = Vec::new();
                let mut last_index = 0;
                while let Some(chunk) = stream.message().await? {
                    bytes.extend_from_slice(&chunk.data);
                    last_index = chunk.last_index;
                }
                Ok(Backup { bytes, last_index })
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        Ok(resp)
    }

    /// The view of the one node at `addr` (`host:port`), without going to the
    /// leader: its role, term and indexes as it sees them. Lock counts are
    /// left at zero. For health checks and `raftlock status`.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let s = client.node_status("127.0.0.1:7001").await?;
    /// println!("node {} is {} at applied index {}", s.node_id, s.role, s.applied_index);
    /// # Ok(()) }
    /// ```
    pub async fn node_status(&self, addr: &str) -> Result<Status, Error> {
        let channel = self.inner.cluster.channel(addr)?;
        let mut req = tonic::Request::new(pb::StatusRequest {
            linearizable_counts: false,
        });
        req.set_timeout(self.options().attempt_timeout);
        let resp = ClusterClient::new(channel)
            .status(req)
            .await
            .map_err(|s| Error::Unavailable(format!("{addr}: {}", s.message())))?;
        Ok(Status::from(resp.into_inner()))
    }

    /// Adds node `id` as a learner: it starts replicating but does not vote.
    /// With `wait_caught_up`, returns once it has caught up with the leader.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// client.add_learner(4, "10.0.0.4:7100", "10.0.0.4:7000", true).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_learner(
        &self,
        id: u64,
        peer_addr: &str,
        client_addr: &str,
        wait_caught_up: bool,
    ) -> Result<Membership, Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| {
                let req = pb::AddLearnerRequest {
                    node_id: id,
                    peer_addr: peer_addr.to_owned(),
                    client_addr: client_addr.to_owned(),
                    wait_caught_up,
                };
                async move { ClusterClient::new(ch).add_learner(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        Ok(Membership::from(resp.into_inner()))
    }

    /// Sets the voters to exactly `voters` (each must already be a member or
    /// a learner), through joint consensus. Removed voters stay as learners
    /// if `retain_as_learners`.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// client.change_membership(&[1, 2, 3, 4], false).await?;
    /// # Ok(()) }
    /// ```
    pub async fn change_membership(
        &self,
        voters: &[u64],
        retain_as_learners: bool,
    ) -> Result<Membership, Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| {
                let req = pb::ChangeMembershipRequest {
                    voters: voters.to_vec(),
                    retain_as_learners,
                    remove_learners: vec![],
                };
                async move { ClusterClient::new(ch).change_membership(req).await }
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        Ok(Membership::from(resp.into_inner()))
    }

    /// Drops learner `id` from the cluster (a voter must first be demoted
    /// or removed with [`Client::change_membership`]).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// client.remove_learner(4).await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_learner(&self, id: u64) -> Result<Membership, Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                ClusterClient::new(ch)
                    .change_membership(pb::ChangeMembershipRequest {
                        voters: vec![],
                        retain_as_learners: false,
                        remove_learners: vec![id],
                    })
                    .await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        Ok(Membership::from(resp.into_inner()))
    }

    /// Hands leadership to voter `to` (0 = the most caught-up other voter)
    /// and returns the new leader's id. Writes pause for about one election
    /// timeout.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let leader = client.transfer_leader(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn transfer_leader(&self, to: u64) -> Result<u64, Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                ClusterClient::new(ch)
                    .transfer_leader(pb::TransferLeaderRequest { to_node_id: to })
                    .await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, None))?;
        Ok(resp.into_inner().leader_id)
    }

    /// Frees lock `name` whoever holds it (needs the `admin` right on the
    /// name). Returns the grants taken away and the waiters granted in their
    /// place; the new holders' tokens are larger than the old ones, so a
    /// fenced resource refuses the old holder's late writes.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let (taken, granted) = client.force_release("jobs/stuck").await?;
    /// println!("took {} grant(s), granted {}", taken.len(), granted.len());
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self, name: &str) -> Result<(Vec<Grant>, Vec<Grant>), Error> {
        self.force_release_call(name).await
    }

    /// Sets the size of semaphore `name` to `permits`, held or not: from
    /// then on it has that many permits whatever size acquisitions state,
    /// until resized again (0 forgets the size). Growing grants waiters at
    /// once (returned); shrinking takes nothing from holders, it grants
    /// nobody until they fit. A size below what a queued acquisition asks
    /// for is refused ([`Error::PermitsMismatch`]).
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let let_in = client.resize("crawler-slots", 16).await?;
    /// println!("{} waiter(s) let in", let_in.len());
    /// # Ok(()) }
    /// ```
    pub async fn resize(&self, name: &str, permits: u32) -> Result<Vec<Grant>, Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                LockClient::new(ch)
                    .resize(pb::ResizeRequest {
                        name: name.to_owned(),
                        permits,
                    })
                    .await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(name)))?
            .into_inner();
        Ok(resp.granted.into_iter().map(Grant::from).collect())
    }

    async fn force_release_call(&self, name: &str) -> Result<(Vec<Grant>, Vec<Grant>), Error> {
        let resp = self
            .inner
            .cluster
            .retry(self.options().deadline, |ch, _| async move {
                LockClient::new(ch)
                    .force_release(pb::ForceReleaseRequest {
                        name: name.to_owned(),
                    })
                    .await
            })
            .await
            .map_err(|s| Error::from_status(&s, None, Some(name)))?
            .into_inner();
        Ok((
            resp.released.into_iter().map(Grant::from).collect(),
            resp.granted.into_iter().map(Grant::from).collect(),
        ))
    }
}
