//! Everything a running node holds: its metadata database, cluster
//! membership and tables.

use std::sync::Arc;

use crate::admin_token_table::AdminTokenTable;
use crate::block_ref_table::BlockRefTable;
use crate::bucket_alias_table::BucketAliasTable;
use crate::bucket_table::BucketTable;
use crate::counter_table::{CounterTable, LocalCounters};
use crate::helper::Metadata;
use crate::history_table::HistoryTable;
use crate::key_table::KeyTable;
use crate::kms::table::KmsKeyTable;
use crate::kms::Kms;
use crate::mpu_table::{MpuPartTable, MpuTable};
use crate::object_table::ObjectTable;
use crate::version_table::VersionTable;
use garage_block::manager::BlockManager;
use garage_block::rc::BlockRc;
use garage_block::BlockStore;
use garage_db::Db;
use garage_rpc::system::System;
use garage_table::{AnyTable, CasRegisters, InsertQueue, Table};
use garage_util::config::{Config, DataDirState, DataDirs};
use garage_util::data::Uuid;

/// Why a node's tables could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("metadata database: {0}")]
    Db(#[from] garage_db::Error),
    #[error("{0}")]
    Table(#[from] garage_table::Error),
    /// A bad `data_dir` list, with the configuration file it came from.
    #[error("data_dir in {file}: {why}")]
    DataDir { file: String, why: String },
}

/// How long a block nothing references is kept before it is deleted:
/// 10 minutes, or `GARAGE_BLOCK_DELETE_DELAY_SECS` (for tests).
fn block_delete_delay() -> std::time::Duration {
    garage_util::tuning::tuning().block_delete_delay
}

pub struct Garage {
    pub db: Db,
    /// The data blocks stored on this node, and their resync.
    pub block_manager: Arc<BlockManager>,
    pub system: Arc<System>,
    pub bucket_table: Arc<Table<BucketTable>>,
    pub bucket_alias_table: Arc<Table<BucketAliasTable>>,
    pub key_table: Arc<Table<KeyTable>>,
    /// Admin API tokens beyond the configured one.
    pub admin_token_table: Arc<Table<AdminTokenTable>>,
    /// The cluster's encryption keys (SSE-S3, SSE-KMS) and their use.
    pub kms: Arc<Kms>,
    pub object_table: Arc<Table<ObjectTable>>,
    pub version_table: Arc<Table<VersionTable>>,
    pub block_ref_table: Arc<Table<BlockRefTable>>,
    pub mpu_table: Arc<Table<MpuTable>>,
    /// The parts of uploads created since v0.3.0 (see [`crate::mpu_table`]).
    pub mpu_part_table: Arc<Table<MpuPartTable>>,
    pub counter_table: Arc<Table<CounterTable>>,
    /// Versions written with versioning enabled.
    pub history_table: Arc<Table<HistoryTable>>,
    /// Compare-and-set registers (conditional writes).
    pub cas_registers: Arc<CasRegisters>,
    /// Versions of an erasure-coded class with blocks stored replicated
    /// (written during an outage), waiting to be re-encoded.
    pub ec_catch_up: crate::ec_catch_up::EcCatchUp,
    /// The object-write protocol over the object, version, block
    /// reference, upload and history tables: every object write goes
    /// through it.
    pub writer: crate::object_write::ObjectWriter,
    /// Bucket notification topics.
    pub topic_table: Arc<Table<crate::notify::topic_table::TopicTable>>,
    /// Bucket replication remotes.
    pub remote_table: Arc<Table<crate::replication::remote_table::RemoteTable>>,
    /// IAM users, groups, policies and their access keys.
    pub iam: Arc<crate::iam::Iam>,
    /// Every table, for statistics, repairs and workers.
    pub tables: Vec<Arc<dyn AnyTable>>,
    /// `s3_api.encrypt_new_buckets`.
    pub encrypt_new_buckets: bool,
    /// `s3_api.new_bucket_object_ownership`.
    pub new_bucket_ownership: crate::access::ObjectOwnership,
    /// Where metadata snapshots go (`metadata_snapshots_dir`).
    pub metadata_snapshots_dir: std::path::PathBuf,
}

impl Garage {
    pub fn new(config: &Config, db: Db, system: Arc<System>) -> Result<Arc<Self>, OpenError> {
        let node = Uuid::from(system.id().0);
        let bucket_table = Table::new(BucketTable, db.clone(), system.clone())?;
        let bucket_alias_table = Table::new(BucketAliasTable, db.clone(), system.clone())?;
        let key_table = Table::new(KeyTable, db.clone(), system.clone())?;
        let admin_token_table = Table::new(AdminTokenTable, db.clone(), system.clone())?;
        let kms_table = Table::new(KmsKeyTable, db.clone(), system.clone())?;
        let kms = Kms::new(
            kms_table.clone(),
            config.rpc_secret.as_deref().unwrap_or_default(),
            config
                .sse_master_key
                .as_deref()
                .and_then(|h| hex::decode(h).ok())
                .and_then(|k| k.try_into().ok()),
        );
        let block_rc = BlockRc::open(&db, block_delete_delay().as_millis() as u64)?;
        let dirs = match &config.data_dir {
            DataDirs::Single(p) => garage_block::dirs::DataDirs::single(p),
            DataDirs::Multiple(v) => garage_block::dirs::DataDirs::new(
                v.iter()
                    .map(|d| garage_block::dirs::DataDir {
                        path: d.path.clone(),
                        capacity: match d.state {
                            DataDirState::Active { capacity } => Some(capacity),
                            DataDirState::ReadOnly => None,
                        },
                    })
                    .collect(),
            )
            .map_err(|e| OpenError::DataDir {
                file: config.source.to_string(),
                why: e.to_string(),
            })?,
        };
        let block_manager = BlockManager::new(
            system.clone(),
            Arc::new(BlockStore::new(dirs, config.data_fsync)),
            block_rc.clone(),
            config.compression_level,
        );
        let block_ref_table = Table::new(
            BlockRefTable {
                hook: Arc::new(block_rc.clone()),
            },
            db.clone(),
            system.clone(),
        )?;
        let version_table = Table::new(
            VersionTable {
                block_refs: InsertQueue::open(&db)?,
            },
            db.clone(),
            system.clone(),
        )?;
        let mpu_table = Table::new(
            MpuTable {
                versions: InsertQueue::open(&db)?,
                parts: InsertQueue::open(&db)?,
                parts_store: MpuPartTable::store(&db)?,
            },
            db.clone(),
            system.clone(),
        )?;
        let mpu_part_table = Table::new(
            MpuPartTable {
                versions: InsertQueue::open(&db)?,
                parts: InsertQueue::open(&db)?,
                uploads_store: MpuTable::store(&db)?,
            },
            db.clone(),
            system.clone(),
        )?;
        let counter_table = Table::new(CounterTable, db.clone(), system.clone())?;
        let history_table = Table::new(
            HistoryTable {
                versions: InsertQueue::open(&db)?,
            },
            db.clone(),
            system.clone(),
        )?;
        let object_table = Table::new(
            ObjectTable {
                node,
                versions: InsertQueue::open(&db)?,
                mpus: InsertQueue::open(&db)?,
                counters: InsertQueue::open(&db)?,
                local_counters: LocalCounters::open(&db)?,
            },
            db.clone(),
            system.clone(),
        )?;
        let cas_registers = CasRegisters::new(db.clone(), system.clone())?;
        object_table.use_registers(cas_registers.clone());
        let ec_catch_up = crate::ec_catch_up::EcCatchUp::open(&db)?;
        let topic_table = Table::new(
            crate::notify::topic_table::TopicTable,
            db.clone(),
            system.clone(),
        )?;
        let notifier = Arc::new(crate::notify::Notifier::new(
            crate::notify::outbox::Outbox::open(&db)?,
            topic_table.clone(),
            bucket_table.clone(),
            config.s3_api.s3_region.clone(),
            config
                .notify_max_queued_events
                .unwrap_or(crate::notify::DEFAULT_MAX_QUEUED),
        ));
        let remote_table = Table::new(
            crate::replication::remote_table::RemoteTable,
            db.clone(),
            system.clone(),
        )?;
        let replicator = Arc::new(crate::replication::Replicator::new(
            crate::notify::outbox::Outbox::open_named(&db, "replication_queue")?,
            remote_table.clone(),
            bucket_table.clone(),
            config
                .replication_max_queued_versions
                .unwrap_or(crate::replication::DEFAULT_MAX_QUEUED),
        ));
        let iam = Arc::new(crate::iam::Iam {
            users: Table::new(crate::iam::tables::UserTable, db.clone(), system.clone())?,
            groups: Table::new(crate::iam::tables::GroupTable, db.clone(), system.clone())?,
            policies: Table::new(crate::iam::tables::PolicyTable, db.clone(), system.clone())?,
            access_keys: Table::new(
                crate::iam::tables::AccessKeyTable,
                db.clone(),
                system.clone(),
            )?,
            roles: Table::new(crate::iam::tables::RoleTable, db.clone(), system.clone())?,
            providers: Table::new(
                crate::iam::tables::OidcProviderTable,
                db.clone(),
                system.clone(),
            )?,
            sessions: Table::new(crate::iam::tables::SessionTable, db.clone(), system.clone())?,
            keys: key_table.clone(),
            system: system.clone(),
        });
        let tables: Vec<Arc<dyn AnyTable>> = vec![
            bucket_table.clone(),
            bucket_alias_table.clone(),
            key_table.clone(),
            object_table.clone(),
            version_table.clone(),
            block_ref_table.clone(),
            mpu_table.clone(),
            mpu_part_table.clone(),
            counter_table.clone(),
            history_table.clone(),
            admin_token_table.clone(),
            kms_table,
            topic_table.clone(),
            remote_table.clone(),
            iam.users.clone(),
            iam.groups.clone(),
            iam.policies.clone(),
            iam.access_keys.clone(),
            iam.roles.clone(),
            iam.providers.clone(),
            iam.sessions.clone(),
        ];
        let writer = crate::object_write::ObjectWriter {
            objects: object_table.clone(),
            versions: version_table.clone(),
            block_refs: block_ref_table.clone(),
            mpus: mpu_table.clone(),
            parts: mpu_part_table.clone(),
            history: history_table.clone(),
            notifier,
            replicator,
        };
        Ok(Arc::new(Self {
            writer,
            metadata_snapshots_dir: config.metadata_snapshots_dir(),
            encrypt_new_buckets: config.s3_api.encrypt_new_buckets,
            new_bucket_ownership: {
                use crate::access::ObjectOwnership as O;
                use garage_util::config::NewBucketOwnership as N;
                match config.s3_api.new_bucket_object_ownership {
                    N::BucketOwnerEnforced => O::BucketOwnerEnforced,
                    N::BucketOwnerPreferred => O::BucketOwnerPreferred,
                    N::ObjectWriter => O::ObjectWriter,
                }
            },
            db,
            block_manager,
            system,
            bucket_table,
            bucket_alias_table,
            key_table,
            admin_token_table,
            kms,
            object_table,
            version_table,
            block_ref_table,
            mpu_table,
            mpu_part_table,
            counter_table,
            history_table,
            cas_registers,
            ec_catch_up,
            topic_table,
            remote_table,
            iam,
            tables,
        }))
    }

    /// The bucket, alias and key tables, for the admin operations.
    pub fn metadata(&self) -> Metadata {
        Metadata {
            buckets: self.bucket_table.clone(),
            aliases: self.bucket_alias_table.clone(),
            keys: self.key_table.clone(),
            encrypt_new_buckets: self.encrypt_new_buckets,
            new_bucket_ownership: self.new_bucket_ownership,
        }
    }
}
