//! Which versions use which block: (block hash, version id) -> deleted
//! flag. Changes call the block manager's hook inside the same transaction,
//! so a block's reference count always matches this table.

use std::sync::Arc;

use garage_db as db;
use garage_rpc::layout::Placement;
use garage_table::{Entry, Removal, TableSchema};
use garage_util::crdt::{Bool, Crdt};
use garage_util::data::{Hash, Uuid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    pub block: Hash,
    pub version: Uuid,
    pub deleted: Bool,
    /// The block's erasure code, `None` for a replicated block: what the
    /// nodes counting its references need to find its shards (to check
    /// them, and to free them). Absent in older entries.
    #[serde(default)]
    pub ec: Option<Placement>,
}

impl BlockRef {
    pub fn new(block: Hash, version: Uuid, deleted: bool) -> Self {
        Self {
            block,
            version,
            deleted: Bool::new(deleted),
            ec: None,
        }
    }

    /// A live reference to `b` (replicated or erasure-coded).
    pub fn to_block(b: &crate::version_table::VersionBlock, version: Uuid) -> Self {
        Self {
            ec: b.ec,
            ..Self::new(b.hash, version, false)
        }
    }
}

impl Crdt for BlockRef {
    fn merge(&mut self, other: &Self) {
        self.deleted.merge(&other.deleted);
        // Set once by the writer; the larger wins should two disagree.
        if other.ec > self.ec {
            self.ec = other.ec;
        }
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

/// What the block manager does when a block gains or loses a reference
/// on this node.
pub trait BlockRefHook: Send + Sync + 'static {
    /// `ec`: the block's erasure code, `None` for a replicated block.
    fn block_incref(
        &self,
        tx: &mut db::Transaction<'_>,
        block: &Hash,
        ec: Option<Placement>,
    ) -> db::Result<()>;
    fn block_decref(&self, tx: &mut db::Transaction<'_>, block: &Hash) -> db::Result<()>;
}

/// The block manager's reference counts.
impl BlockRefHook for garage_block::rc::BlockRc {
    fn block_incref(
        &self,
        tx: &mut db::Transaction<'_>,
        block: &Hash,
        ec: Option<Placement>,
    ) -> db::Result<()> {
        let now = garage_util::time::now_msec();
        self.incref(tx, block, now)?;
        match ec {
            Some(code) => self.note_ec(tx, block, code, now),
            None => Ok(()),
        }
    }
    fn block_decref(&self, tx: &mut db::Transaction<'_>, block: &Hash) -> db::Result<()> {
        self.decref(tx, block, garage_util::time::now_msec())
    }
}

/// References only recorded, no counts (for tests of other tables).
#[cfg(any(test, feature = "testing"))]
pub struct NoBlockRefHook;

#[cfg(any(test, feature = "testing"))]
impl BlockRefHook for NoBlockRefHook {
    fn block_incref(
        &self,
        _: &mut db::Transaction<'_>,
        _: &Hash,
        _: Option<Placement>,
    ) -> db::Result<()> {
        Ok(())
    }
    fn block_decref(&self, _: &mut db::Transaction<'_>, _: &Hash) -> db::Result<()> {
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

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&BlockRef>,
        new: &BlockRef,
    ) -> db::Result<()> {
        let was = old.is_some_and(|r| !r.deleted.get());
        match (was, !new.deleted.get()) {
            (false, true) => self.hook.block_incref(tx, &new.block, new.ec),
            (true, false) => self.hook.block_decref(tx, &new.block),
            _ => Ok(()),
        }
    }

    /// A live reference that leaves this node (offloaded after a layout
    /// change) no longer keeps this node's copy of the block: the local
    /// count goes down, and the block's resync hands the copy over to the
    /// nodes that now hold it before removing it. Nothing is propagated:
    /// the reference lives on at its new holders. (The GC only collects
    /// deleted references, which were already not counted.)
    fn removed(
        &self,
        tx: &mut db::Transaction<'_>,
        old: &BlockRef,
        _why: Removal,
    ) -> db::Result<()> {
        if old.deleted.get() {
            return Ok(());
        }
        self.hook.block_decref(tx, &old.block)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use garage_db::Engine;
    use garage_table::data::TableData;
    use garage_table::encoding::{encode, tree_key};
    use garage_util::data::blake2sum;

    use super::*;
    use crate::testing::temp_db_of;

    /// Counts what the block manager would: +1 per incref, -1 per decref.
    #[derive(Default)]
    struct Count(AtomicI64);

    impl BlockRefHook for Count {
        fn block_incref(
            &self,
            _: &mut db::Transaction<'_>,
            _: &Hash,
            _: Option<Placement>,
        ) -> db::Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn block_decref(&self, _: &mut db::Transaction<'_>, _: &Hash) -> db::Result<()> {
            self.0.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// The local count follows the live references this node stores:
    /// a reference offloaded after a layout change releases the local
    /// copy; a collected tombstone was already not counted.
    #[test]
    fn local_count_follows_stored_live_references() {
        let (_dir, db) = temp_db_of(Engine::Lmdb);
        let count = Arc::new(Count::default());
        let data = TableData::new(
            BlockRefTable {
                hook: count.clone(),
            },
            db,
        )
        .unwrap();
        let block = blake2sum(b"block");
        let (a, b) = (Uuid::from([1; 32]), Uuid::from([2; 32]));
        let remove = |r: &BlockRef, why| {
            let key = tree_key(&r.block, &r.version);
            let stored = data.read_entry(&r.block, &r.version).unwrap().unwrap();
            assert_eq!(stored, encode(r));
            assert!(data
                .delete_if_equal_hash(&key, &blake2sum(&stored), why)
                .unwrap());
        };
        data.update_entry_with(&BlockRef::new(block, a, false))
            .unwrap();
        data.update_entry_with(&BlockRef::new(block, b, false))
            .unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        // b's version is deleted: its reference goes, then its tombstone
        // is collected (no second decref).
        data.update_entry_with(&BlockRef::new(block, b, true))
            .unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        remove(&BlockRef::new(block, b, true), Removal::Collected);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // a's live reference leaves this node: the local copy is released.
        remove(&BlockRef::new(block, a, false), Removal::Offloaded);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }
}
