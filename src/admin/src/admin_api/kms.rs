//! The KMS key endpoints: HTTP wrappers of [`crate::ops::kms`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::ops::kms::{
    handle, CreateKmsKeyRequest, KmsKeyInfo, KmsKeyQuery, KmsRequest, KmsResponse,
    UpdateKmsKeyRequest,
};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_kms_keys))
        .routes(routes!(get_kms_key_info))
        .routes(routes!(create_kms_key))
        .routes(routes!(update_kms_key))
        .routes(routes!(rotate_kms_key))
}

fn one(r: KmsResponse) -> Answer<KmsKeyInfo> {
    match r {
        KmsResponse::Key(k) => ok(k),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// Every KMS key of the cluster, SSE-S3's included.
#[utoipa::path(get, path = "/v2/ListKmsKeys", tag = "KMS key",
    responses((status = 200, body = Vec<KmsKeyInfo>), (status = 403, body = ErrorBody)))]
pub async fn list_kms_keys(State(st): State<St>) -> Answer<Vec<KmsKeyInfo>> {
    match handle(&st.garage, KmsRequest::List).await? {
        KmsResponse::Keys(k) => ok(k),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// One KMS key, by id, `alias/NAME` or ARN.
#[utoipa::path(get, path = "/v2/GetKmsKeyInfo", tag = "KMS key", params(KmsKeyQuery),
    responses((status = 200, body = KmsKeyInfo), (status = 404, body = ErrorBody)))]
pub async fn get_kms_key_info(
    State(st): State<St>,
    Query(q): Query<KmsKeyQuery>,
) -> Answer<KmsKeyInfo> {
    one(handle(&st.garage, KmsRequest::Info(q.id)).await?)
}

/// A new KMS key (`{"description", "alias"}`, both optional).
#[utoipa::path(post, path = "/v2/CreateKmsKey", tag = "KMS key",
    request_body = CreateKmsKeyRequest,
    responses((status = 200, body = KmsKeyInfo), (status = 400, body = ErrorBody)))]
pub async fn create_kms_key(
    State(st): State<St>,
    Body(req): Body<CreateKmsKeyRequest>,
) -> Answer<KmsKeyInfo> {
    one(handle(&st.garage, KmsRequest::Create(req)).await?)
}

/// Changes a key's description, state (`enabled`) or aliases.
#[utoipa::path(post, path = "/v2/UpdateKmsKey", tag = "KMS key", params(KmsKeyQuery),
    request_body = UpdateKmsKeyRequest,
    responses((status = 200, body = KmsKeyInfo), (status = 404, body = ErrorBody)))]
pub async fn update_kms_key(
    State(st): State<St>,
    Query(q): Query<KmsKeyQuery>,
    Body(req): Body<UpdateKmsKeyRequest>,
) -> Answer<KmsKeyInfo> {
    one(handle(&st.garage, KmsRequest::Update(q.id, req)).await?)
}

/// Adds a material version that wraps new data keys from now on; the
/// earlier versions still open what they wrapped.
#[utoipa::path(post, path = "/v2/RotateKmsKey", tag = "KMS key", params(KmsKeyQuery),
    responses((status = 200, body = KmsKeyInfo), (status = 404, body = ErrorBody)))]
pub async fn rotate_kms_key(
    State(st): State<St>,
    Query(q): Query<KmsKeyQuery>,
) -> Answer<KmsKeyInfo> {
    one(handle(&st.garage, KmsRequest::Rotate(q.id)).await?)
}
