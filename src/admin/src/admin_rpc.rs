//! The daemon's admin RPC endpoint: the one transport of the admin
//! operations of [`crate::ops`] between processes. The CLI sends its typed
//! requests here, and a node's fan-out of a node-local operation
//! (`?node=*` in the admin API, `--all-nodes` in the CLI) reaches the
//! other nodes here. Requests and answers are the typed ones of `ops`,
//! sent as they are: no text to print, no JSON.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, Weak};

use garage_net::{Endpoint, EndpointHandler, Message, NetApp, NodeId};
use serde::{Deserialize, Serialize};

use crate::ops::error::{ApiError, WireError};
use crate::ops::node::{MultiResponse, NodeRequest, NodeResponse};
use crate::ops::{AdminRequest, AdminResponse, NodeConfig};
use garage_model::garage::Garage;

pub const ADMIN_ENDPOINT: &str = "garage/admin";

#[derive(Debug, Serialize, Deserialize)]
pub enum AdminRpc {
    /// A message this endpoint cannot serve.
    Error(String),
    /// A cluster-wide admin operation (cluster, layout, buckets, keys,
    /// admin tokens).
    Op(AdminRequest),
    OpResult(Result<AdminResponse, WireError>),
    /// A node-local operation on the nodes `node` names (`self`, `*`, or
    /// a node id or unique prefix), fanned out by the reached node.
    OnNodes {
        node: String,
        req: NodeRequest,
    },
    OnNodesResult(Result<MultiResponse<NodeResponse>, WireError>),
    /// A node-local operation on the reached node itself (one leg of a
    /// fan-out).
    Node(NodeRequest),
    NodeResult(Result<NodeResponse, WireError>),
}

impl Message for AdminRpc {
    type Response = AdminRpc;
}

pub type AdminEndpoint = Endpoint<AdminRpc, AdminRpcHandler>;

pub struct AdminRpcHandler {
    garage: Arc<Garage>,
    conf: NodeConfig,
    /// The endpoint this handler serves, for fan-outs (weak: the endpoint
    /// holds the handler).
    endpoint: OnceLock<Weak<AdminEndpoint>>,
}

impl AdminRpcHandler {
    /// Opens the admin endpoint on `netapp`, served by a new handler. The
    /// caller keeps the endpoint for the daemon's whole life.
    pub fn install(
        netapp: &Arc<NetApp>,
        garage: Arc<Garage>,
        conf: NodeConfig,
    ) -> Arc<AdminEndpoint> {
        let endpoint = netapp.endpoint::<AdminRpc, AdminRpcHandler>(ADMIN_ENDPOINT);
        let handler = Arc::new(AdminRpcHandler {
            garage,
            conf,
            endpoint: OnceLock::new(),
        });
        let _ = handler.endpoint.set(Arc::downgrade(&endpoint));
        endpoint.set_handler(handler);
        endpoint
    }
}

#[async_trait::async_trait]
impl EndpointHandler<AdminRpc> for AdminRpcHandler {
    async fn handle(&self, msg: AdminRpc, _from: NodeId) -> AdminRpc {
        let wire = |e: ApiError| WireError::from(&e);
        match msg {
            AdminRpc::Op(req) => AdminRpc::OpResult(
                crate::ops::run(&self.garage, &self.conf, req)
                    .await
                    .map_err(wire),
            ),
            AdminRpc::Node(req) => {
                AdminRpc::NodeResult(crate::ops::node::run(&self.garage, req).await.map_err(wire))
            }
            AdminRpc::OnNodes { node, req } => {
                match self.endpoint.get().and_then(|e| e.upgrade()) {
                    None => AdminRpc::Error("the node is stopping".into()),
                    Some(ep) => AdminRpc::OnNodesResult(
                        on_nodes(&ep, &self.garage, &node, req).await.map_err(wire),
                    ),
                }
            }
            other => AdminRpc::Error(format!("not a request: {other:?}")),
        }
    }
}

/// The nodes `sel` names: `self`, `*` (every node known or with a role),
/// or a node id or a unique prefix of one.
fn which_nodes(g: &Garage, sel: &str) -> Result<Vec<NodeId>, ApiError> {
    let system = &g.system;
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

/// Why one node of a fan-out has no answer.
enum Failed {
    /// This node's own error.
    Here(ApiError),
    /// Another node's error, or no answer from it.
    There(String),
}

/// Runs a node-local operation on the nodes `sel` names, all at once (a
/// dead node costs one timeout, not one each): each node's answer or
/// error. When only this node was asked, its error is the answer's (a 404
/// on an unknown block must not look like a success).
pub async fn on_nodes(
    endpoint: &AdminEndpoint,
    g: &Arc<Garage>,
    sel: &str,
    req: NodeRequest,
) -> Result<MultiResponse<NodeResponse>, ApiError> {
    let nodes = which_nodes(g, sel)?;
    let me = g.system.id();
    let asked = nodes.len();
    let answers = futures::future::join_all(nodes.into_iter().map(|id| {
        let req = req.clone();
        async move {
            let res = if id == me {
                crate::ops::node::run(g, req).await.map_err(Failed::Here)
            } else {
                call_remote(endpoint, g, id, req)
                    .await
                    .map_err(Failed::There)
            };
            (id, res)
        }
    }))
    .await;
    let mut out = MultiResponse {
        success: BTreeMap::new(),
        error: BTreeMap::new(),
    };
    for (id, res) in answers {
        match res {
            Ok(r) => {
                out.success.insert(id.to_string(), r);
            }
            Err(Failed::Here(e)) if asked == 1 => return Err(e),
            Err(Failed::Here(e)) => {
                out.error.insert(id.to_string(), e.to_string());
            }
            Err(Failed::There(e)) => {
                out.error.insert(id.to_string(), e);
            }
        }
    }
    Ok(out)
}

async fn call_remote(
    endpoint: &AdminEndpoint,
    g: &Garage,
    id: NodeId,
    req: NodeRequest,
) -> Result<NodeResponse, String> {
    g.system.ensure_connected(&id).await;
    let call = endpoint.call(&id, AdminRpc::Node(req), garage_net::Priority::High);
    match tokio::time::timeout(REMOTE_TIMEOUT, call).await {
        Err(_) => Err(format!("no answer within {}s", REMOTE_TIMEOUT.as_secs())),
        Ok(Err(e)) => Err(format!("cannot reach the node: {e}")),
        Ok(Ok(AdminRpc::NodeResult(Ok(r)))) => Ok(r),
        Ok(Ok(AdminRpc::NodeResult(Err(e)))) => Err(e.message),
        Ok(Ok(AdminRpc::Error(e))) => Err(e),
        Ok(Ok(other)) => Err(format!("unexpected answer from the node: {other:?}")),
    }
}
