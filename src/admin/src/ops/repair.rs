//! The metadata repairs that remove what a crash left behind:
//! `garage repair versions | mpu | block-refs | aliases` (and
//! LaunchRepairOperation). Each walks this node's copy of one table and,
//! for every entry, reads at quorum what it depends on; it deletes (or
//! links again) only what is known to be orphaned:
//!
//! - **versions**: a version whose object (or history) does not list it,
//!   or lists it aborted; a part version whose upload is deleted, or does
//!   not list it. A version that is listed nowhere is deleted only once it
//!   is older than the grace period ([`grace_ms`], 24 hours): a PUT in a
//!   bucket with versioning, and every upload's first blocks, write the
//!   version before the object lists it. A key with more history versions
//!   than the search reads is left alone (counted as unknown).
//! - **mpu**: an upload whose object version is complete or aborted, or
//!   (past the grace period) absent: the upload is deleted, and with it its
//!   parts' versions. In a live upload, a part that never finished (no
//!   etag) and started before the grace period: its version is deleted.
//! - **block-refs**: a reference whose version is deleted; and a
//!   reference whose version is not found or does not list its block,
//!   looked at a second time once every write that may have been in flight
//!   has ended (the RPC timeout, measured by the monotonic clock): the
//!   reference and the version's segment of a block are written at the
//!   same time, so at the first look it may be a write in progress; at the
//!   second it is the leftover of a write that failed (it may name a block
//!   stored nowhere, which resync would retry for ever).
//! - **aliases**: the alias table says which bucket a global name is, a
//!   key's table which bucket its local names are; the buckets' own lists
//!   are made to agree, and a name that points to a deleted bucket is
//!   removed. A bucket's claim on a name that the alias table does not
//!   confirm is dropped only if the alias entry was written after it, or
//!   (past the grace period) gives the name back if no other bucket has it.
//!
//! Each runs in the background as a worker ("Repair versions", …) whose
//! progress `garage worker list` shows; its result is logged.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use garage_model::block_ref_table::BlockRef;
use garage_model::bucket_alias_table::BucketAlias;
use garage_model::bucket_table::Bucket;
use garage_model::garage::Garage;
use garage_model::history_table::HistoryKey;
use garage_model::mpu_table::MultipartUpload;
use garage_model::object_table::ObjectVersionState;
use garage_model::version_table::{read_version, Version, VersionBacklink};
use garage_table::{EmptyKey, Table, TableSchema};
use garage_util::data::Uuid;
use garage_util::time::now_msec;
use garage_util::worker::runner::{self, Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use tokio::sync::watch;
use tracing::{info, warn};

/// Which metadata repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableRepair {
    Versions,
    Mpu,
    BlockRefs,
    Aliases,
}

impl TableRepair {
    pub fn name(self) -> &'static str {
        match self {
            TableRepair::Versions => "versions",
            TableRepair::Mpu => "mpu",
            TableRepair::BlockRefs => "block-refs",
            TableRepair::Aliases => "aliases",
        }
    }

    fn does(self) -> &'static str {
        match self {
            TableRepair::Versions => "deletes versions that no object or upload lists",
            TableRepair::Mpu => "deletes multipart uploads whose object version is gone",
            TableRepair::BlockRefs => "deletes block references of deleted or failed versions",
            TableRepair::Aliases => "makes bucket aliases agree between buckets, keys and names",
        }
    }
}

/// How long an entry that nothing lists yet is presumed to be a write in
/// progress: 24 hours, or `GARAGE_REPAIR_GRACE_SECS`.
pub fn grace_ms() -> u64 {
    garage_util::tuning::tuning().repair_grace.as_millis() as u64
}

/// What a repair found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub checked: u64,
    /// Deleted (or, for aliases, fixed).
    pub fixed: u64,
    /// Listed nowhere but younger than the grace period: kept.
    pub young: u64,
    /// Could not be decided (too many history versions, version not
    /// found): kept.
    pub unknown: u64,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} checked, {} fixed, {} kept as possibly in progress, {} kept as undecided",
            self.checked, self.fixed, self.young, self.unknown
        )
    }
}

impl Tally {
    /// Adds a finished repair's tally to the node's counters.
    fn count(&self, what: TableRepair) {
        count_run(
            what.name(),
            self.checked,
            self.fixed,
            self.young + self.unknown,
        );
    }
}

/// Adds a finished repair to the node's counters
/// (`repair_{runs,checked,fixed,kept}_total`, labelled by repair;
/// doc/metrics.md).
pub fn count_run(repair: &'static str, checked: u64, fixed: u64, kept: u64) {
    metrics::counter!("repair_runs_total", "repair" => repair).increment(1);
    metrics::counter!("repair_checked_total", "repair" => repair).increment(checked);
    metrics::counter!("repair_fixed_total", "repair" => repair).increment(fixed);
    metrics::counter!("repair_kept_total", "repair" => repair).increment(kept);
}

type Result<T> = std::result::Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Starts a repair in the background; refuses a second one of the same
/// kind while one runs.
pub fn launch(g: &Arc<Garage>, what: TableRepair) -> Result<String> {
    // Orphans are told from uploads in progress by their age on this
    // node's clock: refused while it is off its peers' (doc/ordering.md).
    garage_util::clock::check().map_err(|e| format!("repair of {} refused: {e}", what.name()))?;
    let name = format!("Repair {}", what.name());
    if g.system.workers.list_names().contains(&name) {
        return Err(format!(
            "a repair of {} is already running on this node (see `garage worker list`)",
            what.name()
        ));
    }
    let registry = &g.system.workers;
    runner::spawn(
        registry,
        RepairWorker {
            garage: g.clone(),
            what,
        },
        registry.exit_signal(),
    );
    Ok(format!(
        "repair of {} started; `garage worker list` shows its progress, the node's log its result",
        what.name()
    ))
}

/// One repair, run to its end in one step (`garage worker list`: "Repair
/// …"); a repair that fails stops (an operator starts it again), logged
/// and recorded on the worker.
struct RepairWorker {
    garage: Arc<Garage>,
    what: TableRepair,
}

impl Worker for RepairWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(format!("Repair {}", self.what.name()), self.what.does())
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        let what = self.what;
        match run(&self.garage, what, handle).await {
            Ok(t) => {
                t.count(what);
                info!("repair {}: done: {t}", what.name())
            }
            Err(e) => warn!("repair {}: stopped: {e}", what.name()),
        }
        Ok(Step::Finished)
    }

    async fn wait_for_work(&mut self) {}
}

/// Runs one repair to the end.
pub async fn run(g: &Arc<Garage>, what: TableRepair, w: &WorkerHandle) -> Result<Tally> {
    let now = now_msec();
    let grace = grace_ms();
    let mut t = Tally::default();
    let res = match what {
        TableRepair::Versions => versions(g, now, grace, &mut t, w).await,
        TableRepair::Mpu => mpus(g, now, grace, &mut t, w).await,
        TableRepair::BlockRefs => block_refs(g, &mut t, w).await,
        TableRepair::Aliases => aliases(g, now, grace, &mut t).await,
    };
    w.outcome(res.map(|_| t))
}

/// Entries read from the local store per batch.
const BATCH: usize = 256;

/// This node's copy of a table (tombstones included), read in key order,
/// [`BATCH`] entries at a time, on the blocking pool.
struct LocalScan<'a, F: TableSchema> {
    table: &'a Table<F>,
    /// The store key of the last entry read.
    after: Option<Vec<u8>>,
}

impl<'a, F: TableSchema> LocalScan<'a, F> {
    fn new(table: &'a Table<F>) -> Self {
        LocalScan { table, after: None }
    }

    /// The next batch; `None` at the end.
    async fn next(&mut self) -> Result<Option<Vec<F::E>>> {
        let data = self.table.data.clone();
        let after = self.after.take();
        let (batch, last) = tokio::task::spawn_blocking(move || {
            let range = match &after {
                Some(k) => data
                    .store
                    .range::<&[u8], _>((Bound::Excluded(k.as_slice()), Bound::Unbounded)),
                None => data.store.iter(),
            };
            let mut out = Vec::new();
            let mut last = None;
            for item in range.take(BATCH) {
                let (k, v) = item.map_err(err)?;
                last = Some(k.to_vec());
                match data.decode_stored(&k, &v) {
                    Ok(e) => out.push(e),
                    Err(e) => warn!(
                        table = F::TABLE_NAME,
                        "repair: an entry does not decode: {e}"
                    ),
                }
            }
            Ok::<_, String>((out, last))
        })
        .await
        .map_err(err)??;
        let Some(last) = last else {
            return Ok(None);
        };
        self.after = Some(last);
        Ok(Some(batch))
    }
}

/// What to do with one entry.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    Keep,
    Young,
    Unknown,
    Orphan,
}

async fn versions(
    g: &Arc<Garage>,
    now: u64,
    grace: u64,
    t: &mut Tally,
    w: &WorkerHandle,
) -> Result<()> {
    let mut scan = LocalScan::new(&g.version_table);
    let mut last_uuid: Option<Uuid> = None;
    let mut uploads = PartVersions::default();
    while let Some(batch) = scan.next().await? {
        for v in batch {
            // Head and segments of a version are adjacent: one check.
            if v.deleted.get() || last_uuid == Some(v.uuid) {
                continue;
            }
            last_uuid = Some(v.uuid);
            t.checked += 1;
            let Some(full) = read_version(&g.version_table, &v.uuid).await.map_err(err)? else {
                continue;
            };
            if full.deleted.get() {
                continue;
            }
            match version_fate(g, &full, now, grace, &mut uploads).await? {
                Fate::Keep => (),
                Fate::Young => t.young += 1,
                Fate::Unknown => t.unknown += 1,
                Fate::Orphan => {
                    info!(
                        "repair versions: deleting version {} ({:?}): nothing lists it",
                        full.uuid, full.backlink
                    );
                    g.version_table
                        .insert(&Version::deleted(full.uuid, full.backlink.clone()))
                        .await
                        .map_err(err)?;
                    t.fixed += 1;
                }
            }
        }
        w.set_progress(Some(t.to_string()));
    }
    Ok(())
}

/// The part versions of the live uploads read last (by upload id), so that
/// the versions of a large upload's parts (10 000 of them, met in any
/// order) are checked against one read of its parts, not one each. A part
/// listed after the read has a version younger than the grace period: it
/// is not deleted when missing here.
#[derive(Default)]
struct PartVersions(std::collections::HashMap<Uuid, std::collections::HashSet<Uuid>>);

/// Uploads whose part versions are kept at most.
const PART_VERSIONS_KEPT: usize = 256;

impl PartVersions {
    async fn lists(&mut self, g: &Garage, m: &MultipartUpload, version: &Uuid) -> Result<bool> {
        if !self.0.contains_key(&m.upload_id) {
            if self.0.len() >= PART_VERSIONS_KEPT {
                self.0.clear();
            }
            let parts = g.writer.upload_parts(m, 1).await.map_err(err)?;
            self.0.insert(
                m.upload_id,
                parts.into_iter().map(|(_, p)| p.version).collect(),
            );
        }
        Ok(self.0[&m.upload_id].contains(version))
    }
}

/// Whether version `v` (read whole, at quorum) is listed by what it
/// belongs to.
async fn version_fate(
    g: &Garage,
    v: &Version,
    now: u64,
    grace: u64,
    uploads: &mut PartVersions,
) -> Result<Fate> {
    let old = v.created == 0 || now.saturating_sub(v.created) > grace;
    let unlisted = if old { Fate::Orphan } else { Fate::Young };
    match &v.backlink {
        VersionBacklink::Object { bucket_id, key } => {
            let obj = g
                .object_table
                .get_quorum(bucket_id, key)
                .await
                .map_err(err)?;
            if let Some(ov) = obj
                .as_ref()
                .and_then(|o| o.versions().iter().find(|x| x.uuid == v.uuid))
            {
                return Ok(if ov.state == ObjectVersionState::Aborted {
                    Fate::Orphan
                } else {
                    Fate::Keep
                });
            }
            Ok(match in_history(g, *bucket_id, key, v.uuid).await? {
                Some(true) => Fate::Keep,
                Some(false) => unlisted,
                None => Fate::Unknown,
            })
        }
        VersionBacklink::MultipartUpload { upload_id } => {
            let mpu = g
                .mpu_table
                .get_quorum(upload_id, &EmptyKey)
                .await
                .map_err(err)?;
            Ok(match mpu {
                Some(m) if m.deleted.get() => Fate::Orphan,
                Some(m) if uploads.lists(g, &m, &v.uuid).await? => Fate::Keep,
                _ => unlisted,
            })
        }
    }
}

/// History versions of one key read at most, to find a version.
const HISTORY_SEARCH: usize = 100_000;

/// Whether the history of `key` has version `uuid` (live); `None` if the
/// key has more versions than [`HISTORY_SEARCH`].
async fn in_history(g: &Garage, bucket: Uuid, key: &str, uuid: Uuid) -> Result<Option<bool>> {
    let end = HistoryKey::after(key);
    let mut start = HistoryKey::first_of(key);
    let mut seen = 0;
    let mut skip = None;
    loop {
        let batch = g
            .history_table
            .get_range(&bucket, Some(start.clone()), None, 1000, false)
            .await
            .map_err(err)?;
        let full = batch.len() == 1000;
        for e in batch {
            if skip.as_ref() == Some(&e.hkey) {
                continue;
            }
            if e.hkey >= end {
                return Ok(Some(false));
            }
            if e.version.uuid == uuid {
                return Ok(Some(true));
            }
            seen += 1;
            start = e.hkey.clone();
        }
        if !full {
            return Ok(Some(false));
        }
        if seen >= HISTORY_SEARCH {
            return Ok(None);
        }
        skip = Some(start.clone());
    }
}

async fn mpus(
    g: &Arc<Garage>,
    now: u64,
    grace: u64,
    t: &mut Tally,
    w: &WorkerHandle,
) -> Result<()> {
    let mut scan = LocalScan::new(&g.mpu_table);
    while let Some(batch) = scan.next().await? {
        for m in batch {
            if m.deleted.get() {
                continue;
            }
            t.checked += 1;
            let Some(mut m) = g
                .mpu_table
                .get_quorum(&m.upload_id, &EmptyKey)
                .await
                .map_err(err)?
            else {
                continue;
            };
            if m.deleted.get() {
                continue;
            }
            let obj = g
                .object_table
                .get_quorum(&m.bucket_id, &m.key)
                .await
                .map_err(err)?;
            let state = obj.as_ref().and_then(|o| {
                o.versions()
                    .iter()
                    .find(|v| v.uuid == m.upload_id)
                    .map(|v| v.state.clone())
            });
            let fate = match state {
                Some(ObjectVersionState::Uploading {
                    multipart: true, ..
                }) => Fate::Keep,
                Some(_) => Fate::Orphan,
                None if now.saturating_sub(m.timestamp) > grace => Fate::Orphan,
                None => Fate::Young,
            };
            match fate {
                Fate::Orphan => {
                    info!(
                        "repair mpu: deleting upload {} of {:?}: its object version is not uploading",
                        m.upload_id, m.key
                    );
                    m.deleted.set();
                    m.parts.clear();
                    g.mpu_table.insert(&m).await.map_err(err)?;
                    t.fixed += 1;
                }
                Fate::Young => t.young += 1,
                Fate::Keep => stale_parts(g, &m, now, grace, t).await?,
                Fate::Unknown => (),
            }
        }
        w.set_progress(Some(t.to_string()));
    }
    Ok(())
}

/// The parts of live upload `m` that never finished (no etag: their
/// UploadPart failed, its coordinator dead before it could release them)
/// and started before the grace period: their versions are deleted, and
/// with them references to blocks that may be stored nowhere. Such a part
/// can never be completed (CompleteMultipartUpload matches etags).
async fn stale_parts(
    g: &Garage,
    m: &MultipartUpload,
    now: u64,
    grace: u64,
    t: &mut Tally,
) -> Result<()> {
    for (k, p) in g.writer.upload_parts(m, 1).await.map_err(err)? {
        if p.etag.is_some() {
            continue;
        }
        if now.saturating_sub(k.timestamp) <= grace {
            t.young += 1;
            continue;
        }
        let live = read_version(&g.version_table, &p.version)
            .await
            .map_err(err)?
            .is_some_and(|v| !v.deleted.get());
        if live {
            info!(
                "repair mpu: deleting version {} of part {} of upload {}: the part never finished",
                p.version, k.part_number, m.upload_id
            );
            let backlink = VersionBacklink::MultipartUpload {
                upload_id: m.upload_id,
            };
            g.version_table
                .insert(&Version::deleted(p.version, backlink))
                .await
                .map_err(err)?;
            t.fixed += 1;
        }
    }
    Ok(())
}

/// Suspect references kept in memory for their second look at most;
/// more are counted as undecided (a later run takes them).
const MAX_SUSPECTS: usize = 100_000;

/// How long a reference whose version does not list its block is given
/// before it is taken for a leftover: the longest a write of the version
/// may still be in flight (the RPC timeout), or
/// `GARAGE_REPAIR_SETTLE_SECS`. Measured by the monotonic clock.
fn settle(g: &Garage) -> Duration {
    garage_util::tuning::tuning()
        .repair_settle
        .unwrap_or_else(|| g.system.netapp.config().rpc_timeout)
}

/// What a reference's version (read at quorum) says of it.
#[derive(Debug, PartialEq, Eq)]
enum RefState {
    /// The version is live and lists the block.
    Used,
    /// The version is deleted.
    VersionDeleted,
    /// The version is not found, or does not list the block: a write in
    /// progress (the reference and the version's segment are written at
    /// the same time), or a leftover of a write that failed.
    Unlisted,
}

async fn ref_state(g: &Garage, r: &BlockRef) -> Result<RefState> {
    Ok(
        match read_version(&g.version_table, &r.version)
            .await
            .map_err(err)?
        {
            Some(v) if v.deleted.get() => RefState::VersionDeleted,
            Some(v) if v.blocks.items().any(|(_, b)| b.hash == r.block) => RefState::Used,
            _ => RefState::Unlisted,
        },
    )
}

async fn delete_ref(g: &Garage, r: &BlockRef, why: &str) -> Result<()> {
    info!(
        "repair block-refs: deleting the reference of version {} to block {}: {why}",
        r.version, r.block
    );
    let mut gone = r.clone();
    gone.deleted.set();
    g.block_ref_table.insert(&gone).await.map_err(err)
}

async fn block_refs(g: &Arc<Garage>, t: &mut Tally, w: &WorkerHandle) -> Result<()> {
    let mut suspects: Vec<BlockRef> = Vec::new();
    let mut scan = LocalScan::new(&g.block_ref_table);
    while let Some(batch) = scan.next().await? {
        for r in batch {
            if r.deleted.get() {
                continue;
            }
            t.checked += 1;
            match ref_state(g, &r).await? {
                RefState::Used => (),
                RefState::VersionDeleted => {
                    delete_ref(g, &r, "the version is deleted").await?;
                    t.fixed += 1;
                }
                RefState::Unlisted if suspects.len() < MAX_SUSPECTS => suspects.push(r),
                RefState::Unlisted => t.unknown += 1,
            }
        }
        w.set_progress(Some(t.to_string()));
    }
    if suspects.is_empty() {
        return Ok(());
    }
    // A second look once every write that may have been in flight during
    // the first has ended: what is still unlisted was left by a write that
    // failed (its coordinator died, or lost its quorum), and may name a
    // block stored nowhere. A version that a client could read had every
    // segment written at quorum before it was acknowledged, so a quorum
    // read finds it.
    let wait = settle(g);
    w.set_progress(Some(format!(
        "{t}; {} references whose version does not list them, looked at again in {wait:?}",
        suspects.len()
    )));
    tokio::time::sleep(wait).await;
    for r in suspects {
        match ref_state(g, &r).await? {
            RefState::Used => (),
            RefState::VersionDeleted => {
                delete_ref(g, &r, "the version is deleted").await?;
                t.fixed += 1;
            }
            RefState::Unlisted => {
                delete_ref(
                    g,
                    &r,
                    "the version does not list the block (a failed write)",
                )
                .await?;
                t.fixed += 1;
            }
        }
    }
    Ok(())
}

/// A live bucket, read at quorum.
async fn live_bucket(g: &Garage, id: &Uuid) -> Result<Option<Bucket>> {
    let b = g
        .bucket_table
        .get_quorum(&EmptyKey, id)
        .await
        .map_err(err)?;
    Ok(b.filter(|b| b.params().is_some()))
}

async fn aliases(g: &Arc<Garage>, now: u64, grace: u64, t: &mut Tally) -> Result<()> {
    // Global names: the alias table says which bucket has each.
    let mut scan = LocalScan::new(&g.bucket_alias_table);
    while let Some(batch) = scan.next().await? {
        for a in batch {
            if a.bucket().is_none() {
                continue;
            }
            // This node's copy may lag: decide on the quorum's.
            let a = g
                .bucket_alias_table
                .get_quorum(&EmptyKey, &a.name)
                .await
                .map_err(err)?
                .unwrap_or(a);
            let Some(id) = a.bucket() else { continue };
            t.checked += 1;
            match live_bucket(g, &id).await? {
                None => {
                    info!(
                        "repair aliases: {:?} named a deleted bucket: removed",
                        a.name
                    );
                    g.bucket_alias_table
                        .insert(&BucketAlias::new(&a.name, None))
                        .await
                        .map_err(err)?;
                    t.fixed += 1;
                }
                Some(mut b) => {
                    let p = b.params_mut().expect("live");
                    if p.aliases.get(&a.name) != Some(&true) {
                        info!(
                            "repair aliases: bucket {id} did not list its name {:?}",
                            a.name
                        );
                        p.aliases.update(a.name.clone(), true);
                        g.bucket_table.insert(&b).await.map_err(err)?;
                        t.fixed += 1;
                    }
                }
            }
        }
    }
    // Local names: each key's table says which bucket its names are.
    let mut scan = LocalScan::new(&g.key_table);
    while let Some(batch) = scan.next().await? {
        for k in batch {
            if k.params().is_none() {
                continue;
            }
            let Some(k) = g
                .key_table
                .get_quorum(&EmptyKey, &k.key_id)
                .await
                .map_err(err)?
            else {
                continue;
            };
            let Some(kp) = k.params() else { continue };
            t.checked += 1;
            let mut fixed_key = k.clone();
            let mut key_changed = false;
            for (name, _, target) in kp.local_aliases.items() {
                let Some(id) = *target else { continue };
                match live_bucket(g, &id).await? {
                    None => {
                        info!(
                            "repair aliases: local name {name:?} of key {} named a deleted bucket: removed",
                            k.key_id
                        );
                        let p = fixed_key.params_mut().expect("live");
                        p.local_aliases.update(name.clone(), None);
                        key_changed = true;
                        t.fixed += 1;
                    }
                    Some(mut b) => {
                        let p = b.params_mut().expect("live");
                        let k2 = (k.key_id.clone(), name.clone());
                        if p.local_aliases.get(&k2) != Some(&true) {
                            info!(
                                "repair aliases: bucket {id} did not list local name {name:?} of key {}",
                                k.key_id
                            );
                            p.local_aliases.update(k2, true);
                            g.bucket_table.insert(&b).await.map_err(err)?;
                            t.fixed += 1;
                        }
                    }
                }
            }
            if key_changed {
                g.key_table.insert(&fixed_key).await.map_err(err)?;
            }
        }
    }
    // The buckets' own lists.
    let mut scan = LocalScan::new(&g.bucket_table);
    while let Some(batch) = scan.next().await? {
        for b in batch {
            if b.params().is_none() {
                continue;
            }
            t.checked += 1;
            let Some(mut b) = live_bucket(g, &b.id).await? else {
                continue;
            };
            if bucket_names(g, &mut b, now, grace, t).await? {
                g.bucket_table.insert(&b).await.map_err(err)?;
            }
        }
    }
    Ok(())
}

/// Checks the names bucket `b` claims against the alias and key tables;
/// true if `b` was changed.
async fn bucket_names(
    g: &Garage,
    b: &mut Bucket,
    now: u64,
    grace: u64,
    t: &mut Tally,
) -> Result<bool> {
    let id = b.id;
    let p = b.params_mut().expect("live");
    let mut changed = false;
    let claims: Vec<(String, u64)> = p
        .aliases
        .items()
        .filter(|(_, _, on)| **on)
        .map(|(n, ts, _)| (n.clone(), ts))
        .collect();
    for (name, claimed_at) in claims {
        let alias = g
            .bucket_alias_table
            .get_quorum(&EmptyKey, &name)
            .await
            .map_err(err)?;
        let (target, written_at) = match &alias {
            Some(a) => (a.bucket(), a.state.timestamp()),
            None => (None, 0),
        };
        if target == Some(id) {
            continue;
        }
        let other_holder = match target {
            Some(o) => live_bucket(g, &o).await?.is_some(),
            None => false,
        };
        if written_at > claimed_at || other_holder {
            info!("repair aliases: bucket {id} claimed {name:?}, which the alias table gives elsewhere: dropped");
            p.aliases.update(name, false);
            changed = true;
            t.fixed += 1;
        } else if now.saturating_sub(claimed_at) > grace {
            info!("repair aliases: bucket {id} claimed {name:?}, which no bucket had: the name is its again");
            g.bucket_alias_table
                .insert(&BucketAlias::new(&name, Some(id)))
                .await
                .map_err(err)?;
            t.fixed += 1;
        } else {
            t.young += 1;
        }
    }
    let local: Vec<((String, String), u64)> = p
        .local_aliases
        .items()
        .filter(|(_, _, on)| **on)
        .map(|(k, ts, _)| (k.clone(), ts))
        .collect();
    for ((key_id, name), claimed_at) in local {
        let key = g
            .key_table
            .get_quorum(&EmptyKey, &key_id)
            .await
            .map_err(err)?;
        let target = key
            .as_ref()
            .and_then(|k| k.params())
            .and_then(|kp| kp.local_aliases.get(&name).cloned().flatten());
        if target == Some(id) {
            continue;
        }
        // The key is written first when a local name is set: a bucket
        // claim the key does not confirm, past the grace period, is stale.
        if now.saturating_sub(claimed_at) > grace {
            info!("repair aliases: bucket {id} claimed local name {name:?} of key {key_id}, which the key does not give it: dropped");
            p.local_aliases.update((key_id, name), false);
            changed = true;
            t.fixed += 1;
        } else {
            t.young += 1;
        }
    }
    Ok(changed)
}
