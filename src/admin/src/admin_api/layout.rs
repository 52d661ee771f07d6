//! The cluster layout: read, stage changes, apply, revert, history:
//! HTTP wrappers of [`crate::ops::layout`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::extract::{ok, Answer, Body};
use super::St;
use crate::ops::layout::{self as op, *};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(get_cluster_layout))
        .routes(routes!(update_cluster_layout))
        .routes(routes!(apply_cluster_layout))
        .routes(routes!(revert_cluster_layout))
        .routes(routes!(get_cluster_layout_history))
        .routes(routes!(preview_cluster_layout_changes))
        .routes(routes!(cluster_layout_skip_dead_nodes))
}

/// The current layout and the changes staged for the next one.
#[utoipa::path(get, path = "/v2/GetClusterLayout", tag = "Cluster layout",
    responses((status = 200, body = GetClusterLayoutResponse), (status = 403, body = ErrorBody)))]
pub async fn get_cluster_layout(State(st): State<St>) -> Answer<GetClusterLayoutResponse> {
    ok(op::get_cluster_layout(&st.garage.system)?)
}

/// Stages role changes and/or new parameters; apply them with
/// ApplyClusterLayout.
#[utoipa::path(post, path = "/v2/UpdateClusterLayout", tag = "Cluster layout",
    request_body = UpdateClusterLayoutRequest,
    responses((status = 200, body = GetClusterLayoutResponse), (status = 400, body = ErrorBody)))]
pub async fn update_cluster_layout(
    State(st): State<St>,
    Body(req): Body<UpdateClusterLayoutRequest>,
) -> Answer<GetClusterLayoutResponse> {
    ok(op::update_cluster_layout(&st.garage.system, req)?)
}

/// Applies the staged changes as a new layout version.
#[utoipa::path(post, path = "/v2/ApplyClusterLayout", tag = "Cluster layout",
    request_body = ApplyClusterLayoutRequest,
    responses((status = 200, body = ApplyClusterLayoutResponse), (status = 400, body = ErrorBody)))]
pub async fn apply_cluster_layout(
    State(st): State<St>,
    Body(req): Body<ApplyClusterLayoutRequest>,
) -> Answer<ApplyClusterLayoutResponse> {
    ok(op::apply_cluster_layout(&st.garage.system, req)?)
}

/// Drops every staged change.
#[utoipa::path(post, path = "/v2/RevertClusterLayout", tag = "Cluster layout",
    responses((status = 200, body = GetClusterLayoutResponse), (status = 403, body = ErrorBody)))]
pub async fn revert_cluster_layout(State(st): State<St>) -> Answer<GetClusterLayoutResponse> {
    ok(op::revert_cluster_layout(&st.garage.system)?)
}

/// The layout versions this node keeps and, during a change, how far each
/// node is with it.
#[utoipa::path(get, path = "/v2/GetClusterLayoutHistory", tag = "Cluster layout",
    responses((status = 200, body = GetClusterLayoutHistoryResponse), (status = 403, body = ErrorBody)))]
pub async fn get_cluster_layout_history(
    State(st): State<St>,
) -> Answer<GetClusterLayoutHistoryResponse> {
    ok(op::get_cluster_layout_history(&st.garage.system)?)
}

/// Computes the layout the staged changes would make, without applying it.
#[utoipa::path(post, path = "/v2/PreviewClusterLayoutChanges", tag = "Cluster layout",
    responses((status = 200, body = PreviewClusterLayoutChangesResponse), (status = 400, body = ErrorBody)))]
pub async fn preview_cluster_layout_changes(
    State(st): State<St>,
) -> Answer<PreviewClusterLayoutChangesResponse> {
    ok(op::preview_cluster_layout_changes(&st.garage.system)?)
}

/// Moves the update trackers of the nodes that are down to `version`, so
/// that a layout change completes without them (`garage layout
/// skip-dead-nodes`).
#[utoipa::path(post, path = "/v2/ClusterLayoutSkipDeadNodes", tag = "Cluster layout",
    request_body = ClusterLayoutSkipDeadNodesRequest,
    responses((status = 200, body = ClusterLayoutSkipDeadNodesResponse), (status = 400, body = ErrorBody)))]
pub async fn cluster_layout_skip_dead_nodes(
    State(st): State<St>,
    Body(req): Body<ClusterLayoutSkipDeadNodesRequest>,
) -> Answer<ClusterLayoutSkipDeadNodesResponse> {
    ok(op::cluster_layout_skip_dead_nodes(&st.garage.system, req)?)
}
