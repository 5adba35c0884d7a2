//! The HTTP/JSON API's calls: each is one gRPC method, its request and
//! response messages in the proto3 JSON mapping. The server builds its
//! routes to match this table, and `docs/openapi.json` is generated from it
//! and from the `.proto` (a test checks both).

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
}

const fn call(
    path: &'static str,
    grpc: &'static str,
    request: &'static str,
    response: &'static str,
    summary: &'static str,
) -> Route {
    Route {
        path,
        grpc,
        request,
        response,
        streams: false,
        get: false,
        summary,
    }
}

/// Every call of the HTTP API.
pub const ROUTES: &[Route] = &[
    call(
        "/v1/session/create",
        "raftlock.v1.Session/Create",
        "CreateSessionRequest",
        "CreateSessionResponse",
        "Create a session; its locks live while it is kept alive.",
    ),
    call(
        "/v1/session/keepalive",
        "raftlock.v1.Session/KeepAlive",
        "KeepAliveRequest",
        "KeepAliveResponse",
        "Renew a session from now (one renewal per call).",
    ),
    call(
        "/v1/session/close",
        "raftlock.v1.Session/Close",
        "CloseSessionRequest",
        "CloseSessionResponse",
        "Close a session, releasing its locks and cancelling its waits.",
    ),
    call(
        "/v1/session/list",
        "raftlock.v1.Session/List",
        "ListSessionsRequest",
        "ListSessionsResponse",
        "Live sessions: who they are, what they hold and wait for, time left.",
    ),
    call(
        "/v1/lock/acquire",
        "raftlock.v1.Lock/Acquire",
        "AcquireRequest",
        "AcquireResponse",
        "Acquire a lock, or wait in its FIFO queue up to waitTimeoutMs (the request stays open).",
    ),
    call(
        "/v1/lock/release",
        "raftlock.v1.Lock/Release",
        "ReleaseRequest",
        "ReleaseResponse",
        "Release a lock held under a token; waiters granted in its place are returned.",
    ),
    call(
        "/v1/lock/describe",
        "raftlock.v1.Lock/Describe",
        "DescribeRequest",
        "DescribeResponse",
        "Holders and waiters of one lock (linearizable).",
    ),
    call(
        "/v1/lock/list",
        "raftlock.v1.Lock/List",
        "ListRequest",
        "ListResponse",
        "A page of the locks under a prefix (linearizable).",
    ),
    call(
        "/v1/lock/validate",
        "raftlock.v1.Lock/Validate",
        "ValidateRequest",
        "ValidateResponse",
        "Whether a fencing token is held now (linearizable).",
    ),
    call(
        "/v1/lock/force-release",
        "raftlock.v1.Lock/ForceRelease",
        "ForceReleaseRequest",
        "ForceReleaseResponse",
        "Take a lock away from its holders (admin right).",
    ),
    call(
        "/v1/lock/resize",
        "raftlock.v1.Lock/Resize",
        "ResizeRequest",
        "ResizeResponse",
        "Set a semaphore's number of permits, held or not (0 forgets it); growing grants waiters at once.",
    ),
    call(
        "/v1/lock/acquire-all",
        "raftlock.v1.Lock/AcquireAll",
        "AcquireAllRequest",
        "AcquireAllResponse",
        "Acquire several locks together, all in one log entry or none, waiting in every lock's queue up to waitTimeoutMs (the request stays open).",
    ),
    call(
        "/v1/lock/cancel-wait",
        "raftlock.v1.Lock/CancelWait",
        "CancelWaitRequest",
        "CancelWaitResponse",
        "Give up a waiting acquire or campaign; a grant that won the race is released. A waiting acquire whose HTTP connection closes is cancelled the same way.",
    ),
    Route {
        streams: true,
        ..call(
            "/v1/lock/watch",
            "raftlock.v1.Lock/Watch",
            "WatchRequest",
            "WatchResponse",
            "Every grant, handoff, release, expiry and force-release under a prefix, in log order: newline-delimited JSON, or server-sent events with `accept: text/event-stream`. The first object has no events and the index the watch starts after; resume with afterIndex = the last index seen. Ends with {\"error\": ...} (reason WATCH_COMPACTED) when the node no longer remembers that far back.",
        )
    },
    call(
        "/v1/ratelimit/take",
        "raftlock.v1.RateLimit/Take",
        "TakeRequest",
        "TakeResponse",
        "Take tokens of a rate limit (creating it with `limit` on first use), or learn after how long they would be admitted; with waitTimeoutMs the request stays open until they are; with leaseMs they are a block to spend locally.",
    ),
    call(
        "/v1/ratelimit/return",
        "raftlock.v1.RateLimit/Return",
        "ReturnTokensRequest",
        "ReturnTokensResponse",
        "Give back the unspent tokens of a token lease.",
    ),
    call(
        "/v1/ratelimit/define",
        "raftlock.v1.RateLimit/Define",
        "DefineLimitRequest",
        "DefineLimitResponse",
        "Create a rate limit ahead of time, or check an existing one has these parameters.",
    ),
    call(
        "/v1/ratelimit/describe",
        "raftlock.v1.RateLimit/Describe",
        "DescribeLimitRequest",
        "DescribeLimitResponse",
        "A rate limit's parameters, tokens available now and totals (linearizable).",
    ),
    call(
        "/v1/ratelimit/delete",
        "raftlock.v1.RateLimit/Delete",
        "DeleteLimitRequest",
        "DeleteLimitResponse",
        "Forget a rate limit (admin right).",
    ),
    call(
        "/v1/election/campaign",
        "raftlock.v1.Election/Campaign",
        "CampaignRequest",
        "CampaignResponse",
        "Wait to become an election's leader (the request stays open).",
    ),
    call(
        "/v1/election/proclaim",
        "raftlock.v1.Election/Proclaim",
        "ProclaimRequest",
        "ProclaimResponse",
        "Replace the leader's value.",
    ),
    call(
        "/v1/election/resign",
        "raftlock.v1.Election/Resign",
        "ResignRequest",
        "ResignResponse",
        "Give up leadership.",
    ),
    call(
        "/v1/election/leader",
        "raftlock.v1.Election/Leader",
        "LeaderRequest",
        "LeaderResponse",
        "The election's leader now (linearizable).",
    ),
    Route {
        streams: true,
        ..call(
            "/v1/election/observe",
            "raftlock.v1.Election/Observe",
            "LeaderRequest",
            "LeaderResponse",
            "The leader now and at every change: newline-delimited JSON, or server-sent events with `accept: text/event-stream`; ends with {\"error\": ...} when the node stops leading.",
        )
    },
    Route {
        get: true,
        ..call(
            "/v1/cluster/status",
            "raftlock.v1.Cluster/Status",
            "StatusRequest",
            "StatusResponse",
            "This node's view of the cluster: members, leader, term, indexes.",
        )
    },
];
