//! `garage_block`: the data blocks, content-addressed by their blake2 hash.
//!
//! This version has the local side: blocks as files on one or several data
//! directories, placed by a stable capacity-weighted hash, written durably
//! (temporary file, optional fsync, rename, fsync of the directory), kept
//! zstd-compressed when that saves space, and checked against their hash on
//! every read; reference counts driven by the `block_ref` table; and the
//! cluster side: quorum writes, nearest-first reads with fallback; the
//! resync, scrub and rebalance workers. Erasure-coded blocks (storage
//! classes): the shard format and codec in [`ec`], their writes, reads,
//! checks and deletion across the cluster in [`shards`], and their moves
//! after layout changes in [`placement`]; what a node stores, by class, in
//! [`census`].

pub mod block;
pub mod census;
pub mod dirs;
pub mod ec;
pub mod manager;
pub mod placement;
pub mod rc;
pub mod rebalance;
pub mod resync;
pub mod scrub;
pub mod shards;
pub mod store;
pub mod workers;

pub use block::DataBlock;
/// A block's bytes as they arrive (see [`manager::BlockManager::get_block_stream`]).
pub use garage_net::ByteStream;
pub use store::{BlockStore, StoreError};
