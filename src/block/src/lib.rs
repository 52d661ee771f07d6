//! `garage_block`: the data blocks, content-addressed by their blake2 hash.
//!
//! This version has the local side: blocks as files on one or several data
//! directories, placed by a stable capacity-weighted hash, written durably
//! (temporary file, optional fsync, rename, fsync of the directory), kept
//! zstd-compressed when that saves space, and checked against their hash on
//! every read. Replication, reference counts, resync and scrub come next.

pub mod block;
pub mod dirs;
pub mod rc;
pub mod store;

pub use block::DataBlock;
pub use store::{BlockStore, StoreError};
