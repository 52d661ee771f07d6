//! Everything a running node holds: its configuration, metadata database,
//! cluster membership and tables.

use std::sync::Arc;

use garage_db::Db;
use garage_rpc::system::System;
use garage_table::AnyTable;
use garage_util::config::Config;

pub struct Garage {
    pub db: Db,
    pub system: Arc<System>,
    /// Every table, for statistics, repairs and workers.
    pub tables: Vec<Arc<dyn AnyTable>>,
}

impl Garage {
    pub fn new(_config: &Config, db: Db, system: Arc<System>) -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            db,
            system,
            tables: Vec::new(),
        }))
    }
}
