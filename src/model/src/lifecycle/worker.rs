//! The lifecycle worker: once a day (and shortly after start) it applies
//! each bucket's lifecycle rules. For each bucket with enabled rules whose
//! object partition has this node first in the current layout (so that one
//! node does the work, not every replica), it reads the bucket's objects
//! a page at a time and
//! - expires the current data of an object an Expiration matches, with a
//!   delete marker just newer than that data (so that a PUT that came in
//!   meanwhile is kept),
//! - aborts a multipart upload older than an AbortIncompleteMultipartUpload
//!   allows, as AbortMultipartUpload does ([`crate::object_write::ObjectWriter::abort_upload`]),
//! - queues the current data a Transition names for the transition worker
//!   (its own entry in the worker registry), which re-encodes it in the
//!   rule's storage class ([`Garage::transition`]). As in S3, an object under
//!   128 KiB is not moved unless the rule filters on its size.
//!
//! In a versioned bucket it then walks the history table key by key
//! ([`plan_history`]): it deletes the noncurrent versions a
//! NoncurrentVersionExpiration lets go and lone delete markers, and queues
//! those a NoncurrentVersionTransition moves (counted from the time each
//! stopped being current) for the same transition worker.
//!
//! `GARAGE_LIFECYCLE_INTERVAL_SECS` shortens the interval and
//! `GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS` moves the worker's clock forward
//! (both for tests: rules count in whole days).

use crate::notify::{Cause, Op};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::bucket_table::Versioning;
use crate::bucket_table::{days_after, Bucket, LifecycleRule};
use crate::history_table::{HistoryEntry, HistoryKey};
use crate::mpu_table::MultipartUpload;
use crate::object_table::{Head, Object, ObjectVersion, ObjectVersionData, ObjectVersionState};
use garage_rpc::layout::version::LayoutVersion;
use garage_rpc::layout::Placement;
use garage_rpc::system::System;
use garage_table::{EmptyKey, PartitionKey};
use garage_util::data::{gen_uuid, Uuid};
use garage_util::time::now_msec;
use garage_util::worker::{runner, Step, Worker, WorkerHandle, WorkerSpec};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::transition::Transitioned;
use super::{LifecycleError, Result};
use crate::garage::Garage;
use crate::object_write::WriteError;
use crate::tags::Tags;

/// Objects read per round trip.
const PAGE: usize = 1000;
/// Buckets read per round trip.
const BUCKET_PAGE: usize = 1000;
/// The first pass waits this long after start (or the interval if shorter).
const FIRST_PASS_DELAY: Duration = Duration::from_secs(30);

/// What one pass did to one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketPass {
    pub scanned: usize,
    pub expired: usize,
    pub aborted: usize,
    /// Noncurrent versions and lone delete markers deleted.
    pub versions_deleted: usize,
    /// Versions queued for a transition.
    pub transitions: usize,
}

impl BucketPass {
    /// Adds a bucket's pass to the node's counters (`lifecycle_*_total`,
    /// doc/metrics.md).
    fn count(&self) {
        metrics::counter!("lifecycle_bucket_passes_total").increment(1);
        metrics::counter!("lifecycle_objects_scanned_total").increment(self.scanned as u64);
        metrics::counter!("lifecycle_objects_expired_total").increment(self.expired as u64);
        metrics::counter!("lifecycle_uploads_aborted_total").increment(self.aborted as u64);
        metrics::counter!("lifecycle_versions_deleted_total")
            .increment(self.versions_deleted as u64);
        metrics::counter!("lifecycle_transitions_queued_total").increment(self.transitions as u64);
    }
}

/// Objects smaller than this are not transitioned unless the rule's
/// filter names a size (S3's default since 2024: the move costs more than
/// it saves).
pub const MIN_TRANSITION_SIZE: u64 = 128 * 1024;
/// Transitions the transition worker runs at once (each holds up to 4
/// blocks of 1 MiB in memory: `transition::IN_FLIGHT`).
const TRANSITIONS_AT_ONCE: usize = 8;
/// Transitions waiting for the transition worker, at most.
const TRANSITION_QUEUE: usize = 1024;

/// One version to move to another storage class.
#[derive(Debug)]
pub struct TransitionJob {
    pub bucket: Uuid,
    /// The bucket's name, for the logs.
    pub bucket_name: String,
    pub key: String,
    pub version: ObjectVersion,
    pub class: String,
}

pub struct LifecycleWorker {
    pub garage: Arc<Garage>,
    pub system: Arc<System>,
    pub interval: Duration,
    /// Added to the clock (tests).
    pub clock_offset_ms: u64,
    transitions: mpsc::Sender<TransitionJob>,
    /// The transition worker's end, taken by [`LifecycleWorker::spawn`].
    transitions_rx: Mutex<Option<mpsc::Receiver<TransitionJob>>>,
    /// Versions queued or in progress (not queued twice).
    queued: Arc<Mutex<HashSet<Uuid>>>,
}

impl LifecycleWorker {
    /// A worker with the interval and clock offset of the environment.
    pub fn new(garage: Arc<Garage>, system: Arc<System>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(TRANSITION_QUEUE);
        Arc::new(Self {
            garage,
            system,
            interval: garage_util::tuning::tuning().lifecycle_interval,
            clock_offset_ms: garage_util::tuning::tuning()
                .lifecycle_clock_offset
                .as_millis() as u64,
            transitions: tx,
            transitions_rx: Mutex::new(Some(rx)),
            queued: Default::default(),
        })
    }

    /// Starts the lifecycle passes and the transition worker, each under
    /// the worker contract (`garage_util::worker::runner`), until
    /// `must_exit`. The transition worker starts with the first call only.
    pub fn spawn(self: &Arc<Self>, must_exit: &watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let workers = &self.system.workers;
        let mut tasks = vec![runner::spawn(
            workers,
            PassWorker {
                lw: self.clone(),
                wait: FIRST_PASS_DELAY.min(self.interval),
                started: false,
            },
            must_exit.clone(),
        )];
        let rx = self
            .transitions_rx
            .lock()
            .expect("transition queue lock")
            .take();
        if let Some(rx) = rx {
            tasks.push(runner::spawn(
                workers,
                TransitionWorker {
                    lw: self.clone(),
                    rx,
                    next: None,
                    closed: false,
                    done: Arc::new(AtomicU64::new(0)),
                },
                must_exit.clone(),
            ));
        }
        tasks
    }

    /// One pass over every bucket with enabled rules that this node
    /// handles.
    pub async fn pass(&self, must_exit: &watch::Receiver<bool>) -> Result<()> {
        let mut start = None;
        let refresh = self.classes_to_refresh();
        loop {
            let page = self
                .garage
                .bucket_table
                .get_range(&EmptyKey, start, None, BUCKET_PAGE, false)
                .await?;
            for b in page.iter() {
                if *must_exit.borrow() {
                    return Ok(());
                }
                if start.as_ref() == Some(&b.id) {
                    continue;
                }
                let rules: Vec<LifecycleRule> = b
                    .params()
                    .and_then(|p| p.lifecycle_config.get().clone())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|r| r.enabled)
                    .collect();
                // A bucket pinned to classes is passed over without rules
                // too: its data in other classes moves to its default. So
                // is every bucket while a class has blocks under a former
                // redundancy: they are re-encoded in the new one.
                let pinned = b
                    .params()
                    .is_some_and(|p| p.allowed_storage_classes.get().is_some());
                if (rules.is_empty() && !pinned && refresh.is_empty()) || !self.is_first_node_of(b)
                {
                    continue;
                }
                let name = b
                    .global_aliases()
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| b.id.hex());
                match self.bucket_pass(b, &name, &rules, &refresh).await {
                    Ok(p) => {
                        p.count();
                        info!(
                            "lifecycle: bucket {name}: {} objects scanned, {} expired, {} uploads aborted, {} versions deleted, {} queued for a transition",
                            p.scanned, p.expired, p.aborted, p.versions_deleted, p.transitions
                        )
                    }
                    Err(e) => warn!("lifecycle: bucket {name}: {e}"),
                }
            }
            if page.len() < BUCKET_PAGE {
                return Ok(());
            }
            start = page.last().map(|b| b.id);
        }
    }

    /// Whether this node is the first node of the bucket's object
    /// partition in the current layout.
    fn is_first_node_of(&self, b: &Bucket) -> bool {
        let layout = self.system.layout();
        let partition = LayoutVersion::partition_of(b.id.hash().as_slice());
        layout.current().nodes_of(partition).first() == Some(&self.system.id())
    }

    /// The classes whose redundancy changed while blocks were stored
    /// under the former one (the layout keeps a ring for a placement of
    /// their scope that is no longer theirs), with their placement now:
    /// their data is re-encoded at each pass, once the cluster allows
    /// `recoded-blocks`.
    fn classes_to_refresh(&self) -> BTreeMap<String, Placement> {
        if !self.garage.recode_allowed() {
            return BTreeMap::new();
        }
        let layout = self.system.layout();
        let v = layout.current();
        v.placed
            .iter()
            .filter(|(_, p)| {
                v.ec_rings
                    .iter()
                    .any(|r| r.placement().scope == p.scope && r.placement() != **p)
            })
            .map(|(n, p)| (n.clone(), *p))
            .collect()
    }

    async fn bucket_pass(
        &self,
        b: &Bucket,
        name: &str,
        rules: &[LifecycleRule],
        refresh: &BTreeMap<String, Placement>,
    ) -> Result<BucketPass> {
        let recode = self.garage.recode_allowed();
        let now = now_msec() + self.clock_offset_ms;
        let mut stats = BucketPass::default();
        let mut start: Option<String> = None;
        let versioning = b.params().map(|p| *p.versioning.get()).unwrap_or_default();
        let allowed = b
            .params()
            .and_then(|p| p.allowed_storage_classes.get().clone());
        let default = b
            .params()
            .and_then(|p| p.default_storage_class.get().clone());
        loop {
            let page = self
                .garage
                .object_table
                .get_range(&b.id, start.clone(), None, PAGE, false)
                .await?;
            let mut markers = Vec::new();
            for o in page.iter() {
                if start.as_ref() == Some(&o.key) {
                    continue;
                }
                stats.scanned += 1;
                let todo = plan(o, rules, now, versioning);
                if let Some(m) = todo.marker {
                    markers.push((m.key.clone(), m.versions()[0].clone()));
                }
                let transition = match &allowed {
                    None => todo.transition,
                    // Pinned: only to a class the bucket accepts, and data
                    // in another class moves to the default.
                    Some(a) => todo
                        .transition
                        .filter(|(_, c)| a.contains(c))
                        .or_else(|| placement_move(o, a, default.as_deref(), recode)),
                }
                .or_else(|| refresh_move(o, refresh));
                if let Some((version, class)) = transition {
                    if self
                        .queue_transition(TransitionJob {
                            bucket: b.id,
                            bucket_name: name.to_string(),
                            key: o.key.clone(),
                            version,
                            class,
                        })
                        .await
                    {
                        stats.transitions += 1;
                    }
                }
                for mpu in todo.aborts {
                    match self.abort_if_still_idle(&mpu, now).await {
                        Ok(true) => stats.aborted += 1,
                        Ok(false) => {}
                        Err(e) => warn!(
                            "lifecycle: cannot abort upload {} of {:?}: {e}",
                            mpu.upload_id.hex(),
                            mpu.key
                        ),
                    }
                }
            }
            if !markers.is_empty() {
                self.garage
                    .writer
                    .write_versions(b.id, &markers, &Cause::node(Op::Lifecycle))
                    .await?;
                stats.expired += markers.len();
            }
            if page.len() < PAGE {
                break;
            }
            start = page.last().map(|o| o.key.clone());
        }
        let for_versions = rules.iter().any(|r| {
            r.noncurrent_expiration.is_some()
                || r.expired_delete_marker
                || !r.noncurrent_transitions.is_empty()
        });
        if for_versions && versioning != Versioning::Off {
            self.history_pass(b, name, rules, now, &mut stats).await?;
        }
        Ok(stats)
    }

    /// Walks the bucket's history table key by key and deletes and queues
    /// what [`plan_history`] says, counted in `stats`.
    async fn history_pass(
        &self,
        b: &Bucket,
        name: &str,
        rules: &[LifecycleRule],
        now: u64,
        stats: &mut BucketPass,
    ) -> Result<()> {
        let mut start: Option<HistoryKey> = None;
        let mut group: Vec<HistoryEntry> = Vec::new();
        loop {
            let page = self
                .garage
                .history_table
                .get_range(&b.id, start.clone(), None, PAGE, false)
                .await?;
            let last_page = page.len() < PAGE;
            start = page.last().map(|h| h.hkey.clone()).or(start);
            for h in page {
                if group.first().is_some_and(|g| g.key != h.key) {
                    self.apply_history(b, name, rules, now, &group, stats)
                        .await?;
                    group.clear();
                }
                if group.last().is_none_or(|g| g.hkey != h.hkey) {
                    group.push(h);
                }
            }
            if last_page {
                break;
            }
        }
        if !group.is_empty() {
            self.apply_history(b, name, rules, now, &group, stats)
                .await?;
        }
        Ok(())
    }

    /// One key's history entries (newest first): deletes the versions the
    /// rules expire and queues those they move.
    async fn apply_history(
        &self,
        b: &Bucket,
        name: &str,
        rules: &[LifecycleRule],
        now: u64,
        group: &[HistoryEntry],
        stats: &mut BucketPass,
    ) -> Result<()> {
        let key = &group[0].key;
        let obj = self.garage.object_table.get(&b.id, key).await?;
        let versions: Vec<ObjectVersion> = group.iter().map(|h| h.version.clone()).collect();
        let tags: Vec<Tags> = group
            .iter()
            .map(|h| match h.tags.get() {
                Some(t) => t.clone(),
                None => crate::tags::stored_tags(&h.version),
            })
            .collect();
        let newer_null = obj.as_ref().and_then(|o| match o.head() {
            Head::Version(v) if !v.in_history() && v.sort_key() > versions[0].sort_key() => {
                Some(v.timestamp)
            }
            _ => None,
        });
        let has_null = obj
            .as_ref()
            .is_some_and(|o| o.null_versions().next().is_some());
        let todo = plan_history(key, &versions, &tags, newer_null, has_null, rules, now);
        for (version, class) in todo.transitions {
            let job = TransitionJob {
                bucket: b.id,
                bucket_name: name.to_string(),
                key: key.clone(),
                version,
                class,
            };
            if self.queue_transition(job).await {
                stats.transitions += 1;
            }
        }
        for v in todo.delete.iter() {
            // A locked version stays until its lock lets it go (S3's
            // rule); the lock is checked again, at quorum, by the delete.
            if v.lock.check_delete(now, false).is_err() {
                continue;
            }
            match self
                .garage
                .writer
                .delete_version(
                    b.id,
                    key,
                    v.version_id(),
                    false,
                    &Cause::node(Op::Lifecycle),
                )
                .await
            {
                Ok(_) => stats.versions_deleted += 1,
                Err(WriteError::Locked(_)) => (),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// What the rules do to one key's versions with ids.
#[derive(Debug, Default)]
pub struct HistoryPlan {
    /// Versions to delete.
    pub delete: Vec<ObjectVersion>,
    /// Versions to move, and the class to move each to.
    pub transitions: Vec<(ObjectVersion, String)>,
}

/// What the rules do at `now` to a key's versions with ids (`versions`,
/// newest first). A noncurrent version is one with a newer version
/// (`newer_null` is the time of a current null version newer than all of
/// them); its NoncurrentDays count from when its successor was written, and
/// the NewerNoncurrentVersions newest noncurrent versions are kept from a
/// rule's action. Deleted: a noncurrent version a NoncurrentVersionExpiration
/// lets go, and, with ExpiredObjectDeleteMarker, a current delete marker
/// that is the key's only version (`has_null`: the key has a null version).
/// Moved: a noncurrent version kept in blocks, to the class of the latest
/// NoncurrentVersionTransition due, if not in it yet (as for a Transition,
/// not under 128 KiB unless the rule's filter names a size). `tags[i]` are
/// the tags of `versions[i]` (none when missing).
pub fn plan_history(
    key: &str,
    versions: &[ObjectVersion],
    tags: &[Tags],
    newer_null: Option<u64>,
    has_null: bool,
    rules: &[LifecycleRule],
    now: u64,
) -> HistoryPlan {
    let mut out = HistoryPlan::default();
    let mut successor = newer_null;
    let mut rank = 0;
    for (i, v) in versions.iter().enumerate() {
        if let Some(became_noncurrent) = successor {
            rank += 1;
            let v_tags = tags.get(i).map(Vec::as_slice).unwrap_or(&[]);
            let expired = rules.iter().any(|r| {
                r.noncurrent_expiration.is_some_and(|n| {
                    now >= days_after(became_noncurrent, n.days)
                        && rank > n.keep.unwrap_or(0) as usize
                }) && r.filter.matches(key, v.size(), v_tags)
            });
            if expired {
                out.delete.push(v.clone());
            } else {
                let due = rules
                    .iter()
                    .filter(|r| may_move(r, key, v, v_tags))
                    .flat_map(|r| r.noncurrent_transitions.iter())
                    .filter(|t| rank > t.keep.unwrap_or(0) as usize)
                    .map(|t| (days_after(became_noncurrent, t.days), &t.class))
                    .filter(|(at, _)| *at <= now)
                    .max();
                if let Some(class) = due.and_then(|(_, c)| not_yet_in(v, c)) {
                    out.transitions.push((v.clone(), class));
                }
            }
        }
        successor = Some(v.timestamp);
    }
    let lone_marker = versions.len() == 1
        && newer_null.is_none()
        && !has_null
        && versions[0].is_complete()
        && !versions[0].is_data();
    if lone_marker
        && rules
            .iter()
            .any(|r| r.expired_delete_marker && r.filter.matches_key(key))
    {
        out.delete.push(versions[0].clone());
    }
    out
}

impl LifecycleWorker {
    /// Aborts `mpu` unless, read again just now, it is no longer in
    /// progress (completed or aborted since the page was read) or one of
    /// its parts was written in the last [`ACTIVE_UPLOAD`]: an upload a
    /// client is still working on is left alone, so that an abort does not
    /// race its completion. (The remaining window, between this read and
    /// the abort's write, is milliseconds long against an upload idle for
    /// at least that long.)
    async fn abort_if_still_idle(&self, mpu: &MultipartUpload, now: u64) -> Result<bool> {
        let (obj, cur) = tokio::join!(
            self.garage.object_table.get(&mpu.bucket_id, &mpu.key),
            self.garage.mpu_table.get(&mpu.upload_id, &EmptyKey)
        );
        let uploading = obj?
            .and_then(|o| o.version(mpu.timestamp, mpu.upload_id).cloned())
            .is_some_and(|v| v.is_uploading(Some(true)));
        if !uploading {
            return Ok(false);
        }
        let parts = match cur? {
            Some(m) => self.garage.writer.upload_parts(&m, 1).await?,
            None => vec![],
        };
        let recent = parts
            .iter()
            .any(|(k, _)| k.timestamp + ACTIVE_UPLOAD.as_millis() as u64 > now);
        if recent {
            return Ok(false);
        }
        self.garage.writer.abort_upload(mpu).await?;
        Ok(true)
    }
}

/// An upload with a part written this recently is not aborted by a rule.
const ACTIVE_UPLOAD: Duration = Duration::from_secs(3600);

impl LifecycleWorker {
    /// Queues `job` unless its version is queued already; whether it was.
    async fn queue_transition(&self, job: TransitionJob) -> bool {
        let fresh = self
            .queued
            .lock()
            .expect("transition set lock")
            .insert(job.version.uuid);
        if !fresh {
            return false;
        }
        let uuid = job.version.uuid;
        if self.transitions.send(job).await.is_err() {
            self.queued
                .lock()
                .expect("transition set lock")
                .remove(&uuid);
            return false;
        }
        true
    }

    async fn run_transition(&self, job: &TransitionJob) -> Result<Transitioned> {
        let what = format!(
            "bucket {}: {:?} (version {})",
            job.bucket_name,
            job.key,
            job.version.uuid.short()
        );
        // A bucket pinned to some classes since the rule was set moves
        // nothing to another one.
        let allowed = self
            .garage
            .bucket_table
            .get(&EmptyKey, &job.bucket)
            .await?
            .and_then(|b| {
                b.params()
                    .and_then(|p| p.allowed_storage_classes.get().clone())
            });
        if let Some(allowed) = allowed.filter(|a| !a.contains(&job.class)) {
            warn!(
                "lifecycle transition of {what}: the bucket accepts only the storage classes {}, not {}",
                allowed.join(", "),
                job.class
            );
            return Err(LifecycleError::ClassNotAllowed {
                class: job.class.clone(),
                allowed: allowed.join(", "),
            });
        }
        if let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _)) =
            &job.version.state
        {
            if let Some(from) = meta.first_ec.filter(|_| !self.garage.recode_allowed()) {
                // See `transition`: before `recoded-blocks`, a coded block
                // is never replaced by another coded form.
                warn!(
                    "lifecycle transition of {what} to {}: its data is erasure-coded or in a class with a place ({from}), and moving it to another such class waits for the cluster to be finalized at v0.3.0; it stays where it is, readable",
                    job.class
                );
                return Err(LifecycleError::CrossCoded {
                    class: job.class.clone(),
                });
            }
        }
        let Some(code) = self.garage.class_code(Some(&job.class)) else {
            warn!(
                "lifecycle transition of {what}: the layout no longer offers class {}",
                job.class
            );
            return Err(LifecycleError::UnknownClass(job.class.clone()));
        };
        let res = self
            .garage
            .transition(job.bucket, &job.key, &job.version, &job.class, code)
            .await;
        match &res {
            Ok(Transitioned::Done { blocks }) => info!(
                "lifecycle transition of {what} to {} ({code}): {blocks} blocks re-encoded",
                job.class
            ),
            Ok(Transitioned::NodesDown) => {
                metrics::counter!("lifecycle_transitions_deferred_total").increment(1);
                info!(
                    "lifecycle transition of {what} to {} deferred to the next pass: a node of its shards is down",
                    job.class
                )
            }
            Ok(Transitioned::Gone) => (),
            Err(e) => warn!(
                "lifecycle transition of {what} to {} failed (retried at the next pass): {e}",
                job.class
            ),
        }
        res
    }
}

/// The lifecycle passes: the first [`FIRST_PASS_DELAY`] after start (or
/// the interval if shorter), then one per interval. A pass is deferred
/// while this node's clock is off its peers' (expirations compare ages
/// with it: doc/ordering.md); a failed pass is recorded on the worker and
/// tried again at the next one.
struct PassWorker {
    lw: Arc<LifecycleWorker>,
    wait: Duration,
    started: bool,
}

impl Worker for PassWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            "Lifecycle worker",
            "applies the buckets' lifecycle rules (expiration, aborting old uploads)",
        )
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        must_exit: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        if !self.started {
            // The first step waits for the first pass's delay.
            self.started = true;
            return Ok(Step::Idle);
        }
        self.wait = self.lw.interval;
        if let Err(e) = garage_util::clock::check() {
            warn!("lifecycle pass deferred: {e}");
            handle.set_progress(Some(format!("deferred: {e}")));
            return Ok(Step::Idle);
        }
        if let Err(e) = self.lw.pass(must_exit).await {
            warn!("lifecycle pass failed (retried at the next one): {e}");
            handle.error(&e);
        }
        handle.set_progress(Some(format!(
            "last pass {}",
            garage_util::time::rfc3339(garage_util::time::now_msec())
        )));
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::time::sleep(self.wait).await
    }
}

/// The transition worker: moves the versions the passes queue, one at a
/// time. A failed move is recorded on the worker and logged; the version
/// is queued again by the next pass.
struct TransitionWorker {
    lw: Arc<LifecycleWorker>,
    rx: mpsc::Receiver<TransitionJob>,
    /// The job [`Worker::wait_for_work`] received.
    next: Option<TransitionJob>,
    /// The queue's senders are gone.
    closed: bool,
    /// Versions moved.
    done: Arc<AtomicU64>,
}

impl Worker for TransitionWorker {
    fn spec(&self) -> WorkerSpec {
        let queued = self.lw.queued.clone();
        let done = self.done.clone();
        WorkerSpec::new(
            "Lifecycle transition worker",
            "re-encodes the objects a lifecycle Transition names in its storage class",
        )
        .queue(move || Ok(queued.lock().map(|q| q.len() as u64).unwrap_or(0)))
        .details(move || {
            vec![(
                "versions moved".into(),
                done.load(Ordering::Relaxed).to_string(),
            )]
        })
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        if self.closed {
            return Ok(Step::Finished);
        }
        let Some(first) = self.next.take() else {
            return Ok(Step::Idle);
        };
        // The jobs queued now, up to TRANSITIONS_AT_ONCE, run together:
        // each waits for round trips (across sites, tens of ms each), not
        // for this node's CPU or disk.
        let mut batch = vec![first];
        while batch.len() < TRANSITIONS_AT_ONCE {
            match self.rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let results =
            futures::future::join_all(batch.iter().map(|job| self.lw.run_transition(job))).await;
        for (job, res) in batch.iter().zip(results) {
            match &res {
                Ok(Transitioned::Done { .. }) => {
                    self.done.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => (),
                Err(e) => handle.error(e),
            }
            self.lw
                .queued
                .lock()
                .expect("transition set lock")
                .remove(&job.version.uuid);
        }
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        match self.rx.recv().await {
            Some(job) => self.next = Some(job),
            None => self.closed = true,
        }
    }
}

/// What the rules ask for one object at `now`.
#[derive(Debug, Default)]
pub struct Plan {
    /// A delete marker expiring the object's current data.
    pub marker: Option<Object>,
    /// Multipart uploads to abort.
    pub aborts: Vec<MultipartUpload>,
    /// The current data to move, and the class to move it to.
    pub transition: Option<(ObjectVersion, String)>,
}

/// The class the rules move version `v` of `key` to at `now`, if not the
/// one it is in: of the transitions due, the latest due. Only complete
/// data kept in blocks moves (inline data lives in the metadata).
fn transition_of(
    key: &str,
    v: &ObjectVersion,
    tags: &[(String, String)],
    rules: &[LifecycleRule],
    now: u64,
) -> Option<String> {
    let due = |when: &crate::bucket_table::LifecycleExpiration| match *when {
        crate::bucket_table::LifecycleExpiration::AfterDays(d) => days_after(v.timestamp, d),
        crate::bucket_table::LifecycleExpiration::AtDate(t) => t,
    };
    let (_, class) = rules
        .iter()
        .filter(|r| may_move(r, key, v, tags))
        .flat_map(|r| r.transitions.iter())
        .map(|t| (due(&t.when), &t.class))
        .filter(|(at, _)| *at <= now)
        .max()?;
    not_yet_in(v, class)
}

/// Whether rule `r`'s transitions apply to version `v` of `key`: its filter
/// matches, and the version is not under 128 KiB unless the filter names a
/// size.
fn may_move(r: &LifecycleRule, key: &str, v: &ObjectVersion, tags: &[(String, String)]) -> bool {
    r.filter.matches(key, v.size(), tags)
        && (r.filter.size_gt.is_some()
            || r.filter.size_lt.is_some()
            || v.size() >= MIN_TRANSITION_SIZE)
}

/// `class`, if version `v` is complete data kept in blocks (inline data
/// lives in the metadata) and not in that class yet.
fn not_yet_in(v: &ObjectVersion, class: &str) -> Option<String> {
    let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _)) = &v.state else {
        return None;
    };
    (meta.storage_class.as_deref() != Some(class)).then(|| class.to_string())
}

/// For a bucket pinned to the classes `allowed`: the current data of `o`
/// if it is kept in blocks of another class, with the class to move it
/// to, the bucket's `default` (none when the default is `STANDARD`, which
/// is no transition's target). Data already erasure-coded or in a class
/// with a place moves only when `recode` (the cluster allows
/// `recoded-blocks`, see `transition`); before, it stays, readable, where
/// it is.
pub fn placement_move(
    o: &Object,
    allowed: &[String],
    default: Option<&str>,
    recode: bool,
) -> Option<(ObjectVersion, String)> {
    let v = o.last_data()?;
    let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _)) = &v.state else {
        return None;
    };
    if meta.first_ec.is_some() && !recode {
        return None;
    }
    let class = meta
        .storage_class
        .as_deref()
        .unwrap_or(garage_rpc::layout::classes::STANDARD);
    if allowed.iter().any(|a| a == class) {
        return None;
    }
    let to = default.filter(|d| *d != garage_rpc::layout::classes::STANDARD)?;
    Some((v.clone(), to.to_string()))
}

/// The current data of `o` if its class is one of `refresh` (classes
/// whose redundancy changed) and its blocks are kept in another placement
/// than the class's now: it is re-encoded in the same class.
pub fn refresh_move(
    o: &Object,
    refresh: &BTreeMap<String, Placement>,
) -> Option<(ObjectVersion, String)> {
    let v = o.last_data()?;
    let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _)) = &v.state else {
        return None;
    };
    let class = meta.storage_class.as_ref()?;
    let now = refresh.get(class)?;
    (meta.first_ec.is_some() && meta.first_ec != Some(*now)).then(|| (v.clone(), class.clone()))
}

/// Applies the (enabled) `rules` to one object.
pub fn plan(o: &Object, rules: &[LifecycleRule], now: u64, versioning: Versioning) -> Plan {
    let mut out = Plan::default();
    if let Some(v) = o.last_data() {
        let expired = rules.iter().any(|r| {
            r.expiration.is_some_and(|e| e.expired(v.timestamp, now))
                && r.filter
                    .matches(&o.key, v.size(), &crate::tags::version_tags(o, v))
        });
        if !expired {
            let tags = crate::tags::version_tags(o, v);
            out.transition = transition_of(&o.key, v, &tags, rules, now).map(|c| (v.clone(), c));
        }
        if expired {
            // Just newer than the expired data: older than any write that
            // replaced it meanwhile, which therefore stays.
            out.marker = Some(Object::new(
                o.bucket_id,
                o.key.clone(),
                vec![ObjectVersion::new(
                    gen_uuid(),
                    v.timestamp + 1,
                    ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
                    versioning,
                )],
            ));
        }
    }
    for v in o.versions().iter().filter(|v| v.is_uploading(Some(true))) {
        let old = rules.iter().any(|r| {
            r.abort_incomplete_mpu_days
                .is_some_and(|d| now >= days_after(v.timestamp, d))
                && r.filter.matches_key(&o.key)
        });
        if old {
            out.aborts.push(MultipartUpload::new(
                v.uuid,
                v.timestamp,
                o.bucket_id,
                o.key.clone(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::bucket_table::NoncurrentExpiration;
    use crate::bucket_table::{LifecycleExpiration, LifecycleFilter, DAY_MSEC};
    use crate::object_table::ObjectVersionMeta;
    use garage_util::crdt::Crdt;
    use garage_util::data::Uuid;

    use super::*;

    fn data(ts: u64, size: u64) -> ObjectVersion {
        ObjectVersion {
            uuid: gen_uuid(),
            timestamp: ts,
            state: ObjectVersionState::Complete(ObjectVersionData::Inline(
                ObjectVersionMeta {
                    headers: Vec::new(),
                    size,
                    etag: "e".into(),
                    storage_class: None,
                    first_ec: None,
                    recoded: 0,
                },
                vec![0; size as usize],
            )),
            versioning: Default::default(),
            lock: Default::default(),
            acl: Default::default(),
            acl_grants: Default::default(),
        }
    }

    fn upload(ts: u64) -> ObjectVersion {
        ObjectVersion {
            uuid: gen_uuid(),
            timestamp: ts,
            state: ObjectVersionState::Uploading {
                multipart: true,
                headers: Vec::new(),
            },
            versioning: Default::default(),
            lock: Default::default(),
            acl: Default::default(),
            acl_grants: Default::default(),
        }
    }

    fn rule(prefix: &str, exp: Option<LifecycleExpiration>, abort: Option<u32>) -> LifecycleRule {
        LifecycleRule {
            id: None,
            enabled: true,
            filter: LifecycleFilter {
                prefix: Some(prefix.into()),
                size_gt: None,
                size_lt: Some(100),
                tags: vec![],
            },
            expiration: exp,
            abort_incomplete_mpu_days: abort,
            noncurrent_expiration: None,
            expired_delete_marker: false,
            transitions: vec![],
            noncurrent_transitions: vec![],
        }
    }

    fn blocks(ts: u64, size: u64, class: Option<&str>) -> ObjectVersion {
        let mut v = data(ts, 0);
        v.state = ObjectVersionState::Complete(ObjectVersionData::FirstBlock(
            ObjectVersionMeta {
                headers: Vec::new(),
                size,
                etag: "e".into(),
                storage_class: class.map(String::from),
                first_ec: None,
                recoded: 0,
            },
            garage_util::data::Hash::from([1; 32]),
        ));
        v
    }

    #[test]
    fn transitions_follow_the_rules() {
        use crate::bucket_table::LifecycleTransition;
        let b = Uuid::from([3; 32]);
        let day = 100 * DAY_MSEC;
        let to = |d: u32, class: &str| LifecycleTransition {
            when: LifecycleExpiration::AfterDays(d),
            class: class.into(),
        };
        let mut r = rule("cold/", None, None);
        r.filter.size_lt = None;
        r.transitions = vec![to(1, "STANDARD_IA"), to(3, "DEEP")];
        let rules = [r];
        let class = |v: ObjectVersion, key: &str, now: u64| {
            plan(
                &Object::new(b, key.into(), vec![v]),
                &rules,
                now,
                Versioning::Off,
            )
            .transition
            .map(|(_, c)| c)
        };
        let big = 1 << 20;
        // Not before the day is due; then the latest class due.
        assert_eq!(
            class(blocks(day + 5, big, None), "cold/a", day + DAY_MSEC),
            None
        );
        assert_eq!(
            class(blocks(day + 5, big, None), "cold/a", day + 2 * DAY_MSEC).as_deref(),
            Some("STANDARD_IA")
        );
        assert_eq!(
            class(blocks(day + 5, big, None), "cold/a", day + 9 * DAY_MSEC).as_deref(),
            Some("DEEP")
        );
        // Already there; another prefix; too small; inline data: stays.
        assert_eq!(
            class(
                blocks(day, big, Some("STANDARD_IA")),
                "cold/a",
                day + 2 * DAY_MSEC
            ),
            None
        );
        assert_eq!(
            class(blocks(day, big, None), "hot/a", day + 9 * DAY_MSEC),
            None
        );
        assert_eq!(
            class(blocks(day, 1000, None), "cold/a", day + 9 * DAY_MSEC),
            None
        );
        assert_eq!(class(data(day, 10), "cold/a", day + 9 * DAY_MSEC), None);
        // A rule that filters on size moves small objects too.
        let mut small = rules[0].clone();
        small.filter.size_gt = Some(10);
        let p = plan(
            &Object::new(b, "cold/s".into(), vec![blocks(day, 1000, None)]),
            &[small],
            day + 2 * DAY_MSEC,
            Versioning::Off,
        );
        assert_eq!(p.transition.map(|(_, c)| c).as_deref(), Some("STANDARD_IA"));
    }

    #[test]
    fn noncurrent_versions_and_lone_markers_follow_the_rules() {
        let day = 100 * DAY_MSEC;
        let mut r = rule("nc/", None, None);
        r.filter.size_lt = None;
        r.noncurrent_expiration = Some(NoncurrentExpiration {
            days: 1,
            keep: Some(1),
        });
        let mut m = rule("", None, None);
        m.filter.size_lt = None;
        m.expired_delete_marker = true;
        let rules = [r, m];
        // Newest first: v3 current, v2 and v1 noncurrent since v3 and v2
        // were written.
        let vs = vec![data(day + 30, 1), data(day + 20, 1), data(day + 10, 1)];
        let ids = |x: Vec<ObjectVersion>| x.into_iter().map(|v| v.uuid).collect::<Vec<_>>();
        assert!(
            plan_history("nc/a", &vs, &[], None, false, &rules, day + DAY_MSEC - 1)
                .delete
                .is_empty()
        );
        // A day later (at midnight): v1 goes, v2 is the one kept.
        assert_eq!(
            ids(plan_history("nc/a", &vs, &[], None, false, &rules, 2 * day).delete),
            vec![vs[2].uuid]
        );
        // A newer null version is current: v3 is noncurrent too.
        assert_eq!(
            ids(plan_history("nc/a", &vs, &[], Some(day + 40), true, &rules, 2 * day).delete),
            vec![vs[1].uuid, vs[2].uuid]
        );
        // Another prefix: nothing.
        assert!(plan_history("x/a", &vs, &[], None, false, &rules, 3 * day)
            .delete
            .is_empty());
        // A lone current delete marker goes; not with a null version, nor
        // with other versions.
        let mut marker = data(day, 0);
        marker.state = ObjectVersionState::Complete(ObjectVersionData::DeleteMarker);
        let lone = vec![marker.clone()];
        assert_eq!(
            ids(plan_history("x/b", &lone, &[], None, false, &rules, day).delete),
            vec![marker.uuid]
        );
        assert!(plan_history("x/b", &lone, &[], None, true, &rules, day)
            .delete
            .is_empty());
        let two = vec![marker, data(day - 5, 1)];
        assert!(plan_history("x/b", &two, &[], None, false, &rules, day)
            .delete
            .is_empty());
    }

    #[test]
    fn noncurrent_transitions_follow_the_rules() {
        use crate::bucket_table::NoncurrentTransition;
        let day = 100 * DAY_MSEC;
        let big = 1 << 20;
        let mut r = rule("nc/", None, None);
        r.filter.size_lt = None;
        r.noncurrent_transitions = vec![
            NoncurrentTransition {
                days: 1,
                keep: Some(1),
                class: "STANDARD_IA".into(),
            },
            NoncurrentTransition {
                days: 5,
                keep: None,
                class: "DEEP".into(),
            },
        ];
        let rules = [r];
        // Newest first: v4 current; v3, v2, v1 noncurrent since v4, v3
        // and v2 were written; v1 is small, v2 already in STANDARD_IA.
        let vs = vec![
            blocks(day + 40, big, None),
            blocks(day + 30, big, None),
            blocks(day + 20, big, Some("STANDARD_IA")),
            blocks(day + 10, 1000, None),
        ];
        let moved = |now: u64| {
            let p = plan_history("nc/a", &vs, &[], None, false, &rules, now);
            assert!(p.delete.is_empty());
            p.transitions
                .into_iter()
                .map(|(v, c)| (v.uuid, c))
                .collect::<Vec<_>>()
        };
        // Not before the day is due.
        assert_eq!(moved(day + DAY_MSEC - 1), vec![]);
        // A day later: v3 is the noncurrent version kept from the first
        // action; v2 is there already; v1 is too small.
        assert_eq!(moved(day + 2 * DAY_MSEC), vec![]);
        // Five days later the second action (no version kept) takes v3
        // and v2 to DEEP.
        assert_eq!(
            moved(day + 6 * DAY_MSEC),
            vec![
                (vs[1].uuid, "DEEP".to_string()),
                (vs[2].uuid, "DEEP".to_string())
            ]
        );
        // The current version never moves by these rules; another prefix
        // has nothing moved.
        assert!(plan_history("x/a", &vs, &[], None, false, &rules, 9 * day)
            .transitions
            .is_empty());
        // A noncurrent expiration due wins over the transition.
        let mut both = rules[0].clone();
        both.noncurrent_expiration = Some(NoncurrentExpiration {
            days: 6,
            keep: None,
        });
        let p = plan_history("nc/a", &vs, &[], None, false, &[both], day + 7 * DAY_MSEC);
        assert_eq!(p.delete.len(), 3);
        assert!(p.transitions.is_empty());
    }

    #[test]
    fn noncurrent_rules_with_a_tag_filter_take_only_tagged_versions() {
        let day = 100 * DAY_MSEC;
        let mut r = rule("", None, None);
        r.filter.size_lt = None;
        r.filter.tags = vec![("tier".into(), "scratch".into())];
        r.noncurrent_expiration = Some(NoncurrentExpiration {
            days: 1,
            keep: None,
        });
        let vs = vec![data(day + 30, 1), data(day + 20, 1), data(day + 10, 1)];
        let scratch = vec![("tier".to_string(), "scratch".to_string())];
        // v2 tagged, v1 not: only v2 goes.
        let tags = vec![vec![], scratch, vec![]];
        let doomed = plan_history("k", &vs, &tags, None, false, &[r], 3 * day);
        assert_eq!(
            doomed
                .delete
                .into_iter()
                .map(|v| v.uuid)
                .collect::<Vec<_>>(),
            vec![vs[1].uuid]
        );
    }

    #[test]
    fn data_of_a_class_whose_redundancy_changed_is_re_encoded_in_it() {
        use garage_rpc::layout::EcCode;
        let b = Uuid::from([1u8; 32]);
        let o = |v: ObjectVersion| Object::new(b, "k".into(), vec![v]);
        let scope = garage_rpc::layout::classes::scope_of("EU");
        let two = Placement::new(EcCode::copies(2).unwrap(), scope);
        let three = Placement::new(EcCode::copies(3).unwrap(), scope);
        let in_eu = |p: Option<Placement>| {
            let mut v = blocks(1, 10, Some("EU"));
            if let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, _)) = &mut v.state
            {
                m.first_ec = p;
            }
            o(v)
        };
        let refresh: BTreeMap<String, Placement> = [("EU".to_string(), three)].into();
        let (_, to) = refresh_move(&in_eu(Some(two)), &refresh).expect("re-encoded");
        assert_eq!(to, "EU");
        // Already in the new redundancy, or written replicated (the
        // catch-up's business), or in a class not changed: nothing.
        assert!(refresh_move(&in_eu(Some(three)), &refresh).is_none());
        assert!(refresh_move(&in_eu(None), &refresh).is_none());
        assert!(refresh_move(&in_eu(Some(two)), &BTreeMap::new()).is_none());
        assert!(refresh_move(&o(blocks(1, 10, None)), &refresh).is_none());
    }

    #[test]
    fn a_pinned_bucket_moves_data_of_other_classes_to_its_default() {
        let b = Uuid::from([1u8; 32]);
        let eu = vec!["EU".to_string()];
        let o = |v: ObjectVersion| Object::new(b, "k".into(), vec![v]);
        // STANDARD data moves to the default; data already in EU stays.
        let std = o(blocks(1, 1 << 20, None));
        let (v, to) = placement_move(&std, &eu, Some("EU"), false).expect("moves");
        assert_eq!((v.uuid, to.as_str()), (std.versions()[0].uuid, "EU"));
        assert!(placement_move(&o(blocks(1, 10, Some("EU"))), &eu, Some("EU"), false).is_none());
        assert!(placement_move(
            &o(blocks(1, 10, Some("STANDARD_IA"))),
            &eu,
            Some("EU"),
            false
        )
        .is_some());
        // Coded data is not moved to another coded class.
        let mut coded = blocks(1, 10, Some("ARCHIVE"));
        if let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, _)) = &mut coded.state
        {
            m.first_ec = Some(garage_rpc::layout::EcCode::new(2, 1).unwrap().into());
        }
        assert!(placement_move(&o(coded.clone()), &eu, Some("EU"), false).is_none());
        // It is once the cluster allows `recoded-blocks`.
        let (_, to) = placement_move(&o(coded), &eu, Some("EU"), true).expect("moves");
        assert_eq!(to, "EU");
        // Inline data lives in the metadata: nothing to move.
        assert!(placement_move(&o(data(1, 10)), &eu, Some("EU"), false).is_none());
        // STANDARD is no transition's target.
        let both = vec!["STANDARD".to_string(), "EU".to_string()];
        assert!(placement_move(&o(blocks(1, 10, Some("ARCHIVE"))), &both, None, false).is_none());
        assert!(placement_move(&std, &both, None, false).is_none());
    }

    #[test]
    fn plans_follow_the_rules() {
        let b = Uuid::from([3; 32]);
        let day = 100 * DAY_MSEC;
        let rules = [
            rule("logs/", Some(LifecycleExpiration::AfterDays(2)), None),
            rule("tmp/", None, Some(1)),
        ];
        // Two days later, rounded up to midnight: not before; too large,
        // or another prefix: kept.
        let o = Object::new(b, "logs/a".into(), vec![data(day + 5, 10)]);
        assert!(plan(&o, &rules, day + 3 * DAY_MSEC - 1, Versioning::Off)
            .marker
            .is_none());
        let m = plan(&o, &rules, day + 3 * DAY_MSEC, Versioning::Off)
            .marker
            .unwrap();
        let mut merged = o.clone();
        merged.merge(&m);
        assert!(merged.last_data().is_none());
        let big = Object::new(b, "logs/b".into(), vec![data(day, 200)]);
        assert!(plan(&big, &rules, day + 10 * DAY_MSEC, Versioning::Off)
            .marker
            .is_none());
        let other = Object::new(b, "data/a".into(), vec![data(day, 10)]);
        assert!(plan(&other, &rules, day + 10 * DAY_MSEC, Versioning::Off)
            .marker
            .is_none());
        // A PUT after the expired one survives the marker.
        let newer = data(day + 3 * DAY_MSEC, 10);
        let mut replaced = o.clone();
        replaced.merge(&Object::new(b, "logs/a".into(), vec![newer.clone()]));
        replaced.merge(&m);
        assert_eq!(replaced.last_data(), Some(&newer));
        // Uploads: only under tmp/, once a day has passed.
        let u = upload(day + 7);
        let o = Object::new(b, "tmp/x".into(), vec![u.clone()]);
        assert!(plan(&o, &rules, day + DAY_MSEC - 1, Versioning::Off)
            .aborts
            .is_empty());
        let a = plan(&o, &rules, day + 2 * DAY_MSEC, Versioning::Off).aborts;
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].upload_id, a[0].timestamp), (u.uuid, u.timestamp));
        let o = Object::new(b, "logs/x".into(), vec![upload(day)]);
        assert!(plan(&o, &rules, day + 10 * DAY_MSEC, Versioning::Off)
            .aborts
            .is_empty());
    }
}
