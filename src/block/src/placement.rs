//! Shards follow the layout: after a layout change (a new version, or an
//! old one that stops being live), a pass
//!
//! 1. queues a check of every erasure-coded block whose references this
//!    node counts: the first running counter rebuilds the shards the new
//!    placement lacks (`BlockManager::repair_shards`), from any `data`
//!    shards of the live versions;
//! 2. hands over the shards this node stores outside every live placement
//!    (the node of the shard's index in the newest version gets it unless
//!    it has it), then deletes them.
//!
//! A pass also runs 10 s after this node stored a shard of an index it
//! holds in no live placement: a hedged write's (see `shards.rs`), whose
//! node was late. A pass that could not reach a node is run again 5 s
//! later, then after a delay that doubles up to a minute. The
//! layout versions a pass completed for are kept in the metadata DB, so a
//! restart does not walk the data directories again.

use std::sync::Arc;
use std::time::Duration;

use garage_db as db;
use garage_rpc::layout::LayoutVersion;
use garage_util::data::Hash;
use garage_util::time::now_msec;
use garage_util::worker::runner::{Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::ec::Shard;
use crate::manager::{blocking, BlockManager, BlockRpc, Error, Result};
use crate::rc::queue_key;

const DONE_KEY: &[u8] = b"shard_placement_done";
/// First and longest wait before a pass that failed runs again.
const RETRY_MIN: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// How long after a shard stored outside its placement (a hedged write)
/// the pass that hands it over runs.
const STRAY_PASS_DELAY: Duration = Duration::from_secs(10);

fn db_err(e: db::Error) -> Error {
    Error::Task(format!("metadata database: {e}"))
}

/// What a pass did.
#[derive(Debug, Default)]
pub struct PassReport {
    pub checks_queued: u64,
    pub handed_over: u64,
    pub errors: Vec<String>,
}

/// Adds a pass's hand-overs to the node's counter
/// (`block_shards_handed_over_total`, doc/metrics.md).
fn count_handed_over(r: &PassReport) {
    metrics::counter!("block_shards_handed_over_total").increment(r.handed_over);
}

impl BlockManager {
    /// The layout (current version, oldest live version) the last
    /// complete pass was for.
    fn placement_done(&self) -> Result<Option<(u64, u64)>> {
        let v = self.rc.scrub.get(DONE_KEY).map_err(db_err)?;
        Ok(v.and_then(|b| rmp_serde::from_slice(&b).ok()))
    }

    /// One pass (see the module documentation); `queue_checks`: with its
    /// first step (the layout changed; a pass for stray shards only hands
    /// them over).
    pub async fn shard_placement_pass(&self, queue_checks: bool) -> Result<PassReport> {
        let mut report = PassReport::default();
        // 1. Checks of the erasure-coded blocks counted here.
        let (codes, queue) = (self.rc.ec_codes.clone(), self.rc.resync_queue.clone());
        report.checks_queued = blocking(move || -> db::Result<u64> {
            if !queue_checks {
                return Ok(0);
            }
            let now = now_msec();
            let mut n = 0;
            let hashes: Vec<Hash> = codes
                .iter()
                .filter_map(|i| i.ok().and_then(|(k, _)| Hash::try_from_slice(&k)))
                .collect();
            for h in hashes {
                queue.insert(queue_key(now, &h), [])?;
                n += 1;
            }
            Ok(n)
        })
        .await?
        .map_err(db_err)?;

        // 2. Shards stored outside every live placement.
        let me = self.system.id();
        let mut cursor = None;
        loop {
            let store = self.store.clone();
            let next = blocking(move || {
                let addr = store.next_shard_addr_after(cursor)?;
                let shards: Vec<(u8, bytes::Bytes)> = store
                    .shard_indices(&addr)
                    .into_iter()
                    .filter_map(|i| Some((i, store.read_shard(&addr, i).ok()??)))
                    .collect();
                Some((addr, shards))
            })
            .await?;
            let Some((addr, shards)) = next else {
                break;
            };
            cursor = Some(addr);
            let layout = self.system.layout();
            let partition = LayoutVersion::partition_of(addr.as_slice());
            for (i, bytes) in shards {
                // A bad shard is the scrub's business.
                let Ok(shard) = Shard::parse(bytes.clone(), Some((&addr, i))) else {
                    continue;
                };
                let code = shard.info.code;
                let holders: Vec<_> = layout
                    .live_versions()
                    .filter_map(|v| v.shard_nodes(code, partition))
                    .filter_map(|nodes| nodes.get(i as usize).copied())
                    .collect();
                let Some(target) = holders.last().copied() else {
                    continue; // no placement for the code: keep it
                };
                if holders.contains(&me) {
                    continue;
                }
                match self.hand_over_shard(&target, &addr, i, bytes).await {
                    Ok(()) => {
                        let store = self.store.clone();
                        blocking(move || store.delete_shard(&addr, i)).await??;
                        report.handed_over += 1;
                    }
                    Err(e) => report.errors.push(format!("shard {i} of {addr:?}: {e}")),
                }
            }
        }
        if report.handed_over > 0 || report.checks_queued > 0 {
            info!(
                "shard placement: {} erasure-coded blocks to check, {} shards handed over",
                report.checks_queued, report.handed_over
            );
        }
        Ok(report)
    }

    /// Gives shard `index` of `addr` to `target` unless it has it.
    async fn hand_over_shard(
        &self,
        target: &garage_net::NodeId,
        addr: &Hash,
        index: u8,
        bytes: bytes::Bytes,
    ) -> std::result::Result<(), String> {
        let missing = match self
            .call_bounded(
                target,
                BlockRpc::MissingShards {
                    addr: *addr,
                    indices: vec![index],
                },
            )
            .await
        {
            Ok(BlockRpc::MissingShardsReply(m)) => !m.is_empty(),
            Ok(other) => return Err(format!("unexpected answer {other:?}")),
            Err(e) => return Err(e),
        };
        if missing {
            self.put_shard_to(target, addr, index, bytes).await?;
        }
        debug!("shard {index} of {addr:?} handed over to {target:?} (it lacked it: {missing})");
        Ok(())
    }
}

/// The shard placement worker (`garage worker list`: "Shard placement
/// worker"): runs a pass whenever the live layout versions change, and
/// [`STRAY_PASS_DELAY`] after a shard was stored outside every live
/// placement (a hedged write). A pass that failed, or left shards not
/// handed over, runs again after a back-off even if the layout is done.
pub(crate) struct ShardPlacementWorker {
    manager: Arc<BlockManager>,
    layouts: watch::Receiver<Arc<garage_rpc::layout::LayoutHistory>>,
    /// The next pass runs even if the layout did not change.
    stray: bool,
}

impl ShardPlacementWorker {
    pub(crate) fn new(manager: Arc<BlockManager>) -> Self {
        let layouts = manager.system.subscribe_layout();
        Self {
            manager,
            layouts,
            stray: false,
        }
    }
}

impl Worker for ShardPlacementWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            "Shard placement worker",
            "after a layout change, checks erasure-coded blocks and hands over misplaced shards",
        )
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        let m = &self.manager;
        let l = m.system.layout();
        let key = (l.current().version, l.min_live_version());
        let changed = m.placement_done().ok().flatten() != Some(key);
        let forced = std::mem::take(&mut self.stray);
        if !(changed || forced) || l.current().storage_nodes.is_empty() {
            return Ok(Step::Idle);
        }
        let r = match m.shard_placement_pass(changed).await {
            Ok(r) => r,
            Err(e) => {
                self.stray = true;
                return Err(e.to_string());
            }
        };
        count_handed_over(&r);
        if let Some(first) = r.errors.first() {
            self.stray = true;
            return Err(format!(
                "{} shards not handed over, retrying: {first}",
                r.errors.len()
            ));
        }
        handle.set_progress(Some(format!(
            "layout v{}: {} checks queued, {} shards handed over",
            key.0, r.checks_queued, r.handed_over
        )));
        if let Err(e) =
            m.rc.scrub
                .insert(DONE_KEY, rmp_serde::to_vec(&key).expect("serializes"))
        {
            warn!("shard placement: cannot record the pass: {e}");
        }
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::select! {
            r = self.layouts.changed() => if r.is_err() {
                // The node is exiting: the runner stops the worker.
                std::future::pending::<()>().await
            },
            _ = tokio::time::sleep(Duration::from_secs(3600)) => (),
            _ = self.manager.stray_shards.notified() => {
                // Several hedged shards make one pass, a while later (the
                // pass walks every shard file).
                tokio::time::sleep(STRAY_PASS_DELAY).await;
                self.stray = true;
            }
        }
    }

    fn retry_delays(&self) -> (Duration, Duration) {
        (RETRY_MIN, RETRY_MAX)
    }
}
