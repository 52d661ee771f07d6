//! Node-local operations: node info and statistics, repairs, background
//! workers, block errors. Each takes `?node=`: `self`, `*` (every node of
//! the cluster), or a node id (or a unique prefix of one). Other nodes run
//! the operation through the admin RPC endpoint; the answer maps node ids
//! to their results (`success`) or errors (`error`), as in the reference
//! system.

use std::collections::BTreeMap;

use axum::extract::State;
use garage_net::NodeId;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::admin_rpc::AdminRpc;
use crate::ops::node::*;

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(get_node_info))
        .routes(routes!(get_node_metrics_history))
        .routes(routes!(get_node_statistics))
        .routes(routes!(launch_repair_operation))
        .routes(routes!(list_workers))
        .routes(routes!(get_worker_info))
        .routes(routes!(list_block_errors))
        .routes(routes!(get_block_info))
        .routes(routes!(retry_block_resync))
        .routes(routes!(purge_blocks))
        .routes(routes!(get_worker_variable))
        .routes(routes!(set_worker_variable))
        .routes(routes!(create_metadata_snapshot))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MultiResponse<T> {
    /// Node id -> result, for the nodes that answered.
    pub success: BTreeMap<String, T>,
    /// Node id -> error message, for the others.
    pub error: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NodeQuery {
    /// `self`, `*` for every node, or a node id (or a unique prefix).
    pub node: String,
}

fn which_nodes(st: &St, sel: &str) -> Result<Vec<NodeId>, ApiError> {
    let system = &st.garage.system;
    match sel {
        "self" => Ok(vec![system.id()]),
        "*" => {
            let status = system.cluster_status();
            let mut ids: Vec<NodeId> = status.nodes.iter().map(|n| n.id).collect();
            ids.extend(status.layout.current().roles.keys().copied());
            ids.sort();
            ids.dedup();
            Ok(ids)
        }
        prefix => crate::ops::layout::find_node(&system.cluster_status(), prefix)
            .map(|id| vec![id])
            .map_err(ApiError::NoSuchNode),
    }
}

/// How long another node has to answer.
const REMOTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why one node of a `node=` request has no answer.
enum Failed {
    /// This node's own error.
    Here(ApiError),
    /// Another node's error, or no answer from it.
    There(String),
}

async fn on_nodes<T: NodeAnswer>(st: &St, sel: &str, req: NodeRequest) -> Answer<MultiResponse<T>> {
    let nodes = which_nodes(st, sel)?;
    let me = st.garage.system.id();
    let mut out = MultiResponse {
        success: BTreeMap::new(),
        error: BTreeMap::new(),
    };
    let asked = nodes.len();
    // Every node at once: a dead node costs one timeout, not one each.
    let answers = futures::future::join_all(nodes.into_iter().map(|id| {
        let req = req.clone();
        async move {
            let res = if id == me {
                run(&st.garage, req).await.map_err(Failed::Here)
            } else {
                call_remote(st, id, req).await.map_err(Failed::There)
            };
            (id, res)
        }
    }))
    .await;
    for (id, res) in answers {
        let res = match res {
            Ok(s) => Ok(s),
            // Only this node asked: its error, with its status code
            // (a 404 on an unknown block must not look like a success).
            Err(Failed::Here(e)) if asked == 1 => return Err(e),
            Err(Failed::Here(e)) => Err(e.to_string()),
            Err(Failed::There(e)) => Err(e),
        };
        let parsed = res.and_then(|r| {
            T::pick(r).ok_or_else(|| "the node answered another operation".to_string())
        });
        match parsed {
            Ok(v) => {
                out.success.insert(id.to_string(), v);
            }
            Err(e) => {
                out.error.insert(id.to_string(), e);
            }
        }
    }
    ok(out)
}

async fn call_remote(st: &St, id: NodeId, req: NodeRequest) -> Result<NodeResponse, String> {
    st.garage.system.ensure_connected(&id).await;
    let call = st
        .admin_rpc
        .call(&id, AdminRpc::Node(req), garage_net::Priority::High);
    match tokio::time::timeout(REMOTE_TIMEOUT, call).await {
        Err(_) => Err(format!("no answer within {}s", REMOTE_TIMEOUT.as_secs())),
        Ok(Err(e)) => Err(format!("cannot reach the node: {e}")),
        Ok(Ok(AdminRpc::NodeResult(Ok(r)))) => Ok(r),
        Ok(Ok(AdminRpc::NodeResult(Err(e)))) => Err(e.message),
        Ok(Ok(AdminRpc::Error(e))) => Err(e),
        Ok(Ok(other)) => Err(format!("unexpected answer from the node: {other:?}")),
    }
}

/// An hour of the nodes' request, error and block byte counters, sampled
/// every 10 s (garage's own endpoint, for the web console's charts).
#[utoipa::path(get, path = "/v2/GetNodeMetricsHistory", tag = "Node", params(NodeQuery),
    responses((status = 200, body = MultiResponse<crate::ops::history::MetricsHistory>), (status = 404, body = ErrorBody)))]
pub async fn get_node_metrics_history(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<crate::ops::history::MetricsHistory>> {
    on_nodes(&st, &q.node, NodeRequest::GetNodeMetricsHistory).await
}

/// Version and metadata engine of nodes.
#[utoipa::path(get, path = "/v2/GetNodeInfo", tag = "Node", params(NodeQuery),
    responses((status = 200, body = MultiResponse<NodeInfo>), (status = 404, body = ErrorBody)))]
pub async fn get_node_info(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<NodeInfo>> {
    on_nodes(&st, &q.node, NodeRequest::GetNodeInfo).await
}

/// Table and block statistics of nodes, as `garage stats` prints them.
#[utoipa::path(get, path = "/v2/GetNodeStatistics", tag = "Node", params(NodeQuery),
    responses((status = 200, body = MultiResponse<NodeStatistics>), (status = 404, body = ErrorBody)))]
pub async fn get_node_statistics(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<NodeStatistics>> {
    on_nodes(&st, &q.node, NodeRequest::GetNodeStatistics).await
}

/// Starts a repair on nodes (the same as `garage repair`).
#[utoipa::path(post, path = "/v2/LaunchRepairOperation", tag = "Node", params(NodeQuery),
    request_body = LaunchRepairOperationRequest,
    responses((status = 200, body = MultiResponse<RepairLaunched>), (status = 400, body = ErrorBody)))]
pub async fn launch_repair_operation(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<LaunchRepairOperationRequest>,
) -> Answer<MultiResponse<RepairLaunched>> {
    on_nodes(&st, &q.node, NodeRequest::LaunchRepairOperation(req)).await
}

/// The background workers of nodes.
#[utoipa::path(post, path = "/v2/ListWorkers", tag = "Worker", params(NodeQuery),
    request_body = ListWorkersRequest,
    responses((status = 200, body = MultiResponse<Vec<WorkerInfo>>), (status = 404, body = ErrorBody)))]
pub async fn list_workers(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<ListWorkersRequest>,
) -> Answer<MultiResponse<Vec<WorkerInfo>>> {
    on_nodes(&st, &q.node, NodeRequest::ListWorkers(req)).await
}

/// One background worker.
#[utoipa::path(post, path = "/v2/GetWorkerInfo", tag = "Worker", params(NodeQuery),
    request_body = GetWorkerInfoRequest,
    responses((status = 200, body = MultiResponse<WorkerInfo>), (status = 404, body = ErrorBody)))]
pub async fn get_worker_info(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<GetWorkerInfoRequest>,
) -> Answer<MultiResponse<WorkerInfo>> {
    on_nodes(&st, &q.node, NodeRequest::GetWorkerInfo(req)).await
}

/// Blocks whose resync failed.
#[utoipa::path(get, path = "/v2/ListBlockErrors", tag = "Block", params(NodeQuery),
    responses((status = 200, body = MultiResponse<Vec<BlockError>>), (status = 404, body = ErrorBody)))]
pub async fn list_block_errors(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<Vec<BlockError>>> {
    on_nodes(&st, &q.node, NodeRequest::ListBlockErrors).await
}

/// A block: its reference count and the versions that use it.
#[utoipa::path(post, path = "/v2/GetBlockInfo", tag = "Block", params(NodeQuery),
    request_body = GetBlockInfoRequest,
    responses((status = 200, body = MultiResponse<BlockInfo>), (status = 404, body = ErrorBody)))]
pub async fn get_block_info(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<GetBlockInfoRequest>,
) -> Answer<MultiResponse<BlockInfo>> {
    on_nodes(&st, &q.node, NodeRequest::GetBlockInfo(req)).await
}

/// Queues blocks for a resync now.
#[utoipa::path(post, path = "/v2/RetryBlockResync", tag = "Block", params(NodeQuery),
    request_body = RetryBlockResyncRequest,
    responses((status = 200, body = MultiResponse<RetryBlockResyncResponse>), (status = 400, body = ErrorBody)))]
pub async fn retry_block_resync(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<RetryBlockResyncRequest>,
) -> Answer<MultiResponse<RetryBlockResyncResponse>> {
    on_nodes(&st, &q.node, NodeRequest::RetryBlockResync(req)).await
}

/// Deletes every object and upload that uses these blocks (for blocks
/// lost for good).
#[utoipa::path(post, path = "/v2/PurgeBlocks", tag = "Block", params(NodeQuery),
    request_body = Vec<String>,
    responses((status = 200, body = MultiResponse<PurgeBlocksResponse>), (status = 400, body = ErrorBody)))]
pub async fn purge_blocks(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(hashes): Body<Vec<String>>,
) -> Answer<MultiResponse<PurgeBlocksResponse>> {
    on_nodes(&st, &q.node, NodeRequest::PurgeBlocks(hashes)).await
}

/// The tunable variables of the node's background workers (variable name
/// -> value), as `garage worker get`.
#[utoipa::path(post, path = "/v2/GetWorkerVariable", tag = "Node", params(NodeQuery),
    request_body = GetWorkerVariableRequest,
    responses((status = 200, body = MultiResponse<BTreeMap<String, String>>), (status = 400, body = ErrorBody)))]
pub async fn get_worker_variable(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<GetWorkerVariableRequest>,
) -> Answer<MultiResponse<BTreeMap<String, String>>> {
    on_nodes(&st, &q.node, NodeRequest::GetWorkerVariable(req)).await
}

/// Sets a tunable variable of the node's background workers, as `garage
/// worker set`.
#[utoipa::path(post, path = "/v2/SetWorkerVariable", tag = "Node", params(NodeQuery),
    request_body = SetWorkerVariableRequest,
    responses((status = 200, body = MultiResponse<SetWorkerVariableResponse>), (status = 400, body = ErrorBody)))]
pub async fn set_worker_variable(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
    Body(req): Body<SetWorkerVariableRequest>,
) -> Answer<MultiResponse<SetWorkerVariableResponse>> {
    on_nodes(&st, &q.node, NodeRequest::SetWorkerVariable(req)).await
}

/// Writes a snapshot of the node's metadata database into
/// `metadata_snapshots_dir` (the two newest are kept), as `garage meta
/// snapshot`.
#[utoipa::path(post, path = "/v2/CreateMetadataSnapshot", tag = "Node", params(NodeQuery),
    responses((status = 200, body = MultiResponse<MetadataSnapshot>), (status = 400, body = ErrorBody)))]
pub async fn create_metadata_snapshot(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<MetadataSnapshot>> {
    on_nodes(&st, &q.node, NodeRequest::CreateMetadataSnapshot).await
}
