//! Certificates and the auth file, read again without a restart: on SIGHUP,
//! and when one of the files changes (checked every two seconds, so that a
//! cert-manager or Vault rotation that only rewrites files is enough). A new
//! file that cannot be used is refused with a log line and the one in force
//! stays; a reload never turns TLS or authentication on or off.
//!
//! What is reloaded: both ports' certificates, keys and CAs (new
//! connections use them, incoming and, for the peer port, outgoing; open
//! ones keep theirs) and the auth file (the next request is checked
//! against it).

use crate::auth::{Authenticator, SharedAuth};
use crate::config::NodeConfig;
use crate::raft::network::PeerNetwork;
use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio_rustls::rustls::ServerConfig;
use tracing::{info, warn};

/// How often the files are looked at for changes.
const POLL: Duration = Duration::from_secs(2);

/// The files a reload reads, with what they looked like last time.
struct Watched {
    files: Vec<PathBuf>,
    seen: Vec<Option<(SystemTime, u64)>>,
}

impl Watched {
    fn new(files: Vec<PathBuf>) -> Watched {
        let seen = files.iter().map(stamp).collect();
        Watched { files, seen }
    }

    /// Whether any file changed since the last call.
    fn changed(&mut self) -> bool {
        let now: Vec<_> = self.files.iter().map(stamp).collect();
        let changed = now != self.seen;
        self.seen = now;
        changed
    }
}

/// A file's modification time and size (a rewrite within one timestamp
/// tick usually changes the size).
fn stamp(path: &PathBuf) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Reloads on SIGHUP and on file changes until `stop`.
pub async fn run(
    config: NodeConfig,
    auth: SharedAuth,
    client_tls: Option<Arc<ArcSwap<ServerConfig>>>,
    peer_tls: Option<(Arc<ArcSwap<ServerConfig>>, PeerNetwork)>,
    mut stop: watch::Receiver<bool>,
) {
    let mut files: Vec<PathBuf> = config.auth_file.iter().cloned().collect();
    if client_tls.is_some() {
        let t = &config.tls_files;
        files.extend(
            [&t.tls_cert, &t.tls_key, &t.tls_ca]
                .into_iter()
                .flatten()
                .cloned(),
        );
    }
    if peer_tls.is_some() {
        let t = &config.tls_files;
        files.extend(
            [&t.peer_tls_cert, &t.peer_tls_key, &t.peer_tls_ca]
                .into_iter()
                .flatten()
                .cloned(),
        );
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return;
    }
    let mut watched = Watched::new(files);
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGHUP; files are still watched");
            None
        }
    };
    let mut tick = tokio::time::interval(POLL);
    loop {
        let why = tokio::select! {
            _ = async {
                match &mut hangup {
                    Some(h) => { h.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => "SIGHUP",
            _ = tick.tick() => {
                if !watched.changed() {
                    continue;
                }
                "a file changed"
            }
            _ = stop.wait_for(|s| *s) => return,
        };
        // A file rewritten in place may be caught half written: let the
        // writer finish before reading.
        tokio::time::sleep(Duration::from_millis(200)).await;
        watched.changed();
        reload(
            &config,
            &auth,
            client_tls.as_deref(),
            peer_tls.as_ref().map(|(t, n)| (t.as_ref(), n)),
            why,
        );
    }
}

fn reload(
    config: &NodeConfig,
    auth: &SharedAuth,
    client_tls: Option<&ArcSwap<ServerConfig>>,
    peer_tls: Option<(&ArcSwap<ServerConfig>, &PeerNetwork)>,
    why: &str,
) {
    if let Some(path) = &config.auth_file {
        match Authenticator::load(path) {
            Ok(new) => {
                auth.store(Arc::new(new));
                metrics::counter!("raftlock_reloads_total", "what" => "auth", "result" => "ok")
                    .increment(1);
                info!(file = %path.display(), why, "auth file reloaded");
            }
            Err(e) => {
                metrics::counter!("raftlock_reloads_total", "what" => "auth", "result" => "refused")
                    .increment(1);
                warn!(file = %path.display(), why, error = %e, "new auth file refused; the previous one stays in force");
            }
        }
    }
    if let Some(tls) = client_tls {
        let fresh = config
            .tls_files
            .resolve()
            .and_then(|t| Ok((t.client_server_config()?, t.expiries())));
        match fresh {
            Ok((Some(server), expiries)) => {
                tls.store(server);
                for (port, expiry) in expiries.into_iter().filter(|(p, _)| *p == "client") {
                    metrics::gauge!("raftlock_tls_cert_expiry_timestamp_seconds", "port" => port)
                        .set(expiry as f64);
                }
                metrics::counter!("raftlock_reloads_total", "what" => "client_tls", "result" => "ok")
                    .increment(1);
                info!(why, "client port certificates reloaded");
            }
            Ok((None, _)) => {
                warn!(why, "client port certificates: the new settings turn TLS off, which a reload does not do; the previous certificates stay in force");
            }
            Err(e) => {
                metrics::counter!("raftlock_reloads_total", "what" => "client_tls", "result" => "refused")
                    .increment(1);
                warn!(why, error = %e, "new client port certificates refused; the previous ones stay in force");
            }
        }
    }
    if let Some((server, network)) = peer_tls {
        let fresh = config
            .tls_files
            .resolve()
            .and_then(|t| Ok((t.peer_server_config()?, t.peer_client(), t.expiries())));
        match fresh {
            Ok((Some(config), Some(client), expiries)) => {
                server.store(config);
                network.replace_tls(client);
                for (port, expiry) in expiries.into_iter().filter(|(p, _)| *p == "peer") {
                    metrics::gauge!("raftlock_tls_cert_expiry_timestamp_seconds", "port" => port)
                        .set(expiry as f64);
                }
                metrics::counter!("raftlock_reloads_total", "what" => "peer_tls", "result" => "ok")
                    .increment(1);
                info!(why, "peer port certificates reloaded");
            }
            Ok(_) => {
                warn!(why, "peer port certificates: the new settings turn TLS off, which a reload does not do; the previous certificates stay in force");
            }
            Err(e) => {
                metrics::counter!("raftlock_reloads_total", "what" => "peer_tls", "result" => "refused")
                    .increment(1);
                warn!(why, error = %e, "new peer port certificates refused; the previous ones stay in force");
            }
        }
    }
}
