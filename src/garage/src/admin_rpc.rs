//! The daemon's admin endpoint, for the admin commands that act on tables
//! (`garage stats`, `garage repair tables`, and later `key` and `bucket`).
//! Cluster membership and layout commands use the system endpoint of
//! `garage_rpc` instead.

use std::sync::Arc;

use garage_net::{EndpointHandler, Message, NodeId};
use garage_table::TableStats;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::cli::{BlockOperation, BucketOperation, KeyOperation, RepairWhat, WorkerOperation};
use garage_model::garage::Garage;
use garage_model::helper::Metadata;

pub const ADMIN_ENDPOINT: &str = "garage/admin";

#[derive(Debug, Serialize, Deserialize)]
pub enum AdminRpc {
    Error(String),
    /// Statistics of this node's tables.
    Stats,
    StatsResponse(NodeStats),
    /// Run an anti-entropy pass of every table now.
    RepairTables,
    RepairLaunched,
    BucketOp(BucketOperation),
    KeyOp(KeyOperation),
    BlockOp(BlockOperation),
    WorkerOp(WorkerOperation),
    /// `repair blocks` and `repair scrub …`.
    RepairBlocks(RepairWhat),
    /// What the command prints.
    Text(String),
    /// A node-local admin API operation, as JSON (`?node=` of the HTTP
    /// API naming another node).
    NodeApi(String),
    /// Its JSON result.
    NodeApiResult(String),
    /// `garage json-api`: an admin API endpoint by name, with its JSON
    /// request (query parameters and body fields together).
    JsonApi {
        endpoint: String,
        request: String,
    },
    /// Its HTTP status and JSON answer.
    JsonApiResult {
        status: u16,
        body: String,
    },
    /// An admin token operation (`garage admin-token`).
    Tokens(crate::admin_api::token::TokenRequest),
    TokensResult(crate::admin_api::token::TokenResponse),
}

impl Message for AdminRpc {
    type Response = AdminRpc;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStats {
    pub node: NodeId,
    pub db_engine: String,
    pub tables: Vec<TableStats>,
    /// Blocks with a reference count entry, resync queue length, blocks
    /// whose resync failed.
    pub block_rc_entries: usize,
    pub resync_queue: usize,
    pub resync_errors: usize,
    /// Free space of the data and metadata volumes.
    #[serde(default)]
    pub data_space: Option<garage_rpc::system::status::FreeSpace>,
    #[serde(default)]
    pub metadata_space: Option<garage_rpc::system::status::FreeSpace>,
    #[serde(default)]
    pub health: Option<garage_rpc::system::health::ClusterHealth>,
    /// Totals of the node's metric counters since it started, by name.
    #[serde(default)]
    pub counters: std::collections::BTreeMap<String, f64>,
}

/// Statistics of this node's tables and blocks.
pub async fn node_stats(garage: &Arc<Garage>) -> Result<NodeStats, String> {
    let g = garage.clone();
    match tokio::task::spawn_blocking(move || crate::gauges::node_stats(&g)).await {
        Ok(Ok(mut stats)) => {
            stats.counters = crate::telemetry::counter_totals();
            Ok(stats)
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(format!("statistics task failed: {e}")),
    }
}

/// Starts an anti-entropy pass of every table, in the background.
pub fn repair_tables(garage: &Garage) {
    for t in garage.tables.clone() {
        tokio::spawn(async move {
            info!(table = t.name(), "repair: table sync requested");
            match t.sync_now().await {
                Ok(s) => info!(
                    table = t.name(),
                    "repair: table sync done: {} partitions, {} entries sent",
                    s.partitions,
                    s.entries_sent
                ),
                Err(e) => warn!(table = t.name(), "repair: table sync failed: {e}"),
            }
        });
    }
}

pub struct AdminRpcHandler {
    pub garage: Arc<Garage>,
    /// This endpoint itself (for `json-api` calls of node-local
    /// endpoints, which ask other nodes through it).
    pub endpoint: std::sync::Weak<garage_net::Endpoint<AdminRpc, AdminRpcHandler>>,
    /// `s3_api.s3_region`, named in admin API error bodies.
    pub region: String,
}

impl AdminRpcHandler {
    fn metadata(&self) -> Metadata {
        self.garage.metadata()
    }
}

#[async_trait::async_trait]
impl EndpointHandler<AdminRpc> for AdminRpcHandler {
    async fn handle(&self, msg: AdminRpc, _from: NodeId) -> AdminRpc {
        match msg {
            AdminRpc::Stats => match node_stats(&self.garage).await {
                Ok(s) => AdminRpc::StatsResponse(s),
                Err(e) => AdminRpc::Error(e),
            },
            AdminRpc::RepairTables => {
                repair_tables(&self.garage);
                AdminRpc::RepairLaunched
            }
            AdminRpc::BucketOp(op) => match crate::admin_ops::bucket(&self.garage, op).await {
                Ok(t) => AdminRpc::Text(t),
                Err(e) => AdminRpc::Error(e.to_string()),
            },
            AdminRpc::BlockOp(op) => match crate::admin_blocks::block(&self.garage, op).await {
                Ok(t) => AdminRpc::Text(t),
                Err(e) => AdminRpc::Error(e),
            },
            AdminRpc::WorkerOp(op) => match crate::admin_blocks::worker(&self.garage, op).await {
                Ok(t) => AdminRpc::Text(t),
                Err(e) => AdminRpc::Error(e),
            },
            AdminRpc::RepairBlocks(what) => {
                match crate::admin_blocks::repair(&self.garage.block_manager, what).await {
                    Ok(t) => AdminRpc::Text(t),
                    Err(e) => AdminRpc::Error(e),
                }
            }
            AdminRpc::KeyOp(op) => match crate::admin_ops::key(&self.metadata(), op).await {
                Ok(t) => AdminRpc::Text(t),
                Err(e) => AdminRpc::Error(e.to_string()),
            },
            AdminRpc::NodeApi(json) => {
                match crate::admin_api::node::run_local_json(&self.garage, &json).await {
                    Ok(t) => AdminRpc::NodeApiResult(t),
                    Err(e) => AdminRpc::Error(e.to_string()),
                }
            }
            AdminRpc::JsonApi { endpoint, request } => {
                let Some(rpc) = self.endpoint.upgrade() else {
                    return AdminRpc::Error("the node is stopping".into());
                };
                let st = Arc::new(crate::admin_api::AdminState {
                    garage: self.garage.clone(),
                    admin_token: None,
                    region: self.region.clone(),
                    admin_rpc: rpc,
                });
                match crate::admin_api::call_in_process(st, &endpoint, &request).await {
                    Ok((status, body)) => AdminRpc::JsonApiResult { status, body },
                    Err(e) => AdminRpc::Error(e),
                }
            }
            AdminRpc::Tokens(req) => match crate::admin_api::token::handle(&self.garage, req).await
            {
                Ok(r) => AdminRpc::TokensResult(r),
                Err(e) => AdminRpc::Error(e.to_string()),
            },
            other => AdminRpc::Error(format!("not a request: {other:?}")),
        }
    }
}
