//! The admin CLI (`garage status`, `node`, `layout`, `bucket`, `key`, …):
//! it reaches a running daemon over the admin RPC
//! ([`garage_admin::admin_rpc`]), with the same `rpc_secret`, as a client
//! with a throwaway node key. By default the daemon is the one this
//! machine's configuration describes; `-h <id>@<host>:<port>` names
//! another. It sends the typed requests of [`garage_admin::ops`] and
//! formats their answers itself; `--json` and `json-api` print the answers
//! as the admin HTTP API does ([`garage_admin::ops::json`]).

mod blocks;
mod bucket;
mod iam;
mod key;
mod kms;
mod layout;
mod remote;
mod stats;
mod status;
mod tokens;
mod topic;
mod upgrade;

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use garage_admin::admin_rpc::{AdminRpc, ADMIN_ENDPOINT};
use garage_admin::ops::json::{self, Call};
use garage_admin::ops::node::{MultiResponse, NodeRequest, NodeResponse};
use garage_admin::ops::{AdminRequest, AdminResponse};
use garage_net::{Endpoint, EndpointHandler, NetApp, NetConfig, NetworkKey, NodeId, NodeKey};
use garage_rpc::system::{parse_peer_name, resolve, PeerName};

use crate::args::{Command, NodeOperation, Opt};
use crate::load_config::load;
use crate::rpc_addr;

/// The answer of `op`, or an error naming what came instead.
macro_rules! expect_answer {
    ($answer:expr, $pat:pat => $out:expr) => {
        match $answer {
            $pat => Ok($out),
            other => Err(anyhow::anyhow!(
                "unexpected answer from the node: {other:?}"
            )),
        }
    };
}
pub(crate) use expect_answer as expect;

/// An admin client has no endpoint of its own to serve; it answers nothing.
struct ClientHandler;

#[async_trait::async_trait]
impl EndpointHandler<AdminRpc> for ClientHandler {
    async fn handle(&self, _msg: AdminRpc, _from: NodeId) -> AdminRpc {
        AdminRpc::Error("this is an admin client, not a node".into())
    }
}

/// An error answer of the node: its message, and its code and HTTP
/// status for `json-api`.
#[derive(Debug)]
pub struct NodeError(pub garage_admin::ops::error::WireError);

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.message)
    }
}

impl std::error::Error for NodeError {}

pub struct Admin {
    _netapp: Arc<NetApp>,
    endpoint: Arc<Endpoint<AdminRpc, ClientHandler>>,
    target: NodeId,
    target_addr: std::net::SocketAddr,
}

impl Admin {
    pub async fn connect(opt: &Opt) -> anyhow::Result<Self> {
        let (mut config, _) = load(opt, true)?;
        let (target, target_addr) = match &opt.rpc_host {
            Some(host) => match parse_peer_name(host)? {
                PeerName::Known(id, h) => (Some(id), resolve(&h)?),
                // By address alone (e.g. a pod's DNS name): the node's id
                // is learned by connecting.
                PeerName::Address(h) => (None, resolve(&h)?),
            },
            None => {
                let id = NodeKey::read_public(&config.metadata_dir).with_context(|| {
                    format!(
                        "cannot read the local node's id in {} (is `garage server` running with this configuration? \
                         otherwise name the node with -h <node_id>@<host>:<port>)",
                        config.metadata_dir.display()
                    )
                })?;
                (Some(id), rpc_addr::local_target(&config))
            }
        };
        config.client_rpc_secret()?;
        let secret = config
            .rpc_secret
            .as_deref()
            .expect("set by client_rpc_secret");
        let network_key = NetworkKey::from_hex(secret).map_err(|e| anyhow!("rpc_secret: {e}"))?;
        let netapp = NetApp::new(network_key, NodeKey::generate(), NetConfig::default());
        let endpoint = netapp.endpoint::<AdminRpc, ClientHandler>(ADMIN_ENDPOINT);
        endpoint.set_handler(Arc::new(ClientHandler));
        let target = netapp
            .connect(target_addr, target)
            .await
            .with_context(|| {
                let who = target.map(|t| format!(" {t}")).unwrap_or_default();
                format!(
                    "cannot reach the garage node{who} at {target_addr}: is `garage server` running there, \
                     with the same rpc_secret?"
                )
            })?;
        Ok(Self {
            _netapp: netapp,
            endpoint,
            target,
            target_addr,
        })
    }

    /// Sends a request to the daemon's admin endpoint.
    async fn call(&self, msg: AdminRpc) -> anyhow::Result<AdminRpc> {
        match self
            .endpoint
            .call(&self.target, msg, garage_net::Priority::High)
            .await?
        {
            AdminRpc::Error(e) => bail!("{e}"),
            r => Ok(r),
        }
    }

    /// Runs a cluster-wide admin operation on the daemon.
    pub async fn op(&self, req: AdminRequest) -> anyhow::Result<AdminResponse> {
        match self.call(AdminRpc::Op(req)).await? {
            AdminRpc::OpResult(Ok(r)) => Ok(r),
            AdminRpc::OpResult(Err(e)) => Err(NodeError(e).into()),
            other => bail!("unexpected answer from the node: {other:?}"),
        }
    }

    /// Runs a node-local operation on the nodes `sel` names (`self`, `*`,
    /// or a node id or prefix): the reached node asks the others.
    pub async fn on_nodes(
        &self,
        sel: &str,
        req: NodeRequest,
    ) -> anyhow::Result<MultiResponse<NodeResponse>> {
        match self
            .call(AdminRpc::OnNodes {
                node: sel.to_string(),
                req,
            })
            .await?
        {
            AdminRpc::OnNodesResult(Ok(r)) => Ok(r),
            AdminRpc::OnNodesResult(Err(e)) => Err(NodeError(e).into()),
            other => bail!("unexpected answer from the node: {other:?}"),
        }
    }

    /// Runs an operation on the reached node itself.
    pub async fn node(&self, req: NodeRequest) -> anyhow::Result<NodeResponse> {
        let mut m = self.on_nodes("self", req).await?;
        let id = self.target.to_string();
        if let Some(r) = m.success.remove(&id) {
            return Ok(r);
        }
        match m.error.remove(&id) {
            Some(e) => bail!("{e}"),
            None => bail!("the node did not answer for itself"),
        }
    }

    /// The reached node's version, as its handshake told it (v0.1.0 tells
    /// none: `VersionInfo::LEGACY`).
    pub fn target_version(&self) -> Option<garage_net::VersionInfo> {
        self._netapp.peer_version(&self.target)
    }

    /// The reached node's view of the cluster.
    pub async fn cluster_status(
        &self,
    ) -> anyhow::Result<garage_admin::ops::cluster::GetClusterStatusResponse> {
        expect!(self.op(AdminRequest::GetClusterStatus).await?, AdminResponse::ClusterStatus(s) => s)
    }

    /// The current layout and its staged changes.
    pub async fn layout(
        &self,
    ) -> anyhow::Result<garage_admin::ops::layout::GetClusterLayoutResponse> {
        expect!(self.op(AdminRequest::GetClusterLayout).await?, AdminResponse::Layout(l) => *l)
    }
}

/// The admin API endpoint and request (query and body fields together, as
/// `garage json-api` takes them) whose answer a read command prints with
/// `--json`; `None` for a command that changes something.
pub fn json_request(cmd: &Command) -> Option<(&'static str, serde_json::Value)> {
    use crate::args::{
        AdminTokenOperation as T, BlockOperation as B, BucketOperation as Bu, KeyOperation as K,
        KmsOperation as Km, LayoutOperation as L, RemoteOperation as Re, TopicOperation as To,
        WorkerOperation as W,
    };
    use serde_json::json;
    Some(match cmd {
        Command::Status | Command::Upgrade(crate::args::UpgradeOperation::Status) => {
            ("GetClusterStatus", json!({}))
        }
        Command::Layout(L::Show) => ("GetClusterLayout", json!({})),
        Command::Bucket(Bu::List) => ("ListBuckets", json!({})),
        Command::Bucket(Bu::Info { name }) => ("GetBucketInfo", json!({ "search": name })),
        Command::Key(K::List) => ("ListKeys", json!({})),
        Command::Key(K::Info {
            key_pattern,
            show_secret,
        }) => (
            "GetKeyInfo",
            match show_secret {
                true => json!({ "search": key_pattern, "showSecretKey": "true" }),
                false => json!({ "search": key_pattern }),
            },
        ),
        Command::Stats { all_nodes } => (
            "GetNodeStatistics",
            json!({ "node": if *all_nodes { "*" } else { "self" } }),
        ),
        Command::Worker(W::List) => ("ListWorkers", json!({})),
        Command::Worker(W::Info { tid }) => ("GetWorkerInfo", json!({ "id": tid })),
        Command::Worker(W::Get { variable }) => {
            ("GetWorkerVariable", json!({ "variable": variable }))
        }
        Command::Block(B::ListErrors) => ("ListBlockErrors", json!({})),
        Command::Block(B::Info { hash }) => ("GetBlockInfo", json!({ "blockHash": hash })),
        Command::AdminToken(T::List) => ("ListAdminTokens", json!({})),
        Command::AdminToken(T::Info { token }) => ("GetAdminTokenInfo", json!({ "search": token })),
        Command::Kms(Km::List) => ("ListKmsKeys", json!({})),
        Command::Kms(Km::Info { key }) => ("GetKmsKeyInfo", json!({ "id": key })),
        Command::Topic(To::List) => ("ListTopics", json!({})),
        Command::Topic(To::Info { name }) => ("GetTopicInfo", json!({ "name": name })),
        Command::Remote(Re::List) => ("ListRemotes", json!({})),
        Command::Remote(Re::Info { name }) => ("GetRemoteInfo", json!({ "name": name })),
        _ => return None,
    })
}

/// Runs an admin command.
pub async fn run(opt: &Opt) -> anyhow::Result<()> {
    if opt.json {
        let (endpoint, request) = json_request(&opt.cmd).ok_or_else(|| {
            anyhow!(
                "--json is for read commands (status, layout show, bucket list/info, key list/info, stats, \
                 worker list/info/get, block list-errors/info, admin-token list/info, kms list/info, topic list/info, remote list/info); `garage {}` with these \
                 arguments changes something: call its admin API endpoint with `garage json-api` for a JSON answer",
                opt.cmd.name()
            )
        })?;
        let admin = Admin::connect(opt).await?;
        return json_api(&admin, endpoint, Some(&request.to_string())).await;
    }
    let admin = Admin::connect(opt).await?;
    match &opt.cmd {
        Command::Status => status::show(&admin).await,
        Command::Node(NodeOperation::Id { quiet }) => {
            let status = admin.cluster_status().await?;
            let me = status
                .nodes
                .iter()
                .find(|n| n.id == admin.target.to_string())
                .ok_or_else(|| anyhow!("the node did not list itself"))?;
            let addr = me
                .addr
                .clone()
                .unwrap_or_else(|| admin.target_addr.to_string());
            println!("{}@{}", admin.target, addr);
            if !quiet {
                eprintln!();
                eprintln!("To instruct a node to connect to this node, run the following command on that node:");
                eprintln!(
                    "    garage [-c <config file path>] node connect {}@{}",
                    admin.target, addr
                );
                eprintln!();
                eprintln!("Or add the following line to the bootstrap_peers list in the configuration file of all nodes of the cluster:");
                eprintln!("    \"{}@{}\"", admin.target, addr);
            }
            Ok(())
        }
        Command::Node(NodeOperation::Connect { node }) => {
            let req = AdminRequest::ConnectClusterNodes(vec![node.clone()]);
            let answers = expect!(admin.op(req).await?, AdminResponse::Connected(c) => c)?;
            match answers.into_iter().next() {
                Some(a) if a.success => {
                    println!("Success.");
                    Ok(())
                }
                Some(a) => bail!("{}", a.error.unwrap_or_default()),
                None => bail!("the node did not answer for {node}"),
            }
        }
        Command::Layout(op) => layout::run(&admin, op).await,
        Command::Stats { all_nodes } => stats::show(&admin, *all_nodes).await,
        Command::Bucket(op) => bucket::run(&admin, op).await,
        Command::Key(op) => key::run(&admin, op).await,
        Command::Block(op) => blocks::block(&admin, op).await,
        Command::Worker(op) => blocks::worker(&admin, op).await,
        Command::Repair(opt) => stats::repair(&admin, opt).await,
        Command::AdminToken(op) => tokens::run(&admin, op).await,
        Command::Kms(op) => kms::run(&admin, op).await,
        Command::Topic(op) => topic::run(&admin, op).await,
        Command::Remote(op) => remote::run(&admin, op).await,
        Command::Iam { action, params } => iam::run(&admin, action, params).await,
        Command::Upgrade(op) => upgrade::run(&admin, op).await,
        Command::JsonApi { endpoint, request } => {
            json_api(&admin, endpoint, request.as_deref()).await
        }
        Command::Meta(crate::args::MetaOperation::Snapshot { all }) => {
            meta_snapshot(&admin, *all).await
        }
        other => bail!("`garage {}` is not an admin command", other.name()),
    }
}

/// Runs a node-local operation on the reached node, or on every node it
/// knows (`all`); each node's answer or error, by node id.
pub async fn on_nodes(
    admin: &Admin,
    all: bool,
    req: &NodeRequest,
) -> anyhow::Result<Vec<(String, anyhow::Result<NodeResponse>)>> {
    if !all {
        return Ok(vec![(
            admin.target.to_string(),
            admin.node(req.clone()).await,
        )]);
    }
    let m = admin.on_nodes("*", req.clone()).await?;
    let mut out: Vec<_> = m.success.into_iter().map(|(id, r)| (id, Ok(r))).collect();
    out.extend(m.error.into_iter().map(|(id, e)| (id, Err(anyhow!(e)))));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// `garage meta snapshot [--all]`.
async fn meta_snapshot(admin: &Admin, all: bool) -> anyhow::Result<()> {
    let req = NodeRequest::CreateMetadataSnapshot;
    let mut failed = 0;
    for (id, res) in on_nodes(admin, all, &req).await? {
        match res.and_then(|r| expect!(r, NodeResponse::Snapshot(s) => s)) {
            Ok(s) => println!("{id:.16}  snapshot written to {}", s.path),
            Err(e) => {
                failed += 1;
                println!("{id:.16}  error: {e:#}");
            }
        }
    }
    if failed > 0 {
        bail!("{failed} node(s) made no snapshot");
    }
    Ok(())
}

/// `garage json-api ENDPOINT [REQUEST|-]`: the answer's JSON on standard
/// output (pretty-printed); an error answer's JSON on standard error, and
/// a failure exit.
async fn json_api(admin: &Admin, endpoint: &str, request: Option<&str>) -> anyhow::Result<()> {
    let request = match request {
        Some("-") => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
            s
        }
        Some(r) => r.to_string(),
        None => String::new(),
    };
    let call = json::call(endpoint, &request).map_err(|e| anyhow!("{endpoint}: {e}"))?;
    let answer = match call {
        Call::Op(req) => admin.op(req).await.map(json::answer),
        Call::OnNodes { node, req } => admin.on_nodes(&node, req).await.map(json::node_answer),
    };
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    match answer {
        Ok(v) => {
            println!("{}", pretty(&v));
            Ok(())
        }
        Err(e) => match e.downcast_ref::<NodeError>() {
            // The error body of the HTTP API.
            Some(NodeError(w)) => {
                let body = serde_json::json!({
                    "code": w.code,
                    "message": w.message,
                    "path": format!("/v2/{endpoint}"),
                });
                eprintln!("{}", pretty(&body));
                bail!("{endpoint} answered HTTP {}", w.status)
            }
            None => Err(e),
        },
    }
}

/// How long a command waits for a node's answer to a node-local
/// question (`garage status`'s census, `garage topic info`'s backlog)
/// before naming the node.
pub const NODE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Asks every node `status` sees up for `req`, all at once, each for at
/// most [`NODE_WAIT`] (such commands are run when something is wrong):
/// the answers by node id, and the nodes without one, named with why.
/// Nodes down are named too: every one when `every_down`, else those
/// with a role in the layout.
pub async fn ask_up_nodes(
    admin: &Admin,
    status: &garage_admin::ops::cluster::GetClusterStatusResponse,
    req: NodeRequest,
    every_down: bool,
) -> (Vec<(String, NodeResponse)>, Vec<String>) {
    let mut missing: Vec<String> = status
        .nodes
        .iter()
        .filter(|n| !n.is_up && (every_down || n.role.is_some()))
        .map(|n| format!("{:.16} (down)", n.id))
        .collect();
    let up = status
        .nodes
        .iter()
        .filter(|n| n.is_up)
        .map(|n| n.id.as_str());
    let answers = futures::future::join_all(up.map(|id| {
        let req = req.clone();
        async move {
            let asked = admin.on_nodes(id, req);
            (id, tokio::time::timeout(NODE_WAIT, asked).await)
        }
    }))
    .await;
    let mut got = Vec::new();
    for (id, answer) in answers {
        match answer {
            Err(_) => missing.push(format!(
                "{id:.16} (no answer within {} s)",
                NODE_WAIT.as_secs()
            )),
            Ok(Err(e)) => missing.push(format!("{id:.16} ({e:#})")),
            Ok(Ok(mut m)) => match m.success.remove(id) {
                Some(r) => got.push((id.to_string(), r)),
                // An error: a node of an earlier release may not serve
                // the operation.
                None => missing.push(match m.error.remove(id) {
                    Some(e) => format!("{id:.16} ({e})"),
                    None => format!("{id:.16} (no answer)"),
                }),
            },
        }
    }
    (got, missing)
}
/// An RFC 3339 date as the CLI prints dates.
pub fn date(rfc3339: &str) -> String {
    rfc3339
        .parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}
