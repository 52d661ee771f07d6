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
    /// The part's additional checksum (`x-amz-checksum-*`, base64), known
    /// with its etag; absent in entries written before it was kept.
    #[serde(default)]
    pub checksum: Option<String>,
}

/// A part is written once, then learns its etag and size. Two writes of
/// one part key by different versions (a retried UploadPart in the same
/// millisecond) merge as one whole write, the larger version id: never
/// one's version with the other's etag or size. Within one version,
/// merging keeps what is known (the larger value if two differ, for
/// determinism).
impl Crdt for MpuPart {
    fn merge(&mut self, other: &Self) {
        if other.version > self.version {
            *self = other.clone();
            return;
        }
        if other.version < self.version {
            return;
        }
        if other.etag > self.etag {
            self.etag = other.etag.clone();
        }
        if other.size > self.size {
            self.size = other.size;
        }
        if other.checksum > self.checksum {
            self.checksum = other.checksum.clone();
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
    /// The additional checksum the upload was created with
    /// (`x-amz-checksum-algorithm`): every part carries one, and the
    /// completed object gets one. Absent in older entries.
    #[serde(default)]
    pub checksum: Option<MpuChecksum>,
    /// The storage class the upload was created with, when not
    /// `STANDARD` (set once, like `checksum`). Absent in older entries.
    #[serde(default)]
    pub storage_class: Option<String>,
}

/// An upload's checksum: its algorithm (`CRC32`, `CRC32C`, `CRC64NVME`,
/// `SHA1`, `SHA256`) and whether the object's checksum is a checksum of
/// the parts' checksums (composite) or of the whole object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MpuChecksum {
    pub algorithm: String,
    pub full_object: bool,
}

/// The id of the object version a completion of upload `upload_id`
/// writes at stamp `timestamp`: derived from both, so that a retried
/// completion whose first answer was lost finds the version the first
/// one wrote ([`completed_in`]), and two completions at one stamp write
/// one version; never one id at two stamps (the older copy leaving the
/// object's entry would release the newer one's blocks); and distinct from
/// the upload's id, so that the upload's own version (kept in the
/// object's entry while in progress, then a tombstone) never holds the
/// object's blocks.
pub fn completed_version(upload_id: &Uuid, timestamp: u64) -> Uuid {
    let mut b = b"garage completed upload ".to_vec();
    b.extend_from_slice(upload_id.as_slice());
    b.extend_from_slice(&timestamp.to_be_bytes());
    garage_util::data::blake2sum(&b)
}

/// The version of `obj` a completion of upload `upload_id` wrote, if any
/// (see [`completed_version`]).
pub fn completed_in<'a>(
    obj: &'a crate::object_table::Object,
    upload_id: &Uuid,
) -> Option<&'a crate::object_table::ObjectVersion> {
    obj.versions()
        .iter()
        .find(|v| v.uuid == completed_version(upload_id, v.timestamp))
}

impl MultipartUpload {
    /// The two entries that abort this upload, to insert together: its
    /// object version marked aborted, and its own entry deleted (the hooks
    /// then release its parts). `self` may be an entry read, or a
    /// [`MultipartUpload::new`] of the upload (the merge keeps the rest).
    pub fn abort_entries(&self) -> (crate::object_table::Object, MultipartUpload) {
        use crate::object_table::{Object, ObjectVersion, ObjectVersionState};
        let aborted = Object::new(
            self.bucket_id,
            self.key.clone(),
            vec![ObjectVersion::new(
                self.upload_id,
                self.timestamp,
                ObjectVersionState::Aborted,
                Default::default(),
            )],
        );
        let mut gone = self.clone();
        gone.deleted.set();
        gone.parts.clear();
        (aborted, gone)
    }

    pub fn new(upload_id: Uuid, timestamp: u64, bucket_id: Uuid, key: String) -> Self {
        Self {
            upload_id,
            timestamp,
            deleted: Bool::new(false),
            parts: Map::new(),
            bucket_id,
            key,
            checksum: None,
            storage_class: None,
        }
    }
}

/// `timestamp`, `bucket_id`, `key` and `checksum` are set once by the
/// upload's creation, and copied by the object table's hook when it deletes
/// the upload (the parts' writes may leave `checksum` out); should two
/// writers ever disagree, the smallest timestamp and the larger (bucket,
/// key) and checksum win, so that replicas still converge (otherwise their
/// Merkle trees would differ forever).
impl Crdt for MultipartUpload {
    fn merge(&mut self, other: &Self) {
        self.timestamp = self.timestamp.min(other.timestamp);
        if (other.bucket_id, &other.key) > (self.bucket_id, &self.key) {
            self.bucket_id = other.bucket_id;
            self.key = other.key.clone();
        }
        if other.checksum > self.checksum {
            self.checksum = other.checksum.clone();
        }
        if other.storage_class > self.storage_class {
            self.storage_class = other.storage_class.clone();
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
        new: &MultipartUpload,
    ) -> db::Result<()> {
        let Some(old) = old else {
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
            proptest::option::of((0u8..2, any::<bool>())),
        )
            .prop_map(|(ts, b, k, del, size, sum)| {
                let mut m = MultipartUpload::new(
                    Uuid::from([4; 32]),
                    ts,
                    Uuid::from([b; 32]),
                    format!("k{k}"),
                );
                m.checksum = sum.map(|(a, full_object)| MpuChecksum {
                    algorithm: ["CRC32", "SHA1"][a as usize].into(),
                    full_object,
                });
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
                            checksum: size.map(|s| format!("c{s}")),
                        },
                    );
                }
                m
            })
    }

    fn part(v: u8, etag: Option<&str>, size: Option<u64>) -> MpuPart {
        MpuPart {
            version: Uuid::from([v; 32]),
            etag: etag.map(String::from),
            size,
            checksum: etag.map(|e| format!("c-{e}")),
        }
    }

    /// Two writes of one part key (same part number, same millisecond) by
    /// different versions: the merge is one of them whole, never one's
    /// version with the other's etag or size (issue 14 review item).
    #[test]
    fn a_part_merges_as_one_write() {
        let a = part(1, Some("etag-of-1"), Some(10));
        let b = part(2, None, None);
        let mut m = a.clone();
        m.merge(&b);
        assert_eq!(m, b, "the newer version, without the older one's etag");
        let mut m = b.clone();
        m.merge(&a);
        assert_eq!(m, b);
        // The same version learns its etag and size.
        let mut m = b.clone();
        m.merge(&part(2, Some("etag-of-2"), Some(20)));
        assert_eq!(m, part(2, Some("etag-of-2"), Some(20)));
        check_laws(&a, &b, &part(2, Some("etag-of-2"), Some(20)));
    }

    fn part_strategy() -> impl Strategy<Value = MpuPart> {
        (
            0u8..3,
            proptest::option::of(0u8..3),
            proptest::option::of(0u64..3),
        )
            .prop_map(|(v, e, s)| MpuPart {
                version: Uuid::from([v; 32]),
                etag: e.map(|e| format!("e{e}")),
                size: s,
                checksum: e.map(|e| format!("c{e}")),
            })
    }

    proptest! {
        #[test]
        fn part_merge_laws(a in part_strategy(), b in part_strategy(), c in part_strategy()) {
            check_laws(&a, &b, &c);
            // The result is one of the versions merged, with only fields
            // that a write of that version had.
            let mut m = a.clone();
            m.merge(&b);
            let of_version: Vec<&MpuPart> = [&a, &b].into_iter().filter(|p| p.version == m.version).collect();
            prop_assert!(!of_version.is_empty());
            prop_assert!(m.etag.is_none() || of_version.iter().any(|p| p.etag == m.etag));
            prop_assert!(m.size.is_none() || of_version.iter().any(|p| p.size == m.size));
        }
    }

    /// Entries written before checksums were kept still decode.
    #[test]
    fn old_entries_decode() {
        #[derive(Serialize)]
        struct OldPart {
            version: Uuid,
            etag: Option<String>,
            size: Option<u64>,
        }
        /// `Map`'s encoding.
        #[derive(Serialize)]
        struct OldMap {
            entries: Vec<(MpuPartKey, OldPart)>,
        }
        #[derive(Serialize)]
        struct OldUpload {
            upload_id: Uuid,
            timestamp: u64,
            deleted: Bool,
            parts: OldMap,
            bucket_id: Uuid,
            key: String,
        }
        let parts = OldMap {
            entries: vec![(
                MpuPartKey {
                    part_number: 1,
                    timestamp: 7,
                },
                OldPart {
                    version: Uuid::from([5; 32]),
                    etag: Some("e".into()),
                    size: Some(3),
                },
            )],
        };
        let old = OldUpload {
            upload_id: Uuid::from([4; 32]),
            timestamp: 7,
            deleted: Bool::new(false),
            parts,
            bucket_id: Uuid::from([1; 32]),
            key: "k".into(),
        };
        let bytes = garage_table::encoding::encode(&old);
        let new: MultipartUpload = garage_table::encoding::decode(&bytes).unwrap();
        assert_eq!(new.checksum, None);
        assert_eq!(new.key, "k");
        let (k, p) = new.parts.items().next().unwrap();
        assert_eq!(k.part_number, 1);
        assert_eq!(p.etag.as_deref(), Some("e"));
        assert_eq!(p.checksum, None);
        // And the new fields round-trip.
        let mut n = new.clone();
        n.checksum = Some(MpuChecksum {
            algorithm: "CRC32".into(),
            full_object: true,
        });
        let back: MultipartUpload =
            garage_table::encoding::decode(&garage_table::encoding::encode(&n)).unwrap();
        assert_eq!(back, n);
    }

    proptest! {
        #[test]
        fn mpu_merge_laws_with_disagreeing_fields(a in mpu(), b in mpu(), c in mpu()) {
            check_laws(&a, &b, &c);
        }
    }
}
