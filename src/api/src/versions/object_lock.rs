//! Object lock: the bucket's switch and default retention
//! (Put/GetObjectLockConfiguration), a version's retention and legal hold
//! (Put/GetObjectRetention, Put/GetObjectLegalHold), the lock a new
//! version is written with, and the check that every delete of a version
//! goes through. See doc/object-lock.md; the merge rules are in
//! [`garage_model::object_lock`].

use std::sync::Arc;

use garage_model::bucket_table::{Bucket, Versioning};
use garage_model::history_table::HistoryKey;
use garage_model::object_lock::{
    DefaultRetention as Default_, Locked, ObjectLock, Period, Retention, RetentionMode,
};
use garage_model::object_table::Object;
use garage_util::data::Uuid;
use garage_util::time::now_msec;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::{Api, Need};
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, KeyBucket, Owned};
use crate::versions::versioning::Found;

/// How a new version is written: with the bucket's versioning, the lock
/// it starts with, whether the bucket encrypts by default; the bucket's
/// access settings, and the ACL the version is written with (set by the
/// caller from `x-amz-acl`, see `access::acl::written_acl`).
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub versioning: Versioning,
    pub lock: ObjectLock,
    /// The bucket's default encryption.
    pub encryption: Option<garage_model::bucket_table::DefaultEncryption>,
    pub access: garage_model::access::BucketAccess,
    pub acl: Option<garage_model::access::ObjectAcl>,
    /// `x-amz-storage-class` (set by the caller; `STANDARD` by default).
    pub class: crate::storage_class::StorageChoice,
    /// The bucket's class for writes that name none (`None`: `STANDARD`).
    pub default_class: Option<String>,
    /// The classes the bucket accepts (`None`: any the layout offers).
    pub allowed_classes: Option<Vec<String>>,
}

impl Placement {
    /// Gives a new version its lock and ACL.
    pub fn apply(&self, v: &mut garage_model::object_table::ObjectVersion) {
        v.lock = self.lock.clone();
        if let Some(a) = &self.acl {
            v.write_object_acl(a.clone());
        }
    }
}

/// The `x-amz-object-lock-*` headers of a write.
#[derive(Default)]
pub struct LockHeaders<'a> {
    pub mode: Option<&'a ObjectLockMode>,
    pub until: Option<&'a Timestamp>,
    pub legal_hold: Option<&'a ObjectLockLegalHoldStatus>,
}

/// The [`LockHeaders`] of an s3s input that has the object lock fields
/// (PutObject, CopyObject, CreateMultipartUpload).
#[macro_export]
macro_rules! lock_headers {
    ($i:expr) => {
        $crate::versions::object_lock::LockHeaders {
            mode: $i.object_lock_mode.as_ref(),
            until: $i.object_lock_retain_until_date.as_ref(),
            legal_hold: $i.object_lock_legal_hold_status.as_ref(),
        }
    };
}

fn ms_of(t: &Timestamp) -> u64 {
    let odt: time::OffsetDateTime = t.clone().into();
    (odt.unix_timestamp_nanos() / 1_000_000).max(0) as u64
}

fn missing_config() -> ApiError {
    ApiError::InvalidRequest("Bucket is missing Object Lock Configuration".into())
}

/// The error for a delete or a retention change that a lock forbids.
pub fn locked_error(l: Locked) -> ApiError {
    l.into()
}

fn parse_mode(s: &str) -> ApiResult<RetentionMode> {
    RetentionMode::parse(s)
        .ok_or_else(|| ApiError::InvalidArgument(format!("Unknown wormMode directive: {s:?}")))
}

fn parse_hold(s: &str) -> ApiResult<bool> {
    match s {
        ObjectLockLegalHoldStatus::ON => Ok(true),
        ObjectLockLegalHoldStatus::OFF => Ok(false),
        other => Err(ApiError::InvalidArgument(format!(
            "Legal Hold must be either of 'ON' or 'OFF', not {other:?}"
        ))),
    }
}

/// A retention given by a client: both a mode and a date in the future.
fn parse_retention(
    mode: Option<&str>,
    until: Option<&Timestamp>,
    now: u64,
) -> ApiResult<Option<Retention>> {
    match (mode, until) {
        (None, None) => Ok(None),
        (Some(m), Some(t)) => {
            let until = ms_of(t);
            if until <= now {
                return Err(ApiError::InvalidArgument(
                    "The retain until date must be in the future!".into(),
                ));
            }
            Ok(Some(Retention {
                mode: parse_mode(m)?,
                until,
            }))
        }
        _ => Err(ApiError::InvalidArgument(
            "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied"
                .into(),
        )),
    }
}

fn lock_enabled(b: &Bucket) -> bool {
    b.params().is_some_and(|p| p.object_lock.get())
}

impl Api {
    /// The versioning and lock of a new version written to `bucket` with
    /// these headers (the bucket's default retention when they give
    /// none). From this node's copy of the bucket: no round trip.
    pub async fn placement(&self, bucket: Uuid, h: LockHeaders<'_>) -> ApiResult<Placement> {
        let b = self
            .metadata
            .buckets
            .get(&garage_table::EmptyKey, &bucket)
            .await?;
        let p = b.as_ref().and_then(|b| b.params());
        let versioning = p.map(|p| *p.versioning.get()).unwrap_or_default();
        let enabled = p.is_some_and(|p| p.object_lock.get());
        let encryption = p.and_then(|p| p.encryption.get().clone());
        let access = p.map(|p| p.access.clone()).unwrap_or_default();
        let default_class = p.and_then(|p| p.default_storage_class.get().clone());
        let allowed_classes = p.and_then(|p| p.allowed_storage_classes.get().clone());
        let now = now_msec();
        let given = parse_retention(h.mode.map(|m| m.as_str()), h.until, now)?;
        let hold = h.legal_hold.map(|s| parse_hold(s.as_str())).transpose()?;
        if !enabled {
            if given.is_some() || hold.is_some() {
                return Err(missing_config());
            }
            return Ok(Placement {
                versioning,
                lock: ObjectLock::default(),
                encryption,
                access,
                acl: None,
                class: Default::default(),
                default_class,
                allowed_classes,
            });
        }
        let default = p.and_then(|p| *p.default_retention.get());
        let retention = given.or_else(|| default.map(|d| d.at(now)));
        Ok(Placement {
            versioning,
            lock: ObjectLock::new(retention, hold.unwrap_or(false)),
            encryption,
            access,
            acl: None,
            class: Default::default(),
            default_class,
            allowed_classes,
        })
    }

    /// How a new object is written to `bucket` ([`Api::placement`]) and
    /// the key its data is sealed with
    /// ([`crate::encryption::sse::write_key`]): from the request's lock
    /// headers and what it asks of encryption.
    pub async fn prepare_write(
        &self,
        bucket: Uuid,
        lock: LockHeaders<'_>,
        ask: crate::encryption::sse::WriteAsk<'_>,
    ) -> ApiResult<(Placement, Option<crate::encryption::sse::SseKey>)> {
        let place = self.placement(bucket, lock).await?;
        let sse =
            crate::encryption::sse::write_key(&self.kms, ask, place.encryption.as_ref(), None)
                .await?;
        Ok((place, sse))
    }

    /// Whether the caller may bypass governance retention: it asks to,
    /// and its key owns the bucket.
    pub async fn may_bypass(
        &self,
        key: Option<&garage_model::key_table::Key>,
        bucket: &str,
        asked: Option<bool>,
    ) -> bool {
        match key {
            Some(key) if asked == Some(true) => {
                self.bucket_id(key, bucket, Need::Owner).await.is_ok()
            }
            _ => false,
        }
    }

    /// The lock of version `version_id` of `key` (`None`: the current
    /// version) as strongly as it is known: the object entry's copy and
    /// the history entry's merged (both read at quorum).
    async fn version_lock(
        &self,
        bucket: Uuid,
        key: &str,
        version_id: Option<&str>,
    ) -> ApiResult<(Found, ObjectLock)> {
        let found = self.find_version(bucket, key, version_id).await?;
        let mut lock = found.lock();
        if found.history.is_none() && found.version.in_history() {
            let hkey = HistoryKey::of(key, found.version.timestamp, found.version.uuid);
            if let Some(h) = self.history.get(&bucket, &hkey).await? {
                garage_util::crdt::Crdt::merge(&mut lock, &h.version.lock);
            }
        }
        Ok((found, lock))
    }

    /// Writes a change of a version (its lock, its ACL) into its history
    /// entry and, if it is still listed there, its object entry (where
    /// reads of the current version see it).
    pub(crate) async fn change_version(
        &self,
        bucket: Uuid,
        key: &str,
        found: Found,
        change: impl Fn(&mut garage_model::object_table::ObjectVersion),
        cause: &garage_model::notify::Cause,
    ) -> ApiResult<()> {
        let mut v = found.version;
        change(&mut v);
        let in_entry = found
            .obj
            .as_ref()
            .is_some_and(|o| o.version(v.timestamp, v.uuid).is_some());
        let mut h = match found.history {
            Some(h) => h,
            None => garage_model::history_table::HistoryEntry::new(bucket, key, v.clone()),
        };
        change(&mut h.version);
        let obj = in_entry.then(|| Object::new(bucket, key.to_string(), vec![v.clone()]));
        let h = v.in_history().then_some(h);
        self.writer
            .update_entries(obj.as_ref(), h.as_ref(), cause)
            .await?;
        Ok(())
    }

    /// The bucket of a retention or legal hold request (`id`, named
    /// `name`), which must have object lock enabled.
    async fn locked_bucket(&self, id: Uuid, name: &str) -> ApiResult<Uuid> {
        let b = self.bucket(id, name).await?;
        if !lock_enabled(&b) {
            return Err(missing_config());
        }
        Ok(id)
    }

    /// The lock of a version, for GetObjectRetention and
    /// GetObjectLegalHold.
    async fn lock_of(
        &self,
        (id, bucket): (Uuid, &str),
        key: &str,
        version_id: Option<&str>,
    ) -> ApiResult<ObjectLock> {
        let id = self.locked_bucket(id, bucket).await?;
        Ok(self.version_lock(id, key, version_id).await?.1)
    }

    /// Changes the lock of a version with `change` (which may refuse),
    /// for PutObjectRetention and PutObjectLegalHold.
    async fn change_lock(
        &self,
        bucket: Uuid,
        key: &str,
        version_id: Option<&str>,
        change: impl FnOnce(&mut ObjectLock) -> ApiResult<()>,
    ) -> ApiResult<()> {
        let (found, mut lock) = self.version_lock(bucket, key, version_id).await?;
        change(&mut lock)?;
        self.change_version(
            bucket,
            key,
            found,
            |v| v.lock = lock.clone(),
            &garage_model::notify::Cause::silent(),
        )
        .await
    }

    pub async fn put_object_lock_configuration(
        self: Arc<Self>,
        req: S3Request<PutObjectLockConfigurationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutObjectLockConfigurationOutput>> {
        let i = req.input;
        let conf = i
            .object_lock_configuration
            .ok_or_else(|| ApiError::MalformedXml("ObjectLockConfiguration is missing".into()))?;
        if conf.object_lock_enabled.as_ref().map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED)
        {
            return Err(ApiError::MalformedXml(
                "ObjectLockEnabled must be Enabled".into(),
            ));
        }
        let default = match conf.rule.and_then(|r| r.default_retention) {
            None => None,
            Some(d) => Some(parse_default(&d)?),
        };
        let b = ctx.granted.bucket;
        let p = b
            .params()
            .ok_or_else(|| ApiError::NoSuchBucket(i.bucket.clone()))?;
        if !p.object_lock.get() && *p.versioning.get() != Versioning::Enabled {
            return Err(ApiError::InvalidBucketState(
                "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"
                    .into(),
            ));
        }
        self.update_bucket(b, |p| {
            p.object_lock.set();
            p.default_retention.update(default);
        })
        .await?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub async fn get_object_lock_configuration(
        self: Arc<Self>,
        req: S3Request<GetObjectLockConfigurationInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetObjectLockConfigurationOutput>> {
        let id = ctx.granted.bucket;
        let b = self.bucket(id, &req.input.bucket).await?;
        let p = b
            .params()
            .filter(|p| p.object_lock.get())
            .ok_or_else(|| ApiError::ObjectLockConfigurationNotFound(req.input.bucket.clone()))?;
        let rule = p.default_retention.get().map(|d| ObjectLockRule {
            default_retention: Some(DefaultRetention {
                mode: Some(ObjectLockRetentionMode::from(d.mode.as_str().to_string())),
                days: match d.period {
                    Period::Days(n) => Some(n as i32),
                    Period::Years(_) => None,
                },
                years: match d.period {
                    Period::Years(n) => Some(n as i32),
                    Period::Days(_) => None,
                },
            }),
        });
        Ok(S3Response::new(GetObjectLockConfigurationOutput {
            object_lock_configuration: Some(ObjectLockConfiguration {
                object_lock_enabled: Some(ObjectLockEnabled::from_static(
                    ObjectLockEnabled::ENABLED,
                )),
                rule,
            }),
        }))
    }

    pub async fn put_object_retention(
        self: Arc<Self>,
        req: S3Request<PutObjectRetentionInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<PutObjectRetentionOutput>> {
        let i = req.input;
        let KeyBucket { key, bucket } = ctx.granted;
        let bucket = self.locked_bucket(bucket, &i.bucket).await?;
        let now = now_msec();
        let r = i.retention.unwrap_or_default();
        let new = match (r.mode.as_ref(), r.retain_until_date.as_ref()) {
            (None, None) => None,
            (m, t) => {
                let m = m.map(|m| m.as_str());
                let t =
                    t.ok_or_else(|| ApiError::MalformedXml("RetainUntilDate is missing".into()))?;
                let m = m.ok_or_else(|| ApiError::MalformedXml("Mode is missing".into()))?;
                parse_retention(Some(m), Some(t), now)?
            }
        };
        let bypass = self
            .may_bypass(Some(&key), &i.bucket, i.bypass_governance_retention)
            .await;
        self.change_lock(bucket, &i.key, i.version_id.as_deref(), |lock| {
            lock.check_retention_change(new, now, bypass)
                .map_err(locked_error)?;
            lock.set_retention(new);
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub async fn get_object_retention(
        self: Arc<Self>,
        req: S3Request<GetObjectRetentionInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetObjectRetentionOutput>> {
        let i = req.input;
        let lock = self
            .lock_of(
                (ctx.granted.bucket, &i.bucket),
                &i.key,
                i.version_id.as_deref(),
            )
            .await?;
        let r = lock
            .retention()
            .ok_or(ApiError::NoSuchObjectLockConfiguration)?;
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: Some(ObjectLockRetentionMode::from(r.mode.as_str().to_string())),
                retain_until_date: Some(crate::meta::timestamp(r.until)),
            }),
        }))
    }

    pub async fn put_object_legal_hold(
        self: Arc<Self>,
        req: S3Request<PutObjectLegalHoldInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<PutObjectLegalHoldOutput>> {
        let i = req.input;
        let bucket = self.locked_bucket(ctx.granted.bucket, &i.bucket).await?;
        let status = i
            .legal_hold
            .and_then(|h| h.status)
            .ok_or_else(|| ApiError::MalformedXml("Status is missing".into()))?;
        let on = parse_hold(status.as_str()).map_err(|e| ApiError::MalformedXml(e.to_string()))?;
        self.change_lock(bucket, &i.key, i.version_id.as_deref(), |lock| {
            lock.set_legal_hold(on);
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    pub async fn get_object_legal_hold(
        self: Arc<Self>,
        req: S3Request<GetObjectLegalHoldInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetObjectLegalHoldOutput>> {
        let i = req.input;
        let lock = self
            .lock_of(
                (ctx.granted.bucket, &i.bucket),
                &i.key,
                i.version_id.as_deref(),
            )
            .await?;
        if !lock.has_legal_hold_status() {
            return Err(ApiError::NoSuchObjectLockConfiguration);
        }
        let status = match lock.legal_hold() {
            true => ObjectLockLegalHoldStatus::ON,
            false => ObjectLockLegalHoldStatus::OFF,
        };
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold {
                status: Some(ObjectLockLegalHoldStatus::from_static(status)),
            }),
        }))
    }
}

/// A DefaultRetention as S3 checks it: a mode, and Days or Years (one of
/// them, positive).
fn parse_default(d: &DefaultRetention) -> ApiResult<Default_> {
    let mode = d
        .mode
        .as_ref()
        .ok_or_else(|| ApiError::MalformedXml("DefaultRetention needs a Mode".into()))
        .and_then(|m| parse_mode(m.as_str()).map_err(|e| ApiError::MalformedXml(e.to_string())))?;
    let positive = |n: i32| {
        u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            ApiError::InvalidArgument(
                "Default retention period must be a positive integer value.".into(),
            )
        })
    };
    let period = match (d.days, d.years) {
        (Some(n), None) => Period::Days(positive(n)?.min(36_500 * 10)),
        (None, Some(n)) => Period::Years(positive(n)?.min(1_000)),
        _ => {
            return Err(ApiError::MalformedXml(
                "DefaultRetention needs exactly one of Days and Years".into(),
            ))
        }
    };
    Ok(Default_ { mode, period })
}

/// Sets the `x-amz-object-lock-*` fields of a GET or HEAD answer.
pub fn lock_fields(
    lock: &ObjectLock,
) -> (
    Option<ObjectLockMode>,
    Option<Timestamp>,
    Option<ObjectLockLegalHoldStatus>,
) {
    let r = lock.retention();
    let hold = lock.has_legal_hold_status().then(|| {
        ObjectLockLegalHoldStatus::from_static(match lock.legal_hold() {
            true => ObjectLockLegalHoldStatus::ON,
            false => ObjectLockLegalHoldStatus::OFF,
        })
    });
    (
        r.map(|r| ObjectLockMode::from(r.mode.as_str().to_string())),
        r.map(|r| crate::meta::timestamp(r.until)),
        hold,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_headers_are_checked() {
        let now = 1_000_000;
        let later = crate::meta::timestamp(now + 60_000);
        let earlier = crate::meta::timestamp(now - 1);
        assert!(parse_retention(None, None, now).unwrap().is_none());
        let r = parse_retention(Some("COMPLIANCE"), Some(&later), now)
            .unwrap()
            .unwrap();
        assert_eq!(r.mode, RetentionMode::Compliance);
        assert_eq!(r.until, now + 60_000);
        assert!(matches!(
            parse_retention(Some("GOVERNANCE"), Some(&earlier), now),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(
            parse_retention(Some("GOVERNANCE"), None, now),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(
            parse_retention(Some("forever"), Some(&later), now),
            Err(ApiError::InvalidArgument(_))
        ));
    }

    #[test]
    fn default_retention_is_checked() {
        let d = |days, years| DefaultRetention {
            mode: Some(ObjectLockRetentionMode::from_static("GOVERNANCE")),
            days,
            years,
        };
        assert_eq!(
            parse_default(&d(Some(3), None)).unwrap().period,
            Period::Days(3)
        );
        assert_eq!(
            parse_default(&d(None, Some(1))).unwrap().period,
            Period::Years(1)
        );
        assert!(matches!(
            parse_default(&d(Some(1), Some(1))),
            Err(ApiError::MalformedXml(_))
        ));
        assert!(matches!(
            parse_default(&d(None, None)),
            Err(ApiError::MalformedXml(_))
        ));
        assert!(matches!(
            parse_default(&d(Some(0), None)),
            Err(ApiError::InvalidArgument(_))
        ));
    }
}
