//! The bucket endpoints: HTTP wrappers of [`crate::ops::bucket`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::extract::{ok, Answer, Body, Query};
use super::key::IdQuery;
use super::St;
use crate::ops::bucket::{self as op, *};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_buckets))
        .routes(routes!(get_bucket_info))
        .routes(routes!(create_bucket))
        .routes(routes!(update_bucket))
        .routes(routes!(delete_bucket))
        .routes(routes!(add_bucket_alias))
        .routes(routes!(remove_bucket_alias))
        .routes(routes!(allow_bucket_key))
        .routes(routes!(deny_bucket_key))
        .routes(routes!(inspect_object))
        .routes(routes!(cleanup_incomplete_uploads))
}

/// Every bucket.
#[utoipa::path(get, path = "/v2/ListBuckets", tag = "Bucket",
    responses((status = 200, body = Vec<ListBucketsResponseItem>), (status = 403, body = ErrorBody)))]
pub async fn list_buckets(State(st): State<St>) -> Answer<Vec<ListBucketsResponseItem>> {
    ok(op::list_buckets(&st.garage).await?)
}

/// One bucket, by `id`, `globalAlias` or `search`.
#[utoipa::path(get, path = "/v2/GetBucketInfo", tag = "Bucket", params(GetBucketInfoQuery),
    responses((status = 200, body = GetBucketInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn get_bucket_info(
    State(st): State<St>,
    Query(q): Query<GetBucketInfoQuery>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::get_bucket_info(&st.garage, q).await?)
}

/// Creates a bucket with a global alias, a local alias, or both.
#[utoipa::path(post, path = "/v2/CreateBucket", tag = "Bucket",
    request_body = CreateBucketRequest,
    responses((status = 200, body = GetBucketInfoResponse), (status = 409, body = ErrorBody)))]
pub async fn create_bucket(
    State(st): State<St>,
    Body(req): Body<CreateBucketRequest>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::create_bucket(&st.garage, req).await?)
}

/// Enables or disables website access (without `indexDocument`, enabling
/// keeps the current documents, `index.html` if none), or sets quotas.
#[utoipa::path(post, path = "/v2/UpdateBucket", tag = "Bucket", params(IdQuery),
    request_body = UpdateBucketRequestBody,
    responses((status = 200, body = GetBucketInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn update_bucket(
    State(st): State<St>,
    Query(q): Query<IdQuery>,
    Body(req): Body<UpdateBucketRequestBody>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::update_bucket(&st.garage, &q.id, req).await?)
}

/// Deletes an empty bucket.
#[utoipa::path(post, path = "/v2/DeleteBucket", tag = "Bucket", params(IdQuery),
    responses((status = 200), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete_bucket(State(st): State<St>, Query(q): Query<IdQuery>) -> Answer<()> {
    ok(op::delete_bucket(&st.garage, &q.id).await?)
}

/// Adds a global or local alias to a bucket.
#[utoipa::path(post, path = "/v2/AddBucketAlias", tag = "Bucket alias",
    request_body = BucketAliasRequest,
    responses((status = 200, body = GetBucketInfoResponse), (status = 409, body = ErrorBody)))]
pub async fn add_bucket_alias(
    State(st): State<St>,
    Body(req): Body<BucketAliasRequest>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::add_bucket_alias(&st.garage, req).await?)
}

/// Removes a global or local alias of a bucket (not its last name).
#[utoipa::path(post, path = "/v2/RemoveBucketAlias", tag = "Bucket alias",
    request_body = BucketAliasRequest,
    responses((status = 200, body = GetBucketInfoResponse), (status = 400, body = ErrorBody)))]
pub async fn remove_bucket_alias(
    State(st): State<St>,
    Body(req): Body<BucketAliasRequest>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::remove_bucket_alias(&st.garage, req).await?)
}

/// Grants rights on a bucket to a key.
#[utoipa::path(post, path = "/v2/AllowBucketKey", tag = "Permission",
    request_body = BucketKeyPermChangeRequest,
    responses((status = 200, body = GetBucketInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn allow_bucket_key(
    State(st): State<St>,
    Body(req): Body<BucketKeyPermChangeRequest>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::change_perm(&st.garage, req, true).await?)
}

/// Revokes rights on a bucket from a key.
#[utoipa::path(post, path = "/v2/DenyBucketKey", tag = "Permission",
    request_body = BucketKeyPermChangeRequest,
    responses((status = 200, body = GetBucketInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn deny_bucket_key(
    State(st): State<St>,
    Body(req): Body<BucketKeyPermChangeRequest>,
) -> Answer<GetBucketInfoResponse> {
    ok(op::change_perm(&st.garage, req, false).await?)
}

/// The internal state of an object: the versions of its entry and of the
/// history table, their states and data blocks (read at quorum).
#[utoipa::path(get, path = "/v2/InspectObject", tag = "Bucket", params(InspectObjectQuery),
    responses((status = 200, body = InspectObjectResponse), (status = 404, body = ErrorBody)))]
pub async fn inspect_object(
    State(st): State<St>,
    Query(q): Query<InspectObjectQuery>,
) -> Answer<InspectObjectResponse> {
    ok(op::inspect_object(&st.garage, q).await?)
}

/// Aborts a bucket's multipart uploads older than a given age.
#[utoipa::path(post, path = "/v2/CleanupIncompleteUploads", tag = "Bucket",
    request_body = CleanupIncompleteUploadsRequest,
    responses((status = 200, body = CleanupIncompleteUploadsResponse), (status = 404, body = ErrorBody)))]
pub async fn cleanup_incomplete_uploads(
    State(st): State<St>,
    Body(req): Body<CleanupIncompleteUploadsRequest>,
) -> Answer<CleanupIncompleteUploadsResponse> {
    ok(op::cleanup_incomplete_uploads(&st.garage, &req).await?)
}
