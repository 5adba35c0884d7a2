//! The HTTP/JSON API, served on the client port beside gRPC: the same
//! calls, one to one, with the proto3 JSON mapping of the same messages
//! (`POST /v1/lock/acquire` takes an `AcquireRequest` as JSON and answers an
//! `AcquireResponse`). Each handler parses the JSON into the protobuf
//! message and answers it with [`Call::answer`](crate::locks::Call), exactly as gRPC
//! does, and writes the answer back as JSON; refusals are
//! JSON with the gRPC code name, the machine-readable reason and a message.
//!
//! Waiting calls hold the request open up to their timeout. `observe`
//! streams newline-delimited JSON, or server-sent events when the client
//! asks for `text/event-stream`. A node that does not lead answers 503 with
//! the leader's address in the `raftlock-leader` header (the same port
//! serves HTTP, so the address is the one to retry at).

mod error;

pub use error::HttpError;

use crate::auth::{Caller, SharedAuth};
use crate::error::NodeError;
use crate::locks::Locks;
use crate::messages::grant;
use crate::wire::convert::watch_response;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use futures::StreamExt;
use raftlock_proto::v1 as pb;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;

/// What the handlers share.
#[derive(Clone)]
struct Api {
    locks: Locks,
    /// The cluster's status, which is Raft's view.
    cluster: crate::grpc::cluster::ClusterService,
    auth: SharedAuth,
}

/// The HTTP API's routes, for the client port's router. Bodies above
/// `max_body` bytes are refused with 413.
pub fn router(
    locks: Locks,
    cluster: crate::grpc::cluster::ClusterService,
    auth: SharedAuth,
    max_body: usize,
) -> Router {
    let api = Api {
        locks,
        cluster,
        auth,
    };
    let router = raftlock_proto::http::ROUTES
        .iter()
        .fold(Router::new(), |router, route| match handler(route) {
            Some(h) => router.route(route.path, h),
            // Refused by the test of `handler`: a route in the table with
            // nothing to answer it is a build that must not ship.
            None => router,
        });
    router
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn(count))
        .with_state(api)
}

/// Counts calls by route and HTTP status (`raftlock_http_requests_total`);
/// a path that is no route counts as `other`, so that a scanner cannot
/// grow the label set.
async fn count(req: Request, next: axum::middleware::Next) -> Response {
    let path = raftlock_proto::http::ROUTES
        .iter()
        .find(|r| r.path == req.uri().path())
        .map_or("other", |r| r.path);
    let response = next.run(req).await;
    metrics::counter!(
        "raftlock_http_requests_total",
        "path" => path,
        "status" => response.status().as_u16().to_string()
    )
    .increment(1);
    response
}

/// A JSON body in the proto3 JSON mapping of `T`, with the caller its
/// credentials name. Bad JSON, a wrong type or an unknown field is a 400
/// that says which; missing or unknown credentials a 401.
struct Call<T> {
    caller: Arc<Caller>,
    /// The caller again, for a stream to look up as it goes.
    stream: crate::auth::StreamCaller,
    body: T,
}

impl<T> FromRequest<Api> for Call<T>
where
    T: DeserializeOwned + Default,
{
    type Rejection = HttpError;

    async fn from_request(req: Request, api: &Api) -> Result<Self, HttpError> {
        let (parts, body) = req.into_parts();
        // The same authenticator gRPC calls go through: bearer token or
        // client certificate.
        let stream = crate::auth::authenticate_stream(
            &api.auth,
            &tonic::Request::from_http(axum::http::Request::from_parts(parts.clone(), ())),
        )
        .inspect_err(|_| metrics::counter!("raftlock_auth_failures_total").increment(1))?;
        let caller = stream.opened().clone();
        let bytes = Bytes::from_request(Request::from_parts(parts, body), &())
            .await
            .map_err(HttpError::unreadable)?;
        let body = if bytes.iter().all(u8::is_ascii_whitespace) {
            // An empty body is the message with every field unset, as in
            // gRPC (`cluster/status`, say).
            T::default()
        } else {
            serde_json::from_slice(&bytes).map_err(HttpError::json)?
        };
        Ok(Call {
            caller,
            stream,
            body,
        })
    }
}

/// A message as the JSON answer.
fn json<T: Serialize>(msg: &T) -> Response {
    match serde_json::to_vec(msg) {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => HttpError::internal(format!("cannot encode the answer: {e}")).into_response(),
    }
}

type Answer = Result<Response, HttpError>;

/// What answers each route of `ROUTES`: a plain call of the lock service,
/// which its request message names itself (`locks::Call`; the list of
/// them is generated from the `.proto`), or a handler of its own for
/// streams and the cluster's status.
fn handler(route: &raftlock_proto::http::Route) -> Option<MethodRouter<Api>> {
    macro_rules! plain {
        ($($message:ident),* $(,)?) => {
            match route.request {
                $(stringify!($message) => return Some(post(unary::<pb::$message>)),)*
                _ => {}
            }
        };
    }
    if !route.streams {
        raftlock_proto::http_calls!(plain);
    }
    Some(match route.grpc.strip_prefix("raftlock.v1.")? {
        "Lock/Watch" => post(watch),
        "Election/Observe" => post(observe),
        "Cluster/Status" => get(status).post(status),
        _ => return None,
    })
}

/// A call of the lock service the request message names (`locks::Call`),
/// answered with its response message.
async fn unary<C>(State(api): State<Api>, c: Call<C>) -> Answer
where
    C: crate::locks::Call + DeserializeOwned + Default,
    C::Response: Serialize,
{
    Ok(json(&c.body.answer(&api.locks, &c.caller).await?))
}

/// The election's leader now and at every change: one JSON object per
/// line (`{"leader": ...}`), or one server-sent event each when the
/// client accepts `text/event-stream`. The stream ends with an error
/// object (`{"error": ...}`) when this node stops leading.
async fn observe(
    State(api): State<Api>,
    headers: HeaderMap,
    uri: Uri,
    c: Call<pb::LeaderRequest>,
) -> Answer {
    let end = StreamEnd::of(&uri)?;
    let name = c.body.name;
    let changes = api.locks.observe(&c.caller, name.clone()).await?;
    let stream = c.stream;
    Ok(json_lines(
        &headers,
        end,
        changes.map(move |change| {
            // As the identity stands now (see the gRPC Observe).
            let now = stream
                .now()
                .and_then(|c| c.check(crate::auth::Access::Read, &name));
            now.and(change).map(|leader| {
                serde_json::to_string(&pb::LeaderResponse {
                    leader: leader.as_ref().map(grant),
                })
            })
        }),
    ))
}

/// Every lock event under a prefix, as Lock.Watch: one JSON object per
/// line (`{"index": ..., "events": [...]}`), or one server-sent event each;
/// the stream ends with an error object when the watch loses track.
async fn watch(
    State(api): State<Api>,
    headers: HeaderMap,
    uri: Uri,
    c: Call<pb::WatchRequest>,
) -> Answer {
    let end = StreamEnd::of(&uri)?;
    let events = api
        .locks
        .watch(c.caller.clone(), c.body.prefix, c.body.after_index)?;
    let stream = c.stream;
    // As the identity stands now (see the gRPC Watch).
    let events = events.filter_map(move |w| {
        let answer = match (w, stream.now()) {
            (_, Err(e)) | (Err(e), _) => Some(Err(e)),
            (Ok(w), Ok(now)) => {
                let mut r = watch_response(&w);
                r.events
                    .retain(|e| now.may(crate::auth::Access::Read, &e.name));
                (!r.events.is_empty() || w.events.is_empty()).then(|| Ok(serde_json::to_string(&r)))
            }
        };
        futures::future::ready(answer)
    });
    Ok(json_lines(&headers, end, events))
}

/// When a stream ends by itself: the optional `timeoutMs` query parameter
/// of `watch` and `observe` (1..=`MAX_WAIT_MS`), as Kubernetes' watch has
/// `timeoutSeconds`. It serves callers that cannot cancel a request
/// mid-body, such as a shell's `curl` or a request-per-poll client: the
/// answer then ends cleanly after that long, and the caller opens the next
/// one where it left off (`afterIndex` for a watch). Absent, the stream
/// lasts until the caller goes away or this node stops leading.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StreamEnd {
    timeout_ms: Option<u64>,
}

impl StreamEnd {
    fn of(uri: &Uri) -> Result<Option<std::time::Duration>, HttpError> {
        let axum::extract::Query(q) = axum::extract::Query::<StreamEnd>::try_from_uri(uri)
            .map_err(|e| {
                HttpError::invalid(format!(
                    "the query is not this call's parameters (timeoutMs): {}",
                    e.body_text()
                ))
            })?;
        match q.timeout_ms {
            None => Ok(None),
            Some(ms @ 1..=raftlock_proto::limits::MAX_WAIT_MS) => {
                Ok(Some(std::time::Duration::from_millis(ms)))
            }
            Some(ms) => Err(HttpError::invalid(format!(
                "timeoutMs of {ms} is out of range 1..={}",
                raftlock_proto::limits::MAX_WAIT_MS
            ))),
        }
    }
}

/// A stream of JSON objects as newline-delimited JSON, or as server-sent
/// events when the client accepts `text/event-stream`; an error ends it as
/// an `{"error": ...}` object, and `end` (if any) ends it quietly.
fn json_lines<S>(headers: &HeaderMap, end: Option<std::time::Duration>, items: S) -> Response
where
    S: futures::Stream<Item = Result<serde_json::Result<String>, NodeError>> + Send + 'static,
{
    let sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    // An error is the stream's last item.
    let mut failed = false;
    let items = items.take_while(move |item| {
        let go = !failed;
        failed |= item.is_err();
        futures::future::ready(go)
    });
    let deadline = match end {
        Some(d) => futures::future::Either::Left(tokio::time::sleep(d)),
        None => futures::future::Either::Right(futures::future::pending::<()>()),
    };
    let frames = items.take_until(deadline).map(move |item| {
        let line = match item {
            Ok(json) => json,
            Err(e) => serde_json::to_string(&serde_json::json!({
                "error": HttpError::from(e).body()
            })),
        }
        .unwrap_or_default();
        Ok::<_, std::convert::Infallible>(if sse {
            format!("data: {line}\n\n")
        } else {
            format!("{line}\n")
        })
    });
    let content_type = if sse {
        "text/event-stream"
    } else {
        "application/x-ndjson"
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        axum::body::Body::from_stream(frames),
    )
        .into_response()
}

async fn status(State(api): State<Api>, c: Call<pb::StatusRequest>) -> Answer {
    // Any authenticated caller may read it, as over gRPC.
    let _ = c.caller;
    let s = api.cluster.status(c.body.linearizable_counts).await?;
    Ok(json(&s))
}

async fn not_found(req: Request) -> Response {
    // A gRPC call to a method this port does not serve (a Raft call, say)
    // gets gRPC's own answer, as before the HTTP API shared the port.
    let grpc = req
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc {
        return tonic::Status::unimplemented(format!(
            "{} is not served on the client port",
            req.uri().path()
        ))
        .into_http::<axum::body::Body>();
    }
    // What gRPC answers for an unknown method, with no reason to match.
    HttpError::new(
        StatusCode::NOT_FOUND,
        "UNIMPLEMENTED",
        "",
        format!(
            "no such call: {} {} (the API is POST /v1/session/..., /v1/lock/..., /v1/election/..., GET /v1/cluster/status)",
            req.method(),
            req.uri().path()
        ),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_in_the_table_has_a_handler() {
        for route in raftlock_proto::http::ROUTES {
            assert!(handler(route).is_some(), "{} has no handler", route.path);
        }
        let unknown = raftlock_proto::http::Route {
            grpc: "raftlock.v1.Lock/Unknown",
            request: "UnknownRequest",
            ..raftlock_proto::http::ROUTES[0]
        };
        assert!(handler(&unknown).is_none());
    }
}
