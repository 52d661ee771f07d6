//! `garage_util`: what every garage layer shares: configuration loading and
//! validation, ids and hashes, time, CRDT primitives and the registry of
//! background workers.
//!
//! It may depend on `garage_db` only; it must never depend on the network,
//! table, block, model or API crates.

pub mod clock;
pub mod config;
pub mod crdt;
pub mod data;
pub mod fuzzing;
pub mod socket;
pub mod time;
pub mod worker;
