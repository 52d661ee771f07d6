//! The node's state as Prometheus gauges: the periodic [`GaugesWorker`]
//! publishes the [`NodeStats`] that `garage stats` and `garage worker`
//! print too ([`garage_admin::ops::stats`] computes them: one source of truth).

use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_table::any::TableStats;

use garage_admin::ops::stats::{compute, NodeStats};
use garage_model::garage::Garage;
use garage_util::worker::{Step, Worker, WorkerHandle, WorkerSpec};

/// How often the gauges are recomputed.
pub const REFRESH_INTERVAL: Duration = crate::telemetry::REFRESH_INTERVAL;

/// How often SQLite's table sizes (the `table_*` gauges and
/// `block_rc_entries`) are recounted: `COUNT(*)` is linear and runs under
/// the single connection's lock, so every metadata read and write waits for
/// it. LMDB's counts are O(1) and follow [`REFRESH_INTERVAL`].
pub const SQLITE_COUNT_INTERVAL: Duration = Duration::from_secs(300);

/// How often the table sizes are recounted on `engine`.
pub fn count_interval(engine: garage_db::Engine) -> Duration {
    match engine {
        garage_db::Engine::Lmdb => REFRESH_INTERVAL,
        garage_db::Engine::Sqlite => SQLITE_COUNT_INTERVAL,
    }
}

/// Sets every state gauge from `s` (and the per-node layout gauges from
/// the system).
pub fn publish(g: &Garage, s: &NodeStats) {
    use metrics::gauge;
    crate::telemetry::build_info();
    for t in &s.tables {
        let name = t.name.clone();
        gauge!("table_size", "table_name" => name.clone()).set(t.items as f64);
        gauge!("table_merkle_tree_size", "table_name" => name.clone()).set(t.merkle_nodes as f64);
        gauge!("table_merkle_updater_todo_queue_length", "table_name" => name.clone())
            .set(t.merkle_todo as f64);
        gauge!("table_gc_todo_queue_length", "table_name" => name.clone()).set(t.gc_todo as f64);
        gauge!("table_insert_queue_length", "table_name" => name).set(t.insert_queue as f64);
    }
    gauge!("block_rc_entries").set(s.block_rc_entries as f64);
    gauge!("block_resync_queue_length").set(s.resync_queue as f64);
    gauge!("block_resync_errored_blocks").set(s.resync_errors as f64);
    gauge!("block_resync_lag_seconds").set(s.resync_lag_ms as f64 / 1000.0);
    if let Ok(st) = g.block_manager.scrub_state() {
        let running = st.running && !st.paused;
        gauge!("block_scrub_running").set(if running { 1.0 } else { 0.0 });
        gauge!("block_scrub_progress_ratio").set(scrub_progress(st.cursor.filter(|_| st.running)));
    }
    for (volume, space) in [("data", &s.data_space), ("metadata", &s.metadata_space)] {
        if let Some(f) = space {
            gauge!("garage_local_disk_avail", "volume" => volume).set(f.available as f64);
            gauge!("garage_local_disk_capacity", "volume" => volume).set(f.total as f64);
        }
    }
    for c in &s.storage.classes {
        let (class, red) = (c.class.clone(), c.redundancy.clone());
        gauge!("block_class_files", "class" => class.clone(), "redundancy" => red.clone())
            .set(c.files as f64);
        gauge!("block_class_bytes", "class" => class.clone(), "redundancy" => red.clone())
            .set(c.bytes as f64);
        gauge!("block_class_to_hand_over_files", "class" => class.clone(), "redundancy" => red.clone())
            .set(c.to_hand_over_files as f64);
        gauge!("block_class_to_hand_over_bytes", "class" => class, "redundancy" => red)
            .set(c.to_hand_over_bytes as f64);
    }
    if let Some(age) = s.storage.census_age_secs {
        gauge!("block_census_age_seconds").set(age as f64);
    }
    gauge!("garage_replication_factor").set(g.system.replication_factor() as f64);
    let active = g.system.active_version().to_string();
    gauge!("cluster_active_version_info", "version" => active).set(1.0);
    if let Some(h) = &s.health {
        use garage_rpc::system::health::HealthStatus;
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        gauge!("cluster_healthy").set(flag(h.status == HealthStatus::Healthy));
        gauge!("cluster_available").set(flag(h.status != HealthStatus::Unavailable));
        gauge!("cluster_connected_nodes").set(h.connected_nodes as f64);
        gauge!("cluster_known_nodes").set(h.known_nodes as f64);
        gauge!("cluster_storage_nodes").set(h.storage_nodes as f64);
        gauge!("cluster_storage_nodes_ok").set(h.storage_nodes_up as f64);
        gauge!("cluster_partitions").set(h.partitions as f64);
        gauge!("cluster_partitions_quorum").set(h.partitions_quorum as f64);
        gauge!("cluster_partitions_all_ok").set(h.partitions_all_ok as f64);
        gauge!("cluster_clock_skewed_nodes").set(h.clock_skewed_nodes.len() as f64);
    }
    let clocks = g.system.clock_view();
    let me = g.system.id();
    if !clocks.peers.is_empty() {
        gauge!("cluster_node_clock_offset_seconds", "id" => me.short())
            .set(clocks.local as f64 / 1000.0);
    }
    for (id, ms) in clocks.peers.iter() {
        gauge!("cluster_node_clock_offset_seconds", "id" => id.short()).set(*ms as f64 / 1000.0);
    }
    let layout = g.system.layout();
    for (id, role) in layout.current().roles.iter() {
        let up = g.system.is_up(id);
        gauge!(
            "cluster_layout_node_connected",
            "id" => id.short(),
            "role_zone" => role.zone.clone(),
            "role_capacity" => role.capacity.unwrap_or(0).to_string(),
            "role_gateway" => if role.capacity.is_none() { "1" } else { "0" },
        )
        .set(if up { 1.0 } else { 0.0 });
    }
}

/// Recomputes and publishes the gauges every [`REFRESH_INTERVAL`] (the
/// table sizes every [`count_interval`]); also runs the exporter's upkeep
/// (histogram housekeeping). A [`Worker`]: `garage worker list` shows it.
pub struct GaugesWorker {
    g: Arc<Garage>,
    counts_every: Duration,
    /// The last table sizes, and when they were counted.
    counted: Option<(Instant, Vec<TableStats>, usize)>,
    ticker: tokio::time::Interval,
}

impl GaugesWorker {
    pub fn new(g: Arc<Garage>) -> Self {
        let counts_every = count_interval(g.db.engine());
        // The first refresh is the first step; the ticker counts from it.
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + REFRESH_INTERVAL,
            REFRESH_INTERVAL,
        );
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        GaugesWorker {
            g,
            counts_every,
            counted: None,
            ticker,
        }
    }
}

impl Worker for GaugesWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            "Metrics gauges",
            "recomputes the gauges of /metrics (table sizes, queues, disk, peers)",
        )
    }

    async fn work(
        &mut self,
        _: &WorkerHandle,
        _: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<Step, String> {
        let with_counts = self
            .counted
            .as_ref()
            .is_none_or(|(at, _, _)| at.elapsed() >= self.counts_every);
        let g2 = self.g.clone();
        let mut s = tokio::task::spawn_blocking(move || compute(&g2, with_counts))
            .await
            .map_err(|e| format!("statistics task failed: {e}"))?
            .map_err(|e| e.to_string())?;
        if with_counts {
            self.counted = Some((Instant::now(), s.tables.clone(), s.block_rc_entries));
        } else if let Some((_, tables, rc)) = &self.counted {
            // Published again so that the exporter keeps them.
            s.tables = tables.clone();
            s.block_rc_entries = *rc;
        }
        publish(&self.g, &s);
        if let Some(h) = crate::telemetry::handle() {
            h.run_upkeep();
        }
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        self.ticker.tick().await;
    }
}

/// How far a scrub pass at `cursor` (the last block checked; files are
/// checked in hash order) has gone through the hash space, 0 to 1.
fn scrub_progress(cursor: Option<garage_util::data::Hash>) -> f64 {
    cursor
        .map(|h| {
            let mut top = [0u8; 8];
            top.copy_from_slice(&h.as_slice()[..8]);
            u64::from_be_bytes(top) as f64 / u64::MAX as f64
        })
        .unwrap_or(0.0)
}
