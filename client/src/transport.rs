//! The connection to a cluster: leader discovery, a cached leader, and
//! retries that follow the leader with exponential backoff and jitter.

use crate::error::Error;
use parking_lot::Mutex;
use raftlock_proto::LEADER_METADATA_KEY;
use rand::Rng;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// A connection to one node, with the bearer token (if any) added to every
/// call.
pub(crate) type Transport = InterceptedService<Channel, AddToken>;

/// Adds `authorization: Bearer <token>` to each request.
#[derive(Clone)]
pub(crate) struct AddToken(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for AddToken {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// TLS settings for talking to a cluster whose client port serves TLS: the
/// CA that signed the nodes' certificates and, for certificate
/// authentication, this client's own certificate and key (PEM).
///
/// ```no_run
/// # fn f() -> Result<(), raftlock_client::Error> {
/// use raftlock_client::{Options, Tls};
/// let tls = Tls::from_files("certs/ca.pem", Some(("certs/ops.pem", "certs/ops-key.pem")))?;
/// let opts = Options { tls: Some(tls), ..Default::default() };
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Tls {
    ca: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain: Option<String>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client_certificate", &self.identity.is_some())
            .field("domain", &self.domain)
            .finish()
    }
}

impl Tls {
    /// Trusts the CA in `ca_pem` (PEM text).
    ///
    /// ```
    /// let tls = raftlock_client::Tls::new(b"-----BEGIN CERTIFICATE-----\n...".to_vec());
    /// ```
    pub fn new(ca_pem: impl Into<Vec<u8>>) -> Tls {
        Tls {
            ca: ca_pem.into(),
            identity: None,
            domain: None,
        }
    }

    /// Presents a client certificate (PEM certificate and key), for clusters
    /// that authenticate clients by certificate.
    ///
    /// ```
    /// let tls = raftlock_client::Tls::new(b"ca".to_vec()).with_identity(b"cert".to_vec(), b"key".to_vec());
    /// ```
    pub fn with_identity(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Tls {
        self.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Checks the nodes' certificates against this name instead of the
    /// host in each endpoint.
    ///
    /// ```
    /// let tls = raftlock_client::Tls::new(b"ca".to_vec()).with_domain("raftlock.internal");
    /// ```
    pub fn with_domain(mut self, name: impl Into<String>) -> Tls {
        self.domain = Some(name.into());
        self
    }

    /// Reads the CA and, optionally, a (certificate, key) pair from PEM files.
    ///
    /// ```no_run
    /// # fn f() -> Result<(), raftlock_client::Error> {
    /// let tls = raftlock_client::Tls::from_files("ca.pem", None::<(&str, &str)>)?;
    /// # Ok(()) }
    /// ```
    pub fn from_files<P: AsRef<std::path::Path>>(
        ca: P,
        identity: Option<(P, P)>,
    ) -> Result<Tls, Error> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| Error::Tls(format!("{}: {e}", p.display())))
        };
        let mut tls = Tls::new(read(ca.as_ref())?);
        if let Some((cert, key)) = identity {
            tls = tls.with_identity(read(cert.as_ref())?, read(key.as_ref())?);
        }
        Ok(tls)
    }

    fn config(&self) -> ClientTlsConfig {
        let mut c = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca));
        if let Some((cert, key)) = &self.identity {
            c = c.identity(Identity::from_pem(cert, key));
        }
        if let Some(d) = &self.domain {
            c = c.domain_name(d.clone());
        }
        c
    }
}

/// Tuning for a [`Client`](crate::Client).
///
/// ```
/// use std::time::Duration;
/// let opts = raftlock_client::Options { deadline: Duration::from_secs(30), ..Default::default() };
/// assert!(opts.attempt_timeout < opts.deadline);
/// ```
#[derive(Clone)]
pub struct Options {
    /// How long one logical call may take, retries included.
    pub deadline: Duration,
    /// How long one attempt may take (a waiting Acquire gets its wait on top).
    pub attempt_timeout: Duration,
    /// First retry delay; doubles up to `max_backoff`, with jitter.
    pub initial_backoff: Duration,
    /// Longest retry delay.
    pub max_backoff: Duration,
    /// TLS to the nodes' client port (`None`: plain HTTP/2).
    pub tls: Option<Tls>,
    /// Bearer token sent with every call, for clusters with authentication
    /// on. Never printed by `Debug`.
    pub token: Option<String>,
    /// Send acquires and releases over one `Pipeline` stream per node,
    /// shared by all of this client's sessions (default), rather than as
    /// one unary call each. Calls behave the same either way; the stream
    /// costs the client and the leader less CPU per call when many are in
    /// flight. A node without the method gets unary calls.
    pub pipeline: bool,
    /// The local IP address outgoing connections are bound to (`None`: the
    /// kernel picks one). For hosts with several addresses, where a
    /// firewall or a node's per-source rules must see one of them.
    ///
    /// ```
    /// let options = raftlock_client::Options {
    ///     local_address: Some("127.0.0.1".parse().unwrap()),
    ///     ..Default::default()
    /// };
    /// assert!(options.local_address.is_some());
    /// ```
    pub local_address: Option<std::net::IpAddr>,
    /// How long a TCP (and TLS) connection to one node may take to open.
    /// A node that does not answer in time is skipped for the next one;
    /// the call as a whole still has `deadline`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = raftlock_client::Options {
    ///     connect_timeout: Duration::from_millis(500),
    ///     ..Default::default()
    /// };
    /// assert!(options.connect_timeout < options.deadline);
    /// ```
    pub connect_timeout: Duration,
    /// The host name sessions report, shown to operators with the locks
    /// they hold (`raftlock describe`, `raftlock sessions`). `None`: this
    /// machine's host name; `Some("")`: none.
    ///
    /// ```
    /// let options = raftlock_client::Options {
    ///     host: Some("billing-7f9c".into()),
    ///     ..Default::default()
    /// };
    /// assert_eq!(options.host.as_deref(), Some("billing-7f9c"));
    /// ```
    pub host: Option<String>,
    /// The process id sessions report. `None`: this process's; `Some(0)`:
    /// none.
    ///
    /// ```
    /// let options = raftlock_client::Options { pid: Some(0), ..Default::default() };
    /// assert_eq!(options.pid, Some(0));
    /// ```
    pub pid: Option<u32>,
    /// The client name of sessions created with [`Client::session`](crate::Client::session)
    /// (`None`: none), shown to operators with the locks they hold.
    ///
    /// ```
    /// let options = raftlock_client::Options {
    ///     client_name: Some("billing-worker".into()),
    ///     ..Default::default()
    /// };
    /// assert!(options.client_name.is_some());
    /// ```
    pub client_name: Option<String>,
}

/// The environment variables [`Options::from_env`] reads: the `raftlock`
/// CLI's (and the other clients' `from_env`).
pub mod env {
    /// Comma-separated `host:port` or `http(s)://host:port`.
    pub const ENDPOINTS: &str = "RAFTLOCK_ENDPOINTS";
    /// The CA's PEM file; turns TLS on.
    pub const CACERT: &str = "RAFTLOCK_CACERT";
    /// This client's certificate (PEM file), with [`KEY`].
    pub const CERT: &str = "RAFTLOCK_CERT";
    /// The key of [`CERT`] (PEM file).
    pub const KEY: &str = "RAFTLOCK_KEY";
    /// A bearer token.
    pub const AUTH_TOKEN: &str = "RAFTLOCK_AUTH_TOKEN";
    /// Sessions' client name.
    pub const CLIENT_NAME: &str = "RAFTLOCK_CLIENT_NAME";
}

impl Options {
    /// The endpoints and options the `raftlock` CLI would use, from this
    /// process's environment: [`env::ENDPOINTS`] (default
    /// `127.0.0.1:7000`), [`env::CACERT`], [`env::CERT`] and [`env::KEY`],
    /// [`env::AUTH_TOKEN`] and [`env::CLIENT_NAME`]; the rest default.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), raftlock_client::Error> {
    /// let (endpoints, options) = raftlock_client::Options::from_env()?;
    /// let client = raftlock_client::Client::connect_with(endpoints, options).await?;
    /// # Ok(()) }
    /// ```
    pub fn from_env() -> Result<(Vec<String>, Options), Error> {
        Options::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Options::from_env`] reading the variables through `var` (a map in
    /// tests, a config system in a service).
    ///
    /// ```
    /// let vars = std::collections::HashMap::from([("RAFTLOCK_AUTH_TOKEN", "s3cret")]);
    /// let (endpoints, options) =
    ///     raftlock_client::Options::from_vars(|name| vars.get(name).map(|v| v.to_string())).unwrap();
    /// assert_eq!(endpoints, ["127.0.0.1:7000"]);
    /// assert_eq!(options.token.as_deref(), Some("s3cret"));
    /// ```
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<(Vec<String>, Options), Error> {
        let get = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let joined = get(env::ENDPOINTS).unwrap_or_else(|| "127.0.0.1:7000".into());
        let endpoints: Vec<String> = joined
            .split(',')
            .map(normalize)
            .filter(|e| !e.is_empty())
            .collect();
        let read = |name: &str| -> Result<Option<Vec<u8>>, Error> {
            get(name)
                .map(|path| {
                    std::fs::read(&path).map_err(|e| Error::Tls(format!("{name}={path}: {e}")))
                })
                .transpose()
        };
        let (ca, cert, key) = (read(env::CACERT)?, read(env::CERT)?, read(env::KEY)?);
        let tls = match (ca, cert, key) {
            (Some(ca), Some(cert), Some(key)) => Some(Tls::new(ca).with_identity(cert, key)),
            (Some(ca), None, None) => Some(Tls::new(ca)),
            (_, Some(_), None) | (_, None, Some(_)) => {
                return Err(Error::Tls(format!(
                    "{} and {} go together: set both or neither",
                    env::CERT,
                    env::KEY
                )))
            }
            (None, _, _) if joined.contains("https://") => {
                return Err(Error::Tls(format!(
                    "{} names https:// endpoints but {} is not set",
                    env::ENDPOINTS,
                    env::CACERT
                )))
            }
            (None, _, _) => None,
        };
        Ok((
            endpoints,
            Options {
                tls,
                token: get(env::AUTH_TOKEN),
                client_name: get(env::CLIENT_NAME),
                ..Options::default()
            },
        ))
    }

    /// The host and pid a session reports, after the defaults.
    pub(crate) fn origin(&self) -> (String, u32) {
        let host = self.host.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default()
        });
        // The server refuses longer; a name this long is no use to a reader.
        let host = if host.len() > raftlock_proto::limits::MAX_CLIENT_NAME_LEN {
            String::new()
        } else {
            host
        };
        (host, self.pid.unwrap_or_else(std::process::id))
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("tls", &self.tls)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("pipeline", &self.pipeline)
            .field("local_address", &self.local_address)
            .field("connect_timeout", &self.connect_timeout)
            .field("host", &self.host)
            .field("pid", &self.pid)
            .field("client_name", &self.client_name)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            deadline: Duration::from_secs(15),
            attempt_timeout: Duration::from_secs(6),
            initial_backoff: Duration::from_millis(25),
            max_backoff: Duration::from_millis(800),
            tls: None,
            token: None,
            pipeline: true,
            local_address: None,
            connect_timeout: Duration::from_secs(1),
            host: None,
            pid: None,
            client_name: None,
        }
    }
}

/// The nodes of one cluster as a client knows them: their endpoints, the
/// leader last seen, and one channel to each, shared by every call the
/// client and its clones make.
pub(crate) struct Cluster {
    endpoints: Mutex<Vec<String>>,
    channels: Mutex<HashMap<String, Transport>>,
    token: Option<MetadataValue<Ascii>>,
    leader: Mutex<Option<String>>,
    next: Mutex<usize>,
    pub(crate) options: Options,
    /// The longest wait the cluster last said it accepts (its
    /// `--max-wait-ms`), which default waits fit to.
    max_wait: Mutex<Option<Duration>>,
}

fn normalize(endpoint: &str) -> String {
    endpoint
        .trim()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_owned()
}

/// The endpoint of `addr` under `options` (https when TLS is on).
fn endpoint(addr: &str, options: &Options) -> Result<Endpoint, Error> {
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let e = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|err| Error::BadEndpoint(addr.to_owned(), err.to_string()))?
        .local_address(options.local_address);
    match &options.tls {
        Some(tls) => e
            .tls_config(tls.config())
            .map_err(|err| Error::Tls(err.to_string())),
        None => Ok(e),
    }
}

/// Whether a failed attempt should be retried elsewhere.
fn retryable(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    ) || (s.code() == tonic::Code::DeadlineExceeded && raftlock_proto::reason::of(s).is_none())
    // A DEADLINE_EXCEEDED without a reason is this client's own attempt
    // timeout (or a proxy's), not a verdict of the server's: try again.
}

impl Cluster {
    /// Checks every endpoint (and the TLS settings and token) up front, so a
    /// malformed one fails here rather than on whichever call first picks it.
    pub(crate) fn new<I, S>(endpoints: I, options: Options) -> Result<Cluster, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let endpoints: Vec<String> = endpoints
            .into_iter()
            .map(|e| normalize(e.as_ref()))
            .filter(|e| !e.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(Error::NoEndpoints);
        }
        for e in &endpoints {
            endpoint(e, &options)?;
        }
        let token =
            match &options.token {
                Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| {
                    Error::InvalidArgument("the token must be printable ASCII".into())
                })?),
                None => None,
            };
        Ok(Cluster {
            endpoints: Mutex::new(endpoints),
            channels: Mutex::new(HashMap::new()),
            token,
            leader: Mutex::new(None),
            next: Mutex::new(0),
            options,
            max_wait: Mutex::new(None),
        })
    }

    /// Records the limits a node advertised (nothing from an older node).
    pub(crate) fn learn_limits(&self, limits: Option<&crate::types::ServerLimits>) {
        if let Some(l) = limits {
            *self.max_wait.lock() = Some(l.max_wait);
        }
    }

    /// The longest wait to ask for when the caller set none: the cluster's
    /// own limit when it said one, else the hard ceiling every cluster
    /// accepts at most.
    pub(crate) fn max_wait(&self) -> Duration {
        self.max_wait
            .lock()
            .unwrap_or(Duration::from_millis(raftlock_proto::limits::MAX_WAIT_MS))
    }

    pub(crate) fn channel(&self, addr: &str) -> Result<Transport, Error> {
        let mut channels = self.channels.lock();
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let channel = endpoint(addr, &self.options)?
            .connect_timeout(self.options.connect_timeout)
            .tcp_nodelay(true)
            // Frequent pings find a frozen or vanished node in about three
            // seconds, so calls stop waiting on it and go elsewhere.
            .http2_keep_alive_interval(Duration::from_secs(1))
            .keep_alive_timeout(Duration::from_secs(2))
            .keep_alive_while_idle(true)
            .connect_lazy();
        let transport = InterceptedService::new(channel, AddToken(self.token.clone()));
        channels.insert(addr.to_owned(), transport.clone());
        Ok(transport)
    }

    /// The node to try next: the cached leader, else the endpoints in turn.
    pub(crate) fn target(&self) -> String {
        if let Some(l) = self.leader.lock().clone() {
            return l;
        }
        let endpoints = self.endpoints.lock();
        let mut next = self.next.lock();
        *next = (*next + 1) % endpoints.len();
        endpoints[*next].clone()
    }

    /// Learns from a failed attempt at `addr`: follow a leader hint, or
    /// forget `addr` as leader.
    pub(crate) fn learn(&self, addr: &str, status: &tonic::Status) -> bool {
        let hint = status
            .metadata()
            .get(LEADER_METADATA_KEY)
            .and_then(|v| v.to_str().ok())
            .map(normalize)
            .filter(|h| h != addr);
        match hint {
            Some(h) => {
                let mut leader = self.leader.lock();
                let mut endpoints = self.endpoints.lock();
                if !endpoints.contains(&h) {
                    endpoints.push(h.clone());
                }
                *leader = Some(h);
                true
            }
            None => {
                self.forget_leader(addr);
                false
            }
        }
    }

    /// Learns that `addr` failed or stopped answering: it is no longer the
    /// leader, and the next try goes to another node even when the
    /// rotation would come back to `addr` next. A frozen node (paused VM,
    /// long GC of its host) takes a whole patience to find out, and trying
    /// it again first could spend the rest of a short TTL on it.
    pub(crate) fn forget_leader(&self, addr: &str) {
        {
            let mut leader = self.leader.lock();
            if leader.as_deref() == Some(addr) {
                *leader = None;
            }
        }
        let endpoints = self.endpoints.lock();
        if endpoints.len() > 1 {
            let mut next = self.next.lock();
            if endpoints[(*next + 1) % endpoints.len()] == addr {
                *next = (*next + 1) % endpoints.len();
            }
        }
    }

    pub(crate) fn remember_leader(&self, addr: &str) {
        *self.leader.lock() = Some(addr.to_owned());
    }

    /// Runs one logical call, retrying on other nodes until it succeeds, fails
    /// for good, or `deadline` passes. `f` gets a channel to the node to try.
    pub(crate) async fn retry<T, F, Fut>(
        &self,
        deadline: Duration,
        mut f: F,
    ) -> Result<T, tonic::Status>
    where
        F: FnMut(Transport, u32) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        self.retry_at(deadline, |_, ch, attempt| f(ch, attempt))
            .await
    }

    /// [`Cluster::retry`], telling `f` the address it is given a channel to.
    pub(crate) async fn retry_at<T, F, Fut>(
        &self,
        deadline: Duration,
        mut f: F,
    ) -> Result<T, tonic::Status>
    where
        F: FnMut(&str, Transport, u32) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        let give_up = Instant::now() + deadline;
        let mut backoff = self.options.initial_backoff;
        let mut attempt = 0u32;
        loop {
            let addr = self.target();
            let channel = self
                .channel(&addr)
                .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
            match f(&addr, channel, attempt).await {
                Ok(v) => {
                    self.remember_leader(&addr);
                    return Ok(v);
                }
                Err(s) if retryable(&s) => {
                    attempt += 1;
                    let hinted = self.learn(&addr, &s);
                    let now = Instant::now();
                    if now >= give_up {
                        return Err(s);
                    }
                    if !hinted {
                        let jitter = rand::thread_rng().gen_range(0.5..1.5);
                        let pause = backoff.mul_f64(jitter).min(give_up - now);
                        tokio::time::sleep(pause).await;
                        backoff = (backoff * 2).min(self.options.max_backoff);
                    }
                }
                Err(s) => return Err(s),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster::new(["n1:1", "n2:2", "n3:3"], Options::default()).unwrap()
    }

    #[test]
    fn a_node_that_stopped_answering_is_not_tried_again_next() {
        let c = cluster();
        // A leader hint named n2 before the rotation reached it.
        c.remember_leader("n2:2");
        assert_eq!(c.target(), "n2:2");
        // n2 freezes. It is next in the rotation (n2, n3, n1), but the
        // next try goes past it.
        c.forget_leader("n2:2");
        assert_eq!(c.target(), "n3:3");
        // A node whose turn is not next leaves the rotation as it is.
        c.forget_leader("n2:2");
        assert_eq!(c.target(), "n1:1");
        assert_eq!(c.target(), "n2:2");
    }

    #[test]
    fn a_refusal_without_a_leader_hint_also_moves_past_the_node() {
        let c = cluster();
        c.remember_leader("n2:2");
        assert!(!c.learn("n2:2", &tonic::Status::unavailable("no leader yet")));
        assert_eq!(c.target(), "n3:3");
    }

    #[test]
    fn one_endpoint_is_tried_again_after_it_failed() {
        let c = Cluster::new(["only:1"], Options::default()).unwrap();
        c.forget_leader("only:1");
        assert_eq!(c.target(), "only:1");
    }
}
