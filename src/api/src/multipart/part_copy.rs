//! UploadPartCopy without writing the data again: when the range copied
//! starts and ends on block boundaries of the source (the whole object, or
//! the ranges of 8 MiB and the like that aws-cli and the SDKs' managed
//! copies ask of an object written in blocks of 1 MiB), the part shares the
//! source's blocks, as CopyObject does: its version lists them, their
//! reference counts go up, and no block is sent to a replica.
//!
//! The part's ETag is the MD5 of its bytes. It is the source's ETag when
//! the whole of a single-part object is copied and no checksum is asked:
//! nothing is read at all. Otherwise the range is read (each block checked
//! against its hash before its bytes are used, as for a GET) only to
//! compute the MD5 and the upload's checksum.
//!
//! Encrypted sources or parts (SSE-C, SSE-S3) take the path of an
//! UploadPart: the data is opened and sealed again.

use std::sync::Arc;

use futures::StreamExt;
use garage_model::block_ref_table::BlockRef;
use garage_model::version_table::VersionBlockKey;
use garage_model::version_table::{read_version, Version, VersionBacklink, VersionBlock};
use garage_util::data::Uuid;
use md5::{Digest, Md5};
use s3s::dto::StreamingBlob;

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::objects::read::{Current, CurrentData};
use s3s::checksum::ChecksumHasher;

/// The source's blocks a part can share, and how its MD5 is known.
pub struct Shared {
    /// The blocks covering the range exactly, in order.
    pub blocks: Vec<VersionBlock>,
    pub md5: PartMd5,
}

pub enum PartMd5 {
    /// The source's ETag: the whole of a single-part, unencrypted object.
    Known([u8; 16]),
    /// Read from the source's bytes.
    Read(StreamingBlob),
}

/// What sharing wrote: as [`crate::objects::block_writer::Written`], for `write_part`.
pub struct SharedWritten {
    pub size: u64,
    pub md5: [u8; 16],
    pub checksum: Option<s3s::dto::Checksum>,
}

/// The source's blocks that cover `range` exactly, if its boundaries fall
/// on the source's block boundaries; `None` when the part must be written
/// anew (inline source, encryption on either side, a range cutting a
/// block). `need_read` asks for the bytes even when the MD5 is known (an
/// upload with a checksum).
pub async fn shareable(
    api: &Arc<Api>,
    cur: &Current,
    range: std::ops::Range<u64>,
    encrypted: bool,
    need_read: bool,
) -> ApiResult<Option<Shared>> {
    if encrypted || range.is_empty() || !matches!(cur.data, CurrentData::FirstBlock(..)) {
        return Ok(None);
    }
    let Some(v) = read_version(&api.versions, &cur.uuid).await? else {
        return Ok(None);
    };
    if v.deleted.get() {
        return Ok(None);
    }
    let Some(blocks) = covering(v.blocks.items(), &range) else {
        return Ok(None);
    };
    let whole = range.start == 0 && range.end == cur.meta.size;
    let known = match (whole, need_read) {
        (true, false) => plain_md5(&cur.meta.etag),
        _ => None,
    };
    let md5 = match known {
        Some(m) => PartMd5::Known(m),
        None => PartMd5::Read(api.content(cur, range, None)?),
    };
    Ok(Some(Shared { blocks, md5 }))
}

/// The blocks of a version (in (part, offset) order) that cover `range` of
/// the object exactly, or `None` if a boundary of the range cuts a block.
fn covering<'a>(
    blocks: impl IntoIterator<Item = (&'a VersionBlockKey, &'a VersionBlock)>,
    range: &std::ops::Range<u64>,
) -> Option<Vec<VersionBlock>> {
    let mut at = 0u64;
    let mut out = Vec::new();
    for (_, b) in blocks {
        let end = at + b.size;
        if at >= range.start && end <= range.end {
            out.push(*b);
        } else if (at < range.start && end > range.start) || (at < range.end && end > range.end) {
            return None;
        }
        at = end;
        if at >= range.end {
            break;
        }
    }
    let covered: u64 = out.iter().map(|b| b.size).sum();
    (covered == range.end - range.start).then_some(out)
}

/// The MD5 in an ETag made by a single PUT of unencrypted data (32 hex
/// digits; a multipart ETag has a `-N` suffix).
fn plain_md5(etag: &str) -> Option<[u8; 16]> {
    let bytes = hex::decode(etag.trim_matches('"')).ok()?;
    <[u8; 16]>::try_from(bytes.as_slice()).ok()
}

/// Records the shared blocks as part `part_number` of version `uuid`: its
/// segments, then a reference to each block. Returns the part's size, MD5
/// and checksum (`sums`, computed from the bytes read).
pub async fn share_blocks(
    api: &Arc<Api>,
    uuid: Uuid,
    backlink: VersionBacklink,
    part_number: u64,
    shared: Shared,
    mut sums: Option<ChecksumHasher>,
) -> ApiResult<SharedWritten> {
    let mut offset = 0u64;
    let mut keyed = Vec::with_capacity(shared.blocks.len());
    for b in shared.blocks.iter() {
        keyed.push((
            VersionBlockKey {
                part_number,
                offset,
            },
            *b,
        ));
        offset += b.size;
    }
    let size = offset;
    let md5 = match shared.md5 {
        PartMd5::Known(m) => m,
        PartMd5::Read(mut body) => {
            let mut m = Some((Md5::new(), sums.take(), 0u64));
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| {
                    ApiError::Internal(format!("reading the source of a part copy: {e}"))
                })?;
                let mut s = m.take().expect("put back after each chunk");
                s = tokio::task::spawn_blocking(move || {
                    s.0.update(&chunk);
                    if let Some(h) = s.1.as_mut() {
                        h.update(&chunk);
                    }
                    s.2 += chunk.len() as u64;
                    s
                })
                .await
                .map_err(|e| ApiError::Internal(format!("hashing task: {e}")))?;
                m = Some(s);
            }
            let (m, s, read) = m.expect("put back after each chunk");
            if read != size {
                return Err(ApiError::Internal(format!(
                    "read {read} bytes of a source range of {size}"
                )));
            }
            sums = s;
            m.finalize().into()
        }
    };
    // Segments first: a failure after them is undone by the deletion of
    // the part's version, which releases the references it finds there.
    let segments = Version::segments(uuid, &backlink, keyed.iter().map(|(k, b)| (k, b)));
    api.versions.insert_many(&segments).await?;
    let refs: Vec<BlockRef> = keyed
        .iter()
        .map(|(_, b)| BlockRef::to_block(b, uuid))
        .collect();
    api.block_refs.insert_many(&refs).await?;
    Ok(SharedWritten {
        size,
        md5,
        checksum: sums.map(|s| s.finalize()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_util::data::Hash;

    fn blocks(sizes: &[u64]) -> Vec<(VersionBlockKey, VersionBlock)> {
        let mut off = 0;
        sizes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let k = VersionBlockKey {
                    part_number: 1 + (i as u64 / 2),
                    offset: off,
                };
                off += s;
                (
                    k,
                    VersionBlock {
                        hash: Hash::from([i as u8; 32]),
                        size: *s,
                        ec: None,
                        recoded: 0,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn only_ranges_on_block_boundaries_are_shared() {
        let b = blocks(&[10, 10, 5, 10]);
        let items = || b.iter().map(|(k, v)| (k, v));
        let hashes = |r: std::ops::Range<u64>| {
            covering(items(), &r)
                .map(|v| v.iter().map(|b| b.hash.as_slice()[0]).collect::<Vec<_>>())
        };
        assert_eq!(hashes(0..35), Some(vec![0, 1, 2, 3]));
        assert_eq!(hashes(10..25), Some(vec![1, 2]));
        assert_eq!(hashes(25..35), Some(vec![3]));
        assert_eq!(hashes(0..10), Some(vec![0]));
        assert_eq!(hashes(0..11), None);
        assert_eq!(hashes(5..10), None);
        assert_eq!(hashes(9..25), None);
        assert_eq!(hashes(20..36), None);
    }

    #[test]
    fn only_single_part_etags_give_the_md5() {
        let m = plain_md5("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(m[0], 0x01);
        assert_eq!(m[15], 0xef);
        assert!(plain_md5("0123456789abcdef0123456789abcdef-3").is_none());
        assert!(plain_md5("xyz").is_none());
    }
}
