//! Delivery of server access logs: each node keeps the lines of the
//! requests it served, per target (bucket, prefix, key format, source
//! bucket), in memory, and writes them as one object per target every
//! flush interval (`GARAGE_ACCESS_LOG_FLUSH_SECS`, 60 s by default), when
//! a buffer passes [`MAX_BUFFER`], and when the node stops gracefully.
//! Delivery is best effort, as on AWS: the lines of a node that crashes
//! before a flush are lost, and a write that fails is retried at the next
//! flush (then dropped after [`MAX_BUFFER`] more).
//!
//! Whether a bucket logs is read from this node's copy of the bucket
//! tables (no round trip) and cached for [`CACHE_TTL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use garage_model::bucket_table::{BucketLogging, PartitionDateSource};
use garage_util::data::Uuid;
use garage_util::time::now_msec;
use tokio::sync::{watch, Notify};

use super::record::Event;
use crate::ctx::Api;
use crate::error::ApiResult;

/// How long a bucket's logging setting is used before it is read again.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// A buffer this large is written at once.
pub const MAX_BUFFER: usize = 4 << 20;

fn flush_interval() -> Duration {
    garage_util::tuning::tuning().access_log_flush
}

/// Where the lines of one source bucket go.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Target {
    bucket: Uuid,
    prefix: String,
    partitioned: Option<PartitionDateSource>,
    source_bucket: String,
    source_owner: String,
}

#[derive(Default)]
struct Buffer {
    lines: String,
    /// The first line's request time (EventTime partitioning).
    first_ms: u64,
}

/// What a request's bucket says of its logging and owner, as cached.
#[derive(Clone)]
struct BucketFacts {
    exists: bool,
    owner: Option<String>,
    logging: Option<BucketLogging>,
}

/// A bucket name as a key id designates it (`None`: anonymous).
type Designation = (Option<String>, String);

#[derive(Default)]
pub struct AccessLogs {
    buffers: Mutex<HashMap<Target, Buffer>>,
    cache: Mutex<HashMap<Designation, (Instant, BucketFacts)>>,
    full: Notify,
}

/// The key of a log object written at `now_ms`.
fn object_key(t: &Target, first_ms: u64, now_ms: u64, region: &str) -> String {
    let date_ms = match t.partitioned {
        Some(PartitionDateSource::EventTime) => first_ms,
        _ => now_ms,
    };
    let at =
        jiff::Timestamp::from_millisecond(date_ms as i64).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let unique = hex::encode(&garage_util::data::gen_uuid().as_slice()[..8]).to_uppercase();
    let name = format!("{}-{unique}", at.strftime("%Y-%m-%d-%H-%M-%S"));
    match t.partitioned {
        None => format!("{}{name}", t.prefix),
        Some(_) => format!(
            "{}{}/{region}/{}/{}/{name}",
            t.prefix,
            t.source_owner,
            t.source_bucket,
            at.strftime("%Y/%m/%d")
        ),
    }
}

impl AccessLogs {
    /// The logging setting of bucket `name` as `key_id` designates it
    /// (its local alias, else the global one), from this node's copies.
    async fn bucket_facts(
        &self,
        api: &Api,
        key_id: Option<&str>,
        name: &str,
    ) -> ApiResult<BucketFacts> {
        let cache_key = (key_id.map(String::from), name.to_string());
        if let Some((at, s)) = self.cache.lock().unwrap().get(&cache_key) {
            if at.elapsed() < CACHE_TTL {
                return Ok(s.clone());
            }
        }
        let mut id = None;
        if let Some(k) = key_id {
            if let Some(key) = api
                .metadata
                .keys
                .get_local(&garage_table::EmptyKey, &k.to_string())
                .await?
            {
                id = key
                    .params()
                    .and_then(|p| p.local_aliases.get(&name.to_string()).copied().flatten());
            }
        }
        if id.is_none() {
            id = api
                .metadata
                .aliases
                .get_local(&garage_table::EmptyKey, &name.to_string())
                .await?
                .and_then(|a| a.bucket());
        }
        let bucket = match id {
            Some(id) => {
                api.metadata
                    .buckets
                    .get_local(&garage_table::EmptyKey, &id)
                    .await?
            }
            None => None,
        };
        let source = BucketFacts {
            exists: bucket.as_ref().is_some_and(|b| b.params().is_some()),
            owner: bucket.as_ref().and_then(crate::access::acl::owner_id_of),
            logging: bucket
                .as_ref()
                .and_then(|b| b.params())
                .and_then(|p| p.logging.get().clone()),
        };
        let mut cache = self.cache.lock().unwrap();
        if cache.len() > 10_000 {
            cache.clear();
        }
        cache.insert(cache_key, (Instant::now(), source.clone()));
        Ok(source)
    }

    /// Whether bucket `name` (a global alias) exists and its owner (see
    /// [`crate::access::acl::owner_id_of`]) is not `expected`
    /// (`x-amz-expected-bucket-owner`). Read from this node's copies.
    pub async fn owner_differs(&self, api: &Api, name: &str, expected: &str) -> bool {
        match self.bucket_facts(api, None, name).await {
            Ok(s) if s.exists => s.owner.as_deref() != Some(expected),
            _ => false,
        }
    }

    /// Adds the line of a finished request on bucket `name` to its target's
    /// buffer, if the bucket logs.
    pub async fn record(&self, api: &Api, name: &str, event: Event) {
        let source = match self
            .bucket_facts(api, event.requester.as_deref(), name)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("access log: cannot read bucket {name}: {e}");
                return;
            }
        };
        let Some(l) = source.logging else {
            return;
        };
        let line = event.line(source.owner.as_deref(), name);
        let t = Target {
            bucket: l.target_bucket,
            prefix: l.target_prefix,
            partitioned: l.partitioned,
            source_bucket: name.to_string(),
            source_owner: source.owner.unwrap_or_else(|| "-".into()),
        };
        let mut buffers = self.buffers.lock().unwrap();
        let b = buffers.entry(t).or_default();
        if b.lines.is_empty() {
            b.first_ms = event.time_ms;
        }
        b.lines.push_str(&line);
        b.lines.push('\n');
        if b.lines.len() >= MAX_BUFFER {
            self.full.notify_one();
        }
    }

    /// Writes every buffer as a log object; a buffer whose write fails is
    /// kept for the next flush, unless it grew past twice
    /// [`MAX_BUFFER`].
    pub async fn flush(&self, api: &Arc<Api>) {
        let taken: Vec<(Target, Buffer)> = {
            let mut b = self.buffers.lock().unwrap();
            b.drain().collect()
        };
        for (t, buf) in taken {
            let key = object_key(&t, buf.first_ms, now_msec(), api.region());
            match write_log_object(api, &t, &key, &buf.lines).await {
                Ok(()) => tracing::debug!(bucket = %t.source_bucket, %key, "access log delivered"),
                Err(e) => {
                    tracing::warn!(
                        "access log of bucket {} not delivered to {key}: {e}",
                        t.source_bucket
                    );
                    let mut all = self.buffers.lock().unwrap();
                    let b = all.entry(t).or_default();
                    if b.lines.len() + buf.lines.len() < 2 * MAX_BUFFER {
                        b.lines.insert_str(0, &buf.lines);
                        b.first_ms = buf.first_ms;
                    }
                }
            }
        }
    }

    /// Flushes the access logs every flush interval, and when a buffer is
    /// full, until `exit`; then once more.
    pub async fn run(self: Arc<Self>, api: Arc<Api>, mut exit: watch::Receiver<bool>) {
        let every = flush_interval();
        while !*exit.borrow() {
            tokio::select! {
                _ = tokio::time::sleep(every) => (),
                _ = self.full.notified() => (),
                _ = exit.changed() => (),
            }
            self.flush(&api).await;
        }
    }
}

/// Writes one log object, with the target bucket's default encryption.
async fn write_log_object(api: &Arc<Api>, t: &Target, key: &str, text: &str) -> ApiResult<()> {
    let place = api
        .placement(
            t.bucket,
            crate::versions::object_lock::LockHeaders::default(),
        )
        .await?;
    let sse = crate::encryption::sse::write_key(
        &api.kms,
        Default::default(),
        place.encryption.as_ref(),
        None,
    )
    .await?;
    let body = s3s::dto::StreamingBlob::from(s3s::Body::from(text.to_string()));
    api.store_object(
        t.bucket,
        key,
        vec![("content-type".into(), "text/plain".into())],
        crate::objects::write::ObjectBody::made(body, text.len() as u64, sse.as_ref()),
        crate::objects::write::Commit {
            cond: None,
            cause: &garage_model::notify::Cause::silent(),
            replica: None,
        },
        &place,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_object_keys_follow_the_format() {
        let mut t = Target {
            bucket: Uuid::from([1; 32]),
            prefix: "logs/".into(),
            partitioned: None,
            source_bucket: "photos".into(),
            source_owner: "GK1".into(),
        };
        // 2026-11-27T10:20:30Z
        let now = 1_795_774_830_000;
        let k = object_key(&t, now - 86_400_000, now, "garage");
        assert!(k.starts_with("logs/2026-11-27-10-20-30-"), "{k}");
        assert_eq!(k.len(), "logs/2026-11-27-10-20-30-".len() + 16);
        t.partitioned = Some(PartitionDateSource::EventTime);
        let k = object_key(&t, now - 86_400_000, now, "garage");
        assert!(
            k.starts_with("logs/GK1/garage/photos/2026/11/26/2026-11-26-10-20-30-"),
            "{k}"
        );
        t.partitioned = Some(PartitionDateSource::DeliveryTime);
        let k = object_key(&t, now - 86_400_000, now, "garage");
        assert!(
            k.starts_with("logs/GK1/garage/photos/2026/11/27/2026-11-27-"),
            "{k}"
        );
    }
}
