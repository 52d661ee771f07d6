//! Everything a running node holds: its metadata database, cluster
//! membership and tables.

use std::sync::Arc;

use garage_db::Db;
use garage_model::bucket_alias_table::BucketAliasTable;
use garage_model::bucket_table::BucketTable;
use garage_model::key_table::KeyTable;
use garage_rpc::system::System;
use garage_table::{AnyTable, Table};
use garage_util::config::Config;

pub struct Garage {
    pub db: Db,
    pub system: Arc<System>,
    pub bucket_table: Arc<Table<BucketTable>>,
    pub bucket_alias_table: Arc<Table<BucketAliasTable>>,
    pub key_table: Arc<Table<KeyTable>>,
    /// Every table, for statistics, repairs and workers.
    pub tables: Vec<Arc<dyn AnyTable>>,
}

impl Garage {
    pub fn new(_config: &Config, db: Db, system: Arc<System>) -> anyhow::Result<Arc<Self>> {
        let bucket_table = Table::new(BucketTable, db.clone(), system.clone())?;
        let bucket_alias_table = Table::new(BucketAliasTable, db.clone(), system.clone())?;
        let key_table = Table::new(KeyTable, db.clone(), system.clone())?;
        let tables: Vec<Arc<dyn AnyTable>> = vec![
            bucket_table.clone(),
            bucket_alias_table.clone(),
            key_table.clone(),
        ];
        Ok(Arc::new(Self {
            db,
            system,
            bucket_table,
            bucket_alias_table,
            key_table,
            tables,
        }))
    }
}
