//! gRPC services: one module per service, conversions and status mapping
//! in `convert`.

pub mod cluster;
pub mod convert;
pub mod election;
pub mod lock;
pub mod metrics;
pub mod raft;
pub mod ratelimit;
pub mod session;

/// A slot for one more long-lived stream (keep-alive, observe, watch) on
/// the connection `ext` came on, held until the stream ends, so that one
/// client cannot pin unbounded server tasks. `None` where the transport
/// names no peer address (nothing to count against).
pub fn stream_slot(
    node: &crate::raft::node::Node,
    ext: &http::Extensions,
) -> Result<Option<crate::limits::Slot>, tonic::Status> {
    crate::limits::remote_addr(ext)
        .map(|addr| {
            node.connections()
                .stream(addr, node.limits().max_keepalive_streams_per_connection)
        })
        .transpose()
}
