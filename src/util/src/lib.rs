//! `garage_util`: what every garage layer shares: configuration loading and
//! validation, ids and hashes, time, CRDT primitives and the registry of
//! background workers.
//!
//! It depends on no other garage crate: the network, database, table,
//! block, model and API crates build on it.

pub mod clock;
pub mod config;
pub mod crdt;
pub mod data;
pub mod db_engine;
#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(any(test, feature = "testing"))]
pub mod fuzzing;
pub mod socket;
pub mod time;
pub mod tuning;
pub mod worker;
