//! The README's run command: `raftlockd dev` starts a cluster, prints
//! endpoints a client can use, and stops every node on SIGTERM.

use raftlock_tests::binary;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test]
async fn dev_prints_usable_endpoints_and_stops_cleanly() {
    let mut dev = Command::new(binary("raftlockd"))
        .args(["dev", "--nodes", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("raftlockd dev starts");
    let stdout = dev.stdout.take().expect("stdout");
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
        .unwrap();
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

    unsafe {
        libc::kill(dev.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = dev.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = dev.kill();
            panic!("raftlockd dev did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "dev exited with {status}");
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
