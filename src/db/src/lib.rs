//! `garage_db`: the embedded metadata database under every garage table.
//!
//! One small API ([`Db`], [`Tree`], [`Transaction`]) over two engines: LMDB
//! (through `heed`) and SQLite (through `rusqlite`). A database holds named
//! trees; each tree is an ordered map from byte keys to byte values, ordered
//! bytewise. Transactions may span several trees and commit atomically.
//!
//! This crate is the bottom of the workspace: it must never depend on any
//! other garage crate.
//!
//! Engines implement the object-safe [`IDb`] and [`ITx`] traits; everything
//! else (handles, range bounds, batched iteration, key checks) is written once
//! here so that both engines behave the same way. The conformance suite in
//! `tests/` runs unchanged against both.

mod engine;
mod error;
pub mod group;
mod iter;
pub mod lmdb_adapter;
pub mod sqlite_adapter;

use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use engine::{open, Engine, OpenOptions};
pub use error::{Error, Result, TxError, TxResult};
pub use iter::RangeIter;

/// A stored value.
pub type Value = Vec<u8>;
/// A key and its value, as returned by iteration.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Largest key accepted, in bytes. LMDB is built with heed's `longer-keys`
/// (its compiled-in limit of 511 bytes lifted to what a 4 KiB page holds,
/// 1982 bytes); the limit is enforced here for both engines so that a
/// database can always be converted from one engine to the other. It fits
/// a 32-byte partition hash and an S3 object key (at most 1024 bytes)
/// verbatim, so that keys stay in order.
pub const MAX_KEY_LEN: usize = 1982;

/// How many entries an iterator fetches from the engine at a time, at most.
/// Each batch is read from one consistent snapshot; writes made between two
/// batches may or may not be seen by the rest of the iteration.
pub const ITER_BATCH: usize = 256;

/// The size of an iterator's first batch, doubled at each batch up to
/// [`ITER_BATCH`]: most range reads take a few entries (a version's head
/// and segments, one page of a listing's first keys), and each entry of a
/// batch is copied out of the engine whether it is used or not (a first
/// batch of 256 version segments copied about 700 KB to read 2 of them).
pub const ITER_FIRST_BATCH: usize = 8;

/// Direction of a range read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Reverse,
}

/// What an engine must provide. Trees are referred to by the index that
/// [`IDb::open_tree`] returned.
pub trait IDb: Send + Sync {
    fn engine(&self) -> Engine;
    fn open_tree(&self, name: &str) -> Result<usize>;
    fn list_trees(&self) -> Result<Vec<String>>;
    /// Writes a consistent copy of the whole database into `dir`, which must
    /// exist and be empty.
    fn snapshot(&self, dir: &Path) -> Result<()>;
    /// Makes every transaction committed so far durable (synced to disk),
    /// whatever the engine's `fsync` option.
    fn sync(&self) -> Result<()>;

    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>>;
    fn len(&self, tree: usize) -> Result<usize>;
    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>>;

    fn insert(&self, tree: usize, key: &[u8], value: &[u8]) -> Result<()>;
    fn remove(&self, tree: usize, key: &[u8]) -> Result<()>;
    fn clear(&self, tree: usize) -> Result<()>;

    /// Runs `f` inside one write transaction. `f` returns `Ok(true)` to
    /// commit, `Ok(false)` to abort; an error aborts too.
    fn transaction(&self, f: &mut dyn FnMut(&mut dyn ITx) -> Result<bool>) -> Result<()>;
}

/// Operations available inside a write transaction.
pub trait ITx {
    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>>;
    fn len(&self, tree: usize) -> Result<usize>;
    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>>;

    fn insert(&mut self, tree: usize, key: &[u8], value: &[u8]) -> Result<()>;
    fn remove(&mut self, tree: usize, key: &[u8]) -> Result<()>;
    fn clear(&mut self, tree: usize) -> Result<()>;
}

static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Databases with a transaction running on this thread. Using such a
    /// database other than through the transaction's handle would wait for
    /// the transaction itself: that is refused with an error instead.
    static ACTIVE_TX: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn not_in_tx(db_id: u64) -> Result<()> {
    if ACTIVE_TX.with(|a| a.borrow().contains(&db_id)) {
        Err(Error::InsideTransaction)
    } else {
        Ok(())
    }
}

/// Marks a database as having a transaction on this thread while alive.
struct TxMark(u64);

impl TxMark {
    fn new(db_id: u64) -> Self {
        ACTIVE_TX.with(|a| a.borrow_mut().push(db_id));
        TxMark(db_id)
    }
}

impl Drop for TxMark {
    fn drop(&mut self) {
        ACTIVE_TX.with(|a| {
            let mut a = a.borrow_mut();
            if let Some(i) = a.iter().rposition(|id| *id == self.0) {
                a.remove(i);
            }
        });
    }
}

/// An open metadata database. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    id: u64,
    inner: Arc<dyn IDb>,
    /// The group-commit thread's queue, started on first use.
    group: Arc<Mutex<Option<group::Sender>>>,
}

/// A named tree of a [`Db`]. Cheap to clone.
#[derive(Clone)]
pub struct Tree {
    db_id: u64,
    index: usize,
    name: Arc<str>,
    db: Arc<dyn IDb>,
}

/// The handle given to a transaction's closure.
pub struct Transaction<'a> {
    db_id: u64,
    tx: &'a mut dyn ITx,
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        Err(Error::EmptyKey)
    } else if key.len() > MAX_KEY_LEN {
        Err(Error::KeyTooLong {
            len: key.len(),
            max: MAX_KEY_LEN,
        })
    } else {
        Ok(())
    }
}

fn owned_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(range: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

impl Db {
    /// Wraps an engine. Most callers use [`open`] instead.
    pub fn new(inner: Arc<dyn IDb>) -> Self {
        Self {
            id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
            inner,
            group: Arc::new(Mutex::new(None)),
        }
    }

    pub fn engine(&self) -> Engine {
        self.inner.engine()
    }

    /// Whether a point read never waits for a writer: true on LMDB (readers
    /// see a snapshot, without a lock), false on SQLite (one connection,
    /// shared with the writer). Async callers may then read one key on
    /// the runtime's thread instead of the blocking pool.
    pub fn reads_never_wait(&self) -> bool {
        self.engine() == Engine::Lmdb
    }

    /// Opens the tree `name`, creating it if it does not exist. Must not be
    /// called from inside a transaction.
    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        not_in_tx(self.id)?;
        if name.is_empty() || name.len() > 200 {
            return Err(Error::BadTreeName(name.to_string()));
        }
        let index = self.inner.open_tree(name)?;
        Ok(Tree {
            db_id: self.id,
            index,
            name: name.into(),
            db: self.inner.clone(),
        })
    }

    /// Names of all trees, sorted.
    pub fn list_trees(&self) -> Result<Vec<String>> {
        not_in_tx(self.id)?;
        let mut trees = self.inner.list_trees()?;
        trees.sort();
        Ok(trees)
    }

    /// Writes a consistent copy of the database into `dir` (created if
    /// missing; must be empty). The copy opens with [`open`] at the path
    /// given by [`Engine::snapshot_db_path`].
    pub fn snapshot(&self, dir: &Path) -> Result<()> {
        not_in_tx(self.id)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        if entries.next().is_some() {
            return Err(Error::SnapshotDirNotEmpty(dir.to_path_buf()));
        }
        self.inner.snapshot(dir)
    }

    /// Syncs every transaction committed so far to disk, even when the
    /// database was opened without `fsync`: for the few writes that must
    /// survive a power loss whatever `metadata_fsync` says (the promises
    /// of compare-and-set acceptors).
    pub fn sync(&self) -> Result<()> {
        not_in_tx(self.id)?;
        self.inner.sync()
    }

    /// Runs `f` in one write transaction spanning any trees of this
    /// database. If `f` returns `Ok`, everything it wrote is committed
    /// atomically; if it returns [`TxError::Abort`] or fails, nothing is
    /// written. Inside `f`, use only the [`Transaction`] handle: calling the
    /// [`Db`] or one of its [`Tree`]s directly fails with
    /// [`Error::InsideTransaction`] (it would wait for the transaction itself).
    pub fn transaction<R, E, F>(&self, f: F) -> TxResult<R, E>
    where
        F: FnOnce(&mut Transaction<'_>) -> TxResult<R, E>,
    {
        not_in_tx(self.id)?;
        let _mark = TxMark::new(self.id);
        let mut f = Some(f);
        let mut outcome: Option<std::result::Result<R, E>> = None;
        let db_id = self.id;
        let res = self.inner.transaction(&mut |tx: &mut dyn ITx| {
            let f = f.take().ok_or(Error::TransactionRetried)?;
            let mut t = Transaction { db_id, tx };
            match f(&mut t) {
                Ok(r) => {
                    outcome = Some(Ok(r));
                    Ok(true)
                }
                Err(TxError::Abort(e)) => {
                    outcome = Some(Err(e));
                    Ok(false)
                }
                Err(TxError::Db(e)) => Err(e),
            }
        });
        res?;
        match outcome {
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => Err(TxError::Abort(e)),
            None => Err(TxError::Db(Error::TransactionRetried)),
        }
    }
}

impl Db {
    /// Queues `f` to run in a write transaction shared with the other
    /// writes queued meanwhile (group commit: one commit, and one fsync
    /// when the database syncs, for all of them; see [`group`]). `done`
    /// receives `f`'s outcome on the group-commit thread, after the commit
    /// that holds its writes (or the error that failed it). `f` may run
    /// twice (again alone when another job of its group aborted), so it
    /// must act only through its transaction handle.
    pub fn transaction_grouped<R, E, F, D>(&self, f: F, done: D)
    where
        R: Send + 'static,
        E: Send + 'static,
        F: FnMut(&mut Transaction<'_>) -> TxResult<R, E> + Send + 'static,
        D: FnOnce(TxResult<R, E>) + Send + 'static,
    {
        let job = Box::new(group::TypedJob {
            f,
            done,
            outcome: None,
        });
        let sender = {
            let mut g = self.group.lock().unwrap_or_else(|e| e.into_inner());
            if g.is_none() {
                let bare = Db {
                    id: self.id,
                    inner: self.inner.clone(),
                    group: Arc::new(Mutex::new(None)),
                };
                match group::start(bare) {
                    Ok(s) => *g = Some(s),
                    Err(e) => tracing::warn!("cannot start the group-commit thread: {e}"),
                }
            }
            g.clone()
        };
        let job = match sender {
            Some(s) => match s.send(job) {
                Ok(()) => return,
                Err(mpsc_err) => mpsc_err.0,
            },
            None => job,
        };
        // No committer thread: the job runs here, alone.
        group::run_here(self, job);
    }
}

impl Tree {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Value>> {
        not_in_tx(self.db_id)?;
        self.db.get(self.index, key.as_ref())
    }

    pub fn len(&self) -> Result<usize> {
        not_in_tx(self.db_id)?;
        self.db.len(self.index)
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.first()?.is_none())
    }

    pub fn insert<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: K, value: V) -> Result<()> {
        check_key(key.as_ref())?;
        not_in_tx(self.db_id)?;
        self.db.insert(self.index, key.as_ref(), value.as_ref())
    }

    /// Removes `key`; removing an absent key is not an error.
    pub fn remove<K: AsRef<[u8]>>(&self, key: K) -> Result<()> {
        not_in_tx(self.db_id)?;
        self.db.remove(self.index, key.as_ref())
    }

    pub fn clear(&self) -> Result<()> {
        not_in_tx(self.db_id)?;
        self.db.clear(self.index)
    }

    pub fn first(&self) -> Result<Option<KeyValue>> {
        self.iter().next().transpose()
    }

    pub fn last(&self) -> Result<Option<KeyValue>> {
        self.iter_rev().next().transpose()
    }

    /// All entries, in increasing key order.
    pub fn iter(&self) -> RangeIter<'static> {
        self.range::<&[u8], _>(..)
    }

    /// All entries, in decreasing key order.
    pub fn iter_rev(&self) -> RangeIter<'static> {
        self.range_rev::<&[u8], _>(..)
    }

    /// Entries with keys in `range`, in increasing order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> RangeIter<'static> {
        self.range_dir(range, Direction::Forward)
    }

    /// Entries with keys in `range`, in decreasing order.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> RangeIter<'static> {
        self.range_dir(range, Direction::Reverse)
    }

    fn range_dir<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        dir: Direction,
    ) -> RangeIter<'static> {
        let (low, high) = owned_bounds(&range);
        let db = self.db.clone();
        let (index, db_id) = (self.index, self.db_id);
        RangeIter::new(
            low,
            high,
            dir,
            Box::new(move |l, h, d, n| {
                not_in_tx(db_id)?;
                db.range_batch(index, l, h, d, n)
            }),
        )
    }
}

impl Transaction<'_> {
    fn tree_index(&self, tree: &Tree) -> Result<usize> {
        if tree.db_id != self.db_id {
            return Err(Error::ForeignTree(tree.name.to_string()));
        }
        Ok(tree.index)
    }

    pub fn get<K: AsRef<[u8]>>(&self, tree: &Tree, key: K) -> Result<Option<Value>> {
        self.tx.get(self.tree_index(tree)?, key.as_ref())
    }

    pub fn len(&self, tree: &Tree) -> Result<usize> {
        self.tx.len(self.tree_index(tree)?)
    }

    pub fn insert<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        tree: &Tree,
        key: K,
        value: V,
    ) -> Result<()> {
        check_key(key.as_ref())?;
        let i = self.tree_index(tree)?;
        self.tx.insert(i, key.as_ref(), value.as_ref())
    }

    pub fn remove<K: AsRef<[u8]>>(&mut self, tree: &Tree, key: K) -> Result<()> {
        let i = self.tree_index(tree)?;
        self.tx.remove(i, key.as_ref())
    }

    pub fn clear(&mut self, tree: &Tree) -> Result<()> {
        let i = self.tree_index(tree)?;
        self.tx.clear(i)
    }

    /// Entries of `tree` with keys in `range`, as this transaction sees them
    /// (its own writes included).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        tree: &Tree,
        range: R,
    ) -> Result<RangeIter<'_>> {
        self.range_dir(tree, range, Direction::Forward)
    }

    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        tree: &Tree,
        range: R,
    ) -> Result<RangeIter<'_>> {
        self.range_dir(tree, range, Direction::Reverse)
    }

    fn range_dir<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        tree: &Tree,
        range: R,
        dir: Direction,
    ) -> Result<RangeIter<'_>> {
        let index = self.tree_index(tree)?;
        let (low, high) = owned_bounds(&range);
        let tx: &dyn ITx = &*self.tx;
        Ok(RangeIter::new(
            low,
            high,
            dir,
            Box::new(move |l, h, d, n| tx.range_batch(index, l, h, d, n)),
        ))
    }
}

/// Copies every tree of `from` into `to`, in transactions of at most
/// `batch` entries. Returns the number of trees and entries copied.
pub fn copy_all(from: &Db, to: &Db, batch: usize) -> Result<(usize, u64)> {
    let batch = batch.max(1);
    let trees = from.list_trees()?;
    let mut entries = 0u64;
    for name in trees.iter() {
        let src = from.open_tree(name)?;
        let dst = to.open_tree(name)?;
        let mut iter = src.iter();
        loop {
            let mut chunk = Vec::with_capacity(batch);
            for kv in iter.by_ref().take(batch) {
                chunk.push(kv?);
            }
            if chunk.is_empty() {
                break;
            }
            entries += chunk.len() as u64;
            to.transaction::<_, (), _>(|tx| {
                for (k, v) in chunk.iter() {
                    tx.insert(&dst, k, v)?;
                }
                Ok(())
            })
            .map_err(TxError::into_db_error)?;
        }
    }
    Ok((trees.len(), entries))
}
