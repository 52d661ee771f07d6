//! Replication over real TCP on loopback: several nodes in one test
//! process, each with its own System, metadata database and table. (The
//! end-to-end tests with separate `garage` processes live in src/garage.)

use std::time::Duration;

use crate::testing::{cluster, stop_until_down, wait_for, TestEntry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_through_one_read_through_others_with_a_node_down() {
    let nodes = cluster(3, 3).await;
    let e = TestEntry::new("p", "s", "v1");
    nodes[0].table.insert(&e).await.unwrap();
    for n in nodes.iter() {
        let got = n.table.get(&"p".into(), &"s".into()).await.unwrap();
        assert_eq!(got.as_ref(), Some(&e));
    }
    // Range reads merge and order.
    let batch: Vec<TestEntry> = (0..50)
        .map(|i| TestEntry::new("r", &format!("k{i:03}"), "x"))
        .collect();
    nodes[1].table.insert_many(&batch).await.unwrap();
    let got = nodes[2]
        .table
        .get_range(&"r".into(), Some("k010".into()), None, 5, false)
        .await
        .unwrap();
    let keys: Vec<&str> = got.iter().map(|e| e.s.as_str()).collect();
    assert_eq!(keys, ["k010", "k011", "k012", "k013", "k014"]);
    let got = nodes[2]
        .table
        .get_range(&"r".into(), None, None, 1000, true)
        .await
        .unwrap();
    assert_eq!(got.len(), 50);
    assert_eq!(got[0].s, "k049");

    // One node down: writes and reads still reach a quorum.
    stop_until_down(&nodes, 2).await;
    let e2 = TestEntry::raw("p", "s", 2, Some("v2"));
    nodes[0].table.insert(&e2).await.unwrap();
    let got = nodes[1].table.get(&"p".into(), &"s".into()).await.unwrap();
    assert_eq!(got, Some(e2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_missed_writes_catches_up_by_sync_and_read_repair() {
    let nodes = cluster(3, 3).await;
    // Write straight into two replicas' stores, as if the third missed it.
    let missed: Vec<TestEntry> = (0..500)
        .map(|i| TestEntry::new(&format!("p{}", i % 13), &format!("s{i}"), "v"))
        .collect();
    for e in missed.iter() {
        nodes[0].table.data.update_entry_with(e).unwrap();
        nodes[1].table.data.update_entry_with(e).unwrap();
    }
    // Read repair: one read through the third node fixes that entry there.
    let probe = &missed[7];
    let got = nodes[2].table.get(&probe.p, &probe.s).await.unwrap();
    assert_eq!(got.as_ref(), Some(probe));
    // Sync: a pass from node 0 pushes everything node 2 lacks (node 1's
    // own passes, triggered by layout tracker changes, may have sent some
    // already).
    let layout = nodes[0].system.layout();
    nodes[0].table.sync_pass(&layout).await.unwrap();
    for e in missed.iter() {
        assert!(nodes[2]
            .table
            .data
            .read_entry(&e.p, &e.s)
            .unwrap()
            .is_some());
    }
    wait_for("Merkle roots equal", Duration::from_secs(30), || {
        let r = nodes[0].roots();
        nodes.iter().all(|n| n.roots() == r)
    })
    .await;
    // Every node reports layout 1 synced, and reads from it.
    wait_for("sync trackers at 1", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|n| n.system.layout().synced_version(2) == 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_are_collected_only_when_every_replica_has_them() {
    let nodes = cluster(3, 3).await;
    let e = TestEntry::new("g", "k", "v");
    nodes[0].table.insert(&e).await.unwrap();
    wait_for("all replicas have it", Duration::from_secs(10), || {
        nodes
            .iter()
            .all(|n| n.table.data.read_entry(&e.p, &e.s).unwrap().is_some())
    })
    .await;
    // Node 2 goes down; the entry is deleted (tombstone) meanwhile.
    stop_until_down(&nodes, 2).await;
    let t = TestEntry::raw("g", "k", 5, None);
    nodes[0].table.insert(&t).await.unwrap();
    assert_eq!(
        nodes[0].table.gc_round().await.unwrap(),
        0,
        "node 2 lacks the tombstone"
    );
    assert!(nodes[0]
        .table
        .data
        .read_entry(&t.p, &t.s)
        .unwrap()
        .is_some());
    assert!(nodes[2]
        .table
        .data
        .read_entry(&t.p, &t.s)
        .unwrap()
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_read_includes_tombstones_and_repairs_a_replica() {
    let nodes = cluster(3, 3).await;
    let live: Vec<TestEntry> = (0..1500)
        .map(|i| TestEntry::new("v", &format!("s{i:04}"), "x"))
        .collect();
    nodes[0].table.insert_many(&live).await.unwrap();
    let dead = TestEntry::raw("v", "s0001", 9, None);
    // The tombstone reaches two replicas' stores only.
    nodes[0].table.data.update_entry_with(&dead).unwrap();
    nodes[1].table.data.update_entry_with(&dead).unwrap();
    // More entries than one range round (1000): several rounds.
    let got = nodes[2]
        .table
        .get_partition(&"v".into(), 10_000)
        .await
        .unwrap();
    assert_eq!(got.len(), 1500);
    assert_eq!(got[1], dead, "the tombstone is returned");
    assert!(got.windows(2).all(|w| w[0].s < w[1].s), "in order");
    // A partition larger than the limit is an error, not a cut list.
    let over = nodes[2].table.get_partition(&"v".into(), 1499).await;
    assert!(matches!(
        over,
        Err(crate::Error::TooManyEntries { limit: 1499 })
    ));
    let live_only = nodes[2]
        .table
        .get_range(&"v".into(), None, None, 10_000, false)
        .await
        .unwrap();
    assert_eq!(live_only.len(), 1499);
    // Node 2, which lacked it, answered its own read (a replica reads
    // itself first): read repair gives it the tombstone.
    wait_for(
        "node 2 holds the tombstone",
        Duration::from_secs(10),
        || {
            let raw = nodes[2]
                .table
                .data
                .read_entry(&"v".into(), &"s0001".into())
                .unwrap();
            raw.map(|b| nodes[2].table.data.decode_entry(&b).unwrap()) == Some(dead.clone())
        },
    )
    .await;
}

/// Ordered writes: a replica holding a newer value refuses an older one,
/// stores nothing and reports the newer timestamp (from a quorum's
/// answers, whatever replica the quorum is made of); a write after every
/// stored value is merged everywhere; a stamp far ahead (a node whose
/// clock runs an hour ahead) does not drag the coordinator's hybrid
/// clock, and a write stamped after it still wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_writes_are_refused_by_a_replica_holding_a_newer_value() {
    let nodes = cluster(3, 3).await;
    let far = garage_util::time::now_msec() + 3_600_000;
    // A newer value on one replica only (the others missed it).
    let newer = TestEntry::raw("o", "k", far, Some("newer"));
    nodes[2].table.data.update_entry_with(&newer).unwrap();
    let older = TestEntry::raw("o", "k", far - 10, Some("older"));
    // Through each node: the quorum may or may not include node 2; the
    // write is refused only if an answer came from it, and node 2 never
    // stores the older value.
    let refused = nodes[0]
        .table
        .insert_ordered(std::slice::from_ref(&older))
        .await
        .unwrap();
    assert!(
        refused == vec![None] || refused == vec![Some(far)],
        "{refused:?}"
    );
    let at2 = nodes[2]
        .table
        .get_local(&"o".into(), &"k".into())
        .await
        .unwrap();
    assert_eq!(
        at2,
        Some(newer.clone()),
        "node 2 must not have taken the older value"
    );
    // With node 2 in every quorum (the others hold nothing newer, so only
    // node 2 can refuse): write only to the pair {1, 2} by stopping 0.
    stop_until_down(&nodes, 0).await;
    let refused = nodes[1]
        .table
        .insert_ordered(std::slice::from_ref(&older))
        .await
        .unwrap();
    assert_eq!(refused, vec![Some(far)]);
    assert!(
        garage_util::time::last_stamp() < far - 600_000,
        "a stamp an hour ahead (beyond max_clock_offset_msec) must not drag the coordinator's clock"
    );
    // Stamped again after it: merged everywhere up.
    let again = TestEntry::raw(
        "o",
        "k",
        garage_util::time::increment_after(far),
        Some("again"),
    );
    assert!(again.value.timestamp() > far);
    let refused = nodes[1]
        .table
        .insert_ordered(std::slice::from_ref(&again))
        .await
        .unwrap();
    assert_eq!(refused, vec![None]);
    for i in [1, 2] {
        let got = nodes[i]
            .table
            .get_local(&"o".into(), &"k".into())
            .await
            .unwrap();
        assert_eq!(got, Some(again.clone()), "node {i}");
    }
}

/// A node that holds a partition in no live layout version drops what it
/// still has of it without sending it: with 4 nodes and replication 3,
/// each partition leaves one node out; an entry planted in that node's
/// store (a stale copy, e.g. of an entry deleted since and whose tombstone
/// was collected without it) must not reach the partition's holders,
/// while an entry of one of its own partitions planted the same way does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_outside_a_partition_drops_its_stale_copy_without_sending_it() {
    use crate::schema::PartitionKey;
    use garage_rpc::layout::LayoutVersion;
    let nodes = cluster(4, 3).await;
    let me = nodes[3].system.id();
    let layout = nodes[3].system.layout();
    let holds = |p: &str| {
        let part = LayoutVersion::partition_of(PartitionKey::hash(&p.to_string()).as_slice());
        layout.current().nodes_of(part).contains(&me)
    };
    let outside = (0..1000)
        .map(|i| format!("out{i}"))
        .find(|p| !holds(p))
        .expect("a partition without node 3");
    let inside = (0..1000)
        .map(|i| format!("in{i}"))
        .find(|p| holds(p))
        .expect("a partition with node 3");
    let stale = TestEntry::new(&outside, "k", "stale");
    let own = TestEntry::new(&inside, "k", "own");
    nodes[3].table.data.update_entry_with(&stale).unwrap();
    nodes[3].table.data.update_entry_with(&own).unwrap();
    nodes[3].table.sync_pass(&layout).await.unwrap();
    assert!(
        nodes[3]
            .table
            .data
            .read_entry(&stale.p, &stale.s)
            .unwrap()
            .is_none(),
        "dropped"
    );
    for n in &nodes[..3] {
        assert!(
            n.table
                .data
                .read_entry(&stale.p, &stale.s)
                .unwrap()
                .is_none(),
            "a stale copy was sent to a holder"
        );
    }
    let holders: Vec<&crate::testing::Node> = nodes[..3]
        .iter()
        .filter(|n| {
            let part = LayoutVersion::partition_of(PartitionKey::hash(&own.p).as_slice());
            layout.current().nodes_of(part).contains(&n.system.id())
        })
        .collect();
    assert_eq!(holders.len(), 2);
    for n in holders {
        assert!(
            n.table.data.read_entry(&own.p, &own.s).unwrap().is_some(),
            "an entry of the node's own partition is sent"
        );
    }
}

/// A node that left a partition in a retired layout version drops its copy
/// at once (a pass runs when a version retires); one that still holds a
/// stale copy (it was slow or down when the version retired) gets the
/// tombstone of a later delete before the GC collects it: otherwise,
/// holding the partition again later, it would bring the deleted entry
/// back (found by the history checker, seed 91133).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_former_holder_drops_its_copy_and_gets_tombstones_before_the_gc() {
    use crate::schema::PartitionKey;
    use crate::testing::{cluster_with_roles, role};
    use garage_rpc::layout::LayoutVersion;
    use garage_rpc::system::LayoutUpdate;

    // Version 1: nodes 0 to 2 hold every partition.
    let nodes = cluster_with_roles(4, 3, 3).await;
    let keys: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    for p in &keys {
        nodes[0]
            .table
            .insert(&TestEntry::new(p, "k", "v1"))
            .await
            .unwrap();
    }
    // Version 2: node 3 joins; most partitions leave one of nodes 0 to 2.
    nodes[0]
        .system
        .update_layout(LayoutUpdate::StageRoles(
            [(nodes[3].system.id(), Some(role(3)))]
                .into_iter()
                .collect(),
        ))
        .unwrap();
    let next = nodes[0].system.layout().current().version + 1;
    nodes[0]
        .system
        .update_layout(LayoutUpdate::Apply { version: next })
        .unwrap();
    wait_for(
        "version 1 retired everywhere",
        Duration::from_secs(60),
        || {
            nodes
                .iter()
                .all(|n| n.system.layout().min_live_version() == next)
        },
    )
    .await;
    let layout = nodes[0].system.layout();
    let holds = |p: &str, i: usize| {
        let part = LayoutVersion::partition_of(PartitionKey::hash(&p.to_string()).as_slice());
        layout
            .current()
            .nodes_of(part)
            .contains(&nodes[i].system.id())
    };
    // A partition node `x` (of 0 to 2) left, and one of its holders.
    let (p, x) = keys
        .iter()
        .find_map(|p| (0..3).find(|i| !holds(p, *i)).map(|x| (p.clone(), x)))
        .expect("a partition that left one of nodes 0 to 2");
    let holder = (0..4).find(|i| holds(&p, *i)).unwrap();
    wait_for(
        "the former holder drops the partition",
        Duration::from_secs(30),
        || {
            nodes[x]
                .table
                .data
                .read_entry(&p, &"k".to_string())
                .unwrap()
                .is_none()
        },
    )
    .await;

    // Suppose it had not: it still holds a copy when the entry is deleted
    // through the holders (the tombstone goes to them only) and the GC
    // collects the tombstone.
    let stale = TestEntry::new(&p, "k", "stale");
    nodes[x].table.data.update_entry_with(&stale).unwrap();
    let tombstone = TestEntry::raw(&p, "k", 5, None);
    nodes[holder].table.insert(&tombstone).await.unwrap();
    let mut removed = 0;
    for _ in 0..50 {
        removed += nodes[holder].table.gc_round().await.unwrap();
        if removed > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(removed > 0, "the tombstone was collected");
    let left = nodes[x].table.data.read_entry(&stale.p, &stale.s).unwrap();
    let left = left.map(|b| crate::encoding::decode::<TestEntry>(&b).unwrap());
    assert!(
        left.as_ref().is_none_or(|e| e.value.get().is_none()),
        "the former holder kept the deleted entry: {left:?}"
    );
}

/// A sync pass that cannot reach a node remembers the (partition, node)
/// pairs it completed, and the next pass for the same layout version skips
/// them; a pass that succeeds leaves nothing to skip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_pass_is_resumed_not_restarted() {
    use crate::sync::Resume;
    let nodes = cluster(4, 3).await;
    let entries: Vec<TestEntry> = (0..40)
        .map(|i| TestEntry::new(&format!("r{i}"), "k", "v"))
        .collect();
    nodes[0].table.insert_many(&entries).await.unwrap();
    let layout = nodes[0].system.layout();

    // A full pass: nothing left to resume.
    let mut resume = Resume::default();
    nodes[0]
        .table
        .sync_pass_resuming(&layout, &mut resume)
        .await
        .unwrap();
    assert!(resume.is_empty());
    assert_eq!(resume.skipped(), 0);

    stop_until_down(&nodes, 3).await;
    assert!(nodes[0]
        .table
        .sync_pass_resuming(&layout, &mut resume)
        .await
        .is_err());
    let done = resume.len();
    assert!(done > 0, "the pairs towards nodes 1 and 2 were completed");
    // The next pass skips them (and fails again on node 3's).
    let err = nodes[0]
        .table
        .sync_pass_resuming(&layout, &mut resume)
        .await;
    assert!(err.is_err());
    assert_eq!(resume.len(), done);
    assert_eq!(resume.skipped(), done, "every completed pair was skipped");
    // None of node 3's pairs is done: a full pass still fails on it.
    assert!(nodes[0].table.sync_pass(&layout).await.is_err());
}

/// A fully replicated table's copy that missed a write (a node down
/// then): until it caught up, its reads ask a quorum and see the write;
/// the catch-up writes the newer entry into the copy before the copy
/// answers alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_copy_that_missed_a_write_reads_a_quorum_until_caught_up() {
    let nodes = cluster(3, 3).await;
    let (p, s): (String, String) = ("".into(), "key".into());
    let v1 = TestEntry::raw("", "key", 1, Some("active"));
    nodes[0].full.insert(&v1).await.unwrap();
    for n in &nodes {
        let got = n.full.get_local(&p, &s).await.unwrap();
        assert_eq!(got.as_ref(), Some(&v1));
    }
    // A revocation node 2 missed: only nodes 0 and 1 have it.
    let v2 = TestEntry::raw("", "key", 2, Some("revoked"));
    for n in &nodes[..2] {
        n.full.data.update_entry_with(&v2).unwrap();
    }
    assert_eq!(
        nodes[2].full.get_local(&p, &s).await.unwrap(),
        Some(v1.clone())
    );
    // Caught up, node 2 answers from its copy: the old value.
    assert!(nodes[2].full.caught_up());
    assert_eq!(nodes[2].full.get(&p, &s).await.unwrap(), Some(v1));
    // As after a restart: its reads ask a quorum.
    nodes[2].full.forget_catch_up();
    assert_eq!(nodes[2].full.get(&p, &s).await.unwrap(), Some(v2.clone()));
    let listed = nodes[2]
        .full
        .get_range(&p, None, None, 10, false)
        .await
        .unwrap();
    assert_eq!(listed, vec![v2.clone()]);
    // The catch-up leaves the newer entry in its copy when it returns.
    assert!(nodes[2].full.catch_up().await.unwrap() >= 1);
    assert!(nodes[2].full.caught_up());
    assert_eq!(nodes[2].full.get_local(&p, &s).await.unwrap(), Some(v2));
}
