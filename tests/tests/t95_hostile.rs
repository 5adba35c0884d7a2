//! Hostile input (issue #8): bad names, TTLs, sizes, sessions, tokens and
//! credentials, floods, and garbage or truncated HTTP/2 frames on the client
//! and the peer port. Every request gets a gRPC status whose message says
//! what was wrong; afterwards every node still answers on both ports, the
//! leader and term are unchanged, and a lock taken before the hostile
//! traffic is still held with the same token.
//!
//! `cargo test -p raftlock-tests --test t95_hostile -- --nocapture` prints one
//! `OBSERVED | input | where | answer |` line per case and one `STATE` line
//! per group: docs/security-badinput.md is the table made from them.

use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::election_client::ElectionClient;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::raft_client::RaftClient;
use raftlock_proto::v1::session_client::SessionClient;
use raftlock_proto::v1::{
    AcquireRequest, CampaignRequest, CloseSessionRequest, CreateSessionRequest, DescribeRequest,
    ForceReleaseRequest, KeepAliveRequest, KeepAliveResponse, ListRequest, ProclaimRequest,
    RaftPayload, ReleaseRequest, ResignRequest, StatusRequest, StatusResponse,
    TransferLeaderRequest, ValidateRequest,
};
use raftlock_tests::{Access, Cluster};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// Longest any single call may take before the test calls it a hang.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
const SENTINEL: &str = "hostile/sentinel";

// ---------------------------------------------------------------------------
// Plumbing
// ---------------------------------------------------------------------------

async fn connect(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect_timeout(Duration::from_secs(2))
        .timeout(CALL_TIMEOUT)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

fn short(msg: &str) -> String {
    let one_line = msg.replace(['\n', '|'], " ");
    match one_line.char_indices().nth(150) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// Prints the observed answer (a row of docs/security-badinput.md) and checks
/// its code and that its message names the problem.
#[track_caller]
fn refused<T: std::fmt::Debug>(
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

fn observed_ok(input: &str, place: &str, what: &str) {
    println!("OBSERVED | {input} | {place} | OK: {what} |");
}

fn rid() -> Vec<u8> {
    uuid::Uuid::now_v7().as_bytes().to_vec()
}

/// What the test holds before the hostile traffic and checks after every
/// group.
struct Baseline {
    leader: u64,
    leader_addr: String,
    term: u64,
    session: u64,
    token: u64,
}

async fn status_of(access: &Access, addr: &str) -> Result<StatusResponse, Status> {
    ClusterClient::new(connect(addr).await)
        .status(access.request(StatusRequest::default()))
        .await
        .map(|r| r.into_inner())
}

/// Status of a node that may not be listening (yet, or any more).
async fn try_status(access: &Access, addr: &str) -> Option<StatusResponse> {
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
async fn settled(cluster: &Cluster) -> (u64, u64) {
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

async fn baseline(cluster: &Cluster) -> Baseline {
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
async fn assert_intact(cluster: &Cluster, b: &Baseline, group: &str) {
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

async fn applied(access: &Access, addr: &str) -> u64 {
    status_of(access, addr).await.unwrap().applied_index
}

async fn keep_alive_once(ch: Channel, session_id: u64) -> Result<KeepAliveResponse, Status> {
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
struct RawBody {
    inner: Channel,
    body: String,
}

type HttpRequest = tonic::codegen::http::Request<tonic::body::Body>;

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
fn grpc_message(flag: u8, claimed_len: u32, message: &str) -> String {
    let mut s = String::new();
    for b in std::iter::once(flag).chain(claimed_len.to_be_bytes()) {
        assert!(b < 0x80, "header byte {b:#x} cannot travel in a String");
        s.push(char::from(b));
    }
    s.push_str(message);
    s
}

fn raw(ch: &Channel, body: String) -> RawBody {
    RawBody {
        inner: ch.clone(),
        body,
    }
}

/// Deterministic pseudo-random bytes (xorshift64).
fn garbage(seed: u64, len: usize) -> Vec<u8> {
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

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn hpack_str(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 127);
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// Preface, empty SETTINGS, then HEADERS opening stream 1 as a gRPC call of
/// `path` (HPACK without Huffman or indexing).
fn h2_grpc_call(path: &str, authority: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.push(0x04); // :path, literal value
    hpack_str(&mut block, path);
    block.push(0x01); // :authority, literal value
    hpack_str(&mut block, authority);
    for (k, v) in [("content-type", "application/grpc"), ("te", "trailers")] {
        block.push(0x00);
        hpack_str(&mut block, k);
        hpack_str(&mut block, v);
    }
    let mut out = PREFACE.to_vec();
    out.extend(h2_frame(0x4, 0, 0, &[]));
    out.extend(h2_frame(0x1, 0x4, 1, &block)); // END_HEADERS
    out
}

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn parse_frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        out.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    out
}

fn h2_error(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES
        .get(code as usize)
        .map(|s| (*s).to_owned())
        .unwrap_or_else(|| format!("error {code}"))
}

fn describe_frames(frames: &[Frame]) -> String {
    let names = [
        "DATA",
        "HEADERS",
        "PRIORITY",
        "RST_STREAM",
        "SETTINGS",
        "PUSH_PROMISE",
        "PING",
        "GOAWAY",
        "WINDOW_UPDATE",
        "CONTINUATION",
    ];
    frames
        .iter()
        .map(|f| {
            let name = names.get(f.kind as usize).copied().unwrap_or("UNKNOWN");
            match f.kind {
                7 if f.payload.len() >= 8 => {
                    let code = u32::from_be_bytes(f.payload[4..8].try_into().unwrap());
                    let debug = String::from_utf8_lossy(&f.payload[8..]);
                    if debug.is_empty() {
                        format!("GOAWAY({})", h2_error(code))
                    } else {
                        format!("GOAWAY({}, {debug:?})", h2_error(code))
                    }
                }
                3 if f.payload.len() >= 4 => format!(
                    "RST_STREAM(stream {}, {})",
                    f.stream,
                    h2_error(u32::from_be_bytes(f.payload[..4].try_into().unwrap()))
                ),
                1 if f.flags & 1 == 1 => format!("HEADERS(stream {}, END_STREAM)", f.stream),
                _ => format!("{name}(stream {})", f.stream),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a server did with bytes sent on a raw connection.
struct Exchange {
    frames: Vec<Frame>,
    /// The server closed (or reset) the connection.
    closed: bool,
    /// Bytes received that are not HTTP/2 frames (an HTTP/1 answer, say).
    raw: Vec<u8>,
}

impl Exchange {
    fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.frames.is_empty() {
            parts.push(format!("frames: {}", describe_frames(&self.frames)));
        } else if !self.raw.is_empty() {
            let text = String::from_utf8_lossy(&self.raw);
            parts.push(format!(
                "bytes: {:?}",
                text.lines().next().unwrap_or_default()
            ));
        } else {
            parts.push("no bytes".to_owned());
        }
        parts.push(if self.closed {
            "server closed the connection".to_owned()
        } else {
            "connection still open when the test closed it".to_owned()
        });
        parts.join("; ")
    }

    fn goaway(&self) -> bool {
        self.frames.iter().any(|f| f.kind == 7)
    }

    /// The server answered stream 1 (a trailers-only error or a reset).
    fn answered_stream_1(&self) -> bool {
        self.frames
            .iter()
            .any(|f| f.stream == 1 && (f.kind == 3 || (f.kind == 1 && f.flags & 1 == 1)))
    }
}

/// Sends `bytes`, optionally half-closes, and reads until the server closes,
/// `done` says enough, or `within` passes.
async fn exchange(
    addr: &str,
    bytes: &[u8],
    half_close: bool,
    within: Duration,
    done: impl Fn(&Exchange) -> bool,
) -> Exchange {
    let mut s = TcpStream::connect(addr).await.expect("tcp connect");
    s.set_nodelay(true).unwrap();
    let mut ex = Exchange {
        frames: Vec::new(),
        closed: false,
        raw: Vec::new(),
    };
    // The server may close before taking everything: that is an answer too.
    if s.write_all(bytes).await.is_err() {
        ex.closed = true;
        return ex;
    }
    if half_close {
        let _ = s.shutdown().await;
    }
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => break,
            Ok(Ok(0)) | Ok(Err(_)) => {
                ex.closed = true;
                break;
            }
            Ok(Ok(n)) => {
                ex.raw.extend_from_slice(&buf[..n]);
                ex.frames = parse_frames(&ex.raw);
                if done(&ex) {
                    break;
                }
            }
        }
    }
    // Bytes that are not HTTP/2 frames are kept for the summary.
    if !ex.frames.is_empty() {
        ex.raw.clear();
    }
    ex
}

// ---------------------------------------------------------------------------
// 1. Bad requests on the client port
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_with_a_reason_and_change_nothing() {
    let cluster = Cluster::start(3).await;
    let b = baseline(&cluster).await;
    let leader = b.leader_addr.clone();
    let follower = cluster
        .nodes()
        .iter()
        .find(|n| n.id != b.leader)
        .unwrap()
        .client_addr
        .clone();
    let acc = Access::default();
    let ch = connect(&leader).await;
    let mut locks = LockClient::new(ch.clone());
    let mut sessions = SessionClient::new(ch.clone());
    let mut election = ElectionClient::new(ch.clone());
    let other = sessions
        .create(CreateSessionRequest {
            ttl_ms: 60_000,
            client_name: "other".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let acquire = |name: String| AcquireRequest {
        session_id: other,
        name,
        request_id: rid(),
        ..Default::default()
    };
    let place = "client port, Lock.Acquire";

    // --- Names ---
    let before = applied(&acc, &leader).await;
    refused(
        "lock name empty",
        place,
        locks.acquire(acquire(String::new())).await,
        Code::InvalidArgument,
        "must not be empty",
    );
    refused(
        "lock name 513 bytes",
        place,
        locks.acquire(acquire("n".repeat(513))).await,
        Code::InvalidArgument,
        "513 bytes, longer than the limit of 512",
    );
    refused(
        "lock name 514 bytes of 2-byte UTF-8 (\"é\" x 257)",
        place,
        locks.acquire(acquire("é".repeat(257))).await,
        Code::InvalidArgument,
        "514 bytes",
    );
    refused(
        "lock name empty, sent to a follower",
        "client port (follower), Lock.Acquire",
        LockClient::new(connect(&follower).await)
            .acquire(acquire(String::new()))
            .await,
        Code::InvalidArgument,
        "must not be empty",
    );
    refused(
        "lock name 513 bytes",
        "client port, Lock.Describe",
        locks
            .describe(DescribeRequest {
                name: "n".repeat(513),
            })
            .await,
        Code::InvalidArgument,
        "longer than the limit",
    );
    refused(
        "lock name empty",
        "client port, Lock.Release",
        locks
            .release(ReleaseRequest {
                session_id: other,
                name: String::new(),
                token: 1,
            })
            .await,
        Code::InvalidArgument,
        "must not be empty",
    );
    refused(
        "election name empty",
        "client port, Election.Campaign",
        election
            .campaign(CampaignRequest {
                name: String::new(),
                session_id: other,
                request_id: rid(),
                value: vec![],
                wait_timeout_ms: Some(0),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "must not be empty",
    );
    let edge = applied(&acc, &leader).await - before;
    let before = applied(&acc, &leader).await;
    // Invalid UTF-8 in a proto3 string: refused by the decoder, before any
    // handler runs. The field's length cuts "é" (C3 A9) after its first byte.
    let bad_utf8 = "\u{8}\u{1}\u{12}\u{1}é"; // session_id=1, name=[C3], then A9
    refused(
        "lock name invalid UTF-8 (name field = byte C3)",
        place,
        LockClient::new(raw(&ch, grpc_message(0, 6, bad_utf8)))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "not UTF-8",
    );
    refused(
        "lock name invalid UTF-8 (name field = byte C3)",
        "client port, Lock.Release",
        LockClient::new(raw(&ch, grpc_message(0, 6, bad_utf8)))
            .release(ReleaseRequest::default())
            .await,
        Code::Internal,
        "not UTF-8",
    );
    refused(
        "client_name invalid UTF-8",
        "client port, Session.Create",
        SessionClient::new(raw(&ch, grpc_message(0, 4, "\u{12}\u{1}é")))
            .create(CreateSessionRequest::default())
            .await,
        Code::Internal,
        "not UTF-8",
    );
    refused(
        "lock name with a control character (\"a\\nb\")",
        place,
        locks.acquire(acquire("a\nb".into())).await,
        Code::InvalidArgument,
        "control characters",
    );
    let written = applied(&acc, &leader).await - before;
    println!("INFO invalid UTF-8 x3 and a control-character name wrote {written} log entries");
    assert_eq!(
        written, 0,
        "the decoder and the edge refuse these before the log"
    );
    // The longest name is fine.
    let g = locks
        .acquire(acquire("n".repeat(512)))
        .await
        .unwrap()
        .into_inner();
    assert!(g.acquired);
    locks
        .release(ReleaseRequest {
            session_id: other,
            name: "n".repeat(512),
            token: g.grant.unwrap().token,
        })
        .await
        .unwrap();
    observed_ok(
        "lock name 512 bytes (the limit)",
        place,
        "acquired, then released",
    );
    println!("INFO edge refusals of names wrote {edge} log entries");
    assert_eq!(edge, 0, "bad names are refused before the log");
    assert_intact(&cluster, &b, "names").await;

    // --- TTLs, waits, sizes, fields ---
    let create = |ttl_ms| CreateSessionRequest {
        ttl_ms,
        client_name: "ttl".into(),
        ..Default::default()
    };
    for ttl in [0, 999, 600_001, u64::MAX] {
        refused(
            &format!("session TTL {ttl} ms"),
            "client port, Session.Create",
            sessions.create(create(ttl)).await,
            Code::InvalidArgument,
            &format!("ttl_ms {ttl} is out of this cluster's range 1000..=600000 ms"),
        );
    }
    refused(
        "session TTL 0 ms, sent to a follower",
        "client port (follower), Session.Create",
        SessionClient::new(connect(&follower).await)
            .create(create(0))
            .await,
        Code::InvalidArgument,
        "out of this cluster's range",
    );
    refused(
        "client_name 257 bytes",
        "client port, Session.Create",
        sessions
            .create(CreateSessionRequest {
                ttl_ms: 5_000,
                client_name: "c".repeat(257),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "client name is 257 bytes, more than the limit of 256",
    );
    refused(
        "wait_timeout_ms u64::MAX",
        place,
        locks
            .acquire(AcquireRequest {
                wait_timeout_ms: Some(u64::MAX),
                ..acquire("hostile/w".into())
            })
            .await,
        Code::InvalidArgument,
        "more than the limit of 3600000 ms",
    );
    refused(
        "wait_timeout_ms 3600001",
        "client port, Election.Campaign",
        election
            .campaign(CampaignRequest {
                name: "hostile/e".into(),
                session_id: other,
                request_id: rid(),
                value: vec![],
                wait_timeout_ms: Some(3_600_001),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "more than the limit of 3600000 ms",
    );
    for len in [0, 3, 17] {
        refused(
            &format!("request_id of {len} bytes"),
            place,
            locks
                .acquire(AcquireRequest {
                    request_id: vec![7; len],
                    ..acquire("hostile/r".into())
                })
                .await,
            Code::InvalidArgument,
            &format!("request_id must be 16 bytes (a UUID), got {len}"),
        );
    }
    refused(
        "lock mode 7 (not in the enum)",
        place,
        locks
            .acquire(AcquireRequest {
                mode: 7,
                ..acquire("hostile/m".into())
            })
            .await,
        Code::InvalidArgument,
        "unknown lock mode 7",
    );
    let before = applied(&acc, &leader).await;
    refused(
        "metadata 4097 bytes",
        place,
        locks
            .acquire(AcquireRequest {
                metadata: vec![0; 4097],
                ..acquire("hostile/meta".into())
            })
            .await,
        Code::InvalidArgument,
        "metadata is 4097 bytes, more than the limit of 4096",
    );
    let written = applied(&acc, &leader).await - before;
    println!("INFO metadata 4097 bytes was refused at the edge: {written} log entries written");
    assert_eq!(written, 0, "oversized metadata is refused before the log");
    refused(
        "election value 4097 bytes",
        "client port, Election.Campaign",
        election
            .campaign(CampaignRequest {
                name: "hostile/e".into(),
                session_id: other,
                request_id: rid(),
                value: vec![0; 4097],
                wait_timeout_ms: Some(0),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "value is 4097 bytes, more than the limit of 4096",
    );
    refused(
        "request message 70000 bytes (metadata), over --max-request-bytes 65536",
        place,
        locks
            .acquire(AcquireRequest {
                metadata: vec![0; 70_000],
                ..acquire("hostile/big".into())
            })
            .await,
        Code::OutOfRange,
        "the limit is: 65536 bytes",
    );
    let mut big_header = tonic::Request::new(acquire("hostile/hdr".into()));
    big_header
        .metadata_mut()
        .insert("x-junk", "j".repeat(16 << 10).parse().unwrap());
    // Refused by HTTP/2 before gRPC sees it: an HTTP 431 answer, which
    // gRPC clients report as UNKNOWN.
    refused(
        "gRPC metadata (HTTP/2 headers) 16 KiB, over --max-metadata-bytes 8192",
        place,
        locks.acquire(big_header).await,
        Code::Unknown,
        "HTTP status code 431",
    );
    let v = locks
        .list(ListRequest {
            prefix: String::new(),
            page_token: "\u{10FFFF}".into(),
            limit: u32::MAX,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(v.locks.is_empty());
    observed_ok(
        "List limit u32::MAX, page_token U+10FFFF",
        "client port, Lock.List",
        "empty page (limit clamped to 1000)",
    );
    assert_intact(&cluster, &b, "TTLs, waits and sizes").await;

    // --- Sessions ---
    let before = applied(&acc, &leader).await;
    refused(
        "unknown session 999999",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: 999_999,
                ..acquire("hostile/s".into())
            })
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    println!(
        "INFO an acquire by an unknown session wrote {} log entries",
        applied(&acc, &leader).await - before
    );
    refused(
        "unknown session 999999, waiting acquire (wait 10 s)",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: 999_999,
                wait_timeout_ms: Some(10_000),
                ..acquire("hostile/s".into())
            })
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    refused(
        "unknown session 999999",
        "client port, Session.KeepAlive",
        keep_alive_once(ch.clone(), 999_999).await,
        Code::NotFound,
        "session 999999 not found",
    );
    refused(
        "unknown session 999999",
        "client port, Session.Close",
        sessions
            .close(CloseSessionRequest {
                session_id: 999_999,
            })
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    refused(
        "session 0",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: 0,
                ..acquire("hostile/s".into())
            })
            .await,
        Code::InvalidArgument,
        "session_id is required",
    );
    refused(
        "session 0",
        "client port, Session.Close",
        sessions.close(CloseSessionRequest { session_id: 0 }).await,
        Code::InvalidArgument,
        "session_id is required",
    );
    refused(
        "session 0",
        "client port, Session.KeepAlive",
        keep_alive_once(ch.clone(), 0).await,
        Code::InvalidArgument,
        "session_id is required",
    );
    refused(
        "session u64::MAX",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: u64::MAX,
                ..acquire("hostile/s".into())
            })
            .await,
        Code::NotFound,
        "not found",
    );
    assert_intact(&cluster, &b, "unknown sessions").await;

    // --- Tokens and other sessions' locks ---
    let release = |session_id, name: &str, token| ReleaseRequest {
        session_id,
        name: name.into(),
        token,
    };
    for wrong in [b.token + 1_000, 0, u64::MAX] {
        refused(
            &format!("release by the holder with wrong token {wrong}"),
            "client port, Lock.Release",
            locks.release(release(b.session, SENTINEL, wrong)).await,
            Code::FailedPrecondition,
            &format!("token {wrong} is stale"),
        );
    }
    refused(
        "release of a lock held by another session (right token)",
        "client port, Lock.Release",
        locks.release(release(other, SENTINEL, b.token)).await,
        Code::FailedPrecondition,
        &format!("session {other} does not hold lock"),
    );
    refused(
        "release by a session that holds nothing",
        "client port, Lock.Release",
        locks.release(release(other, "hostile/nothing", 1)).await,
        Code::FailedPrecondition,
        "does not hold lock",
    );
    refused(
        "acquire of a lock held by another session, second request id of the holder",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: b.session,
                name: SENTINEL.into(),
                request_id: rid(),
                ..Default::default()
            })
            .await,
        Code::AlreadyExists,
        "already holds lock",
    );
    let busy = locks
        .acquire(acquire(SENTINEL.into()))
        .await
        .unwrap()
        .into_inner();
    assert!(!busy.acquired && busy.holders[0].token == b.token);
    observed_ok(
        "try-acquire of a lock another session holds",
        place,
        "acquired=false, holders=[the holder's grant]",
    );
    refused(
        "proclaim on another session's lock",
        "client port, Election.Proclaim",
        election
            .proclaim(ProclaimRequest {
                name: SENTINEL.into(),
                session_id: other,
                token: b.token,
                value: b"mine".to_vec(),
            })
            .await,
        Code::FailedPrecondition,
        "does not hold lock",
    );
    refused(
        "proclaim by the holder with a wrong token",
        "client port, Election.Proclaim",
        election
            .proclaim(ProclaimRequest {
                name: SENTINEL.into(),
                session_id: b.session,
                token: b.token + 1,
                value: b"mine".to_vec(),
            })
            .await,
        Code::FailedPrecondition,
        "is stale",
    );
    refused(
        "resign of another session's leadership",
        "client port, Election.Resign",
        election
            .resign(ResignRequest {
                name: SENTINEL.into(),
                session_id: other,
                token: b.token,
            })
            .await,
        Code::FailedPrecondition,
        "does not hold lock",
    );
    let v = locks
        .validate(ValidateRequest {
            name: SENTINEL.into(),
            token: u64::MAX,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!v.valid && v.current_token == b.token);
    observed_ok(
        "validate token u64::MAX",
        "client port, Lock.Validate",
        "valid=false, current_token=the holder's",
    );
    let d = locks
        .describe(DescribeRequest {
            name: SENTINEL.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        d.holders[0].metadata, b"before",
        "proclaims changed nothing"
    );
    assert_intact(&cluster, &b, "wrong tokens and other sessions' locks").await;

    // --- An expired session ---
    let expiring = sessions
        .create(CreateSessionRequest {
            ttl_ms: 1_000,
            client_name: "expiring".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let held = locks
        .acquire(AcquireRequest {
            session_id: expiring,
            name: "hostile/expiring".into(),
            request_id: rid(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .grant
        .unwrap();
    let started = Instant::now();
    // Never kept alive: release of a name it does not hold says "does not
    // hold" while it lives and "not found" once the leader expired it.
    let gone = loop {
        let r = locks
            .release(release(expiring, "hostile/not-held", 1))
            .await;
        match r {
            Err(s) if s.code() == Code::NotFound => break started.elapsed(),
            Err(s) if s.code() == Code::FailedPrecondition => {}
            other => panic!("expiring session: unexpected {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "a 1 s session never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("INFO the 1000 ms session expired after {gone:?}");
    refused(
        "expired session (TTL 1000 ms, no keep-alive)",
        place,
        locks
            .acquire(AcquireRequest {
                session_id: expiring,
                ..acquire("hostile/after-expiry".into())
            })
            .await,
        Code::NotFound,
        &format!("session {expiring} not found"),
    );
    refused(
        "expired session, release of the lock it held",
        "client port, Lock.Release",
        locks
            .release(release(expiring, "hostile/expiring", held.token))
            .await,
        Code::NotFound,
        &format!("session {expiring} not found"),
    );
    refused(
        "expired session",
        "client port, Session.KeepAlive",
        keep_alive_once(ch.clone(), expiring).await,
        Code::NotFound,
        &format!("session {expiring} not found"),
    );
    let d = locks
        .describe(DescribeRequest {
            name: "hostile/expiring".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(d.holders.is_empty(), "expiry released the lock: {d:?}");
    assert_intact(&cluster, &b, "expired session").await;
}

// ---------------------------------------------------------------------------
// 2. Credentials and other identities' sessions
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn wrong_credentials_and_foreign_sessions_are_refused() {
    // sha256 of "root-token", "other-token", "teamc-token".
    let auth = r#"
        [roles.root]
        rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]
        [roles.team-c]
        rules = [{ prefix = "team-c/", allow = ["read", "lock"] }]
        [[identities]]
        name = "root"
        token_sha256 = "2cff60a244379d429c1877c36ee7f37da39ad06073d31b8d90fccd15376f2adf"
        roles = ["root"]
        [[identities]]
        name = "other"
        token_sha256 = "6c67163bbed989f232b31acc4f04df54b31285bfc01bd022c735b71e041a4754"
        roles = ["root"]
        [[identities]]
        name = "team-c"
        token_sha256 = "1a39d7a80c2add76c80af3ba4fa6a1c091bd12d4d97e9baccbe5619c55b3d69f"
        roles = ["team-c"]
    "#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auth.toml");
    std::fs::write(&path, auth).unwrap();
    let root = Access {
        ca_pem: None,
        token: Some("root-token".into()),
    };
    let cluster = Cluster::start_secure(3, &["--auth-file", path.to_str().unwrap()], root).await;
    let b = baseline(&cluster).await;
    let ch = connect(&b.leader_addr).await;
    let other = Access {
        ca_pem: None,
        token: Some("other-token".into()),
    };
    let team_c = Access {
        ca_pem: None,
        token: Some("teamc-token".into()),
    };
    let mut locks = LockClient::new(ch.clone());
    let mut sessions = SessionClient::new(ch.clone());
    let with_header = |value: &[u8]| {
        let mut r = tonic::Request::new(StatusRequest::default());
        r.metadata_mut().insert(
            "authorization",
            tonic::metadata::MetadataValue::try_from(value).unwrap(),
        );
        r
    };
    let mut cl = ClusterClient::new(ch.clone());
    refused(
        "no authorization header",
        "client port, Cluster.Status",
        cl.status(StatusRequest::default()).await,
        Code::Unauthenticated,
        "authentication is required",
    );
    refused(
        "unknown bearer token",
        "client port, Cluster.Status",
        cl.status(with_header(b"Bearer wrong-token")).await,
        Code::Unauthenticated,
        "unknown bearer token",
    );
    refused(
        "authorization \"Basic cm9vdDpyb290\"",
        "client port, Cluster.Status",
        cl.status(with_header(b"Basic cm9vdDpyb290")).await,
        Code::Unauthenticated,
        "must be \"Bearer <token>\"",
    );
    refused(
        "authorization \"Bearer \" + byte FF",
        "client port, Cluster.Status",
        cl.status(with_header(b"Bearer \xff")).await,
        Code::Unauthenticated,
        "must be \"Bearer <token>\"",
    );
    refused(
        "unknown bearer token",
        "client port, Session.Create",
        sessions
            .create(
                Access {
                    ca_pem: None,
                    token: Some("nope".into()),
                }
                .request(CreateSessionRequest {
                    ttl_ms: 5_000,
                    client_name: String::new(),
                    ..Default::default()
                }),
            )
            .await,
        Code::Unauthenticated,
        "unknown bearer token",
    );
    // The peer port takes no tokens: peers are trusted as a whole and the
    // port must be protected by mutual TLS or the network (DESIGN, README).
    let p = status_of(&Access::default(), &cluster.nodes()[0].peer_addr).await;
    assert!(p.is_ok());
    observed_ok(
        "no authorization header",
        "peer port, Cluster.Status",
        "answered (the peer port is trusted by design: protect it with mTLS)",
    );
    assert_intact(&cluster, &b, "wrong credentials").await;

    // A session of "root" used by "other".
    let place = "client port, Lock.Acquire";
    refused(
        "another identity's session",
        place,
        locks
            .acquire(other.request(AcquireRequest {
                session_id: b.session,
                name: "hostile/foreign".into(),
                request_id: rid(),
                ..Default::default()
            }))
            .await,
        Code::PermissionDenied,
        &format!("session {} belongs to another identity", b.session),
    );
    refused(
        "another identity's session and lock (right token)",
        "client port, Lock.Release",
        locks
            .release(other.request(ReleaseRequest {
                session_id: b.session,
                name: SENTINEL.into(),
                token: b.token,
            }))
            .await,
        Code::PermissionDenied,
        "belongs to another identity",
    );
    refused(
        "another identity's session",
        "client port, Session.KeepAlive",
        {
            let mut c = SessionClient::new(ch.clone());
            async {
                let mut s = c
                    .keep_alive(other.request(futures::stream::iter(vec![KeepAliveRequest {
                        session_id: b.session,
                        shared: false,
                    }])))
                    .await?
                    .into_inner();
                s.message().await
            }
            .await
        },
        Code::PermissionDenied,
        "belongs to another identity",
    );
    refused(
        "another identity's session",
        "client port, Session.Close",
        sessions
            .close(other.request(CloseSessionRequest {
                session_id: b.session,
            }))
            .await,
        Code::PermissionDenied,
        "belongs to another identity",
    );
    refused(
        "another identity's leadership",
        "client port, Election.Proclaim",
        ElectionClient::new(ch.clone())
            .proclaim(other.request(ProclaimRequest {
                name: SENTINEL.into(),
                session_id: b.session,
                token: b.token,
                value: b"mine".to_vec(),
            }))
            .await,
        Code::PermissionDenied,
        "belongs to another identity",
    );
    refused(
        "unknown session 999999 (authenticated caller)",
        place,
        locks
            .acquire(other.request(AcquireRequest {
                session_id: 999_999,
                name: "hostile/foreign".into(),
                request_id: rid(),
                ..Default::default()
            }))
            .await,
        Code::NotFound,
        "session 999999 not found",
    );
    // An identity limited to "team-c/".
    let c_session = sessions
        .create(team_c.request(CreateSessionRequest {
            ttl_ms: 60_000,
            client_name: "team-c".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .session_id;
    refused(
        "lock outside the identity's prefix",
        place,
        locks
            .acquire(team_c.request(AcquireRequest {
                session_id: c_session,
                name: "billing/x".into(),
                request_id: rid(),
                ..Default::default()
            }))
            .await,
        Code::PermissionDenied,
        "has no lock right on lock \"billing/x\"",
    );
    refused(
        "force-release without the admin right",
        "client port, Lock.ForceRelease",
        locks
            .force_release(team_c.request(ForceReleaseRequest {
                name: "team-c/x".into(),
            }))
            .await,
        Code::PermissionDenied,
        "has no admin right",
    );
    refused(
        "describe outside the identity's prefix",
        "client port, Lock.Describe",
        locks
            .describe(team_c.request(DescribeRequest {
                name: SENTINEL.into(),
            }))
            .await,
        Code::PermissionDenied,
        "has no read right",
    );
    refused(
        "transfer leadership without cluster admin",
        "client port, Cluster.TransferLeader",
        ClusterClient::new(ch.clone())
            .transfer_leader(team_c.request(TransferLeaderRequest { to_node_id: 0 }))
            .await,
        Code::PermissionDenied,
        "may not",
    );
    assert_intact(&cluster, &b, "foreign sessions and rights").await;
}

// ---------------------------------------------------------------------------
// 3. Floods
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_gets_proper_answers_and_the_cluster_keeps_serving() {
    let cluster = Cluster::start(3).await;
    let mut b = baseline(&cluster).await;
    let leader = b.leader_addr.clone();
    const CONNECTIONS: usize = 20;
    const ACQUIRES: usize = 2_000;
    const CREATES: usize = 200;
    let mut channels = Vec::new();
    for _ in 0..CONNECTIONS {
        channels.push(connect(&leader).await);
    }
    let mut flood_sessions = Vec::new();
    for ch in &channels {
        let s = SessionClient::new(ch.clone())
            .create(CreateSessionRequest {
                ttl_ms: 60_000,
                client_name: "flood".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .session_id;
        flood_sessions.push(s);
    }
    let started = Instant::now();
    let mut acquires = Vec::new();
    for i in 0..ACQUIRES {
        let ch = channels[i % CONNECTIONS].clone();
        let session = flood_sessions[i % CONNECTIONS];
        acquires.push(tokio::spawn(async move {
            let r = LockClient::new(ch)
                .acquire(AcquireRequest {
                    session_id: session,
                    name: "flood/one".into(),
                    request_id: rid(),
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner());
            (session, r)
        }));
    }
    let mut creates = Vec::new();
    for i in 0..CREATES {
        let ch = channels[i % CONNECTIONS].clone();
        creates.push(tokio::spawn(async move {
            SessionClient::new(ch)
                .create(CreateSessionRequest {
                    ttl_ms: 60_000,
                    client_name: format!("flood-{i}"),
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().session_id)
        }));
    }
    // Bad requests in the same burst are refused at the edge.
    let mut bad = Vec::new();
    for i in 0..500 {
        let ch = channels[i % CONNECTIONS].clone();
        let session = flood_sessions[i % CONNECTIONS];
        bad.push(tokio::spawn(async move {
            LockClient::new(ch)
                .acquire(AcquireRequest {
                    session_id: session,
                    name: String::new(),
                    request_id: rid(),
                    ..Default::default()
                })
                .await
        }));
    }
    // Counts answers by code; UNAVAILABLE ones also by message.
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let mut count = |s: &Status| {
        let key = match s.code() {
            Code::Unavailable => format!("Unavailable ({})", unavailable_reason(s.message())),
            c => format!("{c:?}"),
        };
        *codes.entry(key).or_default() += 1;
    };
    let mut winner = None;
    let mut busy_holders = Vec::new();
    let mut already = Vec::new();
    let mut ok = (0, 0);
    for h in acquires {
        let (session, r) = h.await.unwrap();
        match r {
            Ok(a) if a.acquired => {
                assert!(
                    winner.is_none(),
                    "two exclusive grants: {winner:?} and {a:?}"
                );
                winner = Some((session, a.grant.unwrap().token));
                ok.0 += 1;
            }
            Ok(a) => {
                busy_holders.push(a.holders.iter().map(|h| h.token).collect::<Vec<_>>());
                ok.1 += 1;
            }
            Err(s) => {
                match s.code() {
                    Code::ResourceExhausted | Code::Unavailable => {}
                    Code::AlreadyExists => {
                        assert!(s.message().contains("already holds lock"), "{s:?}");
                        already.push(session);
                    }
                    _ => panic!("flood: improper answer {s:?}"),
                }
                count(&s);
            }
        }
    }
    let mut created = Vec::new();
    let mut create_codes: BTreeMap<String, usize> = BTreeMap::new();
    for h in creates {
        match h.await.unwrap() {
            Ok(id) => {
                created.push(id);
                *create_codes.entry("OK".into()).or_default() += 1;
            }
            Err(s) => {
                assert!(
                    matches!(s.code(), Code::ResourceExhausted | Code::Unavailable),
                    "flood: improper answer to a create {s:?}"
                );
                let key = format!("{:?} ({})", s.code(), unavailable_reason(s.message()));
                *create_codes.entry(key).or_default() += 1;
            }
        }
    }
    let ok_creates = created.len();
    created.sort_unstable();
    created.dedup();
    assert_eq!(created.len(), ok_creates, "session ids are unique");
    for h in bad {
        let s = h.await.unwrap().expect_err("empty name refused");
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    }
    let took = started.elapsed();
    println!(
        "OBSERVED | flood: {ACQUIRES} concurrent try-acquires of one lock from {CONNECTIONS} connections (one session each) | client port, Lock.Acquire | OK acquired {}, OK busy {}, errors {codes:?} |",
        ok.0, ok.1
    );
    println!(
        "OBSERVED | flood: {CREATES} concurrent session creates in the same burst | client port, Session.Create | {create_codes:?} |"
    );
    println!(
        "OBSERVED | flood: 500 empty-name acquires in the same burst | client port, Lock.Acquire | all InvalidArgument |"
    );
    println!("INFO the burst was answered in {took:?}");

    // A burst may cost the leader its leadership on a starved host; the
    // cluster must then settle on a leader again and have lost nothing.
    let (leader_now, term_now) = settled(&cluster).await;
    if (leader_now, term_now) != (b.leader, b.term) {
        println!(
            "OBSERVED | leadership during the flood | all nodes | leader {} term {} -> leader {leader_now} term {term_now} |",
            b.leader, b.term
        );
        println!(
            "INFO node logs after the leader change:\n{}",
            cluster.logs()
        );
        b.leader = leader_now;
        b.term = term_now;
        b.leader_addr = cluster.nodes()[(leader_now - 1) as usize]
            .client_addr
            .clone();
    }
    let leader = b.leader_addr.clone();

    // One holder at most, and it is the grant a client was told about (an
    // UNAVAILABLE answer may hide a grant that committed).
    let ch = connect(&leader).await;
    let mut locks = LockClient::new(ch.clone());
    let d = locks
        .describe(DescribeRequest {
            name: "flood/one".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(d.holders.len() <= 1, "{d:?}");
    assert!(d.waiters.is_empty(), "try-acquires leave no waiter: {d:?}");
    let holder = d.holders.first().map(|h| (h.session_id, h.token));
    if let Some(w) = winner {
        assert_eq!(holder, Some(w), "the holder is the one told it won");
    }
    if let Some((_, token)) = holder {
        assert!(
            busy_holders.iter().all(|h| h == &[token]),
            "every busy answer names the one holder"
        );
        assert!(
            already.iter().all(|s| Some(*s) == holder.map(|h| h.0)),
            "only the holder's own later requests say ALREADY_EXISTS"
        );
        locks
            .release(ReleaseRequest {
                session_id: holder.unwrap().0,
                name: "flood/one".into(),
                token,
            })
            .await
            .unwrap();
    } else {
        assert!(busy_holders.is_empty() && already.is_empty());
    }

    // More concurrent requests on one connection than a connection may have
    // in progress (2000; HTTP/2 admits 64 more): the excess is refused with
    // RESOURCE_EXHAUSTED if the leader falls behind, and nothing else goes wrong.
    let one = connect(&leader).await;
    let session = flood_sessions[0];
    let mut burst = Vec::new();
    for i in 0..2_100 {
        let ch = one.clone();
        burst.push(tokio::spawn(async move {
            LockClient::new(ch)
                .acquire(AcquireRequest {
                    session_id: session,
                    name: format!("flood/many/{}", i % 50),
                    request_id: rid(),
                    ..Default::default()
                })
                .await
        }));
    }
    let mut one_codes: BTreeMap<String, usize> = BTreeMap::new();
    for h in burst {
        match h.await.unwrap() {
            Ok(_) => *one_codes.entry("OK".into()).or_default() += 1,
            Err(s) => {
                let key = match s.code() {
                    Code::ResourceExhausted => {
                        assert!(
                            s.message()
                                .contains("too many concurrent requests on this connection"),
                            "{s:?}"
                        );
                        "ResourceExhausted".to_owned()
                    }
                    // The session's own later requests for a lock it took.
                    Code::AlreadyExists => {
                        assert!(s.message().contains("already holds lock"), "{s:?}");
                        "AlreadyExists".to_owned()
                    }
                    Code::Unavailable => {
                        format!("Unavailable ({})", unavailable_reason(s.message()))
                    }
                    _ => panic!("burst on one connection: improper answer {s:?}"),
                };
                *one_codes.entry(key).or_default() += 1;
            }
        }
    }
    println!(
        "OBSERVED | flood: 2100 concurrent acquires on ONE connection (limit 2000 in progress) | client port, Lock.Acquire | {one_codes:?} |"
    );
    // Whether 2 000 are ever in progress at once depends on how fast the
    // leader commits (group commit often keeps up); t90 hits this limit
    // deterministically with waiting acquires. Here every answer must be
    // proper, and each of the 50 names granted exactly once.
    let ok = one_codes.get("OK").copied().unwrap_or(0);
    assert!(ok <= 50, "a name was granted twice: {one_codes:?}");
    if one_codes.keys().all(|k| k == "OK" || k == "AlreadyExists") {
        assert_eq!(ok, 50, "a name was never granted: {one_codes:?}");
    }

    // The cluster still serves an ordinary client, and Status on every node.
    let (leader_now, term_now) = settled(&cluster).await;
    if (leader_now, term_now) != (b.leader, b.term) {
        println!(
            "OBSERVED | leadership during the one-connection burst | all nodes | leader {} term {} -> leader {leader_now} term {term_now} |",
            b.leader, b.term
        );
        b.leader = leader_now;
        b.term = term_now;
        b.leader_addr = cluster.nodes()[(leader_now - 1) as usize]
            .client_addr
            .clone();
    }
    let ch = connect(&b.leader_addr).await;
    let mut locks = LockClient::new(ch.clone());
    let s = SessionClient::new(ch.clone())
        .create(CreateSessionRequest {
            ttl_ms: 10_000,
            client_name: "after".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let g = locks
        .acquire(AcquireRequest {
            session_id: s,
            name: "flood/after".into(),
            request_id: rid(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .grant
        .expect("free");
    locks
        .release(ReleaseRequest {
            session_id: s,
            name: "flood/after".into(),
            token: g.token,
        })
        .await
        .unwrap();
    let counted = ClusterClient::new(ch)
        .status(StatusRequest {
            linearizable_counts: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        counted.sessions as usize >= 2 + CONNECTIONS + created.len(),
        "{counted:?}"
    );
    assert_intact(&cluster, &b, "floods").await;
}

/// The gist of an UNAVAILABLE message, for counting.
fn unavailable_reason(msg: &str) -> &'static str {
    if msg.contains("is not the leader") {
        "not the leader"
    } else if msg.contains("not committed within") {
        "proposal timed out"
    } else if msg.contains("handed over") {
        "leadership being handed over"
    } else {
        "other"
    }
}

// ---------------------------------------------------------------------------
// 4. Garbage and truncated frames on both ports
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn garbage_and_truncated_frames_on_both_ports_leave_every_node_up() {
    let cluster = Cluster::start(3).await;
    let b = baseline(&cluster).await;
    let addrs = |n: &raftlock_tests::Node| (n.client_addr.clone(), n.peer_addr.clone());
    let leader = addrs(&cluster.nodes()[(b.leader - 1) as usize]);
    let follower = addrs(cluster.nodes().iter().find(|n| n.id != b.leader).unwrap());
    let grpc_path = |peer: bool| {
        if peer {
            "/raftlock.v1.Raft/AppendEntries"
        } else {
            "/raftlock.v1.Lock/Acquire"
        }
    };
    let within = Duration::from_secs(5);
    // Leader and a follower, client port and peer port.
    for (role, (client, peer)) in [("leader", &leader), ("follower", &follower)] {
        for (port, addr, is_peer) in [("client", client, false), ("peer", peer, true)] {
            let place = format!("{port} port ({role}), raw TCP");

            let ex = exchange(addr, &garbage(1, 4096), false, within, |_| false).await;
            println!(
                "OBSERVED | 4 KiB of random bytes | {place} | {} |",
                ex.summary()
            );
            assert!(ex.closed, "{place}: garbage left the connection open");

            let ex = exchange(
                addr,
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                false,
                within,
                |_| false,
            )
            .await;
            println!("OBSERVED | HTTP/1.1 GET / | {place} | {} |", ex.summary());
            assert!(ex.closed, "{place}: HTTP/1 left the connection open");

            let mut bytes = PREFACE.to_vec();
            bytes.extend(garbage(2, 1024));
            let ex = exchange(addr, &bytes, false, within, |_| false).await;
            println!(
                "OBSERVED | HTTP/2 preface, then 1 KiB of random bytes | {place} | {} |",
                ex.summary()
            );
            assert!(
                ex.closed && ex.goaway(),
                "{place}: garbage frames were not refused with GOAWAY and a close"
            );

            let ex = exchange(addr, &PREFACE[..10], true, within, |_| false).await;
            println!(
                "OBSERVED | truncated HTTP/2 preface (10 of 24 bytes), then close | {place} | {} |",
                ex.summary()
            );
            assert!(ex.closed, "{place}: a closed half-preface left open");

            // 1 GiB claimed, 10 bytes sent, then the client closes.
            let mut bytes = h2_grpc_call(grpc_path(is_peer), addr);
            let mut data = vec![0, 0x40, 0, 0, 0];
            data.extend_from_slice(b"0123456789");
            bytes.extend(h2_frame(0x0, 0, 1, &data));
            let ex = exchange(addr, &bytes, false, within, Exchange::answered_stream_1).await;
            println!(
                "OBSERVED | gRPC call {} whose message claims 1 GiB, 10 bytes sent, then close | {place} | {} |",
                grpc_path(is_peer),
                ex.summary()
            );
            assert!(
                ex.answered_stream_1() || ex.closed,
                "{place}: the 1 GiB claim was neither answered nor closed"
            );
            // The same call's body through a real client, to read the status.
            let ch = connect(addr).await;
            let claimed = grpc_message(0, 1 << 30, "0123456789");
            let limit = if is_peer { 64 << 20 } else { 65536 };
            let r = if is_peer {
                RaftClient::new(raw(&ch, claimed))
                    .append_entries(RaftPayload::default())
                    .await
                    .map(drop)
            } else {
                LockClient::new(raw(&ch, claimed))
                    .acquire(AcquireRequest::default())
                    .await
                    .map(drop)
            };
            refused(
                "gRPC message claiming 1 GiB, 10 bytes sent, end of stream",
                &format!("{port} port ({role}), {}", grpc_path(is_peer)),
                r,
                Code::OutOfRange,
                &format!("found 1073741824 bytes, the limit is: {limit} bytes"),
            );
        }
    }

    // Connections that stop halfway through the preface and stay open do not
    // stop anyone else from being served.
    let mut hanging = Vec::new();
    for addr in [&leader.0, &leader.1] {
        for _ in 0..50 {
            let mut s = TcpStream::connect(addr.as_str()).await.unwrap();
            s.write_all(&PREFACE[..10]).await.unwrap();
            hanging.push(s);
        }
    }
    assert_intact(&cluster, &b, "100 half-preface connections held open").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut still_open = 0;
    for s in &mut hanging {
        if is_open(s).await {
            still_open += 1;
        }
    }
    println!(
        "OBSERVED | 50 connections per port that stop after 10 bytes of preface and stay open | client and peer port (leader), raw TCP | {still_open} of 100 still open after 1 s; other clients served meanwhile |"
    );
    drop(hanging);
    assert_intact(&cluster, &b, "frames on the client and peer ports").await;

    // Well-formed HTTP/2 and gRPC framing, bad messages.
    let client_ch = connect(&leader.0).await;
    let peer_ch = connect(&leader.1).await;
    let mut raft = RaftClient::new(peer_ch.clone());
    let cases: [(&str, Vec<u8>); 4] = [
        ("4 KiB of random bytes", garbage(3, 4096)),
        ("empty", vec![]),
        ("JSON {}", b"{}".to_vec()),
        ("JSON of the wrong shape", br#"{"vote":[1,2,3]}"#.to_vec()),
    ];
    for (what, data) in &cases {
        for rpc in ["Vote", "AppendEntries", "InstallSnapshot"] {
            let req = RaftPayload { data: data.clone() };
            let r = match rpc {
                "Vote" => raft.vote(req).await,
                "AppendEntries" => raft.append_entries(req).await,
                _ => raft.install_snapshot(req).await,
            };
            refused(
                &format!("RaftPayload.data = {what}"),
                &format!("peer port, Raft.{rpc}"),
                r,
                Code::InvalidArgument,
                "undecodable raft message",
            );
        }
    }
    assert_intact(&cluster, &b, "undecodable Raft messages").await;
    // Bytes that are not a protobuf message.
    let not_proto = grpc_message(0, 5, "\u{a}\u{7f}abc"); // field 1 claims 127 bytes, has 3
    refused(
        "protobuf whose field 1 claims 127 bytes and has 3",
        "peer port, Raft.AppendEntries",
        RaftClient::new(raw(&peer_ch, not_proto.clone()))
            .append_entries(RaftPayload::default())
            .await,
        Code::Internal,
        "failed to decode Protobuf message",
    );
    refused(
        "protobuf whose field 1 (uint64) is length-delimited",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, not_proto))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "failed to decode Protobuf message",
    );
    refused(
        "gRPC message claiming 20 bytes, 10 sent, end of stream",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, grpc_message(0, 20, "0123456789")))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "",
    );
    refused(
        "gRPC message claiming 20 bytes, 10 sent, end of stream",
        "peer port, Raft.AppendEntries",
        RaftClient::new(raw(&peer_ch, grpc_message(0, 20, "0123456789")))
            .append_entries(RaftPayload::default())
            .await,
        Code::Internal,
        "",
    );
    refused(
        "gRPC compressed flag set without grpc-encoding",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, grpc_message(1, 2, "\u{8}\u{1}")))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "compress",
    );
    refused(
        "gRPC flag byte 7",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, grpc_message(7, 2, "\u{8}\u{1}")))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "invalid compression flag: 7",
    );
    refused(
        "Raft.AppendEntries sent to the client port",
        "client port, Raft.AppendEntries",
        RaftClient::new(client_ch.clone())
            .append_entries(RaftPayload { data: vec![] })
            .await,
        Code::Unimplemented,
        "",
    );
    refused(
        "Lock.Acquire sent to the peer port",
        "peer port, Lock.Acquire",
        LockClient::new(peer_ch.clone())
            .acquire(AcquireRequest::default())
            .await,
        Code::Unimplemented,
        "",
    );
    assert_intact(&cluster, &b, "malformed gRPC messages").await;
}

/// Whether the server still keeps `s` open (reads what it sent, if anything).
async fn is_open(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_millis(5), s.read(&mut buf)).await {
            Err(_) => return true,
            Ok(Ok(0)) | Ok(Err(_)) => return false,
            Ok(Ok(_)) => {}
        }
    }
}
