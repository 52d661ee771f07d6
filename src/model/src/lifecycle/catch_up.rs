//! The erasure-coding catch-up worker: versions of an erasure-coded class
//! whose blocks were written replicated (a node of their shards down or
//! not yet seen, `crate::ec_catch_up`) are re-encoded in their
//! class once every node of their shards is up, by the same steps as a
//! lifecycle transition ([`Garage::transition`]: each step safe to stop
//! after, the replicated blocks freed after the usual delete delay).
//!
//! Every [`PASS_INTERVAL`] the worker goes through the queue; a version whose shard nodes are still
//! not all up stays queued for the next pass. "Erasure-coding catch-up
//! worker" in `garage worker list` (its queue, the bytes waiting), and
//! `ec_catch_up_waiting_versions` / `ec_catch_up_waiting_bytes` /
//! `ec_catch_up_reencoded_blocks_total` in `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ec_catch_up::Waiting;
use crate::mpu_table::completed_in;
use crate::object_table::{ObjectVersionData, ObjectVersionState};
use crate::version_table::{read_version, VersionBacklink};
use garage_table::EmptyKey;
use garage_util::data::Uuid;
use garage_util::worker::{self, Worker, WorkerHandle, WorkerSpec};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::transition::Transitioned;
use super::{LifecycleError, Result};
use crate::garage::Garage;

/// Time between two passes over the queue.
pub const PASS_INTERVAL: Duration = Duration::from_secs(10);
/// Queue entries read at once.
const PAGE: usize = 100;
/// A queued version not yet in its object (the object's entry is written
/// after its blocks) is kept this long before it is taken for gone.
const NOT_YET_LISTED: u64 = 10 * 60 * 1000;
/// A part's version whose upload is not completed is kept this long (an
/// upload in progress may last days; lifecycle rules abort old ones).
const UPLOAD_IN_PROGRESS: u64 = 7 * 24 * 3600 * 1000;

fn db_err(e: garage_db::Error) -> LifecycleError {
    LifecycleError::Internal(format!("erasure-coding catch-up queue: {e}"))
}

/// What one queued version came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Re-encoded (this many blocks), or nothing left to re-encode.
    Done(usize),
    /// Not now: a shard node is down, or its object is not written yet.
    Later,
    /// Nothing to re-encode any more (deleted, overwritten, or its class
    /// no longer erasure-coded).
    Gone,
}

pub struct CatchUpWorker {
    garage: Arc<Garage>,
    blocks_done: Arc<AtomicU64>,
    versions_done: Arc<AtomicU64>,
}

impl CatchUpWorker {
    pub fn new(garage: Arc<Garage>) -> Self {
        Self {
            garage,
            blocks_done: Arc::new(AtomicU64::new(0)),
            versions_done: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// A pass over the queue every [`PASS_INTERVAL`] while it holds versions.
impl Worker for CatchUpWorker {
    fn spec(&self) -> WorkerSpec {
        let (q, q2) = (
            self.garage.ec_catch_up.clone(),
            self.garage.ec_catch_up.clone(),
        );
        let (blocks, versions) = (self.blocks_done.clone(), self.versions_done.clone());
        WorkerSpec::new(
            "Erasure-coding catch-up worker",
            "re-encodes in their class the blocks of erasure-coded objects written replicated while a shard node was down",
        )
        .queue(move || q.len().map(|n| n as u64).map_err(|e| e.to_string()))
        .details(move || {
            let waiting = q2.totals().map(|(_, b)| b.to_string()).unwrap_or_default();
            vec![
                ("bytes waiting (stored replicated)".into(), waiting),
                (
                    "versions re-encoded".into(),
                    versions.load(Ordering::Relaxed).to_string(),
                ),
                (
                    "blocks re-encoded".into(),
                    blocks.load(Ordering::Relaxed).to_string(),
                ),
            ]
        })
    }

    async fn work(
        &mut self,
        _: &WorkerHandle,
        must_exit: &watch::Receiver<bool>,
    ) -> std::result::Result<worker::Step, String> {
        if self.garage.ec_catch_up.is_empty().unwrap_or(true) {
            self.publish();
            return Ok(worker::Step::Idle);
        }
        let res = self.pass(must_exit).await;
        self.publish();
        res.map(|()| worker::Step::Idle).map_err(|e| e.to_string())
    }

    async fn wait_for_work(&mut self) {
        tokio::time::sleep(PASS_INTERVAL).await;
    }
}

impl CatchUpWorker {
    fn publish(&self) {
        if let Ok((n, bytes)) = self.garage.ec_catch_up.totals() {
            metrics::gauge!("ec_catch_up_waiting_versions").set(n as f64);
            metrics::gauge!("ec_catch_up_waiting_bytes").set(bytes as f64);
        }
    }

    /// One pass over the whole queue.
    async fn pass(&self, must_exit: &watch::Receiver<bool>) -> Result<()> {
        let mut after: Option<Uuid> = None;
        let mut first_err = None;
        loop {
            let page = self.garage.ec_catch_up.list(after, PAGE).map_err(db_err)?;
            let Some(last) = page.last() else {
                break;
            };
            after = Some(last.version);
            for w in page {
                if *must_exit.borrow() {
                    return Ok(());
                }
                match self.one(&w).await {
                    Ok(Step::Done(n)) => {
                        self.blocks_done.fetch_add(n as u64, Ordering::Relaxed);
                        self.versions_done.fetch_add(1, Ordering::Relaxed);
                        metrics::counter!("ec_catch_up_reencoded_blocks_total").increment(n as u64);
                        info!(
                            version = %w.version.short(),
                            "erasure-coding catch-up: {n} blocks re-encoded ({} bytes were stored replicated)",
                            w.bytes
                        );
                        self.garage.ec_catch_up.remove(&w.version).map_err(db_err)?;
                    }
                    Ok(Step::Gone) => {
                        debug!(version = %w.version.short(), "erasure-coding catch-up: nothing left to re-encode");
                        self.garage.ec_catch_up.remove(&w.version).map_err(db_err)?;
                    }
                    Ok(Step::Later) => (),
                    Err(e) => {
                        warn!(
                            version = %w.version.short(),
                            "erasure-coding catch-up failed (retried at the next pass): {e}"
                        );
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Queued version `w`: its object's version re-encoded if it can be.
    async fn one(&self, w: &Waiting) -> Result<Step> {
        let age = garage_util::time::now_msec().saturating_sub(w.since_ms);
        let Some(v) = read_version(&self.garage.version_table, &w.version).await? else {
            return Ok(if age < NOT_YET_LISTED {
                Step::Later
            } else {
                Step::Gone
            });
        };
        match v.backlink {
            // (A part's version is deleted once its upload completes: its
            // blocks live on in the completed object's version.)
            VersionBacklink::Object { .. } if v.deleted.get() => Ok(Step::Gone),
            VersionBacklink::Object { bucket_id, key } => {
                self.object(bucket_id, &key, w.version, age).await
            }
            // A part: its blocks are in the completed object's version,
            // found in the object's entry by its id (`completed_in`).
            VersionBacklink::MultipartUpload { upload_id } => {
                let Some(mpu) = self.garage.mpu_table.get(&upload_id, &EmptyKey).await? else {
                    return Ok(if age < UPLOAD_IN_PROGRESS {
                        Step::Later
                    } else {
                        Step::Gone
                    });
                };
                if !mpu.deleted.get() {
                    // Still in progress.
                    return Ok(if age < UPLOAD_IN_PROGRESS {
                        Step::Later
                    } else {
                        Step::Gone
                    });
                }
                let obj = self
                    .garage
                    .object_table
                    .get(&mpu.bucket_id, &mpu.key)
                    .await?;
                match obj.as_ref().and_then(|o| completed_in(o, &upload_id)) {
                    Some(v) => self.object(mpu.bucket_id, &mpu.key, v.uuid, age).await,
                    // Aborted, or overwritten since.
                    None => Ok(Step::Gone),
                }
            }
        }
    }

    /// Version `uuid` of `bucket`/`key`, re-encoded in its class.
    async fn object(&self, bucket: Uuid, key: &str, uuid: Uuid, age: u64) -> Result<Step> {
        let listed = self
            .garage
            .object_table
            .get(&bucket, &key.to_string())
            .await?
            .and_then(|o| o.versions().iter().find(|x| x.uuid == uuid).cloned());
        let Some(ov) = listed else {
            // Not written yet, or no longer in the object's entry
            // (overwritten, deleted, or a noncurrent version of a
            // versioned bucket: left replicated, see doc/storage-classes.md).
            return Ok(if age < NOT_YET_LISTED {
                Step::Later
            } else {
                Step::Gone
            });
        };
        let class = match &ov.state {
            ObjectVersionState::Uploading { .. } => return Ok(Step::Later),
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _)) => {
                meta.storage_class.clone()
            }
            _ => return Ok(Step::Gone),
        };
        let Some(code) = self.garage.class_code(class.as_deref()) else {
            return Ok(Step::Gone);
        };
        let class = class.expect("a class with a code has a name");
        match self
            .garage
            .transition(bucket, key, &ov, &class, code)
            .await?
        {
            Transitioned::Done { blocks } => Ok(Step::Done(blocks)),
            Transitioned::NodesDown => Ok(Step::Later),
            Transitioned::Gone => Ok(Step::Gone),
        }
    }
}
