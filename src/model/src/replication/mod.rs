//! Bucket replication, the model's half: remotes (the
//! `replication_remote` table), a bucket's rules ([`config`], in its
//! entry), each version's state ([`state`], in its history entry), and
//! this node's queue of versions to send. The object-write protocol
//! ([`crate::object_write`]) asks [`Replicator::plan`] before writing a
//! new version (the history entry is written with the destinations
//! pending) and calls [`Replicator::enqueue`] once it is written, before
//! the client is answered. The sending worker is the S3 crate's (it reads
//! versions as GetObject does): `garage_api::replication`.
//!
//! Sent: versions written with versioning enabled by PutObject,
//! PostObject, CopyObject, CompleteMultipartUpload and conditional writes,
//! and (with `DeleteMarkerReplication`) the delete markers of
//! DeleteObject(s), never versions written by replication itself (a
//! replica), nor lifecycle's delete markers, nor deletions of a version by
//! its id (as AWS). At least once, in order per key from one node.

pub mod config;
pub mod remote_table;
pub mod state;

use std::sync::Arc;

use garage_table::{EmptyKey, Table};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tracing::error;

use crate::bucket_table::{BucketTable, Versioning};
use crate::notify::outbox::{Outbox, Queued};
use crate::notify::{Cause, Op};
use crate::object_table::{ObjectVersion, ObjectVersionData, ObjectVersionState};
use remote_table::RemoteTable;

/// Versions the queue holds at most by default
/// (`replication_max_queued_versions`).
pub const DEFAULT_MAX_QUEUED: u64 = 10_000_000;

/// The stored header of a version written by replication (a replica), and
/// the response header of every replicated version's state.
pub const STATUS_HEADER: &str = "x-amz-replication-status";

/// One version to send to one destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub bucket: Uuid,
    pub key: String,
    /// The version: its stamp and id (its history entry's key).
    pub timestamp: u64,
    pub uuid: Uuid,
    /// A delete marker.
    pub marker: bool,
}

impl Task {
    pub fn of(bucket: Uuid, key: &str, v: &ObjectVersion) -> Self {
        Self {
            bucket,
            key: key.to_string(),
            timestamp: v.timestamp,
            uuid: v.uuid,
            marker: matches!(
                v.state,
                ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
            ),
        }
    }
}

/// Decides which destinations new versions go to, and queues them.
pub struct Replicator {
    pub queue: Outbox,
    pub remotes: Arc<Table<RemoteTable>>,
    buckets: Arc<Table<BucketTable>>,
    max_queued: u64,
    /// Woken when versions are queued.
    pub wake: Arc<Notify>,
}

impl Replicator {
    pub fn new(
        queue: Outbox,
        remotes: Arc<Table<RemoteTable>>,
        buckets: Arc<Table<BucketTable>>,
        max_queued: u64,
    ) -> Self {
        Self {
            queue,
            remotes,
            buckets,
            max_queued,
            wake: Arc::new(Notify::new()),
        }
    }

    /// The destinations (`REMOTE/BUCKET`) version `v` of `key` goes to,
    /// from this node's copy of the bucket's rules: none for a write that
    /// is not replicated (see the module).
    pub async fn plan(
        &self,
        bucket: Uuid,
        key: &str,
        v: &ObjectVersion,
        cause: &Cause,
    ) -> Vec<String> {
        let sent = matches!(
            cause.op,
            Op::Put | Op::Post | Op::Copy | Op::CompleteMultipartUpload | Op::Delete
        );
        if !sent || cause.replica || !v.in_history() || v.versioning != Versioning::Enabled {
            return Vec::new();
        }
        let (tags, marker) = match &v.state {
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker) => (Vec::new(), true),
            ObjectVersionState::Complete(
                ObjectVersionData::Inline(m, _) | ObjectVersionData::FirstBlock(m, _),
            ) => (crate::tags::written_tags(&m.headers), false),
            _ => return Vec::new(),
        };
        let b = match self.buckets.get_local(&EmptyKey, &bucket).await {
            Ok(Some(b)) => b,
            Ok(None) => return Vec::new(),
            Err(e) => {
                error!(%key, "cannot read the bucket's replication rules: {e}");
                return Vec::new();
            }
        };
        let Some(config) = b.params().and_then(|p| p.replication.get().as_ref()) else {
            return Vec::new();
        };
        config
            .destinations(key, &tags, marker)
            .into_iter()
            .map(|d| d.id())
            .collect()
    }

    /// Queues `task` for `dests`, in one commit (following
    /// `metadata_fsync`). Errors are logged and counted, never returned:
    /// the write is done; the version stays `PENDING` and
    /// `garage bucket replication resync` sends it.
    pub async fn enqueue(&self, task: &Task, dests: &[String]) {
        if dests.is_empty() {
            return;
        }
        let n = dests.len() as u64;
        if self.queue.len() + n > self.max_queued {
            self.lost(
                task,
                n,
                &format!(
                    "the queue holds {} versions, its bound (replication_max_queued_versions) is {}",
                    self.queue.len(),
                    self.max_queued
                ),
            );
            return;
        }
        let record = serde_json::to_string(task).expect("a task encodes");
        let now = garage_util::time::now_msec();
        let items = dests
            .iter()
            .map(|d| {
                (
                    d.clone(),
                    Queued {
                        key: task.key.clone(),
                        queued_ms: now,
                        record: record.clone(),
                    },
                )
            })
            .collect();
        match self.queue.push(items).await {
            Ok(()) => {
                metrics::counter!("replication_versions_queued_total").increment(n);
                self.wake.notify_one();
            }
            Err(e) => self.lost(task, n, &format!("cannot queue it: {e}")),
        }
    }

    fn lost(&self, task: &Task, n: u64, why: &str) {
        metrics::counter!("replication_versions_not_queued_total").increment(n);
        error!(
            key = %task.key,
            "a version to replicate to {n} destination(s) was not queued (it stays PENDING until `garage bucket replication resync`): {why}"
        );
    }
}

/// A queued task, decoded.
pub fn decode(q: &Queued) -> Option<Task> {
    serde_json::from_str(&q.record).ok()
}

/// What a resync queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resynced {
    /// Versions of the bucket looked at.
    pub versions: u64,
    /// (version, destination) pairs queued.
    pub queued: u64,
}

impl Replicator {
    /// Queues on this node the bucket's versions that its current rules
    /// send somewhere and that the destination does not have as far as
    /// their state says (pending, failed, or never sent: versions written
    /// before the rules); with `all`, every one (a destination that lost
    /// data). Reads the bucket's history a page at a time.
    pub async fn resync(
        &self,
        history: &Table<crate::history_table::HistoryTable>,
        bucket: Uuid,
        all: bool,
    ) -> Result<Resynced, garage_table::Error> {
        const PAGE: usize = 1000;
        let b = self.buckets.get(&EmptyKey, &bucket).await?;
        let Some(config) = b
            .as_ref()
            .and_then(|b| b.params())
            .and_then(|p| p.replication.get().clone())
        else {
            return Ok(Resynced::default());
        };
        let mut out = Resynced::default();
        let mut start = None;
        loop {
            let page = history
                .get_range(&bucket, start.clone(), None, PAGE + 1, false)
                .await?;
            let more = page.len() > PAGE;
            for h in page.iter().take(PAGE) {
                if h.is_deleted() || h.replication.replica {
                    continue;
                }
                let task = Task::of(bucket, &h.key, &h.version);
                let tags = match &h.tags.get() {
                    Some(t) => t.clone(),
                    None => crate::tags::stored_tags(&h.version),
                };
                let dests: Vec<String> = config
                    .destinations(&h.key, &tags, task.marker)
                    .into_iter()
                    .map(|d| d.id())
                    .filter(|d| {
                        all || h.replication.dests.get(d) != Some(&state::DestStatus::Completed)
                    })
                    .collect();
                out.versions += 1;
                out.queued += dests.len() as u64;
                self.enqueue(&task, &dests).await;
            }
            if !more {
                break;
            }
            start = page.last().map(|h| h.hkey.clone());
        }
        Ok(out)
    }
}
