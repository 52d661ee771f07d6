//! `garage block purge`: drops every reference to a block, for an operator
//! who knows the block is lost for good (every replica gone) and wants the
//! objects that need it out of the way rather than failing reads forever.
//!
//! For each version that references the block: the version is marked
//! deleted (which marks its block references deleted); if the version
//! belongs to an object and is its current data, a delete marker is written
//! over it (an upload in progress is aborted instead); if it belongs to a
//! multipart upload, the upload is deleted.

use crate::notify::Cause;
use garage_table::EmptyKey;
use garage_util::crdt::Crdt;
use garage_util::data::Hash;
use garage_util::time::{increment_after, now_msec};

use crate::history_table::{HistoryEntry, HistoryKey};
use crate::object_table::{ObjectVersion, ObjectVersionData, ObjectVersionState};
use crate::object_write::{ObjectWriter, WriteError};
use crate::version_table::{read_version, Version, VersionBacklink};

/// Block purge over the object-write protocol's tables: every object
/// and history write goes through [`ObjectWriter`].
pub struct Purge {
    pub writer: ObjectWriter,
}

/// What a purge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PurgeCount {
    pub versions: usize,
    pub objects_deleted: usize,
    pub uploads_aborted: usize,
    /// Versions kept because of their object lock.
    pub locked: usize,
}

/// At most this many versions per block are purged in one call (a block
/// referenced by more is purged by calling again).
const MAX_REFS: usize = 100_000;

impl Purge {
    pub async fn purge_block(&self, hash: &Hash) -> Result<PurgeCount, WriteError> {
        let w = &self.writer;
        let mut count = PurgeCount::default();
        let now = now_msec();
        let refs = self
            .writer
            .block_refs
            .get_range(hash, None, None, MAX_REFS, false)
            .await?;
        for r in refs {
            let Some(version) = read_version(&w.versions, &r.version).await? else {
                continue;
            };
            match &version.backlink {
                VersionBacklink::Object { bucket_id, key } => {
                    let obj = w.objects.get(bucket_id, key).await?;
                    let in_entry = obj
                        .as_ref()
                        .and_then(|o| o.versions().iter().find(|v| v.uuid == r.version));
                    let versioned = obj.as_ref().is_some_and(|o| o.is_versioned());
                    let history = match versioned {
                        true => self.find_in_history(*bucket_id, key, r.version).await?,
                        false => None,
                    };
                    // A locked version keeps everything, its blocks'
                    // references included: no purge deletes it.
                    let mut lock = in_entry.map(|v| v.lock.clone()).unwrap_or_default();
                    if let Some(h) = &history {
                        lock.merge(&h.version.lock);
                    }
                    if lock.check_delete(now, false).is_err() {
                        count.locked += 1;
                        continue;
                    }
                    if let Some(v) = in_entry {
                        // A versioned key loses the version itself (the
                        // next one becomes current), as does an upload in
                        // progress; another key gets a delete marker over
                        // it, written in order.
                        let hidden = match (versioned, &v.state) {
                            (true, _) | (false, ObjectVersionState::Uploading { .. }) => {
                                w.remove_version(*bucket_id, key, v, None, &Cause::silent())
                                    .await?;
                                true
                            }
                            (
                                false,
                                ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..)),
                            ) => {
                                w.write_version(
                                    *bucket_id,
                                    key,
                                    &marker_over(v),
                                    None,
                                    &Cause::silent(),
                                )
                                .await?;
                                true
                            }
                            _ => false,
                        };
                        if hidden {
                            count.objects_deleted += 1;
                        }
                    }
                    if let Some(h) = history.filter(|h| !h.is_deleted()) {
                        match h.delete(now, false) {
                            Ok(gone) => {
                                w.update_entries(None, Some(&gone), &Cause::silent())
                                    .await?;
                                count.objects_deleted += 1;
                            }
                            Err(_) => {
                                count.locked += 1;
                                continue;
                            }
                        }
                    }
                }
                VersionBacklink::MultipartUpload { upload_id } => {
                    if let Some(mut mpu) = w.mpus.get(upload_id, &EmptyKey).await? {
                        if !mpu.deleted.get() {
                            mpu.deleted.set();
                            mpu.parts.clear();
                            w.mpus.insert(&mpu).await?;
                            count.uploads_aborted += 1;
                        }
                    }
                }
            }
            w.versions
                .insert(&Version::deleted(version.uuid, version.backlink.clone()))
                .await?;
            count.versions += 1;
        }
        Ok(count)
    }
}

impl Purge {
    /// Version `uuid` of `key` in the history table, if it is there
    /// (looked for among the key's first [`MAX_REFS`] versions).
    async fn find_in_history(
        &self,
        bucket: garage_util::data::Uuid,
        key: &str,
        uuid: garage_util::data::Uuid,
    ) -> Result<Option<HistoryEntry>, garage_table::Error> {
        let mut start = HistoryKey::first_of(key);
        let end = HistoryKey::after(key);
        let mut seen = 0;
        while seen < MAX_REFS {
            let batch = self
                .writer
                .history
                .get_range(&bucket, Some(start.clone()), None, 1000, false)
                .await?;
            let full = batch.len() == 1000;
            for e in batch {
                if e.hkey >= end {
                    return Ok(None);
                }
                seen += 1;
                if e.version.uuid == uuid {
                    return Ok(Some(e));
                }
                start = e.hkey.clone();
            }
            if !full {
                break;
            }
        }
        Ok(None)
    }
}

/// The delete marker that hides `v`: stamped now, and after `v` even if
/// `v` was stamped by a clock ahead (the ordered write then puts it after
/// anything newer a replica holds).
fn marker_over(v: &ObjectVersion) -> ObjectVersion {
    let mut m = ObjectWriter::delete_marker(v.versioning);
    m.timestamp = m.timestamp.max(increment_after(v.timestamp));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object_table::ObjectVersionMeta;

    #[test]
    fn the_marker_over_a_version_stamped_ahead_comes_after_it() {
        let meta = ObjectVersionMeta {
            headers: vec![],
            size: 1 << 20,
            etag: "e".into(),
            storage_class: None,
            first_ec: None,
            recoded: 0,
        };
        let v = ObjectVersion::new(
            garage_util::data::gen_uuid(),
            now_msec() + 60_000,
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(
                meta,
                Hash::from([1u8; 32]),
            )),
            Default::default(),
        );
        let o = marker_over(&v);
        assert!(o.timestamp > v.timestamp);
        assert_ne!(o.uuid, v.uuid);
        assert_eq!(
            o.state,
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
        );
        let behind = ObjectVersion { timestamp: 1, ..v };
        assert!(marker_over(&behind).timestamp >= now_msec() - 60_000);
    }
}
