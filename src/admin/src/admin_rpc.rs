//! The daemon's admin RPC endpoint: how the CLI (and the admin API of
//! another node) reach the admin operations of [`crate::ops`]. Requests
//! and answers are the typed ones of `ops`, sent as they are. Cluster
//! membership and layout commands use the system endpoint of `garage_rpc`
//! instead.

use std::sync::{Arc, OnceLock};

use garage_net::{EndpointHandler, Message, NodeId};
use serde::{Deserialize, Serialize};

use crate::ops::error::WireError;
use crate::ops::node::{NodeRequest, NodeResponse};
use crate::ops::{AdminRequest, AdminResponse};
use garage_model::garage::Garage;

pub const ADMIN_ENDPOINT: &str = "garage/admin";

#[derive(Debug, Serialize, Deserialize)]
pub enum AdminRpc {
    /// A message this endpoint cannot serve.
    Error(String),
    /// A cluster-wide admin operation (buckets, keys, admin tokens).
    Op(AdminRequest),
    OpResult(Result<AdminResponse, WireError>),
    /// An operation on the reached node itself.
    Node(NodeRequest),
    NodeResult(Result<NodeResponse, WireError>),
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
}

impl Message for AdminRpc {
    type Response = AdminRpc;
}

/// Runs an admin API endpoint by name in this process (`garage
/// json-api`). The admin API provides it, once it exists: this module
/// does not name the HTTP layer above it.
#[async_trait::async_trait]
pub trait JsonApi: Send + Sync {
    /// The HTTP status and JSON answer of `endpoint` given `request`.
    async fn call(&self, endpoint: &str, request: &str) -> Result<(u16, String), String>;
}

pub struct AdminRpcHandler {
    pub garage: Arc<Garage>,
    /// Set by the server once the admin API's executor is built.
    pub json_api: OnceLock<Arc<dyn JsonApi>>,
}

impl AdminRpcHandler {
    pub fn new(garage: Arc<Garage>) -> Self {
        Self {
            garage,
            json_api: OnceLock::new(),
        }
    }
}

#[async_trait::async_trait]
impl EndpointHandler<AdminRpc> for AdminRpcHandler {
    async fn handle(&self, msg: AdminRpc, _from: NodeId) -> AdminRpc {
        match msg {
            AdminRpc::Op(req) => AdminRpc::OpResult(
                crate::ops::run(&self.garage, req)
                    .await
                    .map_err(|e| WireError::from(&e)),
            ),
            AdminRpc::Node(req) => AdminRpc::NodeResult(
                crate::ops::node::run(&self.garage, req)
                    .await
                    .map_err(|e| WireError::from(&e)),
            ),
            AdminRpc::JsonApi { endpoint, request } => match self.json_api.get() {
                None => AdminRpc::Error("the node is starting or stopping".into()),
                Some(api) => match api.call(&endpoint, &request).await {
                    Ok((status, body)) => AdminRpc::JsonApiResult { status, body },
                    Err(e) => AdminRpc::Error(e),
                },
            },
            other => AdminRpc::Error(format!("not a request: {other:?}")),
        }
    }
}
