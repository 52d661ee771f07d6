//! The access key endpoints: HTTP wrappers of [`crate::ops::key`].

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::ops::key::{self as op, *};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_keys))
        .routes(routes!(get_key_info))
        .routes(routes!(create_key))
        .routes(routes!(import_key))
        .routes(routes!(update_key))
        .routes(routes!(delete_key))
}

/// Every access key.
#[utoipa::path(get, path = "/v2/ListKeys", tag = "Access key",
    responses((status = 200, body = Vec<ListKeysResponseItem>), (status = 403, body = ErrorBody)))]
pub async fn list_keys(State(st): State<St>) -> Answer<Vec<ListKeysResponseItem>> {
    ok(op::list_keys(&st.garage).await?)
}

/// One access key, by `id` or `search`.
#[utoipa::path(get, path = "/v2/GetKeyInfo", tag = "Access key", params(GetKeyInfoQuery),
    responses((status = 200, body = GetKeyInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn get_key_info(
    State(st): State<St>,
    Query(q): Query<GetKeyInfoQuery>,
) -> Answer<GetKeyInfoResponse> {
    ok(op::get_key_info(&st.garage, q).await?)
}

/// Creates an access key; the answer holds its secret.
#[utoipa::path(post, path = "/v2/CreateKey", tag = "Access key",
    request_body = CreateKeyRequest,
    responses((status = 200, body = GetKeyInfoResponse), (status = 400, body = ErrorBody)))]
pub async fn create_key(
    State(st): State<St>,
    Body(req): Body<CreateKeyRequest>,
) -> Answer<GetKeyInfoResponse> {
    ok(op::create_key(&st.garage, req).await?)
}

/// Imports a key made elsewhere (to migrate it from another cluster).
#[utoipa::path(post, path = "/v2/ImportKey", tag = "Access key",
    request_body = ImportKeyRequest,
    responses((status = 200, body = GetKeyInfoResponse), (status = 409, body = ErrorBody)))]
pub async fn import_key(
    State(st): State<St>,
    Body(req): Body<ImportKeyRequest>,
) -> Answer<GetKeyInfoResponse> {
    ok(op::import_key(&st.garage, req).await?)
}

/// The `?id=` of the operations on one key or bucket.
#[derive(Debug, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IdQuery {
    /// The full id.
    pub id: String,
}

/// Renames a key, or changes its key-wide rights.
#[utoipa::path(post, path = "/v2/UpdateKey", tag = "Access key", params(IdQuery),
    request_body = UpdateKeyRequestBody,
    responses((status = 200, body = GetKeyInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn update_key(
    State(st): State<St>,
    Query(q): Query<IdQuery>,
    Body(req): Body<UpdateKeyRequestBody>,
) -> Answer<GetKeyInfoResponse> {
    ok(op::update_key(&st.garage, &q.id, req).await?)
}

/// Deletes a key, revoking its rights and local aliases first.
#[utoipa::path(post, path = "/v2/DeleteKey", tag = "Access key", params(IdQuery),
    responses((status = 200), (status = 404, body = ErrorBody)))]
pub async fn delete_key(State(st): State<St>, Query(q): Query<IdQuery>) -> Answer<()> {
    ok(op::delete_key(&st.garage, &q.id).await?)
}
