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
use garage_util::data::{gen_uuid, Hash};
use garage_util::time::now_msec;

use crate::block_ref_table::BlockRefTable;
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
}

/// What a purge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PurgeCount {
    pub versions: usize,
    pub objects_deleted: usize,
    pub uploads_aborted: usize,
}

/// At most this many versions per block are purged in one call (a block
/// referenced by more is purged by calling again).
const MAX_REFS: usize = 100_000;

impl Purge {
    pub async fn purge_block(&self, hash: &Hash) -> Result<PurgeCount, garage_table::Error> {
        let mut count = PurgeCount::default();
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
                    if let Some(obj) = self.objects.get(bucket_id, key).await? {
                        if let Some(v) = obj.versions().iter().find(|v| v.uuid == r.version) {
                            if let Some(over) = overwrite(v) {
                                self.objects
                                    .insert(&Object::new(*bucket_id, key.clone(), vec![over]))
                                    .await?;
                                count.objects_deleted += 1;
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

/// The object version that hides `v`: a delete marker just after it if it
/// holds data, the same version aborted if it is still uploading.
fn overwrite(v: &ObjectVersion) -> Option<ObjectVersion> {
    match &v.state {
        ObjectVersionState::Uploading { .. } => Some(ObjectVersion {
            uuid: v.uuid,
            timestamp: v.timestamp,
            state: ObjectVersionState::Aborted,
        }),
        ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..)) => Some(ObjectVersion {
            uuid: gen_uuid(),
            timestamp: now_msec().max(v.timestamp + 1),
            state: ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
        }),
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
        };
        let v = ObjectVersion {
            uuid: gen_uuid(),
            timestamp: now_msec() + 60_000,
            state: ObjectVersionState::Complete(ObjectVersionData::FirstBlock(
                meta.clone(),
                Hash::from([1u8; 32]),
            )),
        };
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
