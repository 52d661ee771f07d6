//! Node-local operations: node info and statistics, repairs, background
//! workers, blocks, metadata snapshots. The admin API runs them on the
//! nodes its `?node=` names; the CLI on the node it reached.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::blocks::{self, BlockRepair};
use super::error::ApiError;
use super::repair::TableRepair;
use super::stats::{self, NodeStats};
use garage_model::garage::Garage;

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
    GetNodeMetricsHistory,
    /// What the node stores by storage class (its last census); not
    /// served by nodes of v0.3.0 and earlier.
    GetNodeStorage,
    /// The events this node's notification outbox holds, per topic; not
    /// served by nodes of earlier releases.
    GetNotificationBacklog,
    /// The versions this node's replication queue holds, per destination;
    /// not served by nodes of earlier releases.
    GetReplicationBacklog,
}

/// The answer to a [`NodeRequest`], one variant per request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NodeResponse {
    NodeInfo(NodeInfo),
    Statistics(NodeStatistics),
    RepairLaunched(RepairLaunched),
    Workers(Vec<WorkerInfo>),
    Worker(WorkerInfo),
    BlockErrors(Vec<BlockError>),
    Block(BlockInfo),
    Retried(RetryBlockResyncResponse),
    Purged(PurgeBlocksResponse),
    Variables(BTreeMap<String, String>),
    VariableSet(SetWorkerVariableResponse),
    Snapshot(MetadataSnapshot),
    MetricsHistory(super::history::MetricsHistory),
    Storage(stats::NodeStorage),
    NotificationBacklog(Vec<super::topic::TopicBacklog>),
    ReplicationBacklog(Vec<super::remote::ReplicationBacklog>),
}

/// The answers of a node-local operation run on several nodes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MultiResponse<T> {
    /// Node id -> result, for the nodes that answered.
    pub success: BTreeMap<String, T>,
    /// Node id -> error message, for the others.
    pub error: BTreeMap<String, String>,
}

impl MultiResponse<NodeResponse> {
    /// The answers as `T`; a node that answered something else is an
    /// error.
    pub fn pick<T: NodeAnswer>(self) -> MultiResponse<T> {
        let mut error = self.error;
        let mut success = BTreeMap::new();
        for (id, r) in self.success {
            match T::pick(r.with_text()) {
                Some(v) => {
                    success.insert(id, v);
                }
                None => {
                    error.insert(id, "the node answered another operation".into());
                }
            }
        }
        MultiResponse { success, error }
    }
}

impl NodeResponse {
    /// With the text fields of the reference system's answers
    /// (`freeform`) made from the typed fields: done where an answer is
    /// shown (the HTTP API, `json-api`), never sent over the RPC.
    pub fn with_text(self) -> Self {
        match self {
            Self::Statistics(s) => Self::Statistics(s.with_text()),
            Self::Workers(w) => Self::Workers(w.into_iter().map(WorkerInfo::with_text).collect()),
            Self::Worker(w) => Self::Worker(w.with_text()),
            other => other,
        }
    }
}

/// An answer type of [`NodeResponse`]: the HTTP API picks its variant out.
pub trait NodeAnswer: Sized {
    fn pick(r: NodeResponse) -> Option<Self>;
}

macro_rules! node_answer {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl NodeAnswer for $t {
            fn pick(r: NodeResponse) -> Option<Self> {
                match r {
                    NodeResponse::$v(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}

node_answer!(
    NodeInfo => NodeInfo,
    NodeStatistics => Statistics,
    RepairLaunched => RepairLaunched,
    Vec<WorkerInfo> => Workers,
    WorkerInfo => Worker,
    Vec<BlockError> => BlockErrors,
    BlockInfo => Block,
    RetryBlockResyncResponse => Retried,
    PurgeBlocksResponse => Purged,
    BTreeMap<String, String> => Variables,
    SetWorkerVariableResponse => VariableSet,
    MetadataSnapshot => Snapshot,
    super::history::MetricsHistory => MetricsHistory,
    stats::NodeStorage => Storage,
    Vec<super::topic::TopicBacklog> => NotificationBacklog,
    Vec<super::remote::ReplicationBacklog> => ReplicationBacklog,
);

/// Runs a node-local operation on this node.
pub async fn run(g: &Arc<Garage>, req: NodeRequest) -> Result<NodeResponse, ApiError> {
    use NodeResponse as A;
    Ok(match req {
        NodeRequest::GetNodeInfo => A::NodeInfo(NodeInfo {
            node_id: g.system.id().to_string(),
            garage_version: env!("CARGO_PKG_VERSION").into(),
            garage_features: None,
            db_engine: g.db.engine().to_string(),
            peer_rtt_ms: g
                .system
                .cluster_status()
                .nodes
                .iter()
                .filter(|n| n.id != g.system.id())
                .filter_map(|n| Some((n.id.to_string(), n.rtt_ms?)))
                .collect(),
        }),
        NodeRequest::GetNodeMetricsHistory => A::MetricsHistory(super::history::history()),
        NodeRequest::GetNodeStorage => A::Storage(stats::node_storage(g)),
        NodeRequest::GetNotificationBacklog => {
            A::NotificationBacklog(super::topic::node_backlog(g))
        }
        NodeRequest::GetReplicationBacklog => A::ReplicationBacklog(super::remote::node_backlog(g)),
        NodeRequest::GetNodeStatistics => {
            let stats = stats::node_stats(g).await;
            let stats = stats.map_err(ApiError::Internal)?;
            A::Statistics(NodeStatistics::of(&stats))
        }
        NodeRequest::LaunchRepairOperation(r) => A::RepairLaunched(RepairLaunched {
            detail: Some(launch_repair(g, r.repair_type).await?),
        }),
        NodeRequest::ListWorkers(r) => {
            let all = worker_list(g).await?;
            A::Workers(
                all.into_iter()
                    .filter(|w| {
                        !r.busy_only
                            || matches!(w.state, WorkerState::Busy | WorkerState::Throttled)
                    })
                    .filter(|w| !r.error_only || w.consecutive_errors > 0)
                    .collect(),
            )
        }
        NodeRequest::GetWorkerInfo(r) => match worker_info(g, r.id).await? {
            Some(w) => A::Worker(w),
            None => {
                let ids: Vec<String> = worker_list(g)
                    .await?
                    .iter()
                    .map(|w| w.id.to_string())
                    .collect();
                return Err(ApiError::NoSuchWorker(format!(
                    "no worker {} on this node (its workers are {}; see `garage worker list`)",
                    r.id,
                    ids.join(", ")
                )));
            }
        },
        NodeRequest::GetWorkerVariable(r) => {
            let vars = g
                .system
                .workers
                .variables(r.variable.as_deref())
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            A::Variables(vars.into_iter().collect())
        }
        NodeRequest::SetWorkerVariable(r) => {
            let value = g
                .system
                .workers
                .set_variable(&r.variable, &r.value)
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            tracing::info!("admin: worker variable {} set to {value}", r.variable);
            A::VariableSet(SetWorkerVariableResponse {
                variable: r.variable,
                value,
            })
        }
        NodeRequest::CreateMetadataSnapshot => {
            let (db, dir) = (g.db.clone(), g.metadata_snapshots_dir.clone());
            let path = tokio::task::spawn_blocking(move || stats::snapshot_metadata(&db, &dir))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .map_err(|e| ApiError::Internal(format!("{e:#}")))?;
            tracing::info!("metadata snapshot written to {}", path.display());
            A::Snapshot(MetadataSnapshot {
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
            A::BlockErrors(out)
        }
        NodeRequest::GetBlockInfo(r) => {
            let h = blocks::parse_hash(&r.block_hash).map_err(ApiError::BadRequest)?;
            let rc = refcount(g, &h)?;
            let refs = blocks::block_refs(g, &h)
                .await
                .map_err(ApiError::Internal)?;
            let stored = g.block_manager.store.find(&h);
            if refs.is_empty() && rc == 0 && stored.is_none() {
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
            A::Block(BlockInfo {
                block_hash: h.hex(),
                refcount: rc,
                stored_here: stored.map(|(path, zstd)| {
                    format!(
                        "{} ({})",
                        path.display(),
                        if zstd { "zstd" } else { "plain" }
                    )
                }),
                versions,
            })
        }
        NodeRequest::RetryBlockResync(r) => {
            let n = match (r.all, r.block_hashes) {
                (Some(true), None) => blocks::retry_now(&g.block_manager, true, &[]),
                (None | Some(false), Some(hashes)) if !hashes.is_empty() => {
                    blocks::retry_now(&g.block_manager, false, &hashes)
                }
                _ => {
                    return Err(ApiError::bad(
                        "give either \"all\": true or a non-empty \"blockHashes\" list",
                    ))
                }
            }
            .map_err(ApiError::BadRequest)?;
            A::Retried(RetryBlockResyncResponse { count: n as u64 })
        }
        NodeRequest::PurgeBlocks(hashes) => {
            if hashes.is_empty() {
                return Err(ApiError::bad("give the hashes of the blocks to purge"));
            }
            let hashes = hashes
                .iter()
                .map(|h| blocks::parse_hash(h))
                .collect::<Result<Vec<_>, _>>()
                .map_err(ApiError::BadRequest)?;
            let c = blocks::purge_blocks(g, &hashes)
                .await
                .map_err(ApiError::Internal)?;
            A::Purged(PurgeBlocksResponse {
                blocks_purged: hashes.len() as u64,
                objects_deleted: c.objects_deleted as u64,
                uploads_deleted: c.uploads_aborted as u64,
                versions_deleted: c.versions as u64,
                versions_locked: c.locked as u64,
            })
        }
    })
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    pub node_id: String,
    pub garage_version: String,
    /// Optional features this build has (none in this version).
    pub garage_features: Option<Vec<String>>,
    /// `lmdb` or `sqlite`.
    pub db_engine: String,
    /// The round-trip time of this node's last ping to each connected
    /// peer (by node id), in milliseconds (garage's own field).
    #[serde(default)]
    pub peer_rtt_ms: BTreeMap<String, f64>,
}

// ---- GetNodeStatistics ----

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatistics {
    /// What `garage stats` prints: filled in by the admin API from the
    /// fields ([`NodeStatistics::with_text`]); empty over the RPC.
    #[serde(default)]
    pub freeform: String,
    /// The same, as fields (garage's own).
    #[serde(default)]
    pub node: String,
    #[serde(default)]
    pub db_engine: String,
    #[serde(default)]
    pub tables: Vec<TableStatistics>,
    /// Blocks with a reference count entry.
    #[serde(default)]
    pub block_rc_entries: u64,
    #[serde(default)]
    pub resync_queue: u64,
    /// Resync queue entries due now (counted up to 100 000).
    #[serde(default)]
    pub resync_due: u64,
    /// How long the oldest entry due now has been due, in ms (0: none):
    /// every entry queued longer ago was handled.
    #[serde(default)]
    pub resync_lag_ms: u64,
    /// Blocks whose resync failed.
    #[serde(default)]
    pub resync_errors: u64,
    /// Free space of the data volume(s), in bytes.
    #[serde(default)]
    pub data_space: Option<SpaceStatistics>,
    #[serde(default)]
    pub metadata_space: Option<SpaceStatistics>,
    /// The cluster's health as this node sees it.
    #[serde(default)]
    pub health: Option<super::cluster::GetClusterHealthResponse>,
    /// Totals of the node's metric counters since it started, by name
    /// (summed over their labels).
    #[serde(default)]
    pub counters: BTreeMap<String, f64>,
    /// What the node stores by storage class.
    #[serde(default)]
    pub storage: stats::NodeStorage,
}

/// One table of a node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableStatistics {
    pub name: String,
    /// Entries in the local store (tombstones included).
    pub items: u64,
    pub merkle_nodes: u64,
    /// Entries whose Merkle tree update is pending.
    pub merkle_todo: u64,
    /// Tombstones waiting for collection.
    pub gc_todo: u64,
    /// Entries queued for a write to other nodes.
    pub insert_queue: u64,
    /// Hash of the table's Merkle roots (hexadecimal): equal on two nodes
    /// holding the same partitions exactly when their entries are equal.
    pub merkle_digest: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpaceStatistics {
    pub available: u64,
    pub total: u64,
}

impl NodeStatistics {
    fn of(stats: &NodeStats) -> Self {
        let space = |f: &Option<garage_rpc::system::status::FreeSpace>| {
            f.as_ref().map(|f| SpaceStatistics {
                available: f.available,
                total: f.total,
            })
        };
        NodeStatistics {
            freeform: String::new(),
            node: stats.node.to_string(),
            db_engine: stats.db_engine.clone(),
            tables: stats
                .tables
                .iter()
                .map(|t| TableStatistics {
                    name: t.name.clone(),
                    items: t.items as u64,
                    merkle_nodes: t.merkle_nodes as u64,
                    merkle_todo: t.merkle_todo as u64,
                    gc_todo: t.gc_todo as u64,
                    insert_queue: t.insert_queue as u64,
                    merkle_digest: t.merkle_digest.hex(),
                })
                .collect(),
            block_rc_entries: stats.block_rc_entries as u64,
            resync_queue: stats.resync_queue as u64,
            resync_due: stats.resync_due as u64,
            resync_lag_ms: stats.resync_lag_ms,
            resync_errors: stats.resync_errors as u64,
            data_space: space(&stats.data_space),
            metadata_space: space(&stats.metadata_space),
            health: stats.health.as_ref().map(super::cluster::health_of),
            counters: stats.counters.clone(),
            storage: stats.storage.clone(),
        }
    }

    /// With `freeform`, the text `garage stats` prints.
    pub fn with_text(mut self) -> Self {
        self.freeform = format_stats(&self);
        self
    }
}

/// The files a node stores by storage class, as `garage stats` prints
/// them (empty before the node's first census).
pub fn format_storage(s: &stats::NodeStorage) -> String {
    use std::fmt::Write;
    let Some(age) = s.census_age_secs else {
        return String::new();
    };
    let b = |n: u64| bytesize::ByteSize::b(n).display().si().to_string();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  block files by storage class (counted {age} s ago, layout v{}):",
        s.layout_version
    );
    let mut rows = vec!["    Class\tRedundancy\tFiles\tOn disk\tTo hand over".to_string()];
    for c in &s.classes {
        rows.push(format!(
            "    {}\t{}\t{}\t{}\t{} ({})",
            c.class,
            c.redundancy,
            c.files,
            b(c.bytes),
            c.to_hand_over_files,
            b(c.to_hand_over_bytes)
        ));
    }
    out.push_str(&crate::columns::format(&rows));
    out
}

/// What `garage stats` prints for one node (and GetNodeStatistics
/// answers as `freeform`).
pub fn format_stats(stats: &NodeStatistics) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "Node: {}", stats.node);
    let _ = writeln!(out, "Database engine: {}", stats.db_engine);
    let _ = writeln!(out);
    let _ = writeln!(out, "Table stats:");
    let mut rows =
        vec!["  Table\tItems\tMklItems\tMklTodo\tGcTodo\tInsertQueue\tMerkleDigest".to_string()];
    for t in stats.tables.iter() {
        rows.push(format!(
            "  {}\t{}\t{}\t{}\t{}\t{}\t{}",
            t.name,
            t.items,
            t.merkle_nodes,
            t.merkle_todo,
            t.gc_todo,
            t.insert_queue,
            t.merkle_digest.get(..16).unwrap_or(&t.merkle_digest)
        ));
    }
    out.push_str(&crate::columns::format(&rows));
    let _ = writeln!(out);
    let _ = writeln!(out, "Block manager stats:");
    let _ = writeln!(
        out,
        "  number of referenced blocks (RC): {}",
        stats.block_rc_entries
    );
    let _ = writeln!(out, "  resync queue length: {}", stats.resync_queue);
    let due = match stats.resync_due {
        n if n >= stats::DUE_COUNT_MAX as u64 => format!("at least {n}"),
        n => n.to_string(),
    };
    let _ = writeln!(out, "  resync queue due now: {due}");
    let _ = writeln!(
        out,
        "  resync lag (oldest entry due for): {:.1} s",
        stats.resync_lag_ms as f64 / 1000.0
    );
    let _ = writeln!(out, "  blocks with resync errors: {}", stats.resync_errors);
    let space = |f: &Option<SpaceStatistics>| match f {
        Some(f) => format!(
            "{} free of {} in total",
            bytesize::ByteSize::b(f.available).display().si(),
            bytesize::ByteSize::b(f.total).display().si()
        ),
        None => "unknown".into(),
    };
    let _ = writeln!(out);
    let _ = writeln!(out, "Storage:");
    let _ = writeln!(out, "  data: {}", space(&stats.data_space));
    let _ = writeln!(out, "  metadata: {}", space(&stats.metadata_space));
    out.push_str(&format_storage(&stats.storage));
    if let Some(h) = &stats.health {
        let _ = writeln!(out);
        out.push_str(&super::cluster::format_health(h));
    }
    if !stats.counters.is_empty() {
        // The same counters `/metrics` shows, summed over their labels.
        let c = |name: &str| stats.counters.get(name).copied().unwrap_or(0.0) as u64;
        let _ = writeln!(out);
        let _ = writeln!(out, "Since this node started (the counters of /metrics):");
        let _ = writeln!(
            out,
            "  S3 requests: {} ({} errors)",
            c("api_s3_requests_total"),
            c("api_s3_errors_total")
        );
        let _ = writeln!(
            out,
            "  RPC calls: {} ({} timeouts, {} communication errors)",
            c("rpc_requests_total"),
            c("rpc_timeouts_total"),
            c("rpc_netapp_errors_total")
        );
        let _ = writeln!(
            out,
            "  quorum failures: {} table, {} block",
            c("table_quorum_errors_total"),
            c("block_quorum_errors_total")
        );
        let _ = writeln!(
            out,
            "  block bytes read: {}, written: {}",
            c("block_bytes_read_total"),
            c("block_bytes_written_total")
        );
        let _ = writeln!(
            out,
            "  table entries sent by sync: {}",
            c("table_sync_items_sent_total")
        );
    }
    out
}

// ---- LaunchRepairOperation ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaunchRepairOperationRequest {
    pub repair_type: RepairType,
}

/// `"tables"`, `"blocks"`, `"rebalance"`, `"blockRc"`, `"versions"`,
/// `"multipartUploads"`, `"blockRefs"`, `"aliases"`, or `{"scrub": "start" |
/// "pause" | "resume" | "cancel"}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum RepairType {
    Tables,
    Blocks,
    Rebalance,
    /// Recount every block's references (`blockRc`).
    BlockRc,
    /// Delete versions that no object or upload lists (see
    /// [`crate::ops::repair`]); runs in the background.
    Versions,
    /// Delete uploads whose object version is no longer uploading.
    MultipartUploads,
    /// Delete block references of deleted versions.
    BlockRefs,
    /// Make bucket aliases agree between buckets, keys and the alias table.
    Aliases,
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RepairLaunched {
    /// What it did or started, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Starts a repair; what it did, in words.
async fn launch_repair(g: &Arc<Garage>, r: RepairType) -> Result<String, ApiError> {
    let what = match r {
        RepairType::Tables => {
            stats::repair_tables(g);
            return Ok(
                "every table is being synced with the other nodes (see the node's log)".into(),
            );
        }
        RepairType::Versions => return table_repair(g, TableRepair::Versions),
        RepairType::MultipartUploads => return table_repair(g, TableRepair::Mpu),
        RepairType::BlockRefs => return table_repair(g, TableRepair::BlockRefs),
        RepairType::Aliases => return table_repair(g, TableRepair::Aliases),
        RepairType::Blocks => BlockRepair::Blocks,
        RepairType::Rebalance => BlockRepair::Rebalance,
        RepairType::BlockRc => BlockRepair::BlockRc,
        RepairType::Scrub(ScrubCommand::Start) => BlockRepair::ScrubStart,
        RepairType::Scrub(ScrubCommand::Pause) => BlockRepair::ScrubPause,
        RepairType::Scrub(ScrubCommand::Resume) => BlockRepair::ScrubResume,
        RepairType::Scrub(ScrubCommand::Cancel) => BlockRepair::ScrubCancel,
    };
    let text = blocks::repair(g, what)
        .await
        .map_err(ApiError::BadRequest)?;
    tracing::info!("admin: repair: {text}");
    Ok(text)
}

fn table_repair(g: &Arc<Garage>, what: TableRepair) -> Result<String, ApiError> {
    let text = super::repair::launch(g, what).map_err(ApiError::BadRequest)?;
    tracing::info!("admin: repair: {text}");
    Ok(text)
}

// ---- Workers ----

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListWorkersRequest {
    /// Only the workers that have work now (busy or throttled).
    #[serde(default)]
    pub busy_only: bool,
    /// Only the workers whose last step failed.
    #[serde(default)]
    pub error_only: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerInfo {
    /// Its number (TID), from 1, in the order the workers registered; a
    /// worker that stops (a resync worker when the count is lowered) takes
    /// its number with it.
    pub id: u64,
    pub name: String,
    pub state: WorkerState,
    /// Steps that failed since the node started.
    pub errors: u64,
    /// Steps that failed since the last one that worked.
    pub consecutive_errors: u64,
    pub last_error: Option<WorkerLastError>,
    /// Where it is in its work, in words.
    pub progress: Option<String>,
    pub queue_length: Option<u64>,
    /// What it does (garage's own).
    #[serde(default)]
    pub does: String,
    /// Its settings and counters, by name (garage's own).
    #[serde(default)]
    pub details: Vec<WorkerDetail>,
    /// What it does, then its settings and counters, one per line, as the
    /// reference answers: filled in where the answer is shown
    /// ([`NodeResponse::with_text`]), empty over the RPC.
    #[serde(default)]
    pub freeform: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerDetail {
    pub name: String,
    pub value: String,
}

impl WorkerInfo {
    /// With `freeform` made from `does` and `details`.
    pub fn with_text(mut self) -> Self {
        self.freeform = std::iter::once(format!("Does: {}", self.does))
            .chain(
                self.details
                    .iter()
                    .map(|d| format!("{}: {}", d.name, d.value)),
            )
            .collect();
        self
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerLastError {
    pub message: String,
    pub secs_ago: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum WorkerState {
    /// Working through its queue.
    Busy,
    /// Waiting between two steps (its tranquility).
    Throttled,
    /// Nothing to do now.
    Idle,
    /// Stopped by an operator (scrub pause).
    Paused,
}

impl From<garage_util::worker::WorkerState> for WorkerState {
    fn from(s: garage_util::worker::WorkerState) -> Self {
        use garage_util::worker::WorkerState as S;
        match s {
            S::Busy => WorkerState::Busy,
            S::Throttled => WorkerState::Throttled,
            S::Idle => WorkerState::Idle,
            S::Paused => WorkerState::Paused,
        }
    }
}

impl From<garage_util::worker::WorkerInfo> for WorkerInfo {
    fn from(w: garage_util::worker::WorkerInfo) -> Self {
        let now = garage_util::time::now_msec();
        WorkerInfo {
            id: w.tid,
            name: w.name,
            state: w.state.into(),
            errors: w.errors,
            consecutive_errors: w.consecutive_errors,
            last_error: w.last_error.map(|(message, at)| WorkerLastError {
                message,
                secs_ago: now.saturating_sub(at) / 1000,
            }),
            progress: w.progress,
            queue_length: w.queue_length,
            does: w.does.to_string(),
            details: w
                .details
                .into_iter()
                .map(|(name, value)| WorkerDetail { name, value })
                .collect(),
            freeform: vec![],
        }
    }
}

/// The node's workers, from its worker registry (whose queue probes read
/// the database: run off the async runtime).
async fn worker_list(g: &Arc<Garage>) -> Result<Vec<WorkerInfo>, ApiError> {
    let g = g.clone();
    let list = tokio::task::spawn_blocking(move || g.system.workers.list())
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(list.into_iter().map(WorkerInfo::from).collect())
}

async fn worker_info(g: &Arc<Garage>, tid: u64) -> Result<Option<WorkerInfo>, ApiError> {
    let g = g.clone();
    let w = tokio::task::spawn_blocking(move || g.system.workers.get(tid))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(w.map(WorkerInfo::from))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GetWorkerInfoRequest {
    pub id: u64,
}

// ---- Blocks ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockError {
    pub block_hash: String,
    pub refcount: u64,
    pub error_count: u64,
    pub last_try_secs_ago: u64,
    pub next_try_in_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBlockInfoRequest {
    pub block_hash: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockInfo {
    pub block_hash: String,
    pub refcount: u64,
    /// The block's file on this node (and `zstd` or `plain`), if it holds
    /// one.
    #[serde(default)]
    pub stored_here: Option<String>,
    /// Versions that reference the block.
    pub versions: Vec<BlockVersion>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum BlockVersionBacklink {
    #[serde(rename_all = "camelCase")]
    Object { bucket_id: String, key: String },
    #[serde(rename_all = "camelCase")]
    Upload { upload_id: String },
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryBlockResyncResponse {
    /// Blocks queued for a resync now.
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
