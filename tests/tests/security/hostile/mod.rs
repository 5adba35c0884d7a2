//! Hostile input (issue #8): bad names, TTLs, sizes, sessions, tokens and
//! credentials, floods, and garbage or truncated HTTP/2 frames on the client
//! and the peer port. Every request gets a gRPC status whose message says
//! what was wrong; afterwards every node still answers on both ports, the
//! leader and term are unchanged, and a lock taken before the hostile
//! traffic is still held with the same token.
//!
//! `cargo test -p raftlock-tests --test security hostile:: -- --nocapture` prints one
//! `OBSERVED | input | where | answer |` line per case and one `STATE` line
//! per group: docs/security-badinput.md is the table made from them.

mod credentials;
mod fixtures;
mod flood;
mod frames;
mod h2;
mod http;
mod requests;
