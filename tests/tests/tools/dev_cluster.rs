//! The README's run command: `raftlockd dev` starts a cluster, prints
//! endpoints a client can use, and stops every node on SIGTERM.

use raftlock_tests::binary;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `raftlockd dev` this test started. If the test ends before
/// `stop_dev` (a failed assertion), it gets SIGTERM, so that it stops the
/// nodes it started, and SIGKILL if it has not exited within 10 s.
struct Dev(Option<std::process::Child>);

impl Drop for Dev {
    fn drop(&mut self) {
        if let Some(mut dev) = self.0.take() {
            let _ = terminate(&mut dev, Duration::from_secs(10));
        }
    }
}

/// SIGTERM to `dev` (only the PID this test started), then its exit status,
/// or `None` after SIGKILL if it did not exit `within`.
fn terminate(dev: &mut std::process::Child, within: Duration) -> Option<std::process::ExitStatus> {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(dev.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(s)) = dev.try_wait() {
            return Some(s);
        }
        if Instant::now() > deadline {
            let _ = dev.kill();
            let _ = dev.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `raftlockd dev ARGS` and returns it with what it printed up to
/// its "Ctrl-C" line.
async fn start_dev(args: &[&str]) -> (Dev, Vec<String>) {
    let mut dev = Dev(Some(
        Command::new(binary("raftlockd"))
            .arg("dev")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("raftlockd dev starts"),
    ));
    // Its log, kept to say why if it stops before printing its endpoints.
    let stderr = dev
        .0
        .as_mut()
        .and_then(|d| d.stderr.take())
        .expect("stderr");
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                if log.len() < 64 << 10 {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
    }
    let stdout = dev
        .0
        .as_mut()
        .and_then(|d| d.stdout.take())
        .expect("stdout");
    let lines = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let done = line.starts_with("# Ctrl-C");
            out.push(line);
            if done {
                break;
            }
        }
        out
    });
    let lines = tokio::time::timeout(Duration::from_secs(40), lines)
        .await
        .expect("dev printed its endpoints in time")
        .unwrap();
    if !lines.iter().any(|l| l.starts_with("RAFTLOCK_ENDPOINTS=")) {
        std::thread::sleep(Duration::from_millis(200));
        let log = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
        panic!("raftlockd dev stopped before printing its endpoints: {lines:?}\n{log}");
    }
    (dev, lines)
}

/// Stops dev with SIGTERM and checks that it exits cleanly.
fn stop_dev(mut dev: Dev) {
    let mut child = dev.0.take().expect("dev still running");
    match terminate(&mut child, Duration::from_secs(30)) {
        Some(status) => assert!(status.success(), "dev exited with {status}"),
        None => panic!("raftlockd dev did not stop on SIGTERM"),
    }
}

fn printed<'a>(lines: &'a [String], var: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{var}=")))
        .unwrap_or_else(|| panic!("no {var} line in {lines:?}"))
}

#[tokio::test]
async fn dev_tls_auth_runs_a_secured_cluster() {
    let _serial = raftlock_tests::exclusive();
    let (dev, lines) = start_dev(&["--tls", "--auth"]).await;
    let endpoints: Vec<String> = printed(&lines, "RAFTLOCK_ENDPOINTS")
        .split(',')
        .map(str::to_owned)
        .collect();
    let ca = std::fs::read(printed(&lines, "RAFTLOCK_CACERT")).expect("the CA file exists");
    let token = printed(&lines, "RAFTLOCK_AUTH_TOKEN").to_owned();
    let opts = |tls: bool, token: Option<&str>| raftlock_client::Options {
        deadline: Duration::from_secs(3),
        tls: tls.then(|| raftlock_client::Tls::new(ca.clone())),
        token: token.map(str::to_owned),
        ..Default::default()
    };
    let client = raftlock_client::Client::connect_with(&endpoints, opts(true, Some(&token)))
        .await
        .unwrap();
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let guard = session
        .lock("dev/tls")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    session.close().await.unwrap();
    match raftlock_client::Client::connect_with(&endpoints, opts(true, None)).await {
        Err(raftlock_client::Error::Unauthenticated(_)) => {}
        Err(e) => panic!("expected UNAUTHENTICATED, got {e}"),
        Ok(_) => panic!("a client without a token was let in"),
    }
    assert!(
        raftlock_client::Client::connect_with(&endpoints, opts(false, Some(&token)))
            .await
            .is_err(),
        "plain HTTP/2 to a TLS port must fail"
    );
    stop_dev(dev);
}

/// The nodes' logs in a dev data dir, for a failure message.
fn node_logs(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for id in 1..=5 {
        if let Ok(log) = std::fs::read_to_string(dir.join(format!("node-{id}.log"))) {
            out.push_str(&format!("--- node {id}\n{log}"));
        }
    }
    out
}

#[tokio::test]
async fn dev_prints_usable_endpoints_and_stops_cleanly() {
    let _serial = raftlock_tests::exclusive();
    let (dev, lines) = start_dev(&["--nodes", "3"]).await;
    let endpoints = lines
        .iter()
        .find_map(|l| l.strip_prefix("RAFTLOCK_ENDPOINTS="))
        .unwrap_or_else(|| panic!("no RAFTLOCK_ENDPOINTS line in {lines:?}"))
        .to_owned();
    let data_dir = lines
        .iter()
        .find_map(|l| l.split(" in ").nth(1))
        .map(std::path::PathBuf::from)
        .expect("the data dir is printed");
    assert_eq!(endpoints.split(',').count(), 3);

    let client = raftlock_client::Client::connect(endpoints.split(','))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", node_logs(&data_dir)));
    let session = client.session(Duration::from_secs(5)).await.unwrap();
    let guard = session
        .lock("dev/smoke")
        .try_acquire()
        .await
        .unwrap()
        .expect("free lock");
    assert!(guard.token() > 0);
    guard.release().await.unwrap();
    session.close().await.unwrap();

    stop_dev(dev);
    assert!(
        !data_dir.exists(),
        "temporary data dir {} left behind",
        data_dir.display()
    );
    for e in endpoints.split(',') {
        assert!(
            std::net::TcpStream::connect(e).is_err(),
            "a node still listens on {e}"
        );
    }
}

/// A node that finds its port taken makes the launcher start the whole
/// cluster over on fresh ports (what `raftlockd dev` does when another
/// process takes a port between its choice and the node's bind). The data
/// dirs of the first try record a cluster id that follows from the lost
/// addresses; the second try must not start in them.
#[tokio::test]
async fn a_start_that_loses_a_port_starts_over_in_fresh_data_dirs() {
    let _serial = raftlock_tests::exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = raftlock_tests::Options::new(binary("raftlockd"), 3);
    options.dir = Some(dir.path().to_owned());
    options.keep_ports = true;
    let mut squatter = None;
    let mut first_ports = Vec::new();
    let cluster = raftlock_tests::LocalCluster::start_prepared(options, |c| {
        if squatter.is_none() {
            first_ports = c.endpoints();
            // Nodes 1 and 2 start and record their cluster; node 3 cannot
            // listen.
            squatter = Some(std::net::TcpListener::bind(&c.node(3).client_addr).expect("bind"));
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|e| panic!("the second try did not start: {e}"));
    assert_ne!(
        cluster.endpoints(),
        first_ports,
        "the ports were not chosen again"
    );
    let client = raftlock_client::Client::connect_with(
        &cluster.endpoints(),
        raftlock_tests::client_options(cluster.access()),
    )
    .await
    .expect("connect");
    let session = client
        .session(Duration::from_secs(5))
        .await
        .expect("session");
    let guard = session
        .lock("started-over")
        .try_acquire()
        .await
        .expect("a lock on the new cluster")
        .expect("free");
    guard.release().await.expect("release");
    drop(squatter);
}
