//! Node-local operations: node info and statistics, repairs, background
//! workers, block errors. Each takes `?node=`: `self`, `*` (every node of
//! the cluster), or a node id (or a unique prefix of one). Other nodes run
//! the operation through the admin RPC endpoint; the answer maps node ids
//! to their results (`success`) or errors (`error`), as in the reference
//! system.

use std::sync::Arc;

use std::collections::BTreeMap;

use axum::extract::State;
use garage_net::NodeId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::admin_blocks;
use crate::admin_rpc::AdminRpc;
use crate::cli::{RepairWhat, ScrubCmd};
use garage_model::garage::Garage;

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(get_node_info))
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

/// A node-local operation, as sent to another node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NodeRequest {
    GetNodeInfo,
    GetNodeStatistics,
    LaunchRepairOperation(LaunchRepairOperationRequest),
    ListWorkers(ListWorkersRequest),
    GetWorkerInfo(GetWorkerInfoRequest),
    ListBlockErrors,
    GetBlockInfo(GetBlockInfoRequest),
    RetryBlockResync(RetryBlockResyncRequest),
    PurgeBlocks(Vec<String>),
    GetWorkerVariable(GetWorkerVariableRequest),
    SetWorkerVariable(SetWorkerVariableRequest),
    CreateMetadataSnapshot,
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
        prefix => crate::admin::layout::find_node(&system.cluster_status(), prefix)
            .map(|id| vec![id])
            .map_err(|e| ApiError::NoSuchNode(e.to_string())),
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

async fn on_nodes<T: DeserializeOwned>(
    st: &St,
    sel: &str,
    req: NodeRequest,
) -> Answer<MultiResponse<T>> {
    let nodes = which_nodes(st, sel)?;
    let me = st.garage.system.id();
    let json = serde_json::to_string(&req).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut out = MultiResponse {
        success: BTreeMap::new(),
        error: BTreeMap::new(),
    };
    let asked = nodes.len();
    // Every node at once: a dead node costs one timeout, not one each.
    let answers = futures::future::join_all(nodes.into_iter().map(|id| {
        let json = json.clone();
        async move {
            let res = if id == me {
                run_local_json(&st.garage, &json)
                    .await
                    .map_err(Failed::Here)
            } else {
                call_remote(st, id, json).await.map_err(Failed::There)
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
        let parsed = res.and_then(|s| {
            serde_json::from_str::<T>(&s).map_err(|e| format!("bad answer from the node: {e}"))
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

async fn call_remote(st: &St, id: NodeId, json: String) -> Result<String, String> {
    st.garage.system.ensure_connected(&id).await;
    let call = st
        .admin_rpc
        .call(&id, AdminRpc::NodeApi(json), garage_net::Priority::High);
    match tokio::time::timeout(REMOTE_TIMEOUT, call).await {
        Err(_) => Err(format!("no answer within {}s", REMOTE_TIMEOUT.as_secs())),
        Ok(Err(e)) => Err(format!("cannot reach the node: {e}")),
        Ok(Ok(AdminRpc::NodeApiResult(s))) => Ok(s),
        Ok(Ok(AdminRpc::Error(e))) => Err(e),
        Ok(Ok(other)) => Err(format!("unexpected answer from the node: {other:?}")),
    }
}

/// Runs a node-local operation given as JSON; its result as JSON.
pub async fn run_local_json(g: &Arc<Garage>, json: &str) -> Result<String, ApiError> {
    let req: NodeRequest = serde_json::from_str(json)
        .map_err(|e| ApiError::bad(format!("unknown node operation: {e}")))?;
    let v = run_local(g, req).await?;
    serde_json::to_string(&v).map_err(|e| ApiError::Internal(e.to_string()))
}

fn js<T: Serialize>(v: T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::Internal(e.to_string()))
}

async fn run_local(g: &Arc<Garage>, req: NodeRequest) -> Result<serde_json::Value, ApiError> {
    match req {
        NodeRequest::GetNodeInfo => js(NodeInfo {
            node_id: g.system.id().to_string(),
            garage_version: env!("CARGO_PKG_VERSION").into(),
            garage_features: None,
            db_engine: g.db.engine().to_string(),
        }),
        NodeRequest::GetNodeStatistics => {
            let stats = crate::admin_rpc::node_stats(g).await;
            let stats = stats.map_err(ApiError::Internal)?;
            js(NodeStatistics {
                freeform: crate::admin::stats::format_stats(&stats),
            })
        }
        NodeRequest::LaunchRepairOperation(r) => {
            launch_repair(g, r.repair_type).await?;
            js(RepairLaunched {})
        }
        NodeRequest::ListWorkers(r) => {
            let all = worker_list(g).await?;
            js(all
                .into_iter()
                .filter(|w| !r.busy_only || matches!(w.state, WorkerState::Busy))
                .filter(|w| !r.error_only || w.errors.unwrap_or(0) > 0)
                .collect::<Vec<_>>())
        }
        NodeRequest::GetWorkerInfo(r) => {
            let all = worker_list(g).await?;
            let n = all.len();
            let w = all.into_iter().find(|w| w.id == r.id).ok_or_else(|| {
                ApiError::NoSuchWorker(format!("no worker {}: workers are numbered 1 to {n}", r.id))
            })?;
            js(w)
        }
        NodeRequest::GetWorkerVariable(r) => {
            let vars = admin_blocks::worker_variables(g, r.variable.as_deref())
                .map_err(ApiError::BadRequest)?;
            js(vars
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<BTreeMap<_, _>>())
        }
        NodeRequest::SetWorkerVariable(r) => {
            let n = admin_blocks::set_worker_variable(g, &r.variable, &r.value)
                .map_err(ApiError::BadRequest)?;
            js(SetWorkerVariableResponse {
                variable: r.variable,
                value: n.to_string(),
            })
        }
        NodeRequest::CreateMetadataSnapshot => {
            let (db, dir) = (g.db.clone(), g.metadata_snapshots_dir.clone());
            let path =
                tokio::task::spawn_blocking(move || crate::server::snapshot_metadata(&db, &dir))
                    .await
                    .map_err(|e| ApiError::Internal(e.to_string()))?
                    .map_err(|e| ApiError::Internal(format!("{e:#}")))?;
            tracing::info!("metadata snapshot written to {}", path.display());
            js(MetadataSnapshot {
                path: path.display().to_string(),
            })
        }
        NodeRequest::ListBlockErrors => {
            let m = &g.block_manager;
            let now = garage_util::time::now_msec();
            let mut out = Vec::new();
            for (h, e) in m
                .resync_errors()
                .map_err(|e| ApiError::Internal(e.to_string()))?
            {
                out.push(BlockError {
                    block_hash: h.hex(),
                    refcount: refcount(g, &h)?,
                    error_count: e.failures,
                    last_try_secs_ago: now.saturating_sub(e.last_try) / 1000,
                    next_try_in_secs: e.next_try.saturating_sub(now) / 1000,
                });
            }
            js(out)
        }
        NodeRequest::GetBlockInfo(r) => {
            let h = admin_blocks::parse_hash(&r.block_hash).map_err(ApiError::BadRequest)?;
            let rc = refcount(g, &h)?;
            let refs = admin_blocks::block_refs(g, &h)
                .await
                .map_err(ApiError::Internal)?;
            if refs.is_empty() && rc == 0 && g.block_manager.store.find(&h).is_none() {
                return Err(ApiError::NoSuchBlock(format!(
                    "block {} is not known to this node",
                    h.hex()
                )));
            }
            let versions = refs
                .into_iter()
                .map(|r| BlockVersion {
                    version_id: r.version.hex(),
                    ref_deleted: r.ref_deleted,
                    deleted: r.deleted.unwrap_or(true),
                    garbage_collected: r.deleted.is_none(),
                    backlink: r.backlink.map(|b| match b {
                        garage_model::version_table::VersionBacklink::Object { bucket_id, key } => {
                            BlockVersionBacklink::Object {
                                bucket_id: bucket_id.hex(),
                                key,
                            }
                        }
                        garage_model::version_table::VersionBacklink::MultipartUpload {
                            upload_id,
                        } => BlockVersionBacklink::Upload {
                            upload_id: upload_id.hex(),
                        },
                    }),
                })
                .collect();
            js(BlockInfo {
                block_hash: h.hex(),
                refcount: rc,
                versions,
            })
        }
        NodeRequest::RetryBlockResync(r) => {
            let n = match (r.all, r.block_hashes) {
                (Some(true), None) => admin_blocks::retry_now(&g.block_manager, true, &[]),
                (None | Some(false), Some(hashes)) if !hashes.is_empty() => {
                    admin_blocks::retry_now(&g.block_manager, false, &hashes)
                }
                _ => {
                    return Err(ApiError::bad(
                        "give either \"all\": true or a non-empty \"blockHashes\" list",
                    ))
                }
            }
            .map_err(ApiError::BadRequest)?;
            js(RetryBlockResyncResponse { count: n as u64 })
        }
        NodeRequest::PurgeBlocks(hashes) => {
            if hashes.is_empty() {
                return Err(ApiError::bad("give the hashes of the blocks to purge"));
            }
            let hashes = hashes
                .iter()
                .map(|h| admin_blocks::parse_hash(h))
                .collect::<Result<Vec<_>, _>>()
                .map_err(ApiError::BadRequest)?;
            let c = admin_blocks::purge_blocks(g, &hashes)
                .await
                .map_err(ApiError::Internal)?;
            js(PurgeBlocksResponse {
                blocks_purged: hashes.len() as u64,
                objects_deleted: c.objects_deleted as u64,
                uploads_deleted: c.uploads_aborted as u64,
                versions_deleted: c.versions as u64,
                versions_locked: c.locked as u64,
            })
        }
    }
}

fn refcount(g: &Garage, h: &garage_util::data::Hash) -> Result<u64, ApiError> {
    use garage_block::rc::RcEntry;
    Ok(
        match g
            .block_manager
            .rc
            .get(h)
            .map_err(|e| ApiError::Internal(e.to_string()))?
        {
            Some(RcEntry::Present { count }) => count,
            _ => 0,
        },
    )
}

// ---- GetNodeInfo ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    pub node_id: String,
    pub garage_version: String,
    /// Optional features this build has (none in this version).
    pub garage_features: Option<Vec<String>>,
    /// `lmdb` or `sqlite`.
    pub db_engine: String,
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

// ---- GetNodeStatistics ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeStatistics {
    /// What `garage stats` prints.
    pub freeform: String,
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

// ---- LaunchRepairOperation ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaunchRepairOperationRequest {
    pub repair_type: RepairType,
}

/// `"tables"`, `"blocks"`, `"rebalance"`, or `{"scrub": "start" | "pause" |
/// "resume" | "cancel"}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum RepairType {
    Tables,
    Blocks,
    Rebalance,
    Scrub(ScrubCommand),
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ScrubCommand {
    Start,
    Pause,
    Resume,
    Cancel,
}

/// The repair is running (in the background; see the node's log).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RepairLaunched {}

async fn launch_repair(g: &Garage, r: RepairType) -> Result<(), ApiError> {
    let what = match r {
        RepairType::Tables => {
            crate::admin_rpc::repair_tables(g);
            return Ok(());
        }
        RepairType::Blocks => RepairWhat::Blocks,
        RepairType::Rebalance => RepairWhat::Rebalance,
        RepairType::Scrub(c) => RepairWhat::Scrub(match c {
            ScrubCommand::Start => ScrubCmd::Start,
            ScrubCommand::Pause => ScrubCmd::Pause,
            ScrubCommand::Resume => ScrubCmd::Resume,
            ScrubCommand::Cancel => ScrubCmd::Cancel,
        }),
    };
    let text = admin_blocks::repair(&g.block_manager, what)
        .await
        .map_err(ApiError::BadRequest)?;
    tracing::info!("admin API repair: {}", text.trim_end());
    Ok(())
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

// ---- Workers ----

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListWorkersRequest {
    /// Only the workers that have work now.
    #[serde(default)]
    pub busy_only: bool,
    /// Only the workers with errors.
    #[serde(default)]
    pub error_only: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerInfo {
    /// Its number, from 1 (as `garage worker list` shows it).
    pub id: u64,
    pub name: String,
    pub state: WorkerState,
    /// Errors it counts (blocks in error for the resync workers, corrupted
    /// blocks for the scrub).
    pub errors: Option<u64>,
    pub queue_length: Option<u64>,
    /// Its state in words, then its settings and counters, one per line.
    pub freeform: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum WorkerState {
    Busy,
    Idle,
}

/// The node's workers; the table statistics are read by
/// `admin_rpc::node_stats` (blocking database counts, off the runtime).
async fn worker_list(g: &Arc<Garage>) -> Result<Vec<WorkerInfo>, ApiError> {
    let stats = crate::admin_rpc::node_stats(g)
        .await
        .map_err(ApiError::Internal)?;
    let rows = admin_blocks::workers(g, &stats).map_err(ApiError::Internal)?;
    Ok(rows
        .into_iter()
        .enumerate()
        .map(|(i, w)| WorkerInfo {
            id: i as u64 + 1,
            state: if w.state == "busy" || w.state.starts_with("running") {
                WorkerState::Busy
            } else {
                WorkerState::Idle
            },
            freeform: std::iter::once(format!("State: {}", w.state))
                .chain(w.details.iter().map(|(k, v)| format!("{k}: {v}")))
                .collect(),
            name: w.name,
            errors: w.errors.map(|e| e as u64),
            queue_length: w.queue.map(|q| q as u64),
        })
        .collect())
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GetWorkerInfoRequest {
    pub id: u64,
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

// ---- Blocks ----

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockError {
    pub block_hash: String,
    pub refcount: u64,
    pub error_count: u64,
    pub last_try_secs_ago: u64,
    pub next_try_in_secs: u64,
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBlockInfoRequest {
    pub block_hash: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockInfo {
    pub block_hash: String,
    pub refcount: u64,
    /// Versions that reference the block.
    pub versions: Vec<BlockVersion>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockVersion {
    pub version_id: String,
    /// The version is deleted (or gone).
    pub deleted: bool,
    /// The version entry is gone.
    pub garbage_collected: bool,
    /// The reference itself is marked deleted.
    pub ref_deleted: bool,
    pub backlink: Option<BlockVersionBacklink>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum BlockVersionBacklink {
    #[serde(rename_all = "camelCase")]
    Object { bucket_id: String, key: String },
    #[serde(rename_all = "camelCase")]
    Upload { upload_id: String },
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

/// `{"all": true}`, or `{"blockHashes": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryBlockResyncRequest {
    #[serde(default)]
    pub all: Option<bool>,
    #[serde(default)]
    pub block_hashes: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryBlockResyncResponse {
    /// Blocks queued for a resync now.
    pub count: u64,
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

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurgeBlocksResponse {
    pub blocks_purged: u64,
    pub objects_deleted: u64,
    pub uploads_deleted: u64,
    pub versions_deleted: u64,
    /// Versions kept because their object lock forbids deleting them.
    #[serde(default)]
    pub versions_locked: u64,
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetWorkerVariableRequest {
    /// One variable; all of them when absent.
    #[serde(default)]
    pub variable: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetWorkerVariableRequest {
    /// `resync-tranquility`, `resync-worker-count` or `scrub-tranquility`.
    pub variable: String,
    pub value: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetWorkerVariableResponse {
    pub variable: String,
    pub value: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataSnapshot {
    /// Where the snapshot was written (under `metadata_snapshots_dir`).
    pub path: String,
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
