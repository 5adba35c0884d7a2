//! What operators read: health, readiness, metrics and gRPC reflection.
//!
//! One test binary per area; each module is one topic.

mod dashboard;
mod observability;
mod ui;
