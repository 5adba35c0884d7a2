//! Who is calling, and what they may do.
//!
//! Identities come from bearer tokens (`authorization: Bearer <token>`,
//! stored in the auth file only as SHA-256 hashes) or from the common name
//! of a client certificate the TLS layer verified. Each identity has roles;
//! a role is a list of rules, each granting rights on lock names that start
//! with a prefix:
//!
//! - `read`: Describe, List, Validate, Leader, Observe;
//! - `lock`: sessions, Acquire, Release, Campaign, Proclaim, Resign;
//! - `admin`: ForceRelease on the prefix; with the empty prefix also
//!   membership changes, leadership transfer and backups.
//!
//! A session belongs to the identity that created it: session ids are log
//! indexes and easy to guess, so using another identity's session is
//! refused even with `lock` rights on the name.
//!
//! ```toml
//! [roles.team-a]
//! rules = [{ prefix = "team-a/", allow = ["read", "lock"] }]
//! [roles.root]
//! rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]
//!
//! [[identities]]
//! name = "billing-worker"
//! token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! roles = ["team-a"]
//!
//! [[identities]]
//! name = "ops"
//! cert_cn = "ops.example.com"
//! roles = ["root"]
//! ```

use crate::error::NodeError;
use raftlock_proto::reason::{self, Reason};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::{Request, Status};

/// A right on lock names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Look at locks.
    Read,
    /// Hold and wait for locks.
    Lock,
    /// Administer locks (and, on the empty prefix, the cluster).
    Admin,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Lock => "lock",
            Access::Admin => "admin",
        })
    }
}

/// Rights on the names that start with `prefix`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Name prefix ("" = every name).
    pub prefix: String,
    /// Rights granted.
    pub allow: Vec<Access>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    roles: BTreeMap<String, RoleFile>,
    #[serde(default)]
    identities: Vec<IdentityFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    rules: Vec<Rule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    name: String,
    #[serde(default)]
    token_sha256: Option<String>,
    #[serde(default)]
    cert_cn: Option<String>,
    roles: Vec<String>,
}

/// An auth file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file cannot be read or parsed.
    #[error("auth file {path}: {reason}")]
    File {
        /// Path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file is well-formed but inconsistent.
    #[error("auth file {path}: {reason}")]
    Invalid {
        /// Path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The caller of one request, as the services see it.
#[derive(Debug)]
pub struct Caller {
    name: String,
    rules: Vec<Rule>,
    /// Authentication is off, or this is a peer proven by the cluster CA:
    /// everything is allowed and sessions carry no owner.
    unrestricted: bool,
}

impl Caller {
    /// The caller when authentication is off (or a peer on the peer port).
    pub fn unrestricted() -> Arc<Caller> {
        Arc::new(Caller {
            name: String::new(),
            rules: Vec::new(),
            unrestricted: true,
        })
    }

    /// An authenticated identity with these rules.
    pub fn identity(name: &str, rules: Vec<Rule>) -> Caller {
        Caller {
            name: name.to_owned(),
            rules,
            unrestricted: false,
        }
    }

    /// The identity's name ("" without authentication): the owner recorded
    /// on the sessions it creates.
    pub fn name(&self) -> &str {
        if self.unrestricted {
            ""
        } else {
            &self.name
        }
    }

    /// Whether sessions must belong to this caller to be used.
    pub fn checks_ownership(&self) -> bool {
        !self.unrestricted
    }

    /// Whether the caller has `access` on lock `name`.
    pub fn may(&self, access: Access, name: &str) -> bool {
        self.unrestricted
            || self
                .rules
                .iter()
                .any(|r| name.starts_with(&r.prefix) && r.allow.contains(&access))
    }

    /// Whether the caller has `access` on some name.
    pub fn may_any(&self, access: Access) -> bool {
        self.unrestricted || self.rules.iter().any(|r| r.allow.contains(&access))
    }

    /// `access` on `name`, or PERMISSION_DENIED saying what is missing.
    pub fn check(&self, access: Access, name: &str) -> Result<(), NodeError> {
        if self.may(access, name) {
            return Ok(());
        }
        Err(NodeError::PermissionDenied(format!(
            "identity {:?} has no {access} right on lock {name:?} ({})",
            self.name,
            self.covered(access)
        )))
    }

    /// `access` on some name (a session is needed before any lock), or
    /// PERMISSION_DENIED.
    pub fn check_any(&self, access: Access) -> Result<(), NodeError> {
        if self.may_any(access) {
            return Ok(());
        }
        Err(NodeError::PermissionDenied(format!(
            "identity {:?} has no {access} right on any lock name",
            self.name
        )))
    }

    /// Cluster administration: `admin` on every name.
    pub fn check_cluster_admin(&self, what: &str) -> Result<(), NodeError> {
        if self.may(Access::Admin, "")
            && (self.unrestricted || self.rules.iter().any(|r| r.prefix.is_empty()))
        {
            return Ok(());
        }
        Err(NodeError::PermissionDenied(format!(
            "identity {:?} may not {what}: it needs the admin right on every name (prefix \"\")",
            self.name
        )))
    }

    fn covered(&self, access: Access) -> String {
        let prefixes: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.allow.contains(&access))
            .map(|r| format!("{:?}", r.prefix))
            .collect();
        if prefixes.is_empty() {
            format!("it has no {access} right at all")
        } else {
            format!(
                "its {access} right covers names starting with {}",
                prefixes.join(", ")
            )
        }
    }
}

/// Turns a request's credentials into a [`Caller`].
#[derive(Default)]
pub struct Authenticator {
    enabled: bool,
    by_token_hash: HashMap<String, Arc<Caller>>,
    by_cert_cn: HashMap<String, Arc<Caller>>,
}

impl fmt::Debug for Authenticator {
    // Token hashes stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("enabled", &self.enabled)
            .field("tokens", &self.by_token_hash.len())
            .field("certificate_names", &self.by_cert_cn.len())
            .finish()
    }
}

/// SHA-256 of a token, lowercase hex: the form an auth file stores.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Authenticator {
    /// Authentication off: every caller is unrestricted.
    pub fn disabled() -> Authenticator {
        Authenticator::default()
    }

    /// Whether identities are checked.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Reads an auth file.
    pub fn load(path: &Path) -> Result<Authenticator, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|e| AuthError::File {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text).map_err(|reason| AuthError::Invalid {
            path: path.to_owned(),
            reason,
        })
    }

    /// Parses the text of an auth file.
    pub fn parse(text: &str) -> Result<Authenticator, String> {
        let file: AuthFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut auth = Authenticator {
            enabled: true,
            ..Default::default()
        };
        for id in file.identities {
            if id.name.is_empty() || id.name.len() > raftlock_proto::limits::MAX_CLIENT_NAME_LEN {
                return Err(format!(
                    "identity name {:?} must be 1..={} bytes",
                    id.name,
                    raftlock_proto::limits::MAX_CLIENT_NAME_LEN
                ));
            }
            let mut rules = Vec::new();
            for role in &id.roles {
                let r = file
                    .roles
                    .get(role)
                    .ok_or_else(|| format!("identity {:?} has unknown role {role:?}", id.name))?;
                rules.extend(r.rules.iter().cloned());
            }
            let caller = Arc::new(Caller::identity(&id.name, rules));
            if id.token_sha256.is_none() && id.cert_cn.is_none() {
                return Err(format!(
                    "identity {:?} has neither token_sha256 nor cert_cn",
                    id.name
                ));
            }
            if let Some(h) = id.token_sha256 {
                let h = h.trim().to_ascii_lowercase();
                if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(format!(
                        "identity {:?}: token_sha256 must be 64 hex digits (sha256sum of the token)",
                        id.name
                    ));
                }
                if auth.by_token_hash.insert(h, caller.clone()).is_some() {
                    return Err(format!("identity {:?} reuses another's token", id.name));
                }
            }
            if let Some(cn) = id.cert_cn {
                if auth.by_cert_cn.insert(cn.clone(), caller).is_some() {
                    return Err(format!("two identities claim certificate name {cn:?}"));
                }
            }
        }
        Ok(auth)
    }

    /// The caller of `req`: from its bearer token, else from its verified
    /// client certificate; UNAUTHENTICATED when neither names an identity.
    pub fn authenticate<T>(&self, req: &Request<T>) -> Result<Arc<Caller>, Status> {
        self.authenticate_with(req).map(|(c, _)| c)
    }

    /// The caller the `credential` a stream opened with names in this
    /// file, if it still names one.
    fn resolve(&self, credential: &Credential) -> Option<Arc<Caller>> {
        if !self.enabled {
            return Some(Caller::unrestricted());
        }
        match credential {
            Credential::None => None,
            Credential::Token(hash) => self.by_token_hash.get(hash).cloned(),
            Credential::Cert(cn) => self.by_cert_cn.get(cn).cloned(),
        }
    }

    /// [`Authenticator::authenticate`], with the credential it went by.
    fn authenticate_with<T>(&self, req: &Request<T>) -> Result<(Arc<Caller>, Credential), Status> {
        if !self.enabled {
            return Ok((Caller::unrestricted(), Credential::None));
        }
        if let Some(value) = req.metadata().get("authorization") {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .ok_or_else(|| {
                    reason::status(
                        Reason::Unauthenticated,
                        "the authorization header must be \"Bearer <token>\"",
                    )
                })?;
            let hash = token_hash(token);
            return self
                .by_token_hash
                .get(&hash)
                .cloned()
                .map(|c| (c, Credential::Token(hash)))
                .ok_or_else(|| reason::status(Reason::Unauthenticated, "unknown bearer token"));
        }
        if let Some(certs) = req.peer_certs() {
            if let Some(cn) = certs.first().and_then(|c| common_name(c.as_ref())) {
                return match self.by_cert_cn.get(&cn).cloned() {
                    Some(c) => Ok((c, Credential::Cert(cn))),
                    None => Err(reason::status(
                        Reason::Unauthenticated,
                        format!("client certificate {cn:?} names no identity in the auth file"),
                    )),
                };
            }
        }
        Err(reason::status(Reason::Unauthenticated,
            "authentication is required: send \"authorization: Bearer <token>\" or a client certificate",
        ))
    }
}

/// The subject common name of a DER certificate.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}

/// What a request authenticated with, kept so that a stream can look its
/// caller up again in the auth file in force.
#[derive(Clone, Debug)]
enum Credential {
    /// Authentication was off.
    None,
    /// A bearer token, by its hash.
    Token(String),
    /// A client certificate, by its common name.
    Cert(String),
}

/// A long-lived stream's caller, looked up again in the auth file in force
/// each time the stream acts: an identity removed on reload (or whose
/// token or certificate name changed) stops renewing its sessions,
/// receiving watch events and running pipelined calls, instead of keeping
/// the rights it had when the stream opened.
#[derive(Clone, Debug)]
pub struct StreamCaller {
    auth: Option<SharedAuth>,
    credential: Credential,
    opened: Arc<Caller>,
}

impl StreamCaller {
    /// A caller that is never looked up again (authentication off, or a
    /// request that reached a service without the interceptor).
    pub fn fixed(caller: Arc<Caller>) -> StreamCaller {
        StreamCaller {
            auth: None,
            credential: Credential::None,
            opened: caller,
        }
    }

    /// The caller now: its identity as the auth file in force has it, or
    /// UNAUTHENTICATED if that file no longer knows the credential.
    pub fn now(&self) -> Result<Arc<Caller>, NodeError> {
        let Some(auth) = &self.auth else {
            return Ok(self.opened.clone());
        };
        auth.load().resolve(&self.credential).ok_or_else(|| {
            NodeError::Unauthenticated(format!(
                "identity {:?} is no longer in the auth file (it was reloaded)",
                self.opened.name()
            ))
        })
    }

    /// The caller when the stream opened.
    pub fn opened(&self) -> &Arc<Caller> {
        &self.opened
    }
}

/// Authenticates `req` against the auth file in force: its caller now, and
/// the same caller to be looked up again as a stream goes on.
pub fn authenticate_stream<T>(auth: &SharedAuth, req: &Request<T>) -> Result<StreamCaller, Status> {
    let (caller, credential) = auth.load().authenticate_with(req)?;
    Ok(StreamCaller {
        auth: Some(auth.clone()),
        credential,
        opened: caller,
    })
}

/// The caller of a streaming request, to be looked up again as it goes.
pub fn stream_caller<T>(req: &Request<T>) -> Result<StreamCaller, Status> {
    match req.extensions().get::<StreamCaller>() {
        Some(s) => Ok(s.clone()),
        None => caller(req).map(StreamCaller::fixed),
    }
}

/// The caller an interceptor attached to the request.
pub fn caller<T>(req: &Request<T>) -> Result<Arc<Caller>, Status> {
    req.extensions()
        .get::<Arc<Caller>>()
        .cloned()
        .ok_or_else(|| {
            reason::status(
                Reason::Internal,
                "request reached a service without authentication",
            )
        })
}

/// The auth file in force, replaced whole when it is read again (SIGHUP,
/// or the file changed): a request sees the old file or the new one,
/// never a mix.
pub type SharedAuth = Arc<arc_swap::ArcSwap<Authenticator>>;

/// A [`SharedAuth`] holding `auth`.
pub fn shared(auth: Authenticator) -> SharedAuth {
    Arc::new(arc_swap::ArcSwap::from_pointee(auth))
}

/// A tonic interceptor that authenticates every request and attaches the
/// [`Caller`] for the service to check.
#[derive(Clone)]
pub struct Authenticate(pub SharedAuth);

impl tonic::service::Interceptor for Authenticate {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let (caller, credential) = self.0.load().authenticate_with(&req).inspect_err(|s| {
            metrics::counter!("raftlock_auth_failures_total").increment(1);
            tracing::info!(remote = ?req.remote_addr(), reason = %s.message(), "request refused: not authenticated");
        })?;
        req.extensions_mut().insert(StreamCaller {
            auth: Some(self.0.clone()),
            credential,
            opened: caller.clone(),
        });
        req.extensions_mut().insert(caller);
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        [roles.team-a]
        rules = [{ prefix = "team-a/", allow = ["read", "lock"] }]
        [roles.reader]
        rules = [{ prefix = "", allow = ["read"] }]
        [roles.root]
        rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]
        [[identities]]
        name = "a"
        token_sha256 = "HASH_A"
        roles = ["team-a", "reader"]
        [[identities]]
        name = "ops"
        cert_cn = "ops.example"
        roles = ["root"]
    "#;

    fn auth() -> Authenticator {
        Authenticator::parse(&FILE.replace("HASH_A", &token_hash("secret-a"))).unwrap()
    }

    fn with_token(t: &str) -> Request<()> {
        let mut r = Request::new(());
        r.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
        r
    }

    #[test]
    fn tokens_map_to_identities_and_unknown_ones_are_refused() {
        let a = auth();
        let c = a.authenticate(&with_token("secret-a")).unwrap();
        assert_eq!(c.name(), "a");
        let e = a.authenticate(&with_token("nope")).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        let e = a.authenticate(&Request::new(())).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("Bearer"));
    }

    #[test]
    fn rules_are_per_prefix_and_per_right() {
        let c = auth().authenticate(&with_token("secret-a")).unwrap();
        assert!(c.may(Access::Lock, "team-a/x"));
        assert!(!c.may(Access::Lock, "team-b/x"));
        assert!(c.may(Access::Read, "team-b/x"));
        assert!(!c.may(Access::Admin, "team-a/x"));
        let e = c.check(Access::Lock, "team-b/x").unwrap_err();
        assert_eq!(e.reason(), raftlock_proto::reason::Reason::PermissionDenied);
        assert!(e.message().contains("\"team-a/\""), "{}", e.message());
        assert!(c.check_cluster_admin("change membership").is_err());
    }

    #[test]
    fn disabled_auth_lets_everyone_do_everything() {
        let c = Authenticator::disabled()
            .authenticate(&Request::new(()))
            .unwrap();
        assert!(c.may(Access::Admin, "x") && c.check_cluster_admin("x").is_ok());
        assert_eq!(c.name(), "");
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        assert!(
            Authenticator::parse("[[identities]]\nname = \"x\"\nroles = []\n")
                .unwrap_err()
                .contains("neither")
        );
        assert!(Authenticator::parse(
            "[[identities]]\nname = \"x\"\ntoken_sha256 = \"abc\"\nroles = []\n"
        )
        .unwrap_err()
        .contains("64 hex"));
        assert!(Authenticator::parse(
            "[[identities]]\nname = \"x\"\ncert_cn = \"x\"\nroles = [\"nope\"]\n"
        )
        .unwrap_err()
        .contains("unknown role"));
    }
}
