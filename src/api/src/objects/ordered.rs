//! Ordered writes of new versions: PutObject, CopyObject,
//! CompleteMultipartUpload and delete markers (DeleteObject(s), lifecycle
//! expirations). A write acknowledged after another write of the same key
//! was acknowledged must win over it, whatever the nodes' clocks say.
//!
//! The version is stamped by this node's hybrid clock
//! ([`garage_util::time::stamp`]) and written with one ordered quorum
//! write ([`garage_table::Table::insert_ordered`]). A replica holding a
//! newer complete version refuses it and reports that version's stamp;
//! then the version is written again under a new id, stamped above it
//! (its blocks, if any, first referenced under the new id), and the
//! refused one is withdrawn. Only then is the client answered. When clocks
//! agree nothing is refused: one round trip, as a plain write. The
//! argument: doc/ordering.md.

use garage_model::block_ref_table::BlockRef;
use garage_model::history_table::HistoryEntry;
use garage_model::object_table::MAX_RESTAMPS;
use garage_model::object_table::{Object, ObjectVersion, ObjectVersionData, ObjectVersionState};
use garage_model::version_table::{Version, VersionBacklink, VersionBlock, VersionBlockKey};
use garage_util::data::{gen_uuid, Uuid};
use tracing::{info, warn};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};

/// The blocks of a version with data in blocks, by position: what writing
/// it again under a new id needs.
pub type BlockList = [(VersionBlockKey, VersionBlock)];

impl Api {
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
    ) -> ApiResult<ObjectVersion> {
        let mut out = self
            .write_versions_with(bucket, vec![(key.to_string(), v.clone(), blocks)])
            .await?;
        Ok(out.pop().expect("one version in, one out").1)
    }

    /// [`Api::write_version`] for many keys at once, versions without
    /// blocks (delete markers): one ordered write for all.
    pub async fn write_versions(
        &self,
        bucket: Uuid,
        vs: &[(String, ObjectVersion)],
    ) -> ApiResult<Vec<(String, ObjectVersion)>> {
        self.write_versions_with(
            bucket,
            vs.iter()
                .map(|(k, v)| (k.clone(), v.clone(), None))
                .collect(),
        )
        .await
    }

    async fn write_versions_with(
        &self,
        bucket: Uuid,
        mut todo: Vec<(String, ObjectVersion, Option<&BlockList>)>,
    ) -> ApiResult<Vec<(String, ObjectVersion)>> {
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
                .map(|&i| HistoryEntry::new(bucket, &todo[i].0, todo[i].1.clone()))
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
        Err(ApiError::Unavailable(
            "newer writes of this key kept overtaking this one; try again".into(),
        ))
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
    ) -> ApiResult<ObjectVersion> {
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
            let blocks = blocks.ok_or_else(|| {
                ApiError::Internal(
                    "a version with blocks was written without its block list".into(),
                )
            })?;
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
}
