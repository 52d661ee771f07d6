//! Versioning: the bucket's switch (Put/GetBucketVersioning), which
//! version a request names (`versionId`), writes that reach the history
//! table, and deletes by version id. See doc/versioning.md.
//!
//! A version written while the bucket's versioning is enabled has an id of
//! its own and is written to the object table (where it is current until
//! a newer one completes) and to the history table at once, in parallel:
//! one round trip, as an unversioned write. Reading the current version
//! costs what it costs without versioning, except when the current
//! version was deleted by its id (the history is read then).

use std::sync::Arc;

use garage_model::bucket_table::Versioning;
use garage_model::history_table::{HistoryEntry, HistoryKey};
use garage_model::object_lock::ObjectLock;
use garage_model::object_table::{
    Head, Object, ObjectVersion, ObjectVersionData, ObjectVersionState, VersionId,
};
use garage_util::data::Uuid;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, KeyBucket, Owned};
use crate::versions::tagging::Tags;

/// A version a request named, with where it was found.
pub struct Found {
    /// The key's object entry, if it has one.
    pub obj: Option<Object>,
    /// Complete, with data (delete markers are errors, see
    /// [`ApiError::DeleteMarker`]).
    pub version: ObjectVersion,
    /// Its history entry, when it was read from there.
    pub history: Option<HistoryEntry>,
}

impl Found {
    /// The version's current tags.
    pub fn tags(&self) -> Tags {
        if let Some(h) = &self.history {
            if let Some(t) = h.tags.get() {
                return t.clone();
            }
        }
        match &self.obj {
            Some(o) if self.history.is_none() => {
                crate::versions::tagging::version_tags(o, &self.version)
            }
            _ => crate::versions::tagging::stored_tags(&self.version),
        }
    }

    /// The version's lock: its copy in the object entry and in the
    /// history entry, merged (each has every change made through it).
    pub fn lock(&self) -> ObjectLock {
        let mut l = self.version.lock.clone();
        if let Some(h) = &self.history {
            garage_util::crdt::Crdt::merge(&mut l, &h.version.lock);
        }
        l
    }

    /// The `x-amz-version-id` to answer: the version's id in a key that
    /// has versioning, none in a key that never had.
    pub fn version_id(&self) -> Option<String> {
        version_id_of(self.obj.as_ref(), &self.version)
    }
}

/// The `x-amz-version-id` of version `v` of the key whose entry is `obj`.
pub fn version_id_of(obj: Option<&Object>, v: &ObjectVersion) -> Option<String> {
    let versioned = v.versioning != Versioning::Off || obj.is_none_or(|o| o.is_versioned());
    versioned.then(|| v.version_id().to_string())
}

/// Parses a `versionId` given by a client.
pub fn parse_version_id(s: &str) -> ApiResult<VersionId> {
    s.parse()
        .map_err(|_| ApiError::InvalidArgument(format!("Invalid version id specified: {s:?}")))
}

fn is_marker(v: &ObjectVersion) -> bool {
    matches!(
        v.state,
        ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
    )
}

/// The error for a delete marker reached by a read: 404 when it is the
/// current version, 405 when it was named by its id.
fn marker_error(obj: Option<&Object>, v: &ObjectVersion, by_id: bool, key: &str) -> ApiError {
    match version_id_of(obj, v) {
        Some(id) => ApiError::DeleteMarker {
            key: key.into(),
            version_id: id,
            last_modified: v.timestamp,
            by_id,
        },
        None => ApiError::NoSuchKey(key.into()),
    }
}

impl Api {
    /// The bucket's versioning, from this node's copy of the bucket
    /// (fully replicated: no round trip). Like S3, a change takes a moment
    /// to reach every node.
    pub async fn versioning_of(&self, bucket: Uuid) -> ApiResult<Versioning> {
        let b = self
            .metadata
            .buckets
            .get(&garage_table::EmptyKey, &bucket)
            .await?;
        Ok(b.and_then(|b| b.params().map(|p| *p.versioning.get()))
            .unwrap_or_default())
    }

    /// The newest version of `key` left in the history table.
    pub async fn newest_in_history(
        &self,
        bucket: Uuid,
        key: &str,
    ) -> ApiResult<Option<HistoryEntry>> {
        let first = self
            .history
            .get_range(&bucket, Some(HistoryKey::first_of(key)), None, 1, false)
            .await?;
        Ok(first.into_iter().next().filter(|h| h.key == key))
    }

    /// The version of `key` a read names: the current one (`None`), or
    /// the one with this `versionId`. NoSuchKey when there is no current
    /// version, NoSuchVersion when there is no such version; a delete
    /// marker is [`ApiError::DeleteMarker`].
    pub async fn find_version(
        &self,
        bucket: Uuid,
        key: &str,
        version_id: Option<&str>,
    ) -> ApiResult<Found> {
        let vid = version_id.map(parse_version_id).transpose()?;
        match vid {
            None => self.find_current(bucket, key).await,
            Some(VersionId::Null) => {
                let obj = self.objects.get(&bucket, &key.to_string()).await?;
                let null = obj.as_ref().and_then(|o| match o.null_version() {
                    Some(v) => Some(v.clone()),
                    // Entries written before null marks: the current
                    // version of a key that never had versioning.
                    None if !o.is_versioned() => o.last_complete().cloned(),
                    None => None,
                });
                let v = null
                    .filter(|v| v.is_complete())
                    .ok_or_else(|| ApiError::NoSuchVersion("null".into()))?;
                if is_marker(&v) {
                    return Err(marker_error(obj.as_ref(), &v, true, key));
                }
                Ok(Found {
                    obj,
                    version: v,
                    history: None,
                })
            }
            Some(VersionId::Id(ts, uuid)) => {
                let k = key.to_string();
                let hkey = HistoryKey::of(key, ts, uuid);
                let (obj, h) = tokio::join!(
                    self.objects.get(&bucket, &k),
                    self.history.get(&bucket, &hkey)
                );
                let (obj, h) = (obj?, h?.filter(|h| !h.is_deleted()));
                let in_entry = obj
                    .as_ref()
                    .and_then(|o| o.version(ts, uuid))
                    .filter(|v| v.in_history())
                    .cloned();
                let v = match (&in_entry, &h) {
                    (Some(v), _) if v.state == ObjectVersionState::Aborted => None,
                    (Some(v), _) if v.is_complete() => Some(v.clone()),
                    (_, Some(h)) if h.version.is_complete() => Some(h.version.clone()),
                    _ => None,
                };
                let v = v.ok_or_else(|| ApiError::NoSuchVersion(version_id.unwrap().into()))?;
                if is_marker(&v) {
                    return Err(marker_error(obj.as_ref(), &v, true, key));
                }
                let history = match in_entry.is_some_and(|e| e.is_complete()) {
                    true => None,
                    false => h,
                };
                Ok(Found {
                    obj,
                    version: v,
                    history,
                })
            }
        }
    }

    /// The current version of `key` (see [`Api::find_version`]).
    pub async fn find_current(&self, bucket: Uuid, key: &str) -> ApiResult<Found> {
        let obj = self.objects.get(&bucket, &key.to_string()).await?;
        self.current_in(bucket, key, obj).await
    }

    /// The current version of `key` whose object entry (as read) is
    /// `obj`; the history table is read when the entry says so, or when
    /// there is no entry in a bucket that has had versioning (a versioned
    /// key's entry holding only deleted versions or markers with ids is
    /// collected, while its history stays).
    pub async fn current_in(
        &self,
        bucket: Uuid,
        key: &str,
        obj: Option<Object>,
    ) -> ApiResult<Found> {
        let null = match obj.as_ref().map(|o| o.head()) {
            Some(Head::Version(v)) => {
                if is_marker(v) {
                    return Err(marker_error(obj.as_ref(), v, false, key));
                }
                let version = v.clone();
                return Ok(Found {
                    obj,
                    version,
                    history: None,
                });
            }
            Some(Head::InHistory { null }) => null.cloned(),
            Some(Head::Nothing) => return Err(ApiError::NoSuchKey(key.into())),
            None => {
                if self.versioning_of(bucket).await? == Versioning::Off {
                    return Err(ApiError::NoSuchKey(key.into()));
                }
                None
            }
        };
        let h = self.newest_in_history(bucket, key).await?;
        let (version, history) = match (h, null) {
            (Some(h), Some(n)) if n.sort_key() > h.version.sort_key() => (n, None),
            (Some(h), _) => (h.version.clone(), Some(h)),
            (None, Some(n)) => (n, None),
            (None, None) => return Err(ApiError::NoSuchKey(key.into())),
        };
        if is_marker(&version) {
            return Err(marker_error(obj.as_ref(), &version, false, key));
        }
        Ok(Found {
            obj,
            version,
            history,
        })
    }

    /// DeleteObject with a `versionId`: that version goes for good (its
    /// blocks with it); if it was current, the one before it becomes
    /// current. Returns whether it was a delete marker. Deleting a
    /// version that does not exist succeeds, as in S3. A locked version
    /// is AccessDenied (`bypass`: the caller may and asks to bypass
    /// governance retention); its lock is read from both of its entries,
    /// at quorum, before anything is written.
    pub async fn delete_version(
        &self,
        bucket: Uuid,
        key: &str,
        version_id: &str,
        bypass: bool,
        cause: &garage_model::notify::Cause,
    ) -> ApiResult<bool> {
        let vid = parse_version_id(version_id)?;
        Ok(self
            .writer
            .delete_version(bucket, key, vid, bypass, cause)
            .await?)
    }

    pub async fn put_bucket_versioning(
        self: Arc<Self>,
        req: S3Request<PutBucketVersioningInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketVersioningOutput>> {
        let i = req.input;
        let status = i
            .versioning_configuration
            .status
            .as_ref()
            .map(|s| s.as_str().to_string());
        let v = match status.as_deref() {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            other => {
                return Err(ApiError::MalformedXml(format!(
                    "Status must be Enabled or Suspended, not {other:?}"
                )))
            }
        };
        if i.versioning_configuration
            .mfa_delete
            .as_ref()
            .is_some_and(|m| m.as_str() == MFADelete::ENABLED)
        {
            return Err(ApiError::NotImplemented(
                "MFA delete is not supported".into(),
            ));
        }
        let b = ctx.granted.bucket;
        if v != Versioning::Enabled && b.params().is_some_and(|p| p.object_lock.get()) {
            return Err(ApiError::InvalidBucketState(
                "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.".into(),
            ));
        }
        if v != Versioning::Enabled && b.params().is_some_and(|p| p.replication.get().is_some()) {
            return Err(ApiError::InvalidBucketState(
                "A replication configuration is present on this bucket, so you cannot change the versioning state. To change the versioning state, first delete the replication configuration.".into(),
            ));
        }
        self.update_bucket(b, |p| p.versioning.update(v)).await?;
        Ok(S3Response::new(PutBucketVersioningOutput::default()))
    }

    pub async fn get_bucket_versioning(
        self: Arc<Self>,
        _req: S3Request<GetBucketVersioningInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetBucketVersioningOutput>> {
        let id = ctx.granted.bucket;
        let status = match self.versioning_of(id).await? {
            Versioning::Off => None,
            Versioning::Enabled => Some(BucketVersioningStatus::from_static(
                BucketVersioningStatus::ENABLED,
            )),
            Versioning::Suspended => Some(BucketVersioningStatus::from_static(
                BucketVersioningStatus::SUSPENDED,
            )),
        };
        Ok(S3Response::new(GetBucketVersioningOutput {
            status,
            ..Default::default()
        }))
    }
}
