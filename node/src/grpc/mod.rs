//! gRPC services: one module per service, each a line per call into the
//! lock service through the conversions both transports share
//! (`crate::wire`), and the one mapping from errors to gRPC statuses.

pub mod cluster;
pub mod election;
pub mod lock;
pub mod metrics;
pub mod raft;
pub mod ratelimit;
pub mod session;

use crate::error::NodeError;
use raftlock_proto::{reason, LEADER_METADATA_KEY};
use tonic::Status;

/// Answers a plain call of the lock service, which its request message
/// names (`wire::Call`): the caller its credentials name, then the one
/// pipeline.
pub async fn unary<C: crate::wire::Call>(
    locks: &crate::locks::Locks,
    req: tonic::Request<C>,
) -> Result<tonic::Response<C::Response>, tonic::Status> {
    let caller = crate::auth::caller(&req)?;
    Ok(tonic::Response::new(
        crate::wire::call(locks, &caller, req.into_inner()).await?,
    ))
}

/// A gRPC service's implementation, its plain calls one line each
/// (`method(Request) -> Response;`, answered by [`unary`] on the service's
/// `locks`), then the methods written out: reads and streams.
macro_rules! service {
    (
        impl $api:ident for $service:ident {
            $($method:ident($request:ty) -> $response:ty;)*
        }
        $($rest:tt)*
    ) => {
        #[tonic::async_trait]
        impl $api for $service {
            $(
                async fn $method(
                    &self,
                    req: tonic::Request<$request>,
                ) -> Result<tonic::Response<$response>, tonic::Status> {
                    $crate::grpc::unary(&self.locks, req).await
                }
            )*
            $($rest)*
        }
    };
}
pub(crate) use service;

/// A slot for one more long-lived stream (keep-alive, observe, watch) on
/// the connection `ext` came on, held until the stream ends, so that one
/// client cannot pin unbounded server tasks. `None` where the transport
/// names no peer address (nothing to count against).
pub fn stream_slot(
    connections: &std::sync::Arc<crate::limits::ConnectionCounts>,
    limits: &crate::limits::Limits,
    ext: &http::Extensions,
) -> Result<Option<crate::limits::Slot>, tonic::Status> {
    crate::limits::remote_addr(ext)
        .map(|addr| connections.stream(addr, limits.max_keepalive_streams_per_connection))
        .transpose()
}

/// The one mapping from node errors to gRPC statuses: the code and the
/// machine-readable reason come from [`NodeError::reason`]. A not-leader
/// answer is UNAVAILABLE (retry elsewhere) and names the leader's client
/// address in the `raftlock-leader` metadata key when it is known.
pub fn status(e: NodeError) -> Status {
    let mut metadata = tonic::metadata::MetadataMap::new();
    if let Some(v) = e.leader_addr().and_then(|a| a.parse().ok()) {
        metadata.insert(LEADER_METADATA_KEY, v);
    }
    reason::status_with_metadata(e.reason(), e.message(), metadata)
}

impl From<NodeError> for Status {
    fn from(e: NodeError) -> Status {
        status(e)
    }
}
