//! The block manager's workers (resync, scrub, rebalance) and their
//! tunable variables, registered with the node's worker registry.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use garage_util::worker::runner;
use garage_util::worker::WorkerSpec;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::manager::BlockManager;

impl BlockManager {
    /// Registers the variables `resync-tranquility`, `resync-worker-count`
    /// and `scrub-tranquility`, then starts the resync workers, the scrub
    /// worker, the shard placement worker, the rebalance check and the
    /// census worker, registered in that order, and the retry of blocks in error when a
    /// peer comes back.
    pub fn spawn_workers(
        self: &Arc<Self>,
        must_exit: &watch::Receiver<bool>,
    ) -> Vec<JoinHandle<()>> {
        self.register_variables();
        let n = self.resync_settings.workers.load(Ordering::Relaxed);
        let first = (0..n)
            .map(|i| self.spawn_resync_worker(i, must_exit))
            .collect();
        let registry = &self.system.workers;
        let scrub = runner::spawn(
            registry,
            crate::scrub::ScrubWorker::new(self.clone()),
            must_exit.clone(),
        );
        let placement = runner::spawn(
            registry,
            crate::placement::ShardPlacementWorker::new(self.clone()),
            must_exit.clone(),
        );
        vec![
            tokio::spawn(self.clone().resync_loop(first, must_exit.clone())),
            scrub,
            placement,
            runner::spawn(
                &self.system.workers,
                crate::rebalance::RebalanceWorker::new(self.clone()),
                must_exit.clone(),
            ),
            runner::spawn(
                &self.system.workers,
                crate::census::CensusWorker::new(self.clone()),
                must_exit.clone(),
            ),
            tokio::spawn(
                self.clone()
                    .retry_errors_when_peers_return(must_exit.clone()),
            ),
        ]
    }

    /// What `garage worker list` shows of the scrub worker.
    pub(crate) fn scrub_worker_spec(self: &Arc<Self>) -> WorkerSpec {
        let m = Arc::downgrade(self);
        WorkerSpec::new(
            "Block scrub worker",
            "reads every block file and checks its hash",
        )
        .details(move || {
            let Some(m) = m.upgrade() else {
                return vec![];
            };
            let sc = match m.scrub_state() {
                Ok(sc) => sc,
                Err(e) => return vec![("Scrub state".into(), e.to_string())],
            };
            vec![
                ("scrub-tranquility".into(), sc.tranquility.to_string()),
                ("Blocks checked in this pass".into(), sc.checked.to_string()),
                ("Corrupted blocks found".into(), sc.corrupted.to_string()),
                (
                    "Last complete pass".into(),
                    sc.last_completed
                        .map(garage_util::time::rfc3339)
                        .unwrap_or_else(|| "never".into()),
                ),
                (
                    "Cursor".into(),
                    sc.cursor.map(|c| c.hex()).unwrap_or_else(|| "start".into()),
                ),
            ]
        })
    }

    /// The tunable variables, held by weak references: the registry lives
    /// in `System`, which the block manager holds.
    fn register_variables(self: &Arc<Self>) {
        let w = &self.system.workers;
        let m = Arc::downgrade(self);
        w.register_variable(
            "resync-tranquility",
            "after each block, a resync worker waits this many times the time the block took",
            getter(&m, |m| {
                Ok(m.resync_settings
                    .tranquility
                    .load(Ordering::Relaxed)
                    .to_string())
            }),
            setter(&m, |m, v| {
                let n: u32 = number(v)?;
                m.resync_settings
                    .set_tranquility(n)
                    .map_err(|e| e.to_string())?;
                Ok(n.to_string())
            }),
        );
        w.register_variable(
            "resync-worker-count",
            "how many blocks are resynced at once",
            getter(&m, |m| {
                Ok(m.resync_settings
                    .workers
                    .load(Ordering::Relaxed)
                    .to_string())
            }),
            setter(&m, |m, v| {
                let n: usize = number(v)?;
                m.resync_settings.set_workers(n)?;
                Ok(n.to_string())
            }),
        );
        w.register_variable(
            "scrub-tranquility",
            "after each block, the scrub waits this many times the time the block took",
            getter(&m, |m| {
                Ok(m.scrub_state()
                    .map_err(|e| e.to_string())?
                    .tranquility
                    .to_string())
            }),
            setter(&m, |m, v| {
                let n: u32 = number(v)?;
                let mut sc = m.scrub_state().map_err(|e| e.to_string())?;
                sc.tranquility = n;
                m.change_scrub_state(&sc).map_err(|e| e.to_string())?;
                Ok(n.to_string())
            }),
        );
    }
}

fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a whole number in range"))
}

const GONE: &str = "the block manager is shut down";

fn getter(
    m: &Weak<BlockManager>,
    f: impl Fn(&BlockManager) -> Result<String, String> + Send + Sync + 'static,
) -> impl Fn() -> Result<String, String> + Send + Sync + 'static {
    let m = m.clone();
    move || {
        let m = m.upgrade().ok_or(GONE)?;
        f(&m)
    }
}

fn setter(
    m: &Weak<BlockManager>,
    f: impl Fn(&BlockManager, &str) -> Result<String, String> + Send + Sync + 'static,
) -> impl Fn(&str) -> Result<String, String> + Send + Sync + 'static {
    let m = m.clone();
    move |v| {
        let m = m.upgrade().ok_or(GONE)?;
        f(&m, v)
    }
}
