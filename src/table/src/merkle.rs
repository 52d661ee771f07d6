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

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use garage_db as db;
use garage_util::data::{blake2sum, Hash};
use garage_util::worker::runner::{Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

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
    /// The hash nodes compare: of its format 1 bytes, however it is stored.
    pub fn hash(&self) -> Hash {
        blake2sum(&encoding::encode_named(self))
    }

    /// How it is stored when the cluster allows format 3 for table entries
    /// (feature `compressed-entries`): a tag byte, then a leaf's value hash
    /// and tree key, or an intermediate node's children (next byte, hash),
    /// without MessagePack's names and lengths: 11 bytes less per leaf, 3
    /// to 4 per child. Only this node reads it; its hash does not change.
    fn to_binary(&self) -> Vec<u8> {
        match self {
            MerkleNode::Empty => vec![NODE_EMPTY],
            MerkleNode::Leaf(key, vhash) => {
                let mut v = Vec::with_capacity(33 + key.len());
                v.push(NODE_LEAF);
                v.extend_from_slice(vhash.as_slice());
                v.extend_from_slice(key);
                v
            }
            MerkleNode::Intermediate(children) => {
                let mut v = Vec::with_capacity(1 + 33 * children.len());
                v.push(NODE_INTERMEDIATE);
                for (b, h) in children {
                    v.push(*b);
                    v.extend_from_slice(h.as_slice());
                }
                v
            }
        }
    }

    /// A stored node: format 1, or [`Self::to_binary`]'s.
    fn decode(bytes: &[u8]) -> std::result::Result<Self, encoding::DecodeError> {
        let bad = |why: &str| encoding::DecodeError::Stored(format!("Merkle node: {why}"));
        match bytes.split_first() {
            Some((&NODE_EMPTY, [])) => Ok(MerkleNode::Empty),
            Some((&NODE_LEAF, rest)) if rest.len() >= 32 => {
                let (h, key) = rest.split_at(32);
                let h = Hash::try_from_slice(h).ok_or_else(|| bad("hash"))?;
                Ok(MerkleNode::Leaf(key.to_vec(), h))
            }
            Some((&NODE_INTERMEDIATE, rest)) if !rest.is_empty() && rest.len() % 33 == 0 => {
                let children = rest
                    .chunks(33)
                    .map(|c| {
                        Ok((
                            c[0],
                            Hash::try_from_slice(&c[1..]).ok_or_else(|| bad("hash"))?,
                        ))
                    })
                    .collect::<std::result::Result<Vec<_>, encoding::DecodeError>>()?;
                Ok(MerkleNode::Intermediate(children))
            }
            Some((&(NODE_EMPTY | NODE_LEAF | NODE_INTERMEDIATE), _)) => Err(bad("bad length")),
            _ => encoding::decode(bytes),
        }
    }
}

/// Tag bytes of [`MerkleNode::to_binary`] (format 1 starts with 1).
const NODE_EMPTY: u8 = 0x10;
const NODE_LEAF: u8 = 0x11;
const NODE_INTERMEDIATE: u8 = 0x12;

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
        Some(b) => Ok(MerkleNode::decode(&b)?),
        None => Ok(MerkleNode::Empty),
    }
}

/// The nodes a batch of updates touched, kept in memory and written back
/// once at its end: the top of a busy partition's trie (up to 256
/// children, about 9 KB encoded) is then decoded, encoded and hashed once
/// per batch instead of once per item.
///
/// Hashes are computed at the end too: while the batch runs, an
/// intermediate node's entry for a child the batch changed holds a stale
/// hash. [`Overlay::flush`] writes the changed nodes deepest first, each
/// one's hash set into its parent (also changed, being on its path)
/// before the parent is written.
struct Overlay<'t> {
    tree: &'t db::Tree,
    changed: HashMap<Vec<u8>, MerkleNode>,
    /// Whether nodes are written in their binary form.
    binary: bool,
}

impl<'t> Overlay<'t> {
    fn new(tree: &'t db::Tree, binary: bool) -> Self {
        Self {
            tree,
            changed: HashMap::new(),
            binary,
        }
    }

    fn read(&self, tx: &mut db::Transaction<'_>, key: &[u8]) -> db::Result<MerkleNode> {
        if let Some(n) = self.changed.get(key) {
            return Ok(n.clone());
        }
        match tx.get(self.tree, key)? {
            Some(b) => MerkleNode::decode(&b)
                .map_err(|e| db::Error::Aborted(format!("corrupt Merkle node: {e}"))),
            None => Ok(MerkleNode::Empty),
        }
    }

    fn write(&mut self, key: Vec<u8>, node: MerkleNode) {
        self.changed.insert(key, node);
    }

    /// Writes every changed node, deepest first, setting each one's hash
    /// in its parent.
    fn flush(mut self, tx: &mut db::Transaction<'_>) -> db::Result<()> {
        let mut keys: Vec<Vec<u8>> = self.changed.keys().cloned().collect();
        keys.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        for key in keys {
            let node = self.changed.remove(&key).expect("a changed node");
            if node == MerkleNode::Empty {
                tx.remove(self.tree, &key)?;
                continue;
            }
            let bytes = encoding::encode_named(&node);
            let hash = blake2sum(&bytes);
            match self.binary {
                true => tx.insert(self.tree, &key, node.to_binary())?,
                false => tx.insert(self.tree, &key, &bytes)?,
            }
            // The partition's root (key = partition byte) has no parent.
            if key.len() > 1 {
                let (parent_key, b) = key.split_at(key.len() - 1);
                match self.changed.get_mut(parent_key) {
                    Some(MerkleNode::Intermediate(children)) => {
                        match children.iter_mut().find(|(cb, _)| *cb == b[0]) {
                            Some(c) => c.1 = hash,
                            None => return Err(broken(&key, "its parent does not list it")),
                        }
                    }
                    _ => return Err(broken(&key, "its parent was not changed with it")),
                }
            }
        }
        Ok(())
    }
}

fn broken(key: &[u8], why: &str) -> db::Error {
    db::Error::Aborted(format!(
        "Merkle batch left node {} inconsistent: {why}",
        hex::encode(key)
    ))
}

/// Sets (`vhash = Some`) or removes the item `item_key` in the subtree at
/// `prefix` (of length `depth`); returns whether the subtree is non-empty
/// afterwards. The hashes of the nodes it changes are set by
/// [`Overlay::flush`].
fn update_at(
    tx: &mut db::Transaction<'_>,
    ov: &mut Overlay<'_>,
    partition: u8,
    prefix: &mut Vec<u8>,
    item_key: &[u8],
    khash: &Hash,
    vhash: Option<Hash>,
) -> db::Result<bool> {
    let depth = prefix.len();
    let key = node_key(partition, prefix);
    let node = ov.read(tx, &key)?;
    let new_node = match node {
        MerkleNode::Empty => match vhash {
            Some(v) => MerkleNode::Leaf(item_key.to_vec(), v),
            None => return Ok(false),
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
                    return Ok(true);
                };
                // Two items: push both one level down. The hashes in the
                // new node are placeholders until the flush.
                let k2hash = blake2sum(&k2);
                let (b2, b1) = (k2hash.as_slice()[depth], khash.as_slice()[depth]);
                prefix.push(b2);
                update_at(tx, ov, partition, prefix, &k2, &k2hash, Some(v2))?;
                prefix.pop();
                prefix.push(b1);
                update_at(tx, ov, partition, prefix, item_key, khash, Some(v))?;
                prefix.pop();
                let mut children = vec![(b2, v2)];
                if b1 != b2 {
                    children.push((b1, v));
                }
                children.sort_by_key(|(b, _)| *b);
                MerkleNode::Intermediate(children)
            }
        }
        MerkleNode::Intermediate(mut children) => {
            let b = khash.as_slice()[depth];
            prefix.push(b);
            let present = update_at(tx, ov, partition, prefix, item_key, khash, vhash)?;
            prefix.pop();
            match (children.iter().position(|(cb, _)| *cb == b), present) {
                (Some(_), true) => (),
                (Some(i), false) => {
                    children.remove(i);
                }
                (None, true) => {
                    // Placeholder hash, set by the flush.
                    children.push((b, *khash));
                    children.sort_by_key(|(b, _)| *b);
                }
                (None, false) => (),
            }
            match children.len() {
                0 => MerkleNode::Empty,
                1 => {
                    // A single child that is a leaf moves up here.
                    let (cb, ch) = children[0];
                    prefix.push(cb);
                    let ckey = node_key(partition, prefix);
                    prefix.pop();
                    match ov.read(tx, &ckey)? {
                        leaf @ MerkleNode::Leaf(..) => {
                            ov.write(ckey, MerkleNode::Empty);
                            leaf
                        }
                        _ => MerkleNode::Intermediate(vec![(cb, ch)]),
                    }
                }
                _ => MerkleNode::Intermediate(children),
            }
        }
    };
    let present = new_node != MerkleNode::Empty;
    ov.write(key, new_node);
    Ok(present)
}

/// Applies one item of the todo queue to the trie.
fn apply_item(
    tx: &mut db::Transaction<'_>,
    ov: &mut Overlay<'_>,
    item_key: &[u8],
    vhash: Option<Hash>,
) -> db::Result<()> {
    let partition = *item_key.first().unwrap_or(&0);
    let khash = blake2sum(item_key);
    update_at(tx, ov, partition, &mut Vec::new(), item_key, &khash, vhash)?;
    Ok(())
}

/// Items applied per transaction. Under a write load the queue fills
/// while a batch is applied, and the next batch takes up to this many: the
/// busy nodes near the top of a partition's trie are then rewritten once
/// for many items.
const BATCH: usize = 2048;

/// After a batch smaller than [`BATCH`], the updater waits this long
/// before the next one.
const PACE: Duration = Duration::from_millis(500);

/// Applies up to [`BATCH`] queued items; returns how many.
pub fn process_batch<F: TableSchema>(data: &TableData<F>) -> Result<usize> {
    process_batch_of(data, BATCH)
}

fn process_batch_of<F: TableSchema>(data: &TableData<F>, limit: usize) -> Result<usize> {
    Ok(data
        .db
        .transaction(|tx| apply_batch_in_tx(data, tx, limit))?)
}

/// [`process_batch`] in the database's group commit (`garage_db::group`):
/// the updater's transactions run on the same thread as the replica
/// writes, whose LMDB write lock they would wait for anyway, and their
/// dirty pages are allocated there (one allocator arena, not one per
/// blocking-pool thread that once ran a large batch).
pub async fn process_batch_grouped<F: TableSchema>(data: &Arc<TableData<F>>) -> Result<usize> {
    let d = data.clone();
    crate::data::grouped(&data.db, move |tx| apply_batch_in_tx(&d, tx, BATCH)).await
}

/// Takes up to `limit` items off the queue and applies them to the trie.
fn apply_batch_in_tx<F: TableSchema>(
    data: &TableData<F>,
    tx: &mut db::Transaction<'_>,
    limit: usize,
) -> db::TxResult<usize, Error> {
    let items = tx
        .range::<&[u8], _>(&data.merkle_todo, ..)?
        .take(limit)
        .collect::<db::Result<Vec<_>>>()?;
    let mut ov = Overlay::new(&data.merkle_tree, data.compact());
    for (k, v) in items.iter() {
        let vhash = if v.is_empty() {
            None
        } else {
            Some(
                Hash::try_from_slice(v)
                    .ok_or_else(|| db::Error::Aborted("corrupt Merkle todo item".into()))?,
            )
        };
        apply_item(tx, &mut ov, k, vhash)?;
        tx.remove(&data.merkle_todo, k)?;
    }
    ov.flush(tx)?;
    Ok(items.len())
}

/// Keeps a table's Merkle trees current (`garage worker list`: "<table>
/// Merkle updater"): applies the queued changes a batch at a time; woken
/// by new changes, and every 10 s.
pub(crate) struct MerkleUpdater<F: TableSchema> {
    pub(crate) data: Arc<TableData<F>>,
}

impl<F: TableSchema> Worker for MerkleUpdater<F> {
    fn spec(&self) -> WorkerSpec {
        let d = self.data.clone();
        WorkerSpec::new(
            format!("{} Merkle updater", F::TABLE_NAME),
            "applies entry changes to the table's Merkle trees",
        )
        .queue(move || Ok(todo_len(&d).map_err(|e| e.to_string())? as u64))
    }

    async fn work(
        &mut self,
        _: &WorkerHandle,
        must_exit: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        let n = process_batch_grouped(&self.data)
            .await
            .map_err(|e| format!("Merkle update failed: {e}"))?;
        if n == 0 {
            return Ok(Step::Idle);
        }
        // Under a steady write load, let the queue fill for a moment: a
        // bigger batch rewrites each busy node once for more items.
        // Nothing waits on the trees being current: a sync pass applies
        // the whole queue itself before it compares (`sync.rs`).
        if n < BATCH {
            let mut exit = must_exit.clone();
            tokio::select! {
                _ = tokio::time::sleep(PACE) => (),
                _ = exit.wait_for(|e| *e) => (),
            }
        }
        Ok(Step::Busy)
    }

    async fn wait_for_work(&mut self) {
        tokio::select! {
            _ = self.data.merkle_todo_notify.notified() => (),
            _ = tokio::time::sleep(Duration::from_secs(10)) => (),
        }
    }

    fn retry_delays(&self) -> (Duration, Duration) {
        (Duration::from_secs(10), Duration::from_secs(10))
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
            match MerkleNode::decode(&v).unwrap() {
                MerkleNode::Empty => panic!("empty node stored"),
                MerkleNode::Leaf(key, vhash) => {
                    leaves += 1;
                    let stored = data
                        .store
                        .get(&key)
                        .unwrap()
                        .expect("leaf of a stored entry");
                    assert_eq!(encoding::value_hash(&key, &stored).unwrap(), vhash);
                }
                MerkleNode::Intermediate(children) => {
                    assert!(!children.is_empty());
                    for (b, h) in children.iter() {
                        let mut ck = k.clone();
                        ck.push(*b);
                        let child =
                            MerkleNode::decode(&data.merkle_tree.get(&ck).unwrap().unwrap())
                                .unwrap();
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
    fn nodes_read_back_from_either_stored_form() {
        let nodes = [
            MerkleNode::Empty,
            MerkleNode::Leaf(b"some tree key".to_vec(), blake2sum(b"v")),
            MerkleNode::Leaf(vec![], blake2sum(b"w")),
            MerkleNode::Intermediate(vec![(0, blake2sum(b"a")), (255, blake2sum(b"b"))]),
        ];
        for n in nodes {
            let (bin, named) = (n.to_binary(), encoding::encode_named(&n));
            assert_eq!(MerkleNode::decode(&bin).unwrap(), n);
            assert_eq!(MerkleNode::decode(&named).unwrap(), n);
            if n != MerkleNode::Empty {
                assert!(bin.len() < named.len());
            }
        }
        // Cut or padded nodes are errors, not other nodes.
        let i = MerkleNode::Intermediate(vec![(1, blake2sum(b"a"))]).to_binary();
        assert!(MerkleNode::decode(&i[..i.len() - 1]).is_err());
        assert!(MerkleNode::decode(&[NODE_LEAF, 1, 2]).is_err());
        assert!(MerkleNode::decode(&[NODE_EMPTY, 0]).is_err());
        assert!(MerkleNode::decode(&[NODE_INTERMEDIATE]).is_err());
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

    /// One big batch (changed nodes kept in memory, hashed at the end)
    /// builds exactly the trie that one item per transaction builds, also
    /// when a batch inserts and removes items next to each other (leaves
    /// pushed down, then moved up again).
    #[test]
    fn a_big_batch_builds_the_same_trie_as_one_item_at_a_time() {
        let (_d1, db1) = temp_db();
        let (_d2, db2) = temp_db();
        let one = TableData::new(TestTable, db1).unwrap();
        let big = TableData::new(TestTable, db2).unwrap();
        let all = |d: &TableData<TestTable>| -> Vec<(Vec<u8>, Vec<u8>)> {
            d.merkle_tree.iter().map(|i| i.unwrap()).collect()
        };
        let step = |f: &dyn Fn(&TableData<TestTable>)| {
            f(&one);
            while process_batch_of(&one, 1).unwrap() > 0 {}
            f(&big);
            while process_batch_of(&big, BATCH).unwrap() > 0 {}
            assert_eq!(all(&one), all(&big));
            check_trie(&big);
        };
        // 3000 items, most in one partition (as a bucket's objects are).
        step(&|d| {
            for i in 0..3000 {
                let p = if i % 10 == 0 {
                    format!("p{}", i % 7)
                } else {
                    "big".into()
                };
                d.update_entry_with(&TestEntry::new(&p, &format!("s{i}"), "v"))
                    .unwrap();
            }
        });
        // In one batch: every third item removed, others changed, new ones
        // added, some of those removed again.
        step(&|d| {
            for i in 0..3000 {
                let p = if i % 10 == 0 {
                    format!("p{}", i % 7)
                } else {
                    "big".into()
                };
                let key = crate::encoding::tree_key(&p, &format!("s{i}"));
                if i % 3 == 0 {
                    let bytes = d.store.get(&key).unwrap().unwrap();
                    d.delete_if_equal_hash(&key, &blake2sum(&bytes), crate::Removal::Collected)
                        .unwrap();
                } else if i % 3 == 1 {
                    d.update_entry_with(&TestEntry::raw(&p, &format!("s{i}"), 2, Some("w")))
                        .unwrap();
                }
            }
            for i in 0..500 {
                let e = TestEntry::new("big", &format!("n{i}"), "v");
                d.update_entry_with(&e).unwrap();
                if i % 2 == 0 {
                    let key = crate::encoding::tree_key(&e.p, &e.s);
                    let bytes = d.store.get(&key).unwrap().unwrap();
                    d.delete_if_equal_hash(&key, &blake2sum(&bytes), crate::Removal::Collected)
                        .unwrap();
                }
            }
        });
        // Everything removed: no node left.
        step(&|d| {
            let keys: Vec<(Vec<u8>, Vec<u8>)> = d.store.iter().map(|i| i.unwrap()).collect();
            for (k, v) in keys {
                d.delete_if_equal_hash(&k, &blake2sum(&v), crate::Removal::Collected)
                    .unwrap();
            }
        });
        assert!(all(&big).is_empty());
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
