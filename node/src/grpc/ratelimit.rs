//! The RateLimit service over gRPC: every call is a plain one.

use super::service;
use crate::locks::Locks;
use raftlock_proto::v1::rate_limit_server::RateLimit as RateLimitApi;

/// Serves rate limits.
pub struct RateLimitService {
    locks: Locks,
}

impl RateLimitService {
    /// Serves the rate limits of `locks` over gRPC.
    pub fn new(locks: Locks) -> Self {
        RateLimitService { locks }
    }
}

raftlock_proto::rate_limit_calls!(service! {
    impl RateLimitApi for RateLimitService {}
});
