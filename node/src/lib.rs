//! `raftlockd`, a raftlock node: configuration, the Raft network over tonic,
//! the client-facing gRPC services, the leader-side lease driver and the
//! local `dev` cluster.
//!
//! The binary is the product; this library exists so its parts can be
//! tested on their own. A node is started with [`server::start`]:
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Cli { #[command(flatten)] node: raftlock_node::config::NodeArgs }
//! let config = Cli::parse().node.resolve()?;
//! let node = raftlock_node::server::start(config).await?;
//! node.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod auth;
pub mod config;
pub mod error;
pub mod grpc;
pub mod http;
pub mod limits;
pub mod locks;
pub mod messages;
pub mod ops;
pub mod raft;
pub mod replica;
pub mod server;
pub mod tls;
pub mod wire;
