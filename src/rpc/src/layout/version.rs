//! One version of the cluster layout: node roles and the partition
//! assignment computed from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assign::{self, AssignInput, NodeSpec};
use super::classes::{self, ClassSpec, EcCode};
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
    /// Erasure-coded storage classes as configured; `STANDARD_IA` is
    /// `auto` unless set (see [`classes::resolve`]).
    #[serde(default)]
    pub storage_classes: BTreeMap<String, ClassSpec>,
}

impl Default for LayoutParameters {
    fn default() -> Self {
        Self {
            zone_redundancy: ZoneRedundancy::Maximum,
            storage_classes: BTreeMap::new(),
        }
    }
}

/// Where the shards of blocks stored with `code` go: for each partition,
/// `code.shards()` storage nodes (indices into `storage_nodes`), shard `i`
/// on the `i`-th; at most `code.parity` of them in one zone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcRing {
    pub code: EcCode,
    pub ring: Vec<Vec<u16>>,
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
    /// Erasure-coded classes offered by this version, by S3 name.
    #[serde(default)]
    pub classes: BTreeMap<String, EcCode>,
    /// Shard placement of every code offered now or by an earlier version
    /// (blocks stored with a code stay readable after their class changes).
    #[serde(default)]
    pub ec_rings: Vec<EcRing>,
}

/// What applying staged changes would do, for `layout show` and `apply`.
#[derive(Clone, Debug)]
pub struct ChangeReport {
    pub zone_redundancy: usize,
    pub partition_size: u64,
    /// (partition, node) copies that land on a node that did not hold them.
    pub moved: usize,
    /// Erasure-coded classes offered, by name.
    pub classes: BTreeMap<String, EcCode>,
    /// (partition, shard) pairs of each code that land on another node.
    pub shards_moved: BTreeMap<EcCode, usize>,
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
            classes: BTreeMap::new(),
            ec_rings: Vec::new(),
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

    /// The code of erasure-coded class `name`, if this version offers it.
    pub fn class_code(&self, name: &str) -> Option<EcCode> {
        self.classes.get(name).copied()
    }

    /// The nodes of `partition`'s shards for `code`, shard `i` on the
    /// `i`-th; `None` if this version has no placement for the code.
    pub fn shard_nodes(&self, code: EcCode, partition: usize) -> Option<Vec<NodeId>> {
        let ring = self.ec_rings.iter().find(|r| r.code == code)?;
        let p = ring.ring.get(partition)?;
        Some(p.iter().map(|&i| self.storage_nodes[i as usize]).collect())
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
            max_per_zone: None,
            partitions: PARTITIONS,
            previous: if previous.is_empty() {
                None
            } else {
                Some(&previous)
            },
        })?;
        let mut zone_sizes: BTreeMap<&str, usize> = BTreeMap::new();
        for spec in specs.iter() {
            *zone_sizes.entry(spec.zone.as_str()).or_default() += 1;
        }
        let zone_sizes: Vec<usize> = zone_sizes.into_values().collect();
        let classes = classes::resolve(&parameters.storage_classes, &zone_sizes, &self.classes);
        let mut codes: Vec<EcCode> = self.ec_rings.iter().map(|r| r.code).collect();
        codes.extend(classes.values().copied());
        codes.sort();
        codes.dedup();
        let mut ec_rings = Vec::new();
        let mut shards_moved = BTreeMap::new();
        for code in codes {
            let previous: Option<Vec<Vec<Option<usize>>>> =
                self.ec_rings.iter().find(|r| r.code == code).map(|r| {
                    r.ring
                        .iter()
                        .map(|p| {
                            p.iter()
                                .map(|&i| {
                                    let id = self.storage_nodes[i as usize];
                                    storage_nodes.iter().position(|n| *n == id)
                                })
                                .collect()
                        })
                        .collect()
                });
            let (ring, moved) = ec_ring(&specs, code, previous.as_deref()).map_err(|e| {
                let users: Vec<&str> = classes
                    .iter()
                    .filter(|(_, c)| **c == code)
                    .map(|(n, _)| n.as_str())
                    .collect();
                let what = if users.is_empty() {
                    format!("blocks stored with erasure code {code} by an earlier layout")
                } else {
                    format!("storage class {} (erasure code {code})", users.join(", "))
                };
                LayoutError::Class(format!("{what} cannot be placed on the new layout: {e}"))
            })?;
            shards_moved.insert(code, moved);
            ec_rings.push(EcRing { code, ring });
        }
        let report = ChangeReport {
            zone_redundancy: a.zone_redundancy,
            partition_size: a.partition_size,
            moved: a.moved,
            classes: classes.clone(),
            shards_moved,
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
            classes,
            ec_rings,
        };
        Ok((next, report))
    }
}

/// The shard placement of `code` over `specs` (at most `parity` shards in a
/// zone), keeping each shard on its node where the node still holds a shard
/// of the partition (`previous`: the old placement as indices into
/// `specs`, `None` for a node that left). Returns the ring and the number
/// of (partition, shard) pairs that moved.
fn ec_ring(
    specs: &[NodeSpec],
    code: EcCode,
    previous: Option<&[Vec<Option<usize>>]>,
) -> Result<(Vec<Vec<u16>>, usize), assign::AssignError> {
    let previous_sets: Option<Vec<Vec<usize>>> = previous.map(|prev| {
        prev.iter()
            .map(|p| p.iter().flatten().copied().collect())
            .collect()
    });
    let a = assign::compute(&AssignInput {
        nodes: specs,
        replication_factor: code.shards(),
        zone_redundancy: None,
        max_per_zone: Some(code.parity()),
        partitions: PARTITIONS,
        previous: previous_sets.as_deref(),
    })?;
    let mut moved = 0;
    let ring = a
        .partitions
        .iter()
        .enumerate()
        .map(|(p, nodes)| {
            let old: &[Option<usize>] = previous.and_then(|prev| prev.get(p)).map_or(&[], |v| v);
            let mut slots: Vec<Option<usize>> = vec![None; code.shards()];
            // A node that keeps a shard of the partition keeps its index.
            for (i, o) in old.iter().enumerate().take(code.shards()) {
                if let Some(n) = o {
                    if nodes.contains(n) {
                        slots[i] = Some(*n);
                    }
                }
            }
            let kept: Vec<usize> = slots.iter().flatten().copied().collect();
            let mut newcomers = nodes.iter().filter(|n| !kept.contains(n));
            for slot in slots.iter_mut() {
                if slot.is_none() {
                    *slot = newcomers.next().copied();
                    moved += 1;
                }
            }
            slots
                .into_iter()
                .map(|n| n.expect("the assignment gives every partition one node per shard") as u16)
                .collect()
        })
        .collect();
    Ok((ring, moved))
}
