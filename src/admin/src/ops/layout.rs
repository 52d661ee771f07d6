//! The cluster layout: read it, stage changes, apply, revert, its
//! history, a preview of the next version, skipping dead nodes. Changes go
//! through `System::update_layout`.

use garage_net::NodeId;
use garage_rpc::layout::{
    ClassDef, EcCode, LayoutHistory, LayoutParameters, LayoutVersion, NodeRole, Placement,
    RedundancySpec, Tracker, ZoneRedundancy,
};
use garage_rpc::system::{LayoutUpdate, System, SystemError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;

/// The node whose id starts with `prefix`, among known nodes and nodes with
/// a (current or staged) role.
pub fn find_node(
    status: &garage_rpc::system::ClusterStatus,
    prefix: &str,
) -> Result<NodeId, String> {
    let ids = status
        .nodes
        .iter()
        .map(|n| n.id)
        .chain(status.layout.staged_roles().into_keys())
        .chain(status.layout.current().roles.keys().copied());
    let found = find_id(ids.map(|id| id.to_string()), prefix)?;
    found
        .parse::<NodeId>()
        .map_err(|e| format!("node id {found}: {e}"))
}

/// The one id among `ids` that starts with `prefix` (case-insensitive).
pub fn find_id(ids: impl IntoIterator<Item = String>, prefix: &str) -> Result<String, String> {
    let prefix = prefix.to_ascii_lowercase();
    let mut found: Vec<String> = ids
        .into_iter()
        .filter(|id| id.starts_with(&prefix))
        .collect();
    found.sort();
    found.dedup();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!(
            "no node id starts with {prefix:?}: see `garage status` for the nodes"
        )),
        n => Err(format!(
            "{n} nodes match {prefix:?}: give more characters of the id"
        )),
    }
}

/// How `layout history` and the admin API name a version's state.
pub fn version_status(v: &LayoutVersion, current: u64, min_live: u64) -> &'static str {
    if v.version == current {
        "Current"
    } else if v.version >= min_live {
        "Draining"
    } else {
        "Historical"
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterLayoutResponse {
    /// Version of the current layout.
    pub version: u64,
    /// Nodes with a role in the current layout.
    pub roles: Vec<LayoutNodeRole>,
    /// Bytes of each partition copy.
    pub partition_size: u64,
    pub parameters: ApiLayoutParameters,
    /// Storage classes the current layout offers, `STANDARD` first.
    #[serde(default)]
    pub storage_classes: Vec<LayoutStorageClass>,
    /// Erasure codes no class offers any more, kept for the blocks stored
    /// with them earlier.
    #[serde(default)]
    pub kept_codes: Vec<String>,
    /// Changes staged for the next version.
    pub staged_role_changes: Vec<NodeRoleChange>,
    /// Parameters staged for the next version, if they differ.
    pub staged_parameters: Option<ApiLayoutParameters>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LayoutNodeRole {
    pub id: String,
    pub zone: String,
    /// Bytes; none for a gateway node.
    pub capacity: Option<u64>,
    /// Partition copies this node stores.
    pub stored_partitions: Option<usize>,
    /// Bytes of those partitions.
    pub usable_capacity: Option<u64>,
    pub tags: Vec<String>,
}

/// A change of one node's role: `{"id", "remove": true}` to remove it, or
/// `{"id", "zone", "capacity", "tags"}` to set it (`capacity` null: a
/// gateway).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRoleChange {
    /// Node id, or a unique prefix of it.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default)]
    pub capacity: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiLayoutParameters {
    pub zone_redundancy: ApiZoneRedundancy,
    /// Erasure-coded storage classes as configured: name -> `DATA+PARITY`,
    /// `auto` or `off` (`STANDARD_IA` is `auto` unless set). In an update,
    /// the classes given are changed and the others kept.
    #[serde(default)]
    pub storage_classes: std::collections::BTreeMap<String, String>,
    /// Storage classes with a place (zones and redundancy of their own),
    /// by name. In an update, the classes given are set (or removed, with
    /// `"remove": true`) and the others kept. Needs the cluster finalized
    /// at v0.3.0.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub class_definitions: std::collections::BTreeMap<String, ApiClassDef>,
}

/// A storage class with a place: `{"replication": 2, "zones": ["paris",
/// "berlin"]}`, `{"erasure": "4+2"}` or `{"erasure": "auto"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiClassDef {
    /// Copies of each block (1 to 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<u8>,
    /// An erasure code, `DATA+PARITY`, or `auto` (chosen for the zones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erasure: Option<String>,
    /// The zones the class's blocks may go to; empty: every zone.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Accept one copy, which does not survive the loss of its node.
    #[serde(default)]
    pub allow_no_redundancy: bool,
    /// In an update: remove the class (its blocks stay where they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<bool>,
}

impl From<&ClassDef> for ApiClassDef {
    fn from(d: &ClassDef) -> Self {
        let (replication, erasure) = match d.redundancy {
            RedundancySpec::Copies(n) => (Some(n), None),
            RedundancySpec::Auto => (None, Some("auto".to_string())),
            RedundancySpec::Code(c) => (None, Some(c.to_string())),
        };
        ApiClassDef {
            replication,
            erasure,
            zones: d.zones.iter().cloned().collect(),
            allow_no_redundancy: d.allow_no_redundancy,
            remove: None,
        }
    }
}

impl ApiClassDef {
    /// The definition, checked on its own (the layout's zones are checked
    /// when the change is previewed or applied).
    pub fn to_def(&self, name: &str) -> Result<ClassDef, String> {
        let redundancy = match (self.replication, self.erasure.as_deref()) {
            (Some(n), None) => RedundancySpec::Copies(n),
            (None, Some("auto")) => RedundancySpec::Auto,
            (None, Some(code)) => RedundancySpec::Code(code.parse::<EcCode>()?),
            _ => {
                return Err(format!(
                    "storage class {name}: give either a replication (copies) or an erasure code (DATA+PARITY or auto)"
                ))
            }
        };
        let def = ClassDef {
            redundancy,
            zones: self.zones.iter().cloned().collect(),
            allow_no_redundancy: self.allow_no_redundancy,
        };
        def.check(name)?;
        Ok(def)
    }
}

/// A storage class the current layout offers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LayoutStorageClass {
    pub name: String,
    /// `replicated` or `erasure`.
    pub kind: String,
    /// Copies of each block (replicated), or `DATA+PARITY` shards.
    pub redundancy: String,
    /// Bytes on disk per byte stored.
    pub overhead: f64,
    /// The zones its blocks go to; empty: every zone.
    #[serde(default)]
    pub zones: Vec<String>,
    /// What it survives: `any 1 node(s) or a zone`, `any 2 node(s), not a
    /// zone`, `no node loss`.
    #[serde(default)]
    pub survives: String,
}

/// `"maximum"`, or `{"atLeast": n}`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ApiZoneRedundancy {
    AtLeast(usize),
    Maximum,
}

impl From<&LayoutParameters> for ApiLayoutParameters {
    fn from(p: &LayoutParameters) -> Self {
        ApiLayoutParameters {
            zone_redundancy: match p.zone_redundancy {
                ZoneRedundancy::Maximum => ApiZoneRedundancy::Maximum,
                ZoneRedundancy::AtLeast(n) => ApiZoneRedundancy::AtLeast(n),
            },
            storage_classes: p
                .storage_classes
                .iter()
                .filter(|(n, _)| !p.class_defs.contains_key(*n))
                .map(|(n, c)| (n.clone(), c.to_string()))
                .collect(),
            class_definitions: p
                .class_defs
                .iter()
                .map(|(n, d)| (n.clone(), d.into()))
                .collect(),
        }
    }
}

/// The roles of a layout version, with what each node stores.
fn roles_of(current: &garage_rpc::layout::LayoutVersion) -> Vec<LayoutNodeRole> {
    let per_node = current.partitions_per_node();
    current
        .roles
        .iter()
        .map(|(id, r)| {
            let stored = r.capacity.map(|_| per_node.get(id).copied().unwrap_or(0));
            LayoutNodeRole {
                id: id.to_string(),
                zone: r.zone.clone(),
                capacity: r.capacity,
                stored_partitions: stored,
                usable_capacity: stored.map(|n| n as u64 * current.partition_size),
                tags: r.tags.clone(),
            }
        })
        .collect()
}

/// The storage classes `v` offers, `STANDARD` first.
fn classes_of(v: &garage_rpc::layout::LayoutVersion) -> Vec<LayoutStorageClass> {
    let zones: std::collections::BTreeSet<&str> = v
        .roles
        .values()
        .filter(|r| r.capacity.is_some())
        .map(|r| r.zone.as_str())
        .collect();
    let rf = v.replication_factor;
    let standard_survives = garage_rpc::layout::Survival {
        nodes: rf - 1,
        zone: rf >= 2 && zones.len() >= 2,
    };
    let class = |name: &str, p: Placement| {
        let c = p.code();
        let ring = v.ring_of(p);
        LayoutStorageClass {
            name: name.to_string(),
            kind: if c.is_replication() {
                "replicated".into()
            } else {
                "erasure".into()
            },
            redundancy: if c.is_replication() {
                c.shards().to_string()
            } else {
                c.to_string()
            },
            overhead: c.overhead(),
            zones: ring
                .map(|r| r.zones.iter().cloned().collect())
                .unwrap_or_default(),
            survives: v.survival(p).map(|s| s.to_string()).unwrap_or_default(),
        }
    };
    std::iter::once(LayoutStorageClass {
        name: garage_rpc::layout::classes::STANDARD.into(),
        kind: "replicated".into(),
        redundancy: rf.to_string(),
        overhead: rf as f64,
        zones: vec![],
        survives: standard_survives.to_string(),
    })
    .chain(v.classes.iter().map(|(n, c)| class(n, Placement::from(*c))))
    .chain(v.placed.iter().map(|(n, p)| class(n, *p)))
    .collect()
}

/// How a ring is named where no class names it.
fn ring_name(r: &garage_rpc::layout::EcRing) -> String {
    if r.zones.is_empty() {
        r.code.describe()
    } else {
        format!(
            "{} in zones {}",
            r.code.describe(),
            r.zones.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    }
}

/// The placements of `v`'s rings that no class of `v` uses.
fn kept_codes(v: &LayoutVersion) -> Vec<String> {
    v.ec_rings
        .iter()
        .filter(|r| v.users_of(r.placement()).is_empty())
        .map(|r| {
            if r.scope == 0 {
                r.code.to_string()
            } else {
                ring_name(r)
            }
        })
        .collect()
}

/// Preview lines: what moves for each placement of `next`.
fn moves_of(
    next: &LayoutVersion,
    moved: &std::collections::BTreeMap<Placement, usize>,
) -> Vec<String> {
    moved
        .iter()
        .map(|(p, n)| {
            let users = next.users_of(*p);
            let total = garage_rpc::layout::PARTITIONS * p.shards();
            let what = if users.is_empty() {
                next.ring_of(*p)
                    .map(ring_name)
                    .unwrap_or_else(|| p.describe())
            } else {
                format!("storage class {} ({})", users.join(", "), p.describe())
            };
            let unit = if p.is_replication() {
                "copies"
            } else {
                "shards"
            };
            format!(
                "Block {unit} of {what} that move to a new node: {n} of {total} ({:.1} % of its data).",
                *n as f64 * 100.0 / total as f64
            )
        })
        .collect()
}

fn layout_response(layout: &LayoutHistory) -> GetClusterLayoutResponse {
    let current = layout.current();
    let roles = roles_of(current);
    let staged_role_changes = layout
        .staging
        .roles
        .items()
        .filter(|(id, _, role)| current.roles.get(id) != role.as_ref())
        .map(|(id, _, role)| match role {
            Some(r) => NodeRoleChange {
                id: id.to_string(),
                remove: None,
                zone: Some(r.zone.clone()),
                capacity: r.capacity,
                tags: Some(r.tags.clone()),
            },
            None => NodeRoleChange {
                id: id.to_string(),
                remove: Some(true),
                zone: None,
                capacity: None,
                tags: None,
            },
        })
        .collect();
    let staged = layout.staging.parameters.get();
    GetClusterLayoutResponse {
        version: current.version,
        roles,
        partition_size: current.partition_size,
        parameters: (&current.parameters).into(),
        storage_classes: classes_of(current),
        kept_codes: kept_codes(current),
        staged_role_changes,
        staged_parameters: (*staged != current.parameters).then(|| staged.into()),
    }
}

/// The current layout and the changes staged for the next one.
pub fn get_cluster_layout(system: &System) -> Result<GetClusterLayoutResponse, ApiError> {
    Ok(layout_response(&system.layout()))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateClusterLayoutRequest {
    #[serde(default)]
    pub roles: Vec<NodeRoleChange>,
    #[serde(default)]
    pub parameters: Option<ApiLayoutParameters>,
}

fn layout_error(e: SystemError) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

/// Stages role changes and/or new parameters; apply them with
/// ApplyClusterLayout.
pub fn update_cluster_layout(
    system: &System,
    req: UpdateClusterLayoutRequest,
) -> Result<GetClusterLayoutResponse, ApiError> {
    let status = system.cluster_status();
    let mut changes = Vec::with_capacity(req.roles.len());
    for c in req.roles {
        let id = find_node(&status, &c.id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let role = match (c.remove, c.zone) {
            (Some(true), None) => None,
            (Some(true), Some(_)) => {
                return Err(ApiError::bad(format!(
                    "node {}: give either \"remove\": true or a zone, not both",
                    c.id
                )))
            }
            (_, Some(zone)) => {
                if zone.is_empty() {
                    return Err(ApiError::bad(format!("node {}: empty zone", c.id)));
                }
                if c.capacity == Some(0) {
                    return Err(ApiError::bad(format!(
                        "node {}: a capacity must be more than 0 (null for a gateway node)",
                        c.id
                    )));
                }
                Some(NodeRole {
                    zone,
                    capacity: c.capacity,
                    tags: c.tags.unwrap_or_default(),
                })
            }
            (_, None) => {
                return Err(ApiError::bad(format!(
                "node {}: give a zone (and a capacity, or null for a gateway), or \"remove\": true",
                c.id
            )))
            }
        };
        changes.push((id, role));
    }
    if !changes.is_empty() {
        system
            .update_layout(LayoutUpdate::StageRoles(changes))
            .map_err(layout_error)?;
    }
    if let Some(p) = req.parameters {
        let zone_redundancy = match p.zone_redundancy {
            ApiZoneRedundancy::Maximum => ZoneRedundancy::Maximum,
            ApiZoneRedundancy::AtLeast(n) if n >= 1 => ZoneRedundancy::AtLeast(n),
            ApiZoneRedundancy::AtLeast(_) => {
                return Err(ApiError::bad("zoneRedundancy: atLeast must be 1 or more"))
            }
        };
        let mut params = system.layout().staging.parameters.get().clone();
        params.zone_redundancy = zone_redundancy;
        for (name, spec) in p.storage_classes.iter() {
            let (name, spec) =
                garage_rpc::layout::classes::parse_class_setting(&format!("{name}={spec}"))
                    .map_err(|e| ApiError::bad(format!("storageClasses: {e}")))?;
            params.class_defs.remove(&name);
            params.storage_classes.insert(name, spec);
        }
        for (name, d) in p.class_definitions.iter() {
            if d.remove == Some(true) {
                if params.class_defs.remove(name).is_none() {
                    return Err(ApiError::bad(format!(
                        "classDefinitions: there is no storage class with a place named {name}"
                    )));
                }
                continue;
            }
            let def = d
                .to_def(name)
                .map_err(|e| ApiError::bad(format!("classDefinitions: {e}")))?;
            params.storage_classes.remove(name);
            params.class_defs.insert(name.clone(), def);
        }
        system
            .update_layout(LayoutUpdate::StageParameters(params))
            .map_err(layout_error)?;
    }
    Ok(layout_response(&system.layout()))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyClusterLayoutRequest {
    /// The new version: the current one plus one, as GetClusterLayout
    /// shows (so that what is applied is what was reviewed).
    pub version: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyClusterLayoutResponse {
    /// What changed, in words.
    pub message: Vec<String>,
    pub layout: GetClusterLayoutResponse,
}

/// Applies the staged changes as a new layout version.
pub fn apply_cluster_layout(
    system: &System,
    req: ApplyClusterLayoutRequest,
) -> Result<ApplyClusterLayoutResponse, ApiError> {
    // The same computation as the apply, for the message.
    let report = system.layout().preview().ok().map(|(_, r)| r);
    system
        .update_layout(LayoutUpdate::Apply {
            version: req.version,
        })
        .map_err(layout_error)?;
    let layout = system.layout();
    let mut message = vec![format!(
        "New cluster layout version {} applied.",
        layout.current().version
    )];
    if let Some(r) = report {
        message.push(format!(
            "Partitions are replicated over {} distinct zones at least.",
            r.zone_redundancy
        ));
        message.push(format!(
            "Optimal partition size: {} bytes.",
            r.partition_size
        ));
        message.push(format!(
            "Partition copies that move to a new node: {}.",
            r.moved
        ));
        message.extend(moves_of(layout.current(), &r.shards_moved));
    }
    Ok(ApplyClusterLayoutResponse {
        message,
        layout: layout_response(&layout),
    })
}

/// Drops every staged change.
pub fn revert_cluster_layout(system: &System) -> Result<GetClusterLayoutResponse, ApiError> {
    system
        .update_layout(LayoutUpdate::Revert)
        .map_err(layout_error)?;
    Ok(layout_response(&system.layout()))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetClusterLayoutHistoryResponse {
    pub current_version: u64,
    /// The oldest version still written to.
    pub min_ack: u64,
    /// The version reads use, as the nodes see it with majority writes
    /// (garage's own).
    #[serde(default)]
    pub read_version: u64,
    /// Versions this node keeps, newest first.
    pub versions: Vec<ClusterLayoutVersion>,
    /// Per node: the newest version it acknowledged, synced, and saw every
    /// node sync. Present while a layout change is in progress.
    pub update_trackers: Option<std::collections::BTreeMap<String, NodeUpdateTrackers>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLayoutVersion {
    pub version: u64,
    /// `Current`, `Draining` (still written to) or `Historical`.
    pub status: String,
    pub storage_nodes: usize,
    pub gateway_nodes: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeUpdateTrackers {
    pub ack: u64,
    pub sync: u64,
    pub sync_ack: u64,
}

/// The layout versions this node keeps and, during a change, how far each
/// node is with it.
pub fn get_cluster_layout_history(
    system: &System,
) -> Result<GetClusterLayoutHistoryResponse, ApiError> {
    let layout = system.layout();
    let current = layout.current().version;
    let min_live = layout.min_live_version();
    let versions = layout
        .versions
        .iter()
        .rev()
        .map(|v| ClusterLayoutVersion {
            version: v.version,
            status: version_status(v, current, min_live).into(),
            storage_nodes: v.storage_nodes.len(),
            gateway_nodes: v.roles.len() - v.storage_nodes.len(),
        })
        .collect();
    // One live version: every node has seen it synced.
    let stable = min_live == current;
    let update_trackers = (!stable).then(|| {
        layout
            .tracked_nodes()
            .into_iter()
            .map(|n| {
                (
                    n.to_string(),
                    NodeUpdateTrackers {
                        ack: layout.trackers.get(Tracker::Ack, &n),
                        sync: layout.trackers.get(Tracker::Sync, &n),
                        sync_ack: layout.trackers.get(Tracker::SyncAck, &n),
                    },
                )
            })
            .collect()
    });
    Ok(GetClusterLayoutHistoryResponse {
        current_version: current,
        min_ack: min_live,
        read_version: layout
            .read_version(layout.current().replication_factor / 2 + 1)
            .version,
        versions,
        update_trackers,
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewClusterLayoutChangesResponse {
    /// What applying would change, in words.
    pub message: Vec<String>,
    /// The layout that ApplyClusterLayout would make (its version is the
    /// one to give it).
    pub new_layout: GetClusterLayoutResponse,
}

/// Computes the layout the staged changes would make, without applying it.
pub fn preview_cluster_layout_changes(
    system: &System,
) -> Result<PreviewClusterLayoutChangesResponse, ApiError> {
    let layout = system.layout();
    let shown = layout_response(&layout);
    if shown.staged_role_changes.is_empty() && shown.staged_parameters.is_none() {
        return Err(ApiError::bad(
            "no changes are staged: stage some with UpdateClusterLayout first",
        ));
    }
    let (next, report) = layout
        .preview()
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let message = vec![
        format!(
            "Partitions are replicated over {} distinct zones at least.",
            report.zone_redundancy
        ),
        format!("Optimal partition size: {} bytes.", report.partition_size),
        format!(
            "Partition copies that move to a new node: {}.",
            report.moved
        ),
    ]
    .into_iter()
    .chain(moves_of(&next, &report.shards_moved))
    .collect();
    Ok(PreviewClusterLayoutChangesResponse {
        message,
        new_layout: GetClusterLayoutResponse {
            version: next.version,
            roles: roles_of(&next),
            partition_size: next.partition_size,
            parameters: (&next.parameters).into(),
            storage_classes: classes_of(&next),
            kept_codes: kept_codes(&next),
            staged_role_changes: vec![],
            staged_parameters: None,
        },
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLayoutSkipDeadNodesRequest {
    /// The layout version the trackers of the nodes that are down move to
    /// (the current one, usually).
    pub version: u64,
    /// Also count them as synced, which may lose the data only they held:
    /// for nodes that are gone for good.
    #[serde(default)]
    pub allow_missing_data: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLayoutSkipDeadNodesResponse {
    /// Nodes whose ack tracker moved.
    pub ack_updated: Vec<String>,
    /// Nodes whose sync tracker moved.
    pub sync_updated: Vec<String>,
}

/// Moves the update trackers of the nodes that are down to `version`, so
/// that a layout change completes without them (`garage layout
/// skip-dead-nodes`).
pub fn cluster_layout_skip_dead_nodes(
    system: &System,
    req: ClusterLayoutSkipDeadNodesRequest,
) -> Result<ClusterLayoutSkipDeadNodesResponse, ApiError> {
    let trackers = |t: Tracker| {
        let l = system.layout();
        l.tracked_nodes()
            .into_iter()
            .map(|n| (n, l.trackers.get(t, &n)))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (ack0, sync0) = (trackers(Tracker::Ack), trackers(Tracker::Sync));
    system
        .update_layout(LayoutUpdate::SkipDeadNodes {
            version: req.version,
            allow_missing_data: req.allow_missing_data,
        })
        .map_err(layout_error)?;
    let moved = |before: std::collections::BTreeMap<_, u64>, t: Tracker| {
        trackers(t)
            .into_iter()
            .filter(|(n, v)| before.get(n) != Some(v))
            .map(|(n, _)| n.to_string())
            .collect()
    };
    Ok(ClusterLayoutSkipDeadNodesResponse {
        ack_updated: moved(ack0, Tracker::Ack),
        sync_updated: moved(sync0, Tracker::Sync),
    })
}
