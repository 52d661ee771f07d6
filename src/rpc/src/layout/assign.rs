//! Optimal assignment of partitions to storage nodes.
//!
//! Given storage nodes (zone, capacity), a replication factor `R` and a zone
//! redundancy `Z`, every partition gets `R` distinct nodes spanning at least
//! `Z` distinct zones. The *partition size* `s` is the largest value such
//! that every node `n` holds at most `floor(capacity(n) / s)` partitions:
//! it is the amount of data each partition may hold, so maximising it
//! maximises the usable capacity of the cluster. Among the assignments that
//! reach that size, the one that moves the fewest (partition, node) pairs
//! away from the previous assignment is chosen.
//!
//! Both steps are flows in one network:
//!
//! ```text
//! source ──R──> p ──Z──> p_up ──1──> (p, zone) ──1──> node ──floor(cap/s)──> sink
//!                └─R-Z─> p_down ─R-Z─┘
//! ```
//!
//! A flow of value `P·R` (every partition gets `R` units) is exactly a valid
//! assignment: each node receives at most one unit per partition, and the
//! `Z` units through `p_up` reach `Z` different zones (one unit per zone at
//! most), so the partition spans at least `Z` zones; conversely any valid
//! assignment routes one unit to each of `Z` distinct zones through `p_up`
//! and the rest through `p_down`. Feasibility is monotonic in `s`, so the
//! largest `s` is found by binary search over max-flow checks. Then, at that
//! `s`, a minimum-cost maximum flow where an edge `(p, zone) -> node` costs
//! `MOVE_COST` unless the node held `p` before gives the fewest moves.
//!
//! Third, among assignments with that size and that number of moves, load
//! is spread in proportion to capacity: in the final flow the edge
//! `node -> sink` is split into unit edges whose cost grows with the number
//! of partitions already on the node (`k * BALANCE_SCALE / slots`), a convex
//! cost whose minimum fills nodes in proportion to their slots. The whole
//! balance cost of a layout is below `MOVE_COST`, so balance never buys a
//! move.

use std::collections::BTreeMap;

use super::flow::{EdgeId, FlowGraph};

/// A storage node as the assignment sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub zone: String,
    /// In any unit (bytes in practice); must be at least 1.
    pub capacity: u64,
}

/// What to compute.
#[derive(Clone, Debug)]
pub struct AssignInput<'a> {
    pub nodes: &'a [NodeSpec],
    pub replication_factor: usize,
    /// Minimum number of distinct zones per partition; `None` means as many
    /// as possible: `min(replication_factor, number of zones)`.
    pub zone_redundancy: Option<usize>,
    /// Erasure-code placement instead: at most this many of a partition's
    /// nodes in any one zone (`zone_redundancy` is then ignored).
    pub max_per_zone: Option<usize>,
    pub partitions: usize,
    /// The previous assignment, as indices into `nodes` (nodes that left
    /// have no index and are simply not listed).
    pub previous: Option<&'a [Vec<usize>]>,
}

/// The result: for each partition, its nodes (indices into the input,
/// sorted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub partition_size: u64,
    pub zone_redundancy: usize,
    pub partitions: Vec<Vec<usize>>,
    /// (partition, node) pairs that are new compared with `previous` (all
    /// of them when there is no previous assignment).
    pub moved: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    #[error("no storage nodes: assign a capacity to at least {0} node(s)")]
    NoStorageNodes(usize),
    #[error("replication factor {needed} needs at least {needed} storage nodes, but the layout has {have}")]
    NotEnoughNodes { needed: usize, have: usize },
    #[error("zone redundancy {wanted} needs at least {wanted} zones with storage nodes, but the layout has {have}")]
    NotEnoughZones { wanted: usize, have: usize },
    #[error("zone redundancy {wanted} is more than the replication factor {replication}")]
    ZoneRedundancyTooHigh { wanted: usize, replication: usize },
    #[error("node {0} has capacity 0: give it a capacity, or make it a gateway")]
    ZeroCapacity(usize),
    #[error(
        "capacities are too small to store {replicas} partition copies (sum of capacities {total})"
    )]
    CapacityTooSmall { replicas: u64, total: u64 },
    #[error("replication factor must be at least 1")]
    ZeroReplication,
    #[error("{shards} shards with at most {per_zone} per zone need more zones or nodes: the zones can hold only {fit} (zones with their storage node counts: {zones})")]
    ZonesTooFew {
        shards: usize,
        per_zone: usize,
        fit: usize,
        zones: String,
    },
}

/// Cost unit of balance (see the module documentation).
const BALANCE_SCALE: i64 = 1 << 20;

struct Network {
    graph: FlowGraph,
    source: usize,
    sink: usize,
    /// For each partition, the edges `(p, zone) -> node` with their node.
    node_edges: Vec<Vec<(EdgeId, usize)>>,
}

/// How the network is built: plain capacities for feasibility checks, or
/// with the costs of the final pass.
#[derive(Clone, Copy)]
enum Pass<'a> {
    Feasibility,
    Final {
        previous: Option<&'a [Vec<usize>]>,
        move_cost: i64,
    },
}

/// Builds the network for partition size `s`. Replicas: `z` units go
/// through `p_up` to distinct zones (`zone_cap` = 1); erasure shards: all
/// `r` units go through `p_up` (`z` = `r`), at most `zone_cap` per zone.
fn build(
    input: &AssignInput,
    zones: &[Vec<usize>],
    (z, zone_cap): (usize, usize),
    s: u64,
    pass: Pass,
) -> Network {
    let p_count = input.partitions;
    let r = input.replication_factor;
    let nz = zones.len();
    let nn = input.nodes.len();
    // Vertex numbering.
    let source = 0;
    let sink = 1;
    let p_vertex = |p: usize| 2 + p;
    let up = |p: usize| 2 + p_count + p;
    let down = |p: usize| 2 + 2 * p_count + p;
    let pz = |p: usize, zi: usize| 2 + 3 * p_count + p * nz + zi;
    let node_v = |n: usize| 2 + 3 * p_count + p_count * nz + n;
    let mut graph = FlowGraph::new(2 + 3 * p_count + p_count * nz + nn);
    let mut node_edges = Vec::with_capacity(p_count);
    for p in 0..p_count {
        graph.add_edge(source, p_vertex(p), r as u64, 0);
        graph.add_edge(p_vertex(p), up(p), z as u64, 0);
        if r > z {
            graph.add_edge(p_vertex(p), down(p), (r - z) as u64, 0);
        }
        let (previous, move_cost) = match pass {
            Pass::Feasibility => (None, 0),
            Pass::Final {
                previous,
                move_cost,
            } => (previous, move_cost),
        };
        let old: &[usize] = previous.and_then(|prev| prev.get(p)).map_or(&[], |v| v);
        let mut edges = Vec::new();
        for (zi, members) in zones.iter().enumerate() {
            graph.add_edge(up(p), pz(p, zi), zone_cap as u64, 0);
            if r > z {
                graph.add_edge(down(p), pz(p, zi), (r - z) as u64, 0);
            }
            for &n in members {
                let cost = if old.contains(&n) { 0 } else { move_cost };
                edges.push((graph.add_edge(pz(p, zi), node_v(n), 1, cost), n));
            }
        }
        node_edges.push(edges);
    }
    for (n, spec) in input.nodes.iter().enumerate() {
        let slots = (spec.capacity / s).min(p_count as u64);
        match pass {
            Pass::Feasibility => {
                graph.add_edge(node_v(n), sink, slots, 0);
            }
            Pass::Final { .. } => {
                for k in 1..=slots {
                    let cost = (k as i64 * BALANCE_SCALE) / slots as i64;
                    graph.add_edge(node_v(n), sink, 1, cost);
                }
            }
        }
    }
    Network {
        graph,
        source,
        sink,
        node_edges,
    }
}

/// The zone redundancy asked for replicas, checked.
fn zone_redundancy(input: &AssignInput, zones: usize) -> Result<usize, AssignError> {
    let r = input.replication_factor;
    Ok(match input.zone_redundancy {
        None => r.min(zones),
        Some(z) if z > r => {
            return Err(AssignError::ZoneRedundancyTooHigh {
                wanted: z,
                replication: r,
            })
        }
        Some(z) if z > zones => {
            return Err(AssignError::NotEnoughZones {
                wanted: z,
                have: zones,
            })
        }
        Some(z) => z.max(1),
    })
}

/// Computes the optimal assignment (see the module documentation).
pub fn compute(input: &AssignInput) -> Result<Assignment, AssignError> {
    let r = input.replication_factor;
    if r == 0 {
        return Err(AssignError::ZeroReplication);
    }
    if input.nodes.is_empty() {
        return Err(AssignError::NoStorageNodes(r));
    }
    // (Erasure shards: the per-zone check below says more.)
    if input.nodes.len() < r && input.max_per_zone.is_none() {
        return Err(AssignError::NotEnoughNodes {
            needed: r,
            have: input.nodes.len(),
        });
    }
    if let Some(i) = input.nodes.iter().position(|n| n.capacity == 0) {
        return Err(AssignError::ZeroCapacity(i));
    }
    let mut by_zone: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, n) in input.nodes.iter().enumerate() {
        by_zone.entry(n.zone.as_str()).or_default().push(i);
    }
    let zones: Vec<Vec<usize>> = by_zone.values().cloned().collect();
    let (z, zone_cap) = match input.max_per_zone {
        Some(cap) => {
            let cap = cap.max(1);
            let fit: usize = zones.iter().map(|m| m.len().min(cap)).sum();
            if fit < r {
                return Err(AssignError::ZonesTooFew {
                    shards: r,
                    per_zone: cap,
                    fit,
                    zones: by_zone
                        .iter()
                        .map(|(z, m)| format!("{z}: {}", m.len()))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            (r, cap)
        }
        None => (zone_redundancy(input, zones.len())?, 1),
    };
    let zr = (z, zone_cap);
    // Reported: the fewest zones a partition spans.
    let z = if input.max_per_zone.is_some() {
        r.div_ceil(zone_cap)
    } else {
        z
    };

    let needed = (input.partitions * r) as u64;
    let feasible = |s: u64| {
        let mut net = build(input, &zones, zr, s, Pass::Feasibility);
        net.graph.max_flow(net.source, net.sink) == needed
    };
    let total: u64 = input.nodes.iter().map(|n| n.capacity).sum();
    if needed == 0 {
        return Ok(Assignment {
            partition_size: total,
            zone_redundancy: z,
            partitions: vec![],
            moved: 0,
        });
    }
    // Feasibility only changes where some node's slot count floor(cap/s)
    // changes, so the largest feasible s is one of the values
    // floor(cap/k), k = 1..=P. Binary search over those candidates (at most
    // total/needed: s * needed <= total is necessary).
    let limit = total / needed;
    let mut candidates: Vec<u64> = input
        .nodes
        .iter()
        .flat_map(|n| (1..=input.partitions as u64).map(move |k| n.capacity / k))
        .filter(|&s| s >= 1 && s <= limit)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    if candidates.is_empty() || !feasible(candidates[0]) {
        return Err(AssignError::CapacityTooSmall {
            replicas: needed,
            total,
        });
    }
    // Invariant: candidates[lo] is feasible; everything above hi is not.
    let (mut lo, mut hi) = (0, candidates.len() - 1);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if feasible(candidates[mid]) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let s = candidates[lo];

    // Each unit's balance cost is at most BALANCE_SCALE, so the balance cost
    // of a whole layout is below this.
    let move_cost = needed as i64 * BALANCE_SCALE + 1;
    let mut net = build(
        input,
        &zones,
        zr,
        s,
        Pass::Final {
            previous: input.previous,
            move_cost,
        },
    );
    let (flow, cost) = net.graph.min_cost_max_flow(net.source, net.sink);
    assert_eq!(
        flow, needed,
        "a feasible partition size must give a full flow"
    );
    let partitions: Vec<Vec<usize>> = net
        .node_edges
        .iter()
        .map(|edges| {
            let mut nodes: Vec<usize> = edges
                .iter()
                .filter(|(e, _)| net.graph.flow(*e) > 0)
                .map(|(_, n)| *n)
                .collect();
            nodes.sort_unstable();
            nodes
        })
        .collect();
    // Without a previous assignment every pair counts as new.
    let moved = (cost / move_cost) as usize;
    Ok(Assignment {
        partition_size: s,
        zone_redundancy: z,
        partitions,
        moved,
    })
}
