//! GET bodies: an object's blocks streamed in order, each forwarded as it
//! arrives from its nearest replica. The first block (named by the object
//! entry) is requested at once and sent while the version entry that lists
//! the others is read; a single-block object needs no version read at all.
//! The first byte leaves after the object entry's read and one block
//! request, or sooner when the block fetch started from this node's copy
//! of the entry ([`Prefetch`]).
//!
//! The version entry is read from this node's copy when this node holds
//! it and the copy lists the whole object (its blocks add up to the
//! object's size): a complete version's block list does not change, so
//! the blocks after the first follow without a second round across sites.
//! If a block the copy names is gone (a lifecycle transition re-encoded
//! it since), the rest is planned again from a quorum read.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use garage_block::ByteStream;
use garage_model::version_table::{read_version, read_version_near, ReadFrom, Version};
use garage_rpc::layout::Placement;
use garage_util::data::{Hash, Uuid};
use s3s::dto::StreamingBlob;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::ctx::Api;
use crate::encryption::sse::{plain_size, SseKey};

type Chunk = Result<Bytes, std::io::Error>;

/// Chunks buffered between the block reader and the HTTP response.
const CHANNEL_DEPTH: usize = 8;

/// A fetch of an object's first block started before the object entry's
/// quorum read ended (from this node's copy of the entry), usable if the
/// entry read names the same block.
/// Dropping it unused (the quorum named another block, or the read
/// failed) stops the fetch.
pub struct Prefetch {
    hash: Hash,
    fetch: FetchTask,
}

impl Prefetch {
    /// Starts fetching block `hash` (erasure-coded with `ec`, if given).
    pub fn start(api: &Arc<Api>, hash: Hash, ec: Option<Placement>) -> Prefetch {
        Prefetch {
            hash,
            fetch: fetch(api, hash, ec),
        }
    }
}

/// Aborts a background task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The object version a body is read from, as its object entry names it.
#[derive(Clone, Copy, Debug)]
pub struct Body {
    pub version: Uuid,
    /// Its first block and that block's erasure code.
    pub first: (Hash, Option<Placement>),
    /// Its plaintext size.
    pub size: u64,
}

/// The bytes `range` (plaintext positions) of the version's blocks; with
/// `sse`, each block needed is read whole, opened, and sliced.
pub fn object_body(
    api: Arc<Api>,
    body: Body,
    range: Range<u64>,
    sse: Option<SseKey>,
    prefetch: Option<Prefetch>,
) -> StreamingBlob {
    let (tx, rx) = mpsc::channel::<Chunk>(CHANNEL_DEPTH);
    tokio::spawn(
        async move {
            let res = send_blocks(&api, body, range, sse.as_ref(), prefetch, &tx).await;
            if let Err(e) = res {
                tracing::warn!("GET of version {} stopped: {e}", body.version.short());
                let _ = tx.send(Err(std::io::Error::other(e))).await;
            }
        }
        .in_current_span(),
    );
    StreamingBlob::wrap(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Whether a block's bytes ended the response.
enum Sent {
    /// The block ended at this plaintext position; more is wanted.
    More(u64),
    Done,
}

/// Blocks requested ahead of the one being sent, per GET. Each block in
/// flight holds at most one body window (2 MiB, `garage_net::body::WINDOW`)
/// in the network layer until it is read, so one GET holds at most
/// `1 + READ_AHEAD` windows (6 MiB) of block data.
pub const READ_AHEAD: usize = 2;

/// A block of the body, at plaintext positions `start..end`.
#[derive(Clone, Copy)]
struct Span {
    hash: Hash,
    ec: Option<Placement>,
    start: u64,
    end: u64,
}

/// The blocks a GET still has to send, the next ones already requested
/// (their fetches run in the background while the current block is sent).
struct Plan {
    /// The version's first block, as the version lists it.
    first: Option<Span>,
    /// The version's total plaintext size.
    total: u64,
    todo: std::collections::VecDeque<Span>,
    inflight: std::collections::VecDeque<(Span, FetchTask)>,
}

type FetchTask = AbortOnDrop<Result<ByteStream, garage_block::manager::Error>>;

fn fetch(api: &Arc<Api>, hash: Hash, ec: Option<Placement>) -> FetchTask {
    let blocks = api.blocks.clone();
    AbortOnDrop(tokio::spawn(
        async move { blocks.get_stream(&hash, ec).await }.in_current_span(),
    ))
}

impl Plan {
    /// The blocks of version `v` that `range` needs (but the first, when
    /// `first_sent`), none requested yet ([`Plan::refill`] does).
    fn new(v: &Version, range: &Range<u64>, sealed: bool, first_sent: bool) -> Plan {
        let mut plan = Plan {
            first: None,
            total: 0,
            todo: Default::default(),
            inflight: Default::default(),
        };
        for (_, b) in v.blocks.items() {
            let span = Span {
                hash: b.hash,
                ec: b.ec,
                start: plan.total,
                end: plan.total + plain_size(b.size, sealed),
            };
            plan.total = span.end;
            if span.start == 0 {
                plan.first = Some(span);
                if first_sent {
                    continue;
                }
            }
            if span.end > range.start && span.start < range.end {
                plan.todo.push_back(span);
            }
        }
        plan
    }

    /// The blocks of [`Plan::new`], the first [`READ_AHEAD`] + 1 of them
    /// requested.
    fn start(
        api: &Arc<Api>,
        v: &Version,
        range: &Range<u64>,
        sealed: bool,
        first_sent: bool,
    ) -> Plan {
        let mut plan = Plan::new(v, range, sealed, first_sent);
        plan.refill(api);
        plan
    }

    /// Requests blocks until [`READ_AHEAD`] + 1 are in flight.
    fn refill(&mut self, api: &Arc<Api>) {
        while self.inflight.len() <= READ_AHEAD {
            let Some(span) = self.todo.pop_front() else {
                break;
            };
            self.inflight
                .push_back((span, fetch(api, span.hash, span.ec)));
        }
    }

    /// The next block to send, and its fetch; the one after it requested.
    fn next(&mut self, api: &Arc<Api>) -> Option<(Span, FetchTask)> {
        let next = self.inflight.pop_front();
        self.refill(api);
        next
    }
}

/// The plaintext bytes a version's entry lists.
fn listed_size(v: &Version, sealed: bool) -> u64 {
    v.blocks
        .items()
        .map(|(_, b)| plain_size(b.size, sealed))
        .sum()
}

/// Counts where a GET's block list came from (`garage stats`, /metrics).
fn count_block_list(from: ReadFrom) {
    match from {
        ReadFrom::Local => metrics::counter!("api_get_block_lists_local_total").increment(1),
        ReadFrom::Quorum => metrics::counter!("api_get_block_lists_quorum_total").increment(1),
    }
}

/// The version's entry, read from a quorum: the one a reader falls back
/// to when this node's copy named a block that is gone.
async fn quorum_version(api: &Api, version: Uuid) -> Result<Version, String> {
    read_version(&api.versions, &version)
        .await
        .map_err(|e| format!("version entry: {e}"))?
        .filter(|v| !v.deleted.get())
        .ok_or_else(|| "the version entry of the object is missing or deleted".to_string())
}

async fn send_blocks(
    api: &Arc<Api>,
    body: Body,
    range: Range<u64>,
    sse: Option<&SseKey>,
    prefetch: Option<Prefetch>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), String> {
    if range.is_empty() {
        return Ok(());
    }
    // The version entry lists the blocks after the first one; it is read
    // while the first block (which starts at 0) is sent, and the blocks
    // after it are requested as soon as it is known. Nothing of it is
    // waited for when the first block completes the range (a single-block
    // object: no metadata read beyond the object entry). When the first
    // block is read from this node's disk, the blocks after it are
    // requested once it is sent, not before: reading and hashing them
    // alongside it would delay the first byte on a node short of CPU. A
    // first block from another node is not waited for (that would add a
    // round trip to a far replica).
    let (version, (first, first_ec)) = (body.version, body.first);
    let sealed = sse.is_some();
    let first_sent = range.start == 0;
    let first_local = first_ec.is_none() && api.blocks.reads_locally(&first);
    let (first_ready, first_ready_rx) = tokio::sync::oneshot::channel::<()>();
    let plan = {
        let (api, range) = (api.clone(), range.clone());
        AbortOnDrop(tokio::spawn(
            async move {
                let complete = |v: &Version| listed_size(v, sealed) == body.size;
                let (v, from) = read_version_near(&api.versions, &version, complete)
                    .await
                    .map_err(|e| format!("version entry: {e}"))?;
                count_block_list(from);
                let v = v
                    .filter(|v| !v.deleted.get())
                    .ok_or("the version entry of the object is missing or deleted")?;
                let mut plan = Plan::new(&v, &range, sealed, first_sent);
                if first_sent && first_local {
                    // Sent, or dropped when the GET ends or fails.
                    let _ = first_ready_rx.await;
                }
                plan.refill(&api);
                Ok::<_, String>((plan, from))
            }
            .in_current_span(),
        ))
    };
    let mut first_end = None;
    let mut first_failed = None;
    if first_sent {
        let stream = match prefetch {
            Some(mut p) if p.hash == first => (&mut p.fetch.0)
                .await
                .map_err(|e| format!("block fetch task: {e}"))
                .and_then(|r| r.map_err(|e| e.to_string())),
            _ => api
                .blocks
                .get_stream(&first, first_ec)
                .await
                .map_err(|e| e.to_string()),
        };
        match stream {
            Ok(stream) => match send_block(stream, first, 0, None, &range, sse, tx).await? {
                Sent::Done => return Ok(()),
                Sent::More(end) => first_end = Some(end),
            },
            Err(e) => first_failed = Some(e),
        }
        let _ = first_ready.send(());
    }
    let mut plan_task = plan;
    let (mut plan, mut from) = (&mut plan_task.0)
        .await
        .map_err(|e| format!("version read task: {e}"))??;
    // This node's copy of the version is older than the object entry when
    // it names another first block (a re-encoding since) or the first
    // block is gone: the quorum's list is the one.
    let stale = first_sent
        && (first_failed.is_some() || !plan.first.is_some_and(|f| same_block(&f, first, first_ec)));
    if stale && from == ReadFrom::Local {
        let v = quorum_version(api, version).await?;
        count_block_list(ReadFrom::Quorum);
        plan = Plan::start(api, &v, &range, sealed, first_sent);
        from = ReadFrom::Quorum;
    }
    if let Some(e) = first_failed {
        // The entry read may name a first block that a lifecycle transition
        // replaced since (and that is gone): the version's is the one.
        let f = plan
            .first
            .filter(|f| f.hash != first)
            .ok_or_else(|| e.clone())?;
        let stream = api
            .blocks
            .get_stream(&f.hash, f.ec)
            .await
            .map_err(|e| e.to_string())?;
        match send_block(stream, f.hash, 0, Some(f.end), &range, sse, tx).await? {
            Sent::Done => return Ok(()),
            Sent::More(_) => (),
        }
    }
    if let Some(sent) = first_end {
        match plan.first {
            Some(f) if same_block(&f, first, first_ec) && f.end == sent => (),
            Some(f) => {
                return Err(format!(
                "the version's first block ({}, {} bytes) is not the object's ({}, {sent} bytes)",
                f.hash.short(),
                f.end,
                first.short()
            ))
            }
            None => return Err("the version lists no block".into()),
        }
    }
    // What is left to send: from the start of the block being sent on
    // (narrowed when the plan is made again, so that nothing is sent
    // twice if the new blocks have other boundaries).
    let mut left = range.clone();
    while let Some((span, mut task)) = plan.next(api) {
        let stream = match (&mut task.0)
            .await
            .map_err(|e| format!("block fetch task: {e}"))?
        {
            Ok(stream) => stream,
            Err(e) if from == ReadFrom::Local => {
                tracing::debug!(
                    "block {} of version {} unreadable ({e}): reading the version from a quorum",
                    span.hash.short(),
                    version.short()
                );
                let v = quorum_version(api, version).await?;
                count_block_list(ReadFrom::Quorum);
                left = span.start.max(left.start)..left.end;
                plan = Plan::start(api, &v, &left, sealed, false);
                from = ReadFrom::Quorum;
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        match send_block(
            stream,
            span.hash,
            span.start,
            Some(span.end),
            &left,
            sse,
            tx,
        )
        .await?
        {
            Sent::Done => return Ok(()),
            Sent::More(_) => (),
        }
    }
    if plan.total < range.end {
        return Err(format!(
            "the version lists {} bytes, the object {}",
            plan.total, range.end
        ));
    }
    Ok(())
}

/// Whether the version's first block `f` holds the bytes of the object
/// entry's (`first`, in code `first_ec`): the same block, or the block a
/// lifecycle transition re-encoded it into (the entry read was older than
/// the transition).
fn same_block(f: &Span, first: Hash, first_ec: Option<Placement>) -> bool {
    f.hash == first
        || match (first_ec, f.ec) {
            (None, Some(code)) => garage_block::ec::ec_address(&first, code) == f.hash,
            // From one code to another: the addresses do not tell, and
            // each block was checked against its content hash when read.
            (Some(a), Some(b)) => a != b,
            (_, None) => false,
        }
}

/// Sends the part of `range` in one block, which starts at plaintext
/// position `start` and ends at `end` when the version entry says so.
async fn send_block(
    mut stream: ByteStream,
    hash: Hash,
    start: u64,
    end: Option<u64>,
    range: &Range<u64>,
    sse: Option<&SseKey>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<Sent, String> {
    if let Some(k) = sse {
        let plain = open_block(k, hash, &mut stream).await?;
        let block_end = start + plain.len() as u64;
        if end.is_some_and(|e| e != block_end) {
            return Err(format!("block {} has the wrong size", hash.short()));
        }
        let want = in_block(start..block_end, range);
        if !want.is_empty() {
            let piece = plain.slice(want);
            if tx.send(Ok(piece)).await.is_err() {
                return Ok(Sent::Done); // the client went away
            }
        }
        return Ok(if block_end >= range.end {
            Sent::Done
        } else {
            Sent::More(block_end)
        });
    }
    // The piece that completes the response is held back until the
    // block stream has ended cleanly, which it does only once the
    // whole block matched its hash: so a client never receives a
    // complete body (a Range ending mid-block included) with bytes
    // that were not checked; with a bad block the body is cut short.
    let mut at = start;
    let mut final_piece = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("block {}: {e}", hash.short()))?;
        let (c0, c1) = (at, at + chunk.len() as u64);
        at = c1;
        let lo = range.start.max(c0);
        let hi = range.end.min(c1);
        if lo < hi {
            let piece = chunk.slice((lo - c0) as usize..(hi - c0) as usize);
            if hi >= range.end {
                final_piece = Some(piece);
            } else if tx.send(Ok(piece)).await.is_err() {
                return Ok(Sent::Done); // the client went away
            }
        }
    }
    if let Some(e) = end {
        if at != e {
            return Err(format!(
                "block {} has {} bytes, the version says {}",
                hash.short(),
                at - start,
                e - start
            ));
        }
    }
    if let Some(piece) = final_piece {
        let _ = tx.send(Ok(piece)).await;
        return Ok(Sent::Done);
    }
    Ok(Sent::More(at))
}

/// A sealed block read whole from its stream, then opened (off the
/// reactor).
async fn open_block<S, E>(k: &SseKey, hash: Hash, stream: &mut S) -> Result<Bytes, String>
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut buf = bytes::BytesMut::new();
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
    use crate::encryption::sse::OVERHEAD;

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
