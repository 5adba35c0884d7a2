//! gRPC server metrics under the names stock dashboards and alerts use
//! (go-grpc-prometheus's): `grpc_server_started_total`,
//! `grpc_server_handled_total` and `grpc_server_handling_seconds`, labelled
//! `grpc_type`, `grpc_service`, `grpc_method` and (handled) `grpc_code`.
//!
//! A call counts as handled when its response ends: the status of a
//! successful call, and of a stream, travels in the trailers, so the body is
//! watched until its last frame. A call whose client went away first counts
//! as `Canceled`. HTTP/JSON calls on the same port are not gRPC and count
//! under `raftlock_http_requests_total` instead.

use http_body::{Body, Frame, SizeHint};
use metrics::{counter, histogram};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// How a method streams, as go-grpc-prometheus names it.
fn grpc_type(service: &str, method: &str) -> &'static str {
    match (service, method) {
        ("raftlock.v1.Session", "KeepAlive") | ("raftlock.v1.Lock", "Pipeline") => "bidi_stream",
        ("raftlock.v1.Election", "Observe") | ("raftlock.v1.Cluster", "Backup") => "server_stream",
        ("grpc.health.v1.Health", "Watch") => "server_stream",
        (s, _) if s.starts_with("grpc.reflection.") => "bidi_stream",
        _ => "unary",
    }
}

/// The code of a `grpc-status` value (Unknown when it is none).
fn parse_code(value: &str) -> tonic::Code {
    value
        .parse::<i32>()
        .map(tonic::Code::from_i32)
        .unwrap_or(tonic::Code::Unknown)
}

/// A gRPC status code as go's `codes.Code.String()` spells it, which is
/// what dashboards filter on (`grpc_code!="OK"`).
fn code_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "Canceled",
        tonic::Code::Unknown => "Unknown",
        tonic::Code::InvalidArgument => "InvalidArgument",
        tonic::Code::DeadlineExceeded => "DeadlineExceeded",
        tonic::Code::NotFound => "NotFound",
        tonic::Code::AlreadyExists => "AlreadyExists",
        tonic::Code::PermissionDenied => "PermissionDenied",
        tonic::Code::ResourceExhausted => "ResourceExhausted",
        tonic::Code::FailedPrecondition => "FailedPrecondition",
        tonic::Code::Aborted => "Aborted",
        tonic::Code::OutOfRange => "OutOfRange",
        tonic::Code::Unimplemented => "Unimplemented",
        tonic::Code::Internal => "Internal",
        tonic::Code::Unavailable => "Unavailable",
        tonic::Code::DataLoss => "DataLoss",
        tonic::Code::Unauthenticated => "Unauthenticated",
    }
}

/// A status code as tonic's `Debug` spells it: the `code` label of
/// `raftlock_grpc_requests_total`. Static, so counting a call formats
/// nothing. Only two codes are spelled differently from go's.
pub(crate) fn debug_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "Ok",
        tonic::Code::Cancelled => "Cancelled",
        other => code_name(other),
    }
}

/// The labels of one call.
#[derive(Clone)]
struct Call {
    grpc_type: &'static str,
    service: String,
    method: String,
    started: Instant,
}

impl Call {
    fn handled(&self, code: tonic::Code) {
        counter!(
            "grpc_server_handled_total",
            "grpc_type" => self.grpc_type,
            "grpc_service" => self.service.clone(),
            "grpc_method" => self.method.clone(),
            "grpc_code" => code_name(code)
        )
        .increment(1);
        // raftlock's own series, which a Pipeline stream's calls also count
        // under (grpc/lock.rs): "Lock/Acquire", code as tonic names it.
        counter!(
            "raftlock_grpc_requests_total",
            "method" => format!("{}/{}", self.service.trim_start_matches("raftlock.v1."), self.method),
            "code" => debug_name(code)
        )
        .increment(1);
        histogram!(
            "grpc_server_handling_seconds",
            "grpc_type" => self.grpc_type,
            "grpc_service" => self.service.clone(),
            "grpc_method" => self.method.clone()
        )
        .record(self.started.elapsed().as_secs_f64());
    }
}

/// A tower layer recording the gRPC server metrics of every call.
#[derive(Clone, Default)]
pub struct GrpcMetricsLayer;

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner }
    }
}

/// The service of [`GrpcMetricsLayer`].
#[derive(Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
}

impl<S, B, RB> tower::Service<http::Request<B>> for GrpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<MeteredBody<RB>>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let grpc = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        // "/raftlock.v1.Lock/Acquire" -> ("raftlock.v1.Lock", "Acquire")
        let call = grpc
            .then(|| {
                let (service, method) = req.uri().path().trim_start_matches('/').split_once('/')?;
                Some(Call {
                    grpc_type: grpc_type(service, method),
                    service: service.to_owned(),
                    method: method.to_owned(),
                    started: Instant::now(),
                })
            })
            .flatten();
        if let Some(c) = &call {
            counter!(
                "grpc_server_started_total",
                "grpc_type" => c.grpc_type,
                "grpc_service" => c.service.clone(),
                "grpc_method" => c.method.clone()
            )
            .increment(1);
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            match (res, call) {
                (Ok(res), Some(call)) => {
                    // A trailers-only answer (an error) carries its status
                    // in the headers; everything else in the trailers.
                    let early = res
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .map(parse_code);
                    Ok(res.map(|body| MeteredBody {
                        inner: body,
                        call: Some(call),
                        code: early,
                    }))
                }
                (Ok(res), None) => Ok(res.map(|body| MeteredBody {
                    inner: body,
                    call: None,
                    code: None,
                })),
                (Err(e), Some(call)) => {
                    call.handled(tonic::Code::Unavailable);
                    Err(e)
                }
                (Err(e), None) => Err(e),
            }
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that records its call as handled when it ends.
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        call: Option<Call>,
        code: Option<tonic::Code>,
    }

    impl<B> PinnedDrop for MeteredBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // Dropped before its end: the client went away (or the
            // connection did) while the call was still answering.
            if let Some(call) = this.call.take() {
                call.handled(this.code.unwrap_or(tonic::Code::Cancelled));
            }
        }
    }
}

impl<B: Body> Body for MeteredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(status) = frame
                    .trailers_ref()
                    .and_then(|t| t.get("grpc-status"))
                    .and_then(|v| v.to_str().ok())
                {
                    *this.code = Some(parse_code(status));
                }
            }
            Poll::Ready(None) => {
                if let Some(call) = this.call.take() {
                    call.handled(this.code.unwrap_or(tonic::Code::Ok));
                }
            }
            Poll::Ready(Some(Err(_))) => {
                if let Some(call) = this.call.take() {
                    call.handled(this.code.unwrap_or(tonic::Code::Unknown));
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_names_are_how_tonic_spells_each_code() {
        for i in 0..=16 {
            let code = tonic::Code::from_i32(i);
            assert_eq!(super::debug_name(code), format!("{code:?}"));
        }
    }

    use super::*;

    #[test]
    fn codes_are_named_as_stock_dashboards_filter_on_them() {
        let name = |v: &str| code_name(parse_code(v));
        assert_eq!(name("0"), "OK");
        assert_eq!(name("1"), "Canceled");
        assert_eq!(name("5"), "NotFound");
        assert_eq!(name("14"), "Unavailable");
        assert_eq!(name("nonsense"), "Unknown");
        assert_eq!(grpc_type("raftlock.v1.Lock", "Pipeline"), "bidi_stream");
        assert_eq!(
            grpc_type("raftlock.v1.Election", "Observe"),
            "server_stream"
        );
        assert_eq!(grpc_type("raftlock.v1.Lock", "Acquire"), "unary");
    }
}
