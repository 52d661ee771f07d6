//! Merge laws of the data-path entries, and their hooks on a real database.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use garage_db as db;
use garage_table::data::TableData;
use garage_table::testing::temp_db;
use garage_table::InsertQueue;
use garage_util::crdt::{Bool, Crdt, Lww, LwwMap, Map};
use garage_util::data::{Hash, Uuid};
use proptest::prelude::*;

use crate::block_ref_table::{BlockRef, BlockRefHook, BlockRefTable};
use crate::bucket_table::Versioning;
use crate::counter_table::{
    CounterEntry, CounterTable, LocalCounters, BYTES, OBJECTS, UNFINISHED_UPLOADS,
};
use crate::mpu_table::{
    MpuPart, MpuPartEntry, MpuPartKey, MpuPartTable, MpuTable, MultipartUpload,
};
use crate::object_table::*;
use crate::testing::check_laws;
use crate::version_table::*;

fn id(n: u8) -> Uuid {
    Uuid::from([n; 32])
}

fn meta(size: u64) -> ObjectVersionMeta {
    ObjectVersionMeta {
        headers: vec![],
        size,
        etag: format!("e{size}"),
        storage_class: None,
        first_ec: None,
        recoded: 0,
    }
}

fn state(kind: u8, size: u64) -> ObjectVersionState {
    match kind {
        0 => ObjectVersionState::Uploading {
            multipart: size % 2 == 0,
            headers: vec![],
        },
        1 => ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
        2 => ObjectVersionState::Complete(ObjectVersionData::Inline(meta(size), vec![1; 3])),
        3 => ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta(size), id(9))),
        _ => ObjectVersionState::Aborted,
    }
}

/// Grants to a user: none, on a tie with the canned ACL, or newer.
fn grants_of(size: u64) -> crate::access::VersionGrants {
    let acl = crate::access::ObjectAcl {
        canned: crate::access::CannedAcl::Private,
        grants: [(
            "GKreader".to_string(),
            crate::access::ObjectPerm::FULL_CONTROL,
        )]
        .into(),
    };
    match size {
        0 => Default::default(),
        1 => crate::access::VersionGrants::raw(1, acl),
        _ => crate::access::VersionGrants::raw(5, acl),
    }
}

fn object() -> impl Strategy<Value = Object> {
    (
        proptest::collection::vec((0u8..4, 0u8..5, 0u64..3), 0..4),
        proptest::option::of((0u8..4, 0u8..3)),
    )
        .prop_map(|(vs, tags)| {
            let mut o = Object::new(
                id(1),
                "k".into(),
                vs.into_iter()
                    .map(|(u, kind, size)| ObjectVersion {
                        uuid: id(u),
                        // A version id has one timestamp and one
                        // versioning; ids and times orders differ so that
                        // both matter.
                        timestamp: [3, 1, 4, 2][u as usize],
                        state: state(kind, size),
                        versioning: [
                            Versioning::Off,
                            Versioning::Enabled,
                            Versioning::Suspended,
                            Versioning::Enabled,
                        ][u as usize],
                        // Copies of one version may carry different
                        // locks (a retention set through one of them).
                        lock: crate::object_lock::ObjectLock::new(
                            (size % 2 == 1).then_some(crate::object_lock::Retention {
                                mode: crate::object_lock::RetentionMode::Compliance,
                                until: size,
                            }),
                            size % 3 == 0,
                        ),
                        // And different ACLs (changed through one copy).
                        acl: crate::access::VersionAcl::written(
                            size % 4,
                            [
                                crate::access::CannedAcl::Private,
                                crate::access::CannedAcl::PublicRead,
                                crate::access::CannedAcl::AuthenticatedRead,
                            ][(size % 3) as usize],
                        ),
                        // Some with grants to a user, older or newer
                        // than their canned ACL.
                        acl_grants: grants_of(size),
                    })
                    .collect(),
            );
            // A tag set given to one of the versions, if listed.
            if let Some((u, n)) = tags {
                o.set_tags(id(u), vec![("t".into(), n.to_string())]);
            }
            o
        })
}

/// Tag sets merge per version, last writer wins, and go away with their
/// version when it is pruned.
#[test]
fn object_tags_follow_their_version() {
    let v = |u: u8, t: u64| ObjectVersion::new(id(u), t, state(1, 10), Versioning::Off);
    let mut a = Object::new(id(1), "k".into(), vec![v(1, 1)]);
    a.set_tags(id(1), vec![("a".into(), "1".into())]);
    let mut b = a.clone();
    b.set_tags(id(1), vec![]);
    let mut m = a.clone();
    m.merge(&b);
    assert_eq!(m.updated_tags(&id(1)), Some(&vec![]), "the later set wins");
    // A version not listed gets no set.
    m.set_tags(id(9), vec![("x".into(), "y".into())]);
    assert_eq!(m.updated_tags(&id(9)), None);
    // A newer complete version prunes the old one and its tags.
    m.merge(&Object::new(id(1), "k".into(), vec![v(2, 5)]));
    assert_eq!(m.updated_tags(&id(1)), None);
    assert_eq!(m.versions().len(), 1);
}

fn version() -> impl Strategy<Value = Version> {
    (
        any::<bool>(),
        proptest::collection::vec((0u64..3, 0u8..3), 0..4),
    )
        .prop_map(|(del, blocks)| {
            let mut v = Version::new(id(2), VersionBacklink::MultipartUpload { upload_id: id(3) });
            v.deleted = Bool::new(del);
            if !del {
                for (part, h) in blocks {
                    v.blocks.put(
                        VersionBlockKey {
                            part_number: part,
                            offset: 0,
                        },
                        VersionBlock {
                            hash: id(h),
                            size: 10,
                            ec: None,
                            recoded: 0,
                        },
                    );
                }
            }
            v
        })
}

fn mpu() -> impl Strategy<Value = MultipartUpload> {
    (
        any::<bool>(),
        proptest::collection::vec((0u64..3, 0u8..3, proptest::option::of(0u64..3)), 0..4),
    )
        .prop_map(|(del, parts)| {
            let mut m = MultipartUpload::new(id(4), 1, id(1), "k".into());
            m.deleted = Bool::new(del);
            if !del {
                for (n, v, size) in parts {
                    m.parts.put(
                        MpuPartKey {
                            part_number: n,
                            timestamp: 0,
                        },
                        MpuPart {
                            version: id(v),
                            etag: size.map(|s| format!("{s}")),
                            size,
                            checksum: None,
                        },
                    );
                }
            }
            m
        })
}

fn counter() -> impl Strategy<Value = CounterEntry> {
    proptest::collection::vec((0u8..3, 0u64..3, 0i64..5), 0..4).prop_map(|vals| {
        let mut values = Map::new();
        for (node, ts, n) in vals {
            values.put(id(node), Lww::raw(ts, [(OBJECTS.to_string(), n)].into()));
        }
        CounterEntry {
            bucket_id: id(1),
            values,
        }
    })
}

proptest! {
    #[test]
    fn object_merge_laws(a in object(), b in object(), c in object()) {
        check_laws(&a, &b, &c);
    }
    #[test]
    fn version_merge_laws(a in version(), b in version(), c in version()) {
        check_laws(&a, &b, &c);
    }
    #[test]
    fn block_ref_merge_laws(a in any::<bool>(), b in any::<bool>(), c in any::<bool>()) {
        let r = |d| BlockRef::new(id(1), id(2), d);
        check_laws(&r(a), &r(b), &r(c));
    }
    #[test]
    fn mpu_merge_laws(a in mpu(), b in mpu(), c in mpu()) {
        check_laws(&a, &b, &c);
    }
    #[test]
    fn counter_merge_laws(a in counter(), b in counter(), c in counter()) {
        check_laws(&a, &b, &c);
    }
}

fn queued<F: garage_table::TableSchema>(q: &InsertQueue<F>, tree: &db::Tree) -> Vec<F::E> {
    let _ = q;
    tree.iter()
        .map(|i| garage_table::encoding::decode(&i.unwrap().1).unwrap())
        .collect()
}

struct Tables {
    _dir: tempfile::TempDir,
    db: db::Db,
    objects: Arc<TableData<ObjectTable>>,
    versions: InsertQueue<VersionTable>,
    counters: InsertQueue<CounterTable>,
    local: LocalCounters,
}

fn object_tables() -> Tables {
    let (dir, db) = temp_db();
    let versions = InsertQueue::<VersionTable>::open(&db).unwrap();
    let counters = InsertQueue::<CounterTable>::open(&db).unwrap();
    let local = LocalCounters::open(&db).unwrap();
    let objects = TableData::new(
        ObjectTable {
            node: id(7),
            versions: versions.clone(),
            mpus: InsertQueue::open(&db).unwrap(),
            counters: counters.clone(),
            local_counters: local.clone(),
        },
        db.clone(),
    )
    .unwrap();
    Tables {
        _dir: dir,
        db,
        objects,
        versions,
        counters,
        local,
    }
}

fn put(t: &Tables, key: &str, uuid: u8, ts: u64, st: ObjectVersionState) {
    let o = Object::new(
        id(1),
        key.into(),
        vec![ObjectVersion::new(id(uuid), ts, st, Versioning::Off)],
    );
    t.objects.update_entry_with(&o).unwrap();
}

#[test]
fn superseded_versions_are_deleted_and_counters_follow() {
    let t = object_tables();
    let vtree = t.db.open_tree("version:insert_queue").unwrap();
    put(&t, "a", 1, 10, state(0, 0)); // uploading
    let c = t.local.get(&id(1)).unwrap();
    assert_eq!(c[UNFINISHED_UPLOADS], 1);
    put(&t, "a", 1, 10, state(3, 100)); // completes with blocks
    let c = t.local.get(&id(1)).unwrap();
    assert_eq!((c[OBJECTS], c[BYTES], c[UNFINISHED_UPLOADS]), (1, 100, 0));
    assert!(queued(&t.versions, &vtree).is_empty());
    put(&t, "a", 2, 20, state(2, 5)); // a newer inline version replaces it
    let q: Vec<Version> = queued(&t.versions, &vtree);
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].uuid, id(1));
    assert!(q[0].deleted.get());
    let c = t.local.get(&id(1)).unwrap();
    assert_eq!((c[OBJECTS], c[BYTES]), (1, 5));
    put(&t, "b", 3, 5, state(2, 7));
    put(&t, "a", 4, 30, state(1, 0)); // delete marker
    let c = t.local.get(&id(1)).unwrap();
    assert_eq!((c[OBJECTS], c[BYTES]), (1, 7), "only b is left");
    // The published counter entry carries this node's latest counts.
    let ctree = t.db.open_tree("bucket_counters:insert_queue").unwrap();
    let pub_: Vec<CounterEntry> = queued(&t.counters, &ctree);
    assert_eq!(pub_[0].total(&[id(7)])[OBJECTS], 1);
    assert_eq!(
        pub_[0].total(&[id(8)]).get(OBJECTS),
        None,
        "other nodes' values only"
    );
}

#[test]
fn versions_queue_block_refs_and_deletion_releases_them() {
    let (_d, db) = temp_db();
    let refs = InsertQueue::<BlockRefTable>::open(&db).unwrap();
    let data = TableData::new(
        VersionTable {
            block_refs: refs.clone(),
        },
        db.clone(),
    )
    .unwrap();
    let rtree = db.open_tree("block_ref:insert_queue").unwrap();
    let mut v = Version::new(id(2), VersionBacklink::MultipartUpload { upload_id: id(3) });
    for (i, h) in [5u8, 6].iter().enumerate() {
        v.blocks.put(
            VersionBlockKey {
                part_number: 1,
                offset: i as u64,
            },
            VersionBlock {
                hash: id(*h),
                size: 1,
                ec: None,
                recoded: 0,
            },
        );
    }
    data.update_entry_with(&v).unwrap();
    let q: Vec<BlockRef> = queued(&refs, &rtree);
    assert_eq!(q.len(), 2);
    assert!(q.iter().all(|r| !r.deleted.get() && r.version == id(2)));
    data.update_entry_with(&Version::deleted(id(2), v.backlink.clone()))
        .unwrap();
    let q: Vec<BlockRef> = queued(&refs, &rtree);
    assert_eq!(q.len(), 2);
    assert!(
        q.iter().all(|r| r.deleted.get()),
        "queued refs merged into deleted ones"
    );
}

struct Counting(AtomicI64);

impl BlockRefHook for Counting {
    fn block_incref(
        &self,
        _: &mut db::Transaction<'_>,
        _: &Hash,
        _: Option<garage_rpc::layout::Placement>,
    ) -> db::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn block_decref(&self, _: &mut db::Transaction<'_>, _: &Hash) -> db::Result<()> {
        self.0.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn block_ref_hook_runs_once_per_transition() {
    let (_d, db) = temp_db();
    let hook = Arc::new(Counting(AtomicI64::new(0)));
    let data = TableData::new(BlockRefTable { hook: hook.clone() }, db).unwrap();
    data.update_entry_with(&BlockRef::new(id(1), id(2), false))
        .unwrap();
    data.update_entry_with(&BlockRef::new(id(1), id(2), false))
        .unwrap();
    data.update_entry_with(&BlockRef::new(id(1), id(3), false))
        .unwrap();
    assert_eq!(hook.0.load(Ordering::SeqCst), 2);
    data.update_entry_with(&BlockRef::new(id(1), id(2), true))
        .unwrap();
    data.update_entry_with(&BlockRef::new(id(1), id(2), true))
        .unwrap();
    assert_eq!(hook.0.load(Ordering::SeqCst), 1);
}

#[test]
fn aborting_an_upload_deletes_its_parts_versions() {
    let (_d, db) = temp_db();
    let versions = InsertQueue::<VersionTable>::open(&db).unwrap();
    let data = TableData::new(
        MpuTable {
            versions: versions.clone(),
            parts: InsertQueue::open(&db).unwrap(),
            parts_store: MpuPartTable::store(&db).unwrap(),
        },
        db.clone(),
    )
    .unwrap();
    let vtree = db.open_tree("version:insert_queue").unwrap();
    let mut m = MultipartUpload::new(id(4), 1, id(1), "k".into());
    for n in 1..=3u8 {
        m.parts.put(
            MpuPartKey {
                part_number: n as u64,
                timestamp: 0,
            },
            MpuPart {
                version: id(10 + n),
                etag: None,
                size: None,
                checksum: None,
            },
        );
    }
    data.update_entry_with(&m).unwrap();
    assert!(queued(&versions, &vtree).is_empty());
    let mut aborted = m.clone();
    aborted.deleted = Bool::new(true);
    data.update_entry_with(&aborted).unwrap();
    let q: Vec<Version> = queued(&versions, &vtree);
    assert_eq!(q.len(), 3);
    assert!(q.iter().all(|v| v.deleted.get()));
}

/// Both tables of uploads on one database, as on a node.
struct Uploads {
    _dir: tempfile::TempDir,
    db: db::Db,
    uploads: Arc<TableData<MpuTable>>,
    parts: Arc<TableData<MpuPartTable>>,
}

fn uploads() -> Uploads {
    let (dir, db) = temp_db();
    let uploads = TableData::new(
        MpuTable {
            versions: InsertQueue::open(&db).unwrap(),
            parts: InsertQueue::open(&db).unwrap(),
            parts_store: MpuPartTable::store(&db).unwrap(),
        },
        db.clone(),
    )
    .unwrap();
    let parts = TableData::new(
        MpuPartTable {
            versions: InsertQueue::open(&db).unwrap(),
            parts: InsertQueue::open(&db).unwrap(),
            uploads_store: MpuTable::store(&db).unwrap(),
        },
        db.clone(),
    )
    .unwrap();
    Uploads {
        _dir: dir,
        db,
        uploads,
        parts,
    }
}

fn apart_part(upload: u8, n: u64, version: u8) -> MpuPartEntry {
    MpuPartEntry::new(
        id(upload),
        MpuPartKey {
            part_number: n,
            timestamp: n,
        },
        MpuPart {
            version: id(version),
            etag: Some(format!("e{n}")),
            size: Some(n),
            checksum: None,
        },
    )
}

/// An upload whose parts are apart, aborted: the parts this node holds
/// (of that upload only) get tombstones queued; each tombstone, applied,
/// queues the release of its part's version, once.
#[test]
fn aborting_an_upload_deletes_its_parts_apart() {
    let t = uploads();
    let mut m = MultipartUpload::new(id(4), 1, id(1), "k".into());
    m.parts_apart = true;
    t.uploads.update_entry_with(&m).unwrap();
    for n in 1..=3 {
        t.parts
            .update_entry_with(&apart_part(4, n, 10 + n as u8))
            .unwrap();
    }
    // Another upload's part, next in the tree.
    t.parts.update_entry_with(&apart_part(5, 1, 20)).unwrap();
    assert!(crate::testing::queued_in::<MpuPartTable>(&t.db).is_empty());
    let mut gone = m.clone();
    gone.deleted.set();
    t.uploads.update_entry_with(&gone).unwrap();
    let q = crate::testing::queued_in::<MpuPartTable>(&t.db);
    assert_eq!(q.len(), 3, "{q:?}");
    assert!(q.iter().all(|p| p.deleted.get() && p.upload_id == id(4)));
    assert!(crate::testing::queued_in::<VersionTable>(&t.db).is_empty());
    for p in &q {
        t.parts.update_entry_with(p).unwrap();
        t.parts.update_entry_with(p).unwrap();
    }
    let mut released: Vec<Uuid> = crate::testing::queued_in::<VersionTable>(&t.db)
        .into_iter()
        .inspect(|v| assert!(v.deleted.get()))
        .map(|v| v.uuid)
        .collect();
    released.sort();
    assert_eq!(released, vec![id(11), id(12), id(13)]);
}

/// A part that reaches a node after its upload's deletion there (the
/// upload's hook ran without it) is deleted by the part table's hook.
#[test]
fn a_part_arriving_after_its_upload_is_deleted() {
    let t = uploads();
    let mut m = MultipartUpload::new(id(4), 1, id(1), "k".into());
    m.parts_apart = true;
    m.deleted.set();
    t.uploads.update_entry_with(&m).unwrap();
    t.parts.update_entry_with(&apart_part(4, 7, 17)).unwrap();
    let q = crate::testing::queued_in::<MpuPartTable>(&t.db);
    assert_eq!(q.len(), 1);
    assert!(q[0].deleted.get() && q[0].part.version == id(17));
    // A part of a live upload, or of one this node has not seen, stays.
    let t = uploads();
    let mut live = MultipartUpload::new(id(4), 1, id(1), "k".into());
    live.parts_apart = true;
    t.uploads.update_entry_with(&live).unwrap();
    t.parts.update_entry_with(&apart_part(4, 7, 17)).unwrap();
    t.parts.update_entry_with(&apart_part(6, 1, 18)).unwrap();
    assert!(crate::testing::queued_in::<MpuPartTable>(&t.db).is_empty());
}

proptest! {
    #[test]
    fn part_entry_merge_laws(
        a in (0u8..2, any::<bool>()),
        b in (0u8..2, any::<bool>()),
        c in (0u8..2, any::<bool>()),
    ) {
        let mk = |(v, del): (u8, bool)| {
            let mut e = apart_part(4, 1, v);
            if del {
                e.deleted.set();
            }
            e
        };
        check_laws(&mk(a), &mk(b), &mk(c));
    }
}

/// Counts recomputed from the final objects equal the counters kept by
/// deltas over a random sequence of updates.
#[test]
fn counters_equal_a_recount_after_random_updates() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let t = object_tables();
    for i in 0..400u64 {
        let key = format!("k{}", rng.random_range(0..20));
        let kind = rng.random_range(0..5u8);
        let uuid = rng.random_range(0..50u8);
        put(&t, &key, uuid, i, state(kind, rng.random_range(0..1000)));
    }
    let mut objects = 0;
    let mut bytes = 0;
    let mut uploads = 0;
    for item in t.objects.store.iter() {
        let (k, v) = item.unwrap();
        let o: Object = garage_table::encoding::decode_stored(&k, &v).unwrap();
        if let Some(v) = o.last_complete().filter(|v| v.is_data()) {
            objects += 1;
            bytes += v.size() as i64;
        }
        uploads += o.versions().iter().filter(|v| v.is_uploading(None)).count() as i64;
    }
    let c = t.local.get(&id(1)).unwrap();
    assert_eq!(
        (c[OBJECTS], c[BYTES], c[UNFINISHED_UPLOADS]),
        (objects, bytes, uploads)
    );
    let _ = LwwMap::<u8, u8>::new();
}
