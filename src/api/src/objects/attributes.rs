//! GetObjectAttributes: ETag, ObjectSize, StorageClass,
//! Checksum (when one was stored with the object) and, for a multipart
//! object, ObjectParts (part numbers and sizes, read from the version
//! entry, which lists the blocks of each part; one more round trip, only
//! when asked for; the parts' checksums when the upload had an algorithm,
//! kept with the object at completion).

use std::collections::BTreeMap;
use std::sync::Arc;

use garage_model::version_table::read_version;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::{check_key, Api};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::read::Current;
use crate::request::{Ctx, KeyBucket};

/// Parts listed per request at most (S3's limit).
const MAX_PARTS: i32 = 1000;

impl Api {
    pub async fn get_object_attributes(
        self: Arc<Self>,
        req: S3Request<GetObjectAttributesInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetObjectAttributesOutput>> {
        let i = req.input;
        check_key(&i.key)?;
        let bucket = ctx.granted.bucket;
        // One header, `x-amz-object-attributes: ETag,ObjectSize`, or
        // several: s3s splits only the latter.
        let asked: Vec<String> = i
            .object_attributes
            .iter()
            .flat_map(|x| x.as_str().split(','))
            .map(|a| a.trim().to_ascii_lowercase())
            .collect();
        let want = |a: &str| asked.iter().any(|x| *x == a.to_ascii_lowercase());
        let cur = self
            .current(bucket, &i.key, i.version_id.as_deref())
            .await?;
        crate::encryption::sse::check_read(
            &self.kms,
            &cur.meta.headers,
            crate::encryption::sse::SseKey::from_headers(
                i.sse_customer_algorithm.as_deref(),
                i.sse_customer_key.as_deref(),
                i.sse_customer_key_md5.as_deref(),
            )?
            .as_ref(),
        )
        .await?;
        let mut out = GetObjectAttributesOutput {
            last_modified: Some(meta::timestamp(cur.timestamp)),
            version_id: cur.version_id.clone(),
            ..Default::default()
        };
        if want(ObjectAttributes::ETAG) {
            out.e_tag = Some(ETag::Strong(cur.meta.etag.clone()));
        }
        if want(ObjectAttributes::OBJECT_SIZE) {
            out.object_size = Some(cur.meta.size as i64);
        }
        if want(ObjectAttributes::STORAGE_CLASS) {
            out.storage_class = Some(StorageClass::from(
                crate::storage_class::reported(cur.meta.storage_class.as_deref()).to_string(),
            ));
        }
        if want(ObjectAttributes::CHECKSUM) {
            let c = crate::objects::checksum::stored(&cur.meta.headers);
            if c != Checksum::default() {
                out.checksum = Some(c);
            }
        }
        if want(ObjectAttributes::OBJECT_PARTS) && parts_count(&cur.meta.etag).is_some() {
            let sizes = self.part_sizes(&cur).await?;
            out.object_parts = Some(parts_page(
                &sizes,
                &part_checksums(&cur.meta.headers),
                i.max_parts.unwrap_or(MAX_PARTS),
                i.part_number_marker,
            ));
        }
        Ok(S3Response::new(out))
    }

    /// Part number -> size of a multipart object, from its version entry.
    async fn part_sizes(&self, cur: &Current) -> ApiResult<BTreeMap<u64, u64>> {
        let version = read_version(&self.versions, &cur.uuid)
            .await?
            .ok_or_else(|| ApiError::Internal(format!("no version entry for {}", cur.uuid)))?;
        let mut sizes = BTreeMap::new();
        let sealed = crate::encryption::sse::is_encrypted(&cur.meta.headers);
        for (k, b) in version.blocks.items() {
            *sizes.entry(k.part_number).or_insert(0) +=
                crate::encryption::sse::plain_size(b.size, sealed);
        }
        Ok(sizes)
    }
}

/// The number of parts of a multipart object's ETag (`md5-N`).
fn parts_count(etag: &str) -> Option<u64> {
    etag.rsplit_once('-').and_then(|(_, n)| n.parse().ok())
}

/// The parts' checksums kept with a multipart object created with a
/// checksum algorithm: part number -> the part's checksum, in the fields
/// of an s3s output.
fn part_checksums(headers: &[(String, String)]) -> BTreeMap<u64, Checksum> {
    let Some(algo) = crate::objects::checksum::ALL
        .into_iter()
        .find(|a| headers.iter().any(|(k, _)| k == a.header()))
    else {
        return BTreeMap::new();
    };
    crate::objects::checksum::stored_parts(headers)
        .into_iter()
        .map(|(n, v)| {
            (
                n,
                crate::objects::checksum::stored(&[(algo.header().to_string(), v)]),
            )
        })
        .collect()
}

/// One page of ObjectParts: at most `max` parts after `marker`, with their
/// checksums when known.
fn parts_page(
    sizes: &BTreeMap<u64, u64>,
    sums: &BTreeMap<u64, Checksum>,
    max: i32,
    marker: Option<i32>,
) -> GetObjectAttributesParts {
    let max = max.clamp(0, MAX_PARTS) as usize;
    let after = marker.unwrap_or(0).max(0) as u64;
    let rest: Vec<(u64, u64)> = sizes.range(after + 1..).map(|(n, s)| (*n, *s)).collect();
    let truncated = rest.len() > max;
    let parts: Vec<ObjectPart> = rest
        .iter()
        .take(max)
        .map(|(n, s)| {
            let mut p = ObjectPart {
                part_number: Some(*n as i32),
                size: Some(*s as i64),
                ..Default::default()
            };
            if let Some(c) = sums.get(n) {
                crate::set_checksums!(p, c.clone());
            }
            p
        })
        .collect();
    GetObjectAttributesParts {
        total_parts_count: Some(sizes.len() as i32),
        part_number_marker: marker,
        next_part_number_marker: if truncated {
            parts.last().and_then(|p| p.part_number)
        } else {
            None
        },
        max_parts: Some(max as i32),
        is_truncated: Some(truncated),
        parts: Some(parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_paged() {
        assert_eq!(parts_count("abc-3"), Some(3));
        assert_eq!(parts_count("abc"), None);
        let sizes: BTreeMap<u64, u64> = [(1, 5), (2, 5), (3, 1)].into_iter().collect();
        let mut sums = BTreeMap::new();
        sums.insert(
            3,
            crate::objects::checksum::stored(&[("x-amz-checksum-crc32".into(), "AAAAAA==".into())]),
        );
        let p = parts_page(&sizes, &sums, 2, None);
        assert_eq!(p.total_parts_count, Some(3));
        assert_eq!(p.is_truncated, Some(true));
        assert_eq!(p.next_part_number_marker, Some(2));
        let n: Vec<_> = p
            .parts
            .unwrap()
            .iter()
            .map(|p| p.part_number.unwrap())
            .collect();
        assert_eq!(n, vec![1, 2]);
        let p = parts_page(&sizes, &sums, 2, Some(2));
        assert_eq!(p.is_truncated, Some(false));
        assert_eq!(
            p.parts.as_ref().unwrap()[0].checksum_crc32.as_deref(),
            Some("AAAAAA==")
        );
        let got: Vec<_> = p
            .parts
            .unwrap()
            .iter()
            .map(|p| (p.part_number.unwrap(), p.size.unwrap()))
            .collect();
        assert_eq!(got, vec![(3, 1)]);
    }
}
