//! Partition-wide deletion, for tables that split one logical item into
//! several entries under one partition key (the version table's block-list
//! segments): a tombstone at the reserved *head* sort key deletes every
//! entry of that partition key on this node, present or to come.
//!
//! All the entries of a partition key live in the same partition, hence on
//! the same nodes, so each replica enforces this locally, inside the
//! transaction of the change:
//! - when the head becomes (or changes as) a tombstone, every other local
//!   entry of the partition key is merged with the schema's
//!   [`TableSchema::partition_tombstone`] and stored like any local update
//!   (Merkle todo, GC todo, `updated` hook);
//! - an entry merged into a partition key whose local head is a tombstone
//!   is merged with its partition tombstone before it is stored; the
//!   `updated` hook sees the live value it carried as the old value, so
//!   that what that value holds elsewhere is released (the version table:
//!   a late block write's reference, inserted by its writer directly).
//!
//! Whatever order a replica receives the head's tombstone and the other
//! entries in (a late write, anti-entropy from a lagging replica, read
//! repair), it ends with every entry a tombstone; tombstones are then
//! collected by the GC as usual. The head's tombstone is collected too, so
//! an entry arriving after that is stored live: the same window as for any
//! entry written after its own tombstone was collected.

use garage_db as db;
use garage_util::crdt::Crdt;

use crate::data::TableData;
use crate::encoding::tree_key;
use crate::error::Error;
use crate::schema::{Entry, PartitionKey, TableSchema};

/// Entries of a partition key read per step of a partition-wide deletion,
/// so that memory stays bounded whatever the partition's size.
const CASCADE_BATCH: usize = 128;

impl<F: TableSchema> TableData<F> {
    /// The local head of partition key `p` if it is a tombstone.
    pub(crate) fn head_tombstone(
        &self,
        tx: &db::Transaction<'_>,
        p: &F::P,
        head_key: &F::S,
    ) -> db::TxResult<Option<F::E>, Error> {
        Ok(self
            .get_in_tx(tx, &tree_key(p, head_key))?
            .filter(|h| h.is_tombstone()))
    }

    /// Turns every live local entry of `head`'s partition key, other than
    /// the head, into a tombstone. Returns how many changed.
    pub(crate) fn delete_partition_in_tx(
        &self,
        tx: &mut db::Transaction<'_>,
        head: &F::E,
    ) -> db::TxResult<usize, Error> {
        let prefix = head.partition_key().hash().as_slice().to_vec();
        let head_key = tree_key(head.partition_key(), head.sort_key());
        let mut start = prefix.clone();
        let mut changed = 0;
        loop {
            let mut batch = Vec::with_capacity(CASCADE_BATCH);
            for item in tx.range(&self.store, start.clone()..)? {
                let (k, v) = item?;
                if !k.starts_with(&prefix) || batch.len() >= CASCADE_BATCH {
                    break;
                }
                batch.push((k, v));
            }
            let Some((last, _)) = batch.last() else {
                return Ok(changed);
            };
            // Next step: the keys after the last one read.
            start = last.clone();
            start.push(0);
            let full = batch.len() == CASCADE_BATCH;
            for (k, v) in batch {
                if k == head_key {
                    continue;
                }
                let old: F::E = crate::encoding::decode_stored(&k, &v)
                    .map_err(|e| db::TxError::Abort(Error::from(e)))?;
                if old.is_tombstone() {
                    continue;
                }
                let mut new = old.clone();
                new.merge(&self.schema.partition_tombstone(&old, head));
                if new != old {
                    self.write_in_tx(tx, &k, Some(&old), &new)?;
                    changed += 1;
                }
            }
            if !full {
                return Ok(changed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::encoding::encode;
    use crate::testing::{temp_db, TestEntry};
    use garage_util::crdt::Lww;

    /// [`crate::testing::TestTable`] with partition-wide deletion: the head
    /// is the empty sort key; counts the entries its hook saw deleted.
    struct CascadeTable {
        deleted: Arc<AtomicUsize>,
    }

    impl TableSchema for CascadeTable {
        const TABLE_NAME: &'static str = "cascade_test";
        type P = String;
        type S = String;
        type E = TestEntry;
        type Filter = ();
        fn matches_filter(_: &TestEntry, _: &()) -> bool {
            true
        }
        fn updated(
            &self,
            _tx: &mut db::Transaction<'_>,
            old: Option<&TestEntry>,
            new: &TestEntry,
        ) -> db::Result<()> {
            let was = old.is_some_and(|e| !e.is_tombstone());
            if was && new.is_tombstone() {
                self.deleted.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        }
        fn partition_head(&self) -> Option<String> {
            Some(String::new())
        }
        fn partition_tombstone(&self, entry: &TestEntry, _head: &TestEntry) -> TestEntry {
            // The largest timestamp: no later value wins over it.
            TestEntry {
                value: Lww::raw(u64::MAX, None),
                ..entry.clone()
            }
        }
    }

    fn open() -> (
        tempfile::TempDir,
        Arc<TableData<CascadeTable>>,
        Arc<AtomicUsize>,
    ) {
        let (dir, db) = temp_db();
        let deleted = Arc::new(AtomicUsize::new(0));
        let data = TableData::new(
            CascadeTable {
                deleted: deleted.clone(),
            },
            db,
        )
        .unwrap();
        (dir, data, deleted)
    }

    fn head_tombstone(p: &str) -> TestEntry {
        TestEntry::raw(p, "", 5, None)
    }

    fn stored(data: &TableData<CascadeTable>, p: &str, s: &str) -> Option<TestEntry> {
        data.read_entry(&p.to_string(), &s.to_string())
            .unwrap()
            .map(|b| data.decode_entry(&b).unwrap())
    }

    #[test]
    fn a_head_tombstone_deletes_the_partition_keys_entries_only() {
        let (_d, data, deleted) = open();
        // More entries than one cascade step reads.
        let n = CASCADE_BATCH * 2 + 7;
        for i in 0..n {
            data.update_entry_with(&TestEntry::new("p", &format!("s{i:04}"), "v"))
                .unwrap();
        }
        data.update_entry_with(&TestEntry::new("other", "s", "v"))
            .unwrap();
        data.merkle_todo.clear().unwrap();
        data.gc_todo.clear().unwrap();

        data.update_entry_with(&head_tombstone("p")).unwrap();
        for i in 0..n {
            let s = format!("s{i:04}");
            let e = stored(&data, "p", &s).unwrap();
            assert!(e.is_tombstone(), "{s} deleted with its head");
            let key = tree_key(&"p".to_string(), &s);
            assert!(data.merkle_todo.get(&key).unwrap().is_some(), "merkle todo");
            assert!(data.gc_todo.get(&key).unwrap().is_some(), "gc todo");
        }
        assert_eq!(deleted.load(Ordering::SeqCst), n, "hook saw each deletion");
        assert!(!stored(&data, "other", "s").unwrap().is_tombstone());
        // The head is a tombstone for the GC too.
        let head_key = tree_key(&"p".to_string(), &String::new());
        assert!(data.gc_todo.get(&head_key).unwrap().is_some());
        // Deleting again changes nothing.
        assert!(data
            .update_entry_with(&head_tombstone("p"))
            .unwrap()
            .is_none());
        assert_eq!(deleted.load(Ordering::SeqCst), n);
    }

    #[test]
    fn an_entry_arriving_after_its_head_tombstone_is_stored_deleted() {
        let (_d, data, deleted) = open();
        data.update_entry_with(&head_tombstone("p")).unwrap();
        // A late write, even with a newer timestamp than the deletion.
        let late = TestEntry::raw("p", "late", 1000, Some("v"));
        data.update_many(&[encode(&late)]).unwrap();
        let e = stored(&data, "p", "late").unwrap();
        assert!(e.is_tombstone());
        let key = tree_key(&"p".to_string(), &"late".to_string());
        assert!(data.gc_todo.get(&key).unwrap().is_some());
        // The hook saw the value it carried deleted, so that what that
        // value holds elsewhere (a block reference its writer inserted)
        // is released.
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
        // A live head is no deletion.
        data.update_entry_with(&TestEntry::new("q", "", "v"))
            .unwrap();
        data.update_entry_with(&TestEntry::new("q", "x", "v"))
            .unwrap();
        assert!(!stored(&data, "q", "x").unwrap().is_tombstone());
    }

    #[test]
    fn the_outcome_does_not_depend_on_arrival_order() {
        let entries = [
            head_tombstone("p"),
            TestEntry::raw("p", "a", 1, Some("x")),
            TestEntry::raw("p", "a", 9, Some("y")),
            TestEntry::raw("p", "b", 3, Some("z")),
        ];
        let mut outcomes = Vec::new();
        // Every order of the four (and, once, all in one transaction).
        let mut orders: Vec<Vec<usize>> = Vec::new();
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    for d in 0..4 {
                        let o = vec![a, b, c, d];
                        let mut sorted = o.clone();
                        sorted.sort();
                        if sorted == [0, 1, 2, 3] {
                            orders.push(o);
                        }
                    }
                }
            }
        }
        for (n, order) in orders.iter().enumerate() {
            let (_d, data, _) = open();
            if n == 0 {
                let all: Vec<Vec<u8>> = order.iter().map(|i| encode(&entries[*i])).collect();
                data.update_many(&all).unwrap();
            } else {
                for i in order {
                    data.update_entry_with(&entries[*i]).unwrap();
                }
            }
            let state: Vec<(Vec<u8>, Vec<u8>)> = data.store.iter().map(|kv| kv.unwrap()).collect();
            outcomes.push(state);
        }
        assert_eq!(outcomes.len(), 24);
        assert!(outcomes.windows(2).all(|w| w[0] == w[1]));
        let (_d, data, _) = open();
        for e in &entries {
            data.update_entry_with(e).unwrap();
        }
        assert!(stored(&data, "p", "a").unwrap().is_tombstone());
        assert!(stored(&data, "p", "b").unwrap().is_tombstone());
    }
}
