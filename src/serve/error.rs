//! The API's errors: one JSON shape, one status per kind.
//!
//! Every error answers `{"error": {"status": N, "kind": "...", "message": "..."}}`
//! with a message that names the field, the graph, the run or the node that
//! is wrong. 400 for a bad field, 401 without a valid token, 403 for a browser
//! action without its anti-CSRF token, 404 for an
//! unknown thing, 409 for a conflict, 413 past a body limit, 414 and 431 for
//! a request head over its limits (hyper's own answers, given this body by
//! `parse_errors`), 502 when a replicated member's front lost the leader
//! mid-request, 503 while the engine is stopped; a handler never panics on
//! input. An error answer something else made (an
//! extractor's rejection, the UI's) gets the shape on its way out
//! ([`in_one_shape`]). No message names an address internal to a member
//! (its engine's loopback port): a client cannot reach it and should not
//! learn it.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// An API error.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What kind: bad_request, unauthorized, forbidden, not_found,
    /// method_not_allowed, conflict, too_large, uri_too_long,
    /// headers_too_large, internal, bad_gateway, unavailable.
    pub kind: &'static str,
    /// What is wrong, and where.
    pub message: String,
}

/// The body of an error answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error's fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The HTTP status.
    pub status: u16,
    /// Its kind.
    pub kind: String,
    /// What is wrong, and where.
    pub message: String,
}

impl ApiError {
    /// 400: a field or parameter is not valid.
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "bad_request",
            message: message.into(),
        }
    }
    /// 404: no such graph, run, node, key or ticket.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            kind: "not_found",
            message: message.into(),
        }
    }
    /// 405: the route exists, not with this method.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            kind: "method_not_allowed",
            message: message.into(),
        }
    }
    /// 409: the request conflicts with the state.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::CONFLICT,
            kind: "conflict",
            message: message.into(),
        }
    }
    /// 401: no token, or a wrong one.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            kind: "unauthorized",
            message: message.into(),
        }
    }
    /// 403: a cookie-authenticated action without its anti-CSRF token.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::FORBIDDEN,
            kind: "forbidden",
            message: message.into(),
        }
    }
    /// 413: the body is over `limit_bytes`.
    pub fn too_large(limit_bytes: usize) -> ApiError {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            kind: "too_large",
            message: format!("the body is over {limit_bytes} bytes"),
        }
    }
    /// 502: the request was passed on and its answer lost; it may have
    /// taken effect.
    pub fn bad_gateway(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_GATEWAY,
            kind: "bad_gateway",
            message: message.into(),
        }
    }
    /// 500: the store or an actor failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "internal",
            message: message.into(),
        }
    }
    /// 503: the engine stopped or an actor did not answer.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "unavailable",
            message: message.into(),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let message = e.to_string();
        match e {
            EngineError::BadJob { .. } | EngineError::Settings(_) => ApiError::bad(message),
            EngineError::NotFound(_) => ApiError::not_found(message),
            EngineError::BadGraph(_) | EngineError::BadParam(_) => ApiError::bad(message),
            // The actors answer in words: a run, node or key that does not
            // exist is named "has no …" / "is not in the graph's inventory".
            EngineError::Graph(m) => {
                if m.contains(" has no ") || m.contains("is not in the graph's inventory") {
                    ApiError::not_found(message)
                } else if m.contains("is cancelled") || m.contains("changed during") {
                    ApiError::conflict(message)
                } else {
                    ApiError::bad(message)
                }
            }
            EngineError::Stopped(_) | EngineError::Call { .. } | EngineError::Timeout(..) => {
                ApiError::unavailable(message)
            }
            EngineError::Store(_) => ApiError::internal(message),
        }
    }
}

impl From<weir_actors::store::StoreError> for ApiError {
    fn from(e: weir_actors::store::StoreError) -> ApiError {
        ApiError::internal(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), error = %self.message, "api request failed");
        } else {
            tracing::debug!(status = self.status.as_u16(), error = %self.message, "api request refused");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                status: self.status.as_u16(),
                kind: self.kind.to_string(),
                message: self.message,
            },
        };
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body was not read to its end: the connection cannot
            // carry another request, and a client that pooled it would
            // send its next one into a closing socket. Said, and done.
            r.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        r
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;

/// The text of an error answer not in the one shape is read up to this
/// many bytes to become its message.
const ERROR_TEXT_BYTES_MAX: usize = 4 * 1024;

/// The kind of an error status that something other than an [`ApiError`]
/// answered with.
fn kind_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        413 => "too_large",
        414 => "uri_too_long",
        415 => "unsupported_media_type",
        431 => "headers_too_large",
        502 => "bad_gateway",
        503 => "unavailable",
        s if s >= 500 => "internal",
        _ => "refused",
    }
}

/// The router's outermost middleware: an error answer that is not in the
/// one shape (an extractor's rejection that a route did not map, the UI's
/// missing file) gets it, its text as the message, its status and other
/// headers kept. An error is then the same to a client wherever it arose.
pub async fn in_one_shape(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let shaped = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || shaped {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, ERROR_TEXT_BYTES_MAX)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
    } else {
        text
    };
    let body = ErrorBody {
        error: ErrorDetail {
            status: status.as_u16(),
            kind: kind_of(status).to_string(),
            message,
        },
    };
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    Response::from_parts(parts, Body::from(bytes))
}
