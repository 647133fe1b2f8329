//! The API's errors: one JSON shape, one status per kind.
//!
//! Every error answers `{"error": {"status": N, "kind": "...", "message": "..."}}`
//! with a message that names the field, the graph, the run or the node that
//! is wrong. 400 for a bad field, 401 without a valid token, 403 for a browser
//! action without its anti-CSRF token, 404 for an
//! unknown thing, 409 for a conflict, 413 past a body limit, 503 while the
//! engine is stopped; a handler never panics on input.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// An API error.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What kind: bad_request, unauthorized, not_found, conflict, too_large,
    /// unavailable, internal.
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
        (self.status, Json(body)).into_response()
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;
