//! Raft plumbing: everything between a lock operation and the replicated
//! log, and nothing about locks.
//!
//! The lock service sees one handle, [`node::Node`], as a `Replica`:
//! `propose` a command and get its applied outcome, `linearizable` before a
//! read of the applied state, and `leader_addr` / `is_leader` to send a
//! caller to the leader. The cluster's administration (the Cluster gRPC
//! service, the admin port, the inspector) sees another, [`admin::Admin`],
//! which cannot propose.
//! Behind it: group commit of concurrent proposals ([`batch`]), batched
//! leadership confirmation ([`confirm`]), the peer network and its wire
//! encoding ([`network`], [`peer_codec`]), leadership transfer
//! ([`transfer`]), the cluster identity every peer call carries
//! ([`cluster_identity`]), the data dir's free-space alarm ([`space`]) and
//! whether this node may vote with what it stores ([`standing`]);
//! [`start`] starts it all on a node's opened storage.
//! Nothing here imports the lock service, a transport or an operations
//! module.

pub mod admin;
pub mod batch;
pub mod cluster_identity;
pub mod confirm;
mod gate;
pub mod network;
pub mod node;
pub mod peer_codec;
pub mod space;
pub mod standing;
pub mod start;
pub mod transfer;
