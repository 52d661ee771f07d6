//! Errors of the admin API and their JSON form: `{code, message, region,
//! path}` with the HTTP status the reference system gives them.

use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use garage_model::helper::HelperError;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A malformed request, or one the current state refuses.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    InvalidBucketName(String),
    /// No token, a wrong token, or no `admin_token` configured.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NoSuchAccessKey(String),
    #[error("{0}")]
    NoSuchBucket(String),
    #[error("{0}")]
    NoSuchNode(String),
    #[error("{0}")]
    NoSuchBlock(String),
    #[error("{0}")]
    NoSuchWorker(String),
    #[error("{0}")]
    NoSuchAdminToken(String),
    #[error("{0}")]
    NoSuchObject(String),
    #[error("{0}")]
    KeyAlreadyExists(String),
    #[error("{0}")]
    BucketAlreadyExists(String),
    #[error("{0}")]
    BucketNotEmpty(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "InvalidRequest",
            ApiError::InvalidBucketName(_) => "InvalidBucketName",
            ApiError::Forbidden(_) => "AccessDenied",
            ApiError::NoSuchAccessKey(_) => "NoSuchAccessKey",
            ApiError::NoSuchBucket(_) => "NoSuchBucket",
            ApiError::NoSuchNode(_) => "NoSuchNode",
            ApiError::NoSuchBlock(_) => "NoSuchBlock",
            ApiError::NoSuchWorker(_) => "NoSuchWorker",
            ApiError::NoSuchAdminToken(_) => "NoSuchAdminToken",
            ApiError::NoSuchObject(_) => "NoSuchObject",
            ApiError::KeyAlreadyExists(_) => "KeyAlreadyExists",
            ApiError::BucketAlreadyExists(_) => "BucketAlreadyExists",
            ApiError::BucketNotEmpty(_) => "BucketNotEmpty",
            ApiError::NotFound(_) => "NoSuchEndpoint",
            ApiError::Internal(_) => "InternalError",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::InvalidBucketName(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NoSuchAccessKey(_)
            | ApiError::NoSuchBucket(_)
            | ApiError::NoSuchNode(_)
            | ApiError::NoSuchBlock(_)
            | ApiError::NoSuchWorker(_)
            | ApiError::NoSuchAdminToken(_)
            | ApiError::NoSuchObject(_)
            | ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::KeyAlreadyExists(_)
            | ApiError::BucketAlreadyExists(_)
            | ApiError::BucketNotEmpty(_) => StatusCode::CONFLICT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn bad(msg: impl Into<String>) -> Self {
        ApiError::BadRequest(msg.into())
    }
}

impl From<HelperError> for ApiError {
    fn from(e: HelperError) -> Self {
        let msg = e.to_string();
        match e {
            HelperError::Table(_) => ApiError::Internal(msg),
            HelperError::BadName(_) => ApiError::InvalidBucketName(msg),
            HelperError::KeyFormat(_)
            | HelperError::AmbiguousKey { .. }
            | HelperError::AmbiguousBucket { .. }
            | HelperError::Refused(_) => ApiError::BadRequest(msg),
            HelperError::NoSuchBucket(_) => ApiError::NoSuchBucket(msg),
            HelperError::NoSuchKey(_) => ApiError::NoSuchAccessKey(msg),
            HelperError::AliasTaken(_) => ApiError::BucketAlreadyExists(msg),
            HelperError::KeyExists(_) => ApiError::KeyAlreadyExists(msg),
        }
    }
}

impl From<garage_table::Error> for ApiError {
    fn from(e: garage_table::Error) -> Self {
        ApiError::Internal(e.to_string())
    }
}

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
        let status = self.status();
        let pending = PendingError {
            code: self.code(),
            message: self.to_string(),
        };
        let mut res = (status, pending.message.clone()).into_response();
        res.extensions_mut().insert(pending);
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_errors_map_to_reference_codes() {
        let e: ApiError = HelperError::NoSuchBucket("b".into()).into();
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::NOT_FOUND, "NoSuchBucket")
        );
        let e: ApiError = HelperError::NoSuchKey("k".into()).into();
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::NOT_FOUND, "NoSuchAccessKey")
        );
        let e: ApiError = HelperError::AliasTaken("b".into()).into();
        assert_eq!(e.status(), StatusCode::CONFLICT);
        let e: ApiError = HelperError::BadName("B!".into()).into();
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::BAD_REQUEST, "InvalidBucketName")
        );
    }
}
