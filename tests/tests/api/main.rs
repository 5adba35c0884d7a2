//! The API as clients use it: exactly-once requests, the Rust client, pipelining, typed error reasons, the examples and the Python client.
//!
//! One test binary per area; each module is one topic.

mod client;
mod exactly_once;
mod examples;
mod holders;
mod http;
mod pipeline;
mod protections;
mod python_client;
mod ratelimit;
mod reasons;
mod reasons_more;
mod typescript_client;
mod watch;
