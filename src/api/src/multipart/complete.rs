//! CompleteMultipartUpload: the chosen parts' blocks listed in one version,
//! made current by one ordered write; a retried completion answers what
//! the first one wrote.

use garage_model::notify::Op;
use std::sync::Arc;

use garage_model::block_ref_table::BlockRef;
use garage_model::bucket_table::Versioning;
use garage_model::mpu_table::{completed_in, completed_version};
use garage_model::object_table::{
    Object, ObjectVersion, ObjectVersionData, ObjectVersionMeta, ObjectVersionState,
};
use garage_model::version_table::{read_versions_near, Version, VersionBacklink};
use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use super::{parse_upload_id, upload_checksum, MIN_PART_SIZE};
use crate::access::authorize::Access;
use crate::conditional::WriteConditions;
use crate::ctx::Api;
use crate::encryption::sse::{is_encrypted, plain_size, SseFields};
use crate::error::{ApiError, ApiResult};
use crate::request::Ctx;

impl Api {
    pub async fn complete_multipart_upload(
        self: Arc<Self>,
        req: S3Request<CompleteMultipartUploadInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<CompleteMultipartUploadOutput>> {
        let cause = crate::request::cause(&req.extensions, &ctx.who, Op::CompleteMultipartUpload);
        let i = req.input;
        let bucket = ctx.granted.bucket;
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
        let (headers, lock, upload) = obj
            .and_then(|o| {
                o.version(mpu.timestamp, mpu.upload_id)
                    .and_then(|v| match &v.state {
                        ObjectVersionState::Uploading { headers, .. } => {
                            Some((headers.clone(), v.lock.clone(), v.clone()))
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
        let started = std::time::Instant::now();
        let have = self.finished_parts_of(&mpu, 1, None).await?;
        let parts_read = started.elapsed();
        let mut chosen = Vec::new();
        let mut prev = 0;
        for p in asked.iter() {
            let n = p.part_number.unwrap_or(0);
            if n <= prev {
                return Err(ApiError::InvalidPartOrder);
            }
            prev = n;
            // `have` is in part order.
            let found = have
                .binary_search_by_key(&(n as u64), |(pn, _, _)| *pn)
                .ok()
                .map(|at| &have[at])
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
        // The parts' block lists. A finished part's version lists all its
        // blocks (written at quorum before the part got its etag) and does
        // not change while the upload is in progress (the erasure-coding
        // catch-up waits for its end): this node's copy serves when it
        // lists the part's size, without a round trip (10 000 parts: 10 000
        // quorum reads otherwise).
        let sealed = is_encrypted(&headers);
        let versions_started = std::time::Instant::now();
        let uuids: Vec<_> = chosen.iter().map(|(_, _, p)| p.version).collect();
        let versions = read_versions_near(&self.versions, &uuids, |i, v| {
            v.blocks
                .items()
                .map(|(_, b)| plain_size(b.size, sealed))
                .sum::<u64>()
                == chosen[i].2.size.unwrap_or(0)
        })
        .await?;
        let versions_read = versions_started.elapsed();
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
            recoded: 0,
        };
        let refs_started = std::time::Instant::now();
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
        version.copy_acl_from(&upload);
        let blocks: Vec<_> = fin.blocks.items().map(|(k, b)| (*k, *b)).collect();
        let refs_written = refs_started.elapsed();
        let commit_started = std::time::Instant::now();
        let version = match cond {
            None => {
                self.writer
                    .write_version(bucket, &i.key, &version, Some(&blocks), &cause)
                    .await?
            }
            // A refused completion leaves the upload as it was (as S3
            // does): it can be completed again, or aborted.
            Some(c) => self
                .commit_conditional(bucket, &i.key, version, &c, false, &cause)
                .await
                .map_err(|r| r.error)?,
        };
        let committed = commit_started.elapsed();
        let end_started = std::time::Instant::now();
        // The upload is over: its own version becomes a tombstone and its
        // entry goes (the hooks release its parts; the object's version
        // has its own references to their blocks). If this fails, a
        // retried completion finds the version and ends the upload then.
        self.writer.abort_upload(&mpu).await?;
        tracing::debug!(
            upload = %hex::encode(mpu.upload_id),
            parts = chosen.len(),
            blocks = blocks.len(),
            ?parts_read,
            ?versions_read,
            ?refs_written,
            ?committed,
            ended = ?end_started.elapsed(),
            "multipart upload completed"
        );
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
