//! gRPC services: one module per service, its plain calls answered by the
//! lock service as the request message says (`locks::Call`, the same for
//! HTTP/JSON) and its streams written out, and the one mapping from errors
//! to gRPC statuses.

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
/// names (`locks::Call`): the caller its credentials name, then the call.
pub async fn unary<C: crate::locks::Call>(
    locks: &crate::locks::Locks,
    req: tonic::Request<C>,
) -> Result<tonic::Response<C::Response>, tonic::Status> {
    let caller = crate::auth::caller(&req)?;
    Ok(tonic::Response::new(
        req.into_inner().answer(locks, &caller).await?,
    ))
}

/// A gRPC service's implementation: the methods written out (streams),
/// then every plain call, answered by [`unary`] on the service's `locks`.
/// The plain calls come from `raftlock-proto`'s list of the service's
/// unary methods (`raftlock_proto::lock_calls!` and the like), so a call
/// added to the `.proto` is served with no line here.
macro_rules! service {
    (
        impl $api:ident for $service:ident { $($rest:tt)* }
        $($method:ident($request:ty) -> $response:ty;)*
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
