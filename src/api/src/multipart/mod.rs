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
//! [`create`]: CreateMultipartUpload and AbortMultipartUpload; [`part`]:
//! UploadPart and UploadPartCopy (sharing blocks in [`part_copy`]);
//! [`complete`]: CompleteMultipartUpload; [`list`]: ListParts and
//! ListMultipartUploads.

pub mod complete;
pub mod create;
pub mod list;
pub mod part;
pub mod part_copy;

use garage_model::mpu_table::{MpuPart, MpuPartKey, MultipartUpload};
use garage_model::object_table::ObjectVersionState;
use garage_table::EmptyKey;
use garage_util::data::Uuid;

use crate::ctx::Api;
use crate::encryption::sse::{check_read, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::objects::checksum::{Algo, Expected};

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

/// The parts to use: for each part number, the newest finished write, in
/// part order (`writes` in order of part number, as
/// `ObjectWriter::upload_parts` reads them).
fn finished_parts(writes: &[(MpuPartKey, MpuPart)]) -> Vec<(u64, MpuPartKey, MpuPart)> {
    let mut out: Vec<(u64, MpuPartKey, MpuPart)> = Vec::new();
    for (k, p) in writes {
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

    /// The finished parts of `mpu` numbered `from` or more
    /// ([`finished_parts`]); the first `limit` of them at least, when
    /// there are that many (the rest may be left unread).
    async fn finished_parts_of(
        &self,
        mpu: &MultipartUpload,
        from: u64,
        limit: Option<usize>,
    ) -> ApiResult<Vec<(u64, MpuPartKey, MpuPart)>> {
        // One more part number than asked for: the ones before it are
        // then read whole.
        let enough = limit.map_or(usize::MAX, |l| l.saturating_add(1));
        let writes = self.writer.upload_parts_until(mpu, from, enough).await?;
        Ok(finished_parts(&writes))
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
}
