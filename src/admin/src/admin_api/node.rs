//! Node-local operations: node info and statistics, repairs, background
//! workers, block errors. Each takes `?node=`: `self`, `*` (every node of
//! the cluster), or a node id (or a unique prefix of one). Other nodes run
//! the operation through the admin RPC endpoint
//! ([`crate::admin_rpc::on_nodes`]); the answer maps node ids to their
//! results (`success`) or errors (`error`), as in the reference system.

use std::collections::BTreeMap;

use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::admin_rpc::on_nodes as on_nodes_rpc;
use crate::ops::node::*;

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(get_node_info))
        .routes(routes!(get_node_metrics_history))
        .routes(routes!(get_node_storage))
        .routes(routes!(get_notification_backlog))
        .routes(routes!(get_replication_backlog))
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

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NodeQuery {
    /// `self`, `*` for every node, or a node id (or a unique prefix).
    pub node: String,
}

/// Runs `req` on the nodes `sel` names (the fan-out of the admin RPC).
async fn on_nodes<T: NodeAnswer>(st: &St, sel: &str, req: NodeRequest) -> Answer<MultiResponse<T>> {
    ok(on_nodes_rpc(&st.admin_rpc, &st.garage, sel, req)
        .await?
        .pick())
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

/// What nodes store by storage class, and what they hold waiting to be
/// handed over (a move's progress): each node's last census.
#[utoipa::path(get, path = "/v2/GetNodeStorage", tag = "Node", params(NodeQuery),
    responses((status = 200, body = MultiResponse<crate::ops::stats::NodeStorage>), (status = 404, body = ErrorBody)))]
pub async fn get_node_storage(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<crate::ops::stats::NodeStorage>> {
    on_nodes(&st, &q.node, NodeRequest::GetNodeStorage).await
}

/// The events each node's notification outbox holds, per topic (the
/// topics with events waiting only).
#[utoipa::path(get, path = "/v2/GetNotificationBacklog", tag = "Notification topic", params(NodeQuery),
    responses((status = 200, body = MultiResponse<Vec<crate::ops::topic::TopicBacklog>>), (status = 404, body = ErrorBody)))]
pub async fn get_notification_backlog(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<Vec<crate::ops::topic::TopicBacklog>>> {
    on_nodes(&st, &q.node, NodeRequest::GetNotificationBacklog).await
}

/// The versions each node's replication queue holds, per destination
/// (`REMOTE/BUCKET`, those with versions waiting only), and when the
/// oldest was queued.
#[utoipa::path(get, path = "/v2/GetReplicationBacklog", tag = "Bucket replication", params(NodeQuery),
    responses((status = 200, body = MultiResponse<Vec<crate::ops::remote::ReplicationBacklog>>), (status = 404, body = ErrorBody)))]
pub async fn get_replication_backlog(
    State(st): State<St>,
    Query(q): Query<NodeQuery>,
) -> Answer<MultiResponse<Vec<crate::ops::remote::ReplicationBacklog>>> {
    on_nodes(&st, &q.node, NodeRequest::GetReplicationBacklog).await
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
    let m = on_nodes_rpc(
        &st.admin_rpc,
        &st.garage,
        &q.node,
        NodeRequest::GetNodeStatistics,
    )
    .await?;
    let mut m: MultiResponse<NodeStatistics> = m.pick();
    for s in m.success.values_mut() {
        *s = std::mem::take(s).with_text();
    }
    ok(m)
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
