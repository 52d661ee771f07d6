//! Cluster status and health, `/health`, and connecting nodes.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use garage_rpc::system::System;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(get_cluster_status))
        .routes(routes!(connect_cluster_nodes))
        .routes(routes!(get_cluster_statistics))
}

// ---- GetClusterStatistics ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterStatisticsResponse {
    /// A table of the storage nodes (zone, capacity, partitions, data
    /// and metadata space available) and the estimated space the cluster
    /// can still store, as text.
    pub freeform: String,
}

/// The storage nodes' capacity and free space, and what the cluster can
/// still store: for each node, its free data space divided by the share
/// of the data it holds; the smallest of those is the cluster's.
pub fn cluster_statistics(system: &System) -> String {
    use std::fmt::Write;
    let status = system.cluster_status();
    let current = status.layout.current();
    let per_node = current.partitions_per_node();
    let size = |b: u64| bytesize::ByteSize::b(b).display().si().to_string();
    let mut out = String::from("Storage nodes:\n");
    let _ = writeln!(
        out,
        "  {:<16}  {:<12}  {:<6}  {:>10}  {:>10}  {:>22}  {:>22}",
        "ID", "Hostname", "Zone", "Capacity", "Partitions", "Data available", "Metadata available"
    );
    let mut cluster_data: Option<u64> = None;
    let mut cluster_meta: Option<u64> = None;
    let mut ids: Vec<_> = current.storage_nodes.clone();
    ids.sort();
    for id in ids {
        let role = &current.roles[&id];
        let node = status.nodes.iter().find(|n| n.id == id);
        let parts = per_node.get(&id).copied().unwrap_or(0);
        let free = |f: Option<garage_rpc::system::status::FreeSpace>, acc: &mut Option<u64>| match f
        {
            Some(f) => {
                if parts > 0 {
                    let whole = f.available.saturating_mul(256) / parts as u64;
                    *acc = Some(acc.map_or(whole, |a| a.min(whole)));
                }
                format!(
                    "{}/{} ({}%)",
                    size(f.available),
                    size(f.total),
                    f.available * 100 / f.total.max(1)
                )
            }
            None => "?".into(),
        };
        let data = free(node.and_then(|n| n.data_space), &mut cluster_data);
        let meta = free(node.and_then(|n| n.metadata_space), &mut cluster_meta);
        let _ = writeln!(
            out,
            "  {:<16}  {:<12}  {:<6}  {:>10}  {:>10}  {:>22}  {:>22}",
            &id.to_string()[..16],
            node.and_then(|n| n.hostname.clone()).unwrap_or_default(),
            role.zone,
            role.capacity.map(size).unwrap_or_else(|| "gateway".into()),
            parts,
            data,
            meta
        );
    }
    // A node holding `parts` of the 256 partitions can take `available`
    // more bytes: the cluster `available * 256 / parts` more bytes of
    // objects (each partition's copies are on distinct nodes); the
    // fullest node bounds it.
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Estimated available storage space cluster-wide (might be lower in practice):"
    );
    let _ = writeln!(
        out,
        "  data: {}",
        cluster_data.map(size).unwrap_or_else(|| "?".into())
    );
    let _ = writeln!(
        out,
        "  metadata: {}",
        cluster_meta.map(size).unwrap_or_else(|| "?".into())
    );
    out
}

/// The storage nodes' capacity and free space, and the space the cluster
/// can still store, as text (as the reference answers it).
#[utoipa::path(get, path = "/v2/GetClusterStatistics", tag = "Cluster",
    responses((status = 200, body = GetClusterStatisticsResponse), (status = 403, body = ErrorBody)))]
pub async fn get_cluster_statistics(State(st): State<St>) -> Answer<GetClusterStatisticsResponse> {
    ok(GetClusterStatisticsResponse {
        freeform: cluster_statistics(&st.garage.system),
    })
}

// ---- GetClusterStatus ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterStatusResponse {
    /// Version of the current cluster layout.
    pub layout_version: u64,
    pub nodes: Vec<NodeResp>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeResp {
    /// Full node id (64 hexadecimal digits).
    pub id: String,
    /// The node's role in the current layout, if it has one.
    pub role: Option<NodeAssignedRole>,
    /// The address other nodes reach it at, if known.
    pub addr: Option<String>,
    pub hostname: Option<String>,
    pub is_up: bool,
    pub last_seen_secs_ago: Option<u64>,
    /// The node has no role in the current layout but still has one in an
    /// older live version: data is being moved off it.
    pub draining: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_partition: Option<FreeSpaceResp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_partition: Option<FreeSpaceResp>,
    /// How far the node's wall clock is from the cluster's (the median of
    /// the nodes' clocks), in milliseconds, positive when ahead, as the
    /// answering node measures it from pings; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeAssignedRole {
    pub zone: String,
    /// Bytes; none for a gateway node.
    pub capacity: Option<u64>,
    pub tags: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreeSpaceResp {
    pub available: u64,
    pub total: u64,
}

/// The nodes this node knows, with their roles in the current layout.
#[utoipa::path(get, path = "/v2/GetClusterStatus", tag = "Cluster",
    responses((status = 200, body = GetClusterStatusResponse), (status = 403, body = ErrorBody)))]
pub async fn get_cluster_status(State(st): State<St>) -> Answer<GetClusterStatusResponse> {
    let status = st.garage.system.cluster_status();
    let layout = &status.layout;
    let current = layout.current();
    let space = |f: Option<garage_rpc::system::status::FreeSpace>| {
        f.map(|f| FreeSpaceResp {
            available: f.available,
            total: f.total,
        })
    };
    let nodes = status
        .nodes
        .into_iter()
        .map(|n| {
            let role = current.roles.get(&n.id).map(|r| NodeAssignedRole {
                zone: r.zone.clone(),
                capacity: r.capacity,
                tags: r.tags.clone(),
            });
            let draining = role.is_none()
                && layout
                    .live_versions()
                    .any(|v| v.storage_nodes.contains(&n.id));
            NodeResp {
                id: n.id.to_string(),
                role,
                addr: n.addr.map(|a| a.to_string()),
                hostname: n.hostname,
                is_up: n.is_up,
                last_seen_secs_ago: n.last_seen_secs_ago,
                draining,
                data_partition: space(n.data_space),
                metadata_partition: space(n.metadata_space),
                clock_offset_ms: n.clock_offset_ms,
            }
        })
        .collect();
    ok(GetClusterStatusResponse {
        layout_version: current.version,
        nodes,
    })
}

// ---- GetClusterHealth and /health ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterHealthResponse {
    /// `healthy` (every storage node is up), `degraded` (some are down but
    /// every partition has a write quorum, or some node's clock is off
    /// the cluster's) or `unavailable` (some
    /// partition has no write quorum).
    pub status: String,
    /// Nodes this node has heard of, itself included.
    pub known_nodes: usize,
    /// Nodes up now, itself included.
    pub connected_nodes: usize,
    /// Storage nodes (with a capacity) in the current layout.
    pub storage_nodes: usize,
    /// Of those, the ones up now.
    pub storage_nodes_ok: usize,
    /// Number of partitions (256).
    pub partitions: usize,
    /// Partitions with a write quorum of nodes up in every live layout version.
    pub partitions_quorum: usize,
    /// Partitions all of whose nodes are up.
    pub partitions_all_ok: usize,
    /// Nodes whose clock is off the cluster's by more than
    /// `max_clock_offset_msec` (full ids): they make the health
    /// `degraded`.
    #[serde(default)]
    pub clock_skewed_nodes: Vec<String>,
}

pub fn cluster_health(system: &System) -> GetClusterHealthResponse {
    // The same numbers as the cluster_* gauges of /metrics and the health
    // lines of `garage status`.
    let h = system.health();
    GetClusterHealthResponse {
        status: h.status.to_string(),
        known_nodes: h.known_nodes,
        connected_nodes: h.connected_nodes,
        storage_nodes: h.storage_nodes,
        storage_nodes_ok: h.storage_nodes_up,
        partitions: h.partitions,
        partitions_quorum: h.partitions_quorum,
        partitions_all_ok: h.partitions_all_ok,
        clock_skewed_nodes: h.clock_skewed_nodes,
    }
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

// ---- ConnectClusterNodes ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectNodeResponse {
    /// Whether this node could connect to it.
    pub success: bool,
    /// Why not, if it could not.
    pub error: Option<String>,
}

/// Connects this node to others, given as `<node_id>@<host>:<port>`.
#[utoipa::path(post, path = "/v2/ConnectClusterNodes", tag = "Cluster",
    request_body = Vec<String>,
    responses((status = 200, body = Vec<ConnectNodeResponse>), (status = 400, body = ErrorBody)))]
pub async fn connect_cluster_nodes(
    State(st): State<St>,
    Body(peers): Body<Vec<String>>,
) -> Answer<Vec<ConnectNodeResponse>> {
    if peers.len() > 1000 {
        return Err(ApiError::bad("at most 1000 nodes per request"));
    }
    let mut out = Vec::with_capacity(peers.len());
    for p in peers {
        let res = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            st.garage.system.connect(&p),
        )
        .await;
        out.push(match res {
            Ok(Ok(())) => ConnectNodeResponse {
                success: true,
                error: None,
            },
            Ok(Err(e)) => ConnectNodeResponse {
                success: false,
                error: Some(e.to_string()),
            },
            Err(_) => ConnectNodeResponse {
                success: false,
                error: Some(format!("no answer from {p} within 30s")),
            },
        });
    }
    ok(out)
}
