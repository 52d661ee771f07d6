//! Writing object data: the request body is cut into 1 MiB blocks; block n
//! is written to its replicas (with its `version` and `block_ref` entries)
//! while block n+1 is read from the client. Hashing (blake2 for the block
//! address, MD5 for the ETag) runs on the blocking pool.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use garage_model::block_ref_table::BlockRef;
use garage_model::version_table::{Version, VersionBacklink, VersionBlock, VersionBlockKey};
use garage_rpc::layout::Placement;
use garage_util::data::{blake2sum, Hash, Uuid};
use md5::{Digest, Md5};
use s3s::checksum::ChecksumHasher;
use s3s::dto::StreamingBlob;
use tracing::Instrument;

use crate::ctx::Api;
use crate::encryption::sse::SseKey;
use crate::error::{ApiError, ApiResult};

/// Size of a data block.
pub const BLOCK_SIZE: usize = 1 << 20;
/// Objects up to this size are stored inline in the object table.
pub const INLINE_MAX: usize = 3072;
/// Blocks being written to their replicas at once, per request.
const WRITES_IN_FLIGHT: usize = 2;

/// Reads a request body in pieces of a given size.
pub struct Chunker {
    body: Option<StreamingBlob>,
    buf: BytesMut,
}

impl Chunker {
    pub fn new(body: Option<StreamingBlob>) -> Self {
        Self {
            body,
            buf: BytesMut::new(),
        }
    }

    /// The next `size` bytes, fewer at the end of the body, `None` after.
    pub async fn next(&mut self, size: usize) -> ApiResult<Option<Bytes>> {
        while self.buf.len() < size {
            let Some(body) = self.body.as_mut() else {
                break;
            };
            match body.next().await {
                Some(Ok(b)) => self.buf.extend_from_slice(&b),
                Some(Err(e)) => {
                    return Err(ApiError::Body(e.to_string()));
                }
                None => self.body = None,
            }
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        let n = size.min(self.buf.len());
        Ok(Some(self.buf.split_to(n).freeze()))
    }
}

/// How a body is checked and sealed as it is written: the additional
/// checksum the request announced, its trailing headers (where a streamed
/// checksum comes) and the key the data is sealed with.
#[derive(Clone, Copy, Default)]
pub struct BodyChecks<'a> {
    pub checksum: Option<&'a crate::objects::checksum::Expected>,
    pub trailers: Option<&'a s3s::TrailingHeaders>,
    pub sse: Option<&'a SseKey>,
}

/// What was written.
pub struct Written {
    pub size: u64,
    pub md5: [u8; 16],
    /// The additional checksum asked for, if any.
    pub checksum: Option<s3s::dto::Checksum>,
    pub first_block: Hash,
    /// The first block's erasure code, `None` if it is replicated.
    pub first_ec: Option<Placement>,
    /// Every block written, by position (for an S3 object of at most
    /// 5 GiB, at most about 5 000 entries of 56 bytes): what writing the
    /// version again under a new id needs (see [`garage_model::object_write`]).
    pub blocks: Vec<(VersionBlockKey, VersionBlock)>,
}

/// Where the blocks of a body go: version `uuid` (its entries pointing
/// back to `backlink`), part `part_number`, erasure-coded with `ec` when
/// all the nodes of a block's shards are up and replicated otherwise (see
/// `garage_block::shards`).
#[derive(Clone)]
pub struct BlockTarget {
    pub uuid: Uuid,
    pub backlink: VersionBacklink,
    pub part_number: u64,
    pub ec: Option<Placement>,
}

/// Writes `first` and the rest of `body` as the blocks of `target`,
/// sealed with `sse` when given (offsets and the size written are then in
/// plaintext bytes, block sizes in stored bytes), with the additional
/// checksum `sums` computes.
pub async fn write_blocks(
    api: &Arc<Api>,
    target: &BlockTarget,
    first: Bytes,
    body: &mut Chunker,
    sums: Option<ChecksumHasher>,
    sse: Option<&SseKey>,
) -> ApiResult<Written> {
    let BlockTarget {
        uuid,
        ref backlink,
        part_number,
        ec,
    } = *target;
    let mut md5 = Some((Md5::new(), sums));
    let mut offset = 0u64;
    let mut index = 0u64;
    let mut first_block = None;
    let mut blocks: Vec<(VersionBlockKey, VersionBlock)> = Vec::new();
    let mut inflight: VecDeque<tokio::task::JoinHandle<ApiResult<()>>> = VecDeque::new();
    let mut next = Some(first);
    // Bytes of an erasure-coded class written replicated (a node of their
    // shards not up): the version is queued for re-encoding.
    let mut replicated_bytes = 0u64;
    let result: ApiResult<()> = async {
        while let Some(data) = next.take() {
            let mut m = md5.take().expect("md5 is put back after each block");
            let plain_size = data.len() as u64;
            let sse = sse.cloned();
            let (hash, m) = tokio::task::spawn_blocking(move || {
                m.0.update(&data);
                if let Some(s) = m.1.as_mut() {
                    s.update(&data);
                }
                // The MD5 and checksums are of the plaintext, the block's
                // address of what is stored.
                let data = match sse {
                    Some(k) => Bytes::from(k.seal(&data)),
                    None => data,
                };
                (blake2sum(&data), m, data)
            })
            .await
            .map(|(h, m, d)| ((h, d), m))
            .map_err(|e| ApiError::Internal(format!("hashing task: {e}")))?;
            md5 = Some(m);
            let (content, data) = hash;
            let form = match ec {
                // A placed class is never stored elsewhere (see
                // `garage_block::shards`).
                Some(code) if code.scope != 0 => {
                    Some((garage_block::ec::ec_address(&content, code), code))
                }
                Some(code) => {
                    let addr = garage_block::ec::ec_address(&content, code);
                    let ok = api.blocks.ec_writable_soon(&addr, code).await;
                    if !ok {
                        replicated_bytes += data.len() as u64;
                    }
                    ok.then_some((addr, code))
                }
                None => None,
            };
            let block = VersionBlock {
                hash: form.map(|(a, _)| a).unwrap_or(content),
                size: data.len() as u64,
                ec: form.map(|(_, c)| c),
                recoded: 0,
            };
            first_block.get_or_insert((block.hash, block.ec));
            blocks.push((
                VersionBlockKey {
                    part_number,
                    offset,
                },
                block,
            ));
            while inflight.len() >= WRITES_IN_FLIGHT {
                inflight
                    .pop_front()
                    .expect("non-empty")
                    .await
                    .map_err(join_err)??;
            }
            let version = Version::with_block(
                uuid,
                backlink.clone(),
                index,
                VersionBlockKey {
                    part_number,
                    offset,
                },
                block,
            );
            inflight.push_back(tokio::spawn(
                write_block(api.clone(), version, block, content, data).in_current_span(),
            ));
            offset += plain_size;
            index += 1;
            next = body.next(BLOCK_SIZE).await?;
        }
        Ok(())
    }
    .await;
    // Every write started is waited for, even after an error, so that the
    // caller's cleanup sees all the block references.
    let mut first_err = result.err();
    for h in inflight {
        if let Err(e) = h.await.map_err(join_err).and_then(|r| r) {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if replicated_bytes > 0 {
        tracing::info!(
            version = %uuid.short(),
            "{replicated_bytes} bytes of an erasure-coded class written replicated (a node of their shards is not up): queued for re-encoding"
        );
        if let Err(e) = api.ec_catch_up.push(uuid, replicated_bytes) {
            tracing::warn!(
                version = %uuid.short(),
                "cannot queue a version for re-encoding (its blocks stay replicated): {e}"
            );
        }
    }
    let md5_done = md5.expect("md5 is put back after each block");
    Ok(Written {
        size: offset,
        md5: md5_done.0.finalize().into(),
        checksum: md5_done.1.map(|s| s.finalize()),
        first_block: first_block.expect("at least one block").0,
        first_ec: first_block.expect("at least one block").1,
        blocks,
    })
}

fn join_err(e: tokio::task::JoinError) -> ApiError {
    ApiError::Internal(format!("block write task: {e}"))
}

/// One block: its data to its replicas (or its shards to their nodes),
/// and its entries in `version` (the one bounded segment listing it,
/// [`Version::with_block`]) and `block_ref`, all at once.
async fn write_block(
    api: Arc<Api>,
    version: Version,
    block: VersionBlock,
    content: Hash,
    data: Bytes,
) -> ApiResult<()> {
    let hash = block.hash;
    let uuid = version.uuid;
    let block_ref = BlockRef::to_block(&block, uuid);
    let put = async {
        match block.ec {
            None => api.blocks.put_block(hash, data).await,
            Some(code) => api
                .blocks
                .put_block_ec(content, data, code)
                .await
                .map(|_| ()),
        }
    };
    let (a, b, c) = tokio::join!(
        put,
        api.versions.insert(&version),
        api.block_refs.insert(&block_ref),
    );
    let res = a
        .map_err(ApiError::from)
        .and(b.map_err(ApiError::from))
        .and(c.map_err(ApiError::from));
    if res.is_err() {
        // The upload fails and its version is deleted; the deletion
        // releases the references of the segments it finds, but this
        // block's segment may not have been written while its reference
        // was: that reference is deleted here, durably (the block may be
        // stored nowhere, and a live reference to it would be resynced
        // forever).
        let gone = BlockRef::new(hash, uuid, true);
        if let Err(e) = api.block_refs.insert_later(&[gone]).await {
            tracing::warn!("cannot queue the release of a failed block write: {e}");
        }
    }
    res
}

/// Parses a Content-MD5 header (base64 of the 16-byte digest).
pub fn parse_content_md5(v: &str) -> ApiResult<[u8; 16]> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(v.trim())
        .ok()
        .and_then(|b| <[u8; 16]>::try_from(b.as_slice()).ok())
        .ok_or(ApiError::InvalidDigest)
}

/// MD5 of an inline body (at most [`INLINE_MAX`] bytes: cheap enough for
/// the reactor).
pub fn md5_of(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(parts: Vec<&'static [u8]>) -> StreamingBlob {
        StreamingBlob::wrap(futures::stream::iter(
            parts
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(Bytes::from_static(p))),
        ))
    }

    #[tokio::test]
    async fn chunker_regroups_the_body() {
        let mut c = Chunker::new(Some(blob(vec![b"abc", b"de", b"", b"fghij"])));
        assert_eq!(c.next(4).await.unwrap().unwrap(), &b"abcd"[..]);
        assert_eq!(c.next(4).await.unwrap().unwrap(), &b"efgh"[..]);
        assert_eq!(c.next(4).await.unwrap().unwrap(), &b"ij"[..]);
        assert!(c.next(4).await.unwrap().is_none());
        let mut empty = Chunker::new(None);
        assert!(empty.next(4).await.unwrap().is_none());
    }

    #[test]
    fn content_md5_is_checked() {
        // MD5 of the empty string.
        assert_eq!(
            hex::encode(parse_content_md5("1B2M2Y8AsgTpgAmY7PhCfg==").unwrap()),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        assert!(parse_content_md5("nope").is_err());
    }
}
