//! The errors of the metadata database layer, one enum for both engines.

use std::path::{Path, PathBuf};

/// Errors of the metadata database layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("LMDB error: {0}")]
    Lmdb(#[from] heed::Error),
    #[error("SQLite error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("keys must not be empty")]
    EmptyKey,
    #[error("key of {len} bytes is longer than the {max} bytes allowed")]
    KeyTooLong { len: usize, max: usize },
    #[error("invalid tree name {0:?}: a tree name is 1 to 200 characters")]
    BadTreeName(String),
    #[error("tree {0:?} belongs to another database than this transaction's")]
    ForeignTree(String),
    #[error("this database was used directly inside one of its own transactions: use the transaction's handle")]
    InsideTransaction,
    #[error("cannot allocate {len} bytes of disk for LMDB's map in {path}: {source}; free space on the metadata disk, or set lmdb_write_map = false")]
    Preallocate {
        path: PathBuf,
        len: u64,
        source: std::io::Error,
    },
    #[error("snapshot directory {0} is not empty")]
    SnapshotDirNotEmpty(PathBuf),
    #[error("no {engine} database at {path}")]
    NotFound { engine: String, path: PathBuf },
    #[error("the engine ran a transaction closure twice, which garage_db does not support")]
    TransactionRetried,
    #[error("transaction aborted: {0}")]
    Aborted(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The outcome of a transaction closure: either it decided to abort with a
/// value of its own, or the database failed.
#[derive(Debug, thiserror::Error)]
pub enum TxError<E> {
    #[error("transaction aborted")]
    Abort(E),
    #[error(transparent)]
    Db(#[from] Error),
}

pub type TxResult<R, E> = std::result::Result<R, TxError<E>>;

impl<E> TxError<E> {
    /// For transactions that never abort on purpose (`E = ()`) or whose abort
    /// value is not needed: the database error, or a generic one for aborts.
    pub fn into_db_error(self) -> Error
    where
        E: std::fmt::Debug,
    {
        match self {
            TxError::Db(e) => e,
            TxError::Abort(e) => Error::Aborted(format!("{e:?}")),
        }
    }
}
