//! One version of the cluster layout: node roles and the partition
//! assignment computed from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assign::{self, AssignInput, NodeSpec};
use super::{LayoutError, NodeId, PARTITIONS};

/// What a node is in the layout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeRole {
    pub zone: String,
    /// Storage capacity in bytes; `None` for a gateway, which stores
    /// nothing and only routes requests.
    pub capacity: Option<u64>,
    pub tags: Vec<String>,
}

/// How many distinct zones each partition must span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ZoneRedundancy {
    /// As many as possible: min(replication factor, number of zones).
    Maximum,
    AtLeast(usize),
}

impl std::fmt::Display for ZoneRedundancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZoneRedundancy::Maximum => f.write_str("maximum"),
            ZoneRedundancy::AtLeast(n) => write!(f, "{n}"),
        }
    }
}

impl std::str::FromStr for ZoneRedundancy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "max" | "maximum" => Ok(ZoneRedundancy::Maximum),
            n => match n.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(ZoneRedundancy::AtLeast(n)),
                _ => Err(format!(
                    "invalid zone redundancy {s:?}: give a number of zones (1 or more) or \"maximum\""
                )),
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LayoutParameters {
    pub zone_redundancy: ZoneRedundancy,
}

impl Default for LayoutParameters {
    fn default() -> Self {
        Self {
            zone_redundancy: ZoneRedundancy::Maximum,
        }
    }
}

/// An applied layout version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutVersion {
    pub version: u64,
    pub replication_factor: usize,
    pub parameters: LayoutParameters,
    /// Bytes each partition may hold (0 while there are no storage nodes).
    pub partition_size: u64,
    /// Every node with a role, storage or gateway.
    pub roles: BTreeMap<NodeId, NodeRole>,
    /// Storage nodes; `ring` entries are indices into this list.
    pub storage_nodes: Vec<NodeId>,
    /// For each of the [`PARTITIONS`] partitions, the indices of its
    /// `replication_factor` nodes (empty when there are no storage nodes).
    pub ring: Vec<Vec<u16>>,
}

/// What applying staged changes would do, for `layout show` and `apply`.
#[derive(Clone, Debug)]
pub struct ChangeReport {
    pub zone_redundancy: usize,
    pub partition_size: u64,
    /// (partition, node) copies that land on a node that did not hold them.
    pub moved: usize,
}

impl LayoutVersion {
    /// Version 0: no roles yet.
    pub fn initial(replication_factor: usize) -> Self {
        Self {
            version: 0,
            replication_factor,
            parameters: LayoutParameters::default(),
            partition_size: 0,
            roles: BTreeMap::new(),
            storage_nodes: Vec::new(),
            ring: Vec::new(),
        }
    }

    /// The partition of a key from the first byte of its hash.
    pub fn partition_of(hash: &[u8]) -> usize {
        hash.first().copied().unwrap_or(0) as usize
    }

    /// The nodes storing `partition`, in ring order.
    pub fn nodes_of(&self, partition: usize) -> Vec<NodeId> {
        self.ring
            .get(partition)
            .map(|p| p.iter().map(|&i| self.storage_nodes[i as usize]).collect())
            .unwrap_or_default()
    }

    /// Number of partitions each storage node holds.
    pub fn partitions_per_node(&self) -> BTreeMap<NodeId, usize> {
        let mut count: BTreeMap<NodeId, usize> =
            self.storage_nodes.iter().map(|n| (*n, 0)).collect();
        for p in self.ring.iter() {
            for &i in p {
                *count.entry(self.storage_nodes[i as usize]).or_default() += 1;
            }
        }
        count
    }

    /// Computes the next version from `roles` and `parameters`, keeping as
    /// many partitions in place as the optimal assignment allows.
    pub fn next(
        &self,
        roles: BTreeMap<NodeId, NodeRole>,
        parameters: LayoutParameters,
    ) -> Result<(LayoutVersion, ChangeReport), LayoutError> {
        let storage_nodes: Vec<NodeId> = roles
            .iter()
            .filter(|(_, r)| r.capacity.is_some())
            .map(|(id, _)| *id)
            .collect();
        let specs: Vec<NodeSpec> = storage_nodes
            .iter()
            .map(|id| {
                let r = &roles[id];
                NodeSpec {
                    zone: r.zone.clone(),
                    capacity: r.capacity.unwrap_or(0),
                }
            })
            .collect();
        // The previous assignment in terms of the new node indices.
        let previous: Vec<Vec<usize>> = (0..self.ring.len())
            .map(|p| {
                self.nodes_of(p)
                    .iter()
                    .filter_map(|id| storage_nodes.iter().position(|n| n == id))
                    .collect()
            })
            .collect();
        let zone_redundancy = match parameters.zone_redundancy {
            ZoneRedundancy::Maximum => None,
            ZoneRedundancy::AtLeast(n) => Some(n),
        };
        let a = assign::compute(&AssignInput {
            nodes: &specs,
            replication_factor: self.replication_factor,
            zone_redundancy,
            partitions: PARTITIONS,
            previous: if previous.is_empty() {
                None
            } else {
                Some(&previous)
            },
        })?;
        let report = ChangeReport {
            zone_redundancy: a.zone_redundancy,
            partition_size: a.partition_size,
            moved: a.moved,
        };
        let next = LayoutVersion {
            version: self.version + 1,
            replication_factor: self.replication_factor,
            parameters,
            partition_size: a.partition_size,
            roles,
            storage_nodes,
            ring: a
                .partitions
                .into_iter()
                .map(|p| p.into_iter().map(|i| i as u16).collect())
                .collect(),
        };
        Ok((next, report))
    }
}
