//! A Merkle tree per partition over a table's local entries, so that two
//! replicas find what differs between them by comparing a few hashes.
//!
//! It is a 256-ary radix trie over `khash = blake2(tree key)`: the node at
//! prefix `P` of partition `p` is stored under key `[p] ++ P`. A node is
//! empty (absent), a leaf holding one item (its tree key and value hash),
//! or an intermediate node listing its non-empty children by next byte
//! with their hashes. A subtree holding a single item is always a leaf
//! placed as high as possible, so the shape depends only on the set of
//! items, and equal sets give equal root hashes on every replica.
//!
//! The trie is updated from the `merkle_todo` queue, which every change of
//! the store fills in the same transaction, by [`MerkleUpdater`].

use std::sync::Arc;
use std::time::Duration;

use garage_db as db;
use garage_util::data::{blake2sum, Hash};
use garage_util::worker::{WorkerHandle, WorkerState};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::warn;

use crate::data::TableData;
use crate::encoding;
use crate::error::{Error, Result};
use crate::schema::TableSchema;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MerkleNode {
    Empty,
    /// Children by next byte of khash, sorted, with their node hashes.
    Intermediate(Vec<(u8, Hash)>),
    /// One item: its tree key and the hash of its encoded value.
    Leaf(Vec<u8>, Hash),
}

impl MerkleNode {
    pub fn hash(&self) -> Hash {
        blake2sum(&encoding::encode(self))
    }
}

/// Key of the Merkle node of `partition` at `prefix`.
pub fn node_key(partition: u8, prefix: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + prefix.len());
    k.push(partition);
    k.extend_from_slice(prefix);
    k
}

/// Reads a node outside of any transaction (for sync).
pub fn read_node(tree: &db::Tree, partition: u8, prefix: &[u8]) -> Result<MerkleNode> {
    match tree.get(node_key(partition, prefix))? {
        Some(b) => Ok(encoding::decode(&b)?),
        None => Ok(MerkleNode::Empty),
    }
}

fn tx_read(tx: &mut db::Transaction<'_>, tree: &db::Tree, key: &[u8]) -> db::Result<MerkleNode> {
    match tx.get(tree, key)? {
        Some(b) => encoding::decode(&b)
            .map_err(|e| db::Error::Aborted(format!("corrupt Merkle node: {e}"))),
        None => Ok(MerkleNode::Empty),
    }
}

fn tx_write(
    tx: &mut db::Transaction<'_>,
    tree: &db::Tree,
    key: &[u8],
    node: &MerkleNode,
) -> db::Result<Option<Hash>> {
    match node {
        MerkleNode::Empty => {
            tx.remove(tree, key)?;
            Ok(None)
        }
        n => {
            tx.insert(tree, key, encoding::encode(n))?;
            Ok(Some(n.hash()))
        }
    }
}

/// Sets (`vhash = Some`) or removes the item `item_key` in the subtree at
/// `prefix` (of length `depth`); returns the subtree's new hash (`None`:
/// empty).
fn update_at(
    tx: &mut db::Transaction<'_>,
    tree: &db::Tree,
    partition: u8,
    prefix: &mut Vec<u8>,
    item_key: &[u8],
    khash: &Hash,
    vhash: Option<Hash>,
) -> db::Result<Option<Hash>> {
    let depth = prefix.len();
    let key = node_key(partition, prefix);
    let node = tx_read(tx, tree, &key)?;
    let new_node = match node {
        MerkleNode::Empty => match vhash {
            Some(v) => MerkleNode::Leaf(item_key.to_vec(), v),
            None => return Ok(None),
        },
        MerkleNode::Leaf(k2, v2) => {
            if k2 == item_key {
                match vhash {
                    Some(v) => MerkleNode::Leaf(k2, v),
                    None => MerkleNode::Empty,
                }
            } else {
                let Some(v) = vhash else {
                    // Removing an item that is not here: nothing changes.
                    return Ok(Some(MerkleNode::Leaf(k2, v2).hash()));
                };
                // Two items: push both one level down.
                tx.remove(tree, &key)?;
                let k2hash = blake2sum(&k2);
                let mut children = Vec::new();
                prefix.push(k2hash.as_slice()[depth]);
                let h2 = update_at(tx, tree, partition, prefix, &k2, &k2hash, Some(v2))?;
                prefix.pop();
                children.push((k2hash.as_slice()[depth], h2.expect("just inserted")));
                prefix.push(khash.as_slice()[depth]);
                let h1 = update_at(tx, tree, partition, prefix, item_key, khash, Some(v))?;
                prefix.pop();
                let b1 = khash.as_slice()[depth];
                match children.iter_mut().find(|(b, _)| *b == b1) {
                    Some(c) => c.1 = h1.expect("just inserted"),
                    None => children.push((b1, h1.expect("just inserted"))),
                }
                children.sort_by_key(|(b, _)| *b);
                MerkleNode::Intermediate(children)
            }
        }
        MerkleNode::Intermediate(mut children) => {
            let b = khash.as_slice()[depth];
            prefix.push(b);
            let h = update_at(tx, tree, partition, prefix, item_key, khash, vhash)?;
            prefix.pop();
            match (children.iter().position(|(cb, _)| *cb == b), h) {
                (Some(i), Some(h)) => children[i].1 = h,
                (Some(i), None) => {
                    children.remove(i);
                }
                (None, Some(h)) => {
                    children.push((b, h));
                    children.sort_by_key(|(b, _)| *b);
                }
                (None, None) => (),
            }
            match children.len() {
                0 => MerkleNode::Empty,
                1 => {
                    // A single child that is a leaf moves up here.
                    let (cb, ch) = children[0];
                    prefix.push(cb);
                    let ckey = node_key(partition, prefix);
                    prefix.pop();
                    match tx_read(tx, tree, &ckey)? {
                        leaf @ MerkleNode::Leaf(..) => {
                            tx.remove(tree, &ckey)?;
                            leaf
                        }
                        _ => MerkleNode::Intermediate(vec![(cb, ch)]),
                    }
                }
                _ => MerkleNode::Intermediate(children),
            }
        }
    };
    tx_write(tx, tree, &key, &new_node)
}

/// Applies one item of the todo queue to the trie.
fn apply_item(
    tx: &mut db::Transaction<'_>,
    tree: &db::Tree,
    item_key: &[u8],
    vhash: Option<Hash>,
) -> db::Result<()> {
    let partition = *item_key.first().unwrap_or(&0);
    let khash = blake2sum(item_key);
    update_at(
        tx,
        tree,
        partition,
        &mut Vec::new(),
        item_key,
        &khash,
        vhash,
    )?;
    Ok(())
}

/// Items applied per transaction.
const BATCH: usize = 256;

/// Applies up to [`BATCH`] queued items; returns how many.
pub fn process_batch<F: TableSchema>(data: &TableData<F>) -> Result<usize> {
    let mut items = Vec::new();
    for item in data.merkle_todo.iter() {
        items.push(item?);
        if items.len() >= BATCH {
            break;
        }
    }
    if items.is_empty() {
        return Ok(0);
    }
    data.db.transaction(|tx| -> db::TxResult<(), Error> {
        for (k, v) in items.iter() {
            // A newer change of the same entry may have replaced this
            // todo item since we read it: then it is applied next time.
            if tx.get(&data.merkle_todo, k)?.as_deref() != Some(v.as_slice()) {
                continue;
            }
            let vhash = if v.is_empty() {
                None
            } else {
                Some(
                    Hash::try_from_slice(v)
                        .ok_or_else(|| db::Error::Aborted("corrupt Merkle todo item".into()))?,
                )
            };
            apply_item(tx, &data.merkle_tree, k, vhash)?;
            tx.remove(&data.merkle_todo, k)?;
        }
        Ok(())
    })?;
    Ok(items.len())
}

/// Keeps a table's Merkle trees current.
pub struct MerkleUpdater;

impl MerkleUpdater {
    pub async fn run<F: TableSchema>(
        data: Arc<TableData<F>>,
        worker: WorkerHandle,
        mut must_exit: watch::Receiver<bool>,
    ) {
        while !*must_exit.borrow() {
            let d = data.clone();
            worker.set_state(WorkerState::Busy);
            match tokio::task::spawn_blocking(move || process_batch(&d)).await {
                Ok(Ok(n)) if n > 0 => {
                    worker.ok();
                    continue;
                }
                Ok(Ok(_)) => {
                    worker.ok();
                    worker.set_state(WorkerState::Idle);
                    tokio::select! {
                        _ = data.merkle_todo_notify.notified() => (),
                        _ = tokio::time::sleep(Duration::from_secs(10)) => (),
                        _ = must_exit.changed() => (),
                    }
                }
                Ok(Err(e)) => {
                    worker.error(&e);
                    worker.set_state(WorkerState::Idle);
                    warn!(
                        table = F::TABLE_NAME,
                        "Merkle update failed, retrying in 10 s: {e}"
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(10)) => (),
                        _ = must_exit.changed() => (),
                    }
                }
                Err(e) => {
                    warn!(table = F::TABLE_NAME, "Merkle updater task failed: {e}");
                    return;
                }
            }
        }
    }
}

/// Items still waiting to be applied to the Merkle trees.
pub fn todo_len<F: TableSchema>(data: &TableData<F>) -> Result<usize> {
    Ok(data.merkle_todo.len()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{temp_db, TestEntry, TestTable};

    fn drain(data: &TableData<TestTable>) {
        while process_batch(data).unwrap() > 0 {}
    }

    fn roots(data: &TableData<TestTable>) -> Vec<(u8, MerkleNode)> {
        (0..=255u8)
            .map(|p| (p, read_node(&data.merkle_tree, p, &[]).unwrap()))
            .filter(|(_, n)| *n != MerkleNode::Empty)
            .collect()
    }

    /// Every intermediate node's child hashes match the children, no
    /// intermediate node has a single leaf child, and the leaves are
    /// exactly the store's entries.
    fn check_trie(data: &TableData<TestTable>) {
        let mut leaves = 0;
        for item in data.merkle_tree.iter() {
            let (k, v) = item.unwrap();
            match encoding::decode::<MerkleNode>(&v).unwrap() {
                MerkleNode::Empty => panic!("empty node stored"),
                MerkleNode::Leaf(key, vhash) => {
                    leaves += 1;
                    let stored = data
                        .store
                        .get(&key)
                        .unwrap()
                        .expect("leaf of a stored entry");
                    assert_eq!(blake2sum(&stored), vhash);
                }
                MerkleNode::Intermediate(children) => {
                    assert!(!children.is_empty());
                    for (b, h) in children.iter() {
                        let mut ck = k.clone();
                        ck.push(*b);
                        let child: MerkleNode =
                            encoding::decode(&data.merkle_tree.get(&ck).unwrap().unwrap()).unwrap();
                        assert_eq!(child.hash(), *h);
                        if children.len() == 1 {
                            assert!(matches!(child, MerkleNode::Intermediate(_)));
                        }
                    }
                }
            }
        }
        assert_eq!(leaves, data.store.len().unwrap());
    }

    #[test]
    fn same_items_give_same_roots_whatever_the_order() {
        let (_d1, db1) = temp_db();
        let (_d2, db2) = temp_db();
        let a = TableData::new(TestTable, db1).unwrap();
        let b = TableData::new(TestTable, db2).unwrap();
        let entries: Vec<TestEntry> = (0..2000)
            .map(|i| TestEntry::new(&format!("p{}", i % 7), &format!("s{i}"), "v"))
            .collect();
        for e in entries.iter() {
            a.update_entry_with(e).unwrap();
        }
        drain(&a);
        for e in entries.iter().rev() {
            b.update_entry_with(e).unwrap();
        }
        drain(&b);
        assert_eq!(roots(&a), roots(&b));
        check_trie(&a);

        // A change shows in the root of its partition only.
        let before = roots(&a);
        a.update_entry_with(&TestEntry::raw("p3", "s3", 2, Some("w")))
            .unwrap();
        drain(&a);
        let after = roots(&a);
        let changed: Vec<u8> = before
            .iter()
            .zip(after.iter())
            .filter(|(x, y)| x != y)
            .map(|(x, _)| x.0)
            .collect();
        assert_eq!(changed.len(), 1);
        check_trie(&a);
    }

    #[test]
    fn removing_items_restores_the_previous_trie() {
        let (_d, db) = temp_db();
        let data = TableData::new(TestTable, db).unwrap();
        for i in 0..300 {
            data.update_entry_with(&TestEntry::new("p", &format!("a{i}"), "v"))
                .unwrap();
        }
        drain(&data);
        let before: Vec<_> = data.merkle_tree.iter().map(|i| i.unwrap()).collect();
        let extra: Vec<TestEntry> = (0..300)
            .map(|i| TestEntry::raw("p", &format!("b{i}"), 5, None))
            .collect();
        for e in extra.iter() {
            data.update_entry_with(e).unwrap();
        }
        drain(&data);
        check_trie(&data);
        for e in extra.iter() {
            let key = crate::encoding::tree_key(&e.p, &e.s);
            let bytes = data.store.get(&key).unwrap().unwrap();
            assert!(data
                .delete_if_equal_hash(&key, &blake2sum(&bytes), crate::Removal::Collected)
                .unwrap());
        }
        drain(&data);
        let after: Vec<_> = data.merkle_tree.iter().map(|i| i.unwrap()).collect();
        assert_eq!(before, after);
        check_trie(&data);
    }
}
