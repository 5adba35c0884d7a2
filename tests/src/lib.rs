//! Fixtures for tests that start real `raftlockd` processes. The processes
//! are started, signalled and cleaned up by [`raftlock_local`] (free
//! loopback ports, a temporary directory per cluster, only its own PIDs
//! killed, even when a test panics); this crate adds the tests' conventions
//! and raw gRPC helpers.

use raftlock_client::Client;
pub use raftlock_local::{Access, LocalCluster, Node, Options};

pub mod contract;
pub mod openapi;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Path of a workspace binary built alongside the tests (`cargo test
/// --workspace` builds the binaries of packages that have integration tests,
/// which `raftlockd` and `raftlock` do).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|p| p.parent())
        .expect("test executable lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not found: run the tests with `cargo test --workspace` (which builds it)",
        path.display()
    );
    path
}

/// Runs `raftlock bench ARGS --raftlockd <raftlockd>` with `env` added
/// (the server binary is for workloads that start their own cluster; the
/// others run against `RAFTLOCK_ENDPOINTS`), asserts that it succeeded, and
/// returns its JSON summary (the last line it prints), whose `median` holds
/// the figures, with what it printed under `stdout`.
pub async fn run_bench(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let _serial = exclusive();
    let out = tokio::process::Command::new(binary("raftlock"))
        .arg("bench")
        .args(args)
        .arg("--raftlockd")
        .arg(binary("raftlockd"))
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .expect("raftlock runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let mut json: serde_json::Value = serde_json::from_str(
        stdout
            .lines()
            .last()
            .unwrap_or_else(|| panic!("no output:\n{stderr}")),
    )
    .unwrap_or_else(|e| panic!("last line is not JSON ({e}):\n{stdout}"));
    json["stdout"] = serde_json::Value::String(stdout.into_owned());
    json
}

/// A cluster of real `raftlockd` processes on loopback, started by
/// [`raftlock_local`] with the tests' conventions: one cluster at a time per
/// test binary, and waits that panic with every node's log.
pub struct Cluster {
    local: LocalCluster,
    /// How the fixture's own clients reach the nodes (TLS, token).
    pub access: Access,
    _serial: Exclusive,
}

static SERIAL: parking_lot::ReentrantMutex<()> = parking_lot::const_reentrant_mutex(());

/// Held while a test runs processes: one test at a time per test binary
/// starts servers, since two clusters sharing two cores would turn timing
/// assertions into tests of the scheduler. Re-entrant on the test's thread
/// (a test that holds a [`Cluster`] may also run `raftlock bench`).
pub struct Exclusive(#[allow(dead_code)] parking_lot::ReentrantMutexGuard<'static, ()>);

/// Waits until no other test of this binary runs processes; hold the
/// result for as long as this test does. [`Cluster`] and [`run_bench`] take
/// it themselves.
pub fn exclusive() -> Exclusive {
    Exclusive(SERIAL.lock())
}

impl std::ops::Deref for Cluster {
    type Target = LocalCluster;
    fn deref(&self) -> &LocalCluster {
        &self.local
    }
}

impl std::ops::DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut LocalCluster {
        &mut self.local
    }
}

/// Client options that reach a cluster with `access`.
pub fn client_options(access: &Access) -> raftlock_client::Options {
    raftlock_client::Options {
        tls: access.ca_pem.clone().map(raftlock_client::Tls::new),
        token: access.token.clone(),
        ..Default::default()
    }
}

impl Cluster {
    /// Starts `n` nodes and waits for a leader.
    pub async fn start(n: u64) -> Cluster {
        Self::start_with(n, &[]).await
    }

    /// Starts `n` nodes with extra `raftlockd` flags and waits for a leader.
    pub async fn start_with(n: u64, args: &[&str]) -> Cluster {
        Self::start_inner(n, args, None, Access::default()).await
    }

    /// Starts `n` nodes with extra flags that turn on TLS or
    /// authentication, reaching them (to find the leader, and from
    /// [`Cluster::client`]) with `access`.
    pub async fn start_secure(n: u64, args: &[&str], access: Access) -> Cluster {
        Self::start_inner(n, args, None, access).await
    }

    /// Starts a new cluster of `n` nodes seeded from a backup file with
    /// `raftlockd restore`.
    pub async fn start_restored(n: u64, backup: &std::path::Path) -> Cluster {
        Self::start_inner(n, &[], Some(backup), Access::default()).await
    }

    async fn start_inner(
        n: u64,
        args: &[&str],
        backup: Option<&std::path::Path>,
        access: Access,
    ) -> Cluster {
        // RAFTLOCK_TEST_CLIENT_LOG=raftlock_client=debug shows what the
        // client library does during a test.
        if let Ok(filter) = std::env::var("RAFTLOCK_TEST_CLIENT_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let serial = exclusive();
        let mut options = Options::new(binary("raftlockd"), n);
        options.args = args.iter().map(Into::into).collect();
        options.access = access.clone();
        options.log_filter =
            std::env::var("RAFTLOCK_TEST_LOG").unwrap_or_else(|_| "info,openraft=warn".into());
        let local = LocalCluster::start_prepared(options, |c| {
            let Some(file) = backup else { return Ok(()) };
            for node in c.nodes() {
                let out = Command::new(binary("raftlockd"))
                    .arg("restore")
                    .arg("--snapshot")
                    .arg(file)
                    .args(["--id", &node.id.to_string()])
                    .arg("--data-dir")
                    .arg(&node.data_dir)
                    .args(["--initial-cluster", &c.initial_cluster().to_string()])
                    .output()
                    .expect("raftlockd restore runs");
                assert!(
                    out.status.success(),
                    "restore of node {} failed: {}",
                    node.id,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
        let cluster = Cluster {
            local,
            access,
            _serial: serial,
        };
        // Two nodes elect a leader; tests that then talk to the third must
        // not race its start.
        cluster.wait_for_listeners(Duration::from_secs(20)).await;
        // A node that has not yet heard from the leader still runs its
        // first, short election timer (no leader lease yet) and may stand,
        // and the new term's blank entry would land in the middle of a test
        // that counts entries.
        cluster.wait_for_followers(Duration::from_secs(20)).await;
        cluster
    }

    /// Waits until every running node has heard from a leader.
    pub async fn wait_for_followers(&self, within: Duration) {
        self.local
            .wait_for_followers(within)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until every running node accepts connections on its client
    /// port.
    pub async fn wait_for_listeners(&self, within: Duration) {
        self.local
            .wait_for_listeners(within)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Creates node `n + 1` with an empty data dir and starts it without
    /// `--initial-cluster`, so it waits to be added as a learner. Returns
    /// its id.
    pub fn start_new_node(&mut self) -> u64 {
        self.local
            .add_node()
            .unwrap_or_else(|e| panic!("cannot add a node: {e}"))
    }

    /// Deletes node `id`'s data dir (the node must be stopped): a machine
    /// whose disk was lost.
    pub fn wipe(&mut self, id: u64) {
        self.local.wipe(id).unwrap_or_else(|e| panic!("{e}"))
    }

    /// (Re)starts node `id` from its data dir.
    pub fn start_node(&mut self, id: u64) {
        assert!(!self.node(id).is_running(), "node {id} already running");
        self.local.start_node(id).unwrap_or_else(|e| panic!("{e}"))
    }

    /// SIGTERM node `id` and wait for it to exit; returns whether it exited 0.
    /// Async, so the test's clients keep running meanwhile.
    pub async fn terminate(&mut self, id: u64) -> bool {
        self.local.terminate(id, Duration::from_secs(20)).await
    }

    /// A client that knows every node.
    pub async fn client(&self) -> Client {
        Client::connect_with(self.endpoints(), client_options(&self.access))
            .await
            .expect("client connects")
    }

    /// A client that says it runs on `host` as process `pid`, as a
    /// service's instance would (for tests of who holds what).
    pub async fn client_on(&self, host: &str, pid: u32) -> Client {
        Client::connect_with(
            self.endpoints(),
            raftlock_client::Options {
                host: Some(host.into()),
                pid: Some(pid),
                ..client_options(&self.access)
            },
        )
        .await
        .expect("client connects")
    }

    /// Runs the `raftlock` CLI against this cluster; returns its output,
    /// which must be a success.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = std::process::Command::new(binary("raftlock"))
            .env("RAFTLOCK_ENDPOINTS", self.endpoints().join(","))
            .args(args)
            .output()
            .expect("raftlock runs");
        assert!(
            out.status.success(),
            "raftlock {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// Waits until some running node leads.
    pub async fn wait_for_leader(&self, within: Duration) -> u64 {
        self.local
            .wait_for_leader(within)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until a running node other than `old` leads.
    pub async fn wait_for_new_leader(&self, old: u64, within: Duration) -> u64 {
        self.local
            .wait_for_new_leader(old, within)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Raw gRPC access for tests that must act as a misbehaving client (a
/// session that never sends keep-alives) or read fields the library hides.
pub mod raw {
    use raftlock_proto::v1::*;
    use raftlock_proto::v1::{lock_client::LockClient, session_client::SessionClient};

    async fn channel(addr: &str) -> tonic::transport::Channel {
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("address")
            .connect()
            .await
            .expect("connects")
    }

    /// Creates a session on `node` and never keeps it alive.
    pub async fn create_session(node: &str, ttl_ms: u64) -> Result<u64, tonic::Status> {
        let r = SessionClient::new(channel(node).await)
            .create(CreateSessionRequest {
                ttl_ms,
                client_name: "silent".into(),
                ..Default::default()
            })
            .await?;
        Ok(r.into_inner().session_id)
    }

    /// Closes session `id` on `leader`, as another process holding its id would.
    pub async fn close_session(leader: &str, id: u64) -> Result<(), tonic::Status> {
        SessionClient::new(channel(leader).await)
            .close(CloseSessionRequest { session_id: id })
            .await
            .map(|_| ())
    }

    /// Creates a session on `leader` and never keeps it alive.
    pub async fn silent_session(leader: &str, ttl_ms: u64) -> u64 {
        create_session(leader, ttl_ms)
            .await
            .expect("session created")
    }

    /// An acquire numbered for exactly-once delivery (`seq`, with every
    /// number below `acked_below` answered), with request id `id`.
    pub fn sequenced(
        session: u64,
        name: &str,
        id: u128,
        seq: u64,
        acked_below: u64,
    ) -> AcquireRequest {
        AcquireRequest {
            session_id: session,
            name: name.into(),
            request_id: id.to_be_bytes().to_vec(),
            seq,
            acked_below,
            ..Default::default()
        }
    }

    /// Acquires `name` for `session` with a given request id, as a client's
    /// retry of one logical acquisition does.
    pub async fn acquire_with_id(
        node: &str,
        session: u64,
        name: &str,
        request_id: [u8; 16],
    ) -> Result<AcquireResponse, tonic::Status> {
        LockClient::new(channel(node).await)
            .acquire(AcquireRequest {
                session_id: session,
                name: name.into(),
                request_id: request_id.to_vec(),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
    }

    /// A waiting acquire of `name` for `session` with request id `request_id`.
    pub async fn acquire_waiting_with_id(
        node: &str,
        session: u64,
        name: &str,
        request_id: [u8; 16],
        wait_ms: u64,
    ) -> Result<AcquireResponse, tonic::Status> {
        LockClient::new(channel(node).await)
            .acquire(AcquireRequest {
                session_id: session,
                name: name.into(),
                request_id: request_id.to_vec(),
                wait_timeout_ms: Some(wait_ms),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
    }

    /// Acquires `name` for `session` (try-lock or wait).
    pub async fn acquire(
        leader: &str,
        session: u64,
        name: &str,
        wait_ms: Option<u64>,
    ) -> Result<AcquireResponse, tonic::Status> {
        LockClient::new(channel(leader).await)
            .acquire(AcquireRequest {
                session_id: session,
                name: name.into(),
                request_id: uuid::Uuid::now_v7().as_bytes().to_vec(),
                wait_timeout_ms: wait_ms,
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
    }

    /// Holders and waiters of `name`, read linearizably at `node`.
    pub async fn describe(node: &str, name: &str) -> Result<DescribeResponse, tonic::Status> {
        LockClient::new(channel(node).await)
            .describe(DescribeRequest { name: name.into() })
            .await
            .map(|r| r.into_inner())
    }

    /// Waits until `name` has `n` waiters at `node` (10 s at most): a
    /// waiter queues only once its acquire commits, which a fixed sleep
    /// cannot promise on a loaded machine.
    pub async fn wait_for_waiters(node: &str, name: &str, n: usize) {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let d = describe(node, name).await.expect("describe");
            if d.waiters.len() >= n {
                return;
            }
            assert!(
                std::time::Instant::now() < give_up,
                "{name}: {} waiters after 10 s, expected {n}",
                d.waiters.len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Releases and returns the grants the release made.
    pub async fn release(
        leader: &str,
        session: u64,
        name: &str,
        token: u64,
    ) -> Result<ReleaseResponse, tonic::Status> {
        LockClient::new(channel(leader).await)
            .release(ReleaseRequest {
                session_id: session,
                name: name.into(),
                token,
            })
            .await
            .map(|r| r.into_inner())
    }
}

/// A plain HTTP/1.0 GET (the admin listener needs nothing more); returns
/// the status code and body.
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut raw = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut raw))
        .await
        .map_err(|_| std::io::Error::other("no answer in 10 s"))??;
    let code = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// An answer of the HTTP/JSON API: status, headers (lowercase names), body.
#[derive(Debug)]
pub struct HttpAnswer {
    /// The HTTP status.
    pub status: u16,
    /// Headers, names in lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl HttpAnswer {
    /// The body as JSON (panics with the answer when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.0 call (the server closes the connection after answering,
/// so the answer is whatever it sent): `POST path` with `body` as JSON,
/// plus `headers`. Tests that must send what no well-behaved client would
/// (a wrong Content-Length, say) write their own bytes.
pub async fn http_call(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<HttpAnswer> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let mut req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await?;
    s.write_all(body.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut raw))
        .await
        .map_err(|_| std::io::Error::other("no answer in 60 s"))??;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(HttpAnswer {
        status,
        headers,
        body: body.to_owned(),
    })
}

/// The value of the first sample of `name` (with exactly these labels, if
/// given) in a Prometheus text exposition.
pub fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (key, value) = l.rsplit_once(' ')?;
        (key == name_and_labels).then(|| value.parse().ok())?
    })
}
