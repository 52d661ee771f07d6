//! Request extractors whose failures are admin API errors (JSON, 400)
//! rather than axum's plain-text answers.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON request body, whatever its `Content-Type` says (as the
/// reference system does: `curl -d` sends a form type).
pub struct Body<T>(pub T);

/// Request bodies of the admin API are small.
const MAX_BODY: usize = 1 << 20;

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
            .await
            .map_err(|e| ApiError::bad(format!("cannot read the request body: {e}")))?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))
    }
}

/// Query parameters.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(v) =
            axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(Query(v))
    }
}

/// The JSON answer of an operation.
pub type Answer<T> = Result<axum::Json<T>, ApiError>;

pub fn ok<T>(v: T) -> Answer<T> {
    Ok(axum::Json(v))
}
