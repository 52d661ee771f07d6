//! Block references: one entry per (data block, version that uses it).
//!
//! Partition key: the block's hash, so that all references to a block live
//! on the nodes that store the block itself (the block layer uses the same
//! partitioning); sort key: the version's uuid. A reference is only ever
//! created (by the version table's hook, when a block is added to a
//! version) and then deleted (when the version is deleted); `deleted` is a
//! [`Bool`], so the deletion wins over any late copy of the live reference.
//!
//! The hook of this table is where metadata meets data: each node keeps a
//! reference count per block (in the block manager), incremented when a
//! live reference appears in its store and decremented when it goes away.
//! Doing it inside the same transaction as the store change means the
//! count can never drift from the references this node holds, whatever
//! order merges arrive in.

use std::sync::Arc;

use garage_db as db;
use garage_table::{Entry, TableSchema};
use garage_util::crdt::{Bool, Crdt};
use garage_util::data::{Hash, Uuid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    /// The referenced block.
    pub block: Hash,
    /// The version that uses it.
    pub version: Uuid,
    pub deleted: Bool,
}

impl BlockRef {
    /// A live reference.
    pub fn new(block: Hash, version: Uuid) -> Self {
        Self {
            block,
            version,
            deleted: Bool::new(false),
        }
    }

    /// The deletion of a reference (a tombstone).
    pub fn deleted(block: Hash, version: Uuid) -> Self {
        Self {
            block,
            version,
            deleted: Bool::new(true),
        }
    }

    /// Whether this entry counts as a reference to its block.
    pub fn is_live(&self) -> bool {
        !self.deleted.get()
    }
}

impl Crdt for BlockRef {
    fn merge(&mut self, other: &Self) {
        self.deleted.merge(&other.deleted);
    }
}

impl Entry<Hash, Uuid> for BlockRef {
    fn partition_key(&self) -> &Hash {
        &self.block
    }
    fn sort_key(&self) -> &Uuid {
        &self.version
    }
    fn is_tombstone(&self) -> bool {
        self.deleted.get()
    }
}

/// What the block layer does when this node's references to a block
/// change. Both calls run inside the transaction that changes the
/// reference, so an implementation that keeps its counts in the same
/// database stays exactly in step with the table (an error aborts the
/// whole change, which will be retried by the sender).
pub trait BlockRefHook: Send + Sync + 'static {
    /// A live reference to `hash` appeared in this node's store.
    fn block_incref(&self, tx: &mut db::Transaction<'_>, hash: &Hash) -> db::Result<()>;
    /// A live reference to `hash` was deleted or removed from this node's
    /// store.
    fn block_decref(&self, tx: &mut db::Transaction<'_>, hash: &Hash) -> db::Result<()>;
}

/// A hook that does nothing: for nodes without a block manager yet.
pub struct NoBlockRefHook;

impl BlockRefHook for NoBlockRefHook {
    fn block_incref(&self, _tx: &mut db::Transaction<'_>, _hash: &Hash) -> db::Result<()> {
        Ok(())
    }
    fn block_decref(&self, _tx: &mut db::Transaction<'_>, _hash: &Hash) -> db::Result<()> {
        Ok(())
    }
}

/// A hook that records every call, for tests (here and in other crates).
/// The record is in memory: calls made by a transaction that later aborts
/// stay recorded, so use it only where transactions commit.
#[derive(Default)]
pub struct CountingBlockRefHook {
    /// (block, +1 for incref or -1 for decref), in call order.
    pub calls: std::sync::Mutex<Vec<(Hash, i64)>>,
}

impl CountingBlockRefHook {
    /// Sum of the calls for `hash`: the reference count the block layer
    /// would hold.
    pub fn count(&self, hash: &Hash) -> i64 {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(h, _)| h == hash)
            .map(|(_, d)| d)
            .sum()
    }

    /// The calls made so far, and forgets them.
    pub fn take(&self) -> Vec<(Hash, i64)> {
        std::mem::take(&mut *self.calls.lock().expect("lock"))
    }
}

impl BlockRefHook for CountingBlockRefHook {
    fn block_incref(&self, _tx: &mut db::Transaction<'_>, hash: &Hash) -> db::Result<()> {
        self.calls.lock().expect("lock").push((*hash, 1));
        Ok(())
    }
    fn block_decref(&self, _tx: &mut db::Transaction<'_>, hash: &Hash) -> db::Result<()> {
        self.calls.lock().expect("lock").push((*hash, -1));
        Ok(())
    }
}

pub struct BlockRefTable {
    pub hook: Arc<dyn BlockRefHook>,
}

impl TableSchema for BlockRefTable {
    const TABLE_NAME: &'static str = "block_ref";
    type P = Hash;
    type S = Uuid;
    type E = BlockRef;
    type Filter = ();

    fn matches_filter(_: &BlockRef, _: &()) -> bool {
        true
    }

    /// Calls the hook once per transition between "this node holds a live
    /// reference" and "it does not": absent or deleted -> live is an
    /// incref, live -> deleted or removed is a decref. A tombstone that
    /// arrives for a reference never seen live, or the GC removing a
    /// tombstone, changes nothing.
    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&BlockRef>,
        new: Option<&BlockRef>,
    ) -> db::Result<()> {
        let was_live = old.is_some_and(BlockRef::is_live);
        let is_live = new.is_some_and(BlockRef::is_live);
        let block = match (old, new) {
            (_, Some(e)) | (Some(e), None) => e.block,
            (None, None) => return Ok(()),
        };
        match (was_live, is_live) {
            (false, true) => self.hook.block_incref(tx, &block),
            (true, false) => self.hook.block_decref(tx, &block),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use garage_db::Engine;
    use garage_table::data::TableData;
    use garage_table::encoding::{encode, tree_key};
    use garage_util::data::blake2sum;
    use proptest::prelude::*;

    use super::*;
    use crate::testing::{check_laws, temp_db};

    fn block_ref() -> impl Strategy<Value = BlockRef> {
        any::<bool>().prop_map(|d| BlockRef {
            block: Hash::from([1; 32]),
            version: Uuid::from([2; 32]),
            deleted: Bool::new(d),
        })
    }

    proptest! {
        #[test]
        fn block_ref_merge_laws(a in block_ref(), b in block_ref(), c in block_ref()) {
            check_laws(&a, &b, &c);
        }
    }

    #[test]
    fn deletion_wins_and_is_a_tombstone() {
        let h = Hash::from([1; 32]);
        let v = Uuid::from([2; 32]);
        let mut live = BlockRef::new(h, v);
        assert!(!live.is_tombstone());
        live.merge(&BlockRef::deleted(h, v));
        assert!(live.is_tombstone());
        live.merge(&BlockRef::new(h, v));
        assert!(live.is_tombstone(), "a late live copy does not resurrect");
    }

    fn hook_calls_once_per_transition(engine: Engine) {
        let (_dir, db) = temp_db(engine);
        let hook = Arc::new(CountingBlockRefHook::default());
        let data = TableData::new(BlockRefTable { hook: hook.clone() }, db).unwrap();
        let (h1, h2) = (Hash::from([1; 32]), Hash::from([9; 32]));
        let (v1, v2) = (Uuid::from([2; 32]), Uuid::from([3; 32]));

        // Appearing live: one incref; receiving it again: nothing.
        data.update_entry_with(&BlockRef::new(h1, v1)).unwrap();
        data.update_entry_with(&BlockRef::new(h1, v1)).unwrap();
        assert_eq!(hook.take(), vec![(h1, 1)]);

        // A second version using the same block: its own reference.
        data.update_entry_with(&BlockRef::new(h1, v2)).unwrap();
        assert_eq!(hook.count(&h1), 1);
        assert_eq!(hook.take(), vec![(h1, 1)]);

        // Deleted: one decref; again, or a late live copy: nothing.
        data.update_entry_with(&BlockRef::deleted(h1, v1)).unwrap();
        data.update_entry_with(&BlockRef::deleted(h1, v1)).unwrap();
        data.update_entry_with(&BlockRef::new(h1, v1)).unwrap();
        assert_eq!(hook.take(), vec![(h1, -1)]);

        // A tombstone for a reference never seen live: nothing.
        data.update_entry_with(&BlockRef::deleted(h2, v1)).unwrap();
        assert_eq!(hook.take(), vec![]);

        // The GC removing a tombstone: nothing.
        let tomb = encode(&BlockRef::deleted(h1, v1));
        assert!(data
            .delete_if_equal_hash(&tree_key(&h1, &v1), &blake2sum(&tomb))
            .unwrap());
        assert_eq!(hook.take(), vec![]);

        // A live reference removed from this node's store (the partition
        // moved away): one decref.
        let live = encode(&BlockRef::new(h1, v2));
        assert!(data
            .delete_if_equal_hash(&tree_key(&h1, &v2), &blake2sum(&live))
            .unwrap());
        assert_eq!(hook.take(), vec![(h1, -1)]);
    }

    #[test]
    fn hook_calls_once_per_transition_lmdb() {
        hook_calls_once_per_transition(Engine::Lmdb);
    }

    #[test]
    fn hook_calls_once_per_transition_sqlite() {
        hook_calls_once_per_transition(Engine::Sqlite);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Whatever order live and deleted copies arrive in, the count the
        /// hook maintains equals the number of live references stored.
        #[test]
        fn hook_count_matches_live_references(
            ops in proptest::collection::vec((0u8..2, 0u8..3, any::<bool>()), 0..20)
        ) {
            let (_dir, db) = temp_db(Engine::Sqlite);
            let hook = Arc::new(CountingBlockRefHook::default());
            let data = TableData::new(BlockRefTable { hook: hook.clone() }, db).unwrap();
            for (b, v, del) in ops.iter() {
                let e = BlockRef {
                    block: Hash::from([*b; 32]),
                    version: Uuid::from([*v; 32]),
                    deleted: Bool::new(*del),
                };
                data.update_entry_with(&e).unwrap();
            }
            for b in 0u8..2 {
                let h = Hash::from([b; 32]);
                let live = (0u8..3)
                    .filter(|v| {
                        data.read_entry(&h, &Uuid::from([*v; 32]))
                            .unwrap()
                            .map(|bytes| data.decode_entry(&bytes).unwrap().is_live())
                            .unwrap_or(false)
                    })
                    .count() as i64;
                prop_assert_eq!(hook.count(&h), live);
            }
        }
    }
}
