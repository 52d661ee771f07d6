//! SQLite engine, through `rusqlite` (bundled SQLite). One `WITHOUT ROWID`
//! table per tree, named `tree:<name>`, with a BLOB primary key: SQLite
//! compares BLOBs with `memcmp` then length, which is the bytewise order the
//! trait promises.
//!
//! Durability: the database runs in WAL mode. With `fsync`,
//! `synchronous = FULL` syncs the WAL on every commit. Without it,
//! `synchronous = NORMAL`: a commit survives a crash of the process, and a
//! power loss may drop the last commits but never corrupts the database.

use std::ops::Bound;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, RwLock};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::{Direction, Engine, Error, IDb, ITx, KeyValue, OpenOptions, Result, Value};

const TABLE_PREFIX: &str = "tree:";

pub struct SqliteDb {
    conn: Mutex<Connection>,
    /// Quoted table name of each opened tree.
    trees: RwLock<Vec<String>>,
}

fn quote_table(name: &str) -> String {
    format!("\"{}{}\"", TABLE_PREFIX, name.replace('"', "\"\""))
}

impl SqliteDb {
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Self> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
        }
        let conn = Connection::open(path)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(path = %path.display(), %mode, "SQLite did not switch to WAL mode");
        }
        conn.pragma_update(
            None,
            "synchronous",
            if opts.fsync { "FULL" } else { "NORMAL" },
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        conn.set_prepared_statement_cache_capacity(256);
        Ok(Self {
            conn: Mutex::new(conn),
            trees: RwLock::new(Vec::new()),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn table(&self, i: usize) -> String {
        self.trees.read().unwrap_or_else(|e| e.into_inner())[i].clone()
    }
}

// The same statements serve the connection and a transaction on it.
fn get_in(conn: &Connection, table: &str, key: &[u8]) -> Result<Option<Value>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT v FROM {table} WHERE k = ?1"))?;
    Ok(stmt.query_row([key], |r| r.get(0)).optional()?)
}

fn len_in(conn: &Connection, table: &str) -> Result<usize> {
    let mut stmt = conn.prepare_cached(&format!("SELECT COUNT(*) FROM {table}"))?;
    let n: i64 = stmt.query_row([], |r| r.get(0))?;
    Ok(n as usize)
}

fn insert_in(conn: &Connection, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT INTO {table} (k, v) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
    ))?;
    stmt.execute(params![key, value])?;
    Ok(())
}

fn remove_in(conn: &Connection, table: &str, key: &[u8]) -> Result<()> {
    let mut stmt = conn.prepare_cached(&format!("DELETE FROM {table} WHERE k = ?1"))?;
    stmt.execute([key])?;
    Ok(())
}

fn clear_in(conn: &Connection, table: &str) -> Result<()> {
    conn.execute(&format!("DELETE FROM {table}"), [])?;
    Ok(())
}

fn range_in(
    conn: &Connection,
    table: &str,
    low: Bound<&[u8]>,
    high: Bound<&[u8]>,
    dir: Direction,
    limit: usize,
) -> Result<Vec<KeyValue>> {
    let mut conds = Vec::new();
    let mut args: Vec<&[u8]> = Vec::new();
    for (bound, incl, excl) in [(low, "k >= ?", "k > ?"), (high, "k <= ?", "k < ?")] {
        match bound {
            Bound::Included(k) => {
                conds.push(incl);
                args.push(k);
            }
            Bound::Excluded(k) => {
                conds.push(excl);
                args.push(k);
            }
            Bound::Unbounded => (),
        }
    }
    let cond = if conds.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conds.join(" AND "))
    };
    let order = match dir {
        Direction::Forward => "ASC",
        Direction::Reverse => "DESC",
    };
    let sql = format!("SELECT k, v FROM {table} {cond} ORDER BY k {order} LIMIT {limit}");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
        Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

impl IDb for SqliteDb {
    fn engine(&self) -> Engine {
        Engine::Sqlite
    }

    fn open_tree(&self, name: &str) -> Result<usize> {
        let table = quote_table(name);
        // Lock order everywhere: the connection, then the tree list (the
        // other calls take `conn()` and then read the list in `table()`).
        let conn = self.conn();
        let mut trees = self.trees.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = trees.iter().position(|t| *t == table) {
            return Ok(i);
        }
        conn.execute(
            &format!(
                "CREATE TABLE IF NOT EXISTS {table} (k BLOB PRIMARY KEY NOT NULL, v BLOB NOT NULL) WITHOUT ROWID"
            ),
            [],
        )?;
        trees.push(table);
        Ok(trees.len() - 1)
    }

    fn list_trees(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(names
            .into_iter()
            .filter_map(|n| n.strip_prefix(TABLE_PREFIX).map(str::to_string))
            .collect())
    }

    fn sync(&self) -> Result<()> {
        // With `synchronous = NORMAL`, a checkpoint syncs the WAL first,
        // then the database file once the pages are copied.
        let conn = self.conn();
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(FULL)", [], |r| r.get(0))?;
        if busy != 0 {
            return Err(Error::Aborted(
                "SQLite checkpoint could not complete (database busy)".into(),
            ));
        }
        Ok(())
    }

    fn snapshot(&self, dir: &Path) -> Result<()> {
        let target = dir.join("db.sqlite");
        let target_str = target
            .to_str()
            .ok_or_else(|| Error::io(&target, std::io::Error::other("path is not UTF-8")))?;
        self.conn().execute("VACUUM INTO ?1", [target_str])?;
        Ok(())
    }

    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>> {
        get_in(&self.conn(), &self.table(tree), key)
    }

    fn len(&self, tree: usize) -> Result<usize> {
        len_in(&self.conn(), &self.table(tree))
    }

    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>> {
        range_in(&self.conn(), &self.table(tree), low, high, dir, limit)
    }

    fn insert(&self, tree: usize, key: &[u8], value: &[u8]) -> Result<()> {
        insert_in(&self.conn(), &self.table(tree), key, value)
    }

    fn remove(&self, tree: usize, key: &[u8]) -> Result<()> {
        remove_in(&self.conn(), &self.table(tree), key)
    }

    fn clear(&self, tree: usize) -> Result<()> {
        clear_in(&self.conn(), &self.table(tree))
    }

    fn transaction(&self, f: &mut dyn FnMut(&mut dyn ITx) -> Result<bool>) -> Result<()> {
        let tables = self.trees.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut conn = self.conn();
        let txn = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut tx = SqliteTx {
            tables: &tables,
            conn: &txn,
        };
        match f(&mut tx) {
            Ok(true) => {
                txn.commit()?;
                Ok(())
            }
            Ok(false) => {
                txn.rollback()?;
                Ok(())
            }
            Err(e) => {
                // Dropping the transaction rolls it back.
                drop(txn);
                Err(e)
            }
        }
    }
}

struct SqliteTx<'a> {
    tables: &'a [String],
    conn: &'a Connection,
}

impl ITx for SqliteTx<'_> {
    fn get(&self, tree: usize, key: &[u8]) -> Result<Option<Value>> {
        get_in(self.conn, &self.tables[tree], key)
    }

    fn len(&self, tree: usize) -> Result<usize> {
        len_in(self.conn, &self.tables[tree])
    }

    fn range_batch(
        &self,
        tree: usize,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<KeyValue>> {
        range_in(self.conn, &self.tables[tree], low, high, dir, limit)
    }

    fn insert(&mut self, tree: usize, key: &[u8], value: &[u8]) -> Result<()> {
        insert_in(self.conn, &self.tables[tree], key, value)
    }

    fn remove(&mut self, tree: usize, key: &[u8]) -> Result<()> {
        remove_in(self.conn, &self.tables[tree], key)
    }

    fn clear(&mut self, tree: usize) -> Result<()> {
        clear_in(self.conn, &self.tables[tree])
    }
}
