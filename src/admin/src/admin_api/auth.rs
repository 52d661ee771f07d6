//! The bearer-token check of the admin endpoints.
//!
//! As in the reference system, every refusal is `403 AccessDenied`: no
//! `admin_token` configured, no `Authorization` header, or a wrong token.
//! The token is compared in constant time (on hashes, so that its length
//! does not leak either).

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use crate::bearer::{check_bearer, TokenCheck};

use super::error::ApiError;
use super::St;

/// Why a request is refused, if it is.
pub fn check(expected: Option<&str>, header: Option<&[u8]>) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        return Err(ApiError::Forbidden(
            "admin_token is not configured on this node: the admin API is disabled \
             (set [admin] admin_token or admin_token_file)"
                .into(),
        ));
    };
    match check_bearer(expected, header) {
        TokenCheck::Valid => Ok(()),
        TokenCheck::Missing if header.is_none() => Err(ApiError::Forbidden(
            "an Authorization: Bearer <admin_token> header is required".into(),
        )),
        TokenCheck::Missing => Err(ApiError::Forbidden(
            "the Authorization header must be Bearer <admin_token>".into(),
        )),
        TokenCheck::Wrong => Err(ApiError::Forbidden("invalid admin token".into())),
    }
}

pub async fn require_admin_token(State(state): State<St>, req: Request, next: Next) -> Response {
    let header = req.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    let refusal = match check(state.admin_token.as_deref(), header) {
        Ok(()) => return next.run(req).await,
        Err(e) => e,
    };
    // Not the configuration's token: a token of the admin_token table
    // whose scope names this endpoint.
    let bearer = header
        .and_then(|h| h.strip_prefix(b"Bearer "))
        .and_then(|t| std::str::from_utf8(t.trim_ascii()).ok());
    let endpoint = req.uri().path().strip_prefix("/v2/").unwrap_or("");
    if let Some(token) = bearer {
        if garage_model::admin_token_table::split_token(token).is_some() {
            use crate::ops::token::{user_token_verdict, TokenVerdict};
            let why = match user_token_verdict(&state.garage, token, endpoint).await {
                TokenVerdict::Allowed => return next.run(req).await,
                TokenVerdict::Invalid => "this admin token is unknown or expired".to_string(),
                TokenVerdict::OutOfScope => {
                    format!("this admin token's scope does not allow {endpoint}")
                }
            };
            return ApiError::Forbidden(why).into_response();
        }
    }
    refusal.into_response()
}

#[cfg(test)]
mod tests {
    use super::{check, check_bearer, TokenCheck};

    #[test]
    fn tokens() {
        assert!(check(Some("s3cret"), Some(b"Bearer s3cret")).is_ok());
        assert!(check(Some("s3cret"), Some(b"Bearer s3cret ")).is_ok());
        assert!(check(Some("s3cret"), Some(b"Bearer s3cre")).is_err());
        assert!(check(Some("s3cret"), Some(b"Bearer s3cretx")).is_err());
        assert!(check(Some("s3cret"), Some(b"s3cret")).is_err());
        assert!(check(Some("s3cret"), None).is_err());
        assert!(check(None, Some(b"Bearer s3cret")).is_err());
        assert!(check(None, None).is_err());
        assert_eq!(check_bearer("t0k", None), TokenCheck::Missing);
        assert_eq!(check_bearer("t0k", Some(b"Basic t0k")), TokenCheck::Missing);
        assert_eq!(check_bearer("t0k", Some(b"Bearer t0")), TokenCheck::Wrong);
        assert_eq!(check_bearer("t0k", Some(b"Bearer t0k")), TokenCheck::Valid);
    }
}
