//! A table's local store on this node: the entries, and the queues that
//! every change feeds in the same transaction (Merkle updates, tombstones
//! for the GC), so that a crash never loses one of them.

use std::sync::Arc;

use garage_db as db;
use garage_util::crdt::Crdt;
use garage_util::data::{blake2sum, Hash};
use tokio::sync::Notify;

use crate::encoding::{self, tree_key, tree_key_raw};
use crate::error::{Error, Result};
use crate::queue::queue_tree_name;
use crate::schema::{Entry, PartitionKey, Removal, SortKey, TableSchema};

pub struct TableData<F: TableSchema> {
    pub schema: F,
    pub db: db::Db,
    /// tree key -> encoded entry.
    pub store: db::Tree,
    /// tree key -> hash of the value to put in the Merkle tree, or empty
    /// when the entry was removed.
    pub merkle_todo: db::Tree,
    /// Merkle tree nodes (see `merkle.rs`).
    pub merkle_tree: db::Tree,
    /// tree key -> hash of a tombstone to collect, then the time (ms,
    /// big-endian u64) it became one (see `gc.rs`).
    pub gc_todo: db::Tree,
    /// Entries queued by other tables' hooks for insertion here.
    pub insert_queue: db::Tree,
    /// Woken when `merkle_todo` gets work.
    pub merkle_todo_notify: Notify,
    pub insert_queue_notify: Notify,
    /// The compare-and-set registers, for a table whose entries have one
    /// ([`TableSchema::register_of`]; set by [`crate::Table::use_registers`]).
    pub registers: std::sync::OnceLock<Arc<crate::cas::CasRegisters>>,
    /// Whether entries may be stored in format 3 (see `encoding`): set by
    /// [`crate::Table::new`] to the cluster's feature gate. A store opened
    /// without a cluster writes format 2 (a tool must not write what a
    /// release it may be rolled back to cannot read), except in the tests
    /// (`testing` feature), which thus cover format 3.
    pub(crate) store_compact: std::sync::OnceLock<Box<dyn Fn() -> bool + Send + Sync>>,
}

/// What a range read returns: encoded entries in tree-key order.
pub type RawEntries = Vec<Vec<u8>>;

/// Name of the tree holding the entries of table `table` (a hook may read
/// another table's entries there, in its own transaction).
pub fn store_tree_name(table: &str) -> String {
    format!("{table}:table")
}

impl<F: TableSchema> TableData<F> {
    pub fn new(schema: F, db: db::Db) -> Result<Arc<Self>> {
        let name = F::TABLE_NAME;
        let data = Self {
            store: db.open_tree(&store_tree_name(name))?,
            merkle_todo: db.open_tree(&format!("{name}:merkle_todo"))?,
            merkle_tree: db.open_tree(&format!("{name}:merkle_tree"))?,
            gc_todo: db.open_tree(&format!("{name}:gc_todo"))?,
            insert_queue: db.open_tree(&queue_tree_name(name))?,
            schema,
            db,
            merkle_todo_notify: Notify::new(),
            insert_queue_notify: Notify::new(),
            registers: std::sync::OnceLock::new(),
            store_compact: std::sync::OnceLock::new(),
        };
        data.upgrade_tree_keys()?;
        Ok(Arc::new(data))
    }

    /// Once per table and database: re-keys the entries stored under the
    /// previous layout's tree key for sort keys over 446 bytes (cut, then
    /// hashed) to today's (verbatim), so that they are found and ordered
    /// right. A marker in the `table_format` tree records that it ran.
    fn upgrade_tree_keys(&self) -> Result<usize> {
        let formats = self.db.open_tree("table_format")?;
        let name = F::TABLE_NAME.as_bytes();
        if formats.get(name)?.is_some() {
            return Ok(0);
        }
        let mut moved = 0;
        let old_keys: Vec<Vec<u8>> = self
            .store
            .iter()
            .map(|r| r.map(|(k, _)| k))
            .filter(|r| !matches!(r, Ok(k) if k.len() != encoding::OLD_LONG_TREE_KEY_LEN))
            .collect::<std::result::Result<_, _>>()?;
        for old_key in old_keys {
            let n = self.db.transaction(|tx| -> db::TxResult<usize, Error> {
                let Some(bytes) = tx.get(&self.store, &old_key)? else {
                    return Ok(0);
                };
                // Written before format 3 existed: format 1 or 2.
                let entry: F::E =
                    encoding::decode(&bytes).map_err(|e| db::TxError::Abort(e.into()))?;
                let key = tree_key(entry.partition_key(), entry.sort_key());
                if key == old_key {
                    return Ok(0);
                }
                tx.remove(&self.store, &old_key)?;
                tx.insert(&self.merkle_todo, &old_key, [])?;
                tx.remove(&self.gc_todo, &old_key)?;
                tx.insert(&self.store, &key, &bytes)?;
                let vhash = blake2sum(&bytes);
                tx.insert(&self.merkle_todo, &key, vhash.as_slice())?;
                if entry.is_tombstone() {
                    tx.insert(&self.gc_todo, &key, gc_todo_value::<F>(&vhash, &entry))?;
                }
                Ok(1)
            })?;
            moved += n;
        }
        formats.insert(name, [2u8])?;
        if moved > 0 {
            tracing::info!(
                table = F::TABLE_NAME,
                "{moved} entries with long sort keys re-keyed to the current layout"
            );
            self.merkle_todo_notify.notify_one();
        }
        Ok(moved)
    }

    /// The canonical bytes (see `encoding`) of the entry with these keys.
    pub fn read_entry(&self, p: &F::P, s: &F::S) -> Result<Option<Vec<u8>>> {
        let key = tree_key(p, s);
        match self.store.get(&key)? {
            Some(b) => Ok(Some(to_canonical(&key, b)?)),
            None => Ok(None),
        }
    }

    /// Decodes canonical bytes (as [`Self::read_entry`] and
    /// [`Self::read_range`] return them, or another node sends them).
    pub fn decode_entry(&self, bytes: &[u8]) -> Result<F::E> {
        Ok(encoding::decode(bytes)?)
    }

    /// Decodes a value read from the store at tree key `key`.
    pub fn decode_stored(&self, key: &[u8], bytes: &[u8]) -> Result<F::E> {
        Ok(encoding::decode_stored(key, bytes)?)
    }

    /// Whether entries are stored in format 3 now (and Merkle nodes in
    /// their binary form).
    pub(crate) fn compact(&self) -> bool {
        match self.store_compact.get() {
            Some(allowed) => allowed(),
            None => cfg!(any(test, feature = "testing")),
        }
    }

    /// The bytes to store for `canonical` at `key`.
    fn stored_form(&self, key: &[u8], canonical: Vec<u8>) -> Vec<u8> {
        match self.compact() {
            true => encoding::to_stored(key, canonical),
            false => canonical,
        }
    }

    /// Up to `limit` entries of partition key `p`, from `start` (included)
    /// in sort-key order, or down from it when `reverse`. Tombstones are
    /// included: the caller merges answers from several replicas, and a
    /// tombstone must win over an older value another replica returns.
    pub fn read_range(
        &self,
        p: &F::P,
        start: Option<&F::S>,
        limit: usize,
        reverse: bool,
    ) -> Result<RawEntries> {
        let hash = p.hash();
        let prefix = hash.as_slice().to_vec();
        let start_key = start.map(|s| tree_key_raw(&prefix, s.sort_key()));
        let mut out = Vec::new();
        let iter = match (reverse, &start_key) {
            (false, Some(k)) => self.store.range(k.clone()..),
            (false, None) => self.store.range(prefix.clone()..),
            (true, Some(k)) => self.store.range_rev(..=k.clone()),
            (true, None) => match prefix_end(&prefix) {
                Some(end) => self.store.range_rev(..end),
                None => self.store.iter_rev(),
            },
        };
        for item in iter {
            let (k, v) = item?;
            if !k.starts_with(&prefix) || out.len() >= limit {
                break;
            }
            out.push(to_canonical(&k, v)?);
        }
        Ok(out)
    }

    /// The partition key of the first entry stored at or after tree key
    /// `from` (from the first entry when `None`).
    pub(crate) fn first_partition_from(&self, from: Option<&[u8]>) -> Result<Option<F::P>> {
        let mut iter = match from {
            Some(k) => self.store.range(k.to_vec()..),
            None => self.store.iter(),
        };
        match iter.next() {
            Some(item) => {
                let (k, v) = item?;
                Ok(Some(self.decode_stored(&k, &v)?.partition_key().clone()))
            }
            None => Ok(None),
        }
    }

    pub fn update_entry_with(&self, entry: &F::E) -> Result<Option<F::E>> {
        let changed = self.db.transaction(|tx| self.merge_in_tx(tx, entry))?;
        if changed.is_some() {
            self.merkle_todo_notify.notify_one();
        }
        Ok(changed)
    }

    /// Merges many encoded entries in one transaction (one commit, one
    /// fsync when `metadata_fsync` is set). Returns how many changed.
    pub fn update_many(&self, encoded: &[impl AsRef<[u8]>]) -> Result<usize> {
        let entries = decode_all::<F>(encoded)?;
        let changed = self
            .db
            .transaction(|tx| self.merge_many_in_tx(tx, &entries))?;
        self.after_merge(changed);
        Ok(changed)
    }

    /// [`Self::update_many`] through the database's group commit: the
    /// transaction is shared with the other writes queued meanwhile
    /// (`garage_db::group`), and answered after its commit. For the
    /// replica writes of the table RPC, many at a time.
    pub async fn update_many_grouped(
        self: &Arc<Self>,
        encoded: &[impl AsRef<[u8]>],
    ) -> Result<usize> {
        let entries = decode_all::<F>(encoded)?;
        let this = self.clone();
        let changed = grouped(&self.db, move |tx| this.merge_many_in_tx(tx, &entries)).await?;
        self.after_merge(changed);
        Ok(changed)
    }

    /// Merges many encoded entries in one transaction, except each that
    /// sorts before a newer write the stored entry holds
    /// ([`TableSchema::newer_than`]): for each entry, `None` if merged,
    /// else that write's stamp. Observes the stamps of the entries merged.
    pub fn update_many_ordered(&self, encoded: &[impl AsRef<[u8]>]) -> Result<Vec<Option<u64>>> {
        let entries = decode_all::<F>(encoded)?;
        let (changed, refused) = self
            .db
            .transaction(|tx| self.merge_many_ordered_in_tx(tx, &entries))?;
        self.after_ordered_merge(&entries, &refused, changed);
        Ok(refused)
    }

    /// [`Self::update_many_ordered`] through the database's group commit
    /// (see [`Self::update_many_grouped`]).
    pub async fn update_many_ordered_grouped(
        self: &Arc<Self>,
        encoded: &[impl AsRef<[u8]>],
    ) -> Result<Vec<Option<u64>>> {
        let entries = Arc::new(decode_all::<F>(encoded)?);
        let (this, e) = (self.clone(), entries.clone());
        let (changed, refused) =
            grouped(&self.db, move |tx| this.merge_many_ordered_in_tx(tx, &e)).await?;
        self.after_ordered_merge(&entries, &refused, changed);
        Ok(refused)
    }

    fn merge_many_in_tx(
        &self,
        tx: &mut db::Transaction<'_>,
        entries: &[F::E],
    ) -> db::TxResult<usize, Error> {
        let mut n = 0;
        for e in entries.iter() {
            if self.merge_in_tx(tx, e)?.is_some() {
                n += 1;
            }
        }
        Ok(n)
    }

    fn merge_many_ordered_in_tx(
        &self,
        tx: &mut db::Transaction<'_>,
        entries: &[F::E],
    ) -> db::TxResult<(usize, Vec<Option<u64>>), Error> {
        let mut n = 0;
        let mut refused = Vec::with_capacity(entries.len());
        for e in entries.iter() {
            let key = tree_key(e.partition_key(), e.sort_key());
            if let Some(old) = self.get_in_tx(tx, &key)? {
                if let Some(newer) = F::newer_than(&old, e) {
                    refused.push(Some(newer));
                    continue;
                }
            }
            refused.push(None);
            if self.merge_in_tx(tx, e)?.is_some() {
                n += 1;
            }
        }
        Ok((n, refused))
    }

    fn after_merge(&self, changed: usize) {
        if changed > 0 {
            self.merkle_todo_notify.notify_one();
        }
    }

    fn after_ordered_merge(&self, entries: &[F::E], refused: &[Option<u64>], changed: usize) {
        for (e, r) in entries.iter().zip(refused.iter()) {
            if let (None, Some(ts)) = (r, F::stamp_of(e)) {
                garage_util::time::observe(ts);
            }
        }
        self.after_merge(changed);
    }

    fn merge_in_tx(
        &self,
        tx: &mut db::Transaction<'_>,
        entry: &F::E,
    ) -> db::TxResult<Option<F::E>, Error> {
        let key = tree_key(entry.partition_key(), entry.sort_key());
        let stored = match tx.get(&self.store, &key)? {
            Some(b) => Some(
                encoding::canonical(&key, &b)
                    .map_err(|e| db::TxError::Abort(e.into()))?
                    .into_owned(),
            ),
            None => None,
        };
        let old: Option<F::E> = match &stored {
            Some(b) => Some(encoding::decode(b).map_err(|e| db::TxError::Abort(e.into()))?),
            None => None,
        };
        // An entry whose canonical bytes are not this build's (an older
        // format, or without a field added since) is rewritten even when
        // the merge changes nothing, so that every replica ends up with
        // the same canonical bytes (and Merkle hashes) for it. (How it is
        // stored does not matter: format 2 and 3 of the same bytes agree.)
        // (Only looked at when the merge changes nothing: otherwise the
        // entry is written anyway, and encoding it twice is wasted.)
        let outdated = |o: &F::E| {
            stored
                .as_deref()
                .is_some_and(|b| !encoding::is_current(b) || encoding::encode(o) != b)
        };
        let mut new = match &old {
            Some(o) => o.clone(),
            None => entry.clone(),
        };
        new.merge(entry);
        let head_key = self.schema.partition_head();
        let is_head = head_key.as_ref() == Some(entry.sort_key());
        // The live value this write would have stored, when the partition's
        // tombstone deletes it on arrival: the hook sees it as the old
        // value, so that what it held is released (a late block write's
        // block reference, inserted directly by its writer, gets its
        // deleted counterpart).
        let mut deleted_on_arrival = None;
        if let (Some(hk), false) = (&head_key, is_head) {
            if !new.is_tombstone() {
                if let Some(head) = self.head_tombstone(tx, entry.partition_key(), hk)? {
                    let live = new.clone();
                    new.merge(&self.schema.partition_tombstone(&new, &head));
                    deleted_on_arrival = Some(live);
                }
            }
        }
        if old.as_ref() == Some(&new) && !outdated(&new) {
            return Ok(None);
        }
        let hook_old = deleted_on_arrival.as_ref().or(old.as_ref());
        self.write_in_tx(tx, &key, hook_old, &new)?;
        if is_head && new.is_tombstone() {
            self.delete_partition_in_tx(tx, &new)?;
        }
        Ok(Some(new))
    }

    /// The entry at tree key `key` as this transaction sees it.
    pub(crate) fn get_in_tx(
        &self,
        tx: &db::Transaction<'_>,
        key: &[u8],
    ) -> db::TxResult<Option<F::E>, Error> {
        match tx.get(&self.store, key)? {
            Some(b) => Ok(Some(
                encoding::decode_stored(key, &b).map_err(|e| db::TxError::Abort(e.into()))?,
            )),
            None => Ok(None),
        }
    }

    /// Stores `new` at `key` in place of `old`, with what every local
    /// change does in the same transaction: its Merkle update, its GC
    /// todo when it is a tombstone, and the schema's hook.
    pub(crate) fn write_in_tx(
        &self,
        tx: &mut db::Transaction<'_>,
        key: &[u8],
        old: Option<&F::E>,
        new: &F::E,
    ) -> db::TxResult<(), Error> {
        let bytes = encoding::encode(new);
        let vhash = blake2sum(&bytes);
        tx.insert(&self.store, key, self.stored_form(key, bytes))?;
        tx.insert(&self.merkle_todo, key, vhash.as_slice())?;
        if new.is_tombstone() {
            tx.insert(&self.gc_todo, key, gc_todo_value::<F>(&vhash, new))?;
        }
        self.schema.updated(tx, old, new)?;
        Ok(())
    }

    /// Removes the entry at `key` if its encoded value still hashes to
    /// `vhash` (a newer write in between is kept), for the reason `why`
    /// (the GC's delete, or an offload after a layout change), which the
    /// schema's [`TableSchema::removed`] hook receives.
    /// Returns whether it was removed.
    pub fn delete_if_equal_hash(&self, key: &[u8], vhash: &Hash, why: Removal) -> Result<bool> {
        let removed = self.db.transaction(|tx| -> db::TxResult<bool, Error> {
            let Some(stored) = tx.get(&self.store, key)? else {
                return Ok(false);
            };
            let bytes =
                encoding::canonical(key, &stored).map_err(|e| db::TxError::Abort(e.into()))?;
            if blake2sum(&bytes) != *vhash {
                return Ok(false);
            }
            let old: F::E = encoding::decode(&bytes).map_err(|e| db::TxError::Abort(e.into()))?;
            tx.remove(&self.store, key)?;
            tx.insert(&self.merkle_todo, key, [])?;
            self.schema.removed(tx, &old, why)?;
            Ok(true)
        })?;
        if removed {
            self.merkle_todo_notify.notify_one();
        }
        Ok(removed)
    }

    /// The register of stored entry `bytes` if this node's acceptor holds
    /// a value for it: a tombstone of that entry is kept until the
    /// register is emptied (see `gc.rs`).
    /// (`bytes` are canonical.)
    pub fn held_register(&self, bytes: &[u8]) -> Result<Option<crate::cas::RegisterId>> {
        let Some(regs) = self.registers.get() else {
            return Ok(None);
        };
        let entry = self.decode_entry(bytes)?;
        match F::register_of(&entry) {
            Some(id) if regs.holds_value(id)? => Ok(Some(id)),
            _ => Ok(None),
        }
    }

    /// Entries of partition number `partition` (first byte of the hash of
    /// their partition key), from tree key `from` (included), at most
    /// `limit`, with their canonical bytes: for anti-entropy, which sends
    /// whole partitions.
    pub fn partition_items(
        &self,
        partition: u8,
        from: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let start = from.map(|f| f.to_vec()).unwrap_or_else(|| vec![partition]);
        let mut out = Vec::new();
        for item in self.store.range(start..) {
            let (k, v) = item?;
            if k.first() != Some(&partition) || out.len() >= limit {
                break;
            }
            let v = to_canonical(&k, v)?;
            out.push((k, v));
        }
        Ok(out)
    }
}

/// The canonical bytes of `stored`, read at `key`.
pub fn to_canonical(key: &[u8], stored: Vec<u8>) -> Result<Vec<u8>> {
    match encoding::canonical(key, &stored)? {
        std::borrow::Cow::Borrowed(_) => Ok(stored),
        std::borrow::Cow::Owned(c) => Ok(c),
    }
}

fn decode_all<F: TableSchema>(encoded: &[impl AsRef<[u8]>]) -> Result<Vec<F::E>> {
    Ok(encoded
        .iter()
        .map(|b| encoding::decode::<F::E>(b.as_ref()))
        .collect::<std::result::Result<Vec<_>, _>>()?)
}

/// Runs `f` in the database's group commit (`garage_db::group`) and waits
/// for its commit without blocking the async runtime.
pub(crate) async fn grouped<R: Send + 'static>(
    db: &db::Db,
    f: impl FnMut(&mut db::Transaction<'_>) -> db::TxResult<R, Error> + Send + 'static,
) -> Result<R> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    db.transaction_grouped(f, move |r| {
        let _ = tx.send(r);
    });
    match rx.await {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::Db(db::Error::Aborted(
            "the group-commit thread dropped a transaction".into(),
        ))),
    }
}

/// The smallest key greater than every key starting with `prefix` (none
/// when it is all 0xff bytes).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The GC todo of tombstone `entry` (encoded value hashing to `vhash`):
/// the hash, then the time its GC delay counts from. That is now, or the
/// entry's write stamp when that is later: a tombstone stamped ahead of
/// this node's clock (by a node whose clock jumped ahead before the
/// cluster noticed) is the only record that writes of its key must sort
/// after that stamp, and is kept until the clocks have passed it; removed
/// earlier, a write stamped by the clocks would be accepted below versions
/// the key had (found by the history checker, seed 21121).
fn gc_todo_value<F: TableSchema>(vhash: &Hash, entry: &F::E) -> Vec<u8> {
    let since = garage_util::time::now_msec().max(F::stamp_of(entry).unwrap_or(0));
    let mut gc = vhash.as_slice().to_vec();
    gc.extend_from_slice(&since.to_be_bytes());
    gc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{temp_db, TestEntry, TestTable};

    /// A tombstone's GC delay counts from now, or from its write stamp
    /// when that is ahead of this node's clock.
    #[test]
    fn a_tombstone_stamped_ahead_waits_for_its_stamp() {
        let (_dir, db) = temp_db();
        let data = TableData::new(TestTable, db).unwrap();
        let now = garage_util::time::now_msec();
        let since = |s: &str| {
            let key = tree_key(&"p".to_string(), &s.to_string());
            let v = data.gc_todo.get(&key).unwrap().expect("a GC todo");
            u64::from_be_bytes(v[32..40].try_into().unwrap())
        };
        let ahead = now + 600_000;
        let e = TestEntry::raw("p", "ahead", ahead, None);
        data.update_many(&[encoding::encode(&e)]).unwrap();
        assert_eq!(since("ahead"), ahead);
        let e = TestEntry::raw("p", "past", 5, None);
        data.update_many(&[encoding::encode(&e)]).unwrap();
        assert!((now..now + 60_000).contains(&since("past")));
    }

    /// An entry with a 600-byte sort key, stored under the tree key of the
    /// previous layout (cut after 446 bytes, then hashed), is moved to its
    /// verbatim key when the table opens, once.
    #[test]
    fn long_sort_keys_of_the_previous_layout_are_rekeyed() {
        let (_dir, db) = temp_db();
        let store = db.open_tree("test:table").unwrap();
        let long = "k".repeat(600);
        let e = TestEntry::new("p", &long, "v");
        let mut old_key = blake2sum(b"p").as_slice().to_vec();
        old_key.extend_from_slice(&long.as_bytes()[..446]);
        old_key.extend_from_slice(blake2sum(long.as_bytes()).as_slice());
        assert_eq!(old_key.len(), encoding::OLD_LONG_TREE_KEY_LEN);
        store.insert(&old_key, encoding::encode(&e)).unwrap();

        let data = TableData::new(TestTable, db.clone()).unwrap();
        assert_eq!(store.get(&old_key).unwrap(), None);
        let got = data.read_entry(&"p".into(), &long).unwrap().unwrap();
        assert_eq!(data.decode_entry(&got).unwrap(), e);
        assert!(data.merkle_todo.get(&old_key).unwrap().is_some());
        // The marker is set: a second open does not scan again.
        assert_eq!(data.upgrade_tree_keys().unwrap(), 0);
    }

    /// Entries stored in format 3 (the cluster allows it) and the same
    /// entries stored in format 2 (a replica where it does not yet) read
    /// back as the same canonical bytes and give the same Merkle trees,
    /// so neither replica sees a difference to repair; the GC's and an
    /// offload's delete, which name a value by its canonical hash, find it.
    #[test]
    fn compressed_and_plain_replicas_agree() {
        let (_d1, db1) = temp_db();
        let (_d2, db2) = temp_db();
        let compact = TableData::new(TestTable, db1).unwrap();
        let plain = TableData::new(TestTable, db2).unwrap();
        let _ = plain.store_compact.set(Box::new(|| false));
        let value = |i: usize| format!("photos/2026/{i:05}.jpg image/jpeg {}", "x".repeat(i % 50));
        let entries: Vec<Vec<u8>> = (0..200)
            .map(|i| {
                encoding::encode(&TestEntry::new(
                    &format!("p{}", i % 3),
                    &format!("photos/2026/{i:05}.jpg"),
                    &value(i),
                ))
            })
            .collect();
        assert_eq!(compact.update_many(&entries).unwrap(), 200);
        assert_eq!(plain.update_many(&entries).unwrap(), 200);
        let (mut smaller, mut total) = (0, 0);
        for (kc, vc) in compact.store.iter().map(|r| r.unwrap()) {
            let vp = plain.store.get(&kc).unwrap().unwrap();
            assert!(encoding::is_current(&vp));
            if vc[0] == 3 {
                smaller += 1;
                assert!(vc.len() < vp.len());
            }
            total += 1;
            assert_eq!(to_canonical(&kc, vc).unwrap(), vp);
        }
        assert_eq!(total, 200);
        assert!(smaller > 150, "{smaller} of 200 stored in format 3");
        for p in ["p0", "p1", "p2"] {
            let p = p.to_string();
            assert_eq!(
                compact.read_range(&p, None, 1000, false).unwrap(),
                plain.read_range(&p, None, 1000, false).unwrap()
            );
            let s = "photos/2026/00003.jpg".to_string();
            assert_eq!(
                compact.read_entry(&p, &s).unwrap(),
                plain.read_entry(&p, &s).unwrap()
            );
        }
        for part in 0..=255u8 {
            assert_eq!(
                compact.partition_items(part, None, 1000).unwrap(),
                plain.partition_items(part, None, 1000).unwrap()
            );
        }
        while crate::merkle::process_batch(&compact).unwrap() > 0 {}
        while crate::merkle::process_batch(&plain).unwrap() > 0 {}
        for part in 0..=255u8 {
            assert_eq!(
                crate::merkle::read_node(&compact.merkle_tree, part, &[]).unwrap(),
                crate::merkle::read_node(&plain.merkle_tree, part, &[]).unwrap()
            );
        }
        // The trees are stored in fewer bytes where format 3 is allowed.
        let size = |d: &TableData<TestTable>| -> usize {
            d.merkle_tree.iter().map(|kv| kv.unwrap().1.len()).sum()
        };
        assert!(
            size(&compact) * 10 < size(&plain) * 9,
            "{} vs {}",
            size(&compact),
            size(&plain)
        );
        // A write that changes nothing leaves both as they are.
        assert_eq!(compact.update_many(&entries).unwrap(), 0);
        assert_eq!(plain.update_many(&entries).unwrap(), 0);
        // Deletes by canonical hash.
        let (k, canon) = compact
            .partition_items(compact.store.first().unwrap().unwrap().0[0], None, 1)
            .unwrap()
            .remove(0);
        assert!(!compact
            .delete_if_equal_hash(&k, &blake2sum(b"other"), Removal::Collected)
            .unwrap());
        assert!(compact
            .delete_if_equal_hash(&k, &blake2sum(&canon), Removal::Collected)
            .unwrap());
        assert_eq!(compact.store.get(&k).unwrap(), None);
    }

    /// An entry stored in format 1 (before format 2) is read, and a write
    /// that changes nothing rewrites it in format 2, with its Merkle todo,
    /// so that replicas holding the same entry hold the same bytes. An
    /// entry already in format 2 is left alone by the same write.
    #[test]
    fn an_entry_in_the_older_format_is_rewritten_by_any_write() {
        let (_dir, db) = temp_db();
        let data = TableData::new(TestTable, db.clone()).unwrap();
        let e = TestEntry::new("p", "s", "v");
        let key = tree_key(&"p".to_string(), &"s".to_string());
        let named = encoding::encode_named(&e);
        data.store.insert(&key, &named).unwrap();
        assert_eq!(data.decode_entry(&named).unwrap(), e);

        assert_eq!(data.update_many(&[encoding::encode(&e)]).unwrap(), 1);
        let stored = data.store.get(&key).unwrap().unwrap();
        assert!(encoding::is_current(&stored));
        assert_eq!(data.decode_entry(&stored).unwrap(), e);
        let todo = data.merkle_todo.get(&key).unwrap().unwrap();
        assert_eq!(todo, blake2sum(&stored).as_slice());

        data.merkle_todo.remove(&key).unwrap();
        assert_eq!(data.update_many(&[encoding::encode_named(&e)]).unwrap(), 0);
        assert_eq!(data.merkle_todo.get(&key).unwrap(), None);

        // Format 2 but not this build's bytes for the value (as an entry
        // written before a field was added, or by another encoder): here
        // the timestamp as a 64-bit integer instead of a one-byte one.
        let canonical = encoding::encode(&e);
        let mut wide = canonical.clone();
        let at = wide
            .windows(2)
            .position(|w| w == [0x92, 0x01])
            .expect("the Lww as [1, value]")
            + 1;
        wide.splice(at..at + 1, [0xcf, 0, 0, 0, 0, 0, 0, 0, 1]);
        data.store.insert(&key, &wide).unwrap();
        assert_eq!(data.decode_entry(&wide).unwrap(), e);
        assert_eq!(
            data.update_many(std::slice::from_ref(&canonical)).unwrap(),
            1
        );
        assert_eq!(data.store.get(&key).unwrap().unwrap(), canonical);
    }
}
