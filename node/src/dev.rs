//! `raftlockd dev`: a local cluster of real `raftlockd` processes on
//! loopback. Each node is a child process of this one, with its own data
//! dir and log file; Ctrl-C or SIGTERM stops them all with SIGTERM (so a
//! leader hands over first) and removes a temporary data dir.

use anyhow::{bail, Context};
use clap::Args;
use raftlock_local::{Hosts, LocalCluster, Options};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// Runs the dev cluster until `signal`.
pub async fn run(args: DevArgs, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 9 {
        bail!("--nodes must be between 1 and 9");
    }
    let temp;
    let dir = match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            // Dev data dirs made before the launcher was shared recorded
            // their ports under this name.
            let (old, new) = (d.join("dev.json"), d.join("ports.json"));
            if old.exists() && !new.exists() {
                std::fs::rename(&old, &new)?;
            }
            d.clone()
        }
        None => {
            temp = tempfile::Builder::new().prefix("raftlock-dev-").tempdir()?;
            temp.path().to_owned()
        }
    };
    let host = &args.host;
    let exe = std::env::current_exe().context("cannot find the raftlockd executable")?;
    let mut options = Options::new(exe, args.nodes);
    options.hosts = Hosts::Shared(host.clone());
    options.dir = Some(dir.clone());
    options.keep_ports = true;
    let tls = if args.tls {
        let t = dev_tls(&dir, host).context("cannot make dev certificates")?;
        for flag in ["--tls", "--peer-tls"] {
            options.args.extend([
                format!("{flag}-cert").into(),
                t.node_cert.clone().into(),
                format!("{flag}-key").into(),
                t.node_key.clone().into(),
                format!("{flag}-ca").into(),
                t.ca.clone().into(),
            ]);
        }
        options.access.ca_pem = Some(std::fs::read(&t.ca)?);
        Some(t)
    } else {
        None
    };
    let auth = if args.auth {
        let (file, token) = dev_auth(&dir).context("cannot write auth.toml")?;
        options
            .args
            .extend(["--auth-file".into(), file.clone().into()]);
        options.access.token = Some(token.clone());
        Some((file, token))
    } else {
        None
    };
    let mut cluster = match LocalCluster::start(options).await {
        Ok(c) => c,
        Err(e) => bail!("{e}\nnode logs are in {}", dir.display()),
    };
    let leader = cluster.wait_for_leader(Duration::from_secs(30)).await?;
    // Every node names the leader before the endpoints are printed: a
    // script's first call may go to any of them (the README's curl example
    // asks the first for the leader's address).
    cluster.wait_for_followers(Duration::from_secs(30)).await?;
    let endpoints = cluster.endpoints();
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
        cluster
            .nodes()
            .iter()
            .filter_map(|n| n.metrics_addr.as_ref())
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

    let result = {
        let exited = async {
            loop {
                if let Some((id, status)) = cluster.any_exited() {
                    return (id, status);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::select! {
            _ = signal => Ok(()),
            (id, status) = exited => Err(anyhow::anyhow!("node {id} exited unexpectedly ({status}); see {}", dir.join(format!("node-{id}.log")).display())),
        }
    };
    eprintln!("stopping the cluster");
    // SIGTERM, not kill: a leader hands leadership over before exiting.
    for id in cluster.stop(Duration::from_secs(15)).await {
        eprintln!("node {id} did not stop in time; it was killed");
    }
    result
}
