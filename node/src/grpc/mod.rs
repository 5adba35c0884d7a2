//! gRPC services: one module per service, conversions and status mapping
//! in `convert`.

pub mod cluster;
pub mod convert;
pub mod election;
pub mod lock;
pub mod metrics;
pub mod raft;
pub mod session;
