//! Refusals of the HTTP API: the gRPC code's name, the machine-readable
//! reason every transport sends, a message for people, and the leader's
//! address when this node does not lead. The HTTP status follows Google's
//! mapping of gRPC codes (`google.rpc.Code`).

use crate::error::NodeError;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::LEADER_METADATA_KEY;
use serde::Serialize;
use tonic::Code;

/// A refusal as the HTTP API answers it.
#[derive(Debug)]
pub struct HttpError {
    status: StatusCode,
    body: ErrorBody,
}

/// The JSON body of a refusal.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    /// The gRPC code's name (`FAILED_PRECONDITION`).
    pub code: &'static str,
    /// The machine-readable reason (`STALE_TOKEN`); clients match this.
    pub reason: String,
    /// What was wrong, for people.
    pub message: String,
    /// The leader's address, when this node does not lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
}

/// The name of a gRPC code, as `google.rpc.Code` spells it.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The HTTP status of a gRPC code.
fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        // The request is well formed; the state refuses it (a stale token,
        // a limit defined otherwise). 400 would say the request is wrong.
        Code::FailedPrecondition => StatusCode::CONFLICT,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl HttpError {
    /// A refusal with this status, code name, reason and message.
    pub fn new(
        status: StatusCode,
        code: &'static str,
        reason: &str,
        message: impl Into<String>,
    ) -> HttpError {
        HttpError {
            status,
            body: ErrorBody {
                code,
                reason: reason.to_owned(),
                message: message.into(),
                leader: None,
            },
        }
    }

    fn of_reason(reason: Reason, message: impl Into<String>) -> HttpError {
        let code = reason.code();
        // reasons.proto names the reasons whose status is not the code's
        // usual one (NO_SPACE's 507 says more than 429's "retry soon").
        let status = reason
            .http_status()
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or_else(|| http_status(code));
        HttpError::new(status, code_name(code), reason.as_str(), message)
    }

    /// A body that is not JSON of the call's message: wrong syntax, a wrong
    /// type, an unknown field.
    pub fn json(e: serde_json::Error) -> HttpError {
        HttpError::of_reason(
            Reason::InvalidArgument,
            format!("the body is not this call's JSON message: {e}"),
        )
    }

    /// A request that is well formed but asks for something out of bounds
    /// (a query parameter, say).
    pub fn invalid(message: impl Into<String>) -> HttpError {
        HttpError::of_reason(Reason::InvalidArgument, message)
    }

    /// A body that could not be read (above the size limit, say).
    pub fn unreadable(e: axum::extract::rejection::BytesRejection) -> HttpError {
        let status = e.status();
        let mut err = HttpError::of_reason(
            Reason::LimitExceeded,
            format!("the body cannot be read: {}", e.body_text()),
        );
        // 413 says what happened better than 429 would.
        err.status = status;
        if status != StatusCode::PAYLOAD_TOO_LARGE {
            err.body.code = code_name(Code::InvalidArgument);
            err.body.reason = Reason::InvalidArgument.as_str().to_owned();
        }
        err
    }

    /// A fault of the server's own.
    pub fn internal(message: impl Into<String>) -> HttpError {
        HttpError::of_reason(Reason::Internal, message)
    }

    /// The JSON body.
    pub fn body(&self) -> &ErrorBody {
        &self.body
    }
}

impl From<NodeError> for HttpError {
    fn from(e: NodeError) -> HttpError {
        let mut err = HttpError::of_reason(e.reason(), e.message());
        err.body.leader = e.leader_addr().map(str::to_owned);
        err
    }
}

impl From<tonic::Status> for HttpError {
    fn from(s: tonic::Status) -> HttpError {
        let mut err = HttpError::new(
            http_status(s.code()),
            code_name(s.code()),
            reason::of(&s).map_or("", |r| r.as_str()),
            s.message(),
        );
        err.body.leader = s
            .metadata()
            .get(LEADER_METADATA_KEY)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        err
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let leader = self.body.leader.clone();
        let body = serde_json::to_vec(&self.body).unwrap_or_default();
        let mut response = (
            self.status,
            [(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response();
        if let Some(v) = leader.and_then(|l| HeaderValue::from_str(&l).ok()) {
            response.headers_mut().insert(LEADER_METADATA_KEY, v);
        }
        response
    }
}
