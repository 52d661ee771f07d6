//! Replication over real TCP on loopback: several nodes in one test
//! process, each with its own System, metadata database and table. (The
//! end-to-end tests with separate `garage` processes live in src/garage.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_net::{NetApp, NetConfig, NetworkKey, NodeKey};
use garage_rpc::layout::{NodeRole, Tracker};
use garage_rpc::system::{LayoutUpdate, System, SystemConfig};
use garage_util::config::ConsistencyMode;
use tokio::sync::watch;

use crate::merkle::{read_node, MerkleNode};
use crate::table::Table;
use crate::test_schema::{temp_db, TestEntry, TestTable};
use crate::tuning::Tuning;

struct Node {
    system: Arc<System>,
    table: Arc<Table<TestTable>>,
    exit: watch::Sender<bool>,
    _dir: tempfile::TempDir,
    _db_dir: tempfile::TempDir,
}

impl Node {
    fn stop(&self) {
        let _ = self.exit.send(true);
        for (id, _) in self.system.netapp.connected_peers() {
            self.system.netapp.disconnect(&id);
        }
    }

    fn roots(&self) -> Vec<MerkleNode> {
        (0..=255u8)
            .map(|p| read_node(&self.table.data.merkle_tree, p, &[]).unwrap())
            .collect()
    }
}

const SECRET: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

async fn start_node(rf: usize, bootstrap: Option<String>) -> (Node, String) {
    let tuning = Tuning {
        sync_interval: Duration::from_secs(600),
        gc_delay: Duration::ZERO,
    };
    let dir = tempfile::tempdir().unwrap();
    let (db_dir, db) = temp_db();
    let netapp = NetApp::new(
        NetworkKey::from_hex(SECRET).unwrap(),
        NodeKey::generate(),
        NetConfig::default(),
    );
    let listener = netapp
        .clone()
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let system = System::new(
        netapp.clone(),
        SystemConfig {
            replication_factor: rf,
            metadata_dir: dir.path().to_path_buf(),
            data_dirs: vec![],
            rpc_public_addr: Some(addr),
            bootstrap_peers: bootstrap.into_iter().collect(),
            consistency_mode: ConsistencyMode::Consistent,
        },
    )
    .unwrap();
    let table = Table::with_tuning(TestTable, db, system.clone(), tuning).unwrap();
    let (exit, rx) = watch::channel(false);
    tokio::spawn(listener.run(rx.clone()));
    tokio::spawn(system.clone().run(rx.clone()));
    table.spawn_workers(&rx);
    let me = format!("{}@{}", netapp.id(), addr);
    (
        Node {
            system,
            table,
            exit,
            _dir: dir,
            _db_dir: db_dir,
        },
        me,
    )
}

async fn wait_for(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` nodes in `n` zones, replication `rf`, layout applied and synced.
async fn cluster(n: usize, rf: usize) -> Vec<Node> {
    let (first, boot) = start_node(rf, None).await;
    let mut nodes = vec![first];
    for _ in 1..n {
        nodes.push(start_node(rf, Some(boot.clone())).await.0);
    }
    wait_for("all nodes see each other", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|a| nodes.iter().all(|b| a.system.is_up(&b.system.id())))
    })
    .await;
    let roles = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            (
                node.system.id(),
                Some(NodeRole {
                    zone: format!("z{i}"),
                    capacity: Some(1_000_000_000),
                    tags: vec![],
                }),
            )
        })
        .collect();
    nodes[0]
        .system
        .update_layout(LayoutUpdate::StageRoles(roles))
        .unwrap();
    nodes[0]
        .system
        .update_layout(LayoutUpdate::Apply { version: 1 })
        .unwrap();
    wait_for("layout 1 everywhere", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|n| n.system.layout().current().version == 1)
    })
    .await;
    nodes
}

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
    nodes[2].stop();
    wait_for("node 2 seen down", Duration::from_secs(20), || {
        !nodes[0].system.is_up(&nodes[2].system.id())
    })
    .await;
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
            .all(|n| n.system.layout().min_tracker(Tracker::Sync) == 1)
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
    nodes[2].stop();
    wait_for("node 2 seen down", Duration::from_secs(20), || {
        !nodes[0].system.is_up(&nodes[2].system.id())
    })
    .await;
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
