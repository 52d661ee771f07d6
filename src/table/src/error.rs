//! The errors of the table layer: the metadata database, entry decoding,
//! quorums and the RPCs to other replicas.

use garage_db as db;
use garage_rpc::quorum::QuorumError;

use crate::encoding::DecodeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("metadata database: {0}")]
    Db(#[from] db::Error),
    #[error("corrupt table entry: {0}")]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error("no node stores this partition in the cluster layout (has a layout been applied with `garage layout apply`?)")]
    NoNodes,
    #[error("cannot reach node {node}: {msg}")]
    Net { node: String, msg: String },
    #[error("node {node} answered with an error: {msg}")]
    Remote { node: String, msg: String },
    #[error("a concurrent change of the register won ({refused} acceptors refused this ballot); try again")]
    CasConflict { refused: usize },
    #[error("partition key has more than {limit} entries: not read whole")]
    TooManyEntries { limit: usize },
    #[error("unexpected answer from node {node}: {msg}")]
    Unexpected { node: String, msg: String },
}

impl<E: std::fmt::Debug> From<db::TxError<E>> for Error {
    fn from(e: db::TxError<E>) -> Self {
        Error::Db(e.into_db_error())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Runs blocking database work on the blocking pool, never on the async
/// runtime's threads (a long iteration would stall every task there).
pub async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Remote {
            node: "local".into(),
            msg: format!("blocking task failed: {e}"),
        })?
}
