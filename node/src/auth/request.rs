//! Who is calling, per request: the tonic interceptor that authenticates
//! each call against the auth file in force, and the callers a long-lived
//! stream looks up again each time it acts, so a reload reaches it.

use super::{Authenticator, Caller, Credential};
use crate::error::NodeError;
use raftlock_proto::reason::{self, Reason};
use std::sync::Arc;
use tonic::{Request, Status};

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
