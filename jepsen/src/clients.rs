//! Client processes: workers that run the real `raftlock-client` in
//! processes of their own (`raftlock-jepsen worker`), so that the client
//! nemesis can do to a client what a GC pause or a bad link does: SIGSTOP
//! it, or cut its connections to the leader. Each binds its own loopback
//! IP (127.0.0.61, 127.0.0.62, ... by default) so iptables can single it out, and
//! streams its ops as JSON lines on the harness's clock.

use crate::history::Op;
use crate::workload::{Recorder, PROCESS_SPAN};
use anyhow::Context;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// One client process.
pub struct ClientProc {
    /// The loopback IP its connections come from.
    pub ip: String,
    child: Child,
    paused: bool,
    reader: tokio::task::JoinHandle<()>,
}

/// The client processes of a run (killed by PID when dropped).
#[derive(Default)]
pub struct ClientProcs {
    /// The processes, in start order.
    pub procs: Vec<ClientProc>,
}

/// The loopback IP of client process `k`.
pub fn client_ip(k: usize) -> String {
    format!("{}.{}", crate::loopback::loopback_net(), 61 + k)
}

impl ClientProcs {
    /// Starts `n` worker processes of `jepsen` (this executable) running
    /// `workload` against `endpoints`; their ops go into `rec`, their logs
    /// under `dir`.
    pub fn start(
        jepsen: &Path,
        n: usize,
        endpoints: &[String],
        workload: crate::workload::Kind,
        seed: u64,
        rec: &Arc<Recorder>,
        dir: &Path,
    ) -> anyhow::Result<ClientProcs> {
        let mut procs = Vec::new();
        for k in 0..n {
            let ip = client_ip(k);
            let log = std::fs::File::create(dir.join(format!("client{k}.log")))?;
            let mut child = Command::new(jepsen)
                .arg("worker")
                .args(["--endpoints", &endpoints.join(",")])
                .args(["--workload", &plain(&workload)])
                .args(["--seed", &(seed.wrapping_mul(31) + k as u64).to_string()])
                .args(["--clock-base", &rec.base_ns().to_string()])
                .args([
                    "--first-process",
                    &((k as u64 + 1) * PROCESS_SPAN).to_string(),
                ])
                .args(["--local-address", &ip])
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("cannot start {} worker", jepsen.display()))?;
            let stdout = child.stdout.take().context("worker stdout")?;
            let rec = rec.clone();
            let reader = tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    match serde_json::from_str::<Op>(&line) {
                        Ok(op) => rec.insert(op),
                        Err(e) => {
                            tracing::warn!(error = %e, line, "unreadable op from a client process")
                        }
                    }
                }
            });
            procs.push(ClientProc {
                ip,
                child,
                paused: false,
                reader,
            });
        }
        Ok(ClientProcs { procs })
    }

    fn signal(&self, k: usize, sig: Signal) -> anyhow::Result<()> {
        let pid = self.procs[k]
            .child
            .id()
            .context("the client process has exited")?;
        kill(Pid::from_raw(pid as i32), sig)
            .with_context(|| format!("cannot send {sig} to client {k}"))
    }

    /// SIGSTOPs client process `k`.
    pub fn pause(&mut self, k: usize) -> anyhow::Result<()> {
        self.signal(k, Signal::SIGSTOP)?;
        self.procs[k].paused = true;
        Ok(())
    }

    /// SIGCONTs every paused client process.
    pub fn resume_all(&mut self) -> anyhow::Result<()> {
        for k in 0..self.procs.len() {
            if self.procs[k].paused {
                self.signal(k, Signal::SIGCONT)?;
                self.procs[k].paused = false;
            }
        }
        Ok(())
    }

    /// Asks every process to stop (they close their sessions, which is
    /// recorded) and waits for their last ops; kills what does not stop.
    pub async fn stop(&mut self) {
        let _ = self.resume_all();
        for k in 0..self.procs.len() {
            let _ = self.signal(k, Signal::SIGTERM);
        }
        for p in &mut self.procs {
            if tokio::time::timeout(Duration::from_secs(30), p.child.wait())
                .await
                .is_err()
            {
                tracing::warn!(ip = %p.ip, "client process did not stop: killed");
                let _ = p.child.start_kill();
                let _ = p.child.wait().await;
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut p.reader).await;
        }
    }
}

fn plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
