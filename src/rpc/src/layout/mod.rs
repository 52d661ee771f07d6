//! The cluster layout: partitions of the key space and the nodes that store
//! them.

pub mod assign;
mod flow;

pub use assign::{compute, AssignError, AssignInput, Assignment, NodeSpec};

/// Number of partitions of the key space: a key's partition is the first
/// byte of its hash.
pub const PARTITIONS: usize = 256;

#[cfg(test)]
mod tests;
