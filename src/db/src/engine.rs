use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use crate::{lmdb_adapter, sqlite_adapter, Db, Error, Result};

/// The embedded engines garage can keep its metadata in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    Lmdb,
    Sqlite,
}

impl Engine {
    pub const ALL: [Engine; 2] = [Engine::Lmdb, Engine::Sqlite];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Lmdb => "lmdb",
            Engine::Sqlite => "sqlite",
        }
    }

    /// Where the database lives inside a node's `metadata_dir`: a directory
    /// `db.lmdb/` for LMDB, a file `db.sqlite` for SQLite.
    pub fn db_path(self, metadata_dir: &Path) -> PathBuf {
        match self {
            Engine::Lmdb => metadata_dir.join("db.lmdb"),
            Engine::Sqlite => metadata_dir.join("db.sqlite"),
        }
    }

    /// Whether a database of this engine exists at `path`.
    pub fn exists_at(self, path: &Path) -> bool {
        match self {
            Engine::Lmdb => path.join("data.mdb").is_file(),
            Engine::Sqlite => path.is_file(),
        }
    }

    /// Where [`Db::snapshot`] puts the database inside a snapshot directory.
    pub fn snapshot_db_path(self, snapshot_dir: &Path) -> PathBuf {
        match self {
            Engine::Lmdb => snapshot_dir.to_path_buf(),
            Engine::Sqlite => snapshot_dir.join("db.sqlite"),
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Engine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "lmdb" | "heed" => Ok(Engine::Lmdb),
            "sqlite" | "sqlite3" | "rusqlite" => Ok(Engine::Sqlite),
            _ => Err(Error::UnknownEngine(s.to_string())),
        }
    }
}

/// How to open a database.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Flush every commit to stable storage before it returns
    /// (`metadata_fsync`). Without it a commit survives a crash of the
    /// process but not necessarily a power loss or kernel crash.
    pub fsync: bool,
    /// LMDB's map size: the largest the database may grow (`lmdb_map_size`).
    pub lmdb_map_size: u64,
    /// Create the database if it does not exist.
    pub create: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            fsync: false,
            lmdb_map_size: lmdb_adapter::DEFAULT_MAP_SIZE,
            create: true,
        }
    }
}

/// Opens (or creates) the database of `engine` at `path`.
pub fn open(engine: Engine, path: &Path, opts: &OpenOptions) -> Result<Db> {
    if !opts.create && !engine.exists_at(path) {
        return Err(Error::NotFound {
            engine: engine.to_string(),
            path: path.to_path_buf(),
        });
    }
    let inner: Arc<dyn crate::IDb> = match engine {
        Engine::Lmdb => Arc::new(lmdb_adapter::LmdbDb::open(path, opts)?),
        Engine::Sqlite => Arc::new(sqlite_adapter::SqliteDb::open(path, opts)?),
    };
    Ok(Db::new(inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for e in Engine::ALL {
            assert_eq!(e.as_str().parse::<Engine>().unwrap(), e);
        }
        assert_eq!("heed".parse::<Engine>().unwrap(), Engine::Lmdb);
        assert_eq!("sqlite3".parse::<Engine>().unwrap(), Engine::Sqlite);
        let e = "sled".parse::<Engine>().unwrap_err().to_string();
        assert!(e.contains("\"lmdb\" or \"sqlite\""), "{e}");
    }

    #[test]
    fn paths_inside_metadata_dir() {
        let m = Path::new("/meta");
        assert_eq!(Engine::Lmdb.db_path(m), Path::new("/meta/db.lmdb"));
        assert_eq!(Engine::Sqlite.db_path(m), Path::new("/meta/db.sqlite"));
        assert!(!Engine::Lmdb.exists_at(Path::new("/nonexistent")));
    }
}
