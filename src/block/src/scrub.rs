//! Scrub: a background pass that reads every block file of this node and
//! checks it against its hash. A corrupted file is moved aside and the
//! block queued for resync, which fetches a good copy from a replica.
//!
//! The pass goes through the files in hash order and records the last hash
//! checked, so it resumes where it was after a restart. After each block
//! it sleeps `tranquility` times the time the block took, so that a scrub
//! uses about 1/(1+tranquility) of the disk. A pass starts every
//! [`SCRUB_INTERVAL`], or when asked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_db as db;
use garage_util::data::Hash;
use garage_util::time::now_msec;
use garage_util::worker::runner::{Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::ec::Shard;
use crate::manager::{BlockManager, Error, Result};
use crate::rc::queue_key;
use garage_rpc::layout::Placement;

/// Time between the start of two automatic passes.
pub const SCRUB_INTERVAL: Duration = Duration::from_secs(30 * 24 * 3600);
pub const DEFAULT_TRANQUILITY: u32 = 4;

/// Persisted scrub state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubState {
    /// Position of the pass in progress: the last block checked.
    pub cursor: Option<Hash>,
    /// Whether a pass is in progress.
    pub running: bool,
    pub paused: bool,
    pub tranquility: u32,
    /// When the last complete pass finished (ms), and what it found.
    pub last_completed: Option<u64>,
    pub checked: u64,
    pub corrupted: u64,
}

const STATE_KEY: &[u8] = b"scrub";

/// A shard found bad, and its code if its header still tells it.
type BadShard = (u8, Option<Placement>);

fn db_err(e: db::Error) -> Error {
    Error::Task(format!("metadata database: {e}"))
}

impl BlockManager {
    pub fn scrub_state(&self) -> Result<ScrubState> {
        let t = &self.rc.scrub;
        Ok(match t.get(STATE_KEY).map_err(db_err)? {
            Some(b) => rmp_serde::from_slice(&b).unwrap_or_default(),
            None => ScrubState {
                tranquility: DEFAULT_TRANQUILITY,
                ..Default::default()
            },
        })
    }

    pub fn set_scrub_state(&self, s: &ScrubState) -> Result<()> {
        let t = &self.rc.scrub;
        t.insert(STATE_KEY, rmp_serde::to_vec(s).expect("serializes"))
            .map_err(db_err)
    }

    /// Checks one block; returns false when the pass is over.
    pub async fn scrub_step(&self) -> Result<bool> {
        let mut st = self.scrub_state()?;
        if !st.running || st.paused {
            return Ok(false);
        }
        let store = self.store.clone();
        let cursor = st.cursor;
        let walk = store.clone();
        let next = tokio::task::spawn_blocking(move || walk.next_block_after(cursor))
            .await
            .map_err(|e| Error::Task(e.to_string()))?;
        let Some(hash) = next else {
            st.running = false;
            st.cursor = None;
            st.last_completed = Some(now_msec());
            info!(
                "scrub pass done: {} blocks checked, {} corrupted",
                st.checked, st.corrupted
            );
            self.set_scrub_state(&st)?;
            return Ok(false);
        };
        let started = Instant::now();
        let h = hash;
        let (bad, bad_shards) =
            tokio::task::spawn_blocking(move || -> Result<(bool, Vec<BadShard>)> {
                let bad = match store.read(&h)? {
                    Some(block) => block.verify_and_decode(&h).is_err(),
                    None => false,
                };
                // This node's shards of `h`, if it is an erasure-coded block.
                let mut bad_shards = Vec::new();
                for i in store.shard_indices(&h) {
                    let Some(bytes) = store.read_shard(&h, i)? else {
                        continue;
                    };
                    if Shard::parse(bytes.clone(), Some((&h, i))).is_err() {
                        bad_shards.push((i, crate::ec::code_of_damaged(&bytes, &h)));
                    }
                }
                Ok((bad, bad_shards))
            })
            .await
            .map_err(|e| Error::Task(e.to_string()))??;
        for (i, code) in bad_shards {
            st.corrupted += 1;
            metrics::counter!("block_corrupted_total", "found_by" => "scrub").increment(1);
            let aside = self.store.move_shard_aside(&hash, i)?;
            match code {
                Some(code) => {
                    warn!("scrub: shard {i} of {hash:?} is corrupted, moved aside to {aside:?}; rebuilding it");
                    self.repair_in_background(hash, code);
                }
                None => warn!("scrub: shard {i} of {hash:?} is corrupted beyond telling its code, moved aside to {aside:?}; the nodes counting the block's references rebuild it at their next check"),
            }
        }
        st.checked += 1;
        if bad {
            st.corrupted += 1;
            let aside = self.store.move_aside(&hash)?;
            warn!(
                "scrub: block {hash:?} is corrupted, moved aside to {aside:?}; fetching it again"
            );
            self.rc
                .resync_queue
                .insert(queue_key(now_msec(), &hash), [])
                .map_err(db_err)?;
        }
        st.cursor = Some(hash);
        self.set_scrub_state(&st)?;
        let pause = started.elapsed() * st.tranquility;
        tokio::time::sleep(pause).await;
        Ok(true)
    }

    /// Starts a pass now (from the beginning).
    pub fn scrub_start(&self) -> Result<()> {
        let mut st = self.scrub_state()?;
        st.running = true;
        st.paused = false;
        st.cursor = None;
        st.checked = 0;
        st.corrupted = 0;
        self.set_scrub_state(&st)?;
        self.scrub_changed.notify_one();
        Ok(())
    }

    /// Sets the scrub state as an operator asked (pause, resume, cancel,
    /// tranquility), and wakes the worker to act on it.
    pub fn change_scrub_state(&self, s: &ScrubState) -> Result<()> {
        self.set_scrub_state(s)?;
        self.scrub_changed.notify_one();
        Ok(())
    }
}

/// The scrub worker (`garage worker list`: "Block scrub worker"): a step
/// checks one block of the pass in progress; with none in progress, it
/// starts one when [`SCRUB_INTERVAL`] has passed since the last. Shown as
/// paused while an operator has paused the pass; woken at once when an
/// operator starts, pauses or resumes one.
pub(crate) struct ScrubWorker {
    pub(crate) manager: Arc<BlockManager>,
    /// How long to wait before looking again, once nothing was done.
    wait: Duration,
}

impl ScrubWorker {
    pub(crate) fn new(manager: Arc<BlockManager>) -> Self {
        Self {
            manager,
            wait: Duration::ZERO,
        }
    }
}

impl Worker for ScrubWorker {
    fn spec(&self) -> WorkerSpec {
        self.manager.scrub_worker_spec()
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        let m = &self.manager;
        let st = m.scrub_state().map_err(|e| e.to_string())?;
        handle.set_progress(st.running.then(|| format!("{} blocks checked", st.checked)));
        if !st.running {
            let due = st
                .last_completed
                .is_none_or(|t| now_msec() > t + SCRUB_INTERVAL.as_millis() as u64);
            if due {
                m.scrub_start()
                    .map_err(|e| format!("cannot start a pass: {e}"))?;
                return Ok(Step::Busy);
            }
            // The next pass is due later (an operator's start wakes the
            // worker at once).
            self.wait = Duration::from_secs(60);
            return Ok(Step::Idle);
        }
        // A paused pass, or one that ended, is looked at again in 10 s.
        self.wait = Duration::from_secs(10);
        if st.paused {
            return Ok(Step::Paused);
        }
        match m.scrub_step().await.map_err(|e| e.to_string())? {
            true => Ok(Step::Busy),
            false => Ok(Step::Idle),
        }
    }

    async fn wait_for_work(&mut self) {
        tokio::select! {
            _ = tokio::time::sleep(self.wait) => (),
            _ = self.manager.scrub_changed.notified() => (),
        }
    }

    fn retry_delays(&self) -> (Duration, Duration) {
        (Duration::from_secs(10), Duration::from_secs(60))
    }
}
