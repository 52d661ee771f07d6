//! Multipart uploads: CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload, AbortMultipartUpload, ListParts,
//! ListMultipartUploads.
//!
//! The upload id is the object version's id. Each part is written as its
//! own version (backlink: the upload), listed in the `multipart_upload`
//! entry under (part number, timestamp). Completion writes one version
//! listing every chosen part's blocks by (part number, offset in part), its
//! block references, then the object version complete; the object table's
//! hook then deletes the upload and its parts' versions.
//!
//! Multipart uploads, with UploadPartCopy in [`part_copy`].

pub mod part_copy;

use std::sync::Arc;

use garage_model::block_ref_table::BlockRef;
use garage_model::bucket_table::Versioning;
use garage_model::mpu_table::{
    completed_in, completed_version, MpuChecksum, MpuPart, MpuPartKey, MultipartUpload,
};
use garage_model::object_table::{
    gen_upload_id, Object, ObjectFilter, ObjectVersion, ObjectVersionData, ObjectVersionMeta,
    ObjectVersionState,
};
use garage_model::version_table::{read_version, Version, VersionBacklink};
use garage_table::EmptyKey;
use garage_util::data::{gen_uuid, Uuid};
use garage_util::time::now_msec;
use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::Action;
use crate::conditional::WriteConditions;
use crate::ctx::{check_key, Api};
use crate::encryption::sse::{check_read, is_encrypted, plain_size, SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::checksum::{Algo, Expected};
use crate::objects::put::{md5_of, parse_content_md5, write_blocks, Chunker, BLOCK_SIZE};

/// Where a part's data comes from.
enum PartSource {
    /// A body to cut into blocks and write (UploadPart, and UploadPartCopy
    /// when it cannot share).
    Body(Chunker),
    /// Blocks of the source object, shared (UploadPartCopy: see
    /// [`crate::multipart::part_copy`]).
    Shared(crate::multipart::part_copy::Shared),
}

/// Smallest part size, except for the last part.
pub const MIN_PART_SIZE: u64 = 5 << 20;
pub const MAX_PART_NUMBER: i32 = 10_000;
const MAX_UPLOADS_LISTED: usize = 1000;

fn check_part_number(n: i32) -> ApiResult<()> {
    if !(1..=MAX_PART_NUMBER).contains(&n) {
        return Err(ApiError::InvalidArgument(format!(
            "Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive"
        )));
    }
    Ok(())
}

/// The checksum algorithm and type an upload was created with.
fn upload_checksum(mpu: &MultipartUpload) -> ApiResult<Option<(Algo, bool)>> {
    mpu.checksum
        .as_ref()
        .map(|c| {
            Algo::parse(&c.algorithm)
                .map(|a| (a, c.full_object))
                .ok_or_else(|| ApiError::Internal(format!("unknown algorithm {}", c.algorithm)))
        })
        .transpose()
}

/// The checksum a part of an upload created with `algo` must carry.
fn part_checksum(algo: Algo, expected: Option<Expected>) -> ApiResult<Expected> {
    let lower = algo.name().to_ascii_lowercase();
    match expected {
        None => Err(ApiError::InvalidRequest(format!(
            "The upload was created using a {lower} checksum. The complete request must include the checksum for each part."
        ))),
        Some(e) if e.algo != algo => Err(ApiError::InvalidRequest(format!(
            "Checksum Type mismatch occurred, expected checksum Type: {lower}, actual checksum Type: {}",
            e.algo.name().to_ascii_lowercase()
        ))),
        Some(e) => Ok(e),
    }
}

fn parse_upload_id(id: &str) -> ApiResult<Uuid> {
    id.parse()
        .map_err(|_| ApiError::NoSuchUpload(format!("{id} is not an upload id")))
}

/// The parts to use: for each part number, the newest finished write.
fn finished_parts(mpu: &MultipartUpload) -> Vec<(u64, MpuPartKey, MpuPart)> {
    let mut out: Vec<(u64, MpuPartKey, MpuPart)> = Vec::new();
    for (k, p) in mpu.parts.items() {
        if p.etag.is_none() || p.size.is_none() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.0 == k.part_number => {
                if k.timestamp >= last.1.timestamp {
                    *last = (k.part_number, *k, p.clone());
                }
            }
            _ => out.push((k.part_number, *k, p.clone())),
        }
    }
    out
}

impl Api {
    /// The live upload `id` of `bucket`/`key`, and the SSE-C key its parts
    /// are sealed with, checked against the one `given` with the request.
    async fn upload_sealing(
        &self,
        bucket: Uuid,
        key: &str,
        id: &str,
        given: Option<SseKey>,
    ) -> ApiResult<(MultipartUpload, Option<SseKey>)> {
        let key_s = key.to_string();
        let (mpu, obj) = tokio::join!(
            self.upload(bucket, key, id),
            self.objects.get(&bucket, &key_s)
        );
        let mpu = mpu?;
        let headers = obj?
            .and_then(|o| {
                o.version(mpu.timestamp, mpu.upload_id)
                    .and_then(|v| match &v.state {
                        ObjectVersionState::Uploading { headers, .. } => Some(headers.clone()),
                        _ => None,
                    })
            })
            .ok_or_else(|| ApiError::NoSuchUpload(id.into()))?;
        let sse = check_read(&self.kms, &headers, given.as_ref())
            .await
            .map_err(|e| {
                match e {
            ApiError::InvalidRequest(_) if given.is_none() => ApiError::InvalidRequest(
                "The multipart upload initiate requested encryption. Subsequent part requests \
                 must include the appropriate encryption parameters."
                    .into(),
            ),
            ApiError::InvalidRequest(_) | ApiError::AccessDenied(_) => ApiError::InvalidArgument(
                "The provided encryption parameters did not match the ones used originally.".into(),
            ),
            e => e,
        }
            })?;
        Ok((mpu, sse))
    }

    /// The live upload `id` of `bucket`/`key`.
    async fn upload(&self, bucket: Uuid, key: &str, id: &str) -> ApiResult<MultipartUpload> {
        let upload_id = parse_upload_id(id)?;
        self.mpus
            .get(&upload_id, &EmptyKey)
            .await?
            .filter(|m| !m.deleted.get() && m.bucket_id == bucket && m.key == key)
            .ok_or_else(|| ApiError::NoSuchUpload(id.into()))
    }

    pub async fn create_multipart_upload(
        self: Arc<Self>,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> ApiResult<S3Response<CreateMultipartUploadOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        check_key(&i.key)?;
        let bucket = self
            .authorize(&who, &i.bucket, Action::PutObject, Some(&i.key), None)
            .await?
            .bucket;
        let algo = i
            .checksum_algorithm
            .as_ref()
            .map(|a| {
                Algo::parse(a.as_str()).ok_or_else(|| {
                    ApiError::InvalidRequest("Checksum algorithm provided is unsupported.".into())
                })
            })
            .transpose()?;
        let checksum = match (algo, &i.checksum_type) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(ApiError::InvalidRequest(
                    "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.".into(),
                ))
            }
            (Some(a), t) => Some((a, a.upload_type(t.as_ref().map(|t| t.as_str()))?)),
        };
        let customer = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        let mut headers = crate::std_headers!(i).into_pairs();
        if let Some(t) = i.tagging.as_deref() {
            crate::versions::tagging::set_in_headers(
                &mut headers,
                &crate::versions::tagging::parse_header(t)?,
            );
        }
        let upload_id = gen_upload_id();
        let timestamp = garage_util::time::stamp();
        // The lock is decided now (the bucket's default retention counts
        // from the upload's creation) and kept with the upload's version;
        // so is the encryption (an SSE-S3 upload's data key is made now).
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
        if let Some(k) = &sse {
            headers.extend(k.stored_pairs());
        }
        // An ordered write (see `garage_model::object_write`): an upload stamped
        // before a version a replica already holds would be dropped from
        // the object entry at once (with its upload). Refused, it starts
        // again under a new id, stamped after that version.
        let (mut upload_id, mut timestamp) = (upload_id, timestamp);
        let mut attempts = 0;
        loop {
            let mut upload = ObjectVersion::new(
                upload_id,
                timestamp,
                ObjectVersionState::Uploading {
                    multipart: true,
                    headers: headers.clone(),
                },
                place.versioning,
            );
            place.apply(&mut upload);
            let obj = Object::new(bucket, i.key.clone(), vec![upload]);
            let mut mpu = MultipartUpload::new(upload_id, timestamp, bucket, i.key.clone());
            mpu.checksum = checksum.map(|(a, full_object)| MpuChecksum {
                algorithm: a.name().to_string(),
                full_object,
            });
            mpu.storage_class = place.class.name.clone();
            let Some(newer) = self.writer.start_upload(&obj, &mpu).await? else {
                break;
            };
            attempts += 1;
            if attempts > 8 {
                return Err(ApiError::Unavailable(
                    "newer writes of this key kept overtaking the upload's creation; try again"
                        .into(),
                ));
            }
            upload_id = gen_upload_id();
            timestamp = garage_util::time::increment_after(newer);
        }
        let sse_fields = SseFields::of(sse.as_ref(), self.region());
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(upload_id.hex()),
            checksum_algorithm: checksum
                .map(|(a, _)| ChecksumAlgorithm::from(a.name().to_string())),
            checksum_type: checksum
                .map(|(_, f)| ChecksumType::from_static(crate::objects::checksum::type_name(f))),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm,
            sse_customer_key_md5: sse_fields.sse_customer_key_md5,
            server_side_encryption: sse_fields.server_side_encryption,
            ssekms_key_id: sse_fields.ssekms_key_id,
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ..Default::default()
        }))
    }

    pub async fn upload_part(
        self: Arc<Self>,
        req: S3Request<UploadPartInput>,
    ) -> ApiResult<S3Response<UploadPartOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        let bucket = self
            .authorize(&who, &i.bucket, Action::PutObject, Some(&i.key), None)
            .await?
            .bucket;
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
                expected.as_ref(),
                trailers.as_ref(),
                sse.as_ref(),
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
    ) -> ApiResult<S3Response<UploadPartCopyOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        check_part_number(i.part_number)?;
        let (src_bucket, src_key, src_vid) = crate::objects::copy::source_of(&i.copy_source)?;
        let (src_access, dst) = self
            .authorize_copy(&who, (src_bucket, src_key, src_vid), (&i.bucket, &i.key))
            .await?;
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
        src_access.check_version(Some(cur.acl))?;
        let src_sse = crate::objects::copy::open_source(
            &self.kms,
            &cur,
            i.copy_source_sse_customer_algorithm.as_deref(),
            i.copy_source_sse_customer_key.as_deref(),
            i.copy_source_sse_customer_key_md5.as_deref(),
        )
        .await?;
        crate::objects::copy::check_copy_conditions(
            &cur,
            i.copy_source_if_match.as_ref(),
            i.copy_source_if_none_match.as_ref(),
            i.copy_source_if_modified_since.as_ref(),
            i.copy_source_if_unmodified_since.as_ref(),
        )?;
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
                sum.as_ref(),
                None,
                sse.as_ref(),
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
    #[allow(clippy::too_many_arguments)]
    async fn write_part(
        self: &Arc<Self>,
        mpu: &MultipartUpload,
        part_number: i32,
        source: PartSource,
        checksum: Option<&crate::objects::checksum::Expected>,
        trailers: Option<&s3s::TrailingHeaders>,
        sse: Option<&SseKey>,
        check: impl FnOnce(&[u8; 16], u64) -> ApiResult<()>,
    ) -> ApiResult<(String, u64, Option<(String, String)>)> {
        let part_number = part_number as u64;
        let version = gen_uuid();
        let pkey = MpuPartKey {
            part_number,
            timestamp: now_msec(),
        };
        let entry = |etag: Option<String>, size: Option<u64>, checksum: Option<String>| {
            let mut m =
                MultipartUpload::new(mpu.upload_id, mpu.timestamp, mpu.bucket_id, mpu.key.clone());
            m.parts.put(
                pkey,
                MpuPart {
                    version,
                    etag,
                    size,
                    checksum,
                },
            );
            m
        };
        // The part is listed before its blocks are written, so that an
        // abort releases them whatever happens to this request.
        self.mpus.insert(&entry(None, None, None)).await?;
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
                    let w = write_blocks(
                        self,
                        version,
                        backlink.clone(),
                        part_number,
                        first,
                        &mut body,
                        checksum.map(|e| e.algo.hasher()),
                        sse,
                        self.class_code(mpu.storage_class.as_deref()),
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
        self.mpus
            .insert(&entry(Some(etag.clone()), Some(size), kept))
            .await?;
        Ok((etag, size, verified))
    }

    pub async fn complete_multipart_upload(
        self: Arc<Self>,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> ApiResult<S3Response<CompleteMultipartUploadOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        let bucket = self
            .authorize(&who, &i.bucket, Action::PutObject, Some(&i.key), None)
            .await?
            .bucket;
        let (mpu, obj) = tokio::join!(
            self.upload(bucket, &i.key, &i.upload_id),
            self.objects.get(&bucket, &i.key)
        );
        let obj = obj?;
        // The stamp of the key's newest complete version.
        let newest = obj
            .as_ref()
            .and_then(|o| o.versions().iter().rev().find(|v| v.is_complete()))
            .map(|v| v.timestamp);
        // A retry of a completion that succeeded (its answer lost): the
        // same answer, as long as its version is the object's; the upload
        // is ended if the first one could not end it.
        if let Some((etag, version_id)) = completed_before(obj.as_ref(), &i.upload_id) {
            if let Ok(mpu) = &mpu {
                self.writer.abort_upload(mpu).await?;
            }
            return Ok(S3Response::new(completed_output(
                &i.bucket, &i.key, etag, version_id,
            )));
        }
        let mpu = mpu?;
        let cond = WriteConditions::of(i.if_match.as_ref(), i.if_none_match.as_ref());
        if let Some(c) = &cond {
            // Fails early; decided at the end.
            c.check(obj.as_ref().and_then(|o| o.last_data()), &i.key)?;
        }
        let (headers, lock, acl) = obj
            .and_then(|o| {
                o.version(mpu.timestamp, mpu.upload_id)
                    .and_then(|v| match &v.state {
                        ObjectVersionState::Uploading { headers, .. } => {
                            Some((headers.clone(), v.lock.clone(), v.acl.clone()))
                        }
                        _ => None,
                    })
            })
            .ok_or_else(|| ApiError::NoSuchUpload(i.upload_id.clone()))?;
        let given_whole = crate::given_checksums!(i);
        let asked = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        if asked.is_empty() {
            return Err(ApiError::InvalidArgument(
                "You must specify at least one part".into(),
            ));
        }
        let checksum = upload_checksum(&mpu)?;
        if let (Some((_, full)), Some(t)) = (checksum, &i.checksum_type) {
            if !t
                .as_str()
                .eq_ignore_ascii_case(crate::objects::checksum::type_name(full))
            {
                return Err(ApiError::InvalidRequest(format!(
                    "The upload was created using the {} checksum mode. The complete request must use the same checksum mode.",
                    crate::objects::checksum::type_name(full)
                )));
            }
        }
        let have = finished_parts(&mpu);
        let mut chosen = Vec::new();
        let mut prev = 0;
        for p in asked.iter() {
            let n = p.part_number.unwrap_or(0);
            if n <= prev {
                return Err(ApiError::InvalidPartOrder);
            }
            prev = n;
            let found = have
                .iter()
                .find(|(pn, _, _)| *pn == n as u64)
                .ok_or_else(|| ApiError::InvalidPart(format!("part {n} was not uploaded")))?;
            let etag = found.2.etag.clone().unwrap_or_default();
            if let Some(e) = &p.e_tag {
                if e.value() != etag {
                    return Err(ApiError::InvalidPart(format!(
                        "part {n}: the ETag given is not the part's"
                    )));
                }
            }
            if let Some((algo, full)) = checksum {
                let given = crate::given_checksums!(p);
                let stored = found.2.checksum.as_deref();
                match algo.value(&given) {
                    // A composite checksum is made of the parts' ones: the
                    // request must name them.
                    None if !full => {
                        return Err(ApiError::InvalidRequest(format!(
                            "The upload was created using a {} checksum. The complete request must include the checksum for each part. It was missing for part {n} in the request.",
                            algo.name().to_ascii_lowercase()
                        )))
                    }
                    None => (),
                    Some(v) if Some(v.as_str()) != stored => {
                        return Err(ApiError::InvalidPart(format!(
                            "part {n}: the {} checksum given is not the part's",
                            algo.name()
                        )))
                    }
                    Some(_) => (),
                }
                if stored.is_none() {
                    return Err(ApiError::InvalidPart(format!(
                        "part {n} was uploaded without its {} checksum",
                        algo.name()
                    )));
                }
            }
            chosen.push(found.clone());
        }
        for (idx, (n, _, p)) in chosen.iter().enumerate() {
            if idx + 1 < chosen.len() && p.size.unwrap_or(0) < MIN_PART_SIZE {
                return Err(ApiError::EntityTooSmall(*n as i32));
            }
        }
        // The parts' block lists.
        let versions = futures::future::try_join_all(
            chosen
                .iter()
                .map(|(_, _, p)| read_version(&self.versions, &p.version)),
        )
        .await?;
        // Stamped at the upload's creation (S3's Last-Modified of an
        // upload), or, if a newer version of the key is complete already
        // (the upload outlived it), after it: not refused by the replicas,
        // so a retry finds it under its derived id.
        let fin_ts = match newest {
            Some(t) if t >= mpu.timestamp => garage_util::time::increment_after(t),
            _ => mpu.timestamp,
        };
        let fin_id = completed_version(&mpu.upload_id, fin_ts);
        let mut fin = Version::new(
            fin_id,
            VersionBacklink::Object {
                bucket_id: bucket,
                key: i.key.clone(),
            },
        );
        let mut etags = Md5::new();
        let mut size = 0u64;
        let sealed = is_encrypted(&headers);
        let sse_fields = SseFields::of_stored(&headers, self.region());
        for ((n, _, p), v) in chosen.iter().zip(versions.iter()) {
            let v = v
                .as_ref()
                .filter(|v| !v.deleted.get())
                .ok_or_else(|| ApiError::InvalidPart(format!("part {n} is gone")))?;
            let mut part_size = 0;
            for (k, b) in v.blocks.items() {
                fin.blocks.put(*k, *b);
                part_size += plain_size(b.size, sealed);
            }
            if part_size != p.size.unwrap_or(0) {
                return Err(ApiError::Internal(format!(
                    "part {n}: its version lists {part_size} bytes, the upload {}",
                    p.size.unwrap_or(0)
                )));
            }
            size += part_size;
            etags.update(hex::decode(p.etag.as_deref().unwrap_or("")).unwrap_or_default());
        }
        let etag = format!("{}-{}", hex::encode(etags.finalize()), chosen.len());
        let mut headers = headers;
        let mut object_sum = None;
        if let Some((algo, full)) = checksum {
            let parts: Vec<(&str, u64)> = chosen
                .iter()
                .map(|(_, _, p)| (p.checksum.as_deref().unwrap_or(""), p.size.unwrap_or(0)))
                .collect();
            let value = crate::objects::checksum::multipart(algo, full, &parts)?;
            if let Some(given) = algo.value(&given_whole) {
                // A composite value may be given with or without `-N`.
                let bare = value.rsplit_once('-').map_or(value.as_str(), |(v, _)| v);
                if given != value && (full || given != bare) {
                    return Err(ApiError::BadDigestOf(algo.name()));
                }
            }
            headers.retain(|(k, _)| !k.starts_with("x-amz-checksum-"));
            headers.push((algo.header().to_string(), value.clone()));
            headers.push((
                crate::objects::checksum::TYPE_HEADER.to_string(),
                crate::objects::checksum::type_name(full).to_string(),
            ));
            let list: Vec<String> = chosen
                .iter()
                .map(|(n, _, p)| format!("{n}:{}", p.checksum.as_deref().unwrap_or("")))
                .collect();
            headers.push((
                crate::objects::checksum::PARTS_HEADER.to_string(),
                list.join(","),
            ));
            object_sum = Some((algo.header().to_string(), value, full));
        }
        let meta = ObjectVersionMeta {
            headers,
            size,
            etag: etag.clone(),
            storage_class: mpu.storage_class.clone(),
            first_ec: fin.blocks.items().next().and_then(|(_, b)| b.ec),
        };
        let data = match fin.blocks.items().next() {
            None => ObjectVersionData::Inline(meta, vec![]),
            Some((_, first)) => {
                let refs: Vec<BlockRef> = fin
                    .blocks
                    .items()
                    .map(|(_, b)| BlockRef::to_block(b, fin_id))
                    .collect();
                let segments = Version::segments(fin.uuid, &fin.backlink, fin.blocks.items());
                let (a, b) = tokio::join!(
                    self.block_refs.insert_many(&refs),
                    self.versions.insert_many(&segments)
                );
                a?;
                b?;
                ObjectVersionData::FirstBlock(meta, first.hash)
            }
        };
        let mut version = ObjectVersion::new(
            fin_id,
            fin_ts,
            ObjectVersionState::Complete(data),
            self.versioning_of(bucket).await?,
        );
        version.lock = lock;
        version.acl = acl;
        let blocks: Vec<_> = fin.blocks.items().map(|(k, b)| (*k, *b)).collect();
        let version = match cond {
            None => {
                self.writer
                    .write_version(bucket, &i.key, &version, Some(&blocks))
                    .await?
            }
            // A refused completion leaves the upload as it was (as S3
            // does): it can be completed again, or aborted.
            Some(c) => self
                .commit_conditional(bucket, &i.key, version, &c, false)
                .await
                .map_err(|r| r.error)?,
        };
        // The upload is over: its own version becomes a tombstone and its
        // entry goes (the hooks release its parts; the object's version
        // has its own references to their blocks). If this fails, a
        // retried completion finds the version and ends the upload then.
        self.writer.abort_upload(&mpu).await?;
        let version_id =
            (version.versioning != Versioning::Off).then(|| version.version_id().to_string());
        let mut out = completed_output(&i.bucket, &i.key, etag, version_id);
        out.server_side_encryption = sse_fields.server_side_encryption;
        out.ssekms_key_id = sse_fields.ssekms_key_id;
        out.bucket_key_enabled = sse_fields.bucket_key_enabled;
        if let Some((h, v, full)) = object_sum {
            crate::set_checksums!(out, crate::objects::checksum::stored(&[(h, v)]));
            out.checksum_type = Some(ChecksumType::from_static(
                crate::objects::checksum::type_name(full),
            ));
        }
        Ok(S3Response::new(out))
    }

    pub async fn abort_multipart_upload(
        self: Arc<Self>,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> ApiResult<S3Response<AbortMultipartUploadOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        let bucket = self
            .authorize(
                &who,
                &i.bucket,
                Action::AbortMultipartUpload,
                Some(&i.key),
                None,
            )
            .await?
            .bucket;
        let mpu = self.upload(bucket, &i.key, &i.upload_id).await?;
        self.writer.abort_upload(&mpu).await?;
        let mut resp = S3Response::new(AbortMultipartUploadOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub async fn list_parts(
        self: Arc<Self>,
        req: S3Request<ListPartsInput>,
    ) -> ApiResult<S3Response<ListPartsOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        let bucket = self
            .authorize(
                &who,
                &i.bucket,
                Action::ListMultipartUploadParts,
                Some(&i.key),
                None,
            )
            .await?
            .bucket;
        let mpu = self.upload(bucket, &i.key, &i.upload_id).await?;
        let max = i.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
        let marker = i.part_number_marker.unwrap_or(0).max(0) as u64;
        let all: Vec<_> = finished_parts(&mpu)
            .into_iter()
            .filter(|(n, _, _)| *n > marker)
            .collect();
        let truncated = all.len() > max;
        let checksum = upload_checksum(&mpu)?;
        let parts: Vec<Part> = all
            .iter()
            .take(max)
            .map(|(n, k, p)| {
                let mut part = Part {
                    part_number: Some(*n as i32),
                    e_tag: p.etag.clone().map(ETag::Strong),
                    size: p.size.map(|s| s as i64),
                    last_modified: Some(meta::timestamp(k.timestamp)),
                    ..Default::default()
                };
                if let (Some((algo, _)), Some(v)) = (checksum, &p.checksum) {
                    crate::set_checksums!(
                        part,
                        crate::objects::checksum::stored(&[(algo.header().to_string(), v.clone())])
                    );
                }
                part
            })
            .collect();
        let next = parts.last().and_then(|p| p.part_number);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(i.upload_id),
            max_parts: Some(max as i32),
            part_number_marker: i.part_number_marker,
            next_part_number_marker: if truncated { next } else { None },
            is_truncated: Some(truncated),
            parts: Some(parts),
            checksum_algorithm: checksum
                .map(|(a, _)| ChecksumAlgorithm::from(a.name().to_string())),
            checksum_type: checksum
                .map(|(_, f)| ChecksumType::from_static(crate::objects::checksum::type_name(f))),
            storage_class: Some(StorageClass::from(
                crate::storage_class::reported(mpu.storage_class.as_deref()).to_string(),
            )),
            ..Default::default()
        }))
    }

    pub async fn list_multipart_uploads(
        self: Arc<Self>,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> ApiResult<S3Response<ListMultipartUploadsOutput>> {
        let who = self.requester(&req).await?;
        let i = req.input;
        let bucket = self
            .authorize(
                &who,
                &i.bucket,
                Action::ListBucketMultipartUploads,
                None,
                i.prefix.as_deref(),
            )
            .await?
            .bucket;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let objects = self
            .objects
            .get_range(
                &bucket,
                Some(prefix.clone()),
                Some(ObjectFilter::IsUploading {
                    multipart: Some(true),
                }),
                MAX_UPLOADS_LISTED,
                false,
            )
            .await?;
        let mut uploads = Vec::new();
        for o in objects.iter().filter(|o| o.key.starts_with(&prefix)) {
            for v in o.versions().iter().filter(|v| v.is_uploading(Some(true))) {
                uploads.push(UploadRow {
                    key: o.key.clone(),
                    upload_id: v.uuid,
                    initiated: v.timestamp,
                });
            }
        }
        let truncated = uploads.len() > max;
        uploads.truncate(max);
        // Each upload's storage class is in its upload entry: read them
        // (32 at a time), as the object entry does not carry it.
        let classes: Vec<Option<String>> = {
            use futures::StreamExt;
            let ids: Vec<Uuid> = uploads.iter().map(|u| u.upload_id).collect();
            futures::stream::iter(ids.into_iter().map(|id| {
                let mpus = self.mpus.clone();
                async move {
                    mpus.get(&id, &EmptyKey)
                        .await
                        .map(|m| m.and_then(|m| m.storage_class))
                }
            }))
            .buffered(32)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?
        };
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: i.prefix,
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            uploads: Some(
                uploads
                    .into_iter()
                    .zip(classes)
                    .map(|(u, class)| s3s::dto::MultipartUpload {
                        key: Some(u.key),
                        upload_id: Some(u.upload_id.hex()),
                        initiated: Some(meta::timestamp(u.initiated)),
                        storage_class: Some(StorageClass::from(
                            crate::storage_class::reported(class.as_deref()).to_string(),
                        )),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }))
    }
}

struct UploadRow {
    key: String,
    upload_id: Uuid,
    initiated: u64,
}

/// What CompleteMultipartUpload answers for `bucket`/`key`.
fn completed_output(
    bucket: &str,
    key: &str,
    etag: String,
    version_id: Option<String>,
) -> CompleteMultipartUploadOutput {
    CompleteMultipartUploadOutput {
        bucket: Some(bucket.to_string()),
        key: Some(key.to_string()),
        e_tag: Some(ETag::Strong(etag)),
        location: Some(format!("/{bucket}/{key}")),
        version_id,
        ..Default::default()
    }
}

/// The ETag and version id of the object version a completion of upload
/// `id` wrote, if it is in `obj` (complete): what a retried completion
/// answers. (One stamped again because newer writes overtook it has a
/// random id: its retry answers `NoSuchUpload`.)
fn completed_before(obj: Option<&Object>, id: &str) -> Option<(String, Option<String>)> {
    let upload_id = parse_upload_id(id).ok()?;
    let v = completed_in(obj?, &upload_id)?;
    match &v.state {
        ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _))
        | ObjectVersionState::Complete(ObjectVersionData::Inline(meta, _)) => Some((
            meta.etag.clone(),
            (v.versioning != Versioning::Off).then(|| v.version_id().to_string()),
        )),
        _ => None,
    }
}
