//! The resync worker: makes this node's block files match its reference
//! counts. A referenced block that is missing is fetched from a replica;
//! an unreferenced one is deleted once its delay has passed, after making
//! sure no other node that should hold it still lacks it. Failures are
//! retried with a doubling backoff, recorded in the database so that they
//! survive restarts and can be listed.

use std::sync::Arc;
use std::time::Duration;

use garage_db as db;
use garage_rpc::layout::LayoutVersion;
use garage_util::data::Hash;
use garage_util::time::now_msec;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::block::DataBlock;
use crate::manager::{BlockManager, Error, Result};
use crate::rc::{queue_key, RcEntry};

/// First retry delay after a failure; doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// How long the worker sleeps when nothing is due.
const IDLE: Duration = Duration::from_secs(1);

/// A block whose resync failed: how many times, and when it is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResyncError {
    pub failures: u64,
    pub last_try: u64,
    pub next_try: u64,
}

/// What one resync step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Nothing,
    Fetched,
    Deleted,
    NotYet,
}

impl BlockManager {
    fn errors_tree(&self) -> db::Result<db::Tree> {
        self.rc.db().open_tree("block_resync_errors")
    }

    /// Blocks whose resync failed, with their retry state.
    pub fn resync_errors(&self) -> db::Result<Vec<(Hash, ResyncError)>> {
        let t = self.errors_tree()?;
        let mut out = Vec::new();
        for item in t.iter() {
            let (k, v) = item?;
            if let (Some(h), Ok(e)) = (Hash::try_from_slice(&k), rmp_serde::from_slice(&v)) {
                out.push((h, e));
            }
        }
        Ok(out)
    }

    /// Runs the resync queue until `must_exit`.
    pub async fn resync_loop(self: Arc<Self>, mut must_exit: watch::Receiver<bool>) {
        while !*must_exit.borrow() {
            let delay = match self.resync_next().await {
                Ok(true) => Duration::ZERO,
                Ok(false) => IDLE,
                Err(e) => {
                    warn!("block resync: {e}");
                    IDLE
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(delay) => (),
                _ = must_exit.changed() => (),
            }
        }
    }

    /// Handles the first due item of the queue; false when none is due.
    pub async fn resync_next(&self) -> Result<bool> {
        let now = now_msec();
        let Some((key, _)) = self.rc.resync_queue.first().map_err(to_err)? else {
            return Ok(false);
        };
        let due = u64::from_be_bytes(key[..8].try_into().expect("queue key"));
        if due > now {
            return Ok(false);
        }
        let Some(hash) = Hash::try_from_slice(&key[8..]) else {
            self.rc.resync_queue.remove(&key).map_err(to_err)?;
            return Ok(true);
        };
        let res = self.resync_block(&hash).await;
        self.rc.resync_queue.remove(&key).map_err(to_err)?;
        let errors = self.errors_tree().map_err(to_err)?;
        match res {
            Ok(Outcome::NotYet) => (),
            Ok(o) => {
                errors.remove(hash.as_slice()).map_err(to_err)?;
                if o != Outcome::Nothing {
                    debug!("block {hash:?} resynced: {o:?}");
                }
            }
            Err(e) => {
                let prev: Option<ResyncError> = errors
                    .get(hash.as_slice())
                    .map_err(to_err)?
                    .and_then(|v| rmp_serde::from_slice(&v).ok());
                let failures = prev.map(|p| p.failures).unwrap_or(0) + 1;
                let backoff = (MIN_BACKOFF * (1u32 << failures.min(12) as u32)).min(MAX_BACKOFF);
                let next = now + backoff.as_millis() as u64;
                let rec = ResyncError {
                    failures,
                    last_try: now,
                    next_try: next,
                };
                errors
                    .insert(
                        hash.as_slice(),
                        rmp_serde::to_vec(&rec).expect("serializes"),
                    )
                    .map_err(to_err)?;
                self.rc
                    .resync_queue
                    .insert(queue_key(next, &hash), [])
                    .map_err(to_err)?;
                info!(
                    "block {hash:?} resync failed ({failures} times), retrying in {backoff:?}: {e}"
                );
            }
        }
        Ok(true)
    }

    /// Makes the local copy of `hash` match its reference count.
    pub async fn resync_block(&self, hash: &Hash) -> Result<Outcome> {
        let present = self.has_block(*hash).await?;
        match self.rc.get(hash).map_err(to_err)? {
            Some(RcEntry::Present { .. }) if !present => {
                let data = self.get_block(hash).await?;
                let level = self.compression_level;
                let store = self.store.clone();
                let h = *hash;
                tokio::task::spawn_blocking(move || {
                    store.write(&h, &DataBlock::from_plain(data, level))
                })
                .await
                .map_err(|e| Error::Task(e.to_string()))??;
                Ok(Outcome::Fetched)
            }
            Some(RcEntry::Deletable { deletable_after }) if present => {
                if now_msec() < deletable_after {
                    self.rc
                        .resync_queue
                        .insert(queue_key(deletable_after, hash), [])
                        .map_err(to_err)?;
                    return Ok(Outcome::NotYet);
                }
                self.hand_over(hash).await?;
                let store = self.store.clone();
                let h = *hash;
                tokio::task::spawn_blocking(move || store.delete(&h))
                    .await
                    .map_err(|e| Error::Task(e.to_string()))??;
                self.rc.clear_deleted(hash).map_err(to_err)?;
                Ok(Outcome::Deleted)
            }
            Some(RcEntry::Deletable { .. }) => {
                self.rc.clear_deleted(hash).map_err(to_err)?;
                Ok(Outcome::Nothing)
            }
            _ => Ok(Outcome::Nothing),
        }
    }

    /// Before deleting our copy: every node that should hold the block and
    /// still references it but lacks it gets it from us.
    async fn hand_over(&self, hash: &Hash) -> Result<()> {
        let layout = self.system.layout();
        let me = self.system.id();
        let partition = LayoutVersion::partition_of(hash.as_slice());
        for node in layout.all_storage_nodes_of(partition) {
            if node == me {
                continue;
            }
            if self.need_block(&node, hash).await? {
                let data = self.get_block(hash).await?;
                self.put_to(&node, hash, data).await?;
            }
        }
        Ok(())
    }
}

fn to_err(e: db::Error) -> Error {
    Error::Task(format!("metadata database: {e}"))
}
