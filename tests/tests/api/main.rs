//! The API as clients use it: sets of locks taken together, exactly-once requests, the Rust client, pipelining, typed error reasons, the examples, the Python, TypeScript and Go clients, and the HTTP API against its OpenAPI document.
//!
//! One test binary per area; each module is one topic.

mod acquire_all;
mod cancel;
mod client;
mod contract;
mod exactly_once;
mod examples;
mod go_client;
mod holders;
mod http;
mod pipeline;
mod protections;
mod python_client;
mod ratelimit;
mod reasons;
mod reasons_degraded;
mod schemathesis;
mod typescript_client;
mod watch;
