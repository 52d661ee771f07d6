//! GetObject and HeadObject: the current version for a reader (conditions,
//! SSE-C, ranges and `partNumber`), and their outputs from one header builder.

use std::sync::Arc;

use bytes::Bytes;
use garage_model::object_table::{ObjectVersionData, ObjectVersionMeta, ObjectVersionState};
use garage_util::data::{Hash, Uuid};
use hyper::StatusCode;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::Access;
use crate::conditional::etag_matches;
use crate::ctx::Api;
use crate::encryption::sse::{SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::meta::{self, Stored};
use crate::objects::stream::Prefetch;
use crate::request::Ctx;

/// GetObject's and HeadObject's start (their inputs have the same
/// fields): the current version, for a key with read permission, opened
/// by the SSE-C key given, checked against the conditional headers, with
/// the range asked for.
macro_rules! checked_read {
    ($api:expr, $access:expr, $i:expr, $for_get:expr) => {
        $api.read_checked(
            $for_get,
            $access,
            ReadRequest {
                key: &$i.key,
                version_id: $i.version_id.as_deref(),
                conditions: Conditions {
                    if_match: $i.if_match.as_ref(),
                    if_none_match: $i.if_none_match.as_ref(),
                    if_modified_since: $i.if_modified_since.as_ref(),
                    if_unmodified_since: $i.if_unmodified_since.as_ref(),
                },
                sse_given: SseKey::from_headers(
                    $i.sse_customer_algorithm.as_deref(),
                    $i.sse_customer_key.as_deref(),
                    $i.sse_customer_key_md5.as_deref(),
                )?,
                range: $i.range.as_ref(),
                part_number: $i.part_number,
            },
        )
        .await?
    };
}

/// The headers GetObject and HeadObject answer alike, as the fields of
/// their output types (distinct types with the same field names): one
/// list for both. `$i` is the request's input (for the `response-*`
/// overrides and `x-amz-checksum-mode`), `$a` the [`ReadAnswer`].
macro_rules! read_output {
    ($ty:ident, $i:expr, $a:expr, $region:expr) => {{
        let a: &ReadAnswer = $a;
        let stored = Stored(&a.cur.meta.headers);
        let (lock_mode, lock_until, legal_hold) =
            crate::versions::object_lock::lock_fields(&a.cur.lock);
        let mut out = $ty {
            expiration: a.expiration.clone(),
            storage_class: a
                .cur
                .meta
                .storage_class
                .as_deref()
                .map(|c| StorageClass::from(c.to_string())),
            object_lock_mode: lock_mode,
            object_lock_retain_until_date: lock_until,
            object_lock_legal_hold_status: legal_hold,
            accept_ranges: Some("bytes".into()),
            content_length: Some((a.body_range().end - a.body_range().start) as i64),
            content_range: a.content_range(),
            e_tag: Some(ETag::Strong(a.cur.meta.etag.clone())),
            last_modified: Some(meta::timestamp(a.cur.timestamp)),
            content_type: $i
                .response_content_type
                .take()
                .or_else(|| stored.get(meta::CONTENT_TYPE))
                .or_else(|| Some("binary/octet-stream".into())),
            cache_control: $i
                .response_cache_control
                .take()
                .or_else(|| stored.get(meta::CACHE_CONTROL)),
            content_disposition: $i
                .response_content_disposition
                .take()
                .or_else(|| stored.get(meta::CONTENT_DISPOSITION)),
            content_encoding: $i
                .response_content_encoding
                .take()
                .or_else(|| stored.get(meta::CONTENT_ENCODING)),
            content_language: $i
                .response_content_language
                .take()
                .or_else(|| stored.get(meta::CONTENT_LANGUAGE)),
            expires: $i.response_expires.take().or_else(|| stored.expires()),
            metadata: stored.user(),
            parts_count: a.parts_count,
            version_id: a.cur.version_id.clone(),
            replication_status: a
                .replication
                .map(|s| ReplicationStatus::from(s.to_string())),
            ..Default::default()
        };
        crate::set_sse!(out, SseFields::of(a.sse.as_ref(), $region));
        if a.range.is_none() && checksum_enabled($i.checksum_mode.as_ref()) {
            crate::set_checksums!(
                out,
                crate::objects::checksum::stored(&a.cur.meta.headers),
                with_type
            );
        }
        out
    }};
}

/// What a GET or HEAD asks for (of the bucket its access names): the
/// object, the version, the conditions,
/// the SSE-C key given and the bytes.
pub struct ReadRequest<'a> {
    pub key: &'a str,
    pub version_id: Option<&'a str>,
    pub conditions: Conditions<'a>,
    pub sse_given: Option<SseKey>,
    pub range: Option<&'a Range>,
    pub part_number: Option<i32>,
}

/// What a GET or HEAD answers: the version, the key to open it, its
/// `x-amz-expiration`, and the bytes asked for (`None`: all) with the
/// object's part count when they were asked for by `partNumber`.
pub struct ReadAnswer {
    pub cur: Current,
    pub sse: Option<SseKey>,
    pub expiration: Option<String>,
    pub range: Option<std::ops::Range<u64>>,
    pub parts_count: Option<i32>,
    /// `x-amz-replication-status`.
    pub replication: Option<&'static str>,
}

impl ReadAnswer {
    /// The bytes sent: the range asked for, or the whole object.
    fn body_range(&self) -> std::ops::Range<u64> {
        self.range.clone().unwrap_or(0..self.cur.meta.size)
    }

    /// The `Content-Range` of a ranged answer.
    fn content_range(&self) -> Option<String> {
        self.range.as_ref().map(|r| {
            format!(
                "bytes {}-{}/{}",
                r.start,
                r.end.max(1) - 1,
                self.cur.meta.size
            )
        })
    }
}

/// A complete object version with data, and what a reader needs of it.
pub struct Current {
    pub uuid: Uuid,
    pub timestamp: u64,
    pub meta: ObjectVersionMeta,
    pub data: CurrentData,
    /// The version's current tags.
    pub tags: crate::versions::tagging::Tags,
    /// Its `x-amz-version-id` (none in a key that never had versioning).
    pub version_id: Option<String>,
    /// Its object lock.
    pub lock: garage_model::object_lock::ObjectLock,
    /// Its ACL.
    pub acl: garage_model::access::ObjectAcl,
    /// A fetch of the first block already under way (taken by the first
    /// [`Api::content`] call).
    prefetch: std::sync::Mutex<Option<Prefetch>>,
}

/// What `partNumber` names: a byte range (`None`: the whole object) and
/// the object's part count (none for an object not uploaded in parts).
struct PartRange {
    range: Option<std::ops::Range<u64>>,
    count: Option<i32>,
}

pub enum CurrentData {
    Inline(Bytes),
    /// The first block's address and erasure code.
    FirstBlock(Hash, Option<garage_rpc::layout::Placement>),
}

impl Api {
    /// The object's current data version, or the version `version_id`
    /// names; NoSuchKey, NoSuchVersion, or a delete marker's error.
    pub async fn current(
        &self,
        bucket: Uuid,
        key: &str,
        version_id: Option<&str>,
    ) -> ApiResult<Current> {
        let found = self.find_version(bucket, key, version_id).await?;
        Self::current_of(found, key)
    }

    /// [`Api::current`], for a reader of the data: when this node holds
    /// the object's partition, the first block named by its own copy of
    /// the entry is fetched while the quorum read runs, so that a block
    /// held by another node costs no extra round trip after it (used if
    /// the quorum agrees on the block, as it does unless a write is
    /// racing the read).
    pub async fn current_for_get(
        self: &Arc<Self>,
        bucket: Uuid,
        key: &str,
        version_id: Option<&str>,
    ) -> ApiResult<Current> {
        if version_id.is_some() {
            return self.current(bucket, key, version_id).await;
        }
        let k = key.to_string();
        let prefetch = match self.objects.get_local(&bucket, &k).await {
            Ok(Some(local)) => match local.last_data().map(|v| &v.state) {
                Some(ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, h))) => {
                    Some(Prefetch::start(self, *h, m.first_ec))
                }
                _ => None,
            },
            _ => None,
        };
        let obj = self.objects.get(&bucket, &k).await?;
        let found = self.current_in(bucket, key, obj).await?;
        let cur = Self::current_of(found, key)?;
        *cur.prefetch.lock().expect("prefetch lock") = prefetch;
        Ok(cur)
    }

    /// The version `found` names, as a reader takes it.
    pub(crate) fn current_of(
        found: crate::versions::versioning::Found,
        key: &str,
    ) -> ApiResult<Current> {
        let v = &found.version;
        let (meta, data) = match &v.state {
            ObjectVersionState::Complete(ObjectVersionData::Inline(m, d)) => {
                (m.clone(), CurrentData::Inline(Bytes::from(d.clone())))
            }
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, h)) => {
                (m.clone(), CurrentData::FirstBlock(*h, m.first_ec))
            }
            _ => return Err(ApiError::NoSuchKey(key.into())),
        };
        Ok(Current {
            uuid: v.uuid,
            timestamp: v.timestamp,
            meta,
            data,
            tags: found.tags(),
            version_id: found.version_id(),
            lock: found.lock(),
            acl: v.object_acl(),
            prefetch: Default::default(),
        })
    }

    pub async fn get_object(
        self: Arc<Self>,
        req: S3Request<GetObjectInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<GetObjectOutput>> {
        let mut i = req.input;
        let a = checked_read!(self, ctx.granted, i, true);
        let body = self.content(&a.cur, a.body_range(), a.sse.clone())?;
        let mut out = read_output!(GetObjectOutput, i, &a, self.region());
        out.body = Some(body);
        out.tag_count = (!a.cur.tags.is_empty()).then_some(a.cur.tags.len() as i32);
        let mut resp = S3Response::new(out);
        if a.range.is_some() {
            resp.status = Some(StatusCode::PARTIAL_CONTENT);
        }
        Ok(resp)
    }

    pub async fn head_object(
        self: Arc<Self>,
        req: S3Request<HeadObjectInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<HeadObjectOutput>> {
        let mut i = req.input;
        let a = checked_read!(self, ctx.granted, i, false);
        let mut resp = S3Response::new(read_output!(HeadObjectOutput, i, &a, self.region()));
        // Not in s3s's HeadObject output (nor in AWS's model), but S3
        // sends it on HEAD as on GET.
        if !a.cur.tags.is_empty() {
            resp.headers.insert(
                "x-amz-tagging-count",
                hyper::header::HeaderValue::from(a.cur.tags.len()),
            );
        }
        if a.range.is_some() {
            resp.status = Some(StatusCode::PARTIAL_CONTENT);
        }
        Ok(resp)
    }
}

fn checksum_enabled(mode: Option<&ChecksumMode>) -> bool {
    mode.is_some_and(|m| m.as_str() == ChecksumMode::ENABLED)
}

/// The conditional request headers of RFC 9110, in S3's order: If-Match,
/// then If-Unmodified-Since (ignored when If-Match is given), then
/// If-None-Match, then If-Modified-Since (ignored when If-None-Match is
/// given).
pub fn check_conditions(cur: &Current, c: &Conditions<'_>) -> ApiResult<()> {
    // HTTP dates have a 1 s resolution.
    let modified_s = std::time::UNIX_EPOCH + std::time::Duration::from_secs(cur.timestamp / 1000);
    let as_system = |t: &Timestamp| -> std::time::SystemTime {
        let odt: time::OffsetDateTime = t.clone().into();
        odt.into()
    };
    if let Some(m) = c.if_match {
        if !etag_matches(m, &cur.meta.etag) {
            return Err(ApiError::PreconditionFailed);
        }
    } else if let Some(t) = c.if_unmodified_since {
        if modified_s > as_system(t) {
            return Err(ApiError::PreconditionFailed);
        }
    }
    if let Some(m) = c.if_none_match {
        if etag_matches(m, &cur.meta.etag) {
            return Err(ApiError::NotModified);
        }
    } else if let Some(t) = c.if_modified_since {
        if modified_s <= as_system(t) {
            return Err(ApiError::NotModified);
        }
    }
    Ok(())
}

impl Api {
    /// The bytes a GET or HEAD asks for (`None`: all) by `Range` or
    /// `partNumber` (not both), with the object's part count for the
    /// latter.
    async fn requested_range(
        &self,
        cur: &Current,
        range: Option<&Range>,
        part: Option<i32>,
    ) -> ApiResult<(Option<std::ops::Range<u64>>, Option<i32>)> {
        match (range, part) {
            (Some(_), Some(_)) => Err(ApiError::InvalidArgument(
                "Range and partNumber cannot both be given".into(),
            )),
            (Some(r), None) => Ok((
                Some(r.check(cur.meta.size).map_err(|_| ApiError::InvalidRange)?),
                None,
            )),
            (None, Some(n)) => {
                let p = self.part_range(cur, n).await?;
                Ok((p.range, p.count))
            }
            (None, None) => Ok((None, None)),
        }
    }

    /// The byte range of part `n` (its number as uploaded) of a
    /// multipart object, with the object's part count; part 1 of any
    /// other object is all of it (`range` none, no count). Else
    /// InvalidPartNumber.
    async fn part_range(&self, cur: &Current, n: i32) -> ApiResult<PartRange> {
        if !(1..=10_000).contains(&n) {
            return Err(ApiError::InvalidArgument(
                "Part number must be an integer between 1 and 10000, inclusive".into(),
            ));
        }
        let multipart = cur.meta.etag.contains('-');
        if !multipart || matches!(cur.data, CurrentData::Inline(_)) {
            return match n {
                1 => Ok(PartRange {
                    range: None,
                    count: multipart.then_some(1),
                }),
                _ => Err(ApiError::InvalidPartNumber(n)),
            };
        }
        let v = garage_model::version_table::read_version(&self.versions, &cur.uuid)
            .await?
            .filter(|v| !v.deleted.get())
            .ok_or_else(|| ApiError::NoSuchKey(String::new()))?;
        let sealed = crate::encryption::sse::is_encrypted(&cur.meta.headers);
        let mut parts: std::collections::BTreeMap<u64, u64> = Default::default();
        for (k, b) in v.blocks.items() {
            *parts.entry(k.part_number).or_default() +=
                crate::encryption::sse::plain_size(b.size, sealed);
        }
        let mut start = 0;
        for (p, len) in parts.iter() {
            if *p == n as u64 {
                return Ok(PartRange {
                    range: Some(start..start + len),
                    count: Some(parts.len() as i32),
                });
            }
            start += len;
        }
        Err(ApiError::InvalidPartNumber(n))
    }

    /// The bytes `range` of an object version, as a response body (inline
    /// data sliced, or the blocks streamed), opened with `sse` (the key
    /// [`crate::encryption::sse::check_read`] returned for it).
    pub fn content(
        self: &Arc<Self>,
        cur: &Current,
        range: std::ops::Range<u64>,
        sse: Option<SseKey>,
    ) -> ApiResult<StreamingBlob> {
        Ok(match &cur.data {
            CurrentData::Inline(d) => {
                let d = match &sse {
                    Some(k) => Bytes::from(k.open(d).map_err(ApiError::Internal)?),
                    None => d.clone(),
                };
                let d = d.slice(range.start as usize..range.end as usize);
                StreamingBlob::wrap(futures::stream::once(
                    async move { Ok::<_, std::io::Error>(d) },
                ))
            }
            CurrentData::FirstBlock(h, ec) => {
                let prefetch = cur.prefetch.lock().expect("prefetch lock").take();
                let body = crate::objects::stream::Body {
                    version: cur.uuid,
                    first: (*h, *ec),
                    size: cur.meta.size,
                };
                crate::objects::stream::object_body(self.clone(), body, range, sse, prefetch)
            }
        })
    }

    /// The current version of the object `r` names, for a reader allowed
    /// by `access` (its version's ACL still to check): the object, then
    /// the conditional headers. The SSE-C key given must open the version (checked before
    /// the conditions, so that a 304 needs the key too); then the range
    /// asked for.
    async fn read_checked(
        self: &Arc<Self>,
        for_get: bool,
        access: Access,
        r: ReadRequest<'_>,
    ) -> ApiResult<ReadAnswer> {
        let id = access.bucket;
        let cur = access.hide(match for_get {
            true => self.current_for_get(id, r.key, r.version_id).await,
            false => self.current(id, r.key, r.version_id).await,
        })?;
        access.check_version(Some(&cur.acl))?;
        let sse = check_version(&self.kms, &cur, r.conditions, r.sse_given).await?;
        let expiration = crate::lifecycle::expiration_of(
            &access.expiration_rules,
            r.key,
            cur.meta.size,
            &cur.tags,
            cur.timestamp,
        );
        let (range, parts_count) = self.requested_range(&cur, r.range, r.part_number).await?;
        let replication = self.replication_status(&access, r.key, &cur).await;
        Ok(ReadAnswer {
            replication,
            cur,
            sse,
            expiration,
            range,
            parts_count,
        })
    }
}

/// Whether a reader may have `cur`: the SSE-C key given must open it (an
/// encrypted object is refused without one; checked before the
/// conditions, so that a 304 needs the key too), then the conditional
/// headers. Returns the key to open it with. GetObject and HeadObject
/// use it once the key's read permission is checked; the website
/// endpoint, whose readers are anonymous, directly.
pub async fn check_version(
    kms: &garage_model::kms::Kms,
    cur: &Current,
    c: Conditions<'_>,
    sse_given: Option<SseKey>,
) -> ApiResult<Option<SseKey>> {
    let sse =
        crate::encryption::sse::check_read(kms, &cur.meta.headers, sse_given.as_ref()).await?;
    check_conditions(cur, &c)?;
    Ok(sse)
}

/// The conditional request headers of a read.
#[derive(Default)]
pub struct Conditions<'a> {
    pub if_match: Option<&'a ETagCondition>,
    pub if_none_match: Option<&'a ETagCondition>,
    pub if_modified_since: Option<&'a Timestamp>,
    pub if_unmodified_since: Option<&'a Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_conditions_may_list_several() {
        let c = |h: &str| ETagCondition::parse_http_header(h.as_bytes()).unwrap();
        assert!(etag_matches(&c("\"abc\""), "abc"));
        assert!(etag_matches(&c("\"x\", \"abc\""), "abc"));
        assert!(etag_matches(&c("\"x\",W/\"abc\""), "abc"));
        assert!(!etag_matches(&c("\"x\", \"y\""), "abc"));
        assert!(!etag_matches(&c("\"xabc\""), "abc"));
        assert!(etag_matches(&c("*"), "abc"));
    }
}
