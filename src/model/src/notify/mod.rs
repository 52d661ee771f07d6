//! Bucket notifications, the model's half: topics (the `notify_topic`
//! table), a bucket's rules ([`config`], in its entry), the events of
//! object writes, and this node's outbox of events to send
//! ([`outbox`]). The object-write protocol ([`crate::object_write`])
//! calls [`Notifier::emit`] once a write is done, before the client is
//! answered: every writer (S3 handlers, lifecycle worker) goes through
//! it. The delivery worker (crate `garage_notify`) empties the outbox.
//!
//! Delivery is at least once, in order per topic from one node (so per
//! key for the writes one node served); the `sequencer` of a record
//! orders the events of one key across nodes. An event is lost only if
//! the node crashes between the write's quorum and the outbox's commit
//! (the client then had no answer), or if the outbox is full (a metric
//! and a log line each time).

pub mod config;
pub mod endpoint;
pub mod event;
pub mod outbox;
pub mod topic_table;

use std::sync::Arc;

use garage_table::{EmptyKey, Table};
use garage_util::data::{gen_uuid, Uuid};
use tokio::sync::Notify;
use tracing::error;

use crate::bucket_table::{Bucket, BucketTable, Versioning};
use crate::object_table::{ObjectVersion, ObjectVersionData, ObjectVersionState};
use event::{EventName, RecordContext, RecordObject, RequestFacts};
use outbox::{Outbox, Queued};
use topic_table::TopicTable;

/// Events an outbox holds at most by default (`notify_max_queued_events`).
pub const DEFAULT_MAX_QUEUED: u64 = 1_000_000;

/// What led to an object write, for its event: the operation, and the
/// request (none for the node's own work).
#[derive(Clone, Debug)]
pub struct Cause {
    pub op: Op,
    pub req: Option<Arc<RequestFacts>>,
    /// Written by another cluster's replication: sent to no replication
    /// destination (see [`crate::replication`]).
    pub replica: bool,
}

/// The operations that write objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Put,
    Post,
    Copy,
    CompleteMultipartUpload,
    /// DeleteObject(s).
    Delete,
    /// The lifecycle worker's expirations.
    Lifecycle,
    /// The lifecycle worker's transitions.
    Transition,
    TaggingPut,
    TaggingDelete,
    AclPut,
    /// What sends no event: object lock changes, purges, repairs.
    Silent,
}

impl Cause {
    pub fn new(op: Op, req: Option<Arc<RequestFacts>>) -> Self {
        Self {
            op,
            req,
            replica: false,
        }
    }

    /// The same cause, for a replica's write.
    pub fn as_replica(mut self) -> Self {
        self.replica = true;
        self
    }

    /// The node's own work that sends no event.
    pub fn silent() -> Self {
        Self::new(Op::Silent, None)
    }

    pub fn node(op: Op) -> Self {
        Self::new(op, None)
    }

    /// The event of writing version `v` (a new version, or one removed
    /// when `removed`), if any.
    pub fn event(&self, v: &ObjectVersion, removed: bool) -> Option<EventName> {
        let marker = matches!(
            v.state,
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
        );
        // A delete marker in an unversioned bucket is S3's plain delete.
        let created_marker = marker && !removed && v.versioning != Versioning::Off;
        Some(match self.op {
            Op::Put if !marker => EventName::ObjectCreatedPut,
            Op::Post if !marker => EventName::ObjectCreatedPost,
            Op::Copy if !marker => EventName::ObjectCreatedCopy,
            Op::CompleteMultipartUpload if !marker => {
                EventName::ObjectCreatedCompleteMultipartUpload
            }
            Op::Delete if created_marker => EventName::ObjectRemovedDeleteMarkerCreated,
            Op::Delete => EventName::ObjectRemovedDelete,
            Op::Lifecycle if created_marker => EventName::LifecycleExpirationDeleteMarkerCreated,
            Op::Lifecycle => EventName::LifecycleExpirationDelete,
            Op::Transition => EventName::LifecycleTransition,
            Op::TaggingPut => EventName::ObjectTaggingPut,
            Op::TaggingDelete => EventName::ObjectTaggingDelete,
            Op::AclPut => EventName::ObjectAclPut,
            _ => return None,
        })
    }
}

/// Finds the rules an event matches and queues their records.
pub struct Notifier {
    pub outbox: Outbox,
    pub topics: Arc<Table<TopicTable>>,
    buckets: Arc<Table<BucketTable>>,
    region: String,
    max_queued: u64,
    /// Woken when events are queued.
    pub wake: Arc<Notify>,
}

impl Notifier {
    pub fn new(
        outbox: Outbox,
        topics: Arc<Table<TopicTable>>,
        buckets: Arc<Table<BucketTable>>,
        region: String,
        max_queued: u64,
    ) -> Self {
        Self {
            outbox,
            topics,
            buckets,
            region,
            max_queued,
            wake: Arc::new(Notify::new()),
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// Queues the events of `key`'s version `v` in `bucket` that its
    /// rules ask for. `sequencer` orders the events of the key. Errors are
    /// logged and counted, never returned: the write they follow is done.
    pub async fn emit(
        &self,
        bucket: Uuid,
        key: &str,
        v: &ObjectVersion,
        name: EventName,
        sequencer: u64,
        req: Option<&RequestFacts>,
    ) {
        // This node's copy of the bucket (every node holds them all).
        let b = match self.buckets.get_local(&EmptyKey, &bucket).await {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                self.lost(name, 1, &format!("cannot read the bucket: {e}"));
                return;
            }
        };
        let Some(p) = b.params() else { return };
        let Some(config) = p.notifications.get() else {
            return;
        };
        let rules: Vec<_> = config.rules_for(name, key).collect();
        if rules.is_empty() {
            return;
        }
        let now = garage_util::time::now_msec();
        let bucket_name = bucket_name(&b);
        let owner = bucket_owner(&b);
        let none = RequestFacts::default();
        let req = req.unwrap_or(&none);
        let (etag, size) = match &v.state {
            ObjectVersionState::Complete(ObjectVersionData::Inline(m, _))
            | ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, _)) => {
                (m.etag.clone(), m.size)
            }
            _ => (String::new(), 0),
        };
        let version_id = v.in_history().then(|| v.version_id().to_string());
        let obj = RecordObject {
            key,
            size,
            etag: &etag,
            version_id,
            sequencer,
        };
        let mut queued = Vec::with_capacity(rules.len());
        for r in rules {
            // A topic this node has not heard of yet (made a moment ago
            // through another node) still gets the event: the delivery
            // worker waits for it. A deleted one does not.
            let opaque = match self.topics.get_local(&EmptyKey, &r.topic).await {
                Ok(Some(t)) => match t.live() {
                    Some(tc) => tc.opaque_data().to_string(),
                    None => {
                        self.lost(name, 1, &format!("topic {} was deleted", r.topic));
                        continue;
                    }
                },
                Ok(None) => String::new(),
                Err(e) => {
                    self.lost(name, 1, &format!("cannot read topic {}: {e}", r.topic));
                    continue;
                }
            };
            let event_id = hex::encode(&gen_uuid().as_slice()[..16]);
            let rec = event::record(
                name,
                &RecordContext {
                    region: &self.region,
                    bucket: &bucket_name,
                    bucket_owner: &owner,
                    configuration_id: &r.id,
                    opaque_data: &opaque,
                    event_id: &event_id,
                    time_ms: now,
                },
                &obj,
                req,
            );
            queued.push((
                r.topic.clone(),
                Queued {
                    key: key.to_string(),
                    queued_ms: now,
                    record: rec.to_string(),
                },
            ));
        }
        if queued.is_empty() {
            return;
        }
        let n = queued.len() as u64;
        if self.outbox.len() + n > self.max_queued {
            self.lost(
                name,
                n,
                &format!(
                    "the outbox holds {} events, its bound (notify_max_queued_events) is {}",
                    self.outbox.len(),
                    self.max_queued
                ),
            );
            return;
        }
        match self.outbox.push(queued).await {
            Ok(()) => {
                metrics::counter!("notify_events_queued_total").increment(n);
                self.wake.notify_one();
            }
            Err(e) => self.lost(name, n, &format!("cannot queue them: {e}")),
        }
    }

    fn lost(&self, name: EventName, n: u64, why: &str) {
        metrics::counter!("notify_events_dropped_total").increment(n);
        error!(
            event = name.record_name(),
            "{n} bucket notification event(s) not queued: {why}"
        );
    }
}

/// A bucket's first global name (its id when it has none).
fn bucket_name(b: &Bucket) -> String {
    b.global_aliases()
        .into_iter()
        .next()
        .unwrap_or_else(|| hex::encode(b.id.as_slice()))
}

/// The first key with the owner permission on `b`.
fn bucket_owner(b: &Bucket) -> String {
    b.params()
        .and_then(|p| {
            p.authorized_keys
                .items()
                .find(|(_, _, perm)| perm.allow_owner)
                .map(|(k, _, _)| k.clone())
        })
        .unwrap_or_default()
}
