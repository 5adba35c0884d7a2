//! How the launcher (and whoever uses it) reaches nodes that serve TLS or
//! want a token.

use std::time::Duration;

/// TLS trust and credentials for calls to the nodes' client ports.
#[derive(Clone, Default)]
pub struct Access {
    /// PEM CA of the nodes' client-port certificates (TLS on when set).
    pub ca_pem: Option<Vec<u8>>,
    /// Bearer token.
    pub token: Option<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("tls", &self.ca_pem.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Access {
    /// A gRPC channel to `addr` (the token is not part of it: see
    /// [`Access::request`]).
    pub async fn channel(
        &self,
        addr: &str,
    ) -> Result<tonic::transport::Channel, tonic::transport::Error> {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        let mut e = tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}"))?
            .connect_timeout(Duration::from_secs(1));
        if let Some(ca) = &self.ca_pem {
            e = e.tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(ca)),
            )?;
        }
        e.connect().await
    }

    /// A request carrying the token, if any.
    pub fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        if let Some(v) = self
            .token
            .as_ref()
            .and_then(|t| format!("Bearer {t}").parse().ok())
        {
            r.metadata_mut().insert("authorization", v);
        }
        r
    }
}
