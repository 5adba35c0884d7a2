//! Why a call was refused, in a form programs read: every error status
//! raftlock sends carries a `google.rpc.ErrorInfo` whose `reason` is one of
//! [`Reason`] and whose `domain` is [`DOMAIN`]. Clients map the reason to
//! their own error types and never read the message, which is for people.
//!
//! ```
//! use raftlock_proto::reason::{self, Reason};
//! let status = reason::status(Reason::StaleToken, "token 7 is not the holder's (9)");
//! assert_eq!(status.code(), tonic::Code::FailedPrecondition);
//! assert_eq!(reason::of(&status), Some(Reason::StaleToken));
//! assert_eq!(Reason::parse("STALE_TOKEN"), Some(Reason::StaleToken));
//! ```

use std::collections::HashMap;
use tonic::Status;
use tonic_types::{ErrorDetails, StatusExt};

/// The `domain` of raftlock's `ErrorInfo`s.
pub const DOMAIN: &str = "raftlock.v1";

include!(concat!(env!("OUT_DIR"), "/reasons.rs"));

impl Reason {
    /// Reads the wire form.
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status refusing a call for `reason`, with a message for people.
pub fn status(reason: Reason, message: impl Into<String>) -> Status {
    Status::with_error_details(reason.code(), message, details(reason))
}

/// [`status`] with response metadata (the leader hint of
/// [`Reason::NotLeader`]).
pub fn status_with_metadata(
    reason: Reason,
    message: impl Into<String>,
    metadata: tonic::metadata::MetadataMap,
) -> Status {
    Status::with_error_details_and_metadata(reason.code(), message, details(reason), metadata)
}

fn details(reason: Reason) -> ErrorDetails {
    ErrorDetails::with_error_info(reason.as_str(), DOMAIN, HashMap::<String, String>::new())
}

/// The reason of a status raftlock sent; `None` for a status from anywhere
/// else (a proxy, the client's own transport, an older server).
pub fn of(status: &Status) -> Option<Reason> {
    status
        .get_details_error_info()
        .filter(|i| i.domain == DOMAIN)
        .and_then(|i| Reason::parse(&i.reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn every_reason_round_trips_through_a_status_with_its_code() {
        for r in Reason::ALL {
            let s = status(r, "m");
            assert_eq!(s.code(), r.code(), "{r}");
            assert_eq!(of(&s), Some(r), "{r}");
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn a_status_without_our_error_info_has_no_reason() {
        assert_eq!(of(&Status::deadline_exceeded("Timeout expired")), None);
        let foreign = Status::with_error_details(
            Code::NotFound,
            "m",
            ErrorDetails::with_error_info("SESSION_NOT_FOUND", "example.com", HashMap::new()),
        );
        assert_eq!(of(&foreign), None);
    }
}
