//! LMDB engine, through `heed`. One LMDB named database per tree.
//!
//! Durability: with `fsync`, LMDB flushes data and meta pages on every
//! commit. Without it the environment runs with `NO_SYNC | NO_META_SYNC`: a
//! commit is in the OS page cache when it returns, which survives a crash of
//! the process (LMDB's copy-on-write B-tree never exposes a half-written
//! transaction) but may lose the last commits on a power loss.
//!
//! With `write_map` (`lmdb_write_map`), LMDB writes committed pages straight
//! into its memory map instead of copying each dirty page from a buffer of
//! its own with `pwrite`. Such a map must be backed by the file over its
//! whole length, so the map starts small and grows: after a write, when
//! more than [`GROW_AT_PERCENT`] of it is used, every transaction of the
//! process is let finish, the file is extended with its blocks allocated
//! (`fallocate`, so that a full disk is an error here and never a `SIGBUS`
//! on a write through the map), and the map is resized. See
//! `doc/metadata-db.md`.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard};

use heed::types::{Bytes, DecodeIgnore, Str};
use heed::{CommitOrAbort, CompactionOption, Database, Env, EnvFlags, EnvOpenOptions, RoTxn};

use crate::{Direction, Engine, Error, IDb, ITx, KeyValue, OpenOptions, Result, Value};

/// Default map size: 1 TiB of address space (the file grows only as needed).
pub const DEFAULT_MAP_SIZE: u64 = garage_util::db_engine::DEFAULT_LMDB_MAP_SIZE;
const MAX_TREES: u32 = 512;
/// LMDB keeps one reader slot per thread that ever read (126 by default).
/// Garage reads from tokio's blocking pool (up to 512 threads) and its
/// runtime threads: leave ample room.
const MAX_READERS: u32 = 2048;

/// With `write_map`: the map's first size, and the least it grows by.
pub const GROW_STEP: u64 = 16 << 20;
/// With `write_map`: the map grows once more than this share of it is used
/// and no transaction is open at the time.
pub const GROW_AT_PERCENT: u64 = 90;
/// With `write_map`: past this share, the growth waits for the
/// transactions open to end.
const URGENT_AT_PERCENT: u64 = 96;

type Tree = Database<'static, Bytes, Bytes>;

pub struct LmdbDb {
    env: Env,
    main: Database<'static, Str, DecodeIgnore>,
    trees: RwLock<Vec<(String, Tree)>>,
    /// Set with `write_map`: the map grows as the database does.
    growth: Option<Growth>,
}

/// A map that grows (see the module's documentation).
struct Growth {
    /// Held shared by every transaction, and exclusively to resize the map
    /// (which LMDB allows only while no transaction of the process is
    /// open). No method holds it while calling another: a transaction's
    /// closure cannot use its own database (`Error::InsideTransaction`).
    gate: RwLock<()>,
    /// `data.mdb`.
    file: PathBuf,
    /// The largest the map may grow to (`lmdb_map_size`).
    cap: u64,
    /// LMDB's page size.
    page: u64,
    /// After a failure to grow (a full disk), no new try before this.
    retry_after: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long after a failure to grow the map the next try waits.
const RETRY_GROWTH: std::time::Duration = std::time::Duration::from_secs(10);

/// Rounds `n` up to a whole number of [`GROW_STEP`]s.
fn whole_steps(n: u64) -> u64 {
    n.div_ceil(GROW_STEP).max(1).saturating_mul(GROW_STEP)
}

/// The map size to grow to when `used` bytes of a map of `map` bytes are
/// used, or `None` while it has room enough: an eighth more, at least
/// [`GROW_STEP`], at most `cap`.
pub fn grown_map_size(map: u64, used: u64, cap: u64) -> Option<u64> {
    if used.saturating_mul(100) <= map.saturating_mul(GROW_AT_PERCENT) || map >= cap {
        return None;
    }
    Some(whole_steps(map + (map / 8).max(GROW_STEP)).min(cap))
}

/// Extends `file` to `len` bytes with its blocks allocated (the holes of a
/// sparse file included), so that writes through the map never meet a
/// full disk.
fn preallocate(file: &Path, len: u64) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .map_err(|e| Error::io(file, e))?;
    match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        // A file system without fallocate: the extension is sparse, as
        // LMDB itself would make it.
        Err(rustix::io::Errno::OPNOTSUPP) => {
            tracing::warn!(
                "{}: the file system cannot preallocate; a full disk may stop the node on a metadata write",
                file.display()
            );
            f.set_len(len.max(f.metadata().map_err(|e| Error::io(file, e))?.len()))
                .map_err(|e| Error::io(file, e))
        }
        Err(e) => Err(Error::Preallocate {
            path: file.to_path_buf(),
            len,
            source: e.into(),
        }),
    }
}

impl LmdbDb {
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Self> {
        std::fs::create_dir_all(path).map_err(|e| Error::io(path, e))?;
        let map_size = usize::try_from(opts.lmdb_map_size).unwrap_or(usize::MAX);
        let mut env_opts = EnvOpenOptions::new();
        env_opts
            .map_size(map_size)
            .max_dbs(MAX_TREES)
            .max_readers(MAX_READERS);
        let cap = opts.lmdb_map_size;
        let file = path.join("data.mdb");
        let mut flags = EnvFlags::NO_READ_AHEAD;
        if !opts.fsync {
            flags |= EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC;
        }
        if opts.lmdb_write_map {
            flags |= EnvFlags::WRITE_MAP;
            // Start from the file's size (LMDB raises the map to the
            // pages in use if that is less).
            let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            let start = whole_steps(len).min(cap).max(len);
            env_opts.map_size(usize::try_from(start).unwrap_or(usize::MAX));
        }
        // SAFETY: LMDB requires that the same environment is not opened twice
        // in one process, which heed checks, and that the files are not
        // modified by anything but LMDB; garage owns its metadata directory.
        #[allow(unsafe_code)]
        let env = unsafe {
            env_opts.flags(flags);
            env_opts.open(path)?
        };
        let rtxn = env.read_txn()?;
        let main = env
            .open_databases_and_commit(rtxn, |dbo, rtxn| {
                dbo.open_database::<Str, DecodeIgnore>(rtxn, None)
                    .map(CommitOrAbort::<_, ()>::Commit)
            })?
            .unwrap_commit()
            .ok_or_else(|| Error::Aborted("LMDB has no main database".into()))?;
        let growth = opts.lmdb_write_map.then(|| Growth {
            gate: RwLock::new(()),
            file,
            cap,
            page: env.unnamed_database_stat().page_size as u64,
            retry_after: std::sync::Mutex::new(None),
        });
        let db = Self {
            env,
            main,
            trees: RwLock::new(Vec::new()),
            growth,
        };
        if let Some(g) = &db.growth {
            // LMDB extended the file sparsely to the map's size.
            preallocate(&g.file, db.env.info().map_size as u64)?;
            db.after_write();
        }
        Ok(db)
    }

    fn tree(&self, i: usize) -> Tree {
        self.trees.read().unwrap_or_else(|e| e.into_inner())[i].1
    }

    /// Held for the length of every transaction, so that the map is not
    /// resized under it. Never taken while holding it (the resize waits
    /// for it, and new readers wait for the resize), nor while holding
    /// `trees`' lock for reading (`open_tree` holds it for writing and
    /// then takes this one): a tree's handle is looked up first.
    fn enter(&self) -> Option<RwLockReadGuard<'_, ()>> {
        self.growth
            .as_ref()
            .map(|g| g.gate.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// After a write (its transaction closed): grows the map if it is
    /// nearly full. A failure to grow is logged and the write stands; the
    /// map's remaining room is still used, and a write that does not fit
    /// fails with LMDB's `MDB_MAP_FULL`.
    fn after_write(&self) {
        let Some(g) = &self.growth else {
            return;
        };
        // The common case, without the lock below: room enough.
        let (map, used) = self.map_use(g);
        if grown_map_size(map, used, g.cap).is_none() {
            return;
        }
        let now = std::time::Instant::now();
        let mut retry = g.retry_after.lock().unwrap_or_else(|e| e.into_inner());
        if retry.is_some_and(|t| now < t) {
            return;
        }
        if let Err(e) = self.grow_if_needed() {
            tracing::warn!(
                "cannot grow the LMDB map (next try in {}s): {e}",
                RETRY_GROWTH.as_secs()
            );
            *retry = Some(now + RETRY_GROWTH);
        } else {
            *retry = None;
        }
    }

    /// The map's size and the bytes of it in use, as of the last commit.
    fn map_use(&self, g: &Growth) -> (u64, u64) {
        let i = self.env.info();
        (i.map_size as u64, (i.last_page_number as u64 + 1) * g.page)
    }

    fn grow_if_needed(&self) -> Result<()> {
        let Some(g) = &self.growth else {
            return Ok(());
        };
        let (map, u) = self.map_use(g);
        if grown_map_size(map, u, g.cap).is_none() {
            return Ok(());
        }
        // Waiting for the gate stops every new transaction until those
        // open end, a long one included (a snapshot's copy): wait only
        // once the map is nearly full, and until then grow when the gate
        // is free.
        let _excl = match g.gate.try_write() {
            Ok(excl) => excl,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if u * 100 < map * URGENT_AT_PERCENT => {
                return Ok(());
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                g.gate.write().unwrap_or_else(|e| e.into_inner())
            }
        };
        // Another thread may have grown it meanwhile.
        let (map, u) = self.map_use(g);
        let Some(new) = grown_map_size(map, u, g.cap) else {
            return Ok(());
        };
        preallocate(&g.file, new)?;
        // SAFETY: heed requires that no transaction of this process is
        // open: every one holds the gate, which is ours exclusively.
        #[allow(unsafe_code)]
        unsafe {
            self.env
                .resize(usize::try_from(new).unwrap_or(usize::MAX))?
        };
        tracing::info!(
            "LMDB map grown from {} to {} MiB ({} MiB used)",
            map >> 20,
            new >> 20,
            u >> 20
        );
        Ok(())
    }
}

fn range_in(
    db: Tree,
    txn: &RoTxn,
    low: Bound<&[u8]>,
    high: Bound<&[u8]>,
    dir: Direction,
    limit: usize,
) -> Result<Vec<KeyValue>> {
    let bounds = (low, high);
    let copy = |kv: heed::Result<(&[u8], &[u8])>| kv.map(|(k, v)| (k.to_vec(), v.to_vec()));
    let out = match dir {
        Direction::Forward => db
            .range(txn, &bounds)?
            .take(limit)
            .map(copy)
            .collect::<heed::Result<Vec<_>>>()?,
        Direction::Reverse => db
            .rev_range(txn, &bounds)?
            .take(limit)
            .map(copy)
            .collect::<heed::Result<Vec<_>>>()?,
    };
    Ok(out)
}

fn len_of(db: Tree, txn: &RoTxn) -> Result<usize> {
    Ok(db.len(txn)? as usize)
}

impl IDb for LmdbDb {
    fn engine(&self) -> Engine {
        Engine::Lmdb
    }

    fn open_tree(&self, name: &str) -> Result<usize> {
        let mut trees = self.trees.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = trees.iter().position(|(n, _)| n == name) {
            return Ok(i);
        }
        let _g = self.enter();
        let wtxn = self.env.write_txn()?;
        let db: Tree = self
            .env
            .create_databases_and_commit(wtxn, |dbo, wtxn| {
                dbo.create_database::<Bytes, Bytes>(wtxn, Some(name))
                    .map(CommitOrAbort::<_, ()>::Commit)
            })?
            .unwrap_commit();
        trees.push((name.to_string(), db));
        Ok(trees.len() - 1)
    }

    fn list_trees(&self) -> Result<Vec<String>> {
        let _g = self.enter();
        let rtxn = self.env.read_txn()?;
        let names = self
            .main
            .iter(&rtxn)?
            .map(|kv| kv.map(|(k, ())| k.to_string()))
            .collect::<heed::Result<Vec<_>>>()?;
        Ok(names)
    }

    fn sync(&self) -> Result<()> {
        // Flushes data and meta pages even with NO_SYNC | NO_META_SYNC.
        let _g = self.enter();
        Ok(self.env.force_sync()?)
    }

    fn snapshot(&self, dir: &Path) -> Result<()> {
        let _g = self.enter();
        self.env
            .copy_to_path(dir.join("data.mdb"), CompactionOption::Enabled)?
            .sync_all()
            .map_err(|e| Error::io(dir, e))?;
        Ok(())
    }

    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>> {
        let db = self.tree(tree);
        let _g = self.enter();
        let rtxn = self.env.read_txn()?;
        Ok(db.get(&rtxn, key)?.map(|v| v.to_vec()))
    }

    fn len(&self, tree: usize) -> Result<usize> {
        let db = self.tree(tree);
        let _g = self.enter();
        let rtxn = self.env.read_txn()?;
        len_of(db, &rtxn)
    }

    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>> {
        let db = self.tree(tree);
        let _g = self.enter();
        let rtxn = self.env.read_txn()?;
        range_in(db, &rtxn, low, high, dir, limit)
    }

    fn insert(&self, tree: usize, key: &[u8], value: &[u8]) -> Result<()> {
        let db = self.tree(tree);
        {
            let _g = self.enter();
            let mut wtxn = self.env.write_txn()?;
            db.put(&mut wtxn, key, value)?;
            wtxn.commit()?;
        }
        self.after_write();
        Ok(())
    }

    fn remove(&self, tree: usize, key: &[u8]) -> Result<()> {
        let db = self.tree(tree);
        {
            let _g = self.enter();
            let mut wtxn = self.env.write_txn()?;
            db.delete(&mut wtxn, key)?;
            wtxn.commit()?;
        }
        self.after_write();
        Ok(())
    }

    fn clear(&self, tree: usize) -> Result<()> {
        let db = self.tree(tree);
        {
            let _g = self.enter();
            let mut wtxn = self.env.write_txn()?;
            db.clear(&mut wtxn)?;
            wtxn.commit()?;
        }
        self.after_write();
        Ok(())
    }

    fn transaction(&self, f: &mut dyn FnMut(&mut dyn ITx) -> Result<bool>) -> Result<()> {
        let trees: Vec<Tree> = self
            .trees
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, t)| *t)
            .collect();
        let res = {
            let _g = self.enter();
            let mut wtxn = self.env.write_txn()?;
            let mut tx = LmdbTx {
                trees: &trees,
                txn: &mut wtxn,
            };
            match f(&mut tx) {
                Ok(true) => wtxn.commit().map_err(Error::from),
                Ok(false) => {
                    wtxn.abort();
                    Ok(())
                }
                Err(e) => {
                    wtxn.abort();
                    Err(e)
                }
            }
        };
        // Also after a write that did not fit (`MDB_MAP_FULL`): the next
        // try, such as a grouped job's run alone, finds room.
        self.after_write();
        res
    }
}

struct LmdbTx<'a, 'e> {
    trees: &'a [Tree],
    txn: &'a mut heed::RwTxn<'e>,
}

impl ITx for LmdbTx<'_, '_> {
    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>> {
        Ok(self.trees[tree].get(self.txn, key)?.map(|v| v.to_vec()))
    }

    fn len(&self, tree: usize) -> Result<usize> {
        len_of(self.trees[tree], self.txn)
    }

    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>> {
        range_in(self.trees[tree], self.txn, low, high, dir, limit)
    }

    fn insert(&mut self, tree: usize, key: &[u8], value: &[u8]) -> Result<()> {
        self.trees[tree].put(self.txn, key, value)?;
        Ok(())
    }

    fn remove(&mut self, tree: usize, key: &[u8]) -> Result<()> {
        self.trees[tree].delete(self.txn, key)?;
        Ok(())
    }

    fn clear(&mut self, tree: usize) -> Result<()> {
        self.trees[tree].clear(self.txn)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_grows_by_an_eighth_or_a_step_up_to_the_cap() {
        let cap = 1u64 << 40;
        // Room enough: no growth.
        assert_eq!(grown_map_size(GROW_STEP, GROW_STEP * 9 / 10, cap), None);
        // A small map grows by a step.
        assert_eq!(
            grown_map_size(GROW_STEP, GROW_STEP * 95 / 100, cap),
            Some(2 * GROW_STEP)
        );
        // A large one by an eighth, in whole steps.
        let map = 80 * GROW_STEP;
        assert_eq!(grown_map_size(map, map - 1, cap), Some(90 * GROW_STEP));
        let map = 81 * GROW_STEP;
        assert_eq!(grown_map_size(map, map, cap), Some(92 * GROW_STEP));
        // Never past the cap, and not at all once there.
        assert_eq!(
            grown_map_size(map, map, 85 * GROW_STEP),
            Some(85 * GROW_STEP)
        );
        assert_eq!(grown_map_size(map, map, map), None);
    }
}
