//! A node's statistics ([`NodeStats`], shown by `garage stats`, `garage
//! worker` and the gauges), table repair, metadata snapshots.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use garage_db::Db;
use garage_net::NodeId;
use garage_table::TableStats;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use garage_model::garage::Garage;

/// Where [`node_stats`] reads the totals of the node's metric counters:
/// set by the binary, which owns the metrics recorder.
pub static COUNTER_TOTALS: std::sync::OnceLock<fn() -> std::collections::BTreeMap<String, f64>> =
    std::sync::OnceLock::new();

/// How many metadata snapshots are kept.
const SNAPSHOTS_KEPT: usize = 2;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStats {
    pub node: NodeId,
    pub db_engine: String,
    pub tables: Vec<TableStats>,
    /// Blocks with a reference count entry, resync queue length, blocks
    /// whose resync failed.
    pub block_rc_entries: usize,
    pub resync_queue: usize,
    /// Queue entries due now (the rest are deletions waiting for their
    /// delay and failed blocks waiting for their retry), counted up to
    /// [`DUE_COUNT_MAX`].
    #[serde(default)]
    pub resync_due: usize,
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
    /// How long the oldest queue entry due now has been due, in ms (0:
    /// none is due): how far the resync is behind. Every entry queued
    /// longer ago than this was handled (the queue runs in due order).
    #[serde(default)]
    pub resync_lag_ms: u64,
    /// What the node stores by storage class, from its last census.
    #[serde(default)]
    pub storage: NodeStorage,
}

/// What a node stores, by storage class: its last census of its data
/// directories (`garage_block::census`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStorage {
    /// How long ago the census was taken, in seconds (`None`: no census
    /// yet since the node started).
    #[serde(default)]
    pub census_age_secs: Option<u64>,
    /// The layout version it was taken against.
    #[serde(default)]
    pub layout_version: u64,
    /// One row per class and redundancy (a class whose redundancy changed
    /// has a row for the blocks stored under the old one).
    #[serde(default)]
    pub classes: Vec<ClassStorage>,
}

/// A storage class's files on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassStorage {
    pub class: String,
    /// `replication 2`, `erasure 4+2`.
    pub redundancy: String,
    /// Block or shard files, and their bytes on disk.
    pub files: u64,
    pub bytes: u64,
    /// Of those, the ones held outside every live layout version: what is
    /// left of a move on this node.
    pub to_hand_over_files: u64,
    pub to_hand_over_bytes: u64,
}

/// The name of the class(es) whose blocks follow `p` in layout version
/// `v`: for a placed class, the class of its scope (also for blocks kept
/// under its former redundancy).
fn class_name(v: &garage_rpc::layout::LayoutVersion, p: garage_rpc::layout::Placement) -> String {
    use garage_rpc::layout::classes::scope_of;
    if p.scope != 0 {
        return v
            .placed
            .keys()
            .find(|n| scope_of(n) == p.scope)
            .cloned()
            .unwrap_or_else(|| format!("(removed class {:08x})", p.scope));
    }
    let users = v.users_of(p);
    if users.is_empty() {
        format!("(no class: {})", p.describe())
    } else {
        users.join(",")
    }
}

/// This node's [`NodeStorage`], from its block manager's last census.
pub fn node_storage(g: &Garage) -> NodeStorage {
    let Some(c) = g.block_manager.census() else {
        return NodeStorage::default();
    };
    let layout = g.system.layout();
    let v = layout.current();
    let row = |class: String, redundancy: String, u: &garage_block::census::Usage| ClassStorage {
        class,
        redundancy,
        files: u.files,
        bytes: u.bytes,
        to_hand_over_files: u.to_hand_over_files,
        to_hand_over_bytes: u.to_hand_over_bytes,
    };
    let mut classes = vec![row(
        garage_rpc::layout::classes::STANDARD.to_string(),
        format!("replication {}", v.replication_factor),
        &c.replicated,
    )];
    for (p, u) in &c.placed {
        classes.push(row(class_name(v, *p), p.describe(), u));
    }
    NodeStorage {
        census_age_secs: Some(garage_util::time::now_msec().saturating_sub(c.taken_at) / 1000),
        layout_version: c.layout_version,
        classes,
    }
}

/// Most resync queue entries counted as due now: past it, `stats` says
/// "at least".
pub const DUE_COUNT_MAX: usize = 100_000;

/// How many resync queue entries are due now (keys start with the due
/// time, big-endian), counted up to [`DUE_COUNT_MAX`].
fn due_now(queue: &garage_db::Tree) -> Result<usize, String> {
    let end = garage_block::rc::queue_key(garage_util::time::now_msec() + 1, &Default::default());
    let mut n = 0;
    for item in queue.range(..end).take(DUE_COUNT_MAX) {
        item.map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n)
}

/// How long the first entry of the resync queue has been due, in ms (0
/// when it is not due yet, or the queue is empty).
fn resync_lag_ms(queue: &garage_db::Tree) -> Result<u64, String> {
    let first = queue.first().map_err(|e| e.to_string())?;
    let due = first
        .and_then(|(k, _)| {
            k.get(..8)
                .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
        })
        .unwrap_or(u64::MAX);
    Ok(garage_util::time::now_msec().saturating_sub(due))
}

/// Statistics of this node's tables and blocks.
pub async fn node_stats(garage: &Arc<Garage>) -> Result<NodeStats, String> {
    let g = garage.clone();
    match tokio::task::spawn_blocking(move || node_stats_blocking(&g)).await {
        Ok(Ok(mut stats)) => {
            if let Some(totals) = COUNTER_TOTALS.get() {
                stats.counters = totals();
            }
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

/// This node's statistics, read from its tables, block manager and
/// system (blocking: database reads).
pub fn node_stats_blocking(g: &Garage) -> Result<NodeStats, String> {
    compute(g, true)
}

/// [`node_stats_blocking`], without the table sizes when `with_counts` is false
/// (`tables` empty and `block_rc_entries` 0: the refresh loop fills in the
/// last counts).
pub fn compute(g: &Garage, with_counts: bool) -> Result<NodeStats, String> {
    let bm = &g.block_manager;
    let (tables, block_rc_entries) = if with_counts {
        let tables = g
            .tables
            .iter()
            .map(|t| t.stats())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cannot read table statistics: {e}"))?;
        (tables, bm.rc.rc.len().map_err(|e| e.to_string())?)
    } else {
        (vec![], 0)
    };
    let local = g.system.local_status();
    Ok(NodeStats {
        node: g.system.id(),
        db_engine: g.db.engine().to_string(),
        tables,
        block_rc_entries,
        resync_queue: bm.rc.resync_queue.len().map_err(|e| e.to_string())?,
        resync_due: due_now(&bm.rc.resync_queue)?,
        resync_lag_ms: resync_lag_ms(&bm.rc.resync_queue)?,
        resync_errors: bm.resync_errors().map_err(|e| e.to_string())?.len(),
        data_space: local.data_space,
        metadata_space: local.metadata_space,
        health: Some(g.system.health()),
        // Filled in by the admin RPC only (rendering them is not free).
        counters: Default::default(),
        storage: node_storage(g),
    })
}

/// Takes a snapshot of the metadata database into a new timestamped
/// directory under `dir`, then removes all but the newest ones.
pub fn snapshot_metadata(db: &Db, dir: &Path) -> anyhow::Result<PathBuf> {
    let name = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H%M%S%.3fZ")
        .to_string();
    let target = dir.join(name);
    db.snapshot(&target)
        .with_context(|| format!("metadata snapshot into {} failed", target.display()))?;
    let mut existing: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    existing.sort();
    let excess = existing.len().saturating_sub(SNAPSHOTS_KEPT);
    for old in existing.into_iter().take(excess) {
        std::fs::remove_dir_all(&old)
            .with_context(|| format!("cannot remove old snapshot {}", old.display()))?;
    }
    Ok(target)
}
