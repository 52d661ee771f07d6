//! Messages between the replicas of a table.

use garage_net::Message;
use garage_util::data::Hash;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::merkle::MerkleNode;
use crate::schema::TableSchema;

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub enum TableRpc<F: TableSchema> {
    Ok,
    Error(String),
    /// Read one entry.
    ReadEntry(F::P, F::S),
    ReadEntryResponse(Option<ByteBuf>),
    /// Read up to `limit` entries of a partition key, tombstones included.
    ReadRange {
        partition_key: F::P,
        start: Option<F::S>,
        limit: usize,
        reverse: bool,
    },
    /// Encoded entries: the answer to `ReadRange`.
    Entries(Vec<ByteBuf>),
    /// Merge these encoded entries into the local store.
    Update(Vec<ByteBuf>),
    /// Nodes of the Merkle tree of a partition (anti-entropy), by prefix.
    GetMerkleNodes {
        partition: u8,
        prefixes: Vec<ByteBuf>,
    },
    MerkleNodes(Vec<MerkleNode>),
    /// Remove these entries (by tree key) if they still hash to the given
    /// value: the tombstone GC's last step.
    DeleteIfEqualHash(Vec<(ByteBuf, Hash)>),
    /// Merge these encoded entries, except those that sort before a newer
    /// write this replica holds ([`crate::TableSchema::newer_than`]).
    UpdateOrdered(Vec<ByteBuf>),
    /// The answer to `UpdateOrdered`: for each entry, `None` if it was
    /// merged, else the stamp of the newer write that refused it.
    Refused(Vec<Option<u64>>),
}

impl<F: TableSchema> Message for TableRpc<F> {
    type Response = TableRpc<F>;
}

impl<F: TableSchema> TableRpc<F> {
    /// Short name of the variant, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            TableRpc::Ok => "Ok",
            TableRpc::Error(_) => "Error",
            TableRpc::ReadEntry(..) => "ReadEntry",
            TableRpc::ReadEntryResponse(_) => "ReadEntryResponse",
            TableRpc::ReadRange { .. } => "ReadRange",
            TableRpc::Entries(_) => "Entries",
            TableRpc::Update(_) => "Update",
            TableRpc::GetMerkleNodes { .. } => "GetMerkleNodes",
            TableRpc::MerkleNodes(_) => "MerkleNodes",
            TableRpc::DeleteIfEqualHash(_) => "DeleteIfEqualHash",
            TableRpc::UpdateOrdered(_) => "UpdateOrdered",
            TableRpc::Refused(_) => "Refused",
        }
    }
}
