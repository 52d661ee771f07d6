//! Opening a metadata database: the engine named in the configuration
//! (`db_engine`, LMDB or SQLite) at a path, with its options.

use std::path::Path;
use std::sync::Arc;

/// The engines, named in the configuration (`db_engine`): the type is
/// `garage_util`'s, which reads the configuration.
pub use garage_util::db_engine::Engine;

use crate::{lmdb_adapter, sqlite_adapter, Db, Error, Result};

/// How to open a database.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Flush every commit to stable storage before it returns
    /// (`metadata_fsync`). Without it a commit survives a crash of the
    /// process but not necessarily a power loss or kernel crash.
    pub fsync: bool,
    /// LMDB's map size: the largest the database may grow (`lmdb_map_size`).
    pub lmdb_map_size: u64,
    /// LMDB writes through its memory map (`lmdb_write_map`); the map then
    /// grows in preallocated steps up to `lmdb_map_size`.
    pub lmdb_write_map: bool,
    /// Create the database if it does not exist.
    pub create: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            fsync: false,
            lmdb_map_size: lmdb_adapter::DEFAULT_MAP_SIZE,
            lmdb_write_map: false,
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
