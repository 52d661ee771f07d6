//! Staging, applying, reverting, merging and persisting layouts.

use super::*;
use std::collections::BTreeMap;

fn id(n: u8) -> NodeId {
    NodeId::from([n; 32])
}

fn role(zone: &str, gb: u64) -> NodeRole {
    NodeRole {
        zone: zone.into(),
        capacity: Some(gb * 1_000_000_000),
        tags: vec![],
    }
}

fn three_zones() -> LayoutHistory {
    let mut h = LayoutHistory::new(3);
    for (i, z) in ["dc1", "dc2", "dc3"].iter().enumerate() {
        h.stage_role(id(i as u8), Some(role(z, 100)));
    }
    h
}

#[test]
fn stage_preview_apply() {
    let mut h = three_zones();
    assert!(h.has_staged_changes());
    let (preview, report) = h.preview().unwrap();
    assert_eq!(preview.version, 1);
    assert_eq!(report.zone_redundancy, 3);
    assert_eq!(report.moved, 3 * PARTITIONS);
    // Applying needs the right version number.
    let e = h.apply(2).unwrap_err();
    assert!(e.to_string().contains("--version 1"), "{e}");
    h.apply(1).unwrap();
    assert_eq!(h.current().version, 1);
    assert!(!h.has_staged_changes());
    assert!(matches!(h.apply(2), Err(LayoutError::NothingStaged)));
    for p in 0..PARTITIONS {
        let mut nodes = h.current().nodes_of(p);
        nodes.sort();
        assert_eq!(nodes, vec![id(0), id(1), id(2)]);
    }
    assert_eq!(h.current().partition_size, 100_000_000_000 / 256);
}

#[test]
fn gateways_store_nothing_and_removal_moves_data() {
    let mut h = three_zones();
    h.stage_role(id(3), Some(role("dc1", 100)));
    h.stage_role(
        id(9),
        Some(NodeRole {
            zone: "dc1".into(),
            capacity: None,
            tags: vec!["gw".into()],
        }),
    );
    h.apply(1).unwrap();
    assert_eq!(h.current().roles.len(), 5);
    assert!(!h.current().storage_nodes.contains(&id(9)));
    let per = h.current().partitions_per_node();
    assert_eq!(per[&id(0)] + per[&id(3)], PARTITIONS);
    // Remove node 3: its partitions go back to node 0, and only those move.
    h.stage_role(id(3), None);
    let report = h.apply(2).unwrap();
    assert_eq!(report.moved, per[&id(3)]);
    assert_eq!(h.current().partitions_per_node()[&id(0)], PARTITIONS);
    assert!(!h.current().roles.contains_key(&id(3)));
}

#[test]
fn revert_drops_staged_changes() {
    let mut h = three_zones();
    h.apply(1).unwrap();
    h.stage_role(id(0), None);
    h.stage_parameters(LayoutParameters {
        zone_redundancy: ZoneRedundancy::AtLeast(2),
        ..Default::default()
    });
    assert!(h.has_staged_changes());
    h.revert();
    assert!(!h.has_staged_changes());
    assert_eq!(h.staged_roles(), h.current().roles);
}

#[test]
fn impossible_layout_is_not_applied() {
    let mut h = LayoutHistory::new(3);
    h.stage_role(id(0), Some(role("dc1", 100)));
    let e = h.apply(1).unwrap_err();
    assert!(e.to_string().contains("at least 3 storage nodes"), "{e}");
    assert_eq!(h.current().version, 0);
}

#[test]
fn merge_converges_to_newest_and_unions_staging() {
    let mut a = three_zones();
    a.apply(1).unwrap();
    let mut b = a.clone();
    // Concurrent staging on two nodes merges.
    a.stage_role(id(4), Some(role("dc1", 50)));
    b.stage_role(id(5), Some(role("dc2", 50)));
    let mut a2 = a.clone();
    assert!(a2.merge(&b));
    let mut b2 = b.clone();
    assert!(b2.merge(&a));
    assert_eq!(a2, b2);
    assert_eq!(a2.staged_roles().len(), 5);
    // A newer version wins over staging on an older one.
    a2.apply(2).unwrap();
    let mut c = b.clone();
    assert!(c.merge(&a2));
    assert_eq!(c, a2);
    assert!(
        !c.merge(&a2),
        "merging the same layout again changes nothing"
    );
    // An older layout does not take anything back.
    assert!(!c.merge(&b));
    assert_eq!(c.current().version, 2);
}

#[test]
fn concurrent_applies_of_one_version_resolve_the_same_everywhere() {
    let base = three_zones();
    let mut a = base.clone();
    let mut b = base.clone();
    a.stage_role(id(7), Some(role("dc1", 10)));
    b.stage_role(id(8), Some(role("dc2", 10)));
    a.apply(1).unwrap();
    b.apply(1).unwrap();
    let mut ab = a.clone();
    ab.merge(&b);
    let mut ba = b.clone();
    ba.merge(&a);
    assert_eq!(ab.current(), ba.current());
}

#[test]
fn persistence_round_trips_and_rejects_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster_layout");
    assert_eq!(LayoutHistory::load(&path).unwrap(), None);
    let mut h = three_zones();
    h.apply(1).unwrap();
    h.stage_role(id(0), None);
    h.save(&path).unwrap();
    assert_eq!(LayoutHistory::load(&path).unwrap(), Some(h));
    std::fs::write(&path, b"not a layout").unwrap();
    let e = LayoutHistory::load(&path).unwrap_err().to_string();
    assert!(e.contains("cluster_layout"), "{e}");
}

#[test]
fn zone_redundancy_parses() {
    assert_eq!(
        "maximum".parse::<ZoneRedundancy>(),
        Ok(ZoneRedundancy::Maximum)
    );
    assert_eq!(
        "2".parse::<ZoneRedundancy>(),
        Ok(ZoneRedundancy::AtLeast(2))
    );
    assert!("0".parse::<ZoneRedundancy>().is_err());
    assert!("lots".parse::<ZoneRedundancy>().is_err());
}

mod trackers {
    use super::*;
    use crate::layout::{NodeRole, Tracker};

    fn role(zone: &str) -> Option<NodeRole> {
        Some(NodeRole {
            zone: zone.into(),
            capacity: Some(1_000_000_000),
            tags: vec![],
        })
    }

    fn three_nodes() -> LayoutHistory {
        let mut h = LayoutHistory::new(3);
        for (i, z) in ["a", "b", "c"].iter().enumerate() {
            h.stage_role(id(i as u8 + 1), role(z));
        }
        h.apply(1).unwrap();
        h
    }

    fn raise_all(h: &mut LayoutHistory, t: Tracker, nodes: &[u8], v: u64) {
        for n in nodes {
            h.raise_tracker(t, id(*n), v);
        }
    }

    #[test]
    fn first_layout_is_read_at_once_and_old_versions_die_after_sync_ack() {
        let mut h = three_nodes();
        // Version 0 has no nodes: reads go to version 1 straight away.
        assert_eq!(h.read_version(2).version, 1);
        assert_eq!(h.write_sets(7).len(), 1);

        // Add a fourth node in zone d: version 2.
        h.stage_role(id(4), role("d"));
        h.apply(2).unwrap();
        let p = (0..256)
            .find(|&p| h.version(1).unwrap().nodes_of(p) != h.current().nodes_of(p))
            .expect("some partition moves");
        // Until every node has synced version 2, reads use version 1 and
        // writes go to both node sets.
        assert_eq!(h.read_version(2).version, 1);
        assert_eq!(h.write_sets(p).len(), 2);
        raise_all(&mut h, Tracker::Ack, &[1, 2, 3, 4], 2);
        raise_all(&mut h, Tracker::Sync, &[1, 2, 3], 2);
        assert_eq!(h.read_version(2).version, 1, "node 4 has not synced");
        raise_all(&mut h, Tracker::Sync, &[4], 2);
        assert_eq!(h.read_version(2).version, 2);
        assert_eq!(h.write_sets(p).len(), 2, "some node may still read v1");
        raise_all(&mut h, Tracker::SyncAck, &[1, 2, 3, 4], 2);
        assert_eq!(h.min_live_version(), 2);
        assert_eq!(h.write_sets(p).len(), 1);
        assert_eq!(h.all_storage_nodes_of(p), h.current().nodes_of(p));
    }

    #[test]
    fn a_removed_node_counts_until_the_old_version_dies() {
        let mut h = three_nodes();
        h.stage_role(id(4), role("d"));
        h.apply(2).unwrap();
        raise_all(&mut h, Tracker::SyncAck, &[1, 2, 3, 4], 2);
        h.stage_role(id(1), None);
        h.apply(3).unwrap();
        assert!(h.tracked_nodes().contains(&id(1)));
        // With writes acknowledged by one node (`dangerous`), until node 1
        // syncs, a write only it took may be nowhere else.
        raise_all(&mut h, Tracker::Sync, &[2, 3, 4], 3);
        assert_eq!(h.read_version(1).version, 2, "node 1 has not synced v3");
        // With majority writes, two synced nodes of every three hold every
        // acknowledged write: node 1, which leaves, is not waited for.
        assert_eq!(h.read_version(2).version, 3);
        raise_all(&mut h, Tracker::Sync, &[1], 3);
        assert_eq!(h.read_version(1).version, 3);
        raise_all(&mut h, Tracker::SyncAck, &[1, 2, 3, 4], 3);
        assert_eq!(h.min_live_version(), 3);
        assert!(!h.tracked_nodes().contains(&id(1)));
    }

    /// Two of three nodes of version 1 die for good and are replaced:
    /// the one survivor alone may lack writes the dead took together, so
    /// the change waits (until `skip-dead-nodes --allow-missing-data`
    /// marks them synced); with one dead node it completes once the two
    /// others synced.
    #[test]
    fn a_dead_node_of_an_old_version_is_waited_for_only_without_a_quorum() {
        for (dead, done) in [(&[2u8, 3][..], false), (&[3u8][..], true)] {
            let mut h = three_nodes();
            for d in dead {
                h.stage_role(id(*d), None);
            }
            h.stage_role(id(4), role("b"));
            h.stage_role(id(5), role("c"));
            h.apply(2).unwrap();
            let alive: Vec<u8> = [1, 2, 3, 4, 5]
                .into_iter()
                .filter(|n| !dead.contains(n))
                .collect();
            raise_all(&mut h, Tracker::Ack, &[1, 2, 3, 4, 5], 2);
            raise_all(&mut h, Tracker::Sync, &alive, 2);
            assert_eq!(h.synced_version(2) == 2, done, "dead {dead:?}");
            if !done {
                // --allow-missing-data: the dead count as synced.
                raise_all(&mut h, Tracker::Sync, dead, 2);
                assert_eq!(h.synced_version(2), 2);
            }
            assert_eq!(h.read_version(2).version, 2);
        }
    }

    #[test]
    fn trackers_merge_by_maximum_and_versions_by_number() {
        let mut a = three_nodes();
        let mut b = a.clone();
        a.raise_tracker(Tracker::Ack, id(1), 1);
        b.raise_tracker(Tracker::Sync, id(2), 1);
        b.stage_role(id(4), role("d"));
        b.apply(2).unwrap();
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab, ba);
        assert_eq!(ab.current().version, 2);
        assert_eq!(ab.trackers.get(Tracker::Ack, &id(1)), 1);
        assert_eq!(ab.trackers.get(Tracker::Sync, &id(2)), 1);
        assert!(!ab.clone().merge(&ab), "idempotent");
    }
}

/// Checks every partition of `code`'s placement in `v`: one distinct node
/// per shard, at most `parity` per zone; returns shard index by (p, node).
fn check_shards(v: &LayoutVersion, code: EcCode) -> BTreeMap<(usize, NodeId), usize> {
    let mut at = BTreeMap::new();
    for p in 0..PARTITIONS {
        let nodes = v.shard_nodes(code, p).expect("a placement for the code");
        assert_eq!(nodes.len(), code.shards());
        let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            assert!(at.insert((p, *n), i).is_none(), "two shards on one node");
            *per_zone.entry(v.roles[n].zone.as_str()).or_default() += 1;
        }
        assert!(
            per_zone.values().all(|&c| c <= code.parity()),
            "partition {p}: {per_zone:?}"
        );
    }
    at
}

#[test]
fn erasure_coded_classes_are_placed_across_zones_and_keep_their_shards() {
    let mut h = LayoutHistory::new(3);
    for i in 0..6u8 {
        let zone = ["dc1", "dc2", "dc3"][i as usize / 2];
        h.stage_role(id(i), Some(role(zone, 100 + i as u64 * 20)));
    }
    h.apply(1).unwrap();
    let v1 = h.current().clone();
    let code = v1.class_code("STANDARD_IA").expect("offered on 3 zones");
    assert_eq!(code.to_string(), "4+2");
    let before = check_shards(&v1, code);

    // A node leaves, another comes in its zone: the shards of the nodes
    // that stay keep their index.
    h.stage_role(id(1), None);
    h.stage_role(id(7), Some(role("dc1", 100)));
    let report = h.apply(2).unwrap();
    // Node 1 held one shard of every partition: exactly those move.
    assert_eq!(report.shards_moved[&Placement::from(code)], PARTITIONS);
    let v2 = h.current().clone();
    let after = check_shards(&v2, code);
    let mut kept = 0;
    for ((p, n), i) in before.iter() {
        if *n == id(1) {
            continue;
        }
        match after.get(&(*p, *n)) {
            Some(j) => {
                assert_eq!(i, j, "a shard that stays on its node keeps its index");
                kept += 1;
            }
            None => panic!("partition {p}: node {n:?} lost its shard"),
        }
    }
    assert_eq!(
        kept,
        before.len() - before.keys().filter(|(_, n)| *n == id(1)).count()
    );

    // Set a code by hand: the old code's placement stays for its blocks.
    let mut params = h.current().parameters.clone();
    params
        .storage_classes
        .insert("STANDARD_IA".into(), "2+1".parse().unwrap());
    h.stage_parameters(params.clone());
    h.apply(3).unwrap();
    let v3 = h.current().clone();
    assert_eq!(v3.class_code("STANDARD_IA").unwrap().to_string(), "2+1");
    check_shards(&v3, "2+1".parse().unwrap());
    check_shards(&v3, code);

    // A code the zones cannot honour is refused, saying why.
    params
        .storage_classes
        .insert("GLACIER".into(), "2+2".parse().unwrap());
    h.stage_parameters(params.clone());
    params
        .storage_classes
        .insert("GLACIER".into(), "3+1".parse().unwrap());
    h.stage_parameters(params);
    let e = h.preview().unwrap_err().to_string();
    assert!(
        e.contains("GLACIER") && e.contains("3+1") && e.contains("at most 1 per zone"),
        "{e}"
    );

    // Under 3 zones no erasure-coded class is offered by default.
    let mut two = LayoutHistory::new(2);
    two.stage_role(id(0), Some(role("dc1", 100)));
    two.stage_role(id(1), Some(role("dc2", 100)));
    two.apply(1).unwrap();
    assert!(two.current().classes.is_empty());
}

/// Five zones of two nodes each.
fn five_zones() -> LayoutHistory {
    let mut h = LayoutHistory::new(3);
    for (i, z) in ["paris", "berlin", "madrid", "rome", "oslo"]
        .iter()
        .enumerate()
    {
        for k in 0..2u8 {
            h.stage_role(id(i as u8 * 2 + k), Some(role(z, 100 + k as u64 * 50)));
        }
    }
    h.apply(1).unwrap();
    h
}

fn def(redundancy: RedundancySpec, zones: &[&str]) -> ClassDef {
    ClassDef {
        redundancy,
        zones: zones.iter().map(|z| z.to_string()).collect(),
        allow_no_redundancy: false,
    }
}

fn stage_class(h: &mut LayoutHistory, name: &str, d: Option<ClassDef>) {
    let mut p = h.staging.parameters.get().clone();
    match d {
        Some(d) => p.class_defs.insert(name.into(), d),
        None => p.class_defs.remove(name),
    };
    h.stage_parameters(p);
}

/// Checks `placement`'s ring in `v`: distinct nodes, only in `zones`, at
/// most `per_zone` in one; returns the shard index by (partition, node).
fn check_placed(
    v: &LayoutVersion,
    placement: Placement,
    zones: &[&str],
    per_zone: usize,
) -> BTreeMap<(usize, NodeId), usize> {
    let mut at = BTreeMap::new();
    for p in 0..PARTITIONS {
        let nodes = v.shard_nodes(placement, p).expect("a ring");
        assert_eq!(nodes.len(), placement.shards());
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            assert!(at.insert((p, *n), i).is_none(), "two shards on one node");
            let z = v.roles[n].zone.as_str();
            assert!(zones.contains(&z), "partition {p}: a shard in zone {z}");
            *count.entry(z).or_default() += 1;
        }
        assert!(count.values().all(|c| *c <= per_zone), "{count:?}");
    }
    at
}

#[test]
fn placed_classes_stay_in_their_zones_and_move_with_them() {
    let mut h = five_zones();
    stage_class(
        &mut h,
        "EU",
        Some(def(RedundancySpec::Copies(2), &["paris", "berlin"])),
    );
    stage_class(
        &mut h,
        "ARCHIVE",
        Some(def(
            RedundancySpec::Code("4+2".parse().unwrap()),
            &["paris", "berlin", "madrid"],
        )),
    );
    let mut local = def(RedundancySpec::Copies(1), &["oslo"]);
    local.allow_no_redundancy = true;
    stage_class(&mut h, "LOCAL", Some(local));
    h.apply(2).unwrap();
    let v = h.current().clone();
    let eu = v.class_placement("EU").expect("EU is offered");
    assert_eq!((eu.shards(), eu.is_replication()), (2, true));
    assert_ne!(eu.scope, 0);
    let before = check_placed(&v, eu, &["paris", "berlin"], 1);
    assert_eq!(
        v.survival(eu).unwrap().to_string(),
        "any 1 node(s) or a zone"
    );
    let archive = v.class_placement("ARCHIVE").unwrap();
    check_placed(&v, archive, &["paris", "berlin", "madrid"], 2);
    assert_eq!(
        v.survival(archive).unwrap().to_string(),
        "any 2 node(s) or a zone"
    );
    let local = v.class_placement("LOCAL").unwrap();
    check_placed(&v, local, &["oslo"], 1);
    assert_eq!(v.survival(local).unwrap().to_string(), "no node loss");
    // The layout's own partitions and the automatic code are unchanged.
    assert_eq!(v.ring, h.version(1).unwrap().ring);
    assert!(v.class_code("STANDARD_IA").is_some());

    // Widened to a third zone: the same placement, a third of the copies
    // move, and a copy that stays keeps its index.
    stage_class(
        &mut h,
        "EU",
        Some(def(
            RedundancySpec::Copies(2),
            &["paris", "berlin", "madrid"],
        )),
    );
    let report = h.apply(3).unwrap();
    let v3 = h.current().clone();
    assert_eq!(v3.class_placement("EU"), Some(eu));
    let after = check_placed(&v3, eu, &["paris", "berlin", "madrid"], 1);
    let moved = report.shards_moved[&eu];
    assert!(
        moved > 0 && moved < 2 * PARTITIONS,
        "{moved} of {} copies moved",
        2 * PARTITIONS
    );
    let stayed = after
        .iter()
        .filter(|((p, n), i)| before.get(&(*p, *n)) == Some(i))
        .count();
    assert_eq!(stayed + moved, 2 * PARTITIONS);
    // Other classes did not move.
    assert_eq!(report.shards_moved[&archive], 0);

    // Three copies instead: a new placement; the old one is kept, in its
    // zones, for the blocks stored with it.
    stage_class(
        &mut h,
        "EU",
        Some(def(
            RedundancySpec::Copies(3),
            &["paris", "berlin", "madrid"],
        )),
    );
    h.apply(4).unwrap();
    let v4 = h.current().clone();
    let eu3 = v4.class_placement("EU").unwrap();
    assert_eq!((eu3.shards(), eu3.scope), (3, eu.scope));
    check_placed(&v4, eu3, &["paris", "berlin", "madrid"], 1);
    check_placed(&v4, eu, &["paris", "berlin", "madrid"], 1);
    assert!(v4.users_of(eu).is_empty());

    // Removed: no longer offered, its rings stay.
    stage_class(&mut h, "EU", None);
    h.apply(5).unwrap();
    let v5 = h.current().clone();
    assert_eq!(v5.class_placement("EU"), None);
    assert!(v5.ring_of(eu3).is_some() && v5.ring_of(eu).is_some());

    // Survives encoding: what gossip and the layout file carry.
    let back = LayoutHistory::from_bytes(&h.to_bytes()).unwrap();
    assert_eq!(back, h);
}

#[test]
fn placed_classes_are_checked_with_clear_errors() {
    let mut h = five_zones();
    let preview_err = |h: &mut LayoutHistory, name: &str, d: ClassDef| {
        stage_class(h, name, Some(d));
        let e = h.preview().map(|_| ()).unwrap_err().to_string();
        stage_class(h, name, None);
        e
    };
    let e = preview_err(&mut h, "ONE", def(RedundancySpec::Copies(1), &["oslo"]));
    assert!(e.contains("--allow-no-redundancy"), "{e}");
    let e = preview_err(
        &mut h,
        "EU",
        def(RedundancySpec::Copies(2), &["paris", "lyon"]),
    );
    assert!(
        e.contains("\"lyon\"") && e.contains("no storage node"),
        "{e}"
    );
    let e = preview_err(&mut h, "EU", def(RedundancySpec::Copies(3), &["paris"]));
    assert!(
        e.contains("needs 3 storage nodes") && e.contains("have 2"),
        "{e}"
    );
    let e = preview_err(
        &mut h,
        "EU",
        def(RedundancySpec::Auto, &["paris", "berlin"]),
    );
    assert!(e.contains("3 zones or more"), "{e}");
    let e = def(RedundancySpec::Copies(2), &[]).check("eu").unwrap_err();
    assert!(e.contains("capital letters"), "{e}");
    let e = def(RedundancySpec::Copies(2), &[])
        .check("STANDARD")
        .unwrap_err();
    assert!(e.contains("layout's own replication"), "{e}");
    assert!(def(RedundancySpec::Copies(9), &[]).check("EU").is_err());

    // Two copies in one zone of two nodes: accepted, and said not to
    // survive the zone.
    stage_class(
        &mut h,
        "PAIR",
        Some(def(RedundancySpec::Copies(2), &["rome"])),
    );
    let (v, _) = h.preview().unwrap();
    let p = v.class_placement("PAIR").unwrap();
    assert_eq!(
        v.survival(p).unwrap().to_string(),
        "any 1 node(s), not a zone"
    );

    // A placed class takes the name of an erasure-coded class of every
    // zone; the automatic one is no longer offered under it.
    stage_class(
        &mut h,
        "STANDARD_IA",
        Some(def(RedundancySpec::Auto, &["paris", "berlin", "madrid"])),
    );
    let (v, _) = h.preview().unwrap();
    assert!(v.class_code("STANDARD_IA").is_none());
    let p = v.class_placement("STANDARD_IA").unwrap();
    assert_eq!(p.code().to_string(), "4+2");
    assert_ne!(p.scope, 0);
}

#[test]
fn layouts_without_placed_classes_encode_as_before() {
    // The fields of placed classes are left out when empty, so that a
    // layout that uses none is the same bytes for every release.
    let mut h = three_zones();
    h.apply(1).unwrap();
    let bytes = rmp_serde::to_vec_named(h.current()).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    for field in ["class_defs", "placed", "scope", "max_per_zone"] {
        assert!(!text.contains(field), "{field} is encoded");
    }
}
