//! raftlock's public gRPC API and the limits every crate shares.
//!
//! The API lives in `proto/raftlock/v1/raftlock.proto`; this crate compiles it
//! (without a system `protoc`) into prost messages and tonic clients and
//! servers under [`v1`]. [`limits`] is the one place that says how long a
//! name may be, how short a TTL, and so on: the server enforces it, the client
//! and CLI check it early.
//!
//! ```
//! use raftlock_proto::v1::{AcquireRequest, LockMode};
//! let req = AcquireRequest {
//!     session_id: 7,
//!     name: "payments/settle".into(),
//!     request_id: vec![0; 16],
//!     mode: LockMode::Exclusive as i32,
//!     wait_timeout_ms: Some(5_000),
//!     ..Default::default()
//! };
//! assert!(req.name.len() <= raftlock_proto::limits::MAX_NAME_LEN);
//! ```
#![deny(missing_docs)]

pub mod cluster;
pub mod http;
pub mod limits;
pub mod reason;

/// Version 1 of the API: messages, clients (`*_client`) and servers
/// (`*_server`).
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("raftlock.v1");
    include!(concat!(env!("OUT_DIR"), "/raftlock.v1.serde.rs"));
}

/// The encoded `FileDescriptorSet` of the API, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/raftlock_descriptor.bin"));

/// Response metadata key naming the leader's client address (`host:port`)
/// when a follower answers `UNAVAILABLE` because it is not the leader.
pub const LEADER_METADATA_KEY: &str = "raftlock-leader";
