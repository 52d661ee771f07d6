//! The cluster layout: which nodes store which partitions of the key space.
//!
//! - [`assign`]: the optimal assignment of partitions to nodes;
//! - [`version`]: one applied layout version;
//! - [`history`]: the versions a node keeps, the staged changes, gossip
//!   merge and persistence.

pub mod assign;
pub mod classes;
mod flow;
pub mod history;
pub mod version;

pub use assign::{compute, AssignError, AssignInput, Assignment, NodeSpec};
pub use classes::{ClassDef, ClassSpec, EcCode, Placement, RedundancySpec, Survival};
pub use history::{LayoutHistory, LayoutStaging, Tracker, UpdateTrackers};
pub use version::{
    ChangeReport, EcRing, LayoutParameters, LayoutVersion, NodeRole, ZoneRedundancy,
};

pub use crate::NodeId;

/// Number of partitions of the key space: a key's partition is the first
/// byte of its hash.
pub const PARTITIONS: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Assign(#[from] AssignError),
    #[error("the next layout version is {expected}, not {given}: run `garage layout show` to review the changes, then `garage layout apply --version {expected}`")]
    WrongVersion { given: u64, expected: u64 },
    #[error(
        "no changes are staged: stage some with `garage layout assign`, `remove` or `config` first"
    )]
    NothingStaged,
    #[error("{0}")]
    Class(String),
    #[error("cannot decode the cluster layout: {0}")]
    Decode(String),
    #[error("cluster layout file {0}")]
    Io(String),
}

#[cfg(test)]
mod history_tests;
#[cfg(test)]
mod tests;
