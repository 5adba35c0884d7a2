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

mod request;

pub use request::{
    authenticate_stream, caller, shared, stream_caller, Authenticate, SharedAuth, StreamCaller,
};

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

#[cfg(test)]
mod tests;
