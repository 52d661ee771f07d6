//! What the daemon and its admin commands need from every table, whatever
//! its schema: statistics, a sync on demand, its workers.

use std::sync::Arc;

use garage_util::data::{blake2sum, Hash};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::merkle::{self, MerkleNode};
use crate::schema::TableSchema;
use crate::sync::SyncStats;
use crate::table::Table;

/// One table on one node, for `garage stats` and the tests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableStats {
    pub name: String,
    /// Entries in the local store (tombstones included).
    pub items: usize,
    pub merkle_nodes: usize,
    pub merkle_todo: usize,
    pub gc_todo: usize,
    pub insert_queue: usize,
    /// Hash of the 256 partition roots: equal on two nodes holding the
    /// same partitions exactly when their entries are equal.
    pub merkle_digest: Hash,
}

#[async_trait::async_trait]
pub trait AnyTable: Send + Sync {
    fn name(&self) -> &'static str;
    fn stats(&self) -> Result<TableStats>;
    /// Runs one anti-entropy pass now, with the current layout.
    async fn sync_now(&self) -> Result<SyncStats>;
    fn spawn(self: Arc<Self>, must_exit: &watch::Receiver<bool>) -> Vec<JoinHandle<()>>;
}

#[async_trait::async_trait]
impl<F: TableSchema> AnyTable for Table<F> {
    fn name(&self) -> &'static str {
        F::TABLE_NAME
    }

    fn stats(&self) -> Result<TableStats> {
        let d = &self.data;
        let mut roots = Vec::with_capacity(256 * 32);
        for p in 0..=255u8 {
            match merkle::read_node(&d.merkle_tree, p, &[])? {
                MerkleNode::Empty => roots.extend_from_slice(&[0u8; 32]),
                n => roots.extend_from_slice(n.hash().as_slice()),
            }
        }
        Ok(TableStats {
            name: F::TABLE_NAME.to_string(),
            items: d.store.len()?,
            merkle_nodes: d.merkle_tree.len()?,
            merkle_todo: d.merkle_todo.len()?,
            gc_todo: d.gc_todo.len()?,
            insert_queue: d.insert_queue.len()?,
            merkle_digest: blake2sum(&roots),
        })
    }

    async fn sync_now(&self) -> Result<SyncStats> {
        let layout = self.system.layout();
        self.sync_pass(&layout).await
    }

    fn spawn(self: Arc<Self>, must_exit: &watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        self.spawn_workers(must_exit)
    }
}
