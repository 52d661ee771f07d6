//! The metadata database engines as the configuration names them
//! (`db_engine`), and where each keeps its files in `metadata_dir`. The
//! engines themselves are `garage_db`'s.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// LMDB's default map size: the largest the database may grow
/// (`lmdb_map_size`), 1 TiB of address space.
pub const DEFAULT_LMDB_MAP_SIZE: u64 = 1 << 40;

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

/// A `db_engine` that names no engine.
#[derive(Debug, thiserror::Error)]
#[error("unknown database engine {0:?}: expected \"lmdb\" or \"sqlite\"")]
pub struct UnknownEngine(pub String);

impl FromStr for Engine {
    type Err = UnknownEngine;
    fn from_str(s: &str) -> Result<Self, UnknownEngine> {
        match s {
            "lmdb" | "heed" => Ok(Engine::Lmdb),
            "sqlite" | "sqlite3" | "rusqlite" => Ok(Engine::Sqlite),
            _ => Err(UnknownEngine(s.to_string())),
        }
    }
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
