//! A gateway node inside the test process: the same `System` and `Table`
//! code as a `garage server`, joined to a test cluster over real TCP with
//! the cluster's secret, with a gateway role in the layout. Tests use it to
//! drive table operations at a rate the CLI cannot (one process per call).

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use garage_net::{NetApp, NetConfig, NetworkKey, NodeKey};
use garage_rpc::system::{System, SystemConfig};
use garage_util::config::ConsistencyMode;
use tokio::sync::watch;

use super::cluster::{wait_until, Cluster, CLUSTER_DEADLINE, RPC_PORT};

pub struct Gateway {
    pub system: Arc<System>,
    /// The key, bucket and alias tables, which every node with a role
    /// holds (fully replicated), with their workers running (the admin
    /// token and KMS key tables run too, unexposed).
    pub metadata: garage_model::helper::Metadata,
    pub db: garage_db::Db,
    pub rt: tokio::runtime::Runtime,
    pub exit: watch::Receiver<bool>,
    exit_tx: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    /// Starts on 127.a.b.200, with node 0 of `cluster` as bootstrap peer.
    pub fn start(cluster: &Cluster) -> Gateway {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let o = cluster.nodes[0].ip.octets();
        let ip = Ipv4Addr::new(o[0], o[1], o[2], 200);
        let engine = garage_db::Engine::Lmdb;
        let db = garage_db::open(
            engine,
            &engine.db_path(dir.path()),
            &garage_db::OpenOptions::default(),
        )
        .unwrap();
        let (exit_tx, exit) = watch::channel(false);
        let boot = format!(
            "{}@{}",
            cluster.nodes[0].id(),
            cluster.nodes[0].public_addr()
        );
        let system = rt.block_on(async {
            let netapp = NetApp::new(
                NetworkKey::from_hex(&cluster.secret).unwrap(),
                NodeKey::generate(),
                NetConfig {
                    bind_outgoing: Some(ip.into()),
                    ..NetConfig::default()
                },
            );
            let addr = SocketAddr::new(ip.into(), RPC_PORT);
            let listener = netapp.clone().bind(addr).await.unwrap();
            let system = System::new(
                netapp,
                SystemConfig {
                    replication_factor: cluster.replication_factor,
                    metadata_dir: dir.path().to_path_buf(),
                    data_dirs: vec![],
                    rpc_public_addr: Some(addr),
                    bootstrap_peers: vec![boot],
                    consistency_mode: ConsistencyMode::Consistent,
                },
            )
            .unwrap();
            tokio::spawn(listener.run(exit.clone()));
            tokio::spawn(system.clone().run(exit.clone()));
            system
        });
        let metadata = {
            use garage_model::{bucket_alias_table, bucket_table, key_table};
            use garage_table::Table;
            let _rt = rt.enter();
            let m = garage_model::helper::Metadata {
                buckets: Table::new(bucket_table::BucketTable, db.clone(), system.clone()).unwrap(),
                aliases: Table::new(
                    bucket_alias_table::BucketAliasTable,
                    db.clone(),
                    system.clone(),
                )
                .unwrap(),
                keys: Table::new(key_table::KeyTable, db.clone(), system.clone()).unwrap(),
                encrypt_new_buckets: false,
                new_bucket_ownership: garage_model::access::ObjectOwnership::BucketOwnerEnforced,
            };
            m.buckets.spawn_workers(&exit);
            m.aliases.spawn_workers(&exit);
            m.keys.spawn_workers(&exit);
            // The other fully replicated tables: every node with a role
            // holds them, and a node that does not answer for one keeps
            // the others' syncs, so layout changes, from finishing.
            Table::new(
                garage_model::admin_token_table::AdminTokenTable,
                db.clone(),
                system.clone(),
            )
            .unwrap()
            .spawn_workers(&exit);
            Table::new(
                garage_model::kms::table::KmsKeyTable,
                db.clone(),
                system.clone(),
            )
            .unwrap()
            .spawn_workers(&exit);
            m
        };
        Gateway {
            system,
            metadata,
            db,
            rt,
            exit,
            exit_tx,
            _dir: dir,
        }
    }

    /// Starts, waits until node 0 sees it among `running` healthy nodes
    /// (the gateway included), gives it a gateway role and applies layout
    /// `version`, and waits until it has that layout.
    pub fn join(cluster: &Cluster, running: usize, version: u64) -> Gateway {
        let gw = Gateway::start(cluster);
        let id = gw.id();
        wait_until("node 0 sees the gateway", CLUSTER_DEADLINE, || {
            cluster.health(0).0.len() == running
        });
        cluster.garage_ok(0, &["layout", "assign", "-z", "dc1", "-g", &id[..16]]);
        cluster.garage_ok(0, &["layout", "apply", "--version", &version.to_string()]);
        wait_until("the gateway has the new layout", CLUSTER_DEADLINE, || {
            gw.system.layout().current().version == version
        });
        gw
    }

    pub fn id(&self) -> String {
        self.system.id().to_string()
    }

    pub fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.exit_tx.send(true);
    }
}
