//! One version of the cluster layout: node roles and the partition
//! assignment computed from them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::assign::{self, AssignInput, NodeSpec};
use super::classes::{self, ClassDef, ClassSpec, EcCode, Placement, RedundancySpec, Survival};
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
    /// Storage classes with a place (`garage layout class`): zones and
    /// redundancy of their own. A name here is not in `storage_classes`.
    /// Older releases do not know them: set only once the cluster is
    /// finalized at the release of the `placement-classes` feature.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub class_defs: BTreeMap<String, ClassDef>,
}

impl Default for LayoutParameters {
    fn default() -> Self {
        Self {
            zone_redundancy: ZoneRedundancy::Maximum,
            storage_classes: BTreeMap::new(),
            class_defs: BTreeMap::new(),
        }
    }
}

/// Where the shards of blocks stored with a placement go: for each
/// partition, `code.shards()` storage nodes (indices into
/// `storage_nodes`), shard `i` on the `i`-th. For the classes of every
/// zone (scope 0), at most `code.parity` of them in one zone; for a placed
/// class, only nodes of its zones, at most `max_per_zone` in one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcRing {
    pub code: EcCode,
    pub ring: Vec<Vec<u16>>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scope: u32,
    /// The zones of a placed class's ring; empty: every zone.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub zones: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_zone: Option<u8>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl EcRing {
    pub fn placement(&self) -> Placement {
        Placement::new(self.code, self.scope)
    }

    /// Most shards of a partition in one zone.
    pub fn per_zone(&self) -> usize {
        self.max_per_zone
            .map(usize::from)
            .unwrap_or(self.code.parity())
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
    /// Erasure-coded classes offered by this version, by S3 name.
    #[serde(default)]
    pub classes: BTreeMap<String, EcCode>,
    /// Shard placement of every code offered now or by an earlier version
    /// (blocks stored with a code stay readable after their class changes).
    #[serde(default)]
    pub ec_rings: Vec<EcRing>,
    /// Classes with a place offered by this version, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub placed: BTreeMap<String, Placement>,
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
    /// Classes with a place offered, by name.
    pub placed: BTreeMap<String, Placement>,
    /// (partition, shard) pairs of each placement that land on another node.
    pub shards_moved: BTreeMap<Placement, usize>,
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
            placed: BTreeMap::new(),
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

    /// The placement of class `name` other than `STANDARD`: an
    /// erasure-coded class of every zone, or a class with a place.
    pub fn class_placement(&self, name: &str) -> Option<Placement> {
        self.placed
            .get(name)
            .copied()
            .or_else(|| self.class_code(name).map(Placement::from))
    }

    /// The ring of `placement`, if this version has one.
    pub fn ring_of(&self, placement: impl Into<Placement>) -> Option<&EcRing> {
        let p = placement.into();
        self.ec_rings.iter().find(|r| r.placement() == p)
    }

    /// The nodes of `partition`'s shards for `placement`, shard `i` on the
    /// `i`-th; `None` if this version has no ring for it.
    pub fn shard_nodes(
        &self,
        placement: impl Into<Placement>,
        partition: usize,
    ) -> Option<Vec<NodeId>> {
        let p = self.ring_of(placement)?.ring.get(partition)?;
        Some(p.iter().map(|&i| self.storage_nodes[i as usize]).collect())
    }

    /// What a placement of this version survives (`None` without a ring).
    pub fn survival(&self, placement: impl Into<Placement>) -> Option<Survival> {
        let ring = self.ring_of(placement)?;
        let zones: BTreeSet<&str> = self
            .roles
            .values()
            .filter(|r| r.capacity.is_some())
            .map(|r| r.zone.as_str())
            .filter(|z| ring.zones.is_empty() || ring.zones.contains(*z))
            .collect();
        Some(Survival::of(ring.code, ring.per_zone(), zones.len()))
    }

    /// The name of every class whose blocks follow `placement`.
    pub fn users_of(&self, placement: Placement) -> Vec<String> {
        Self::users_in(&self.classes, &self.placed, placement)
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
        let mut zone_map: BTreeMap<&str, usize> = BTreeMap::new();
        for spec in specs.iter() {
            *zone_map.entry(spec.zone.as_str()).or_default() += 1;
        }
        let zone_sizes: Vec<usize> = zone_map.values().copied().collect();
        // Classes of every zone, configured with `--storage-class`, but the
        // names a class with a place took.
        let mut legacy: BTreeMap<String, ClassSpec> = parameters
            .storage_classes
            .iter()
            .filter(|(n, _)| !parameters.class_defs.contains_key(*n))
            .map(|(n, c)| (n.clone(), *c))
            .collect();
        if parameters
            .class_defs
            .contains_key(classes::DEFAULT_EC_CLASS)
        {
            legacy.insert(classes::DEFAULT_EC_CLASS.to_string(), ClassSpec::Off);
        }
        let classes = classes::resolve(&legacy, &zone_sizes, &self.classes);
        let placed = place_classes(&parameters.class_defs, &zone_map, &self.placed)?;
        // Every ring: those of earlier versions (blocks stored with them stay
        // where they are found), then the classes of this one.
        let mut rings: BTreeMap<Placement, BTreeSet<String>> = self
            .ec_rings
            .iter()
            .map(|r| (r.placement(), r.zones.clone()))
            .collect();
        for c in classes.values() {
            rings.entry(Placement::from(*c)).or_default();
        }
        for (name, p) in placed.iter() {
            rings.insert(*p, parameters.class_defs[name].zones.clone());
        }
        let mut ec_rings = Vec::new();
        let mut shards_moved = BTreeMap::new();
        for (placement, zones) in rings {
            let code = placement.code();
            // The nodes this ring may use, as indices into `specs`.
            let members: Vec<usize> = (0..specs.len())
                .filter(|i| zones.is_empty() || zones.contains(&specs[*i].zone))
                .collect();
            let sub_specs: Vec<NodeSpec> = members.iter().map(|i| specs[*i].clone()).collect();
            let previous: Option<Vec<Vec<Option<usize>>>> = self.ring_of(placement).map(|r| {
                r.ring
                    .iter()
                    .map(|p| {
                        p.iter()
                            .map(|&i| {
                                let id = self.storage_nodes[i as usize];
                                let n = storage_nodes.iter().position(|n| *n == id)?;
                                members.iter().position(|m| *m == n)
                            })
                            .collect()
                    })
                    .collect()
            });
            let what = || {
                let users = LayoutVersion::users_in(&classes, &placed, placement);
                if users.is_empty() {
                    format!(
                        "blocks stored with {} by an earlier layout",
                        code.describe()
                    )
                } else {
                    format!("storage class {} ({})", users.join(", "), code.describe())
                }
            };
            let per_zone = if placement.scope == 0 {
                code.parity()
            } else {
                let mut sizes: BTreeMap<&str, usize> = BTreeMap::new();
                for s in sub_specs.iter() {
                    *sizes.entry(s.zone.as_str()).or_default() += 1;
                }
                let sizes: Vec<usize> = sizes.into_values().collect();
                classes::spread(code.shards(), &sizes).ok_or_else(|| {
                    LayoutError::Class(format!(
                        "{} cannot be placed on the new layout: it needs {} storage nodes in {}, which have {}",
                        what(),
                        code.shards(),
                        zone_list(&zones),
                        sub_specs.len()
                    ))
                })?
            };
            let (ring, moved) =
                ec_ring(&sub_specs, code, per_zone, previous.as_deref()).map_err(|e| {
                    LayoutError::Class(format!(
                        "{} cannot be placed on the new layout: {e}",
                        what()
                    ))
                })?;
            shards_moved.insert(placement, moved);
            ec_rings.push(EcRing {
                code,
                ring: ring
                    .into_iter()
                    .map(|p| p.into_iter().map(|i| members[i as usize] as u16).collect())
                    .collect(),
                scope: placement.scope,
                zones: if placement.scope == 0 {
                    BTreeSet::new()
                } else {
                    zones
                },
                max_per_zone: (placement.scope != 0).then_some(per_zone as u8),
            });
        }
        let report = ChangeReport {
            zone_redundancy: a.zone_redundancy,
            partition_size: a.partition_size,
            moved: a.moved,
            classes: classes.clone(),
            placed: placed.clone(),
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
            placed,
        };
        Ok((next, report))
    }

    fn users_in(
        classes: &BTreeMap<String, EcCode>,
        placed: &BTreeMap<String, Placement>,
        placement: Placement,
    ) -> Vec<String> {
        classes
            .iter()
            .filter(|(_, c)| placement == Placement::from(**c))
            .map(|(n, _)| n.clone())
            .chain(
                placed
                    .iter()
                    .filter(|(_, p)| **p == placement)
                    .map(|(n, _)| n.clone()),
            )
            .collect()
    }
}

/// `zones a, b`, or `every zone`.
fn zone_list(zones: &BTreeSet<String>) -> String {
    if zones.is_empty() {
        "every zone".into()
    } else {
        format!(
            "zone(s) {}",
            zones.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    }
}

/// The placement of each class with a place, for zones of `zone_map`
/// storage nodes; `previous`: the placements of the version before (an
/// `auto` code stays while it fits).
fn place_classes(
    defs: &BTreeMap<String, ClassDef>,
    zone_map: &BTreeMap<&str, usize>,
    previous: &BTreeMap<String, Placement>,
) -> Result<BTreeMap<String, Placement>, LayoutError> {
    let mut out = BTreeMap::new();
    for (name, def) in defs {
        def.check(name).map_err(LayoutError::Class)?;
        if let Some(z) = def
            .zones
            .iter()
            .find(|z| !zone_map.contains_key(z.as_str()))
        {
            return Err(LayoutError::Class(format!(
                "storage class {name} names zone {z:?}, which has no storage node in the layout (zones: {}): fix the class with `garage layout class {name} --zones ...`, or assign a node to that zone",
                zone_map.keys().copied().collect::<Vec<_>>().join(", ")
            )));
        }
        let sizes: Vec<usize> = zone_map
            .iter()
            .filter(|(z, _)| def.zones.is_empty() || def.zones.contains(**z))
            .map(|(_, n)| *n)
            .collect();
        let code = match def.redundancy {
            RedundancySpec::Copies(n) => {
                EcCode::copies(n as usize).map_err(LayoutError::Class)?
            }
            RedundancySpec::Code(c) => c,
            RedundancySpec::Auto => match previous.get(name) {
                Some(p) if !p.is_replication() && classes::fits(p.code(), &sizes) => p.code(),
                _ => classes::auto_code(&sizes).ok_or_else(|| {
                    LayoutError::Class(format!(
                        "storage class {name}: an automatic erasure code needs 3 zones or more, and the class has {}; give a code (--erasure 2+1) or copies (--replication 2)",
                        sizes.len()
                    ))
                })?,
            },
        };
        let nodes: usize = sizes.iter().sum();
        if nodes < code.shards() {
            return Err(LayoutError::Class(format!(
                "storage class {name} ({}) needs {} storage nodes in its zones, which have {nodes}",
                code.describe(),
                code.shards()
            )));
        }
        out.insert(name.clone(), Placement::new(code, classes::scope_of(name)));
    }
    Ok(out)
}

/// The shard placement of `code` over `specs` (at most `per_zone` shards in
/// a zone), keeping each shard on its node where the node still holds a shard
/// of the partition (`previous`: the old placement as indices into
/// `specs`, `None` for a node that left). Returns the ring and the number
/// of (partition, shard) pairs that moved.
fn ec_ring(
    specs: &[NodeSpec],
    code: EcCode,
    per_zone: usize,
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
        max_per_zone: Some(per_zone),
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
