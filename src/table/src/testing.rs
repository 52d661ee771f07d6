//! Helpers for this crate's tests and benchmarks (not part of the API): a
//! small table schema, temporary databases, and nodes running in one
//! process that talk over real loopback TCP.
#![doc(hidden)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_net::{NetApp, NetConfig, NetworkKey, NodeKey};
use garage_rpc::layout::NodeRole;
use garage_rpc::system::{LayoutUpdate, System, SystemConfig};
use garage_util::config::ConsistencyMode;
use garage_util::crdt::{Crdt, Lww};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::merkle::{read_node, MerkleNode};
use crate::schema::{Entry, TableSchema};
use crate::table::Table;
use crate::tuning::Tuning;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEntry {
    pub p: String,
    pub s: String,
    /// `None`: deleted.
    pub value: Lww<Option<String>>,
}

impl TestEntry {
    pub fn new(p: &str, s: &str, value: &str) -> Self {
        Self::raw(p, s, 1, Some(value))
    }

    pub fn raw(p: &str, s: &str, ts: u64, value: Option<&str>) -> Self {
        Self {
            p: p.into(),
            s: s.into(),
            value: Lww::raw(ts, value.map(String::from)),
        }
    }
}

impl Crdt for TestEntry {
    fn merge(&mut self, other: &Self) {
        self.value.merge(&other.value);
    }
}

impl Entry<String, String> for TestEntry {
    fn partition_key(&self) -> &String {
        &self.p
    }
    fn sort_key(&self) -> &String {
        &self.s
    }
    fn is_tombstone(&self) -> bool {
        self.value.get().is_none()
    }
}

pub struct TestTable;

impl TableSchema for TestTable {
    const TABLE_NAME: &'static str = "test";
    type P = String;
    type S = String;
    type E = TestEntry;
    type Filter = ();
    fn matches_filter(_: &TestEntry, _: &()) -> bool {
        true
    }
    /// Ordered writes: a stored value with a later timestamp refuses.
    fn newer_than(stored: &TestEntry, incoming: &TestEntry) -> Option<u64> {
        let ts = stored.value.timestamp();
        (ts > incoming.value.timestamp()).then_some(ts)
    }
    fn stamp_of(entry: &TestEntry) -> Option<u64> {
        Some(entry.value.timestamp())
    }
    /// Registers: one per entry; a value is a timestamp in decimal,
    /// superseded by a tombstone at least as new.
    fn register_of(entry: &TestEntry) -> Option<crate::cas::RegisterId> {
        let h = garage_util::data::blake2sum(entry.p.as_bytes());
        Some(crate::cas::RegisterId::new("test", &h, entry.s.as_bytes()))
    }
    fn register_superseded(tombstone: &TestEntry, value: &[u8]) -> bool {
        value.is_empty()
            || std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|ts| ts <= tombstone.value.timestamp())
    }
}

/// The same entries in a fully replicated table (every node with a role
/// holds every entry; reads answer from the local copy once caught up).
pub struct FullTestTable;

impl TableSchema for FullTestTable {
    const TABLE_NAME: &'static str = "test_full";
    const REPLICATION: crate::replication::Replication = crate::replication::Replication::Full;
    type P = String;
    type S = String;
    type E = TestEntry;
    type Filter = ();
    fn matches_filter(_: &TestEntry, _: &()) -> bool {
        true
    }
}

pub fn temp_db() -> (tempfile::TempDir, garage_db::Db) {
    let dir = tempfile::tempdir().unwrap();
    let engine = garage_db::Engine::Lmdb;
    let db = garage_db::open(
        engine,
        &engine.db_path(dir.path()),
        &garage_db::OpenOptions::default(),
    )
    .unwrap();
    (dir, db)
}

pub struct Node {
    pub system: Arc<System>,
    pub table: Arc<Table<TestTable>>,
    /// A fully replicated table on the same node.
    pub full: Arc<Table<FullTestTable>>,
    exit: watch::Sender<bool>,
    _dir: tempfile::TempDir,
    _db_dir: tempfile::TempDir,
}

impl Node {
    /// Stops the node's workers and closes its connections.
    pub fn stop(&self) {
        let _ = self.exit.send(true);
        for (id, _) in self.system.netapp.connected_peers() {
            self.system.netapp.disconnect(&id);
        }
    }

    /// The Merkle roots of its 256 partitions.
    pub fn roots(&self) -> Vec<MerkleNode> {
        (0..=255u8)
            .map(|p| read_node(&self.table.data.merkle_tree, p, &[]).unwrap())
            .collect()
    }
}

const SECRET: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// Starts a node on a random loopback port; returns it and its
/// `<id>@<addr>`.
pub async fn start_node(rf: usize, bootstrap: Option<String>) -> (Node, String) {
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
    let table = Table::with_tuning(TestTable, db.clone(), system.clone(), tuning).unwrap();
    let full = Table::with_tuning(FullTestTable, db, system.clone(), tuning).unwrap();
    let (exit, rx) = watch::channel(false);
    tokio::spawn(listener.run(rx.clone()));
    tokio::spawn(system.clone().run(rx.clone()));
    table.spawn_workers(&rx);
    full.spawn_workers(&rx);
    let me = format!("{}@{}", netapp.id(), addr);
    (
        Node {
            system,
            table,
            full,
            exit,
            _dir: dir,
            _db_dir: db_dir,
        },
        me,
    )
}

pub async fn wait_for(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops node `i` and waits until every other node sees it down. Tasks of
/// the stopped node that were in flight (a ping, a sync push) may dial out
/// once more after the stop: it is stopped again until the others agree.
pub async fn stop_until_down(nodes: &[Node], i: usize) {
    let id = nodes[i].system.id();
    wait_for(
        &format!("node {i} seen down"),
        Duration::from_secs(20),
        || {
            nodes[i].stop();
            nodes
                .iter()
                .enumerate()
                .all(|(j, n)| j == i || !n.system.is_up(&id))
        },
    )
    .await;
}

/// `n` nodes in `n` zones, replication `rf`, layout applied and synced.
pub async fn cluster(n: usize, rf: usize) -> Vec<Node> {
    cluster_with_roles(n, rf, n).await
}

/// The role node `i` gets: zone `z{i}`, 1 GB.
pub fn role(i: usize) -> NodeRole {
    NodeRole {
        zone: format!("z{i}"),
        capacity: Some(1_000_000_000),
        tags: vec![],
    }
}

/// `n` nodes connected, the first `with_roles` of them in layout version 1
/// (one zone each), replication `rf`.
pub async fn cluster_with_roles(n: usize, rf: usize, with_roles: usize) -> Vec<Node> {
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
        .take(with_roles)
        .enumerate()
        .map(|(i, node)| (node.system.id(), Some(role(i))))
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
