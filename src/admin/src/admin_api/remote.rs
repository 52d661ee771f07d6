//! The bucket replication endpoints: HTTP wrappers of
//! [`crate::ops::remote`] (remotes, and a bucket's resync). Each node's
//! queue (`GetReplicationBacklog`) is a node-local operation, in
//! [`super::node`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::ops::remote::{
    handle, resync, AddRemoteRequest, RemoteInfo, RemoteQuery, RemoteRequest, RemoteResponse,
    ResyncBucketReplicationRequest, ResyncBucketReplicationResponse,
};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_remotes))
        .routes(routes!(get_remote_info))
        .routes(routes!(add_remote))
        .routes(routes!(delete_remote))
        .routes(routes!(resync_bucket_replication))
}

fn one(r: RemoteResponse) -> Answer<RemoteInfo> {
    match r {
        RemoteResponse::Remote(x) => ok(x),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// Every bucket replication remote of the cluster (never their secret
/// key).
#[utoipa::path(get, path = "/v2/ListRemotes", tag = "Bucket replication",
    responses((status = 200, body = Vec<RemoteInfo>), (status = 403, body = ErrorBody)))]
pub async fn list_remotes(State(st): State<St>) -> Answer<Vec<RemoteInfo>> {
    match handle(&st.garage, RemoteRequest::List).await? {
        RemoteResponse::Remotes(x) => ok(x),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// One replication remote, by name.
#[utoipa::path(get, path = "/v2/GetRemoteInfo", tag = "Bucket replication", params(RemoteQuery),
    responses((status = 200, body = RemoteInfo), (status = 404, body = ErrorBody)))]
pub async fn get_remote_info(
    State(st): State<St>,
    Query(q): Query<RemoteQuery>,
) -> Answer<RemoteInfo> {
    one(handle(&st.garage, RemoteRequest::Info(q.name)).await?)
}

/// A new replication remote (`{"name", "endpoint", "region",
/// "accessKeyId", "secretAccessKey"}`, `region` `garage` by default), or a
/// new configuration for an existing one. Its secret key is stored, never
/// shown. Refused until the cluster is finalized at v0.3.0.
#[utoipa::path(post, path = "/v2/AddRemote", tag = "Bucket replication",
    request_body = AddRemoteRequest,
    responses((status = 200, body = RemoteInfo), (status = 400, body = ErrorBody)))]
pub async fn add_remote(
    State(st): State<St>,
    Body(req): Body<AddRemoteRequest>,
) -> Answer<RemoteInfo> {
    one(handle(&st.garage, RemoteRequest::Add(req)).await?)
}

/// Deletes a replication remote: the versions waiting for its buckets are
/// marked FAILED (a resync sends them once a remote of that name is added
/// again).
#[utoipa::path(post, path = "/v2/DeleteRemote", tag = "Bucket replication", params(RemoteQuery),
    responses((status = 200), (status = 404, body = ErrorBody)))]
pub async fn delete_remote(State(st): State<St>, Query(q): Query<RemoteQuery>) -> Answer<()> {
    match handle(&st.garage, RemoteRequest::Delete(q.name)).await? {
        RemoteResponse::Deleted => ok(()),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// Queues, on the node reached, a bucket's versions that its replication
/// rules send somewhere and that the destination lacks (`all`: every
/// one): `{"bucketId"}` or `{"globalAlias"}`, and `"all"`.
#[utoipa::path(post, path = "/v2/ResyncBucketReplication", tag = "Bucket replication",
    request_body = ResyncBucketReplicationRequest,
    responses((status = 200, body = ResyncBucketReplicationResponse),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn resync_bucket_replication(
    State(st): State<St>,
    Body(req): Body<ResyncBucketReplicationRequest>,
) -> Answer<ResyncBucketReplicationResponse> {
    ok(resync(&st.garage, req).await?)
}
