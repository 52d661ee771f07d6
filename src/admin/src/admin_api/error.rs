//! Errors of the admin API and their JSON form: `{code, message, region,
//! path}` with the HTTP status the reference system gives them.

use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

pub use crate::ops::error::ApiError;

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        ApiError::BadRequest(format!("invalid query parameters: {}", e.body_text()))
    }
}

/// The JSON body of every error answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A machine-readable code, as in the reference system (`NoSuchBucket`,
    /// `AccessDenied`, `InvalidRequest`, …).
    pub code: String,
    pub message: String,
    /// The node's `s3_region`.
    pub region: String,
    /// The path of the request.
    pub path: String,
}

/// An error answer, before the request's path and the region are known:
/// the [`super::finish_response`] layer fills them in.
#[derive(Debug, Clone)]
pub struct PendingError {
    pub code: &'static str,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let pending = PendingError {
            code: self.code(),
            message: self.to_string(),
        };
        let mut res = (status, pending.message.clone()).into_response();
        res.extensions_mut().insert(pending);
        res
    }
}
