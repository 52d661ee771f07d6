//! The version table's segments on a real database: bounded entries per
//! block write, deletion of every segment (including late ones) with their
//! block references, and entries written before segments existed.

use std::sync::Arc;

use garage_table::data::TableData;
use garage_table::encoding::{encode, encode_named, tree_key, tree_key_raw};
use garage_table::testing::temp_db;
use garage_table::InsertQueue;
use garage_util::crdt::{Bool, Crdt, LwwMap, Map};
use garage_util::data::Uuid;
use serde::Serialize;

use crate::block_ref_table::{BlockRef, BlockRefTable};
use crate::testing::queued_in;
use crate::version_table::*;

fn id(n: u64) -> Uuid {
    let mut b = [7u8; 32];
    b[..8].copy_from_slice(&n.to_be_bytes());
    Uuid::from(b)
}

fn backlink() -> VersionBacklink {
    VersionBacklink::Object {
        bucket_id: id(1),
        key: "big".into(),
    }
}

fn key(part: u64, i: u64) -> VersionBlockKey {
    VersionBlockKey {
        part_number: part,
        offset: i << 20,
    }
}

fn block(i: u64) -> VersionBlock {
    VersionBlock {
        hash: id(1_000_000 + i),
        size: 1 << 20,
        ec: None,
        recoded: 0,
    }
}

fn open() -> (
    tempfile::TempDir,
    garage_db::Db,
    Arc<TableData<VersionTable>>,
) {
    let (dir, db) = temp_db();
    let refs = InsertQueue::<BlockRefTable>::open(&db).unwrap();
    let data = TableData::new(VersionTable { block_refs: refs }, db.clone()).unwrap();
    (dir, db, data)
}

/// Every entry of version `uuid` in the local store, merged.
fn local_version(data: &TableData<VersionTable>, uuid: &Uuid) -> Option<Version> {
    let raw = data.read_range(uuid, None, usize::MAX, false).unwrap();
    let entries: Vec<Version> = raw.iter().map(|b| data.decode_entry(b).unwrap()).collect();
    Version::from_entries(&entries)
}

/// Writes `n` blocks of one version one at a time, as a PUT does; returns
/// the largest entry stored after any write and the bytes written in all.
fn write_blocks_one_by_one(
    data: &TableData<VersionTable>,
    uuid: Uuid,
    n: u64,
    as_segments: bool,
) -> (usize, usize) {
    let (mut largest, mut total) = (0, 0);
    for i in 0..n {
        let entry = if as_segments {
            Version::with_block(uuid, backlink(), i, key(1, i), block(i))
        } else {
            // The previous layout: every block merged into one entry.
            let mut v = Version::new(uuid, backlink());
            v.blocks.put(key(1, i), block(i));
            v
        };
        let stored = data.update_entry_with(&entry).unwrap().expect("changed");
        let written = encode(&stored).len();
        largest = largest.max(written);
        total += written;
    }
    (largest, total)
}

#[test]
fn metadata_written_per_block_is_bounded_whatever_the_upload_size() {
    // An entry of SEGMENT_BLOCKS blocks is about 3 KiB (50 B per block);
    // allow twice that.
    let bound = 2 * 50 * SEGMENT_BLOCKS as usize + 200;
    let (_d, _db, data) = open();
    let n = 2000;
    let uuid = id(2);
    let (largest, total) = write_blocks_one_by_one(&data, uuid, n, true);
    assert!(largest <= bound, "largest entry {largest} B > {bound} B");
    assert!(
        total <= n as usize * bound / 2,
        "{total} B written for {n} blocks: not linear"
    );
    // Every stored entry is bounded too, and the version reads whole.
    for kv in data.store.iter() {
        let (_, v) = kv.unwrap();
        assert!(v.len() <= bound, "stored entry of {} B", v.len());
    }
    let v = local_version(&data, &uuid).unwrap();
    assert_eq!(v.blocks.len(), n as usize);
    assert_eq!(v.size(), n << 20);
    assert!(v
        .blocks
        .items()
        .enumerate()
        .all(|(i, (k, b))| *k == key(1, i as u64) && *b == block(i as u64)));

    // The same writes into one entry (the previous layout) fail both
    // bounds, with half as many blocks: this is what the test guards
    // against.
    let n_old = n / 2;
    let (largest_one, total_one) = write_blocks_one_by_one(&data, id(3), n_old, false);
    assert!(largest_one > 5 * bound, "one entry: {largest_one} B");
    assert!(
        total_one > n_old as usize * bound,
        "one entry: {total_one} B in all"
    );
}

#[test]
fn segments_cut_a_whole_list_as_block_writes_do() {
    let mut blocks = Map::new();
    for part in [1u64, 3] {
        for i in 0..(SEGMENT_BLOCKS * 2 + 5) {
            blocks.put(key(part, i), block(part * 1000 + i));
        }
    }
    let segments = Version::segments(id(4), &backlink(), blocks.items());
    assert_eq!(segments.len(), 6);
    for s in &segments {
        assert!(s.blocks.len() as u64 <= SEGMENT_BLOCKS);
        for (i, (k, b)) in s.blocks.items().enumerate() {
            let index = k.offset >> 20;
            let one = Version::with_block(id(4), backlink(), index, *k, *b);
            assert_eq!(one.segment, s.segment, "block {i} of {:?}", s.segment);
        }
    }
    let whole = Version::from_entries(&segments).unwrap();
    assert_eq!(whole.blocks, blocks);
    assert!(!whole.deleted.get());
}

#[test]
fn deleting_a_version_releases_the_blocks_of_every_segment() {
    let (_d, db, data) = open();
    let uuid = id(5);
    let n = SEGMENT_BLOCKS * 3 + 1;
    write_blocks_one_by_one(&data, uuid, n, true);
    let live = queued_in::<BlockRefTable>(&db);
    assert_eq!(live.len(), n as usize);
    assert!(live.iter().all(|r| !r.deleted.get() && r.version == uuid));

    data.update_entry_with(&Version::deleted(uuid, backlink()))
        .unwrap();
    let refs = queued_in::<BlockRefTable>(&db);
    assert_eq!(refs.len(), n as usize);
    assert!(refs.iter().all(|r| r.deleted.get()), "every ref deleted");
    // Every entry is a tombstone, due for the GC.
    let mut entries = 0;
    for kv in data.store.iter() {
        let (k, v) = kv.unwrap();
        let e: Version = data.decode_stored(&k, &v).unwrap();
        assert!(e.deleted.get() && e.blocks.is_empty());
        assert!(data.gc_todo.get(&k).unwrap().is_some());
        entries += 1;
    }
    assert_eq!(entries, 1 + n.div_ceil(SEGMENT_BLOCKS));
    assert!(local_version(&data, &uuid).unwrap().deleted.get());
}

#[test]
fn a_segment_arriving_after_the_deletion_is_stored_deleted() {
    let (_d, db, data) = open();
    let uuid = id(6);
    data.update_entry_with(&Version::deleted(uuid, backlink()))
        .unwrap();
    // A late block write (or anti-entropy from a lagging replica).
    let late = Version::with_block(uuid, backlink(), 500, key(1, 500), block(500));
    data.update_entry_with(&late).unwrap();
    let stored: Version = data
        .decode_entry(&data.read_entry(&uuid, &late.segment).unwrap().unwrap())
        .unwrap();
    assert!(stored.deleted.get() && stored.blocks.is_empty());
    assert!(data
        .gc_todo
        .get(tree_key(&uuid, &late.segment))
        .unwrap()
        .is_some());
    // Its writer inserts the block's live reference directly (put.rs):
    // the version table queues the deleted reference that cancels it.
    let refs: Vec<BlockRef> = queued_in::<BlockRefTable>(&db);
    assert!(
        refs.iter()
            .any(|r| r.block == block(500).hash && r.version == uuid && r.deleted.get()),
        "no deleted reference queued for the late segment's block: {refs:?}"
    );
    assert!(refs.iter().all(|r| r.deleted.get()));
}

#[test]
fn segments_and_deletion_merge_to_the_same_state_in_any_order() {
    let uuid = id(7);
    let mut entries = vec![Version::deleted(uuid, backlink())];
    for i in [0, 1, SEGMENT_BLOCKS, SEGMENT_BLOCKS + 3] {
        entries.push(Version::with_block(
            uuid,
            backlink(),
            i,
            key(1, i),
            block(i),
        ));
    }
    let mut states = Vec::new();
    for rot in 0..entries.len() {
        for rev in [false, true] {
            let mut order = entries.clone();
            order.rotate_left(rot);
            if rev {
                order.reverse();
            }
            let (_d, db, data) = open();
            for e in &order {
                data.update_entry_with(e).unwrap();
            }
            let store: Vec<_> = data.store.iter().map(|kv| kv.unwrap()).collect();
            let refs: Vec<(bool, Uuid)> = queued_in::<BlockRefTable>(&db)
                .iter()
                .map(|r| (r.deleted.get(), r.block))
                .filter(|(deleted, _)| !deleted)
                .collect();
            assert!(refs.is_empty(), "no live ref left: {refs:?}");
            states.push(store);
        }
    }
    assert!(states.windows(2).all(|w| w[0] == w[1]));
}

/// The entry layout before segments: one entry per version, at the empty
/// sort key, holding every block (field for field the previous `Version`).
#[derive(Serialize)]
struct PreviousVersion {
    uuid: Uuid,
    deleted: Bool,
    blocks: Map<VersionBlockKey, VersionBlock>,
    parts_etags: LwwMap<u64, String>,
    backlink: VersionBacklink,
}

#[test]
fn versions_written_before_segments_are_read_and_deleted_in_place() {
    let (_d, db) = temp_db();
    let uuid = id(8);
    let mut blocks = Map::new();
    for i in 0..3 {
        blocks.put(key(1, i), block(i));
    }
    let old = PreviousVersion {
        uuid,
        deleted: Bool::new(false),
        blocks: blocks.clone(),
        parts_etags: LwwMap::new(),
        backlink: backlink(),
    };
    // Stored as the previous build did, before the table opens.
    let store = db.open_tree("version:table").unwrap();
    store
        .insert(tree_key_raw(uuid.as_slice(), &[]), encode_named(&old))
        .unwrap();

    let refs = InsertQueue::<BlockRefTable>::open(&db).unwrap();
    let data = TableData::new(VersionTable { block_refs: refs }, db.clone()).unwrap();
    let v = local_version(&data, &uuid).unwrap();
    assert_eq!(v.blocks, blocks);
    assert!(!v.deleted.get());
    assert!(v.segment.is_head());

    // A later block lands in a segment; the version reads as both.
    data.update_entry_with(&Version::with_block(
        uuid,
        backlink(),
        3,
        key(1, 3),
        block(3),
    ))
    .unwrap();
    assert_eq!(local_version(&data, &uuid).unwrap().blocks.len(), 4);

    // Deleting releases the old entry's blocks and the segment's.
    data.update_entry_with(&Version::deleted(uuid, backlink()))
        .unwrap();
    let released: Vec<BlockRef> = queued_in::<BlockRefTable>(&db);
    assert_eq!(
        released.len(),
        4,
        "3 blocks of the old entry, 1 of the segment"
    );
    assert!(released.iter().all(|r| r.deleted.get()));
    assert!(local_version(&data, &uuid).unwrap().deleted.get());
    assert!(data
        .read_range(&uuid, None, 10, false)
        .unwrap()
        .iter()
        .all(|b| data.decode_entry(b).unwrap().deleted.get()));
}

/// `created` merges as the earliest known time, an entry of an earlier
/// build (0) knowing none; the whole version takes its segments' earliest.
#[test]
fn created_is_the_earliest_known_time() {
    use garage_util::crdt::Crdt;
    let at = |t: u64| {
        let mut v = Version::new(Uuid::from([1; 32]), backlink());
        v.created = t;
        v
    };
    for (a, b, want) in [(5, 9, 5), (9, 5, 5), (0, 7, 7), (7, 0, 7), (0, 0, 0)] {
        let mut x = at(a);
        x.merge(&at(b));
        assert_eq!(x.created, want, "{a} merged with {b}");
    }
    let whole = Version::from_entries(&[at(0), at(30), at(20)]).unwrap();
    assert_eq!(whole.created, 20);
    let legacy = Version::from_entries(&[at(0)]).unwrap();
    assert_eq!(legacy.created, 0, "an old entry does not look new");
}

#[test]
fn a_transition_replaces_blocks_and_wins_in_any_order() {
    let (_d, db, data) = open();
    let uuid = id(9);
    let n = SEGMENT_BLOCKS + 2;
    write_blocks_one_by_one(&data, uuid, n, true);
    let code: garage_rpc::layout::Placement =
        garage_rpc::layout::EcCode { data: 2, parity: 1 }.into();
    let coded = |i: u64| VersionBlock {
        hash: id(2_000_000 + i),
        ec: Some(code),
        ..block(i)
    };
    let all: Vec<(VersionBlockKey, VersionBlock)> = (0..n).map(|i| (key(1, i), coded(i))).collect();
    for s in Version::segments(uuid, &backlink(), all.iter().map(|(k, b)| (k, b))) {
        data.update_entry_with(&s).unwrap();
    }
    let v = local_version(&data, &uuid).unwrap();
    assert_eq!(v.blocks.items().count() as u64, n);
    assert!(v.blocks.items().all(|(_, b)| b.ec == Some(code)));
    // The new blocks gained a reference; the old ones keep theirs (the
    // transition drops them once the whole version is re-encoded).
    let refs = queued_in::<BlockRefTable>(&db);
    assert_eq!(refs.len() as u64, 2 * n);
    assert!(refs.iter().all(|r| !r.deleted.get()));
    // A replicated block arriving late (anti-entropy) does not undo it,
    // and the merge is the same in either order.
    for i in 0..n {
        let (mut a, mut b) = (block(i), coded(i));
        a.merge(&coded(i));
        b.merge(&block(i));
        assert_eq!((a, b), (coded(i), coded(i)));
    }
    data.update_entry_with(&Version::with_block(
        uuid,
        backlink(),
        0,
        key(1, 0),
        block(0),
    ))
    .unwrap();
    let v = local_version(&data, &uuid).unwrap();
    assert_eq!(v.blocks.get(&key(1, 0)), Some(&coded(0)));
}

#[test]
fn a_re_encoded_block_wins_over_every_older_form_in_any_order() {
    use garage_rpc::layout::{EcCode, Placement};
    let scope = garage_rpc::layout::classes::scope_of("EU");
    let form = |i: u64, code: Placement, recoded: u32| VersionBlock {
        hash: id(3_000_000 + 1000 * recoded as u64 + i),
        ec: Some(code),
        recoded,
        ..block(i)
    };
    let archive: Placement = EcCode { data: 2, parity: 1 }.into();
    let eu2 = Placement::new(EcCode::copies(2).unwrap(), scope);
    let eu3 = Placement::new(EcCode::copies(3).unwrap(), scope);
    for i in 0..4 {
        // replicated -> ARCHIVE (0, as before the feature) -> EU with 2
        // copies (1) -> EU with 3 copies (2); whatever the larger address
        // or code, the newest wins, merged in any order.
        let forms = [
            block(i),
            form(i, archive, 0),
            form(i, eu2, 1),
            form(i, eu3, 2),
        ];
        let newest = forms[3];
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]] {
            let mut m = forms[order[0]];
            for k in &order[1..] {
                m.merge(&forms[*k]);
            }
            assert_eq!(m, newest, "order {order:?}");
        }
    }
    // Not written while 0: a block list of a cluster without the feature
    // encodes as before.
    let plain = garage_table::encoding::encode(&block(1));
    let mut counted = block(1);
    counted.recoded = 1;
    assert!(garage_table::encoding::encode(&counted).len() > plain.len());
}
