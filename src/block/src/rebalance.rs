//! Rebalance: after the data directories change, move every block to the
//! directory the placement now gives it. Runs in the background when the
//! daemon starts with a different set of directories than last time, or
//! when asked (`garage repair --yes rebalance`). Copies in read-only
//! directories are read but never deleted.

use std::sync::Arc;

use garage_db as db;
use garage_util::data::{blake2sum, Hash};
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

    /// Rebalances once at start if the data directories changed.
    /// It is a worker while it runs.
    pub async fn rebalance_if_dirs_changed(self: Arc<Self>, must_exit: watch::Receiver<bool>) {
        let worker = self
            .system
            .workers
            .register(garage_util::worker::WorkerSpec::new(
            "Block rebalance",
            "moves blocks to their directory after a change of data directories (once at start)",
        ));
        worker.set_state(garage_util::worker::WorkerState::Busy);
        let fp = self.dirs_fingerprint();
        let res = async {
            let t = self.rc.db().open_tree(STATE_TREE).map_err(db_err)?;
            let old = t.get(DIRS_KEY).map_err(db_err)?;
            if old.as_deref() == Some(fp.as_slice()) {
                return Ok(None);
            }
            if *must_exit.borrow() {
                return Ok(None);
            }
            let n = self.rebalance().await?;
            t.insert(DIRS_KEY, fp.as_slice()).map_err(db_err)?;
            Ok::<_, Error>(Some(n))
        }
        .await;
        match worker.outcome(res) {
            Ok(Some(n)) => info!("data directories changed: {n} blocks moved to their new place"),
            Ok(None) => (),
            Err(e) => warn!("rebalance after a data directory change failed: {e}"),
        }
    }
}

fn step_past(cursor: Option<Hash>, store: &crate::store::BlockStore) -> Option<Hash> {
    store.next_block_after(cursor)
}
