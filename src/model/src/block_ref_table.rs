//! Which versions use which block: (block hash, version id) -> deleted
//! flag. Changes call the block manager's hook inside the same transaction,
//! so a block's reference count always matches this table.

use std::sync::Arc;

use garage_db as db;
use garage_table::{Entry, TableSchema};
use garage_util::crdt::{Bool, Crdt};
use garage_util::data::{Hash, Uuid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    pub block: Hash,
    pub version: Uuid,
    pub deleted: Bool,
}

impl BlockRef {
    pub fn new(block: Hash, version: Uuid, deleted: bool) -> Self {
        Self {
            block,
            version,
            deleted: Bool::new(deleted),
        }
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

/// What the block manager does when a block gains or loses a reference
/// on this node.
pub trait BlockRefHook: Send + Sync + 'static {
    fn block_incref(&self, tx: &mut db::Transaction<'_>, block: &Hash) -> db::Result<()>;
    fn block_decref(&self, tx: &mut db::Transaction<'_>, block: &Hash) -> db::Result<()>;
}

/// The block manager's reference counts.
impl BlockRefHook for garage_block::rc::BlockRc {
    fn block_incref(&self, tx: &mut db::Transaction<'_>, block: &Hash) -> db::Result<()> {
        self.incref(tx, block, garage_util::time::now_msec())
    }
    fn block_decref(&self, tx: &mut db::Transaction<'_>, block: &Hash) -> db::Result<()> {
        self.decref(tx, block, garage_util::time::now_msec())
    }
}

/// References only recorded, no counts (for tests of other tables).
pub struct NoBlockRefHook;

impl BlockRefHook for NoBlockRefHook {
    fn block_incref(&self, _: &mut db::Transaction<'_>, _: &Hash) -> db::Result<()> {
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
        new: Option<&BlockRef>,
    ) -> db::Result<()> {
        let was = old.is_some_and(|r| !r.deleted.get());
        let is = new.is_some_and(|r| !r.deleted.get());
        let block = old.or(new).map(|r| r.block);
        match (was, is, block) {
            (false, true, Some(b)) => self.hook.block_incref(tx, &b),
            (true, false, Some(b)) => self.hook.block_decref(tx, &b),
            _ => Ok(()),
        }
    }
}
