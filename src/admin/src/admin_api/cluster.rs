//! Cluster status and health, `/health`, and connecting nodes: HTTP
//! wrappers of [`crate::ops::cluster`].

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::ops::cluster::{self as op, *};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(get_cluster_status))
        .routes(routes!(connect_cluster_nodes))
        .routes(routes!(get_cluster_statistics))
        .routes(routes!(finalize_upgrade))
}

/// Raises the cluster's active version to this node's release series once
/// every node of the layout is up and runs it (see doc/upgrading.md); 400
/// with the reasons otherwise. After it, nodes of older releases are
/// refused: no rollback.
#[utoipa::path(post, path = "/v2/FinalizeUpgrade", tag = "Cluster",
    responses((status = 200, body = FinalizeUpgradeResponse), (status = 400, body = ErrorBody)))]
pub async fn finalize_upgrade(State(st): State<St>) -> Answer<FinalizeUpgradeResponse> {
    ok(op::finalize_upgrade(&st.garage.system).await?)
}

/// The storage nodes' capacity and free space, and the space the cluster
/// can still store, as fields and as text (`freeform`, as the reference
/// answers it).
#[utoipa::path(get, path = "/v2/GetClusterStatistics", tag = "Cluster",
    responses((status = 200, body = GetClusterStatisticsResponse), (status = 403, body = ErrorBody)))]
pub async fn get_cluster_statistics(State(st): State<St>) -> Answer<GetClusterStatisticsResponse> {
    let mut s = op::get_cluster_statistics(&st.garage.system);
    s.freeform = format_cluster_statistics(&s);
    ok(s)
}

/// The nodes this node knows, with their roles in the current layout.
#[utoipa::path(get, path = "/v2/GetClusterStatus", tag = "Cluster",
    responses((status = 200, body = GetClusterStatusResponse), (status = 403, body = ErrorBody)))]
pub async fn get_cluster_status(State(st): State<St>) -> Answer<GetClusterStatusResponse> {
    ok(op::get_cluster_status(&st.garage))
}

/// The cluster's health as this node sees it; no token needed (for load
/// balancers and monitoring).
#[utoipa::path(get, path = "/v2/GetClusterHealth", tag = "Cluster", security(()),
    responses((status = 200, body = GetClusterHealthResponse)))]
pub async fn get_cluster_health(State(st): State<St>) -> Answer<GetClusterHealthResponse> {
    ok(cluster_health(&st.garage.system))
}

/// `200` while every partition has a write quorum, `503` otherwise; a line
/// of text. No token needed.
#[utoipa::path(get, path = "/health", tag = "Special", security(()),
    responses(
        (status = 200, description = "Every partition has a write quorum", body = String, content_type = "text/plain"),
        (status = 503, description = "Some partition has no write quorum", body = String, content_type = "text/plain")))]
pub async fn health(State(st): State<St>) -> impl IntoResponse {
    let h = cluster_health(&st.garage.system);
    let (status, text) = match h.status.as_str() {
        "healthy" => (StatusCode::OK, "Garage is fully operational"),
        "degraded" => (
            StatusCode::OK,
            "Garage is operational but some storage nodes are unavailable, or some node's clock is off the cluster's",
        ),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "Quorum is not available for some/all partitions, reads and writes will fail",
        ),
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        format!("{text}\nConsult the full health check API endpoint at /v2/GetClusterHealth for more details\n"),
    )
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CheckQuery {
    /// The domain a client asked for.
    pub domain: String,
}

/// Whether the website endpoint serves a domain (`200` and a line of
/// text), for reverse proxies that get TLS certificates on demand (Caddy's
/// `on_demand_tls ask`). No token needed.
#[utoipa::path(get, path = "/check", tag = "Special", security(()), params(CheckQuery),
    responses(
        (status = 200, description = "A bucket with website access answers for this domain", body = String, content_type = "text/plain"),
        (status = 400, description = "No bucket with website access answers for it", body = ErrorBody)))]
pub async fn check(State(st): State<St>, Query(q): Query<CheckQuery>) -> Response {
    match crate::ops::bucket::check_domain(&st.garage, &q.domain, &st.root_domains).await {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Connects this node to others, given as `<node_id>@<host>:<port>`.
#[utoipa::path(post, path = "/v2/ConnectClusterNodes", tag = "Cluster",
    request_body = Vec<String>,
    responses((status = 200, body = Vec<ConnectNodeResponse>), (status = 400, body = ErrorBody)))]
pub async fn connect_cluster_nodes(
    State(st): State<St>,
    Body(peers): Body<Vec<String>>,
) -> Answer<Vec<ConnectNodeResponse>> {
    ok(op::connect_cluster_nodes(&st.garage, peers).await?)
}
