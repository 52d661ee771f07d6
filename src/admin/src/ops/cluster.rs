//! The cluster: its nodes and their state, its health, connecting nodes,
//! and what it can still store. Typed answers only: the CLI and the admin
//! API format them.

use garage_rpc::system::status::FreeSpace;
use garage_rpc::system::versions::ClusterVersions;
use garage_rpc::system::System;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use garage_model::garage::Garage;

// ---- GetClusterStatus ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterStatusResponse {
    /// Version of the current cluster layout.
    pub layout_version: u64,
    pub nodes: Vec<NodeResp>,
    /// Releases run and the cluster's active version (absent from the
    /// answers of v0.1.0 nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_version: Option<ClusterVersionResp>,
}

/// The releases the nodes run and the cluster's active version (see
/// doc/upgrading.md).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersionResp {
    /// The release the answering node runs.
    pub release: String,
    /// The version the cluster was last finalized at: features of later
    /// versions are not used yet, and nodes of older releases are refused.
    pub active: String,
    /// Lowest and highest release among the layout's and the connected
    /// nodes.
    pub lowest: String,
    pub highest: String,
    /// Nodes run different release series, or the cluster is not finalized
    /// at the one they all run: an upgrade is under way.
    pub mixed: bool,
    /// What keeps FinalizeUpgrade on the answering node from raising the
    /// active version to its release series now (empty when it can, or
    /// when there is nothing to finalize).
    pub finalize_blockers: Vec<String>,
}

impl From<&ClusterVersions> for ClusterVersionResp {
    fn from(v: &ClusterVersions) -> Self {
        ClusterVersionResp {
            release: v.release.to_string(),
            active: v.active.to_string(),
            lowest: v.lowest.to_string(),
            highest: v.highest.to_string(),
            mixed: v.mixed,
            finalize_blockers: v.finalize_blockers.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    /// The release the node runs (`0.1.0` for a node that does not tell:
    /// v0.1.0 sends no version); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garage_version: Option<String>,
    /// The cluster version the node knows to be finalized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_version: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeAssignedRole {
    pub zone: String,
    /// Bytes; none for a gateway node.
    pub capacity: Option<u64>,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreeSpaceResp {
    pub available: u64,
    pub total: u64,
}

/// The nodes this node knows, with their roles in the current layout.
pub fn get_cluster_status(g: &Garage) -> GetClusterStatusResponse {
    let status = g.system.cluster_status();
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
                garage_version: n.version.map(|v| v.release.to_string()),
                cluster_version: n.version.map(|v| v.cluster.to_string()),
            }
        })
        .collect();
    GetClusterStatusResponse {
        layout_version: current.version,
        nodes,
        cluster_version: status.versions.as_ref().map(ClusterVersionResp::from),
    }
}

// ---- FinalizeUpgrade ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinalizeUpgradeResponse {
    /// The cluster's active version now.
    pub cluster_version: String,
}

/// Raises the cluster's active version to the answering node's release
/// series, once every node of the layout is up and runs it: from then on
/// the features of that version are used and older releases are refused
/// (no rollback). Does nothing if the cluster is already there.
pub async fn finalize_upgrade(system: &System) -> Result<FinalizeUpgradeResponse, ApiError> {
    let v = system
        .finalize()
        .await
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok(FinalizeUpgradeResponse {
        cluster_version: v.to_string(),
    })
}

// ---- GetClusterHealth ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    health_of(&system.health())
}

pub fn health_of(h: &garage_rpc::system::health::ClusterHealth) -> GetClusterHealthResponse {
    GetClusterHealthResponse {
        status: h.status.to_string(),
        known_nodes: h.known_nodes,
        connected_nodes: h.connected_nodes,
        storage_nodes: h.storage_nodes,
        storage_nodes_ok: h.storage_nodes_up,
        partitions: h.partitions,
        partitions_quorum: h.partitions_quorum,
        partitions_all_ok: h.partitions_all_ok,
        clock_skewed_nodes: h.clock_skewed_nodes.clone(),
    }
}

/// The cluster health lines of `garage stats` and `garage status`.
pub fn format_health(h: &GetClusterHealthResponse) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "Cluster health: {}", h.status);
    let _ = writeln!(
        out,
        "  nodes: {} connected of {} known; storage nodes: {} of {} up",
        h.connected_nodes, h.known_nodes, h.storage_nodes_ok, h.storage_nodes
    );
    let _ = writeln!(
        out,
        "  partitions: {} with quorum, {} with all nodes up, of {}",
        h.partitions_quorum, h.partitions_all_ok, h.partitions
    );
    for n in &h.clock_skewed_nodes {
        let _ = writeln!(
            out,
            "  clock of node {:.16} is off the cluster's by more than {} ms (max_clock_offset_msec): see the Clock column",
            n,
            garage_util::clock::bound_ms()
        );
    }
    out
}

// ---- ConnectClusterNodes ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectNodeResponse {
    /// Whether this node could connect to it.
    pub success: bool,
    /// Why not, if it could not.
    pub error: Option<String>,
}

/// Connects this node to others, given as `<node_id>@<host>:<port>` (or
/// `<host>:<port>`), at most 1000, each within 30 s.
pub async fn connect_cluster_nodes(
    g: &Garage,
    peers: Vec<String>,
) -> Result<Vec<ConnectNodeResponse>, ApiError> {
    if peers.len() > 1000 {
        return Err(ApiError::bad("at most 1000 nodes per request"));
    }
    let mut out = Vec::with_capacity(peers.len());
    for p in peers {
        let res =
            tokio::time::timeout(std::time::Duration::from_secs(30), g.system.connect(&p)).await;
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
    Ok(out)
}

// ---- GetClusterStatistics ----

/// The storage nodes' capacity and free space, and what the cluster can
/// still store.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterStatisticsResponse {
    /// The same as text, as the reference system answers it (filled in by
    /// the HTTP API: [`format_cluster_statistics`]).
    #[serde(default)]
    pub freeform: String,
    /// The storage nodes of the current layout, by id (garage's own).
    #[serde(default)]
    pub nodes: Vec<NodeStorage>,
    /// Estimated bytes of objects the cluster can still store: for each
    /// node, its free space divided by the share of the partitions it
    /// holds; the smallest of those. Absent when no node with a
    /// partition has reported its space.
    #[serde(default)]
    pub data_available: Option<u64>,
    #[serde(default)]
    pub metadata_available: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStorage {
    pub id: String,
    pub hostname: Option<String>,
    pub zone: String,
    /// Bytes; none for a gateway node.
    pub capacity: Option<u64>,
    /// Partition copies it holds (of 256 per copy).
    pub partitions: usize,
    pub data_partition: Option<FreeSpaceResp>,
    pub metadata_partition: Option<FreeSpaceResp>,
}

/// What the cluster's storage nodes hold and can still store.
pub fn get_cluster_statistics(system: &System) -> GetClusterStatisticsResponse {
    let status = system.cluster_status();
    let current = status.layout.current();
    let per_node = current.partitions_per_node();
    let mut ids: Vec<_> = current.storage_nodes.clone();
    ids.sort();
    let mut cluster_data: Option<u64> = None;
    let mut cluster_meta: Option<u64> = None;
    let mut nodes = Vec::with_capacity(ids.len());
    for id in ids {
        let role = &current.roles[&id];
        let node = status.nodes.iter().find(|n| n.id == id);
        let parts = per_node.get(&id).copied().unwrap_or(0);
        // A node holding `parts` of the 256 partitions can take
        // `available` more bytes: the cluster `available * 256 / parts`
        // more bytes of objects (each partition's copies are on distinct
        // nodes); the fullest node bounds it.
        let space = |f: Option<FreeSpace>, acc: &mut Option<u64>| {
            let f = f?;
            if parts > 0 {
                let whole = f.available.saturating_mul(256) / parts as u64;
                *acc = Some(acc.map_or(whole, |a| a.min(whole)));
            }
            Some(FreeSpaceResp {
                available: f.available,
                total: f.total,
            })
        };
        let data_partition = space(node.and_then(|n| n.data_space), &mut cluster_data);
        let metadata_partition = space(node.and_then(|n| n.metadata_space), &mut cluster_meta);
        nodes.push(NodeStorage {
            id: id.to_string(),
            hostname: node.and_then(|n| n.hostname.clone()),
            zone: role.zone.clone(),
            capacity: role.capacity,
            partitions: parts,
            data_partition,
            metadata_partition,
        });
    }
    GetClusterStatisticsResponse {
        freeform: String::new(),
        nodes,
        data_available: cluster_data,
        metadata_available: cluster_meta,
    }
}

/// The statistics as a table of text (`garage stats` prints it; the
/// admin API's `freeform`).
pub fn format_cluster_statistics(s: &GetClusterStatisticsResponse) -> String {
    use std::fmt::Write;
    let size = |b: u64| bytesize::ByteSize::b(b).display().si().to_string();
    let free = |f: &Option<FreeSpaceResp>| match f {
        Some(f) => format!(
            "{}/{} ({}%)",
            size(f.available),
            size(f.total),
            f.available * 100 / f.total.max(1)
        ),
        None => "?".into(),
    };
    let mut out = String::from("Storage nodes:\n");
    let _ = writeln!(
        out,
        "  {:<16}  {:<12}  {:<6}  {:>10}  {:>10}  {:>22}  {:>22}",
        "ID", "Hostname", "Zone", "Capacity", "Partitions", "Data available", "Metadata available"
    );
    for n in &s.nodes {
        let _ = writeln!(
            out,
            "  {:<16}  {:<12}  {:<6}  {:>10}  {:>10}  {:>22}  {:>22}",
            n.id.get(..16).unwrap_or(&n.id),
            n.hostname.clone().unwrap_or_default(),
            n.zone,
            n.capacity.map(size).unwrap_or_else(|| "gateway".into()),
            n.partitions,
            free(&n.data_partition),
            free(&n.metadata_partition)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Estimated available storage space cluster-wide (might be lower in practice):"
    );
    let or_unknown = |v: Option<u64>| v.map(size).unwrap_or_else(|| "?".into());
    let _ = writeln!(out, "  data: {}", or_unknown(s.data_available));
    let _ = writeln!(out, "  metadata: {}", or_unknown(s.metadata_available));
    out
}
