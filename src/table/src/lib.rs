//! `garage_table`: replicated tables of CRDT entries.
//!
//! Each table stores its entries in the metadata database, partitioned by
//! the hash of their partition key; the cluster layout says which nodes
//! hold each partition, or, for small tables read by every request, every
//! node holds every entry (see [`replication`]). Writes go to every replica and return after a
//! write quorum; reads ask a read quorum, merge the answers and write the
//! merge back to replicas that were behind (read repair). A Merkle tree per
//! partition lets replicas find and exchange only what differs
//! (anti-entropy), and a GC removes tombstones once every replica has them.

pub mod any;
pub mod cas;
pub mod cascade;
pub mod data;
pub mod encoding;
pub mod error;
pub mod gc;
pub mod merkle;
pub mod queue;
pub mod replication;
#[cfg(test)]
mod replication_tests;
pub mod rpc;
pub mod schema;
pub mod sync;
pub mod table;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tuning;

pub use any::{AnyTable, TableStats};
pub use cas::{AcceptOutcome, CasRegisters, Prepared, RegisterId};
pub use error::{Error, Result};
pub use queue::InsertQueue;
pub use replication::Replication;
pub use schema::{EmptyKey, Entry, PartitionKey, Removal, SortKey, TableSchema};
pub use table::Table;
