//! Version history: every version written while its bucket's versioning
//! was enabled, by (bucket id, key, newest first). The object table keeps
//! a key's current version, its uploads and its `null` version; the
//! versions it no longer shows live here, so that an object entry stays
//! small whatever the number of versions, and listing a key's 100 000
//! versions is a paged range read of one partition.
//!
//! A version is written here by the request that creates it, at the same
//! time as into the object table (so it is listed as soon as the request
//! is answered; a request whose history write fails is not acknowledged).
//! Nothing writes it here again later: a replica of the object entry that
//! missed the version's deletion by id would write it back live after the
//! GC had collected its tombstone (the checker found that, with the object
//! table's hook that used to).
//!
//! Deleting a version by its id marks its entry deleted (a tombstone,
//! collected by the GC once every replica has it); the hook then deletes
//! its blocks, through the version table. The history owns the blocks of
//! its versions: the object table never deletes them when they are
//! superseded.

use garage_db as db;
use garage_table::{Entry, InsertQueue, SortKey, TableSchema};
use garage_util::crdt::{Bool, Crdt, Lww};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

use crate::object_lock::Locked;
use crate::object_table::{ObjectVersion, ObjectVersionData, ObjectVersionState};
use crate::replication::state::ReplicationState;
use crate::version_table::{Version, VersionBacklink, VersionTable};

/// Sort key of a history entry: the object key, then the version's
/// timestamp inverted and its id, so that keys sort in byte order and a
/// key's versions newest first. The key is written with each 0 byte as
/// `00 ff` and ends with `00 00` (UTF-8 has no `ff` byte), so that no key
/// is a prefix of another's encoding.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HistoryKey(#[serde(with = "serde_bytes")] Vec<u8>);

impl HistoryKey {
    fn key_part(key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(key.len() + 2 + 8 + 32);
        for b in key.bytes() {
            k.push(b);
            if b == 0 {
                k.push(0xff);
            }
        }
        k.extend_from_slice(&[0, 0]);
        k
    }

    /// Version (`timestamp`, `uuid`) of `key`.
    pub fn of(key: &str, timestamp: u64, uuid: Uuid) -> Self {
        let mut k = Self::key_part(key);
        k.extend_from_slice(&(u64::MAX - timestamp).to_be_bytes());
        k.extend_from_slice(uuid.as_slice());
        Self(k)
    }

    /// Sorts before every version of `key`, after every version of the
    /// keys before it.
    pub fn first_of(key: &str) -> Self {
        Self(Self::key_part(key))
    }

    /// Sorts after every version of `key`, before every version of the
    /// keys after it.
    pub fn after(key: &str) -> Self {
        let mut k = Self::key_part(key);
        *k.last_mut().expect("two bytes") = 1;
        Self(k)
    }
}

impl SortKey for HistoryKey {
    fn sort_key(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub bucket_id: Uuid,
    pub hkey: HistoryKey,
    pub key: String,
    /// Complete: data or a delete marker.
    pub version: ObjectVersion,
    /// Deleted by its version id (see [`HistoryEntry::delete`]).
    deleted: Bool,
    /// Tags given after the version was written (`None`: the tags it was
    /// written with).
    pub tags: Lww<Option<Vec<(String, String)>>>,
    /// Its replication state (see [`crate::replication::state`]). Absent
    /// in older entries, and left out while empty, so that a version of a
    /// bucket without replication is stored in the bytes v0.2.0 reads
    /// (set only once the cluster allows `bucket-replication`).
    #[serde(default, skip_serializing_if = "ReplicationState::is_empty")]
    pub replication: ReplicationState,
}

impl HistoryEntry {
    pub fn new(bucket_id: Uuid, key: &str, version: ObjectVersion) -> Self {
        Self {
            bucket_id,
            hkey: HistoryKey::of(key, version.timestamp, version.uuid),
            key: key.to_string(),
            version,
            deleted: Bool::new(false),
            tags: Lww::raw(0, None),
            replication: ReplicationState::default(),
        }
    }

    /// The entry that deletes this version at `now` (ms), unless its
    /// lock forbids it (`bypass`: the caller may and asks to bypass
    /// governance retention). The only way to delete a version, so that
    /// every path (S3, lifecycle, admin, block purge) respects locks.
    pub fn delete(mut self, now: u64, bypass: bool) -> Result<Self, Locked> {
        self.version.lock.check_delete(now, bypass)?;
        self.deleted.set();
        Ok(self)
    }

    /// The entry that deletes `version`, a version whose ordered write was
    /// refused (a replica held a newer write) and that its writer wrote
    /// again under a new id before telling anyone of it: no client ever
    /// saw it, so it goes whatever its lock says (see doc/ordering.md).
    pub fn withdrawn(bucket_id: Uuid, key: &str, version: ObjectVersion) -> Self {
        let mut e = Self::new(bucket_id, key, version);
        e.deleted.set();
        e
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.get()
    }

    fn has_blocks(&self) -> bool {
        matches!(
            self.version.state,
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..))
        )
    }
}

/// The version's state merges as in the object table (it only moves
/// forward), its lock as [`crate::object_lock::ObjectLock`] does; deleted is a flag that only
/// gets set; tags are last writer wins.
impl Crdt for HistoryEntry {
    fn merge(&mut self, other: &Self) {
        self.version.state.merge(&other.version.state);
        self.version.versioning = self.version.versioning.max(other.version.versioning);
        self.version.lock.merge(&other.version.lock);
        self.version.merge_acl(&other.version);
        self.deleted.merge(&other.deleted);
        self.tags.merge(&other.tags);
        self.replication.merge(&other.replication);
    }
}

impl Entry<Uuid, HistoryKey> for HistoryEntry {
    fn partition_key(&self) -> &Uuid {
        &self.bucket_id
    }
    fn sort_key(&self) -> &HistoryKey {
        &self.hkey
    }
    fn is_tombstone(&self) -> bool {
        self.deleted.get()
    }
}

pub struct HistoryTable {
    pub versions: InsertQueue<VersionTable>,
}

impl TableSchema for HistoryTable {
    const TABLE_NAME: &'static str = "object_history";
    type P = Uuid;
    type S = HistoryKey;
    type E = HistoryEntry;
    type Filter = ();

    fn matches_filter(_entry: &HistoryEntry, _filter: &()) -> bool {
        true
    }

    /// A version deleted by its id (or one that an abort made lose its
    /// blocks) deletes its version entry, hence its blocks.
    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&HistoryEntry>,
        new: &HistoryEntry,
    ) -> db::Result<()> {
        let live = |e: &HistoryEntry| e.has_blocks() && !e.deleted.get();
        let had_blocks = new.has_blocks() || old.is_some_and(|o| o.has_blocks());
        // Absent before: this node never released them either.
        let released_before = old.is_some_and(|o| !live(o));
        if had_blocks && !live(new) && !released_before {
            let backlink = VersionBacklink::Object {
                bucket_id: new.bucket_id,
                key: new.key.clone(),
            };
            self.versions
                .push(tx, &Version::deleted(new.version.uuid, backlink))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket_table::Versioning;
    use crate::object_table::ObjectVersionMeta;
    use crate::testing::check_laws;
    use proptest::prelude::*;

    fn id(n: u8) -> Uuid {
        Uuid::from([n; 32])
    }

    #[test]
    fn keys_sort_by_key_then_newest_version_first() {
        let mut ks = vec![
            HistoryKey::of("a", 1, id(1)),
            HistoryKey::of("a", 2, id(1)),
            HistoryKey::of("a/b", 5, id(1)),
            HistoryKey::of("a\0", 5, id(1)),
            HistoryKey::of("ab", 0, id(1)),
            HistoryKey::of("a", 2, id(2)),
        ];
        ks.sort();
        let expect = vec![
            HistoryKey::of("a", 2, id(1)),
            HistoryKey::of("a", 2, id(2)),
            HistoryKey::of("a", 1, id(1)),
            HistoryKey::of("a\0", 5, id(1)),
            HistoryKey::of("a/b", 5, id(1)),
            HistoryKey::of("ab", 0, id(1)),
        ];
        assert_eq!(ks, expect);
        for k in ["a", "a\0", "a/b"] {
            assert!(HistoryKey::first_of(k) < HistoryKey::of(k, u64::MAX, id(0)));
            assert!(HistoryKey::after(k) > HistoryKey::of(k, 0, id(255)));
        }
        assert!(HistoryKey::after("a") < HistoryKey::first_of("a\0"));
        assert!(HistoryKey::after("a") < HistoryKey::first_of("a/b"));
        assert!(HistoryKey::after("a\0") < HistoryKey::first_of("a/b"));
    }

    fn entry(deleted: bool, kind: u8, tags: Option<(u64, u8)>) -> HistoryEntry {
        let meta = ObjectVersionMeta {
            headers: vec![],
            size: 1,
            etag: "e".into(),
            storage_class: None,
            first_ec: None,
            recoded: 0,
        };
        let state = match kind {
            0 => ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
            1 => ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, id(9))),
            _ => ObjectVersionState::Aborted,
        };
        let mut e = HistoryEntry::new(
            id(1),
            "k",
            ObjectVersion::new(id(2), 5, state, Versioning::Enabled),
        );
        if deleted {
            e.deleted.set();
        }
        if let Some((ts, t)) = tags {
            e.tags = Lww::raw(ts, Some(vec![("t".into(), t.to_string())]));
            // Copies of one version with different locks.
            e.version.lock = crate::object_lock::ObjectLock::new(
                Some(crate::object_lock::Retention {
                    mode: crate::object_lock::RetentionMode::Compliance,
                    until: ts,
                }),
                t == 1,
            );
        }
        e
    }

    proptest! {
        #[test]
        fn history_merge_laws(
            a in (any::<bool>(), 0u8..3, proptest::option::of((0u64..3, 0u8..3))),
            b in (any::<bool>(), 0u8..3, proptest::option::of((0u64..3, 0u8..3))),
            c in (any::<bool>(), 0u8..3, proptest::option::of((0u64..3, 0u8..3))),
        ) {
            check_laws(&entry(a.0, a.1, a.2), &entry(b.0, b.1, b.2), &entry(c.0, c.1, c.2));
        }
    }
}
