//! Authentication, rights and TLS, and hostile input of every kind.
//!
//! One test binary per area; each module is one topic.

mod auth;
mod hostile;
mod limits;
mod reload;
mod support;
mod tls;
