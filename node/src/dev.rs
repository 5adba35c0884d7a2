//! `raftlockd dev`: a local cluster of real `raftlockd` processes on
//! loopback. Each node is a child process of this one, with its own data
//! dir and log file; Ctrl-C or SIGTERM stops them all with SIGTERM (so a
//! leader hands over first) and removes a temporary data dir.

use anyhow::{bail, Context};
use clap::Args;
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::StatusRequest;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Flags of `raftlockd dev`.
#[derive(Args, Debug)]
pub struct DevArgs {
    /// Number of nodes (1, 3 or 5 make sense).
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Keep data here (reused by the next run, with the same ports);
    /// default: a temporary directory removed on exit.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Loopback address the nodes bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Serve TLS on the client port and mutual TLS between peers, with a
    /// dev CA and certificates made in the data dir (`tls/`), plus a client
    /// certificate for the `root` identity.
    #[arg(long)]
    tls: bool,
    /// Turn authentication on: writes `auth.toml` with a `root` identity
    /// (all rights; its token is printed) and example team roles.
    #[arg(long)]
    auth: bool,
}

/// Paths of the dev CA's files.
struct DevTls {
    ca: PathBuf,
    node_cert: PathBuf,
    node_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

/// Makes (or reuses) a dev CA, one certificate every node serves and
/// presents to peers (names: localhost, 127.0.0.1 and `host`), and a client
/// certificate with common name `root`.
fn dev_tls(dir: &Path, host: &str) -> anyhow::Result<DevTls> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let tls_dir = dir.join("tls");
    let files = DevTls {
        ca: tls_dir.join("ca.pem"),
        node_cert: tls_dir.join("node.pem"),
        node_key: tls_dir.join("node-key.pem"),
        client_cert: tls_dir.join("root.pem"),
        client_key: tls_dir.join("root-key.pem"),
    };
    if files.ca.exists() && files.node_key.exists() && files.client_key.exists() {
        return Ok(files);
    }
    std::fs::create_dir_all(&tls_dir)?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "raftlock dev CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key)?;
    let leaf = |names: Vec<String>, cn: &str| -> anyhow::Result<(String, String)> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &ca, &ca_key)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if !names.contains(&host.to_owned()) {
        names.push(host.to_owned());
    }
    let (node_cert, node_key) = leaf(names, "raftlock-node")?;
    let (client_cert, client_key) = leaf(vec![], "root")?;
    std::fs::write(&files.ca, ca.pem())?;
    std::fs::write(&files.node_cert, node_cert)?;
    write_private(&files.node_key, &node_key)?;
    std::fs::write(&files.client_cert, client_cert)?;
    write_private(&files.client_key, &client_key)?;
    Ok(files)
}

/// Writes a secret readable by its owner only.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

/// Writes (or reuses) `auth.toml` and returns the root identity's token.
fn dev_auth(dir: &Path) -> anyhow::Result<(PathBuf, String)> {
    let path = dir.join("auth.toml");
    let token_file = dir.join("root.token");
    if path.exists() {
        if let Ok(token) = std::fs::read_to_string(&token_file) {
            return Ok((path, token.trim().to_owned()));
        }
    }
    let token: String = {
        use rand::Rng;
        let bytes: [u8; 24] = rand::thread_rng().gen();
        hex::encode(bytes)
    };
    let text = format!(
        r#"# Written by `raftlockd dev --auth`. Tokens are stored as SHA-256 hashes
# (`printf %s TOKEN | sha256sum`); see docs/security.md.
[roles.root]
rules = [{{ prefix = "", allow = ["read", "lock", "admin"] }}]

[roles.team-a]
rules = [{{ prefix = "team-a/", allow = ["read", "lock"] }}]

[[identities]]
name = "root"
token_sha256 = "{}"
cert_cn = "root"
roles = ["root"]
"#,
        raftlock_node::auth::token_hash(&token)
    );
    std::fs::write(&path, text)?;
    write_private(&token_file, &token)?;
    Ok((path, token))
}

/// Ports chosen on a first run, reused when the data dir is reused (the
/// cluster's membership records them).
#[derive(Serialize, Deserialize)]
struct Layout {
    nodes: Vec<(u64, u16, u16)>,
}

fn free_port(host: &str) -> anyhow::Result<u16> {
    Ok(TcpListener::bind((host, 0))?.local_addr()?.port())
}

fn layout(dir: &Path, nodes: u64, host: &str) -> anyhow::Result<Layout> {
    let file = dir.join("dev.json");
    if let Ok(bytes) = std::fs::read(&file) {
        let layout: Layout = serde_json::from_slice(&bytes).context("dev.json is damaged")?;
        if layout.nodes.len() as u64 != nodes {
            bail!(
                "{} holds a {}-node cluster; pass --nodes {}",
                dir.display(),
                layout.nodes.len(),
                layout.nodes.len()
            );
        }
        return Ok(layout);
    }
    let mut list = Vec::new();
    for id in 1..=nodes {
        list.push((id, free_port(host)?, free_port(host)?));
    }
    let layout = Layout { nodes: list };
    std::fs::write(&file, serde_json::to_vec_pretty(&layout)?)?;
    Ok(layout)
}

fn stop(children: &mut [(u64, Child)]) {
    for (_, child) in children.iter() {
        // SIGTERM, not kill: a leader hands leadership over before exiting.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for (id, child) in children.iter_mut() {
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    eprintln!("node {id} did not stop in time; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
    }
}

async fn wait_for_leader(
    endpoints: &[String],
    within: Duration,
    ca: Option<&Path>,
    token: Option<&str>,
) -> anyhow::Result<u64> {
    let deadline = Instant::now() + within;
    let tls = match ca {
        Some(ca) => Some(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(std::fs::read(ca)?)),
        ),
        None => None,
    };
    let auth: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> = match token {
        Some(t) => Some(format!("Bearer {t}").parse()?),
        None => None,
    };
    loop {
        for e in endpoints {
            let scheme = if tls.is_some() { "https" } else { "http" };
            let mut endpoint = tonic::transport::Endpoint::from_shared(format!("{scheme}://{e}"))?;
            if let Some(tls) = &tls {
                endpoint = endpoint.tls_config(tls.clone())?;
            }
            if let Ok(channel) = endpoint.connect().await {
                let auth = auth.clone();
                let mut c =
                    ClusterClient::with_interceptor(channel, move |mut r: tonic::Request<()>| {
                        if let Some(v) = &auth {
                            r.metadata_mut().insert("authorization", v.clone());
                        }
                        Ok(r)
                    });
                if let Ok(s) = c.status(StatusRequest::default()).await {
                    let s = s.into_inner();
                    if s.leader_id != 0 && s.node_id == s.leader_id {
                        return Ok(s.leader_id);
                    }
                }
            }
        }
        if Instant::now() > deadline {
            bail!("no leader elected within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the dev cluster until `signal`.
pub async fn run(args: DevArgs, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 9 {
        bail!("--nodes must be between 1 and 9");
    }
    let temp;
    let dir = match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            temp = tempfile::Builder::new().prefix("raftlock-dev-").tempdir()?;
            temp.path().to_owned()
        }
    };
    let layout = layout(&dir, args.nodes, &args.host)?;
    let host = &args.host;
    let initial: Vec<String> = layout
        .nodes
        .iter()
        .map(|(id, client, peer)| format!("{id}={host}:{peer}/{host}:{client}"))
        .collect();
    let initial = initial.join(",");
    let exe = std::env::current_exe().context("cannot find the raftlockd executable")?;
    let tls = if args.tls {
        Some(dev_tls(&dir, host).context("cannot make dev certificates")?)
    } else {
        None
    };
    let auth = if args.auth {
        Some(dev_auth(&dir).context("cannot write auth.toml")?)
    } else {
        None
    };
    let mut children = Vec::new();
    let mut metrics = Vec::new();
    for (id, client, peer) in &layout.nodes {
        // Admin ports are picked afresh on every start: nothing refers to
        // them across restarts.
        let metrics_addr = format!("{host}:{}", free_port(host)?);
        metrics.push(metrics_addr.clone());
        let log = std::fs::File::create(dir.join(format!("node-{id}.log")))?;
        let mut cmd = Command::new(&exe);
        if let Some(t) = &tls {
            cmd.arg("--tls-cert").arg(&t.node_cert);
            cmd.arg("--tls-key").arg(&t.node_key);
            cmd.arg("--tls-ca").arg(&t.ca);
            cmd.arg("--peer-tls-cert").arg(&t.node_cert);
            cmd.arg("--peer-tls-key").arg(&t.node_key);
            cmd.arg("--peer-tls-ca").arg(&t.ca);
        }
        if let Some((file, _)) = &auth {
            cmd.arg("--auth-file").arg(file);
        }
        let child = cmd
            .arg("--id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(dir.join(format!("node-{id}")))
            .arg("--listen-client")
            .arg(format!("{host}:{client}"))
            .arg("--listen-peer")
            .arg(format!("{host}:{peer}"))
            .arg("--initial-cluster")
            .arg(&initial)
            .arg("--listen-metrics")
            .arg(&metrics_addr)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start node {id}"))?;
        children.push((*id, child));
    }
    let endpoints: Vec<String> = layout
        .nodes
        .iter()
        .map(|(_, client, _)| format!("{host}:{client}"))
        .collect();
    let leader = match wait_for_leader(
        &endpoints,
        Duration::from_secs(30),
        tls.as_ref().map(|t| t.ca.as_path()),
        auth.as_ref().map(|(_, t)| t.as_str()),
    )
    .await
    {
        Ok(l) => l,
        Err(e) => {
            stop(&mut children);
            bail!("{e}; node logs are in {}", dir.display());
        }
    };
    println!("RAFTLOCK_ENDPOINTS={}", endpoints.join(","));
    if let Some(t) = &tls {
        println!("RAFTLOCK_CACERT={}", t.ca.display());
        println!(
            "# client certificate of the root identity: --cert {} --key {}",
            t.client_cert.display(),
            t.client_key.display()
        );
    }
    if let Some((file, token)) = &auth {
        println!("RAFTLOCK_AUTH_TOKEN={token}");
        println!("# identities and roles: {}", file.display());
    }
    println!(
        "# {} nodes up, leader is node {leader}; data and logs (node-N.log) in {}",
        args.nodes,
        dir.display()
    );
    println!(
        "# metrics, /health and /ready: {}",
        metrics
            .iter()
            .map(|m| format!("http://{m}/metrics"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "# try: export RAFTLOCK_ENDPOINTS={}{}{} && cargo run --release --bin raftlock -- status",
        endpoints.join(","),
        tls.as_ref()
            .map(|t| format!(" RAFTLOCK_CACERT={}", t.ca.display()))
            .unwrap_or_default(),
        auth.as_ref()
            .map(|(_, t)| format!(" RAFTLOCK_AUTH_TOKEN={t}"))
            .unwrap_or_default(),
    );
    println!(
        "# Ctrl-C stops the cluster{}",
        if args.data_dir.is_none() {
            " and deletes its data"
        } else {
            ""
        }
    );

    let exited = async {
        loop {
            for (id, child) in children.iter_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return (*id, status);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let result = tokio::select! {
        _ = signal => Ok(()),
        (id, status) = exited => Err(anyhow::anyhow!("node {id} exited unexpectedly ({status}); see {}", dir.join(format!("node-{id}.log")).display())),
    };
    eprintln!("stopping the cluster");
    stop(&mut children);
    result
}
