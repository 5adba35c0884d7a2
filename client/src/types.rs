//! Plain data the client returns.

use raftlock_proto::v1 as pb;
use serde::Serialize;
use std::time::Duration;

/// How a lock is held.
///
/// ```
/// assert_ne!(raftlock_client::Mode::Exclusive, raftlock_client::Mode::Shared);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// The only holder.
    Exclusive,
    /// One of several holders (a read lock or a semaphore permit).
    Shared,
}

/// A held lock as the cluster records it.
///
/// ```no_run
/// # fn f(g: raftlock_client::Grant) { println!("{} held with token {}", g.name, g.token); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// Fencing token: from the granting log entry (its index × 65536 + the
    /// command's position in it), strictly increasing per lock.
    pub token: u64,
    /// Lock name.
    pub name: String,
    /// Mode.
    pub mode: Mode,
    /// Holding session.
    pub session_id: u64,
    /// When granted (leader's wall clock, Unix ms).
    pub granted_at_ms: u64,
    /// The holder's metadata (an election leader's value). Serialized as
    /// `{"utf8": "..."}` when it is UTF-8 text, else `{"base64": "..."}`.
    #[serde(serialize_with = "bytes_as_text")]
    pub metadata: Vec<u8>,
    /// Permits of a shared lock this hold takes (1 for an exclusive hold).
    pub count: u32,
    /// The hold cap in ms (0: none): the leader releases the hold this long
    /// after granting it, even though the session lives.
    pub max_hold_ms: u64,
    /// The lock-delay this hold set, in ms (0: none).
    pub lock_delay_ms: u64,
}

/// Bytes for people and scripts: text as text, anything else as base64,
/// with the key saying which.
pub(crate) fn bytes_as_text<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine;
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(1))?;
    match std::str::from_utf8(bytes) {
        Ok(text) => map.serialize_entry("utf8", text)?,
        Err(_) => map.serialize_entry(
            "base64",
            &base64::engine::general_purpose::STANDARD.encode(bytes),
        )?,
    }
    map.end()
}

/// A mode on the wire; anything but shared is exclusive, as the server
/// reads it.
pub(crate) fn mode_from_pb(mode: i32) -> Mode {
    if mode == pb::LockMode::Shared as i32 {
        Mode::Shared
    } else {
        Mode::Exclusive
    }
}

impl From<pb::Grant> for Grant {
    fn from(g: pb::Grant) -> Self {
        Grant {
            token: g.token,
            mode: mode_from_pb(g.mode),
            name: g.name,
            session_id: g.session_id,
            granted_at_ms: g.granted_at_ms,
            metadata: g.metadata,
            count: g.count.max(1),
            max_hold_ms: g.max_hold_ms,
            lock_delay_ms: g.lock_delay_ms,
        }
    }
}

pub(crate) fn grant_from(g: pb::Grant) -> Grant {
    Grant::from(g)
}

/// A queued acquisition.
///
/// ```no_run
/// # fn f(w: raftlock_client::WaiterInfo) { println!("session {} waits", w.session_id); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaiterInfo {
    /// Waiting session.
    pub session_id: u64,
    /// Requested mode.
    pub mode: Mode,
    /// When queued (Unix ms).
    pub enqueued_at_ms: u64,
    /// How long it may wait, in ms.
    pub timeout_ms: u64,
    /// Permits it asks for.
    pub count: u32,
}

/// Holders and waiters of one lock.
///
/// ```no_run
/// # fn f(l: raftlock_client::LockInfo) { println!("{}: {} holders, {} waiters", l.name, l.holders.len(), l.waiters.len()); }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LockInfo {
    /// Lock name.
    pub name: String,
    /// Shared capacity, 0 when not fixed.
    pub permits: u32,
    /// Holders in grant order.
    pub holders: Vec<Grant>,
    /// Waiters in FIFO order (from `describe`; `list` fills only the count).
    pub waiters: Vec<WaiterInfo>,
    /// Number of waiters.
    pub waiter_count: usize,
    /// The holders' and waiters' sessions, by id (`list` gives only the
    /// holders').
    pub sessions: Vec<SessionInfo>,
    /// Non-zero while the lock is in lock-delay: nobody is granted it until
    /// the delay (this many ms) ends.
    pub lock_delay_ms: u64,
    /// `permits` was set by a resize and holds whatever acquisitions state.
    pub resized: bool,
}

impl LockInfo {
    /// The session `id` among this lock's holders and waiters, if `describe`
    /// returned it.
    ///
    /// ```no_run
    /// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
    /// let info = client.describe("deploy/prod").await?;
    /// for h in &info.holders {
    ///     if let Some(s) = info.session(h.session_id) {
    ///         println!("held by {} on {} (pid {})", s.client_name, s.host, s.pid);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn session(&self, id: u64) -> Option<&SessionInfo> {
        self.sessions.iter().find(|s| s.session_id == id)
    }
}

/// A live session as an operator sees it: who, where, since when, and how
/// long it has left.
///
/// ```no_run
/// # fn f(s: raftlock_client::SessionInfo) {
/// println!("{} on {} pid {}: {} ms left", s.client_name, s.host, s.pid, s.expires_in_ms);
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// Session id.
    pub session_id: u64,
    /// The name the client gave itself.
    pub client_name: String,
    /// The authenticated identity that created it; empty without auth.
    pub identity: String,
    /// Host name the client reported; empty if it did not.
    pub host: String,
    /// Process id the client reported; 0 if it did not.
    pub pid: u32,
    /// Creation time (leader's wall clock, Unix ms).
    pub created_at_ms: u64,
    /// Time to live without keep-alives, in ms.
    pub ttl_ms: u64,
    /// Time left before the leader expires it without a keep-alive, when
    /// the answer was made.
    pub expires_in_ms: u64,
    /// Locks it holds.
    pub held: Vec<String>,
    /// Locks it waits for.
    pub waiting: Vec<String>,
}

impl From<pb::SessionInfo> for SessionInfo {
    fn from(s: pb::SessionInfo) -> Self {
        SessionInfo {
            session_id: s.session_id,
            client_name: s.client_name,
            identity: s.identity,
            host: s.host,
            pid: s.pid,
            created_at_ms: s.created_at_ms,
            ttl_ms: s.ttl_ms,
            expires_in_ms: s.expires_in_ms,
            held: s.held,
            waiting: s.waiting,
        }
    }
}

impl From<pb::DescribeResponse> for LockInfo {
    fn from(d: pb::DescribeResponse) -> Self {
        let waiters: Vec<WaiterInfo> = d
            .waiters
            .into_iter()
            .map(|w| WaiterInfo {
                session_id: w.session_id,
                mode: mode_from_pb(w.mode),
                enqueued_at_ms: w.enqueued_at_ms,
                timeout_ms: w.timeout_ms,
                count: w.count.max(1),
            })
            .collect();
        LockInfo {
            name: d.name,
            permits: d.permits,
            holders: d.holders.into_iter().map(Grant::from).collect(),
            waiter_count: waiters.len(),
            waiters,
            sessions: d.sessions.into_iter().map(SessionInfo::from).collect(),
            lock_delay_ms: d.lock_delay_ms,
            resized: d.resized,
        }
    }
}

impl From<pb::LockSummary> for LockInfo {
    fn from(l: pb::LockSummary) -> Self {
        LockInfo {
            name: l.name,
            permits: l.permits,
            holders: l.holders.into_iter().map(Grant::from).collect(),
            waiters: vec![],
            waiter_count: l.waiters as usize,
            sessions: l.sessions.into_iter().map(SessionInfo::from).collect(),
            lock_delay_ms: l.lock_delay_ms,
            resized: l.resized,
        }
    }
}

/// Whether a fencing token is current.
///
/// ```
/// let v = raftlock_client::Validation { valid: false, current_token: 12 };
/// assert!(!v.valid);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Validation {
    /// A current holder has the token.
    pub valid: bool,
    /// Highest token among current holders (0 if none).
    pub current_token: u64,
}

/// A member of the cluster.
///
/// ```no_run
/// # fn f(m: raftlock_client::Member) { println!("node {} at {}", m.id, m.client_addr); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    /// Node id.
    pub id: u64,
    /// Peer address.
    pub peer_addr: String,
    /// Client address.
    pub client_addr: String,
}

/// A node's view of the cluster.
///
/// ```no_run
/// # fn f(s: raftlock_client::Status) { println!("{} is {} in term {}", s.node_id, s.role, s.term); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Answering node.
    pub node_id: u64,
    /// Its role (`leader`, `follower`, ...).
    pub role: String,
    /// Raft term.
    pub term: u64,
    /// Known leader (0 = none).
    pub leader_id: u64,
    /// Leader's client address.
    pub leader_addr: String,
    /// Commit index.
    pub commit_index: u64,
    /// Applied index.
    pub applied_index: u64,
    /// Voters.
    pub members: Vec<Member>,
    /// Learners.
    pub learners: Vec<Member>,
    /// Live sessions.
    pub sessions: u64,
    /// Locks held or waited for.
    pub locks: u64,
    /// Queued waiters.
    pub waiters: u64,
    /// Flush + fdatasync rounds of the node's Raft log since it started.
    pub log_fsyncs: u64,
    /// Log entries those rounds made durable.
    pub log_entries_flushed: u64,
    /// Commands the node proposed as leader that committed, since it started.
    pub proposed_commands: u64,
    /// Log entries those commands were grouped into (group commit).
    pub proposed_entries: u64,
    /// CPU time (user + system) the node's process has used, in µs.
    pub process_cpu_micros: u64,
    /// What this node accepts (`None` from a node of an older release):
    /// the client fits its default waits to it.
    pub limits: Option<ServerLimits>,
}

/// A duration as whole milliseconds, as the API and the CLI's JSON say them.
pub(crate) fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// What the cluster accepts, as a node advertises it ([`Status::limits`]).
///
/// ```no_run
/// # async fn f(client: raftlock_client::Client) -> Result<(), raftlock_client::Error> {
/// if let Some(l) = client.status().await?.limits {
///     println!("waits up to {:?}, TTLs {:?}..={:?}", l.max_wait, l.min_ttl, l.max_ttl);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerLimits {
    /// The longest wait an acquire or campaign may ask for.
    #[serde(rename = "max_wait_ms", serialize_with = "as_ms")]
    pub max_wait: Duration,
    /// The shortest session TTL.
    #[serde(rename = "min_ttl_ms", serialize_with = "as_ms")]
    pub min_ttl: Duration,
    /// The longest session TTL.
    #[serde(rename = "max_ttl_ms", serialize_with = "as_ms")]
    pub max_ttl: Duration,
    /// The longest lock or election name, bytes.
    pub max_name_bytes: u32,
    /// The most holder metadata or election value, bytes.
    pub max_metadata_bytes: u32,
    /// The longest hold cap an acquisition may set.
    #[serde(rename = "max_hold_ms", serialize_with = "as_ms")]
    pub max_hold: Duration,
    /// The longest lock-delay an acquisition may set.
    #[serde(rename = "max_lock_delay_ms", serialize_with = "as_ms")]
    pub max_lock_delay: Duration,
    /// Hold caps the operator set per name prefix: (prefix, default ms,
    /// maximum ms; 0 for none).
    pub hold_caps: Vec<(String, u64, u64)>,
}

impl From<pb::StatusResponse> for Status {
    fn from(s: pb::StatusResponse) -> Self {
        let member = |m: pb::Member| Member {
            id: m.id,
            peer_addr: m.peer_addr,
            client_addr: m.client_addr,
        };
        let role = pb::Role::try_from(s.role)
            .map(|r| r.as_str_name().trim_start_matches("ROLE_").to_lowercase())
            .unwrap_or_else(|_| "unknown".into());
        Status {
            node_id: s.node_id,
            role,
            term: s.term,
            leader_id: s.leader_id,
            leader_addr: s.leader_addr,
            commit_index: s.commit_index,
            applied_index: s.applied_index,
            members: s.members.into_iter().map(member).collect(),
            learners: s.learners.into_iter().map(member).collect(),
            sessions: s.sessions,
            locks: s.locks,
            waiters: s.waiters,
            log_fsyncs: s.log_fsyncs,
            log_entries_flushed: s.log_entries_flushed,
            proposed_commands: s.proposed_commands,
            proposed_entries: s.proposed_entries,
            limits: s
                .limits
                .filter(|l| l.max_wait_ms > 0)
                .map(|l| ServerLimits {
                    max_wait: Duration::from_millis(l.max_wait_ms),
                    min_ttl: Duration::from_millis(l.min_ttl_ms),
                    max_ttl: Duration::from_millis(l.max_ttl_ms),
                    max_name_bytes: l.max_name_bytes,
                    max_metadata_bytes: l.max_metadata_bytes,
                    max_hold: Duration::from_millis(l.max_hold_ms),
                    max_lock_delay: Duration::from_millis(l.max_lock_delay_ms),
                    hold_caps: l
                        .hold_caps
                        .into_iter()
                        .map(|r| (r.prefix, r.default_ms, r.max_ms))
                        .collect(),
                }),
            process_cpu_micros: s.process_cpu_micros,
        }
    }
}
