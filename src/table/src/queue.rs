//! Entries to insert into a table later, recorded durably inside the
//! transaction of another change: how one table's change propagates to
//! another (a deleted version marks its block references deleted) without
//! network calls inside a database transaction. The table's queue worker
//! sends queued entries with quorum inserts and removes them once they are
//! acknowledged.

use std::marker::PhantomData;

use garage_db as db;

use crate::encoding::{self, tree_key};
use crate::schema::{Entry, TableSchema};

/// Name of the queue tree of table `table`.
pub fn queue_tree_name(table: &str) -> String {
    format!("{table}:insert_queue")
}

pub struct InsertQueue<F: TableSchema> {
    pub(crate) tree: db::Tree,
    _schema: PhantomData<fn() -> F>,
}

impl<F: TableSchema> Clone for InsertQueue<F> {
    fn clone(&self) -> Self {
        Self {
            tree: self.tree.clone(),
            _schema: PhantomData,
        }
    }
}

impl<F: TableSchema> InsertQueue<F> {
    pub fn open(db: &db::Db) -> db::Result<Self> {
        Ok(Self {
            tree: db.open_tree(&queue_tree_name(F::TABLE_NAME))?,
            _schema: PhantomData,
        })
    }

    /// Queues `entry` for insertion, merged with anything queued for the
    /// same keys, as part of transaction `tx`.
    pub fn push(&self, tx: &mut db::Transaction<'_>, entry: &F::E) -> db::Result<()> {
        let key = tree_key(entry.partition_key(), entry.sort_key());
        let old = tx.get(&self.tree, &key)?;
        let merged = encoding::merge_into(old.as_deref(), entry)
            .map_err(|e| db::Error::Aborted(format!("corrupt queued entry: {e}")))?;
        tx.insert(&self.tree, &key, encoding::encode(&merged))?;
        Ok(())
    }

    pub fn len(&self) -> db::Result<usize> {
        self.tree.len()
    }

    pub fn is_empty(&self) -> db::Result<bool> {
        self.tree.is_empty()
    }
}
