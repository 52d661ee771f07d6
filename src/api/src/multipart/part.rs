//! UploadPart and UploadPartCopy: one part written as its own version
//! (listed in the upload before its blocks are written), from the body or
//! from a range of the source object.

use std::sync::Arc;

use garage_model::mpu_table::{MpuPart, MpuPartKey, MultipartUpload};
use garage_model::version_table::{Version, VersionBacklink};
use garage_util::data::gen_uuid;
use garage_util::time::now_msec;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use super::{check_part_number, part_checksum, upload_checksum};
use crate::access::authorize::Access;
use crate::access::step::{source_of, CopyGrant};
use crate::ctx::Api;
use crate::encryption::sse::{SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::block_writer::{
    md5_of, parse_content_md5, write_blocks, BlockTarget, BodyChecks, Chunker, BLOCK_SIZE,
};
use crate::objects::checksum::Expected;
use crate::request::Ctx;

/// Where a part's data comes from.
enum PartSource {
    /// A body to cut into blocks and write (UploadPart, and UploadPartCopy
    /// when it cannot share).
    Body(Chunker),
    /// Blocks of the source object, shared (UploadPartCopy: see
    /// [`crate::multipart::part_copy`]).
    Shared(crate::multipart::part_copy::Shared),
}

impl Api {
    pub async fn upload_part(
        self: Arc<Self>,
        req: S3Request<UploadPartInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<UploadPartOutput>> {
        let i = req.input;
        let bucket = ctx.granted.bucket;
        check_part_number(i.part_number)?;
        let md5_given = i
            .content_md5
            .as_deref()
            .map(parse_content_md5)
            .transpose()?;
        let given = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        let (mpu, sse) = self
            .upload_sealing(bucket, &i.key, &i.upload_id, given)
            .await?;
        let mut expected = crate::objects::checksum::expected(&req.headers)?;
        if let Some((algo, _)) = upload_checksum(&mpu)? {
            expected = Some(part_checksum(algo, expected)?);
        }
        let trailers = req.trailing_headers.clone();
        let (etag, _, sum) = self
            .write_part(
                &mpu,
                i.part_number,
                PartSource::Body(Chunker::new(i.body)),
                BodyChecks {
                    checksum: expected.as_ref(),
                    trailers: trailers.as_ref(),
                    sse: sse.as_ref(),
                },
                |md5, size| {
                    if i.content_length.is_some_and(|l| l >= 0 && l as u64 != size) {
                        return Err(ApiError::IncompleteBody);
                    }
                    if md5_given.is_some_and(|m| m != *md5) {
                        return Err(ApiError::BadDigest);
                    }
                    Ok(())
                },
            )
            .await?;
        let sse_fields = SseFields::of(sse.as_ref(), self.region());
        let mut out = UploadPartOutput {
            e_tag: Some(ETag::Strong(etag)),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm,
            sse_customer_key_md5: sse_fields.sse_customer_key_md5,
            server_side_encryption: sse_fields.server_side_encryption,
            ssekms_key_id: sse_fields.ssekms_key_id,
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ..Default::default()
        };
        if let Some(sum) = sum {
            crate::set_checksums!(out, crate::objects::checksum::stored(&[sum]));
        }
        Ok(S3Response::new(out))
    }

    /// UploadPartCopy: the part is a byte range of the source object (or
    /// all of it). On the source's block boundaries it shares the source's
    /// blocks ([`crate::multipart::part_copy`]); otherwise the range is read and
    /// written as new blocks.
    pub async fn upload_part_copy(
        self: Arc<Self>,
        req: S3Request<UploadPartCopyInput>,
        ctx: Ctx<CopyGrant>,
    ) -> ApiResult<S3Response<UploadPartCopyOutput>> {
        let (src_access, dst) = (ctx.granted.source, ctx.granted.bucket);
        let i = req.input;
        check_part_number(i.part_number)?;
        let (_, src_key, src_vid) = source_of(&i.copy_source)?;
        let src = src_access.bucket;
        let given = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        let (cur, mpu) = tokio::join!(
            self.current(src, src_key, src_vid),
            self.upload_sealing(dst, &i.key, &i.upload_id, given)
        );
        let (cur, (mpu, sse)) = (
            src_access.hide(crate::objects::copy::copy_source_missing(cur))?,
            mpu?,
        );
        src_access.check_version(Some(&cur.acl))?;
        let src_sse = crate::objects::copy::open_source(
            &self.kms,
            &cur,
            i.copy_source_sse_customer_algorithm.as_deref(),
            i.copy_source_sse_customer_key.as_deref(),
            i.copy_source_sse_customer_key_md5.as_deref(),
        )
        .await?;
        crate::objects::copy::check_copy_conditions(&cur, crate::copy_source_conditions!(i))?;
        let size = cur.meta.size;
        let range = match &i.copy_source_range {
            None => 0..size,
            Some(r) => match s3s::dto::Range::parse(r) {
                // Only `bytes=first-last`, inside the object.
                Ok(s3s::dto::Range::Int {
                    first,
                    last: Some(last),
                }) if first <= last && last < size => first..last + 1,
                _ => {
                    return Err(ApiError::InvalidArgument(format!(
                        "Range specified is not valid for source object of size: {size}"
                    )))
                }
            },
        };
        let expected = range.end - range.start;
        // An upload with a checksum: the copied part's is computed.
        let sum = upload_checksum(&mpu)?.map(|(algo, _)| Expected {
            algo,
            value: Some(String::new()),
        });
        let encrypted = src_sse.is_some() || sse.is_some();
        let source = match crate::multipart::part_copy::shareable(
            &self,
            &cur,
            range.clone(),
            encrypted,
            sum.is_some(),
        )
        .await?
        {
            Some(shared) => PartSource::Shared(shared),
            None => PartSource::Body(Chunker::new(Some(self.content(
                &cur,
                range.clone(),
                src_sse,
            )?))),
        };
        let (etag, _, sum) = self
            .write_part(
                &mpu,
                i.part_number,
                source,
                BodyChecks {
                    checksum: sum.as_ref(),
                    trailers: None,
                    sse: sse.as_ref(),
                },
                |_, size| {
                    if size != expected {
                        return Err(ApiError::Internal(format!(
                            "copied {size} bytes of the source's {expected}"
                        )));
                    }
                    Ok(())
                },
            )
            .await?;
        let mut result = CopyPartResult {
            e_tag: Some(ETag::Strong(etag)),
            last_modified: Some(meta::timestamp(now_msec())),
            ..Default::default()
        };
        if let Some(sum) = sum {
            crate::set_checksums!(result, crate::objects::checksum::stored(&[sum]));
        }
        let sse_fields = SseFields::of(sse.as_ref(), self.region());
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(result),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm,
            sse_customer_key_md5: sse_fields.sse_customer_key_md5,
            server_side_encryption: sse_fields.server_side_encryption,
            ssekms_key_id: sse_fields.ssekms_key_id,
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ..Default::default()
        }))
    }

    /// Writes one part of `mpu` from `source`; `check(md5, size)` runs once
    /// the data is written and before the part is recorded as finished.
    /// Returns the part's etag, size and verified checksum (header, value);
    /// the checksum is kept with the part when the upload has one.
    async fn write_part(
        self: &Arc<Self>,
        mpu: &MultipartUpload,
        part_number: i32,
        source: PartSource,
        checks: BodyChecks<'_>,
        check: impl FnOnce(&[u8; 16], u64) -> ApiResult<()>,
    ) -> ApiResult<(String, u64, Option<(String, String)>)> {
        let BodyChecks {
            checksum,
            trailers,
            sse,
        } = checks;
        let part_number = part_number as u64;
        let version = gen_uuid();
        let pkey = MpuPartKey {
            part_number,
            timestamp: now_msec(),
        };
        let part = |etag: Option<String>, size: Option<u64>, checksum: Option<String>| MpuPart {
            version,
            etag,
            size,
            checksum,
        };
        // The part is listed before its blocks are written, so that an
        // abort releases them whatever happens to this request.
        self.writer
            .record_part(mpu, pkey, part(None, None, None))
            .await?;
        let backlink = VersionBacklink::MultipartUpload {
            upload_id: mpu.upload_id,
        };
        // Until the part is recorded as finished, a failure leaves
        // nothing: its version (listed in the upload without an etag, so
        // never completed) is deleted durably, and with it the references
        // of its blocks, some of which may be stored nowhere. (Once the
        // finished part may be on a replica, its version stays: a client
        // may complete the upload with the etag it computed.)
        let written = async {
            let mut body = match source {
                PartSource::Body(b) => b,
                PartSource::Shared(shared) => {
                    let w = crate::multipart::part_copy::share_blocks(
                        self,
                        version,
                        backlink.clone(),
                        part_number,
                        shared,
                        checksum.map(|e| e.algo.hasher()),
                    )
                    .await?;
                    check(&w.md5, w.size)?;
                    let verified = match (checksum, &w.checksum) {
                        (Some(e), Some(sum)) => {
                            Some(crate::objects::checksum::verify(e, sum, trailers)?)
                        }
                        _ => None,
                    };
                    return Ok((w.md5, w.size, verified));
                }
            };
            let (md5, size, sum) = match body.next(BLOCK_SIZE).await? {
                None => (md5_of(&[]), 0, checksum.map(|e| e.algo.hasher().finalize())),
                Some(first) => {
                    let target = BlockTarget {
                        uuid: version,
                        backlink: backlink.clone(),
                        part_number,
                        ec: self.class_code(mpu.storage_class.as_deref()),
                    };
                    let w = write_blocks(
                        self,
                        &target,
                        first,
                        &mut body,
                        checksum.map(|e| e.algo.hasher()),
                        sse,
                    )
                    .await?;
                    (w.md5, w.size, w.checksum)
                }
            };
            check(&md5, size)?;
            let verified = match (checksum, &sum) {
                (Some(e), Some(sum)) => Some(crate::objects::checksum::verify(e, sum, trailers)?),
                _ => None,
            };
            Ok((md5, size, verified))
        }
        .await;
        let (md5, size, verified) = match written {
            Ok(w) => w,
            Err(e) => {
                let dead = [Version::deleted(version, backlink)];
                if let Err(q) = self.versions.insert_later(&dead).await {
                    tracing::warn!(
                        upload = %hex::encode(mpu.upload_id),
                        "cannot queue the release of a failed part: {q}"
                    );
                }
                return Err(e);
            }
        };
        let kept = verified
            .as_ref()
            .filter(|_| mpu.checksum.is_some())
            .map(|(_, v)| v.clone());
        let etag = crate::encryption::sse::etag_of(sse, &md5);
        self.writer
            .record_part(mpu, pkey, part(Some(etag.clone()), Some(size), kept))
            .await?;
        Ok((etag, size, verified))
    }
}
