//! Property tests of the assignment: structure on random clusters, and
//! optimality (partition size, then moves) against brute force on small
//! ones.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn effective_z(nodes: &[NodeSpec], r: usize) -> usize {
    let zones: BTreeSet<&str> = nodes.iter().map(|n| n.zone.as_str()).collect();
    r.min(zones.len())
}

/// Checks what every assignment must satisfy.
fn check_structure(nodes: &[NodeSpec], r: usize, p: usize, a: &Assignment) {
    assert_eq!(a.partitions.len(), p);
    let z = effective_z(nodes, r);
    assert_eq!(a.zone_redundancy, z);
    let mut count = vec![0u64; nodes.len()];
    for (i, part) in a.partitions.iter().enumerate() {
        let distinct: BTreeSet<usize> = part.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            r,
            "partition {i}: {part:?} has not {r} distinct nodes"
        );
        let zones: BTreeSet<&str> = part.iter().map(|&n| nodes[n].zone.as_str()).collect();
        assert!(
            zones.len() >= z,
            "partition {i} spans {} zones < {z}",
            zones.len()
        );
        for &n in part {
            count[n] += 1;
        }
    }
    assert!(a.partition_size >= 1);
    for (n, c) in count.iter().enumerate() {
        assert!(
            c * a.partition_size <= nodes[n].capacity,
            "node {n} holds {c} partitions of size {} > capacity {}",
            a.partition_size,
            nodes[n].capacity
        );
    }
}

/// All valid assignments of `p` partitions; returns the best partition size
/// and, among assignments reaching it, the fewest moves from `previous`.
fn brute_force(
    nodes: &[NodeSpec],
    r: usize,
    p: usize,
    previous: Option<&[Vec<usize>]>,
) -> Option<(u64, usize)> {
    let z = effective_z(nodes, r);
    let n = nodes.len();
    let mut sets: Vec<Vec<usize>> = Vec::new();
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != r {
            continue;
        }
        let set: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let zones: BTreeSet<&str> = set.iter().map(|&i| nodes[i].zone.as_str()).collect();
        if zones.len() >= z {
            sets.push(set);
        }
    }
    if sets.is_empty() {
        return None;
    }
    let mut best: Option<(u64, usize)> = None;
    let mut choice = vec![0usize; p];
    loop {
        let mut count = vec![0u64; n];
        let mut moves = 0;
        for (pi, &c) in choice.iter().enumerate() {
            for &node in &sets[c] {
                count[node] += 1;
                let old = previous.and_then(|prev| prev.get(pi));
                if !old.is_some_and(|o| o.contains(&node)) {
                    moves += 1;
                }
            }
        }
        let s = (0..n)
            .filter(|&i| count[i] > 0)
            .map(|i| nodes[i].capacity / count[i])
            .min()
            .unwrap();
        if s > 0 {
            best = match best {
                None => Some((s, moves)),
                Some((bs, bm)) if s > bs || (s == bs && moves < bm) => Some((s, moves)),
                b => b,
            };
        }
        // Next combination.
        let mut i = 0;
        loop {
            if i == p {
                return best;
            }
            choice[i] += 1;
            if choice[i] < sets.len() {
                break;
            }
            choice[i] = 0;
            i += 1;
        }
    }
}

fn node(zone: u8, capacity: u64) -> NodeSpec {
    NodeSpec {
        zone: format!("z{zone}"),
        capacity,
    }
}

fn run(
    nodes: &[NodeSpec],
    r: usize,
    p: usize,
    previous: Option<&[Vec<usize>]>,
) -> Result<Assignment, AssignError> {
    compute(&AssignInput {
        nodes,
        replication_factor: r,
        zone_redundancy: None,
        max_per_zone: None,
        partitions: p,
        previous,
    })
}

/// A small cluster and a one-node change of it.
#[derive(Clone, Debug)]
enum Change {
    Add(u8, u64),
    Remove(usize),
    Capacity(usize, u64),
    Zone(usize, u8),
}

fn small_cluster() -> impl Strategy<Value = (Vec<NodeSpec>, usize, usize)> {
    (
        proptest::collection::vec((0u8..3, 1u64..60), 1..=5),
        1usize..=3,
        2usize..=3,
    )
        .prop_map(|(ns, r, p)| (ns.into_iter().map(|(z, c)| node(z, c)).collect(), r, p))
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (0u8..3, 1u64..60).prop_map(|(z, c)| Change::Add(z, c)),
        (0usize..5).prop_map(Change::Remove),
        (0usize..5, 1u64..60).prop_map(|(i, c)| Change::Capacity(i, c)),
        (0usize..5, 0u8..3).prop_map(|(i, z)| Change::Zone(i, z)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// On small clusters the partition size is the brute-force optimum, and
    /// an impossible cluster is reported as such.
    #[test]
    fn partition_size_is_optimal((nodes, r, p) in small_cluster()) {
        let got = run(&nodes, r, p, None);
        match brute_force(&nodes, r, p, None) {
            None => prop_assert!(got.is_err(), "brute force found nothing, got {got:?}"),
            Some((best_s, _)) => {
                let a = got.unwrap();
                check_structure(&nodes, r, p, &a);
                prop_assert_eq!(a.partition_size, best_s);
            }
        }
    }

    /// After a one-node change, the new layout keeps the optimal size and
    /// moves as few (partition, node) pairs as brute force can.
    #[test]
    fn moves_are_minimal_after_one_change((nodes, r, p) in small_cluster(), ch in change()) {
        let Ok(first) = run(&nodes, r, p, None) else { return Ok(()) };
        // Apply the change, keeping track of node identities.
        let mut ids: Vec<usize> = (0..nodes.len()).collect();
        let mut next = nodes.clone();
        match ch {
            Change::Add(z, c) => { next.push(node(z, c)); ids.push(usize::MAX); }
            Change::Remove(i) => { if i >= next.len() { return Ok(()) } next.remove(i); ids.remove(i); }
            Change::Capacity(i, c) => { if i >= next.len() { return Ok(()) } next[i].capacity = c; }
            Change::Zone(i, z) => { if i >= next.len() { return Ok(()) } next[i].zone = format!("z{z}"); }
        }
        if next.is_empty() { return Ok(()) }
        let previous: Vec<Vec<usize>> = first
            .partitions
            .iter()
            .map(|part| part.iter().filter_map(|old| ids.iter().position(|id| id == old)).collect())
            .collect();
        let got = run(&next, r, p, Some(&previous));
        match brute_force(&next, r, p, Some(&previous)) {
            None => prop_assert!(got.is_err()),
            Some((best_s, best_moves)) => {
                let a = got.unwrap();
                check_structure(&next, r, p, &a);
                prop_assert_eq!(a.partition_size, best_s);
                prop_assert_eq!(a.moved, best_moves);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random real-sized clusters: 1-60 nodes, 1-6 zones, 256 partitions,
    /// replication 1-5.
    #[test]
    fn structure_holds_on_random_clusters(
        ns in proptest::collection::vec((0u8..6, 1u64..2000), 1..=60),
        r in 1usize..=5,
    ) {
        let nodes: Vec<NodeSpec> = ns.into_iter().map(|(z, c)| node(z, c * 1_000_000_000)).collect();
        match run(&nodes, r, PARTITIONS, None) {
            Ok(a) => check_structure(&nodes, r, PARTITIONS, &a),
            Err(AssignError::NotEnoughNodes { .. }) => prop_assert!(nodes.len() < r),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

fn load(a: &Assignment, nodes: usize) -> Vec<usize> {
    (0..nodes)
        .map(|i| a.partitions.iter().filter(|p| p.contains(&i)).count())
        .collect()
}

#[test]
fn load_follows_capacity_within_a_zone() {
    // One zone, replication 1: 256 partitions over capacities 1:2:5.
    let nodes = vec![node(0, 1000), node(0, 2000), node(0, 5000)];
    let a = run(&nodes, 1, PARTITIONS, None).unwrap();
    let l = load(&a, 3);
    assert_eq!(l.iter().sum::<usize>(), 256);
    for (n, expect) in [(0, 32.0), (1, 64.0), (2, 160.0)] {
        assert!((l[n] as f64 - expect).abs() <= 2.0, "{l:?}");
    }
}

#[test]
fn three_equal_zones_get_one_copy_each() {
    let nodes = vec![node(0, 1000), node(1, 1000), node(2, 1000)];
    let a = run(&nodes, 3, PARTITIONS, None).unwrap();
    check_structure(&nodes, 3, PARTITIONS, &a);
    assert!(a.partitions.iter().all(|p| p == &vec![0, 1, 2]));
    assert_eq!(a.partition_size, 1000 / 256);
    assert_eq!(a.moved, 3 * PARTITIONS);
}

#[test]
fn adding_a_node_to_a_zone_moves_only_what_balances_it() {
    // Replication 3 over 3 zones: each zone holds one copy of every
    // partition. Zone 0 (two nodes) limits the partition size to
    // 1000/128 = 7; zone 1 (three nodes) would allow 1000/86 = 11.
    let nodes = vec![
        node(0, 1000),
        node(0, 1000),
        node(1, 1000),
        node(1, 1000),
        node(1, 1000),
        node(2, 5000),
    ];
    let first = run(&nodes, 3, PARTITIONS, None).unwrap();
    check_structure(&nodes, 3, PARTITIONS, &first);
    assert_eq!(first.partition_size, 7);
    // Load is spread evenly over equal nodes of a zone.
    assert_eq!(load(&first, 7), vec![128, 128, 86, 85, 85, 256, 0]);
    // Same cluster again: nothing moves.
    let again = run(&nodes, 3, PARTITIONS, Some(&first.partitions)).unwrap();
    assert_eq!(again.moved, 0);
    assert_eq!(again.partitions, first.partitions);
    // Adding to zone 1, which is not the bottleneck, changes nothing.
    let mut more = nodes.clone();
    more.push(node(1, 1000));
    let same = run(&more, 3, PARTITIONS, Some(&first.partitions)).unwrap();
    assert_eq!((same.partition_size, same.moved), (7, 0));
    // A third node in zone 0 lifts the size to 11: each old zone-0 node
    // must drop to floor(1000/11) = 90 partitions, so at least 2 * 38 = 76
    // move to the new node, and nothing else moves.
    let mut more = nodes.clone();
    more.push(node(0, 1000));
    let next = run(&more, 3, PARTITIONS, Some(&first.partitions)).unwrap();
    check_structure(&more, 3, PARTITIONS, &next);
    assert_eq!(next.partition_size, 11);
    assert_eq!(load(&next, 7), vec![90, 90, 86, 85, 85, 256, 76]);
    let on_new = next.partitions.iter().filter(|p| p.contains(&6)).count();
    let new_pairs: usize = next
        .partitions
        .iter()
        .zip(first.partitions.iter())
        .map(|(n, o)| n.iter().filter(|x| !o.contains(x)).count())
        .sum();
    assert_eq!(next.moved, new_pairs);
    assert_eq!(next.moved, on_new);
    assert_eq!(on_new, 76);
}

#[test]
fn impossible_layouts_are_explained() {
    let e = run(&[node(0, 10)], 3, PARTITIONS, None).unwrap_err();
    assert!(matches!(
        e,
        AssignError::NotEnoughNodes { needed: 3, have: 1 }
    ));
    assert!(e.to_string().contains("at least 3 storage nodes"));
    let nodes = [node(0, 10), node(0, 10), node(1, 10)];
    let e = compute(&AssignInput {
        nodes: &nodes,
        replication_factor: 3,
        zone_redundancy: Some(3),
        max_per_zone: None,
        partitions: PARTITIONS,
        previous: None,
    })
    .unwrap_err();
    assert!(matches!(
        e,
        AssignError::NotEnoughZones { wanted: 3, have: 2 }
    ));
    let e = run(&[node(0, 1), node(1, 1)], 2, PARTITIONS, None).unwrap_err();
    assert!(matches!(e, AssignError::CapacityTooSmall { .. }));
    let e = run(&[node(0, 0)], 1, PARTITIONS, None).unwrap_err();
    assert!(matches!(e, AssignError::ZeroCapacity(0)));
}
