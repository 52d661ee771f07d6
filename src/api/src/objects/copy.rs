//! CopyObject: the new object shares the source's blocks (their reference
//! counts go up); no data is read or written, whatever the size. Except
//! with SSE-C when the source and the destination are not sealed with the
//! same key (or both not at all): the data is then read and written anew.

use garage_model::notify::Op;
use std::sync::Arc;

use garage_model::block_ref_table::BlockRef;
use garage_model::bucket_table::Versioning;
use garage_model::object_table::{
    ObjectVersion, ObjectVersionData, ObjectVersionMeta, ObjectVersionState,
};
use garage_model::version_table::{read_version, Version, VersionBacklink};
use garage_util::data::gen_uuid;
use garage_util::time::stamp;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::step::{source_of, CopyGrant};
use crate::ctx::{check_key, Api};
use crate::encryption::sse::{check_read, is_sealing_header, without_sse, SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::read::{check_conditions, Conditions, Current, CurrentData};
use crate::request::Ctx;

impl Api {
    pub async fn copy_object(
        self: Arc<Self>,
        req: S3Request<CopyObjectInput>,
        ctx: Ctx<CopyGrant>,
    ) -> ApiResult<S3Response<CopyObjectOutput>> {
        let who = ctx.who;
        let cause = crate::request::cause(&req.extensions, &who, Op::Copy);
        let (src_access, dst) = (ctx.granted.source, ctx.granted.bucket);
        let i = req.input;
        check_key(&i.key)?;
        let (_, src_key, src_vid) = source_of(&i.copy_source)?;
        let src = src_access.bucket;
        // The copy gets the request's lock (or the bucket's default), not
        // the source's, as in S3.
        let (cur, place) = tokio::join!(
            self.current(src, src_key, src_vid),
            self.placement(dst, crate::lock_headers!(i))
        );
        let (cur, mut place) = (src_access.hide(copy_source_missing(cur))?, place?);
        src_access.check_version(Some(&cur.acl))?;
        place.acl = crate::written_acl!(self, place, dst, i, who);
        // The copy gets the request's storage class (STANDARD by default,
        // as in S3); another class than the source's rewrites the data.
        place.class = self.write_class(
            i.storage_class.as_ref().map(|c| c.as_str()),
            place.default_class.as_deref(),
            place.allowed_classes.as_deref(),
        )?;
        let class_change = place.class.name != cur.meta.storage_class;
        let versioning = place.versioning;
        check_copy_conditions(&cur, crate::copy_source_conditions!(i))?;
        let src_sse = open_source(
            &self.kms,
            &cur,
            i.copy_source_sse_customer_algorithm.as_deref(),
            i.copy_source_sse_customer_key.as_deref(),
            i.copy_source_sse_customer_key_md5.as_deref(),
        )
        .await?;
        let customer = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        // A copy sealed as its source (SSE-S3, or SSE-KMS with the same
        // key and context) keeps the source's data key, so that it shares
        // the sealed blocks.
        let dst_sse = crate::encryption::sse::write_key(
            &self.kms,
            crate::write_ask!(i, customer),
            place.encryption.as_ref(),
            src_sse.as_ref(),
        )
        .await?;
        let sse_fields = SseFields::of(dst_sse.as_ref(), self.region());
        let context = dst_sse.as_ref().and_then(|k| k.context().map(String::from));
        let replace = i
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let same_sealing = src_sse == dst_sse;
        if !replace
            && same_sealing
            && !class_change
            && src == dst
            && src_key == i.key
            && src_vid.is_none()
        {
            return Err(ApiError::InvalidRequest(
                "This copy request is illegal because it is trying to copy an object to itself \
                 without changing the object's metadata"
                    .into(),
            ));
        }
        let mut headers = if replace {
            crate::std_headers!(i).into_pairs()
        } else {
            without_sse(&cur.meta.headers)
        };
        // A copy of a replica is no replica.
        headers.retain(|(k, _)| k != garage_model::replication::STATUS_HEADER);
        // Tags: the source's current ones (directive COPY, the default),
        // or the request's (REPLACE).
        let tags = match i.tagging_directive.as_ref().map(|d| d.as_str()) {
            Some(TaggingDirective::REPLACE) => i
                .tagging
                .as_deref()
                .map(crate::versions::tagging::parse_header)
                .transpose()?
                .unwrap_or_default(),
            Some(TaggingDirective::COPY) | None => cur.tags.clone(),
            Some(d) => {
                return Err(ApiError::InvalidArgument(format!(
                    "Unknown tagging directive {d:?}: COPY or REPLACE"
                )))
            }
        };
        crate::versions::tagging::set_in_headers(&mut headers, &tags);
        let source_version_id = cur.version_id.clone();
        let sse_out = |etag: String, v: &ObjectVersion| CopyObjectOutput {
            copy_object_result: Some({
                let mut r = CopyObjectResult {
                    e_tag: Some(ETag::Strong(etag)),
                    last_modified: Some(meta::timestamp(v.timestamp)),
                    ..Default::default()
                };
                // The copy's stored checksum (the source's, kept), with
                // its type.
                if let ObjectVersionState::Complete(
                    ObjectVersionData::Inline(m, _) | ObjectVersionData::FirstBlock(m, _),
                ) = &v.state
                {
                    crate::set_checksums!(
                        r,
                        crate::objects::checksum::stored(&m.headers),
                        with_type
                    );
                }
                r
            }),
            copy_source_version_id: source_version_id.clone(),
            version_id: (v.versioning != Versioning::Off).then(|| v.version_id().to_string()),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm.clone(),
            sse_customer_key_md5: sse_fields.sse_customer_key_md5.clone(),
            server_side_encryption: sse_fields.server_side_encryption.clone(),
            ssekms_key_id: sse_fields.ssekms_key_id.clone(),
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ssekms_encryption_context: context.clone(),
            ..Default::default()
        };
        if !same_sealing || class_change {
            // Other keys, encrypted on one side only, or another storage
            // class: the data is read (opened with the source's key) and
            // written anew.
            let size = cur.meta.size;
            let body = self.content(&cur, 0..size, src_sse)?;
            // The copy is a new single-part object: the source's stored
            // checksums (maybe composite, of its parts) do not describe it.
            headers.retain(|(k, _)| {
                !k.starts_with("x-amz-checksum-") && k != crate::objects::checksum::PARTS_HEADER
            });
            let w = self
                .store_object(
                    dst,
                    &i.key,
                    headers,
                    crate::objects::write::ObjectBody::made(body, size, dst_sse.as_ref()),
                    crate::objects::write::Commit {
                        cond: None,
                        cause: &cause,
                        replica: None,
                    },
                    &place,
                )
                .await?;
            return Ok(S3Response::new(sse_out(w.etag.clone(), &w.version)));
        }
        // Same key (or none): the sealed data is shared as it is, with the
        // source's key check (SSE-C) or wrapped data key (SSE-S3).
        headers.extend(
            cur.meta
                .headers
                .iter()
                .filter(|(k, _)| is_sealing_header(k))
                .cloned(),
        );
        let meta = ObjectVersionMeta {
            headers,
            size: cur.meta.size,
            etag: cur.meta.etag.clone(),
            storage_class: cur.meta.storage_class.clone(),
            first_ec: cur.meta.first_ec,
            recoded: 0,
        };
        let uuid = gen_uuid();
        let timestamp = stamp();
        let mut blocks: Option<Vec<_>> = None;
        let data = match &cur.data {
            CurrentData::Inline(d) => ObjectVersionData::Inline(meta, d.to_vec()),
            CurrentData::FirstBlock(first, _) => {
                let v = read_version(&self.versions, &cur.uuid)
                    .await?
                    .filter(|v| !v.deleted.get())
                    .ok_or_else(|| ApiError::NoSuchKey(src_key.to_string()))?;
                let copy = Version::segments(
                    uuid,
                    &VersionBacklink::Object {
                        bucket_id: dst,
                        key: i.key.clone(),
                    },
                    v.blocks.items(),
                );
                let refs: Vec<BlockRef> = v
                    .blocks
                    .items()
                    .map(|(_, b)| BlockRef::to_block(b, uuid))
                    .collect();
                // No "uploading" entry, as in `Api::store_object`.
                let (b, c) = tokio::join!(
                    self.versions.insert_many(&copy),
                    self.block_refs.insert_many(&refs)
                );
                blocks = Some(v.blocks.items().map(|(k, b)| (*k, *b)).collect());
                if let Err(e) = b.and(c) {
                    // References whose segment was not written are not
                    // released by the version's deletion: released here.
                    let gone: Vec<BlockRef> = refs
                        .iter()
                        .map(|r| BlockRef::new(r.block, uuid, true))
                        .collect();
                    if let Err(e) = self.block_refs.insert_later(&gone).await {
                        tracing::warn!("cannot queue the release of a failed copy: {e}");
                    }
                    self.writer
                        .abort_version(dst, &i.key, uuid, timestamp, versioning)
                        .await;
                    return Err(e.into());
                }
                ObjectVersionData::FirstBlock(meta, *first)
            }
        };
        let mut v = ObjectVersion::new(
            uuid,
            timestamp,
            ObjectVersionState::Complete(data),
            versioning,
        );
        place.apply(&mut v);
        let v = self
            .writer
            .write_version(dst, &i.key, &v, blocks.as_deref(), &cause)
            .await?;
        Ok(S3Response::new(sse_out(cur.meta.etag.clone(), &v)))
    }
}

/// A missing, superfluous or wrong source key, in terms of the
/// `x-amz-copy-source-server-side-encryption-customer-*` headers.
pub fn copy_source_error(e: ApiError) -> ApiError {
    match e {
        ApiError::InvalidRequest(m) => ApiError::InvalidRequest(format!(
            "{m} (x-amz-copy-source-server-side-encryption-customer-*)"
        )),
        e => e,
    }
}

/// A copy source that is a delete marker: S3 answers 404 NoSuchKey for
/// the current version, 400 InvalidRequest for one named by its id.
pub fn copy_source_missing<T>(r: ApiResult<T>) -> ApiResult<T> {
    match r {
        Err(ApiError::DeleteMarker { key, by_id: false, .. }) => Err(ApiError::NoSuchKey(key)),
        Err(ApiError::DeleteMarker { by_id: true, .. }) => Err(ApiError::InvalidRequest(
            "The source of a copy request may not specifically refer to a delete marker by version id."
                .into(),
        )),
        r => r,
    }
}

/// The `x-amz-copy-source-if-*` conditions of a CopyObject or
/// UploadPartCopy input, as a [`Conditions`].
#[macro_export]
macro_rules! copy_source_conditions {
    ($i:expr) => {
        $crate::objects::read::Conditions {
            if_match: $i.copy_source_if_match.as_ref(),
            if_none_match: $i.copy_source_if_none_match.as_ref(),
            if_modified_since: $i.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: $i.copy_source_if_unmodified_since.as_ref(),
        }
    };
}

/// The `x-amz-copy-source-if-*` conditions: like GET's, but every failure
/// is 412 PreconditionFailed.
pub fn check_copy_conditions(cur: &Current, c: Conditions<'_>) -> ApiResult<()> {
    check_conditions(cur, &c).map_err(|e| match e {
        ApiError::NotModified => ApiError::PreconditionFailed,
        e => e,
    })
}

/// The SSE-C key a copy gives for its source (the
/// `x-amz-copy-source-server-side-encryption-customer-*` headers), checked
/// against the source version; errors as S3 answers them for a source.
pub async fn open_source(
    kms: &garage_model::kms::Kms,
    cur: &crate::objects::read::Current,
    algorithm: Option<&str>,
    key: Option<&str>,
    key_md5: Option<&str>,
) -> ApiResult<Option<SseKey>> {
    check_read(
        kms,
        &cur.meta.headers,
        SseKey::from_headers(algorithm, key, key_md5)?.as_ref(),
    )
    .await
    .map_err(copy_source_error)
}
