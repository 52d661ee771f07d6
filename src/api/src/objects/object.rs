//! PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use garage_model::bucket_table::Versioning;
use garage_model::object_table::{
    ObjectVersion, ObjectVersionData, ObjectVersionMeta, ObjectVersionState,
};
use garage_model::object_write::ObjectWriter;
use garage_model::version_table::VersionBacklink;
use garage_util::data::{gen_uuid, Hash, Uuid};
use garage_util::time::stamp;
use hyper::StatusCode;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::{Action, Requester};
use crate::conditional::{etag_matches, WriteConditions};
use crate::ctx::{check_key, Api};
use crate::encryption::sse::{SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::meta::{self, Stored};
use crate::objects::put::{
    md5_of, parse_content_md5, write_blocks, Chunker, BLOCK_SIZE, INLINE_MAX,
};
use crate::objects::stream::Prefetch;
use crate::versions::object_lock::Placement;

/// GetObject's and HeadObject's start (their inputs have the same
/// fields): the current version, for a key with read permission, opened
/// by the SSE-C key given, and checked against the conditional headers.
macro_rules! checked_read {
    ($api:expr, $req:expr, $i:expr, $for_get:expr) => {
        $api.read_checked(
            $for_get,
            $api.requester_of(&$req.credentials, &$req.extensions)
                .await?,
            &$i.bucket,
            &$i.key,
            $i.version_id.as_deref(),
            Conditions {
                if_match: $i.if_match.as_ref(),
                if_none_match: $i.if_none_match.as_ref(),
                if_modified_since: $i.if_modified_since.as_ref(),
                if_unmodified_since: $i.if_unmodified_since.as_ref(),
            },
            SseKey::from_headers(
                $i.sse_customer_algorithm.as_deref(),
                $i.sse_customer_key.as_deref(),
                $i.sse_customer_key_md5.as_deref(),
            )?,
        )
        .await?
    };
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
    pub acl: garage_model::access::CannedAcl,
    /// A fetch of the first block already under way (taken by the first
    /// [`Api::content`] call).
    prefetch: std::sync::Mutex<Option<Prefetch>>,
}

/// What a write stored.
pub struct Written {
    pub etag: String,
    pub size: u64,
    pub checksum: Option<(String, String)>,
    /// The version made current.
    pub version: ObjectVersion,
}

impl Written {
    /// Its `x-amz-version-id`: none when the bucket never had versioning.
    pub fn version_id(&self) -> Option<String> {
        (self.version.versioning != Versioning::Off).then(|| self.version.version_id().to_string())
    }
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
    FirstBlock(Hash, Option<garage_rpc::layout::EcCode>),
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

    fn current_of(found: crate::versions::versioning::Found, key: &str) -> ApiResult<Current> {
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
            acl: v.acl.get(),
            prefetch: Default::default(),
        })
    }

    /// Writes a whole object from a request body: inline when it is at
    /// most [`INLINE_MAX`] bytes (one quorum write), else as blocks.
    #[allow(clippy::too_many_arguments)]
    pub async fn store_object(
        self: &Arc<Self>,
        bucket: Uuid,
        key: &str,
        headers: Vec<(String, String)>,
        body: Option<StreamingBlob>,
        content_md5: Option<[u8; 16]>,
        content_length: Option<i64>,
        checksum: Option<&crate::objects::checksum::Expected>,
        trailers: Option<&s3s::TrailingHeaders>,
        cond: Option<&WriteConditions>,
        sse: Option<&SseKey>,
        place: &Placement,
    ) -> ApiResult<Written> {
        let versioning = place.versioning;
        let mut headers = headers;
        if let Some(k) = sse {
            headers.extend(k.stored_pairs());
        }
        let uuid = gen_uuid();
        let timestamp = stamp();
        let mut chunker = Chunker::new(body);
        let first = chunker.next(BLOCK_SIZE).await?.unwrap_or_default();
        if first.len() <= INLINE_MAX {
            let md5 = md5_of(&first);
            check_body(content_md5, content_length, &md5, first.len() as u64)?;
            let sum = match checksum {
                Some(e) => {
                    let mut h = e.algo.hasher();
                    h.update(&first);
                    let sum = crate::objects::checksum::verify(e, &h.finalize(), trailers)?;
                    headers.push(sum.clone());
                    Some(sum)
                }
                None => None,
            };
            let etag = crate::encryption::sse::etag_of(sse, &md5);
            let size = first.len() as u64;
            let data = match sse {
                Some(k) => k.seal(&first),
                None => first.to_vec(),
            };
            let mut v = ObjectVersion::new(
                uuid,
                timestamp,
                ObjectVersionState::Complete(ObjectVersionData::Inline(
                    ObjectVersionMeta {
                        headers,
                        size,
                        etag: etag.clone(),
                        storage_class: place.class.name.clone(),
                        first_ec: None,
                    },
                    data,
                )),
                versioning,
            );
            place.apply(&mut v);
            let v = self
                .finish_version(bucket, key, v, None, cond, true)
                .await?;
            return Ok(Written {
                etag,
                size,
                checksum: sum,
                version: v,
            });
        }

        // No "uploading" object entry: a newer version completing first
        // would drop it and release the blocks written so far, while the
        // last write to complete must win (see doc/ordering.md). An upload
        // that fails is aborted below; one whose node dies leaves a
        // version entry that no object lists, which `garage repair
        // versions` deletes (see doc/versioning.md).
        let backlink = VersionBacklink::Object {
            bucket_id: bucket,
            key: key.to_string(),
        };
        let written = write_blocks(
            self,
            uuid,
            backlink,
            1,
            first,
            &mut chunker,
            checksum.map(|e| e.algo.hasher()),
            sse,
            place.class.code,
        )
        .await;
        let checked = written.and_then(|w| {
            check_body(content_md5, content_length, &w.md5, w.size)?;
            let sum = match (checksum, &w.checksum) {
                (Some(e), Some(c)) => Some(crate::objects::checksum::verify(e, c, trailers)?),
                _ => None,
            };
            Ok((w, sum))
        });
        let (w, sum) = match checked {
            Ok(w) => w,
            Err(e) => {
                self.writer
                    .abort_version(bucket, key, uuid, timestamp, versioning)
                    .await;
                return Err(e);
            }
        };
        let etag = crate::encryption::sse::etag_of(sse, &w.md5);
        headers.extend(sum.clone());
        let mut complete = ObjectVersion::new(
            uuid,
            timestamp,
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(
                ObjectVersionMeta {
                    headers,
                    size: w.size,
                    etag: etag.clone(),
                    storage_class: place.class.name.clone(),
                    first_ec: w.first_ec,
                },
                w.first_block,
            )),
            versioning,
        );
        place.apply(&mut complete);
        let v = self
            .finish_version(bucket, key, complete, Some(&w.blocks), cond, false)
            .await?;
        Ok(Written {
            etag,
            size: w.size,
            checksum: sum,
            version: v,
        })
    }

    /// Makes a complete version current: one quorum write, or through the
    /// object's register when the request has conditions (see
    /// [`crate::conditional`]). A refused version that is written already
    /// (not `retimable`) is aborted when nothing can make it current any
    /// more, releasing its blocks.
    pub async fn finish_version(
        &self,
        bucket: Uuid,
        key: &str,
        version: ObjectVersion,
        blocks: Option<&garage_model::object_write::BlockList>,
        cond: Option<&WriteConditions>,
        retimable: bool,
    ) -> ApiResult<ObjectVersion> {
        let Some(cond) = cond else {
            return Ok(self
                .writer
                .write_version(bucket, key, &version, blocks)
                .await?);
        };
        let (uuid, timestamp, versioning) = (version.uuid, version.timestamp, version.versioning);
        match self
            .commit_conditional(bucket, key, version, cond, retimable)
            .await
        {
            Ok(v) => Ok(v),
            Err(r) => {
                if r.final_ && !retimable {
                    self.writer
                        .abort_version(bucket, key, uuid, timestamp, versioning)
                        .await;
                }
                Err(r.error)
            }
        }
    }

    pub async fn put_object(
        self: Arc<Self>,
        req: S3Request<PutObjectInput>,
    ) -> ApiResult<S3Response<PutObjectOutput>> {
        // PostObject forms reach here (s3s turns them into PutObject): their
        // credentials, in the body, were not seen by the check in front of
        // s3s (`auth_scope::check_request`).
        crate::access::auth_scope::check_form(
            req.credentials.is_some(),
            req.region.as_ref().map(|r| r.as_str()),
            &self.regions,
        )?;
        let who = self.requester(&req).await?;
        let mut i = req.input;
        // A form's `${filename}` (the name of the file it carries) and
        // `tagging` field.
        let form = req
            .extensions
            .get::<crate::objects::rechunk::FormFields>()
            .map(|f| f.get())
            .unwrap_or_default();
        if let Some(name) = &form.file_name {
            i.key = i.key.replace("${filename}", name);
        }
        check_key(&i.key)?;
        let bucket = self
            .authorize(&who, &i.bucket, Action::PutObject, Some(&i.key), None)
            .await?
            .bucket;
        let md5 = i
            .content_md5
            .as_deref()
            .map(parse_content_md5)
            .transpose()?;
        let cond = WriteConditions::of(i.if_match.as_ref(), i.if_none_match.as_ref());
        // A large upload whose condition fails already fails before its
        // data is sent (one read); the condition is decided at the end.
        if let Some(c) = &cond {
            if i.content_length.is_none_or(|l| l as usize > INLINE_MAX) {
                let obj = self.objects.get(&bucket, &i.key).await?;
                c.check(obj.as_ref().and_then(|o| o.last_data()), &i.key)?;
            }
        }
        let customer = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        let mut headers = crate::std_headers!(i).into_pairs();
        let tags = match (i.tagging.as_deref(), &form.tagging) {
            (Some(t), _) => Some(crate::versions::tagging::parse_header(t)?),
            (None, Some(xml)) => Some(crate::versions::tagging::parse_form_field(xml)?),
            (None, None) => None,
        };
        if let Some(t) = tags {
            crate::versions::tagging::set_in_headers(&mut headers, &t);
        }
        let expected = crate::objects::checksum::expected(&req.headers)?;
        let (mut place, sse) = self
            .prepare_write(
                bucket,
                crate::lock_headers!(i),
                crate::write_ask!(i, customer),
            )
            .await?;
        place.acl = crate::written_acl!(place, i, who)?;
        place.class = self.write_class(
            i.storage_class.as_ref().map(|c| c.as_str()),
            place.default_class.as_deref(),
        )?;
        let w = self
            .store_object(
                bucket,
                &i.key,
                headers,
                i.body,
                md5,
                i.content_length,
                expected.as_ref(),
                req.trailing_headers.as_ref(),
                cond.as_ref(),
                sse.as_ref(),
                &place,
            )
            .await?;
        let mut out = PutObjectOutput {
            version_id: w.version_id(),
            e_tag: Some(ETag::Strong(w.etag)),
            ssekms_encryption_context: sse.as_ref().and_then(|k| k.context().map(String::from)),
            ..Default::default()
        };
        crate::set_sse!(out, SseFields::of(sse.as_ref(), self.region()));
        crate::set_checksums!(
            out,
            crate::objects::checksum::stored(w.checksum.as_slice()),
            with_type
        );
        Ok(S3Response::new(out))
    }

    pub async fn get_object(
        self: Arc<Self>,
        req: S3Request<GetObjectInput>,
    ) -> ApiResult<S3Response<GetObjectOutput>> {
        let i = req.input;
        let (cur, sse, expiration) = checked_read!(self, req, i, true);
        let size = cur.meta.size;
        let (range, parts_count) = self
            .requested_range(&cur, i.range.as_ref(), i.part_number)
            .await?;
        let body_range = range.clone().unwrap_or(0..size);
        let body = self.content(&cur, body_range.clone(), sse.clone())?;
        let stored = Stored(&cur.meta.headers);
        let sse_fields = SseFields::of(sse.as_ref(), self.region());
        let (lock_mode, lock_until, legal_hold) =
            crate::versions::object_lock::lock_fields(&cur.lock);
        let mut out = GetObjectOutput {
            expiration,
            storage_class: cur
                .meta
                .storage_class
                .as_deref()
                .map(|c| StorageClass::from(c.to_string())),
            object_lock_mode: lock_mode,
            object_lock_retain_until_date: lock_until,
            object_lock_legal_hold_status: legal_hold,
            body: Some(body),
            accept_ranges: Some("bytes".into()),
            content_length: Some((body_range.end - body_range.start) as i64),
            e_tag: Some(ETag::Strong(cur.meta.etag.clone())),
            last_modified: Some(meta::timestamp(cur.timestamp)),
            content_type: i
                .response_content_type
                .or_else(|| stored.get(meta::CONTENT_TYPE))
                .or_else(|| Some("binary/octet-stream".into())),
            cache_control: i
                .response_cache_control
                .or_else(|| stored.get(meta::CACHE_CONTROL)),
            content_disposition: i
                .response_content_disposition
                .or_else(|| stored.get(meta::CONTENT_DISPOSITION)),
            content_encoding: i
                .response_content_encoding
                .or_else(|| stored.get(meta::CONTENT_ENCODING)),
            content_language: i
                .response_content_language
                .or_else(|| stored.get(meta::CONTENT_LANGUAGE)),
            expires: i.response_expires.or_else(|| stored.expires()),
            metadata: stored.user(),
            tag_count: (!cur.tags.is_empty()).then_some(cur.tags.len() as i32),
            parts_count,
            version_id: cur.version_id.clone(),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm,
            sse_customer_key_md5: sse_fields.sse_customer_key_md5,
            server_side_encryption: sse_fields.server_side_encryption,
            ssekms_key_id: sse_fields.ssekms_key_id,
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ..Default::default()
        };
        if range.is_none() && checksum_enabled(i.checksum_mode.as_ref()) {
            crate::set_checksums!(
                out,
                crate::objects::checksum::stored(&cur.meta.headers),
                with_type
            );
        }
        let mut resp = S3Response::new(GetObjectOutput::default());
        if let Some(r) = &range {
            out.content_range = Some(format!("bytes {}-{}/{size}", r.start, r.end - 1));
            resp.status = Some(StatusCode::PARTIAL_CONTENT);
        }
        resp.output = out;
        Ok(resp)
    }

    pub async fn head_object(
        self: Arc<Self>,
        req: S3Request<HeadObjectInput>,
    ) -> ApiResult<S3Response<HeadObjectOutput>> {
        let i = req.input;
        let (cur, sse, expiration) = checked_read!(self, req, i, false);
        let size = cur.meta.size;
        let mut length = size;
        let mut content_range = None;
        let (range, parts_count) = self
            .requested_range(&cur, i.range.as_ref(), i.part_number)
            .await?;
        if let Some(r) = &range {
            length = r.end - r.start;
            content_range = Some(format!("bytes {}-{}/{size}", r.start, r.end.max(1) - 1));
        }
        let stored = Stored(&cur.meta.headers);
        let sse_fields = SseFields::of(sse.as_ref(), self.region());
        let (lock_mode, lock_until, legal_hold) =
            crate::versions::object_lock::lock_fields(&cur.lock);
        let mut resp = S3Response::new(HeadObjectOutput {
            expiration,
            storage_class: cur
                .meta
                .storage_class
                .as_deref()
                .map(|c| StorageClass::from(c.to_string())),
            object_lock_mode: lock_mode,
            object_lock_retain_until_date: lock_until,
            object_lock_legal_hold_status: legal_hold,
            accept_ranges: Some("bytes".into()),
            content_length: Some(length as i64),
            content_range: content_range.clone(),
            e_tag: Some(ETag::Strong(cur.meta.etag.clone())),
            last_modified: Some(meta::timestamp(cur.timestamp)),
            content_type: stored
                .get(meta::CONTENT_TYPE)
                .or_else(|| Some("binary/octet-stream".into())),
            cache_control: stored.get(meta::CACHE_CONTROL),
            content_disposition: stored.get(meta::CONTENT_DISPOSITION),
            content_encoding: stored.get(meta::CONTENT_ENCODING),
            content_language: stored.get(meta::CONTENT_LANGUAGE),
            expires: stored.expires(),
            metadata: stored.user(),
            parts_count,
            version_id: cur.version_id.clone(),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm,
            sse_customer_key_md5: sse_fields.sse_customer_key_md5,
            server_side_encryption: sse_fields.server_side_encryption,
            ssekms_key_id: sse_fields.ssekms_key_id,
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ..Default::default()
        });
        // Not in s3s's HeadObject output (nor in AWS's model), but S3
        // sends it on HEAD as on GET.
        if !cur.tags.is_empty() {
            resp.headers.insert(
                "x-amz-tagging-count",
                hyper::header::HeaderValue::from(cur.tags.len()),
            );
        }
        if content_range.is_some() {
            resp.status = Some(StatusCode::PARTIAL_CONTENT);
        } else if checksum_enabled(i.checksum_mode.as_ref()) {
            crate::set_checksums!(
                resp.output,
                crate::objects::checksum::stored(&cur.meta.headers),
                with_type
            );
        }
        Ok(resp)
    }

    pub async fn delete_object(
        self: Arc<Self>,
        req: S3Request<DeleteObjectInput>,
    ) -> ApiResult<S3Response<DeleteObjectOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        check_key(&i.key)?;
        let action = match i.version_id {
            Some(_) => Action::DeleteObjectVersion,
            None => Action::DeleteObject,
        };
        let bucket = self
            .authorize(&who, &i.bucket, action, Some(&i.key), None)
            .await?
            .bucket;
        let cond = WriteConditions::of_delete(
            i.if_match.as_ref(),
            i.if_match_last_modified_time.as_ref(),
            i.if_match_size,
        );
        let mut out = DeleteObjectOutput::default();
        match i.version_id.as_deref() {
            Some(vid) => {
                if cond.is_some() {
                    return Err(ApiError::NotImplemented(
                        "conditional deletes of a version named by its id are not supported".into(),
                    ));
                }
                let bypass = self
                    .may_bypass(who.key.as_ref(), &i.bucket, i.bypass_governance_retention)
                    .await;
                let was_marker = self.delete_version(bucket, &i.key, vid, bypass).await?;
                out.version_id = Some(vid.to_string());
                out.delete_marker = was_marker.then_some(true);
            }
            None => {
                let versioning = self.versioning_of(bucket).await?;
                let marker = self
                    .delete_one(bucket, &i.key, cond.as_ref(), versioning)
                    .await?;
                if versioning != Versioning::Off {
                    out.version_id = Some(marker.version_id().to_string());
                    out.delete_marker = Some(true);
                }
            }
        }
        let mut resp = S3Response::new(out);
        resp.status = Some(StatusCode::NO_CONTENT);
        Ok(resp)
    }

    /// Deletes `key`: one quorum write of a delete marker, or, when the
    /// delete has conditions, a conditional write of the marker through
    /// the object's register (see [`crate::conditional`]). Returns the
    /// marker.
    async fn delete_one(
        &self,
        bucket: Uuid,
        key: &str,
        cond: Option<&WriteConditions>,
        versioning: Versioning,
    ) -> ApiResult<ObjectVersion> {
        let marker = ObjectWriter::delete_marker(versioning);
        match cond {
            None => Ok(self
                .writer
                .write_version(bucket, key, &marker, None)
                .await?),
            // Nothing to release when it is refused: a marker has no
            // blocks.
            Some(c) => self
                .commit_conditional(bucket, key, marker, c, true)
                .await
                .map_err(|r| r.error),
        }
    }

    pub async fn delete_objects(
        self: Arc<Self>,
        req: S3Request<DeleteObjectsInput>,
    ) -> ApiResult<S3Response<DeleteObjectsOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        check_delete_count(i.delete.objects.len())?;
        // Each key is decided on its own (a policy may deny some), on
        // the bucket's state read once.
        let decider = self
            .decider(&who, &i.bucket, Action::DeleteObject.need())
            .await?;
        let bucket = decider.bucket;
        let mut allowed = Vec::new();
        let mut errors = Vec::new();
        for o in i.delete.objects {
            if let Err(e) = check_key(&o.key) {
                errors.push(key_error(o.key, o.version_id, &e));
                continue;
            }
            let action = match o.version_id {
                Some(_) => Action::DeleteObjectVersion,
                None => Action::DeleteObject,
            };
            let tags = decider.existing_tags(&self, &o.key).await?;
            match decider.decide(&who, action, Some(&o.key), None, tags.as_ref()) {
                Ok(_) => allowed.push(o),
                Err(e) => errors.push(key_error(o.key, o.version_id, &e)),
            }
        }
        let versioning = self.versioning_of(bucket).await?;
        let bypass = self
            .may_bypass(who.key.as_ref(), &i.bucket, i.bypass_governance_retention)
            .await;
        let quiet = i.delete.quiet.unwrap_or(false);
        let mut markers: Vec<(String, ObjectVersion)> = Vec::new();
        let mut deleted = Vec::new();
        // Keys with conditions, or with a version id: one by one, a few
        // at once.
        let mut one_by_one = Vec::new();
        for o in allowed {
            // `<ETag>*</ETag>`: the object exists (as the `If-Match: *`
            // header).
            let if_match = o.e_tag.map(|e| match e.value() {
                "*" => ETagCondition::Any,
                _ => ETagCondition::ETag(e),
            });
            let cond = WriteConditions::of_delete(
                if_match.as_ref(),
                o.last_modified_time.as_ref(),
                o.size,
            );
            match (cond, o.version_id) {
                (None, None) => {
                    markers.push((o.key, ObjectWriter::delete_marker(versioning)));
                }
                (c, vid) => one_by_one.push((o.key, c, vid)),
            }
        }
        let this = &self;
        let outcomes: Vec<(String, Option<String>, ApiResult<DeletedObject>)> =
            futures::stream::iter(one_by_one)
                .map(|(k, c, vid)| async move {
                    let r = match (&vid, &c) {
                        (Some(_), Some(_)) => Err(ApiError::NotImplemented(
                            "conditional deletes of a version named by its id are not supported"
                                .into(),
                        )),
                        (Some(v), None) => {
                            this.delete_version(bucket, &k, v, bypass)
                                .await
                                .map(|was_marker| DeletedObject {
                                    key: Some(k.clone()),
                                    version_id: Some(v.clone()),
                                    delete_marker: was_marker.then_some(true),
                                    ..Default::default()
                                })
                        }
                        (None, c) => this
                            .delete_one(bucket, &k, c.as_ref(), versioning)
                            .await
                            .map(|m| deleted_entry(k.clone(), None, &m)),
                    };
                    (k, vid, r)
                })
                .buffered(CONDITIONAL_DELETES_AT_ONCE)
                .collect()
                .await;
        if !markers.is_empty() {
            // The markers as written (one may have been stamped again).
            match self
                .writer
                .write_versions(bucket, &markers)
                .await
                .map_err(ApiError::from)
            {
                Ok(written) => {
                    for (k, m) in written {
                        deleted.push(deleted_entry(k, None, &m));
                    }
                }
                Err(e) => {
                    for (k, _) in markers {
                        errors.push(key_error(k, None, &e));
                    }
                }
            }
        }
        for (k, vid, r) in outcomes {
            match r {
                Ok(d) => deleted.push(d),
                Err(e) => errors.push(key_error(k, vid, &e)),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: (!quiet).then_some(deleted),
            errors: Some(errors),
            ..Default::default()
        }))
    }
}

/// The DeleteObjects entry of a key deleted by writing `marker`: with the
/// marker's id when the bucket has versioning.
fn deleted_entry(key: String, version_id: Option<String>, marker: &ObjectVersion) -> DeletedObject {
    let versioned = marker.versioning != Versioning::Off;
    DeletedObject {
        key: Some(key),
        version_id,
        delete_marker: versioned.then_some(true),
        delete_marker_version_id: versioned.then(|| marker.version_id().to_string()),
    }
}

/// How many conditional deletes of one DeleteObjects request run at once.
const CONDITIONAL_DELETES_AT_ONCE: usize = 8;

/// A DeleteObjects error entry for `key`.
fn key_error(key: String, version_id: Option<String>, e: &ApiError) -> Error {
    Error {
        code: Some(e.code().as_str().to_string()),
        message: Some(e.to_string()),
        key: Some(key),
        version_id,
    }
}

fn check_body(
    content_md5: Option<[u8; 16]>,
    content_length: Option<i64>,
    md5: &[u8; 16],
    size: u64,
) -> ApiResult<()> {
    if let Some(l) = content_length {
        if l >= 0 && l as u64 != size {
            return Err(ApiError::IncompleteBody);
        }
    }
    if content_md5.is_some_and(|m| &m != md5) {
        return Err(ApiError::BadDigest);
    }
    Ok(())
}

fn checksum_enabled(mode: Option<&ChecksumMode>) -> bool {
    mode.is_some_and(|m| m.as_str() == ChecksumMode::ENABLED)
}

/// The conditional request headers of RFC 9110, in S3's order: If-Match,
/// then If-Unmodified-Since (ignored when If-Match is given), then
/// If-None-Match, then If-Modified-Since (ignored when If-None-Match is
/// given).
pub fn check_conditions(
    cur: &Current,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> ApiResult<()> {
    // HTTP dates have a 1 s resolution.
    let modified_s = std::time::UNIX_EPOCH + std::time::Duration::from_secs(cur.timestamp / 1000);
    let as_system = |t: &Timestamp| -> std::time::SystemTime {
        let odt: time::OffsetDateTime = t.clone().into();
        odt.into()
    };
    if let Some(c) = if_match {
        if !etag_matches(c, &cur.meta.etag) {
            return Err(ApiError::PreconditionFailed);
        }
    } else if let Some(t) = if_unmodified_since {
        if modified_s > as_system(t) {
            return Err(ApiError::PreconditionFailed);
        }
    }
    if let Some(c) = if_none_match {
        if etag_matches(c, &cur.meta.etag) {
            return Err(ApiError::NotModified);
        }
    } else if let Some(t) = if_modified_since {
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
                crate::objects::stream::object_body(
                    self.clone(),
                    cur.uuid,
                    (*h, *ec),
                    range,
                    sse,
                    prefetch,
                )
            }
        })
    }

    /// The current version of `bucket`/`key` for a reader: the key's read
    /// permission, then the object, then the conditional headers.
    /// The SSE-C key given must open the version (checked before the
    /// conditions, so that a 304 needs the key too). Returns it with the
    /// key to open it and its `x-amz-expiration`.
    #[allow(clippy::too_many_arguments)]
    async fn read_checked(
        self: &Arc<Self>,
        for_get: bool,
        who: Requester,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        c: Conditions<'_>,
        sse_given: Option<SseKey>,
    ) -> ApiResult<(Current, Option<SseKey>, Option<String>)> {
        let action = match version_id {
            Some(_) => Action::GetObjectVersion,
            None => Action::GetObject,
        };
        let access = self
            .authorize(&who, bucket, action, Some(key), None)
            .await?;
        let id = access.bucket;
        let cur = access.hide(match for_get {
            true => self.current_for_get(id, key, version_id).await,
            false => self.current(id, key, version_id).await,
        })?;
        access.check_version(Some(cur.acl))?;
        let sse = check_version(&self.kms, &cur, c, sse_given).await?;
        let expiration = crate::lifecycle::expiration_of(
            &access.expiration_rules,
            key,
            cur.meta.size,
            &cur.tags,
            cur.timestamp,
        );
        Ok((cur, sse, expiration))
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
    check_conditions(
        cur,
        c.if_match,
        c.if_none_match,
        c.if_modified_since,
        c.if_unmodified_since,
    )?;
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

/// The most keys one DeleteObjects request may name (AWS's limit).
pub const MAX_DELETE_KEYS: usize = 1000;

/// AWS answers `MalformedXML` to a DeleteObjects naming no key or more
/// than [`MAX_DELETE_KEYS`].
fn check_delete_count(n: usize) -> ApiResult<()> {
    match n {
        0 => Err(ApiError::MalformedXml("Delete names no Object".into())),
        n if n > MAX_DELETE_KEYS => Err(ApiError::MalformedXml(format!(
            "Delete names {n} objects, more than the {MAX_DELETE_KEYS} allowed in one request"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod delete_count_tests {
    use super::*;

    #[test]
    fn delete_objects_names_one_to_a_thousand_keys() {
        assert!(matches!(
            check_delete_count(0),
            Err(ApiError::MalformedXml(_))
        ));
        assert!(check_delete_count(1).is_ok());
        assert!(check_delete_count(1000).is_ok());
        assert!(matches!(
            check_delete_count(1001),
            Err(ApiError::MalformedXml(m)) if m.contains("1001")
        ));
    }
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
