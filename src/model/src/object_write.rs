//! The object-write protocol: the one place where object entries (and the
//! history entries that mirror them) are written. Every writer goes
//! through [`ObjectWriter`]: the S3 handlers, the lifecycle worker, block
//! purge and the admin operations (the structure test checks that no
//! other file writes the object or history table).
//!
//! New versions (PutObject, CopyObject, CompleteMultipartUpload, delete
//! markers from DeleteObject(s), lifecycle expirations, purge) are
//! ordered: a write acknowledged after another write of the same key was
//! acknowledged must win over it, whatever the nodes' clocks say. The
//! version is stamped by this node's hybrid clock
//! ([`garage_util::time::stamp`]) and written with one ordered quorum
//! write ([`garage_table::Table::insert_ordered`]). A replica holding a
//! newer complete version refuses it and reports that version's stamp;
//! then the version is written again under a new id, stamped above it
//! (its blocks, if any, first referenced under the new id), and the
//! refused one is withdrawn. Only then is the caller answered. When clocks
//! agree nothing is refused: one round trip, as a plain write. The
//! argument: doc/ordering.md.
//!
//! The other writes change versions already in the entry, keeping their
//! stamps: an upload started or aborted, a version withdrawn by its id,
//! its metadata updated (tags, object lock), a version moved to another
//! storage class.
//!
//! Every write names its [`Cause`] (the S3 operation and its request, or
//! the node's own work): once the write is done, and before the caller
//! answers its client, the bucket notification event it makes (if the
//! bucket has a rule for it) is committed to this node's outbox
//! ([`crate::notify`]). A new version that the bucket's replication rules
//! send somewhere is written with those destinations pending in its
//! history entry, and queued for them at the same point
//! ([`crate::replication`]). A replica's write (`Cause::replica`) is
//! marked so in its history entry, and sent nowhere.

use std::sync::Arc;

use garage_table::Table;
use garage_util::data::{gen_uuid, Uuid};
use garage_util::time::stamp;
use tracing::{info, warn};

use crate::block_ref_table::{BlockRef, BlockRefTable};
use crate::bucket_table::Versioning;
use crate::history_table::{HistoryEntry, HistoryKey, HistoryTable};
use crate::mpu_table::{MpuPartTable, MpuTable, MultipartUpload};
use crate::notify::{Cause, Notifier};
use crate::object_table::{
    Object, ObjectTable, ObjectVersion, ObjectVersionData, ObjectVersionState, VersionId,
    MAX_RESTAMPS,
};
use crate::replication::state::ReplicationState;
use crate::replication::{Replicator, Task};
use crate::version_table::{Version, VersionBacklink, VersionBlock, VersionBlockKey, VersionTable};

/// The blocks of a version with data in blocks, by position: what writing
/// it again under a new id needs.
pub type BlockList = [(VersionBlockKey, VersionBlock)];

/// Why an object write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Table(#[from] garage_table::Error),
    /// Newer writes of the key were acknowledged each time this one was
    /// stamped again, [`MAX_RESTAMPS`] times.
    #[error("newer writes of this key kept overtaking this one; try again")]
    Overtaken,
    /// The version's object lock forbids its deletion now.
    #[error("the version is protected by its object lock: {0}")]
    Locked(crate::object_lock::Locked),
    /// A version with data in blocks was given without its block list
    /// (a bug of the caller).
    #[error("a version with blocks was written without its block list")]
    NoBlockList,
}

/// The tables an object write touches.
#[derive(Clone)]
pub struct ObjectWriter {
    pub objects: Arc<Table<ObjectTable>>,
    pub versions: Arc<Table<VersionTable>>,
    pub block_refs: Arc<Table<BlockRefTable>>,
    pub mpus: Arc<Table<MpuTable>>,
    pub parts: Arc<Table<MpuPartTable>>,
    pub history: Arc<Table<HistoryTable>>,
    /// Bucket notifications: each write's event is queued here once the
    /// write is done, before the caller answers its client.
    pub notifier: Arc<Notifier>,
    /// Bucket replication: each new version's destinations are pending in
    /// its history entry, and queued here once it is written.
    pub replicator: Arc<Replicator>,
}

impl ObjectWriter {
    /// Queues the event `cause` gives for version `v` of `key` (a version
    /// written, or one removed when `removed`), if any.
    async fn notify(
        &self,
        bucket: Uuid,
        key: &str,
        v: &ObjectVersion,
        removed: bool,
        sequencer: u64,
        cause: &Cause,
    ) {
        if let Some(name) = cause.event(v, removed) {
            self.notifier
                .emit(bucket, key, v, name, sequencer, cause.req.as_deref())
                .await;
        }
    }

    /// A new delete marker, stamped now by this node's hybrid clock (the
    /// ordered write puts it after anything newer a replica holds).
    pub fn delete_marker(versioning: Versioning) -> ObjectVersion {
        ObjectVersion::new(
            gen_uuid(),
            stamp(),
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
            versioning,
        )
    }

    /// Writes complete version `v` of `key` so that it comes after every
    /// write of the key acknowledged before (see the module). `blocks`:
    /// the version's blocks when its data is in blocks. Returns the
    /// version as written: `v`, or `v` under a new id and stamp.
    pub async fn write_version(
        &self,
        bucket: Uuid,
        key: &str,
        v: &ObjectVersion,
        blocks: Option<&BlockList>,
        cause: &Cause,
    ) -> Result<ObjectVersion, WriteError> {
        let mut out = self
            .write_versions_with(bucket, vec![(key.to_string(), v.clone(), blocks)], cause)
            .await?;
        Ok(out.pop().expect("one version in, one out").1)
    }

    /// [`ObjectWriter::write_version`] for many keys at once, versions
    /// without blocks (delete markers): one ordered write for all.
    pub async fn write_versions(
        &self,
        bucket: Uuid,
        vs: &[(String, ObjectVersion)],
        cause: &Cause,
    ) -> Result<Vec<(String, ObjectVersion)>, WriteError> {
        self.write_versions_with(
            bucket,
            vs.iter()
                .map(|(k, v)| (k.clone(), v.clone(), None))
                .collect(),
            cause,
        )
        .await
    }

    async fn write_versions_with(
        &self,
        bucket: Uuid,
        todo: Vec<(String, ObjectVersion, Option<&BlockList>)>,
        cause: &Cause,
    ) -> Result<Vec<(String, ObjectVersion)>, WriteError> {
        let mut plans = Vec::with_capacity(todo.len());
        for (key, v, _) in &todo {
            plans.push(self.replicator.plan(bucket, key, v, cause).await);
        }
        let written = self.write_ordered(bucket, todo, &plans).await?;
        for ((key, v), dests) in written.iter().zip(&plans) {
            self.replicator
                .enqueue(&Task::of(bucket, key, v), dests)
                .await;
            self.notify(bucket, key, v, false, v.timestamp, cause).await;
        }
        Ok(written)
    }

    /// `plans[i]`: the replication destinations of `todo[i]`, pending in
    /// its history entry.
    async fn write_ordered(
        &self,
        bucket: Uuid,
        mut todo: Vec<(String, ObjectVersion, Option<&BlockList>)>,
        plans: &[Vec<String>],
    ) -> Result<Vec<(String, ObjectVersion)>, WriteError> {
        let mut done: Vec<Option<ObjectVersion>> = vec![None; todo.len()];
        // Indices in `todo` still to write.
        let mut left: Vec<usize> = (0..todo.len()).collect();
        for _ in 0..=MAX_RESTAMPS {
            let objs: Vec<Object> = left
                .iter()
                .map(|&i| Object::new(bucket, todo[i].0.clone(), vec![todo[i].1.clone()]))
                .collect();
            let hs: Vec<HistoryEntry> = left
                .iter()
                .filter(|&&i| todo[i].1.in_history() && todo[i].1.is_complete())
                .map(|&i| {
                    let mut h = HistoryEntry::new(bucket, &todo[i].0, todo[i].1.clone());
                    h.replication = ReplicationState::pending(plans[i].iter().cloned());
                    h
                })
                .collect();
            let history = async {
                match hs.is_empty() {
                    true => Ok(()),
                    false => self.history.insert_many(&hs).await,
                }
            };
            let (refused, h) = tokio::join!(self.objects.insert_ordered(&objs), history);
            let (refused, ()) = (refused?, h?);
            let mut again = Vec::new();
            for (&i, r) in left.iter().zip(refused) {
                match r {
                    None => done[i] = Some(todo[i].1.clone()),
                    Some(newer) => again.push((i, newer)),
                }
            }
            if again.is_empty() {
                return Ok(todo
                    .into_iter()
                    .zip(done)
                    .map(|((k, _, _), v)| (k, v.expect("every version written")))
                    .collect());
            }
            left.clear();
            for (i, newer) in again {
                let (key, old, blocks) = &todo[i];
                let v = self.restamp(bucket, key, old, newer, *blocks).await?;
                todo[i].1 = v;
                left.push(i);
            }
        }
        Err(WriteError::Overtaken)
    }

    /// `old` was refused: a replica holds a version stamped `newer` that
    /// sorts after it. Returns `old` under a new, random id (never one
    /// derived from its own: two requests stamping the same version again
    /// would write one id at two timestamps, and the older one leaving
    /// the entry would delete the newer one's blocks), stamped after
    /// `newer`, with its blocks (if any) referenced under the new id; then
    /// withdraws `old`, whose write no client was told of.
    async fn restamp(
        &self,
        bucket: Uuid,
        key: &str,
        old: &ObjectVersion,
        newer: u64,
        blocks: Option<&BlockList>,
    ) -> Result<ObjectVersion, WriteError> {
        let mut v = old.clone();
        v.uuid = gen_uuid();
        v.timestamp = garage_util::time::increment_after(newer.max(old.timestamp));
        metrics::counter!("api_ordered_restamps_total").increment(1);
        info!(
            %key,
            old_stamp = old.timestamp,
            newer_stamp = newer,
            new_stamp = v.timestamp,
            "write overtaken by a newer stamp (a clock behind, or a slower write of the key): stamped again"
        );
        let backlink = VersionBacklink::Object {
            bucket_id: bucket,
            key: key.to_string(),
        };
        let has_blocks = matches!(
            v.state,
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..))
        );
        if has_blocks {
            let blocks = blocks.ok_or(WriteError::NoBlockList)?;
            let segments = Version::segments(v.uuid, &backlink, blocks.iter().map(|(k, b)| (k, b)));
            let refs: Vec<BlockRef> = blocks
                .iter()
                .map(|(_, b)| BlockRef::to_block(b, v.uuid))
                .collect();
            let (a, b) = tokio::join!(
                self.versions.insert_many(&segments),
                self.block_refs.insert_many(&refs)
            );
            if let Err(e) = a.and(b) {
                // Nothing refers to the new id: its references and version
                // go, durably (the client gets the error and retries).
                let gone: Vec<BlockRef> = refs
                    .iter()
                    .map(|r| BlockRef::new(r.block, v.uuid, true))
                    .collect();
                let dead = [Version::deleted(v.uuid, backlink.clone())];
                let (x, y) = tokio::join!(
                    self.block_refs.insert_later(&gone),
                    self.versions.insert_later(&dead)
                );
                if let Err(e) = x.and(y) {
                    warn!(%key, "cannot queue the release of a failed rewrite: {e}");
                }
                return Err(e.into());
            }
        }
        // Withdraw the refused version. Replicas that stored it drop it
        // from the object entry once they hold the newer version (which a
        // quorum holds); its history entry and its blocks go here. Its
        // blocks are referenced under the new id already, so their count
        // never falls to zero.
        if old.in_history() && old.is_complete() {
            let w = [HistoryEntry::withdrawn(bucket, key, old.clone())];
            if let Err(e) = self.history.insert_or_queue(&w).await {
                warn!(%key, "cannot withdraw an overtaken version from the history: {e}");
            }
        }
        if has_blocks {
            let dead = [Version::deleted(old.uuid, backlink)];
            if let Err(e) = self.versions.insert_or_queue(&dead).await {
                warn!(%key, "cannot release the blocks of an overtaken version: {e}");
            }
        }
        Ok(v)
    }

    /// Writes `versions` of `key`, already stamped, into the object entry,
    /// and those with ids of their own into the history table at the same
    /// time: metadata updates of existing versions (tags, object lock),
    /// and versions committed through the object's compare-and-set
    /// register (conditional writes).
    pub async fn update_versions(
        &self,
        bucket: Uuid,
        key: &str,
        versions: Vec<ObjectVersion>,
        cause: &Cause,
    ) -> Result<(), garage_table::Error> {
        // The event is the newest complete version's (a commit); it is
        // the one replicated, unless the write is a replica's.
        let newest = versions
            .iter()
            .filter(|v| v.is_complete())
            .max_by_key(|v| v.sort_key())
            .cloned();
        let dests = match &newest {
            Some(v) => self.replicator.plan(bucket, key, v, cause).await,
            None => Vec::new(),
        };
        let hs: Vec<HistoryEntry> = versions
            .iter()
            .filter(|v| v.in_history() && v.is_complete())
            .map(|v| {
                let mut h = HistoryEntry::new(bucket, key, v.clone());
                if cause.replica {
                    h.replication = ReplicationState::replica();
                } else if newest.as_ref().is_some_and(|n| n.uuid == v.uuid) {
                    h.replication = ReplicationState::pending(dests.iter().cloned());
                }
                h
            })
            .collect();
        let obj = Object::new(bucket, key.to_string(), versions);
        if hs.is_empty() {
            self.objects.insert(&obj).await?;
        } else {
            let (a, b) = tokio::join!(self.objects.insert(&obj), self.history.insert_many(&hs));
            a.and(b)?;
        }
        if let Some(v) = newest {
            self.replicator
                .enqueue(&Task::of(bucket, key, &v), &dests)
                .await;
            self.notify(bucket, key, &v, false, v.timestamp, cause)
                .await;
        }
        Ok(())
    }

    /// Writes an object entry and a history entry as given, either or
    /// both, at the same time: a version's tags, lock or ACL changed where
    /// it is listed (its history entry carries its own stamps for them), a
    /// version no longer in its object entry marked deleted (purge).
    pub async fn update_entries(
        &self,
        obj: Option<&Object>,
        history: Option<&HistoryEntry>,
        cause: &Cause,
    ) -> Result<(), garage_table::Error> {
        self.write_entries(obj, history).await?;
        // The version changed: the history entry's, else the object
        // entry's only (or current) version.
        let subject = match (history, obj) {
            (Some(h), _) => Some((h.bucket_id, h.key.clone(), h.version.clone())),
            (None, Some(o)) => {
                let v = match o.versions() {
                    [v] => Some(v),
                    _ => o.last_complete(),
                };
                v.map(|v| (o.bucket_id, o.key.clone(), v.clone()))
            }
            (None, None) => None,
        };
        if let Some((bucket, key, v)) = subject {
            let removed = history.is_some_and(|h| h.is_deleted());
            let seq = garage_util::time::stamp();
            self.notify(bucket, &key, &v, removed, seq, cause).await;
        }
        Ok(())
    }

    async fn write_entries(
        &self,
        obj: Option<&Object>,
        history: Option<&HistoryEntry>,
    ) -> Result<(), garage_table::Error> {
        let object = async {
            match obj {
                Some(o) => self.objects.insert(o).await,
                None => Ok(()),
            }
        };
        let history = async {
            match history {
                Some(h) => self.history.insert(h).await,
                None => Ok(()),
            }
        };
        let (a, b) = tokio::join!(object, history);
        a.and(b)
    }

    /// Starts an upload: `obj` lists its version, uploading, written in
    /// order with `mpu`, its upload entry. Returns the stamp of a newer
    /// complete version a replica holds, if one refused it (then the
    /// upload entry is withdrawn: the caller stamps again).
    pub async fn start_upload(
        &self,
        obj: &Object,
        mpu: &MultipartUpload,
    ) -> Result<Option<u64>, garage_table::Error> {
        let (a, b) = tokio::join!(
            self.objects.insert_ordered(std::slice::from_ref(obj)),
            self.mpus.insert(mpu)
        );
        b?;
        let newer = a?.pop().flatten();
        if newer.is_some() {
            let (_, gone) = mpu.abort_entries();
            self.mpus.insert(&gone).await?;
        }
        Ok(newer)
    }

    /// Aborts a multipart upload: its object version is marked aborted
    /// and its entry deleted (the hooks then release its parts). `mpu`
    /// may be an entry the caller did not read (a
    /// [`MultipartUpload::new`] of the upload: the merge keeps the rest).
    pub async fn abort_upload(&self, mpu: &MultipartUpload) -> Result<(), garage_table::Error> {
        let (aborted, gone) = mpu.abort_entries();
        let (a, b) = tokio::join!(self.objects.insert(&aborted), self.mpus.insert(&gone));
        a.and(b)
    }

    /// Marks a version that never became current aborted, and deletes its
    /// version entry (hence its blocks): the object entry does not list
    /// an upload in progress, so aborting it there releases nothing. What
    /// cannot be written now is queued on this node and sent until it is
    /// (the cluster may be split right now); an error is logged.
    pub async fn abort_version(
        &self,
        bucket: Uuid,
        key: &str,
        uuid: Uuid,
        timestamp: u64,
        versioning: Versioning,
    ) {
        let aborted = Object::new(
            bucket,
            key.to_string(),
            vec![ObjectVersion::new(
                uuid,
                timestamp,
                ObjectVersionState::Aborted,
                versioning,
            )],
        );
        if let Err(e) = self.objects.insert_or_queue(&[aborted]).await {
            warn!("cannot mark the failed upload of {key:?} aborted: {e}");
        }
        let backlink = VersionBacklink::Object {
            bucket_id: bucket,
            key: key.to_string(),
        };
        let deleted = Version::deleted(uuid, backlink);
        if let Err(e) = self.versions.insert_or_queue(&[deleted]).await {
            warn!("cannot release the blocks of the failed upload of {key:?}: {e}");
        }
    }

    /// Deletes version `vid` of `key` (DeleteObject with a version id, the
    /// lifecycle worker): it goes for good (its blocks with it); if it was
    /// current, the one before it becomes current. Returns whether it was
    /// a delete marker. Deleting a version that does not exist succeeds,
    /// as in S3. A locked version is [`WriteError::Locked`] (`bypass`: the
    /// caller may and asks to bypass governance retention); its lock is
    /// read from both of its entries, at quorum, before anything is
    /// written.
    pub async fn delete_version(
        &self,
        bucket: Uuid,
        key: &str,
        vid: VersionId,
        bypass: bool,
        cause: &Cause,
    ) -> Result<bool, WriteError> {
        let k = key.to_string();
        let (target, history) = match vid {
            VersionId::Null => {
                let obj = self.objects.get(&bucket, &k).await?;
                let null = obj.as_ref().and_then(|o| match o.null_version() {
                    Some(v) => Some(v.clone()),
                    None if !o.is_versioned() => o.last_complete().cloned(),
                    None => None,
                });
                (null, None)
            }
            VersionId::Id(ts, uuid) => {
                let hkey = HistoryKey::of(key, ts, uuid);
                let (obj, h) = tokio::join!(
                    self.objects.get(&bucket, &k),
                    self.history.get(&bucket, &hkey)
                );
                let (obj, h) = (obj?, h?);
                let in_entry = obj
                    .as_ref()
                    .and_then(|o| o.version(ts, uuid))
                    .filter(|v| v.in_history() && v.is_complete())
                    .cloned();
                let mut h = h.or_else(|| {
                    in_entry
                        .as_ref()
                        .map(|v| HistoryEntry::new(bucket, key, v.clone()))
                });
                if let (Some(h), Some(e)) = (h.as_mut(), &in_entry) {
                    garage_util::crdt::Crdt::merge(&mut h.version.lock, &e.lock);
                }
                let v = h.as_ref().map(|h| h.version.clone());
                (v, h)
            }
        };
        let Some(v) = target else {
            return Ok(false);
        };
        let now = garage_util::time::now_msec();
        v.lock
            .check_delete(now, bypass)
            .map_err(WriteError::Locked)?;
        let was_marker = matches!(
            v.state,
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
        );
        let gone = match history {
            Some(h) => Some(h.delete(now, bypass).map_err(WriteError::Locked)?),
            None => None,
        };
        self.remove_version(bucket, key, &v, gone.as_ref(), cause)
            .await?;
        Ok(was_marker)
    }

    /// Withdraws version `v` of `key` (DeleteObject with a version id,
    /// purge): it leaves the object entry (the next one becomes current),
    /// and `history`, its history entry marked deleted, is written with
    /// it. The caller checked its object lock.
    pub async fn remove_version(
        &self,
        bucket: Uuid,
        key: &str,
        v: &ObjectVersion,
        history: Option<&HistoryEntry>,
        cause: &Cause,
    ) -> Result<(), garage_table::Error> {
        let removed = Object::new(
            bucket,
            key.to_string(),
            vec![ObjectVersion {
                state: ObjectVersionState::Aborted,
                ..v.clone()
            }],
        );
        self.write_entries(Some(&removed), history).await?;
        let seq = garage_util::time::stamp();
        self.notify(bucket, key, v, true, seq, cause).await;
        Ok(())
    }

    /// Writes `moved`, a version whose blocks moved to another storage
    /// class, into its object entry and, if it has a version id, its
    /// history entry: each only if it still lists the version, so that an
    /// entry deleted and collected meanwhile is not brought back.
    pub async fn write_moved(
        &self,
        bucket: Uuid,
        key: &str,
        moved: &ObjectVersion,
        cause: &Cause,
    ) -> Result<(), garage_table::Error> {
        let hkey = HistoryKey::of(key, moved.timestamp, moved.uuid);
        let key_s = key.to_string();
        let (o, h) = tokio::join!(self.objects.get(&bucket, &key_s), async {
            match moved.in_history() {
                true => self.history.get(&bucket, &hkey).await,
                false => Ok(None),
            }
        });
        let listed = o?.is_some_and(|o| o.version(moved.timestamp, moved.uuid).is_some());
        let in_history = h?.is_some_and(|h| !h.is_deleted());
        let history = async {
            match in_history {
                true => {
                    self.history
                        .insert(&HistoryEntry::new(bucket, key, moved.clone()))
                        .await
                }
                false => Ok(()),
            }
        };
        let object = async {
            match listed {
                true => {
                    self.objects
                        .insert(&Object::new(bucket, key.to_string(), vec![moved.clone()]))
                        .await
                }
                false => Ok(()),
            }
        };
        let (h, o) = tokio::join!(history, object);
        h.and(o)?;
        if listed {
            let seq = garage_util::time::stamp();
            self.notify(bucket, key, moved, false, seq, cause).await;
        }
        Ok(())
    }
}
