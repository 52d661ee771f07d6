//! The "Bucket replication" worker: empties this node's replication
//! queue, every destination at once, each in order per key. A batch of a
//! destination's queue is split by key; keys go concurrently, the versions
//! of one key one after the other, and a key stops at its first version
//! that could not be sent (tried again after a back-off), so versions
//! reach the destination in the order they were queued. A version sent is
//! marked `COMPLETED` in its history entry, one the destination refused
//! `FAILED`; then it leaves the queue.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use garage_model::notify::outbox::Queued;
use garage_model::notify::Cause;
use garage_model::replication::remote_table::RemoteConfig;
use garage_model::replication::state::{DestStatus, ReplicationState};
use garage_model::replication::{decode, Task};
use garage_table::EmptyKey;
use garage_util::data::Uuid;
use garage_util::worker::backoff::Backoff;
use garage_util::worker::{Step, Worker, WorkerHandle, WorkerSpec};
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use super::send::{SendError, Target};
use crate::ctx::Api;

/// Versions taken from one destination's queue in one step.
const BATCH: usize = 128;
/// Keys of one batch sent at once (a small version costs a round trip to
/// the remote: at 50 ms, 32 at once send ~600 a second; a large one holds
/// at most 6 MiB of block data in flight).
const KEYS_AT_ONCE: usize = 32;
/// The wait after a failure, doubled after each failure in a row.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

struct DestState {
    backoff: Backoff,
    /// Logged once while it waits for a remote this node does not know.
    unknown_logged: bool,
}

impl Default for DestState {
    fn default() -> Self {
        Self {
            backoff: Backoff::new(RETRY_MIN, RETRY_MAX),
            unknown_logged: false,
        }
    }
}

pub struct ReplicationWorker {
    api: Arc<Api>,
    http: reqwest::Client,
    wake: Arc<Notify>,
    dests: HashMap<String, DestState>,
}

impl ReplicationWorker {
    pub fn new(api: Arc<Api>) -> Result<Self, String> {
        let wake = api.garage.writer.replicator.wake.clone();
        Ok(Self {
            http: super::send::client()?,
            api,
            wake,
            dests: HashMap::new(),
        })
    }

    fn next_retry(&self) -> Option<Instant> {
        self.dests
            .values()
            .filter_map(|d| d.backoff.retry_at())
            .min()
    }

    /// The remote `name` (this node's copy, else the cluster's): `None`
    /// while unknown, `Some(None)` once deleted.
    async fn remote(&self, name: &str) -> Result<Option<Option<RemoteConfig>>, String> {
        let table = &self.api.garage.remote_table;
        let mut r = table
            .get_local(&EmptyKey, &name.to_string())
            .await
            .map_err(|e| format!("cannot read remote {name}: {e}"))?;
        if r.is_none() {
            r = table.get(&EmptyKey, &name.to_string()).await.ok().flatten();
        }
        Ok(r.map(|r| r.live().cloned()))
    }
}

/// What one destination's turn did.
enum Outcome {
    Sent(usize),
    Nothing,
    Failed(String),
}

impl Worker for ReplicationWorker {
    fn spec(&self) -> WorkerSpec {
        let api = self.api.clone();
        WorkerSpec::new(
            "Bucket replication",
            "sends the versions of this node's replication queue to their destinations",
        )
        .queue(move || Ok(api.garage.writer.replicator.queue.len()))
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _must_exit: &watch::Receiver<bool>,
    ) -> Result<Step, String> {
        let queue = &self.api.garage.writer.replicator.queue;
        let backlog = queue.backlog();
        for (d, s) in self
            .dests
            .iter_mut()
            .filter(|(d, _)| !backlog.contains_key(*d))
        {
            s.backoff.idle();
            metrics::gauge!("replication_queued_versions", "destination" => d.clone()).set(0.0);
            metrics::gauge!("replication_lag_seconds", "destination" => d.clone()).set(0.0);
        }
        if backlog.is_empty() {
            handle.set_progress(None);
            return Ok(Step::Idle);
        }
        let mut turns = Vec::new();
        for (dest, b) in &backlog {
            metrics::gauge!("replication_queued_versions", "destination" => dest.clone())
                .set(b.events as f64);
            let state = self.dests.entry(dest.clone()).or_default();
            if state.backoff.waiting() {
                continue;
            }
            let Some((remote, bucket)) = dest.split_once('/') else {
                continue;
            };
            let remote = match self.remote(remote).await? {
                Some(Some(r)) => r,
                Some(None) => {
                    // Deleted: its versions fail (a resync sends them
                    // once a remote of that name is back).
                    let n = fail_all(&self.api, dest, "its remote was deleted").await?;
                    warn!(destination = %dest, "{n} version(s) marked FAILED: the remote was deleted");
                    continue;
                }
                None => {
                    let state = self.dests.entry(dest.clone()).or_default();
                    if !state.unknown_logged {
                        state.unknown_logged = true;
                        warn!(destination = %dest, "versions to replicate wait for a remote this node does not know yet");
                    }
                    continue;
                }
            };
            turns.push((dest.clone(), bucket.to_string(), remote));
        }
        let results = futures::future::join_all(turns.into_iter().map(|(dest, bucket, remote)| {
            let (api, http) = (self.api.clone(), self.http.clone());
            async move {
                let out = turn(&api, &http, &dest, &bucket, &remote).await;
                (dest, out)
            }
        }))
        .await;
        let mut sent = 0;
        for (dest, out) in results {
            let state = self.dests.entry(dest.clone()).or_default();
            match out {
                Outcome::Sent(n) => {
                    sent += n;
                    if state.backoff.succeeded() {
                        info!(destination = %dest, "replication destination reachable again");
                    }
                }
                Outcome::Nothing => {}
                Outcome::Failed(e) => {
                    let wait = state.backoff.failed();
                    metrics::counter!("replication_send_errors_total", "destination" => dest.clone())
                        .increment(1);
                    warn!(
                        destination = %dest,
                        failures = state.backoff.failures(),
                        retry_in_ms = wait.as_millis() as u64,
                        "cannot replicate versions: {e}"
                    );
                }
            }
        }
        handle.set_progress(Some(format!(
            "{} version(s) waiting for {} destination(s)",
            queue.len(),
            backlog.len()
        )));
        Ok(if sent > 0 { Step::Busy } else { Step::Idle })
    }

    async fn wait_for_work(&mut self) {
        let wake = self.wake.clone();
        let notified = wake.notified();
        match self.next_retry() {
            Some(at) => {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None if self.api.garage.writer.replicator.queue.is_empty() => notified.await,
            None => {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep(RETRY_MIN) => {}
                }
            }
        }
    }
}

/// One destination's turn: its next batch, by key.
async fn turn(
    api: &Arc<Api>,
    http: &reqwest::Client,
    dest: &str,
    bucket: &str,
    remote: &RemoteConfig,
) -> Outcome {
    let queue = &api.garage.writer.replicator.queue;
    let batch: Vec<(u64, Queued)> = match queue.peek(dest, BATCH) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(format!("cannot read the queue: {e}")),
    };
    let Some((_, first)) = batch.first() else {
        return Outcome::Nothing;
    };
    let now_ms = garage_util::time::now_msec();
    metrics::gauge!("replication_lag_seconds", "destination" => dest.to_string())
        .set(now_ms.saturating_sub(first.queued_ms) as f64 / 1000.0);
    // By key, in queue order.
    let mut keys: BTreeMap<(Uuid, String), Vec<(u64, Task)>> = BTreeMap::new();
    let mut undecodable = Vec::new();
    for (seq, q) in batch {
        match decode(&q) {
            Some(t) => keys
                .entry((t.bucket, t.key.clone()))
                .or_default()
                .push((seq, t)),
            None => undecodable.push(seq),
        }
    }
    if !undecodable.is_empty() {
        warn!(
            destination = dest,
            "{} unreadable queued version(s) dropped",
            undecodable.len()
        );
        if let Err(e) = queue.remove(dest, &undecodable) {
            return Outcome::Failed(format!("cannot update the queue: {e}"));
        }
    }
    let classes = storage_classes(api, dest, keys.keys().map(|(b, _)| *b)).await;
    let results: Vec<(Vec<u64>, Option<String>)> = futures::stream::iter(keys.into_values())
        .map(|tasks| {
            let classes = &classes;
            async move {
                let mut done = Vec::new();
                for (seq, task) in tasks {
                    let to = Target {
                        remote,
                        bucket,
                        storage_class: classes.get(&task.bucket).and_then(|c| c.as_deref()),
                    };
                    match one(api, http, dest, &to, &task).await {
                        Ok(()) => done.push(seq),
                        Err(e) => return (done, Some(e)),
                    }
                }
                (done, None)
            }
        })
        .buffer_unordered(KEYS_AT_ONCE)
        .collect()
        .await;
    let mut sent = 0;
    let mut error = None;
    for (done, err) in results {
        sent += done.len();
        if let Err(e) = queue.remove(dest, &done) {
            return Outcome::Failed(format!("cannot update the queue: {e}"));
        }
        if err.is_some() {
            error = err;
        }
    }
    match error {
        Some(e) if sent == 0 => Outcome::Failed(e),
        Some(e) => {
            warn!(destination = dest, "some versions wait: {e}");
            Outcome::Sent(sent)
        }
        None => Outcome::Sent(sent),
    }
}

/// Sends one version and records its state: `Ok` once it leaves the
/// queue (sent, refused, or gone), `Err` to try it again later.
async fn one(
    api: &Arc<Api>,
    http: &reqwest::Client,
    dest: &str,
    to: &Target<'_>,
    task: &Task,
) -> Result<(), String> {
    let h = match api.task_version(task).await {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let status = match api.send_version(http, to, task, &h).await {
        Ok(bytes) => {
            metrics::counter!("replication_versions_sent_total", "destination" => dest.to_string())
                .increment(1);
            metrics::counter!("replication_bytes_sent_total", "destination" => dest.to_string())
                .increment(bytes);
            DestStatus::Completed
        }
        Err(SendError::Refused(e)) => {
            metrics::counter!("replication_versions_failed_total", "destination" => dest.to_string())
                .increment(1);
            warn!(destination = dest, key = %task.key, "version not replicated, marked FAILED: {e}");
            DestStatus::Failed
        }
        Err(SendError::Transient(e)) => return Err(e),
    };
    mark(api, h, dest, status).await
}

/// Records `status` of `dest` in the version's history entry.
async fn mark(
    api: &Api,
    mut h: garage_model::history_table::HistoryEntry,
    dest: &str,
    status: DestStatus,
) -> Result<(), String> {
    use garage_util::crdt::Crdt;
    h.replication.merge(&ReplicationState::with(dest, status));
    api.writer
        .update_entries(None, Some(&h), &Cause::silent())
        .await
        .map_err(|e| format!("cannot record the version's replication state: {e}"))
}

/// Marks every version queued for `dest` FAILED and empties its queue.
async fn fail_all(api: &Api, dest: &str, why: &str) -> Result<u64, String> {
    let queue = &api.garage.writer.replicator.queue;
    let mut n = 0;
    loop {
        let batch = queue.peek(dest, 1000).map_err(|e| e.to_string())?;
        if batch.is_empty() {
            return Ok(n);
        }
        for (_, q) in &batch {
            let Some(task) = decode(q) else { continue };
            if let Ok(Some(h)) = api.task_version(&task).await {
                if let Err(e) = mark(api, h, dest, DestStatus::Failed).await {
                    warn!(destination = dest, key = %task.key, "{why}; {e}");
                }
            }
        }
        let seqs: Vec<u64> = batch.iter().map(|(s, _)| *s).collect();
        n += seqs.len() as u64;
        queue.remove(dest, &seqs).map_err(|e| e.to_string())?;
    }
}

/// The storage class each bucket's rule for `dest` names (this node's
/// copy of the buckets).
async fn storage_classes(
    api: &Api,
    dest: &str,
    buckets: impl Iterator<Item = Uuid>,
) -> HashMap<Uuid, Option<String>> {
    let mut out = HashMap::new();
    for b in buckets {
        if out.contains_key(&b) {
            continue;
        }
        let class = api
            .metadata
            .buckets
            .get_local(&EmptyKey, &b)
            .await
            .ok()
            .flatten()
            .and_then(|b| b.params().and_then(|p| p.replication.get().clone()))
            .and_then(|c| {
                c.rules
                    .into_iter()
                    .find(|r| r.destination.id() == dest)
                    .and_then(|r| r.destination.storage_class)
            });
        out.insert(b, class);
    }
    out
}
