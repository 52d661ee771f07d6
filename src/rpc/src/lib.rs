//! `garage_rpc`: the cluster layer: membership, failure detection and the
//! cluster layout (which nodes store which partitions).
//!
//! It may depend on `garage_util`, `garage_db` and `garage_net`;
//! never on the table, block, model or API crates.

pub mod layout;
pub mod quorum;
pub mod system;

pub use garage_net::NodeId;
