//! The API's one error shape: `{"error": {"code", "message"}}` with the
//! status that fits. `code` is stable (clients branch on it); `message` is
//! for people and may change.
//!
//! A fault of the server itself (a broken store, a bug) is answered with
//! the code `internal` and a fixed message: its text can name host paths
//! and database details, so it goes to the server's log (stderr), not to
//! the client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use longhand_session::StoreError;

/// An API error: status, stable code, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// Stable, snake_case: `unauthorized`, `not_found`, `invalid_request`, …
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request`: the request is malformed or names something
    /// impossible; the client fixes it.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 404 with `code` (`not_found`, `session_not_found`, …).
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 409 with `code`: the request is well formed but the session is not
    /// in a state that allows it.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 500 `internal`; `detail` is logged, never sent.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!("serve: internal error: {detail}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed; its log (stderr) says why",
        )
    }

    /// The error a store failure is for the client.
    pub fn from_store(error: StoreError) -> Self {
        match error {
            StoreError::NotFound { what } => {
                Self::not_found("not_found", format!("{what} not found"))
            }
            StoreError::LeaseHeld { .. } | StoreError::Fenced { .. } => Self::conflict(
                "lease_held",
                "another worker holds the session right now; try again in a moment",
            ),
            other => Self::internal(other),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::from_store(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"longhand\""),
            );
        }
        response
    }
}

/// Results of handlers.
pub type ApiResult<T> = Result<T, ApiError>;
