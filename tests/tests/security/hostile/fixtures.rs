//! Plumbing of the hostile-input tests: raw channels, the picture of the
//! cluster taken before the hostile traffic and checked after it, and how
//! each refusal is recorded.

pub(super) use raftlock_proto::v1::cluster_client::ClusterClient;
pub(super) use raftlock_proto::v1::election_client::ElectionClient;
pub(super) use raftlock_proto::v1::lock_client::LockClient;
pub(super) use raftlock_proto::v1::raft_client::RaftClient;
pub(super) use raftlock_proto::v1::session_client::SessionClient;
pub(super) use raftlock_proto::v1::{
    AcquireRequest, CampaignRequest, CloseSessionRequest, CreateSessionRequest, DescribeRequest,
    ForceReleaseRequest, KeepAliveRequest, KeepAliveResponse, ListRequest, ProclaimRequest,
    RaftPayload, ReleaseRequest, ResignRequest, StatusRequest, StatusResponse,
    TransferLeaderRequest, ValidateRequest,
};
pub(super) use raftlock_tests::{Access, Cluster};
pub(super) use std::collections::BTreeMap;
pub(super) use std::time::{Duration, Instant};
pub(super) use tokio::io::{AsyncReadExt, AsyncWriteExt};
pub(super) use tokio::net::TcpStream;
pub(super) use tonic::transport::{Channel, Endpoint};
pub(super) use tonic::{Code, Status};

/// Longest any single call may take before the test calls it a hang.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(15);
pub(super) const SENTINEL: &str = "hostile/sentinel";

// ---------------------------------------------------------------------------
// Plumbing
// ---------------------------------------------------------------------------

pub(super) async fn connect(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect_timeout(Duration::from_secs(2))
        .timeout(CALL_TIMEOUT)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

pub(super) fn short(msg: &str) -> String {
    let one_line = msg.replace(['\n', '|'], " ");
    match one_line.char_indices().nth(150) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// Prints the observed answer (a row of docs/security-badinput.md) and checks
/// its code and that its message names the problem.
#[track_caller]
pub(super) fn refused<T: std::fmt::Debug>(
    input: &str,
    place: &str,
    result: Result<T, Status>,
    code: Code,
    needle: &str,
) -> Status {
    let s = match result {
        Ok(v) => panic!("{input} ({place}): expected {code:?}, got OK {v:?}"),
        Err(s) => s,
    };
    println!(
        "OBSERVED | {input} | {place} | {:?}: {} |",
        s.code(),
        short(s.message())
    );
    assert_eq!(s.code(), code, "{input} ({place}): {:?}", s.message());
    assert!(
        s.message().contains(needle),
        "{input} ({place}): message {:?} does not say {needle:?}",
        s.message()
    );
    s
}

pub(super) fn observed_ok(input: &str, place: &str, what: &str) {
    println!("OBSERVED | {input} | {place} | OK: {what} |");
}

pub(super) fn rid() -> Vec<u8> {
    uuid::Uuid::now_v7().as_bytes().to_vec()
}

/// What the test holds before the hostile traffic and checks after every
/// group.
pub(super) struct Baseline {
    pub(super) leader: u64,
    pub(super) leader_addr: String,
    pub(super) term: u64,
    pub(super) session: u64,
    pub(super) token: u64,
}

pub(super) async fn status_of(access: &Access, addr: &str) -> Result<StatusResponse, Status> {
    ClusterClient::new(connect(addr).await)
        .status(access.request(StatusRequest::default()))
        .await
        .map(|r| r.into_inner())
}

/// Status of a node that may not be listening (yet, or any more).
pub(super) async fn try_status(access: &Access, addr: &str) -> Option<StatusResponse> {
    let ch = Endpoint::from_shared(format!("http://{addr}"))
        .ok()?
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .ok()?;
    ClusterClient::new(ch)
        .status(access.request(StatusRequest::default()))
        .await
        .ok()
        .map(|r| r.into_inner())
}

/// Waits until every node follows one leader in one term and has for longer
/// than an election timeout (start-up elections can take a second round);
/// returns (leader, term).
pub(super) async fn settled(cluster: &Cluster) -> (u64, u64) {
    let started = Instant::now();
    let mut agreed: Option<((u64, u64), Instant)> = None;
    loop {
        let mut views = Vec::new();
        for n in cluster.nodes() {
            views.push(
                try_status(&cluster.access, &n.client_addr)
                    .await
                    .map(|s| (s.leader_id, s.term)),
            );
        }
        let first = views[0];
        match first {
            Some(view) if view.0 != 0 && views.iter().all(|v| *v == first) => match agreed {
                Some((v, since)) if v == view => {
                    if since.elapsed() >= Duration::from_millis(1_200) {
                        return view;
                    }
                }
                _ => agreed = Some((view, Instant::now())),
            },
            _ => agreed = None,
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the nodes never settled on one leader: {views:?}\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) async fn baseline(cluster: &Cluster) -> Baseline {
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    // Precondition: a settled leader, so that a difference later is the
    // hostile traffic's doing.
    let started = Instant::now();
    let (leader, term) = settled(cluster).await;
    println!(
        "INFO every node followed leader {leader} in term {term} after {:?}",
        started.elapsed()
    );
    let leader_addr = cluster.nodes()[(leader - 1) as usize].client_addr.clone();
    let ch = connect(&leader_addr).await;
    let session = SessionClient::new(ch.clone())
        .create(cluster.access.request(CreateSessionRequest {
            ttl_ms: 600_000,
            client_name: "sentinel".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let grant = LockClient::new(ch)
        .acquire(cluster.access.request(AcquireRequest {
            session_id: session,
            name: SENTINEL.into(),
            request_id: rid(),
            metadata: b"before".to_vec(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .grant
        .expect("sentinel lock is free");
    let b = Baseline {
        leader,
        leader_addr,
        term,
        session,
        token: grant.token,
    };
    println!(
        "STATE before: leader {} term {}; {SENTINEL:?} held by session {} with token {}",
        b.leader, b.term, b.session, b.token
    );
    b
}

/// Every node answers Status on its client and its peer port, the leader and
/// term are the ones of the baseline, and the sentinel lock is still held by
/// the same session with the same token.
pub(super) async fn assert_intact(cluster: &Cluster, b: &Baseline, group: &str) {
    for n in cluster.nodes() {
        let s = status_of(&cluster.access, &n.client_addr)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "after {group}: node {} does not answer on its client port: {e}\n{}",
                    n.id,
                    cluster.logs()
                )
            });
        assert_eq!(s.node_id, n.id);
        assert_eq!(
            (s.leader_id, s.term),
            (b.leader, b.term),
            "after {group}: node {} sees another leader or term\n{}",
            n.id,
            cluster.logs()
        );
        // The peer port serves Cluster too (a leader hands over through it).
        let p = status_of(&Access::default(), &n.peer_addr)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "after {group}: node {} does not answer on its peer port: {e}",
                    n.id
                )
            });
        assert_eq!(p.node_id, n.id);
    }
    let ch = connect(&b.leader_addr).await;
    let d = LockClient::new(ch.clone())
        .describe(cluster.access.request(DescribeRequest {
            name: SENTINEL.into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(d.holders.len(), 1, "after {group}: {d:?}");
    assert_eq!(
        (d.holders[0].session_id, d.holders[0].token),
        (b.session, b.token),
        "after {group}: the sentinel lock changed hands"
    );
    let v = LockClient::new(ch)
        .validate(cluster.access.request(ValidateRequest {
            name: SENTINEL.into(),
            token: b.token,
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(v.valid, "after {group}: sentinel token no longer valid");
    for n in cluster.nodes() {
        let log = cluster.log_of(n.id);
        assert!(
            !log.contains("panicked"),
            "after {group}: node {} panicked:\n{log}",
            n.id
        );
    }
    println!(
        "STATE after {group}: nodes {:?} answer Status on both ports; leader {} term {} unchanged; sentinel token {} still held; no panic in the logs",
        cluster.nodes().iter().map(|n| n.id).collect::<Vec<_>>(),
        b.leader,
        b.term,
        b.token
    );
}

pub(super) async fn applied(access: &Access, addr: &str) -> u64 {
    status_of(access, addr).await.unwrap().applied_index
}

pub(super) async fn keep_alive_once(
    ch: Channel,
    session_id: u64,
) -> Result<KeepAliveResponse, Status> {
    let mut c = SessionClient::new(ch);
    let mut s = c
        .keep_alive(futures::stream::iter(vec![KeepAliveRequest {
            session_id,
            shared: false,
        }]))
        .await?
        .into_inner();
    match s.message().await? {
        Some(m) => Ok(m),
        None => Err(Status::unknown("the stream ended without an answer")),
    }
}

/// A channel that replaces the body of every request with fixed bytes: the
/// gRPC length prefix and message exactly as given, valid or not.
#[derive(Clone)]
pub(super) struct RawBody {
    pub(super) inner: Channel,
    pub(super) body: String,
}

pub(super) type HttpRequest = tonic::codegen::http::Request<tonic::body::Body>;

impl tonic::codegen::Service<HttpRequest> for RawBody {
    type Response = <Channel as tonic::codegen::Service<HttpRequest>>::Response;
    type Error = <Channel as tonic::codegen::Service<HttpRequest>>::Error;
    type Future = <Channel as tonic::codegen::Service<HttpRequest>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tonic::codegen::Service::<HttpRequest>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, mut req: HttpRequest) -> Self::Future {
        *req.body_mut() = tonic::body::Body::new(self.body.clone());
        self.inner.call(req)
    }
}

/// A gRPC length-prefixed message: flag, claimed length, then `message`.
/// Bodies travel as a `String`, so every byte below 0x80 stands for itself
/// and bytes above it come from UTF-8 sequences of the message text.
pub(super) fn grpc_message(flag: u8, claimed_len: u32, message: &str) -> String {
    let mut s = String::new();
    for b in std::iter::once(flag).chain(claimed_len.to_be_bytes()) {
        assert!(b < 0x80, "header byte {b:#x} cannot travel in a String");
        s.push(char::from(b));
    }
    s.push_str(message);
    s
}

pub(super) fn raw(ch: &Channel, body: String) -> RawBody {
    RawBody {
        inner: ch.clone(),
        body,
    }
}

/// Deterministic pseudo-random bytes (xorshift64).
pub(super) fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------
// HTTP/2 by hand
// ---------------------------------------------------------------------------
