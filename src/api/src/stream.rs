//! GET bodies: an object's blocks streamed in order, each forwarded as it
//! arrives from its nearest replica. The first block is requested at once,
//! alongside the version entry that lists the others, so that the first
//! byte leaves after one metadata round trip and one block request.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use garage_table::EmptyKey;
use garage_util::data::{Hash, Uuid};
use s3s::dto::StreamingBlob;
use tokio::sync::mpsc;

use crate::ctx::Api;

type Chunk = Result<Bytes, std::io::Error>;

/// Chunks buffered between the block reader and the HTTP response.
const CHANNEL_DEPTH: usize = 8;

pub fn object_body(api: Arc<Api>, version: Uuid, first: Hash, range: Range<u64>) -> StreamingBlob {
    let (tx, rx) = mpsc::channel::<Chunk>(CHANNEL_DEPTH);
    tokio::spawn(async move {
        if let Err(e) = send_blocks(&api, version, first, range, &tx).await {
            tracing::warn!("GET of version {} stopped: {e}", version.short());
            let _ = tx.send(Err(std::io::Error::other(e))).await;
        }
    });
    StreamingBlob::wrap(tokio_stream::wrappers::ReceiverStream::new(rx))
}

async fn send_blocks(
    api: &Arc<Api>,
    version: Uuid,
    first: Hash,
    range: Range<u64>,
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
    let (v, mut prefetched) = tokio::join!(api.versions.get(&version, &EmptyKey), first_stream);
    let v = v
        .map_err(|e| format!("version entry: {e}"))?
        .filter(|v| !v.deleted.get())
        .ok_or("the version entry of the object is missing or deleted")?;
    let mut pos = 0u64;
    for (_, b) in v.blocks.items() {
        let (start, end) = (pos, pos + b.size);
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
        let mut at = start;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("block {}: {e}", b.hash.short()))?;
            let (c0, c1) = (at, at + chunk.len() as u64);
            at = c1;
            let lo = range.start.max(c0);
            let hi = range.end.min(c1);
            if lo < hi {
                let piece = chunk.slice((lo - c0) as usize..(hi - c0) as usize);
                if tx.send(Ok(piece)).await.is_err() {
                    return Ok(()); // the client went away
                }
            }
            if c1 >= range.end {
                return Ok(());
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
    }
    if pos < range.end {
        return Err(format!(
            "the version lists {pos} bytes, the object {}",
            range.end
        ));
    }
    Ok(())
}
