//! Fixtures for tests that start real `raftlockd` processes: free loopback
//! ports, a temporary directory per cluster, and cleanup that kills only the
//! processes the fixture started (by PID), even when a test panics.

use raftlock_client::Client;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::StatusRequest;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One node of a test cluster.
pub struct TestNode {
    /// Node id.
    pub id: u64,
    /// Client address.
    pub client_addr: String,
    /// Peer address.
    pub peer_addr: String,
    /// HTTP admin address (/metrics, /health, /ready).
    pub metrics_addr: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Started without `--initial-cluster`: it waits to be added.
    joiner: bool,
}

/// A cluster of real `raftlockd` processes on loopback.
pub struct Cluster {
    /// Nodes by position (id = position + 1).
    pub nodes: Vec<TestNode>,
    initial: String,
    dir: tempfile::TempDir,
    /// Extra `raftlockd` flags for every node started from now on.
    pub extra_args: Vec<String>,
    /// How the fixture's own clients reach the nodes (TLS, token).
    pub access: Access,
    // One cluster at a time per test binary: two clusters sharing two cores
    // would turn timing assertions into tests of the scheduler.
    _serial: std::sync::MutexGuard<'static, ()>,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How to reach a cluster that serves TLS or wants a token.
#[derive(Clone, Default)]
pub struct Access {
    /// PEM CA of the nodes' client-port certificates (TLS on when set).
    pub ca_pem: Option<Vec<u8>>,
    /// Bearer token.
    pub token: Option<String>,
}

impl Access {
    /// A raw gRPC channel to `addr` with this access (token not included:
    /// see [`Access::request`]).
    pub async fn channel(&self, addr: &str) -> Result<tonic::transport::Channel, String> {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        let mut e = tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(1));
        if let Some(ca) = &self.ca_pem {
            e = e
                .tls_config(
                    tonic::transport::ClientTlsConfig::new()
                        .ca_certificate(tonic::transport::Certificate::from_pem(ca)),
                )
                .map_err(|e| e.to_string())?;
        }
        e.connect().await.map_err(|e| format!("{e:?}"))
    }

    /// A request carrying this access's token, if any.
    pub fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        if let Some(t) = &self.token {
            r.metadata_mut().insert(
                "authorization",
                format!("Bearer {t}").parse().expect("ascii token"),
            );
        }
        r
    }

    /// Client options with this access.
    pub fn options(&self) -> raftlock_client::Options {
        raftlock_client::Options {
            tls: self.ca_pem.clone().map(raftlock_client::Tls::new),
            token: self.token.clone(),
            ..Default::default()
        }
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
        // A port picked free can be taken before the node binds it (by
        // another socket's ephemeral port): start again on fresh ports
        // rather than fail a test over it. Nothing else is retried.
        let mut attempt = 1;
        let cluster = loop {
            let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
            let dir = tempfile::Builder::new()
                .prefix("raftlock-test-")
                .tempdir()
                .expect("temp dir");
            let mut nodes = Vec::new();
            for id in 1..=n {
                nodes.push(TestNode {
                    id,
                    client_addr: format!("127.0.0.1:{}", free_port()),
                    peer_addr: format!("127.0.0.1:{}", free_port()),
                    metrics_addr: format!("127.0.0.1:{}", free_port()),
                    data_dir: dir.path().join(format!("node-{id}")),
                    log: dir.path().join(format!("node-{id}.log")),
                    child: None,
                    joiner: false,
                });
            }
            let initial = nodes
                .iter()
                .map(|n| format!("{}={}/{}", n.id, n.peer_addr, n.client_addr))
                .collect::<Vec<_>>()
                .join(",");
            let mut cluster = Cluster {
                nodes,
                initial,
                dir,
                extra_args: args.iter().map(|a| (*a).to_owned()).collect(),
                access: access.clone(),
                _serial: serial,
            };
            if let Some(file) = backup {
                for id in 1..=n {
                    let node = &cluster.nodes[(id - 1) as usize];
                    let out = Command::new(binary("raftlockd"))
                        .arg("restore")
                        .arg("--snapshot")
                        .arg(file)
                        .args(["--id", &id.to_string()])
                        .arg("--data-dir")
                        .arg(&node.data_dir)
                        .args(["--initial-cluster", &cluster.initial])
                        .output()
                        .expect("raftlockd restore runs");
                    assert!(
                        out.status.success(),
                        "restore of node {id} failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
            for id in 1..=n {
                cluster.start_node(id);
            }
            match cluster.lost_a_port_race(Duration::from_secs(20)).await {
                Some(id) if attempt < 3 => {
                    eprintln!(
                        "node {id} could not bind its port (attempt {attempt}); starting again on fresh ports:\n{}",
                        cluster.logs()
                    );
                    attempt += 1;
                }
                _ => break cluster,
            }
        };
        cluster.wait_for_leader(Duration::from_secs(20)).await;
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

    /// Waits until every node serves or one has exited because a port was
    /// taken; returns that node's id. A node that exits
    /// for any other reason, or one slow to listen, is left to the waits
    /// that follow, which fail with its logs.
    async fn lost_a_port_race(&mut self, within: Duration) -> Option<u64> {
        let deadline = Instant::now() + within;
        loop {
            let mut listening = 0;
            for n in &mut self.nodes {
                let Some(child) = n.child.as_mut() else {
                    listening += 1;
                    continue;
                };
                let log = std::fs::read_to_string(&n.log).unwrap_or_default();
                // Printed once both listeners are bound (a connection test
                // could reach whatever else holds the port).
                if log.contains("raftlockd serving") {
                    listening += 1;
                } else if let Ok(Some(_)) = child.try_wait() {
                    let port_taken = log.lines().any(|l| {
                        l.contains("cannot listen on") && l.contains("Address already in use")
                    });
                    return port_taken.then_some(n.id);
                }
            }
            if listening == self.nodes.len() || Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every running node has heard from a leader.
    pub async fn wait_for_followers(&self, within: Duration) {
        let deadline = Instant::now() + within;
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            loop {
                let knows = match self.access.channel(&n.client_addr).await {
                    Ok(channel) => {
                        let mut req = self.access.request(StatusRequest::default());
                        req.set_timeout(Duration::from_millis(500));
                        ClusterClient::new(channel)
                            .status(req)
                            .await
                            .is_ok_and(|s| s.into_inner().leader_id != 0)
                    }
                    Err(_) => false,
                };
                if knows {
                    break;
                }
                if Instant::now() > deadline {
                    panic!(
                        "node {} has not heard from a leader within {within:?}; logs:
{}",
                        n.id,
                        self.logs()
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Waits until every running node accepts connections on its client
    /// port.
    pub async fn wait_for_listeners(&self, within: Duration) {
        let deadline = Instant::now() + within;
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            while tokio::net::TcpStream::connect(&n.client_addr)
                .await
                .is_err()
            {
                if Instant::now() > deadline {
                    panic!(
                        "node {} does not listen on {} within {within:?}; logs:\n{}",
                        n.id,
                        n.client_addr,
                        self.logs()
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    fn node(&mut self, id: u64) -> &mut TestNode {
        &mut self.nodes[(id - 1) as usize]
    }

    /// Creates node `n + 1` with an empty data dir and starts it without
    /// `--initial-cluster`, so it waits to be added as a learner. Returns
    /// its id.
    pub fn start_new_node(&mut self) -> u64 {
        let id = self.nodes.len() as u64 + 1;
        self.nodes.push(TestNode {
            id,
            client_addr: format!("127.0.0.1:{}", free_port()),
            peer_addr: format!("127.0.0.1:{}", free_port()),
            metrics_addr: format!("127.0.0.1:{}", free_port()),
            data_dir: self.dir.path().join(format!("node-{id}")),
            log: self.dir.path().join(format!("node-{id}.log")),
            child: None,
            joiner: true,
        });
        self.start_node(id);
        id
    }

    /// Deletes node `id`'s data dir (the node must be stopped): a machine
    /// whose disk was lost.
    pub fn wipe(&mut self, id: u64) {
        let node = self.node(id);
        assert!(node.child.is_none(), "stop node {id} first");
        let _ = std::fs::remove_dir_all(&node.data_dir);
        node.joiner = true;
    }

    /// (Re)starts node `id` from its data dir.
    pub fn start_node(&mut self, id: u64) {
        let initial = self.initial.clone();
        let extra = self.extra_args.clone();
        let node = self.node(id);
        let initial_args = if node.joiner {
            vec![]
        } else {
            vec!["--initial-cluster".to_owned(), initial]
        };
        assert!(node.child.is_none(), "node {id} already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("log file");
        let child = Command::new(binary("raftlockd"))
            .arg("--id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(&node.data_dir)
            .arg("--listen-client")
            .arg(&node.client_addr)
            .arg("--listen-peer")
            .arg(&node.peer_addr)
            .args(&initial_args)
            .args(&extra)
            .arg("--listen-metrics")
            .arg(&node.metrics_addr)
            .env(
                "RUST_LOG",
                // The start-up line tells the harness that a node serves,
                // whatever filter RAFTLOCK_TEST_LOG sets.
                format!(
                    "{},raftlock_node::server=info",
                    std::env::var("RAFTLOCK_TEST_LOG")
                        .unwrap_or_else(|_| "info,openraft=warn".into())
                ),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("raftlockd starts");
        node.child = Some(child);
    }

    fn signal(&mut self, id: u64, sig: libc::c_int) {
        if let Some(child) = &self.node(id).child {
            // Only ever a PID this fixture spawned.
            unsafe {
                libc::kill(child.id() as libc::pid_t, sig);
            }
        }
    }

    /// `kill -9` node `id`.
    pub fn kill(&mut self, id: u64) {
        self.signal(id, libc::SIGKILL);
        if let Some(mut c) = self.node(id).child.take() {
            let _ = c.wait();
        }
    }

    /// SIGTERM node `id` and wait for it to exit; returns whether it exited 0.
    /// Async, so the test's clients keep running meanwhile.
    pub async fn terminate(&mut self, id: u64) -> bool {
        self.signal(id, libc::SIGTERM);
        let Some(mut c) = self.node(id).child.take() else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match c.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    return false;
                }
            }
        }
    }

    /// SIGSTOP node `id`.
    pub fn pause(&mut self, id: u64) {
        self.signal(id, libc::SIGSTOP);
    }

    /// SIGCONT node `id`.
    pub fn resume(&mut self, id: u64) {
        self.signal(id, libc::SIGCONT);
    }

    /// Client endpoints of all nodes.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.client_addr.clone()).collect()
    }

    /// A client that knows every node.
    pub async fn client(&self) -> Client {
        Client::connect_with(self.endpoints(), self.access.options())
            .await
            .expect("client connects")
    }

    /// The id of the node that says it leads, asking running nodes only.
    pub async fn leader(&self) -> Option<u64> {
        for n in &self.nodes {
            if n.child.is_none() {
                continue;
            }
            let Ok(channel) = self.access.channel(&n.client_addr).await else {
                continue;
            };
            let mut c = ClusterClient::new(channel);
            let mut req = self.access.request(StatusRequest::default());
            req.set_timeout(Duration::from_millis(500));
            if let Ok(s) = c.status(req).await {
                let s = s.into_inner();
                if s.leader_id == s.node_id && s.role == raftlock_proto::v1::Role::Leader as i32 {
                    return Some(s.node_id);
                }
            }
        }
        None
    }

    /// Waits until some running node leads.
    pub async fn wait_for_leader(&self, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(l) = self.leader().await {
                return l;
            }
            if Instant::now() > deadline {
                panic!("no leader within {within:?}; logs:\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until a running node other than `old` leads.
    pub async fn wait_for_new_leader(&self, old: u64, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(l) = self.leader().await {
                if l != old {
                    return l;
                }
            }
            if Instant::now() > deadline {
                panic!("no new leader within {within:?}; logs:\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The tail of every node's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let text = std::fs::read_to_string(&n.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let cut = lines.len().saturating_sub(30);
            // Why a process died is printed before its backtrace, which
            // alone fills the tail: keep such lines from above it too.
            let mut in_error = false;
            let mut tail: Vec<&str> = lines[..cut]
                .iter()
                .filter(|l| {
                    if l.starts_with("Error:") {
                        in_error = true;
                    } else if l.starts_with("Stack backtrace:") {
                        in_error = false;
                    }
                    in_error || l.contains("panicked at")
                })
                .copied()
                .collect();
            tail.extend_from_slice(&lines[cut..]);
            // Whether the process is alive tells a node that never started
            // from one that started and went quiet.
            let process = match &n.child {
                None => "not running (stopped by the test)".to_owned(),
                Some(c) => std::fs::read_to_string(format!("/proc/{}/status", c.id()))
                    .ok()
                    .and_then(|st| {
                        st.lines()
                            .find(|l| l.starts_with("State:"))
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| format!("pid {} has exited", c.id())),
            };
            out.push_str(&format!(
                "--- node {} (client {}, peer {}; {process}) ---\n{}\n",
                n.id,
                n.client_addr,
                n.peer_addr,
                tail.join("\n")
            ));
        }
        out
    }

    /// The full log of node `id`.
    pub fn log_of(&self, id: u64) -> String {
        std::fs::read_to_string(&self.nodes[(id - 1) as usize].log).unwrap_or_default()
    }

    /// The cluster's temporary directory.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                // Resume first: a stopped process cannot act on SIGKILL's
                // exit path until it runs.
                unsafe {
                    libc::kill(c.id() as libc::pid_t, libc::SIGCONT);
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
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

/// The value of the first sample of `name` (with exactly these labels, if
/// given) in a Prometheus text exposition.
pub fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (key, value) = l.rsplit_once(' ')?;
        (key == name_and_labels).then(|| value.parse().ok())?
    })
}
