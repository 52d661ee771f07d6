//! The admin token endpoints: HTTP wrappers of [`crate::ops::token`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::ops::token::{
    handle, pattern, AdminTokenInfo, TokenQuery, TokenRequest, TokenResponse,
    UpdateAdminTokenRequest,
};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_admin_tokens))
        .routes(routes!(get_admin_token_info))
        .routes(routes!(create_admin_token))
        .routes(routes!(update_admin_token))
        .routes(routes!(delete_admin_token))
}

fn one(r: TokenResponse) -> Answer<AdminTokenInfo> {
    match r {
        TokenResponse::Token(t) => ok(t),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// Every admin token (not the configuration's `admin_token`).
#[utoipa::path(get, path = "/v2/ListAdminTokens", tag = "Admin token",
    responses((status = 200, body = Vec<AdminTokenInfo>), (status = 403, body = ErrorBody)))]
pub async fn list_admin_tokens(State(st): State<St>) -> Answer<Vec<AdminTokenInfo>> {
    match handle(&st.garage, TokenRequest::List).await? {
        TokenResponse::Tokens(t) => ok(t),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// One admin token.
#[utoipa::path(get, path = "/v2/GetAdminTokenInfo", tag = "Admin token", params(TokenQuery),
    responses((status = 200, body = AdminTokenInfo), (status = 404, body = ErrorBody)))]
pub async fn get_admin_token_info(
    State(st): State<St>,
    Query(q): Query<TokenQuery>,
) -> Answer<AdminTokenInfo> {
    one(handle(&st.garage, TokenRequest::Info(pattern(q)?)).await?)
}

/// A new token: `{"name", "expiration" (RFC 3339) or "neverExpires",
/// "scope": [endpoint names]}` (scope `["*"]` when absent); its secret is in
/// this answer only.
#[utoipa::path(post, path = "/v2/CreateAdminToken", tag = "Admin token",
    request_body = UpdateAdminTokenRequest,
    responses((status = 200, body = AdminTokenInfo), (status = 400, body = ErrorBody)))]
pub async fn create_admin_token(
    State(st): State<St>,
    Body(req): Body<UpdateAdminTokenRequest>,
) -> Answer<AdminTokenInfo> {
    one(handle(&st.garage, TokenRequest::Create(req)).await?)
}

/// Changes a token's name, expiration or scope.
#[utoipa::path(post, path = "/v2/UpdateAdminToken", tag = "Admin token", params(TokenQuery),
    request_body = UpdateAdminTokenRequest,
    responses((status = 200, body = AdminTokenInfo), (status = 404, body = ErrorBody)))]
pub async fn update_admin_token(
    State(st): State<St>,
    Query(q): Query<TokenQuery>,
    Body(req): Body<UpdateAdminTokenRequest>,
) -> Answer<AdminTokenInfo> {
    one(handle(&st.garage, TokenRequest::Update(pattern(q)?, req)).await?)
}

/// Revokes a token.
#[utoipa::path(post, path = "/v2/DeleteAdminToken", tag = "Admin token", params(TokenQuery),
    responses((status = 200, body = Vec<String>), (status = 404, body = ErrorBody)))]
pub async fn delete_admin_token(
    State(st): State<St>,
    Query(q): Query<TokenQuery>,
) -> Answer<Vec<String>> {
    match handle(&st.garage, TokenRequest::Delete(pattern(q)?)).await? {
        TokenResponse::Deleted(ids) => ok(ids),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}
