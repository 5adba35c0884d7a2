//! The HTTP/JSON API's calls: each is one gRPC method, its request and
//! response messages in the proto3 JSON mapping. The table is generated from
//! the services of `raftlock.proto` (`build.rs`): a plain call of the lock
//! services is routed at `/v1/<service>/<call>` with nothing else to edit.
//! The server builds its routes from it, and `docs/openapi.json` is
//! generated from it and from the `.proto` (a test checks both).

/// One call of the HTTP API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The path (`POST` unless [`Route::get`] says it also answers `GET`).
    pub path: &'static str,
    /// The gRPC method it maps to (`raftlock.v1.Lock/Acquire`).
    pub grpc: &'static str,
    /// The request message (`AcquireRequest`).
    pub request: &'static str,
    /// The response message; for a stream, the message of each item.
    pub response: &'static str,
    /// Answers a stream of responses (newline-delimited JSON, or
    /// server-sent events).
    pub streams: bool,
    /// Also answers `GET` (with every request field unset).
    pub get: bool,
    /// What it does, in one line.
    pub summary: &'static str,
    /// What it does, in full: the call's comment in `raftlock.proto`.
    pub description: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/calls.rs"));
