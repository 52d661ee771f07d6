//! Multipart uploads in progress: upload id -> its parts. Each part is an
//! object version of its own (in the version table); aborting or
//! completing the upload deletes the parts' versions it no longer needs.
//!
//! Where the parts are listed depends on when the upload was created:
//! - **in the upload's entry** (its `parts` map), for uploads created
//!   before the cluster was finalized at v0.3.0: every part written
//!   rewrites the whole entry on every replica, so the cost of a part grows
//!   with the parts before it (measured: 20 ms at the first, 120 ms at the
//!   10 000th);
//! - **in the part table** ([`MpuPartTable`], one entry per part write,
//!   partitioned by upload id like the upload's entry, so held by the same
//!   nodes), for uploads created since (`parts_apart`, gated by
//!   `MULTIPART_PARTS_APART`): a part costs the same whatever its rank.
//!
//! When an upload's entry is deleted, each replica's hook deletes the
//! parts it holds in the part table (queued tombstones) and their
//! versions; a part that reaches a replica after the upload's deletion is
//! deleted there by the part table's hook. Both tables being partitioned by
//! the upload id, each replica sees both entries.

use garage_db as db;
use garage_table::{EmptyKey, Entry, InsertQueue, SortKey, TableSchema};
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
    /// Whether the upload's parts are listed in the part table
    /// ([`MpuPartTable`]) rather than in `parts`: set at creation, once the
    /// cluster is finalized at v0.3.0 (`MULTIPART_PARTS_APART`; v0.2.0
    /// reads neither this field nor that table). The struct's last field,
    /// skipped when false: an upload created before keeps its bytes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub parts_apart: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
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
            parts_apart: false,
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
        self.parts_apart |= other.parts_apart;
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
    /// The part table's queue: the tombstones of a deleted upload's parts.
    pub parts: InsertQueue<MpuPartTable>,
    /// The part table's store ([`MpuPartTable::store`]), read by the hook
    /// for the parts of a deleted upload that this node holds.
    pub parts_store: db::Tree,
}

impl MpuTable {
    /// The store tree of the upload table in `db` (read by the part
    /// table's hook).
    pub fn store(db: &db::Db) -> db::Result<db::Tree> {
        db.open_tree(&garage_table::data::store_tree_name(Self::TABLE_NAME))
    }
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
        if !new.deleted.get() || old.is_some_and(|o| o.deleted.get()) {
            return Ok(());
        }
        let backlink = VersionBacklink::MultipartUpload {
            upload_id: new.upload_id,
        };
        if let Some(old) = old {
            for (_, part) in old.parts.items() {
                self.versions
                    .push(tx, &Version::deleted(part.version, backlink.clone()))?;
            }
        }
        // The parts this node holds in the part table: deleted (their
        // tombstones' hooks release the versions). The tombstone reaches
        // every replica through the queue's quorum inserts.
        for part in local_parts(tx, &self.parts_store, &new.upload_id)? {
            if !part.deleted.get() {
                self.parts.push(tx, &part.tombstone())?;
            }
        }
        Ok(())
    }
}

/// The entries of upload `upload_id` in this node's copy of the part table
/// (`store`), tombstones included, in part order.
fn local_parts(
    tx: &mut db::Transaction<'_>,
    store: &db::Tree,
    upload_id: &Uuid,
) -> db::Result<Vec<MpuPartEntry>> {
    let start = upload_id.as_slice().to_vec();
    let range: Vec<_> = match garage_table::data::prefix_end(&start) {
        Some(end) => tx.range(store, start.clone()..end)?.collect(),
        // An id of all 0xff bytes: to the end of the tree, then filtered.
        None => tx.range(store, start.clone()..)?.collect(),
    };
    let mut out = Vec::new();
    for kv in range {
        let (k, v) = kv?;
        if !k.starts_with(&start) {
            break;
        }
        let e: MpuPartEntry = garage_table::encoding::decode_stored(&k, &v)
            .map_err(|e| db::Error::Aborted(format!("corrupt part entry: {e}")))?;
        out.push(e);
    }
    Ok(out)
}

/// A part write's place in the part table (its sort key): the part number
/// then the write's stamp, both big-endian, so that an upload's parts read
/// in part order, and the writes of one part number oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartSlot(#[serde(with = "serde_bytes")] [u8; 16]);

impl PartSlot {
    pub fn new(k: MpuPartKey) -> Self {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&k.part_number.to_be_bytes());
        b[8..].copy_from_slice(&k.timestamp.to_be_bytes());
        Self(b)
    }

    /// The first slot of part number `n`.
    pub fn first_of(n: u64) -> Self {
        Self::new(MpuPartKey {
            part_number: n,
            timestamp: 0,
        })
    }

    pub fn key(&self) -> MpuPartKey {
        let (n, t) = self.0.split_at(8);
        MpuPartKey {
            part_number: u64::from_be_bytes(n.try_into().expect("8 bytes")),
            timestamp: u64::from_be_bytes(t.try_into().expect("8 bytes")),
        }
    }
}

impl SortKey for PartSlot {
    fn sort_key(&self) -> &[u8] {
        &self.0
    }
}

/// One write of one part of an upload whose parts are apart
/// ([`MultipartUpload::parts_apart`]). The part merges as in an upload's
/// map ([`MpuPart`]); `deleted` is set once the upload is over (completed
/// or aborted), keeping the part so that the hook knows its version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpuPartEntry {
    pub upload_id: Uuid,
    pub slot: PartSlot,
    pub part: MpuPart,
    pub deleted: Bool,
}

impl MpuPartEntry {
    pub fn new(upload_id: Uuid, key: MpuPartKey, part: MpuPart) -> Self {
        Self {
            upload_id,
            slot: PartSlot::new(key),
            part,
            deleted: Bool::new(false),
        }
    }

    /// This entry, deleted.
    pub fn tombstone(&self) -> Self {
        let mut t = self.clone();
        t.deleted.set();
        t
    }
}

impl Crdt for MpuPartEntry {
    fn merge(&mut self, other: &Self) {
        self.part.merge(&other.part);
        self.deleted.merge(&other.deleted);
    }
}

impl Entry<Uuid, PartSlot> for MpuPartEntry {
    fn partition_key(&self) -> &Uuid {
        &self.upload_id
    }
    fn sort_key(&self) -> &PartSlot {
        &self.slot
    }
    fn is_tombstone(&self) -> bool {
        self.deleted.get()
    }
}

/// The part table: one entry per part write of the uploads whose parts
/// are apart, partitioned by upload id (with the upload's entry).
pub struct MpuPartTable {
    pub versions: InsertQueue<VersionTable>,
    /// Its own queue: a part that arrives after its upload's deletion is
    /// deleted.
    pub parts: InsertQueue<MpuPartTable>,
    /// The upload table's store ([`MpuTable::store`]).
    pub uploads_store: db::Tree,
}

impl MpuPartTable {
    /// The store tree of the part table in `db` (read by the upload
    /// table's hook).
    pub fn store(db: &db::Db) -> db::Result<db::Tree> {
        db.open_tree(&garage_table::data::store_tree_name(Self::TABLE_NAME))
    }
}

impl TableSchema for MpuPartTable {
    const TABLE_NAME: &'static str = "multipart_part";
    type P = Uuid;
    type S = PartSlot;
    type E = MpuPartEntry;
    type Filter = ();

    fn matches_filter(_: &MpuPartEntry, _: &()) -> bool {
        true
    }

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&MpuPartEntry>,
        new: &MpuPartEntry,
    ) -> db::Result<()> {
        if new.deleted.get() {
            if !old.is_some_and(|o| o.deleted.get()) {
                let backlink = VersionBacklink::MultipartUpload {
                    upload_id: new.upload_id,
                };
                self.versions
                    .push(tx, &Version::deleted(new.part.version, backlink))?;
            }
            return Ok(());
        }
        if old.is_some() {
            return Ok(());
        }
        // A part this node had not seen: if the upload is deleted here
        // already, its hook has run without it.
        let key = garage_table::encoding::tree_key(&new.upload_id, &EmptyKey);
        if let Some(v) = tx.get(&self.uploads_store, &key)? {
            let upload: MultipartUpload = garage_table::encoding::decode_stored(&key, &v)
                .map_err(|e| db::Error::Aborted(format!("corrupt upload entry: {e}")))?;
            if upload.deleted.get() {
                self.parts.push(tx, &new.tombstone())?;
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

    /// `parts_apart` (gated) is skipped when false: an upload without it
    /// has the bytes v0.2.0 reads; with it, it round-trips.
    #[test]
    fn parts_apart_keeps_old_bytes_when_false() {
        #[derive(Serialize)]
        struct V020Upload {
            upload_id: Uuid,
            timestamp: u64,
            deleted: Bool,
            parts: Map<MpuPartKey, MpuPart>,
            bucket_id: Uuid,
            key: String,
            checksum: Option<MpuChecksum>,
            storage_class: Option<String>,
        }
        let m = MultipartUpload::new(Uuid::from([4; 32]), 7, Uuid::from([1; 32]), "k".into());
        let old = V020Upload {
            upload_id: m.upload_id,
            timestamp: 7,
            deleted: Bool::new(false),
            parts: Map::new(),
            bucket_id: m.bucket_id,
            key: "k".into(),
            checksum: None,
            storage_class: None,
        };
        use garage_table::encoding::{decode, encode};
        assert_eq!(encode(&m), encode(&old));
        let mut apart = m.clone();
        apart.parts_apart = true;
        assert_ne!(encode(&apart), encode(&old));
        assert_eq!(decode::<MultipartUpload>(&encode(&apart)).unwrap(), apart);
        // A part's delta (written without the flag) keeps it.
        let mut merged = apart.clone();
        merged.merge(&m);
        assert!(merged.parts_apart);
    }

    proptest! {
        #[test]
        fn mpu_merge_laws_with_disagreeing_fields(a in mpu(), b in mpu(), c in mpu()) {
            check_laws(&a, &b, &c);
        }
    }
}
