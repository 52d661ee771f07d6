//! LMDB engine, through `heed`. One LMDB named database per tree.
//!
//! Durability: with `fsync`, LMDB flushes data and meta pages on every
//! commit. Without it the environment runs with `NO_SYNC | NO_META_SYNC`: a
//! commit is in the OS page cache when it returns, which survives a crash of
//! the process (LMDB's copy-on-write B-tree never exposes a half-written
//! transaction) but may lose the last commits on a power loss.

use std::ops::Bound;
use std::path::Path;
use std::sync::RwLock;

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

type Tree = Database<'static, Bytes, Bytes>;

pub struct LmdbDb {
    env: Env,
    main: Database<'static, Str, DecodeIgnore>,
    trees: RwLock<Vec<(String, Tree)>>,
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
        let mut flags = EnvFlags::NO_READ_AHEAD;
        if !opts.fsync {
            flags |= EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC;
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
        Ok(Self {
            env,
            main,
            trees: RwLock::new(Vec::new()),
        })
    }

    fn tree(&self, i: usize) -> Tree {
        self.trees.read().unwrap_or_else(|e| e.into_inner())[i].1
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
        Ok(self.env.force_sync()?)
    }

    fn snapshot(&self, dir: &Path) -> Result<()> {
        self.env
            .copy_to_path(dir.join("data.mdb"), CompactionOption::Enabled)?
            .sync_all()
            .map_err(|e| Error::io(dir, e))?;
        Ok(())
    }

    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>> {
        let rtxn = self.env.read_txn()?;
        Ok(self.tree(tree).get(&rtxn, key)?.map(|v| v.to_vec()))
    }

    fn len(&self, tree: usize) -> Result<usize> {
        let rtxn = self.env.read_txn()?;
        len_of(self.tree(tree), &rtxn)
    }

    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>> {
        let rtxn = self.env.read_txn()?;
        range_in(self.tree(tree), &rtxn, low, high, dir, limit)
    }

    fn insert(&self, tree: usize, key: &[u8], value: &[u8]) -> Result<()> {
        let db = self.tree(tree);
        let mut wtxn = self.env.write_txn()?;
        db.put(&mut wtxn, key, value)?;
        wtxn.commit()?;
        Ok(())
    }

    fn remove(&self, tree: usize, key: &[u8]) -> Result<()> {
        let db = self.tree(tree);
        let mut wtxn = self.env.write_txn()?;
        db.delete(&mut wtxn, key)?;
        wtxn.commit()?;
        Ok(())
    }

    fn clear(&self, tree: usize) -> Result<()> {
        let db = self.tree(tree);
        let mut wtxn = self.env.write_txn()?;
        db.clear(&mut wtxn)?;
        wtxn.commit()?;
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
        let mut wtxn = self.env.write_txn()?;
        let mut tx = LmdbTx {
            trees: &trees,
            txn: &mut wtxn,
        };
        match f(&mut tx) {
            Ok(true) => {
                wtxn.commit()?;
                Ok(())
            }
            Ok(false) => {
                wtxn.abort();
                Ok(())
            }
            Err(e) => {
                wtxn.abort();
                Err(e)
            }
        }
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
