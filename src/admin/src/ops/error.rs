//! Errors of the admin operations, with the code and HTTP status the
//! reference system gives them. The HTTP API turns them into its JSON
//! error body; the CLI prints their message.

use garage_model::helper::HelperError;
use serde::{Deserialize, Serialize};

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
    NoSuchKmsKey(String),
    #[error("{0}")]
    NoSuchTopic(String),
    #[error("{0}")]
    NoSuchRemote(String),
    /// An IAM action's entity (user, group, role, policy, provider).
    #[error("{0}")]
    NoSuchEntity(String),
    /// An IAM action refused by the state (`DeleteConflict`,
    /// `EntityAlreadyExists`, `LimitExceeded`): AWS's code.
    #[error("{1}")]
    IamConflict(&'static str, String),
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
            ApiError::NoSuchKmsKey(_) => "NoSuchKmsKey",
            ApiError::NoSuchTopic(_) => "NoSuchTopic",
            ApiError::NoSuchRemote(_) => "NoSuchRemote",
            ApiError::NoSuchEntity(_) => "NoSuchEntity",
            ApiError::IamConflict(code, _) => code,
            ApiError::KeyAlreadyExists(_) => "KeyAlreadyExists",
            ApiError::BucketAlreadyExists(_) => "BucketAlreadyExists",
            ApiError::BucketNotEmpty(_) => "BucketNotEmpty",
            ApiError::NotFound(_) => "NoSuchEndpoint",
            ApiError::Internal(_) => "InternalError",
        }
    }

    /// The HTTP status the reference system answers it with.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) | ApiError::InvalidBucketName(_) => 400,
            ApiError::Forbidden(_) => 403,
            ApiError::NoSuchAccessKey(_)
            | ApiError::NoSuchBucket(_)
            | ApiError::NoSuchNode(_)
            | ApiError::NoSuchBlock(_)
            | ApiError::NoSuchWorker(_)
            | ApiError::NoSuchAdminToken(_)
            | ApiError::NoSuchObject(_)
            | ApiError::NoSuchKmsKey(_)
            | ApiError::NoSuchTopic(_)
            | ApiError::NoSuchRemote(_)
            | ApiError::NoSuchEntity(_)
            | ApiError::NotFound(_) => 404,
            ApiError::KeyAlreadyExists(_)
            | ApiError::BucketAlreadyExists(_)
            | ApiError::BucketNotEmpty(_)
            | ApiError::IamConflict(..) => 409,
            ApiError::Internal(_) => 500,
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

/// An error as it crosses the admin RPC: its code and message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireError {
    pub code: String,
    pub message: String,
    /// The HTTP status the admin API answers it with.
    #[serde(default)]
    pub status: u16,
}

impl From<&ApiError> for WireError {
    fn from(e: &ApiError) -> Self {
        WireError {
            code: e.code().to_string(),
            message: e.to_string(),
            status: e.status(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_errors_map_to_reference_codes() {
        let e: ApiError = HelperError::NoSuchBucket("b".into()).into();
        assert_eq!((e.status(), e.code()), (404, "NoSuchBucket"));
        let e: ApiError = HelperError::NoSuchKey("k".into()).into();
        assert_eq!((e.status(), e.code()), (404, "NoSuchAccessKey"));
        let e: ApiError = HelperError::AliasTaken("b".into()).into();
        assert_eq!(e.status(), 409);
        let e: ApiError = HelperError::BadName("B!".into()).into();
        assert_eq!((e.status(), e.code()), (400, "InvalidBucketName"));
        let e = ApiError::NoSuchRemote("r".into());
        assert_eq!((e.status(), e.code()), (404, "NoSuchRemote"));
    }
}
