//! TLS on both ports (rustls through tonic).
//!
//! - Client port: `--tls-cert/--tls-key` serve TLS; `--tls-ca` also asks
//!   clients for a certificate signed by that CA (optional: a client may
//!   still authenticate with a bearer token instead).
//! - Peer port: `--peer-tls-cert/--peer-tls-key/--peer-tls-ca` turn on
//!   mutual TLS. A node then accepts Raft traffic only from certificates the
//!   cluster CA signed, and presents its own when it calls a peer.

use crate::error::ConfigError;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// TLS flags (also the `[tls]` table of the config file).
#[derive(Args, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsArgs {
    /// PEM certificate (chain) served on the client port; turns TLS on there.
    #[arg(long, requires = "tls_key")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA whose client certificates are accepted as identities (their
    /// subject common name is matched against the auth file's `cert_cn`).
    #[arg(long, requires = "tls_cert")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// PEM certificate this node presents on the peer port and to peers.
    #[arg(long, requires_all = ["peer_tls_key", "peer_tls_ca"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_tls_cert: Option<PathBuf>,
    /// PEM private key of --peer-tls-cert.
    #[arg(long, requires = "peer_tls_cert")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_tls_key: Option<PathBuf>,
    /// PEM cluster CA: peers must present certificates it signed.
    #[arg(long, requires = "peer_tls_cert")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_tls_ca: Option<PathBuf>,
}

/// PEM bytes: certificate, key, and the CA whose certificates the other
/// side must present (optional on the client port, required between peers).
type Material<Ca> = (Vec<u8>, Vec<u8>, Ca);

/// TLS material, read and checked at start.
#[derive(Clone, Default)]
pub struct Tls {
    client: Option<Material<Option<Vec<u8>>>>,
    peer: Option<Material<Vec<u8>>>,
}

impl std::fmt::Debug for Tls {
    // Keys stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client_port", &self.client.is_some())
            .field("peer_port", &self.peer.is_some())
            .finish()
    }
}

fn read_pem(setting: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| ConfigError::Invalid {
        setting,
        reason: format!("{}: {e}", path.display()),
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(ConfigError::Invalid {
            setting,
            reason: format!("{} is not a PEM file", path.display()),
        });
    }
    Ok(bytes)
}

impl TlsArgs {
    /// Checks the settings go together and reads the files.
    pub fn resolve(&self) -> Result<Tls, ConfigError> {
        let (cert, key, ca) = (
            self.tls_cert.clone(),
            self.tls_key.clone(),
            self.tls_ca.clone(),
        );
        let client = match (cert, key) {
            (Some(c), Some(k)) => Some((
                read_pem("--tls-cert", &c)?,
                read_pem("--tls-key", &k)?,
                ca.map(|p| read_pem("--tls-ca", &p)).transpose()?,
            )),
            (None, None) if ca.is_none() => None,
            _ => {
                return Err(ConfigError::Invalid {
                    setting: "--tls-cert",
                    reason: "--tls-cert and --tls-key go together (and --tls-ca needs them)".into(),
                })
            }
        };
        let peer = match (
            self.peer_tls_cert.clone(),
            self.peer_tls_key.clone(),
            self.peer_tls_ca.clone(),
        ) {
            (Some(c), Some(k), Some(a)) => Some((
                read_pem("--peer-tls-cert", &c)?,
                read_pem("--peer-tls-key", &k)?,
                read_pem("--peer-tls-ca", &a)?,
            )),
            (None, None, None) => None,
            _ => {
                return Err(ConfigError::Invalid {
                    setting: "--peer-tls-cert",
                    reason: "--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together".into(),
                })
            }
        };
        Ok(Tls { client, peer })
    }
}

impl Tls {
    /// The client port's TLS configuration, if TLS is on there. It offers both
    /// HTTP/2 (gRPC) and HTTP/1.1 (the JSON API: `fetch` and most HTTP
    /// clients speak 1.1) by ALPN; tonic's own acceptor offers only h2.
    /// A client certificate signed by `--tls-ca` is asked for, not required.
    pub fn client_server_config(
        &self,
    ) -> Result<Option<std::sync::Arc<tokio_rustls::rustls::ServerConfig>>, ConfigError> {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
        use tokio_rustls::rustls::{server::WebPkiClientVerifier, RootCertStore, ServerConfig};
        let Some((cert, key, ca)) = &self.client else {
            return Ok(None);
        };
        let bad = |setting: &'static str, e: &dyn std::fmt::Display| ConfigError::Invalid {
            setting,
            reason: e.to_string(),
        };
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("--tls-cert", &e))?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| bad("--tls-key", &e))?;
        let builder = ServerConfig::builder();
        let builder = match ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(ca) {
                    roots
                        .add(c.map_err(|e| bad("--tls-ca", &e))?)
                        .map_err(|e| bad("--tls-ca", &e))?;
                }
                let verifier = WebPkiClientVerifier::builder(roots.into())
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| bad("--tls-ca", &e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| bad("--tls-cert", &e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Some(std::sync::Arc::new(config)))
    }

    /// The peer port's TLS configuration, if TLS is on there: mutual, a
    /// certificate signed by the cluster CA required of every caller.
    pub fn peer_server_config(
        &self,
    ) -> Result<Option<std::sync::Arc<tokio_rustls::rustls::ServerConfig>>, ConfigError> {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
        use tokio_rustls::rustls::{server::WebPkiClientVerifier, RootCertStore, ServerConfig};
        let Some((cert, key, ca)) = &self.peer else {
            return Ok(None);
        };
        let bad = |setting: &'static str, e: &dyn std::fmt::Display| ConfigError::Invalid {
            setting,
            reason: e.to_string(),
        };
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("--peer-tls-cert", &e))?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| bad("--peer-tls-key", &e))?;
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca) {
            roots
                .add(c.map_err(|e| bad("--peer-tls-ca", &e))?)
                .map_err(|e| bad("--peer-tls-ca", &e))?;
        }
        let verifier = WebPkiClientVerifier::builder(roots.into())
            .build()
            .map_err(|e| bad("--peer-tls-ca", &e))?;
        let mut config = ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| bad("--peer-tls-cert", &e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Some(std::sync::Arc::new(config)))
    }

    /// When each port's served certificate expires (Unix seconds), for the
    /// certificate-expiry alert.
    pub fn expiries(&self) -> Vec<(&'static str, i64)> {
        let not_after = |pem: &[u8]| {
            let (_, pem) = x509_parser::pem::parse_x509_pem(pem).ok()?;
            let cert = pem.parse_x509().ok()?;
            Some(cert.validity().not_after.timestamp())
        };
        let mut out = Vec::new();
        if let Some(t) = self
            .client
            .as_ref()
            .and_then(|(cert, _, _)| not_after(cert))
        {
            out.push(("client", t));
        }
        if let Some(t) = self.peer.as_ref().and_then(|(cert, _, _)| not_after(cert)) {
            out.push(("peer", t));
        }
        out
    }

    /// TLS for the client listener, if configured.
    pub fn client_server(&self) -> Option<ServerTlsConfig> {
        self.client.as_ref().map(|(cert, key, ca)| {
            let cfg = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
            match ca {
                Some(ca) => cfg
                    .client_ca_root(Certificate::from_pem(ca))
                    .client_auth_optional(true),
                None => cfg,
            }
        })
    }

    /// Mutual TLS for the peer listener, if configured: a client
    /// certificate signed by the cluster CA is required.
    pub fn peer_server(&self) -> Option<ServerTlsConfig> {
        self.peer.as_ref().map(|(cert, key, ca)| {
            ServerTlsConfig::new()
                .identity(Identity::from_pem(cert, key))
                .client_ca_root(Certificate::from_pem(ca))
                .client_auth_optional(false)
        })
    }

    /// What this node presents and trusts when it calls a peer.
    pub fn peer_client(&self) -> Option<ClientTlsConfig> {
        self.peer.as_ref().map(|(cert, key, ca)| {
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .identity(Identity::from_pem(cert, key))
        })
    }

    /// Whether the client port serves TLS.
    pub fn client_enabled(&self) -> bool {
        self.client.is_some()
    }
}
