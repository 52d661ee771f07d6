//! GET bodies: an object's blocks streamed in order, each forwarded as it
//! arrives from its nearest replica. The first block is requested at once,
//! alongside the version entry that lists the others, so that the first
//! byte leaves after one metadata round trip and one block request.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use garage_model::version_table::read_version;
use garage_util::data::{Hash, Uuid};
use s3s::dto::StreamingBlob;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::ctx::Api;
use crate::sse::{plain_size, SseKey};

type Chunk = Result<Bytes, std::io::Error>;

/// Chunks buffered between the block reader and the HTTP response.
const CHANNEL_DEPTH: usize = 8;

/// The bytes `range` (plaintext positions) of the version's blocks; with
/// `sse`, each block needed is read whole, opened, and sliced.
pub fn object_body(
    api: Arc<Api>,
    version: Uuid,
    first: Hash,
    range: Range<u64>,
    sse: Option<SseKey>,
) -> StreamingBlob {
    let (tx, rx) = mpsc::channel::<Chunk>(CHANNEL_DEPTH);
    tokio::spawn(
        async move {
            if let Err(e) = send_blocks(&api, version, first, range, sse.as_ref(), &tx).await {
                tracing::warn!("GET of version {} stopped: {e}", version.short());
                let _ = tx.send(Err(std::io::Error::other(e))).await;
            }
        }
        .in_current_span(),
    );
    StreamingBlob::wrap(tokio_stream::wrappers::ReceiverStream::new(rx))
}

async fn send_blocks(
    api: &Arc<Api>,
    version: Uuid,
    first: Hash,
    range: Range<u64>,
    sse: Option<&SseKey>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), String> {
    if range.is_empty() {
        return Ok(());
    }
    // The first block's stream starts with the version read when the range
    // starts in it (whatever the block size, it starts at 0).
    let first_stream = async {
        if range.start == 0 {
            Some(api.blocks.get_block_stream(&first).await)
        } else {
            None
        }
    };
    let (v, mut prefetched) = tokio::join!(read_version(&api.versions, &version), first_stream);
    let v = v
        .map_err(|e| format!("version entry: {e}"))?
        .filter(|v| !v.deleted.get())
        .ok_or("the version entry of the object is missing or deleted")?;
    let mut pos = 0u64;
    for (_, b) in v.blocks.items() {
        let (start, end) = (pos, pos + plain_size(b.size, sse.is_some()));
        pos = end;
        if end <= range.start {
            continue;
        }
        if start >= range.end {
            break;
        }
        let stream = match prefetched.take() {
            Some(s) if b.hash == first && start == 0 => s,
            _ => api.blocks.get_block_stream(&b.hash).await,
        };
        let mut stream = stream.map_err(|e| e.to_string())?;
        if let Some(k) = sse {
            let plain = open_block(k, b.hash, b.size, &mut stream).await?;
            if plain.len() as u64 != end - start {
                return Err(format!("block {} has the wrong size", b.hash.short()));
            }
            let piece = plain.slice(in_block(start..end, &range));
            if tx.send(Ok(piece)).await.is_err() || end >= range.end {
                return Ok(());
            }
            continue;
        }
        // The piece that completes the response is held back until the
        // block stream has ended cleanly, which it does only once the
        // whole block matched its hash: so a client never receives a
        // complete body (a Range ending mid-block included) with bytes
        // that were not checked; with a bad block the body is cut short.
        let mut at = start;
        let mut final_piece = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("block {}: {e}", b.hash.short()))?;
            let (c0, c1) = (at, at + chunk.len() as u64);
            at = c1;
            let lo = range.start.max(c0);
            let hi = range.end.min(c1);
            if lo < hi {
                let piece = chunk.slice((lo - c0) as usize..(hi - c0) as usize);
                if hi >= range.end {
                    final_piece = Some(piece);
                } else if tx.send(Ok(piece)).await.is_err() {
                    return Ok(()); // the client went away
                }
            }
        }
        if at != end {
            return Err(format!(
                "block {} has {} bytes, the version says {}",
                b.hash.short(),
                at - start,
                b.size
            ));
        }
        if let Some(piece) = final_piece {
            let _ = tx.send(Ok(piece)).await;
            return Ok(());
        }
    }
    if pos < range.end {
        return Err(format!(
            "the version lists {pos} bytes, the object {}",
            range.end
        ));
    }
    Ok(())
}

/// A sealed block read whole from its stream, then opened (off the
/// reactor).
async fn open_block<S, E>(
    k: &SseKey,
    hash: Hash,
    size: u64,
    stream: &mut S,
) -> Result<Bytes, String>
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut buf = bytes::BytesMut::with_capacity(size as usize);
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.map_err(|e| format!("block {}: {e}", hash.short()))?);
    }
    let k = k.clone();
    let plain = tokio::task::spawn_blocking(move || k.open(&buf))
        .await
        .map_err(|e| format!("decryption task: {e}"))?
        .map_err(|e| format!("block {}: {e}", hash.short()))?;
    Ok(Bytes::from(plain))
}

/// The part of a block at plaintext positions `block` that `range` wants,
/// in positions inside the block (the block overlaps the range).
fn in_block(block: Range<u64>, range: &Range<u64>) -> Range<usize> {
    let lo = range.start.max(block.start) - block.start;
    let hi = range.end.min(block.end) - block.start;
    lo as usize..hi as usize
}

#[cfg(test)]
pub(crate) fn in_block_for_tests(block: Range<u64>, range: &Range<u64>) -> Range<usize> {
    in_block(block, range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::OVERHEAD;

    /// The plaintext spans of sealed blocks, and the slices a range takes
    /// of the blocks it needs (and only those).
    #[test]
    fn sealed_range_math() {
        const MIB: u64 = 1 << 20;
        // A 3 MiB + 5 object: stored blocks of 1 MiB + overhead, then 5 + overhead.
        let stored = [MIB + OVERHEAD, MIB + OVERHEAD, MIB + OVERHEAD, 5 + OVERHEAD];
        let mut pos = 0;
        let spans: Vec<Range<u64>> = stored
            .iter()
            .map(|s| {
                let e = pos + plain_size(*s, true);
                let r = pos..e;
                pos = e;
                r
            })
            .collect();
        assert_eq!(pos, 3 * MIB + 5);
        // Across the first boundary.
        let range = MIB - 10..MIB + 10;
        let needed: Vec<(usize, Range<usize>)> = spans
            .iter()
            .enumerate()
            .filter(|(_, b)| b.end > range.start && b.start < range.end)
            .map(|(i, b)| (i, in_block(b.clone(), &range)))
            .collect();
        assert_eq!(
            needed,
            vec![(0, (MIB - 10) as usize..MIB as usize), (1, 0..10)]
        );
        // The tail.
        assert_eq!(
            in_block(spans[3].clone(), &(3 * MIB + 2..3 * MIB + 5)),
            2..5
        );
        // A whole block.
        assert_eq!(in_block(spans[2].clone(), &(0..pos)), 0..MIB as usize);
    }
}
