//! Versions written here by another cluster's replication: a PutObject
//! or DeleteObject with the header [`REPLICA_HEADER`], which names the
//! version (its id: stamp and uuid) as the source wrote it. The version is
//! written under that id and stamp, unordered (it may be older than the
//! key's current version: it then goes into the history only), marked a
//! replica (`x-amz-replication-status: REPLICA`, and in its history entry,
//! so that it is never sent on: two clusters may replicate to each other).
//! Writing the same version twice is harmless: a version this bucket has
//! already is answered without a write.
//!
//! Only a key with the owner permission on the bucket may write replicas
//! (it chooses version ids and stamps), never under an id another object
//! uses here (ids name blocks in the version table), and only when the bucket has
//! versioning enabled and the cluster allows `bucket-replication`; a
//! stamp more than [`MAX_AHEAD_MS`] ahead of this node's clock is refused
//! (a replica must not win over every later write of the key) with a 503,
//! so that the source tries again once the clocks agree.

use garage_model::bucket_table::Versioning;
use garage_model::history_table::HistoryKey;
use garage_model::notify::Cause;
use garage_model::object_table::{
    is_upload_id, ObjectVersion, ObjectVersionData, ObjectVersionState, VersionId,
};
use garage_model::replication::STATUS_HEADER;
use garage_model::version_table::VersionBacklink;
use garage_rpc::system::versions::BUCKET_REPLICATION;
use garage_table::EmptyKey;
use garage_util::data::Uuid;

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::request::Requester;

/// The request header of a replica's write: the source's version id.
pub const REPLICA_HEADER: &str = "x-garage-replica";
/// With it, on PutObject: the source's ETag, kept (a multipart object's
/// ETag, `…-N`, cannot be computed again from a single body).
pub const REPLICA_ETAG_HEADER: &str = "x-garage-replica-etag";

/// How far ahead of this node's clock a replica's stamp may be.
pub const MAX_AHEAD_MS: u64 = 3600 * 1000;

/// The version a replica's write is to have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replica {
    pub timestamp: u64,
    pub uuid: Uuid,
    /// The source's ETag (PutObject).
    pub etag: Option<String>,
}

impl Replica {
    /// The pair stored among a replica's headers.
    pub fn stored_header() -> (String, String) {
        (STATUS_HEADER.to_string(), "REPLICA".to_string())
    }
}

impl Api {
    /// The replica a request writes (none without [`REPLICA_HEADER`]),
    /// checked: see the module.
    pub async fn replica_of(
        &self,
        headers: &hyper::HeaderMap,
        who: &Requester,
        bucket: Uuid,
        key: &str,
    ) -> ApiResult<Option<Replica>> {
        let Some(h) = headers.get(REPLICA_HEADER) else {
            return Ok(None);
        };
        let given = h.to_str().unwrap_or_default();
        let (timestamp, uuid) = match given.parse::<VersionId>() {
            Ok(VersionId::Id(ts, uuid)) => (ts, uuid),
            _ => {
                return Err(ApiError::InvalidArgument(format!(
                    "{REPLICA_HEADER} is a version id (80 hexadecimal digits), not {given:?}"
                )))
            }
        };
        if !self.blocks.system.feature_allowed(&BUCKET_REPLICATION) {
            // The source retries: this cluster is being upgraded.
            return Err(ApiError::Unavailable(format!(
                "this cluster takes replicas once finalized at v{} (it is at v{})",
                BUCKET_REPLICATION.since,
                self.blocks.system.active_version()
            )));
        }
        // This node's copy (every node holds the bucket table), else the
        // cluster's (a bucket made a moment ago elsewhere).
        let buckets = &self.metadata.buckets;
        let b = match buckets.get_local(&EmptyKey, &bucket).await? {
            Some(b) => Some(b),
            None => buckets.get(&EmptyKey, &bucket).await?,
        }
        .and_then(|b| b.params().cloned())
        .ok_or_else(|| ApiError::NoSuchBucket(bucket.to_string()))?;
        let owner = who.key.as_ref().is_some_and(|k| {
            b.authorized_keys
                .get(&k.key_id)
                .is_some_and(|p| p.allow_owner)
        });
        if !owner {
            return Err(ApiError::AccessDenied(
                "writing replicas needs the owner permission on the bucket".into(),
            ));
        }
        if *b.versioning.get() != Versioning::Enabled {
            return Err(ApiError::InvalidRequest(
                "a bucket takes replicas only with versioning enabled: enable it (PutBucketVersioning Status=Enabled)".into(),
            ));
        }
        let now = garage_util::time::now_msec();
        if timestamp > now + MAX_AHEAD_MS {
            // A clock off on either side: the source tries again later
            // (503), rather than give the version up.
            return Err(ApiError::Unavailable(format!(
                "the replica's version is stamped {} ms ahead of this node's clock (at most {MAX_AHEAD_MS}): one of the clusters' clocks is off",
                timestamp - now
            )));
        }
        // Version ids name blocks cluster-wide (the version table): an id
        // already used by another object, or released, is refused, so a
        // replica's data never lands in another object's version.
        if is_upload_id(&uuid) {
            return Err(ApiError::InvalidArgument(format!(
                "{REPLICA_HEADER} names a multipart upload's id"
            )));
        }
        let used = self.versions.get_range(&uuid, None, None, 1, false).await?;
        if let Some(v) = used.first() {
            let ours = matches!(&v.backlink,
                VersionBacklink::Object { bucket_id, key: k } if *bucket_id == bucket && k == key);
            if !ours || v.deleted.get() {
                return Err(ApiError::InvalidArgument(format!(
                    "{REPLICA_HEADER}: version {given} is used by another object here, or was deleted"
                )));
            }
        }
        let etag = headers
            .get(REPLICA_ETAG_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim_matches('"').to_string());
        Ok(Some(Replica {
            timestamp,
            uuid,
            etag,
        }))
    }

    /// The ETag of the replica's version if this bucket has it already
    /// (an empty one for a delete marker). The version is then written
    /// again as the history holds it, with `cause` (a replica's): a try
    /// cut short after its history entry and before its object entry
    /// leaves the object entry whole once the source tries again.
    pub async fn replica_written(
        &self,
        bucket: Uuid,
        key: &str,
        r: &Replica,
        cause: &Cause,
    ) -> ApiResult<Option<String>> {
        let hk = HistoryKey::of(key, r.timestamp, r.uuid);
        let h = self.history.get(&bucket, &hk).await?;
        let Some(h) = h.filter(|h| !h.is_deleted() && h.version.is_complete()) else {
            return Ok(None);
        };
        self.writer
            .update_versions(bucket, key, vec![h.version.clone()], cause)
            .await?;
        Ok(Some(match &h.version.state {
            ObjectVersionState::Complete(
                ObjectVersionData::Inline(m, _) | ObjectVersionData::FirstBlock(m, _),
            ) => m.etag.clone(),
            _ => String::new(),
        }))
    }

    /// A DeleteObject with [`REPLICA_HEADER`]: the source's delete marker,
    /// written here under its id (once). Returns its version id.
    pub async fn delete_as_replica(
        &self,
        headers: &hyper::HeaderMap,
        who: &Requester,
        bucket: Uuid,
        key: &str,
        cause: Cause,
    ) -> ApiResult<VersionId> {
        let r = self
            .replica_of(headers, who, bucket, key)
            .await?
            .ok_or_else(|| ApiError::InvalidRequest(format!("no {REPLICA_HEADER}")))?;
        let cause = cause.as_replica();
        if self
            .replica_written(bucket, key, &r, &cause)
            .await?
            .is_none()
        {
            let v = ObjectVersion::new(
                r.uuid,
                r.timestamp,
                ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
                Versioning::Enabled,
            );
            self.writer
                .update_versions(bucket, key, vec![v], &cause)
                .await?;
        }
        Ok(VersionId::Id(r.timestamp, r.uuid))
    }

    /// A version's `x-amz-replication-status`: `REPLICA` for a replica
    /// (its headers say so); in a bucket with replication rules, the state
    /// its history entry holds (one more read, only there: this node's
    /// copy when it has the entry, else a quorum read; none if it cannot
    /// be read: the object is still served). This node's copy may lag the
    /// quorum by a moment (`PENDING` just after `COMPLETED` was written).
    pub async fn replication_status(
        &self,
        access: &crate::access::authorize::Access,
        key: &str,
        cur: &crate::objects::read::Current,
    ) -> Option<&'static str> {
        if cur
            .meta
            .headers
            .iter()
            .any(|(k, v)| k == STATUS_HEADER && v == "REPLICA")
        {
            return Some("REPLICA");
        }
        if !access.replicated || cur.version_id.is_none() {
            return None;
        }
        // This node's copy when it has the entry (every node does in a
        // cluster of three zones): no round trip; else a quorum read.
        let hk = HistoryKey::of(key, cur.timestamp, cur.uuid);
        let h = match self.history.get_local(&access.bucket, &hk).await {
            Ok(Some(h)) => Some(h),
            _ => self.history.get(&access.bucket, &hk).await.ok().flatten(),
        };
        h.and_then(|h| h.replication.s3_status())
    }
}
