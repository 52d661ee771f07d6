//! Rebalance: after the data directories change, move every block to the
//! directory the placement now gives it. Runs in the background when the
//! daemon starts with a different set of directories than last time, or
//! when asked (`garage repair --yes rebalance`). Copies in read-only
//! directories are read but never deleted.

use std::sync::Arc;

use garage_db as db;
use garage_util::data::{blake2sum, Hash};
use garage_util::worker::{Step, Worker, WorkerHandle, WorkerSpec};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::manager::{BlockManager, Error, Result};

const STATE_TREE: &str = "block_rebalance";
const DIRS_KEY: &[u8] = b"dirs_fingerprint";

fn db_err(e: db::Error) -> Error {
    Error::Task(format!("metadata database: {e}"))
}

impl BlockManager {
    /// A hash of the data directories and their capacities.
    fn dirs_fingerprint(&self) -> Hash {
        let desc: Vec<String> = self
            .store
            .dirs
            .dirs()
            .iter()
            .map(|d| format!("{}={:?}", d.path.display(), d.capacity))
            .collect();
        blake2sum(desc.join("\n").as_bytes())
    }

    /// Moves every misplaced block; returns how many moved.
    pub async fn rebalance(&self) -> Result<usize> {
        let mut cursor = None;
        let mut moved = 0;
        loop {
            let store = self.store.clone();
            let step = tokio::task::spawn_blocking(move || -> Result<Option<(Hash, bool)>> {
                let Some(h) = store.next_block_after(cursor) else {
                    return Ok(None);
                };
                Ok(Some((h, store.relocate(&h)?)))
            })
            .await
            .map_err(|e| Error::Task(e.to_string()))?;
            match step {
                Ok(None) => return Ok(moved),
                Ok(Some((h, m))) => {
                    moved += m as usize;
                    cursor = Some(h);
                }
                Err(e) => {
                    // A corrupted or unreadable block stays where it is;
                    // scrub and resync deal with it.
                    warn!("rebalance: {e}");
                    cursor = step_past(cursor, &self.store);
                    if cursor.is_none() {
                        return Ok(moved);
                    }
                }
            }
        }
    }
}

/// Rebalances once at start if the data directories changed since the
/// last run (their fingerprint is kept in the metadata database), then
/// leaves the worker list. A failed rebalance is tried again after the
/// runner's back-off; stopped by the node's exit between two blocks (each
/// block's move runs to its end on the blocking pool).
pub struct RebalanceWorker {
    manager: Arc<BlockManager>,
}

impl RebalanceWorker {
    pub fn new(manager: Arc<BlockManager>) -> Self {
        Self { manager }
    }
}

impl Worker for RebalanceWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            "Block rebalance",
            "moves blocks to their directory after a change of data directories (once at start)",
        )
    }

    async fn work(
        &mut self,
        _: &WorkerHandle,
        must_exit: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        let m = &self.manager;
        let fp = m.dirs_fingerprint();
        let t =
            m.rc.db()
                .open_tree(STATE_TREE)
                .map_err(|e| db_err(e).to_string())?;
        let old = t.get(DIRS_KEY).map_err(|e| db_err(e).to_string())?;
        if old.as_deref() == Some(fp.as_slice()) || *must_exit.borrow() {
            return Ok(Step::Finished);
        }
        let n = m
            .rebalance()
            .await
            .map_err(|e| format!("rebalance after a data directory change failed: {e}"))?;
        t.insert(DIRS_KEY, fp.as_slice())
            .map_err(|e| db_err(e).to_string())?;
        info!("data directories changed: {n} blocks moved to their new place");
        Ok(Step::Finished)
    }

    /// Never idle: its one step finishes or fails.
    async fn wait_for_work(&mut self) {
        std::future::pending::<()>().await
    }
}

fn step_past(cursor: Option<Hash>, store: &crate::store::BlockStore) -> Option<Hash> {
    store.next_block_after(cursor)
}
