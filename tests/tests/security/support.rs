//! What the security tests share: certificates made by the documented
//! openssl recipe, an auth file with identities and rights, and calls made
//! as a given identity.

pub(crate) use raftlock_client::{Client, Error, Options, Tls};
pub(crate) use raftlock_proto::reason::{self, Reason};
pub(crate) use raftlock_proto::v1::election_client::ElectionClient;
pub(crate) use raftlock_proto::v1::lock_client::LockClient;
pub(crate) use raftlock_proto::v1::raft_client::RaftClient;
pub(crate) use raftlock_proto::v1::session_client::SessionClient;
pub(crate) use raftlock_proto::v1::*;
pub(crate) use raftlock_tests::{binary, Access, Cluster};
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::time::Duration;
pub(crate) use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
pub(crate) use tonic::Code;

pub(crate) fn workspace_root() -> PathBuf {
    // target/debug/raftlockd -> the checkout.
    binary("raftlockd")
        .ancestors()
        .nth(3)
        .expect("binary under <root>/target/<profile>")
        .to_owned()
}

/// Runs the documented recipe: `make-certs.sh DIR 127.0.0.1 localhost`.
pub(crate) fn make_certs(dir: &Path, extra: &[&str]) {
    let script = workspace_root().join("deploy/tls/make-certs.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(dir)
        .args(extra)
        .output()
        .expect("bash runs the recipe");
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub(crate) fn tls_flags(dir: &Path) -> Vec<String> {
    let p = |f: &str| dir.join(f).display().to_string();
    vec![
        "--tls-cert".into(),
        p("node.pem"),
        "--tls-key".into(),
        p("node-key.pem"),
        "--tls-ca".into(),
        p("ca.pem"),
        "--peer-tls-cert".into(),
        p("node.pem"),
        "--peer-tls-key".into(),
        p("node-key.pem"),
        "--peer-tls-ca".into(),
        p("ca.pem"),
    ]
}

/// What the auth file stores: `printf %s TOKEN | sha256sum`.
pub(crate) fn hash(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// An auth file: `a` may lock under team-a/, `b` under team-a/ and team-b/,
/// `root` may do everything, and the certificate named `ops` is root too.
pub(crate) fn auth_file(dir: &Path) -> PathBuf {
    let path = dir.join("auth.toml");
    let text = format!(
        r#"
[roles.team-a]
rules = [{{ prefix = "team-a/", allow = ["read", "lock"] }}]
[roles.team-b]
rules = [{{ prefix = "team-b/", allow = ["read", "lock"] }}]
[roles.root]
rules = [{{ prefix = "", allow = ["read", "lock", "admin"] }}]

[[identities]]
name = "a"
token_sha256 = "{}"
roles = ["team-a"]

[[identities]]
name = "b"
token_sha256 = "{}"
roles = ["team-a", "team-b"]

[[identities]]
name = "root"
token_sha256 = "{}"
cert_cn = "ops"
roles = ["root"]
"#,
        hash("token-a"),
        hash("token-b"),
        hash("token-root")
    );
    std::fs::write(&path, text).expect("auth file");
    path
}

pub(crate) async fn client_as(cluster: &Cluster, token: &str) -> Client {
    let opts = Options {
        token: Some(token.into()),
        tls: cluster.access.ca_pem.clone().map(Tls::new),
        ..Default::default()
    };
    Client::connect_with(cluster.endpoints(), opts)
        .await
        .expect("client connects")
}

/// A raw access as `token` (for calls the library would never make).
pub(crate) fn raw_as(cluster: &Cluster, token: Option<&str>) -> Access {
    Access {
        ca_pem: cluster.access.ca_pem.clone(),
        token: token.map(str::to_owned),
    }
}

pub(crate) fn uuid() -> Vec<u8> {
    uuid::Uuid::now_v7().as_bytes().to_vec()
}

pub(crate) async fn leader_addr(cluster: &Cluster) -> String {
    let id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    cluster.nodes()[(id - 1) as usize].client_addr.clone()
}

/// Runs a raw call against the current leader, again if the leader moved
/// meanwhile (two loaded cores can cost a test cluster its first leader):
/// these tests are about the answers, not about failover.
pub(crate) async fn on_leader<T, F, Fut>(cluster: &Cluster, mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let give_up = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match call(leader_addr(cluster).await).await {
            Err(e) if e.code() == Code::Unavailable && tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            r => return r,
        }
    }
}

/// The call was refused with `code`, and its message names `text`.
pub(crate) fn expect<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, text: &str) {
    let e = r.expect_err("refused");
    assert_eq!(e.code(), code, "{e:?}");
    assert!(
        e.message().contains(text),
        "{:?} lacks {text:?}",
        e.message()
    );
    println!("{code:?}: {}", e.message());
}
