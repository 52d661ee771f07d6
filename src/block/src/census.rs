//! What this node stores, counted by placement: the files and bytes on its
//! data directories of the replicated blocks and of each erasure code or
//! placed class, and of those how many are held outside every live layout
//! version (they wait for the shard placement pass, or for the resync's
//! offload, to hand them to their new node). The second count is the
//! progress of a move: a layout change, or a class whose zones changed.
//!
//! A census walks the data directories once, reading the first bytes of
//! each shard file (its header names its placement) and the length of
//! each file; it does not read block contents. The census worker takes one
//! shortly after each layout change, every
//! `GARAGE_BLOCK_CENSUS_INTERVAL_SECS` (15 minutes), and while files wait
//! to be handed over every 30 seconds (or ten times as long as the last
//! census took, if that is longer; never less often than the interval).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_net::NodeId;
use garage_rpc::layout::{LayoutHistory, LayoutVersion, Placement};
use garage_util::time::now_msec;
use garage_util::worker::runner::{Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use tokio::sync::watch;

use crate::ec;
use crate::manager::{blocking, BlockManager};
use crate::store::{BlockStore, StoredFile};

/// Time between two censuses while files wait to be handed over.
const MOVING_INTERVAL: Duration = Duration::from_secs(30);
/// How long after a layout change the census runs (the placement pass
/// starts first).
const AFTER_LAYOUT_CHANGE: Duration = Duration::from_secs(5);

/// Files of one placement on this node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub files: u64,
    pub bytes: u64,
    /// Of those, the files stored outside every live layout version's
    /// nodes for them: to be handed over, then deleted here.
    pub to_hand_over_files: u64,
    pub to_hand_over_bytes: u64,
}

impl Usage {
    fn add(&mut self, len: u64, misplaced: bool) {
        self.files += 1;
        self.bytes += len;
        if misplaced {
            self.to_hand_over_files += 1;
            self.to_hand_over_bytes += len;
        }
    }
}

/// One count of this node's files (see the module).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// When it was taken (ms since the epoch), and how long it took.
    pub taken_at: u64,
    pub took: Duration,
    /// The newest layout version it was taken against.
    pub layout_version: u64,
    /// Whole blocks (replicated, `STANDARD`, and the replicated fallback
    /// of erasure-coded classes).
    pub replicated: Usage,
    /// Shards, by their placement (code and class scope).
    pub placed: BTreeMap<Placement, Usage>,
    /// Shard files whose header could not be read (the scrub's business).
    pub unreadable: u64,
}

impl Census {
    /// Files waiting to be handed over, of every placement.
    pub fn to_hand_over_files(&self) -> u64 {
        self.replicated.to_hand_over_files
            + self
                .placed
                .values()
                .map(|u| u.to_hand_over_files)
                .sum::<u64>()
    }
}

/// The first bytes of the file at `path`, up to `buf`'s length.
fn read_prefix(path: &Path, buf: &mut [u8]) -> Option<usize> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    Some(n)
}

/// Counts the files of `store` as node `me` holds them under `layout`
/// (blocking: it walks the data directories).
pub fn take(store: &BlockStore, layout: &LayoutHistory, me: NodeId) -> Census {
    let start = Instant::now();
    let mut c = Census {
        taken_at: now_msec(),
        layout_version: layout.current().version,
        ..Default::default()
    };
    let mut buf = [0u8; ec::PEEK_LEN];
    store.walk_files(|file, path, len| match file {
        StoredFile::Block(hash) => {
            let p = LayoutVersion::partition_of(hash.as_slice());
            let here = layout.live_versions().any(|v| v.nodes_of(p).contains(&me));
            c.replicated.add(len, !here);
        }
        StoredFile::Shard(addr, index) => {
            let code = read_prefix(path, &mut buf).and_then(|n| ec::peek_placement(&buf[..n]));
            let Some(code) = code else {
                c.unreadable += 1;
                return;
            };
            let p = LayoutVersion::partition_of(addr.as_slice());
            let holders: Vec<NodeId> = layout
                .live_versions()
                .filter_map(|v| v.shard_nodes(code, p))
                .filter_map(|nodes| nodes.get(index as usize).copied())
                .collect();
            // No live ring for the code: the placement pass keeps the
            // shard where it is, so it does not wait for anything.
            let misplaced = !holders.is_empty() && !holders.contains(&me);
            c.placed.entry(code).or_default().add(len, misplaced);
        }
    });
    c.took = start.elapsed();
    c
}

impl BlockManager {
    /// The last census of this node's files, if one was taken since it
    /// started.
    pub fn census(&self) -> Option<Arc<Census>> {
        self.census
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes a census now and keeps it as the last one.
    pub async fn take_census(&self) -> crate::manager::Result<Arc<Census>> {
        let (store, layout, me) = (self.store.clone(), self.system.layout(), self.system.id());
        let c = Arc::new(blocking(move || take(&store, &layout, me)).await?);
        *self.census.lock().unwrap_or_else(|e| e.into_inner()) = Some(c.clone());
        Ok(c)
    }
}

/// The census worker (`garage worker list`: "Block census worker").
pub(crate) struct CensusWorker {
    manager: Arc<BlockManager>,
    layouts: watch::Receiver<Arc<LayoutHistory>>,
    next: Instant,
}

impl CensusWorker {
    pub(crate) fn new(manager: Arc<BlockManager>) -> Self {
        let layouts = manager.system.subscribe_layout();
        Self {
            manager,
            layouts,
            next: Instant::now() + AFTER_LAYOUT_CHANGE,
        }
    }
}

impl Worker for CensusWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            "Block census worker",
            "counts the block files this node stores by storage class, and those waiting to be handed over",
        )
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        if Instant::now() < self.next {
            return Ok(Step::Idle);
        }
        let c = self
            .manager
            .take_census()
            .await
            .map_err(|e| e.to_string())?;
        let moving = c.to_hand_over_files();
        let every = garage_util::tuning::tuning().block_census_interval;
        let interval = if moving > 0 {
            MOVING_INTERVAL.max(c.took * 10).min(every)
        } else {
            every
        };
        self.next = Instant::now() + interval;
        let files = c.replicated.files + c.placed.values().map(|u| u.files).sum::<u64>();
        handle.set_progress(Some(format!(
            "layout v{}: {files} files counted in {} ms, {moving} to hand over",
            c.layout_version,
            c.took.as_millis()
        )));
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        let wait = self.next.saturating_duration_since(Instant::now());
        tokio::select! {
            r = self.layouts.changed() => {
                if r.is_err() {
                    std::future::pending::<()>().await
                }
                self.next = self.next.min(Instant::now() + AFTER_LAYOUT_CHANGE);
            }
            _ = tokio::time::sleep(wait) => (),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_files_and_what_waits_to_be_handed_over() {
        let mut u = Usage::default();
        u.add(100, false);
        u.add(50, true);
        assert_eq!(
            u,
            Usage {
                files: 2,
                bytes: 150,
                to_hand_over_files: 1,
                to_hand_over_bytes: 50
            }
        );
        let mut c = Census {
            replicated: u,
            ..Default::default()
        };
        c.placed.insert(
            Placement::from("2+1".parse::<garage_rpc::layout::EcCode>().unwrap()),
            u,
        );
        assert_eq!(c.to_hand_over_files(), 2);
    }
}
