//! `garage block purge`: drops every reference to a block, for an operator
//! who knows the block is lost for good (every replica gone) and wants the
//! objects that need it out of the way rather than failing reads forever.
//!
//! For each version that references the block: the version is marked
//! deleted (which marks its block references deleted); if the version
//! belongs to an object and is its current data, a delete marker is written
//! over it (an upload in progress is aborted instead); if it belongs to a
//! multipart upload, the upload is deleted.

use std::sync::Arc;

use garage_table::{EmptyKey, Table};
use garage_util::crdt::Crdt;
use garage_util::data::{gen_uuid, Hash};
use garage_util::time::now_msec;

use crate::block_ref_table::BlockRefTable;
use crate::history_table::{HistoryEntry, HistoryKey, HistoryTable};
use crate::mpu_table::MpuTable;
use crate::object_table::{
    Object, ObjectTable, ObjectVersion, ObjectVersionData, ObjectVersionState,
};
use crate::version_table::{read_version, Version, VersionBacklink, VersionTable};

pub struct Purge {
    pub objects: Arc<Table<ObjectTable>>,
    pub versions: Arc<Table<VersionTable>>,
    pub block_refs: Arc<Table<BlockRefTable>>,
    pub mpus: Arc<Table<MpuTable>>,
    pub history: Arc<Table<HistoryTable>>,
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
    pub async fn purge_block(&self, hash: &Hash) -> Result<PurgeCount, garage_table::Error> {
        let mut count = PurgeCount::default();
        let now = now_msec();
        let refs = self
            .block_refs
            .get_range(hash, None, None, MAX_REFS, false)
            .await?;
        for r in refs {
            let Some(version) = read_version(&self.versions, &r.version).await? else {
                continue;
            };
            match &version.backlink {
                VersionBacklink::Object { bucket_id, key } => {
                    let obj = self.objects.get(bucket_id, key).await?;
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
                        // next one becomes current); another key gets a
                        // delete marker over it.
                        let over = match versioned {
                            true => Some(ObjectVersion {
                                state: ObjectVersionState::Aborted,
                                ..v.clone()
                            }),
                            false => overwrite(v),
                        };
                        if let Some(over) = over {
                            self.objects
                                .insert(&Object::new(*bucket_id, key.clone(), vec![over]))
                                .await?;
                            count.objects_deleted += 1;
                        }
                    }
                    if let Some(h) = history.filter(|h| !h.is_deleted()) {
                        match h.delete(now, false) {
                            Ok(gone) => {
                                self.history.insert(&gone).await?;
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
                    if let Some(mut mpu) = self.mpus.get(upload_id, &EmptyKey).await? {
                        if !mpu.deleted.get() {
                            mpu.deleted.set();
                            mpu.parts.clear();
                            self.mpus.insert(&mpu).await?;
                            count.uploads_aborted += 1;
                        }
                    }
                }
            }
            self.versions
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

/// The object version that hides `v`: a delete marker just after it if it
/// holds data, the same version aborted if it is still uploading.
fn overwrite(v: &ObjectVersion) -> Option<ObjectVersion> {
    match &v.state {
        ObjectVersionState::Uploading { .. } => Some(ObjectVersion {
            state: ObjectVersionState::Aborted,
            ..v.clone()
        }),
        ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..)) => {
            Some(ObjectVersion::new(
                gen_uuid(),
                now_msec().max(v.timestamp + 1),
                ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
                v.versioning,
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object_table::ObjectVersionMeta;

    #[test]
    fn data_is_hidden_by_a_newer_delete_marker_and_uploads_are_aborted() {
        let meta = ObjectVersionMeta {
            headers: vec![],
            size: 1 << 20,
            etag: "e".into(),
            storage_class: None,
            first_ec: None,
        };
        let v = ObjectVersion::new(
            gen_uuid(),
            now_msec() + 60_000,
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(
                meta.clone(),
                Hash::from([1u8; 32]),
            )),
            Default::default(),
        );
        let o = overwrite(&v).unwrap();
        assert!(o.timestamp > v.timestamp);
        assert_ne!(o.uuid, v.uuid);
        assert_eq!(
            o.state,
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
        );

        let up = ObjectVersion {
            state: ObjectVersionState::Uploading {
                multipart: true,
                headers: vec![],
            },
            ..v.clone()
        };
        let o = overwrite(&up).unwrap();
        assert_eq!((o.uuid, o.state), (up.uuid, ObjectVersionState::Aborted));

        let inline = ObjectVersion {
            state: ObjectVersionState::Complete(ObjectVersionData::Inline(meta, vec![1])),
            ..v
        };
        assert_eq!(overwrite(&inline), None);
    }
}
