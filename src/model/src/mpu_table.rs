//! Multipart uploads in progress: upload id -> its parts. Each part is an
//! object version of its own (in the version table); aborting or
//! completing the upload deletes the parts' versions it no longer needs.

use garage_db as db;
use garage_table::{EmptyKey, Entry, InsertQueue, TableSchema};
use garage_util::crdt::{Bool, Crdt, Map};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

use crate::version_table::{Version, VersionBacklink, VersionTable};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MpuPartKey {
    pub part_number: u64,
    pub timestamp: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpuPart {
    pub version: Uuid,
    pub etag: Option<String>,
    pub size: Option<u64>,
}

/// A part is written once, then learns its etag and size: merging keeps
/// what is known (the larger value if two differ, for determinism).
impl Crdt for MpuPart {
    fn merge(&mut self, other: &Self) {
        if other.version > self.version {
            self.version = other.version;
        }
        if other.etag > self.etag {
            self.etag = other.etag.clone();
        }
        if other.size > self.size {
            self.size = other.size;
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultipartUpload {
    pub upload_id: Uuid,
    pub timestamp: u64,
    pub deleted: Bool,
    pub parts: Map<MpuPartKey, MpuPart>,
    pub bucket_id: Uuid,
    pub key: String,
}

impl MultipartUpload {
    pub fn new(upload_id: Uuid, timestamp: u64, bucket_id: Uuid, key: String) -> Self {
        Self {
            upload_id,
            timestamp,
            deleted: Bool::new(false),
            parts: Map::new(),
            bucket_id,
            key,
        }
    }
}

/// `timestamp`, `bucket_id` and `key` are set once by the upload's
/// creation, and copied by the object table's hook when it deletes the
/// upload; should two writers ever disagree, the smallest timestamp and the
/// larger (bucket, key) win, so that replicas still converge (otherwise
/// their Merkle trees would differ forever).
impl Crdt for MultipartUpload {
    fn merge(&mut self, other: &Self) {
        self.timestamp = self.timestamp.min(other.timestamp);
        if (other.bucket_id, &other.key) > (self.bucket_id, &self.key) {
            self.bucket_id = other.bucket_id;
            self.key = other.key.clone();
        }
        self.deleted.merge(&other.deleted);
        if self.deleted.get() {
            self.parts.clear();
        } else {
            self.parts.merge(&other.parts);
        }
    }
}

impl Entry<Uuid, EmptyKey> for MultipartUpload {
    fn partition_key(&self) -> &Uuid {
        &self.upload_id
    }
    fn sort_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn is_tombstone(&self) -> bool {
        self.deleted.get()
    }
}

pub struct MpuTable {
    pub versions: InsertQueue<VersionTable>,
}

impl TableSchema for MpuTable {
    const TABLE_NAME: &'static str = "multipart_upload";
    type P = Uuid;
    type S = EmptyKey;
    type E = MultipartUpload;
    type Filter = ();

    fn matches_filter(_: &MultipartUpload, _: &()) -> bool {
        true
    }

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&MultipartUpload>,
        new: Option<&MultipartUpload>,
    ) -> db::Result<()> {
        let (Some(old), Some(new)) = (old, new) else {
            return Ok(());
        };
        if new.deleted.get() && !old.deleted.get() {
            for (_, part) in old.parts.items() {
                self.versions.push(
                    tx,
                    &Version::deleted(
                        part.version,
                        VersionBacklink::MultipartUpload {
                            upload_id: new.upload_id,
                        },
                    ),
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::check_laws;

    /// Uploads whose fixed fields disagree still merge lawfully.
    fn mpu() -> impl Strategy<Value = MultipartUpload> {
        (
            0u64..3,
            0u8..2,
            0u8..2,
            any::<bool>(),
            proptest::option::of(0u64..3),
        )
            .prop_map(|(ts, b, k, del, size)| {
                let mut m = MultipartUpload::new(
                    Uuid::from([4; 32]),
                    ts,
                    Uuid::from([b; 32]),
                    format!("k{k}"),
                );
                if del {
                    m.deleted.set();
                } else {
                    m.parts.put(
                        MpuPartKey {
                            part_number: 1,
                            timestamp: ts,
                        },
                        MpuPart {
                            version: Uuid::from([5; 32]),
                            etag: size.map(|s| s.to_string()),
                            size,
                        },
                    );
                }
                m
            })
    }

    proptest! {
        #[test]
        fn mpu_merge_laws_with_disagreeing_fields(a in mpu(), b in mpu(), c in mpu()) {
            check_laws(&a, &b, &c);
        }
    }
}
