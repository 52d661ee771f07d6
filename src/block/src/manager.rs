//! Blocks across the cluster: a block is stored on the nodes of its hash's
//! partition (every live layout version's set, like table entries), and
//! written with a write quorum; reads go to the nearest replica first and
//! fall back to the others on error or timeout.
//!
//! Compression, hashing and file I/O run on the blocking pool, never on
//! the async reactor threads.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::stream::{FuturesUnordered, StreamExt};
use garage_net::{ByteStream, Endpoint, EndpointHandler, Message, NetError, NodeId, Priority};
use garage_rpc::layout::LayoutVersion;
use garage_rpc::system::System;
use garage_util::data::Hash;
use serde::{Deserialize, Serialize};
use tracing::{debug, Instrument};

use crate::block::{BlockError, DataBlock};
use crate::rc::BlockRc;
use crate::store::{BlockStore, StoreError};

/// Bytes per body chunk when sending a block.
const CHUNK: usize = 64 * 1024;
/// How long a block write waits for its quorum.
pub const BLOCK_RPC_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a read waits for one replica before trying the next.
pub const BLOCK_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest block body accepted (stored blocks are at most `block_size`,
/// plus compression overhead).
pub const MAX_BLOCK_BYTES: usize = 64 << 20;

#[derive(Debug, Serialize, Deserialize)]
pub enum BlockRpc {
    Ok,
    Error(String),
    /// Store the block sent as the request body.
    PutBlock {
        hash: Hash,
        compressed: bool,
    },
    /// Send the block as the response body.
    GetBlock {
        hash: Hash,
    },
    /// Answer to `GetBlock`; the body follows.
    BlockHeader {
        compressed: bool,
    },
    /// Does the node reference this block without storing it?
    NeedBlock(Hash),
    NeedBlockReply(bool),
    /// Store shard `index` of erasure-coded block `addr`, sent as the
    /// request body (header and payload, see [`crate::ec`]).
    PutShard {
        addr: Hash,
        index: u8,
    },
    /// Send shard `index` of `addr` as the response body.
    GetShard {
        addr: Hash,
        index: u8,
    },
    /// Answer to `GetShard`; the body follows.
    ShardBody,
    /// Which of these shards of `addr` are not stored here?
    MissingShards {
        addr: Hash,
        indices: Vec<u8>,
    },
    MissingShardsReply(Vec<u8>),
    /// Delete every shard of `addr` stored here, but those written (or
    /// written again) within the node's block delete delay.
    DeleteShards {
        addr: Hash,
    },
    /// Does this node count references to `addr` (an erasure-coded
    /// block)?
    CountsRefs(Hash),
    CountsRefsReply(bool),
}

impl Message for BlockRpc {
    type Response = BlockRpc;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Block(#[from] BlockError),
    #[error("no node stores this block's partition in the cluster layout")]
    NoNodes,
    #[error("block {hash:?} not written: {ok} of {needed} needed copies ({})", .errors.join("; "))]
    Quorum {
        hash: Hash,
        needed: usize,
        ok: usize,
        errors: Vec<String>,
    },
    #[error("block {hash:?} could not be read from any replica ({})", .errors.join("; "))]
    Unavailable { hash: Hash, errors: Vec<String> },
    #[error("background task failed: {0}")]
    Task(String),
    #[error(transparent)]
    Ec(#[from] crate::ec::EcError),
    #[error("the cluster layout has no placement for erasure code {0}: it is not a storage class of the layout")]
    NoPlacement(garage_rpc::layout::Placement),
}

pub type Result<T> = std::result::Result<T, Error>;

pub struct BlockManager {
    pub system: Arc<System>,
    pub store: Arc<BlockStore>,
    pub rc: BlockRc,
    pub compression_level: Option<i32>,
    /// Resync settings, changeable at run time (`garage worker set`).
    pub resync_settings: crate::resync::ResyncSettings,
    /// Blocks a resync worker is handling now.
    pub(crate) resync_busy: std::sync::Mutex<std::collections::HashSet<Hash>>,
    /// Woken when this node stores a shard outside every live placement
    /// (a hedged write's): the placement pass hands it over soon.
    pub(crate) stray_shards: tokio::sync::Notify,
    /// Wakes the scrub worker when its state was changed (a pass started,
    /// paused or resumed by an operator).
    pub(crate) scrub_changed: tokio::sync::Notify,
    /// The last count of this node's files ([`crate::census`]).
    pub(crate) census: std::sync::Mutex<Option<Arc<crate::census::Census>>>,
    pub(crate) endpoint: Arc<Endpoint<BlockRpc, BlockManager>>,
    /// This manager, for the background tasks it starts.
    pub(crate) this: std::sync::Weak<BlockManager>,
}

pub(crate) fn body_of(bytes: Bytes) -> ByteStream {
    let chunks: Vec<std::io::Result<Bytes>> = (0..bytes.len())
        .step_by(CHUNK)
        .map(|i| Ok(bytes.slice(i..(i + CHUNK).min(bytes.len()))))
        .collect();
    Box::pin(futures::stream::iter(chunks))
}

pub(crate) async fn read_body(
    mut body: ByteStream,
    max: usize,
) -> std::result::Result<Bytes, String> {
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("block body cut: {e}"))?;
        if buf.len() + chunk.len() > max {
            return Err(format!("block body larger than {max} bytes"));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Forwards `body` chunk by chunk, hashing it on the blocking pool. The
/// last chunk is held back until the whole content is hashed: it is
/// yielded only if the hash matches, else the stream ends with an error.
/// So a reader never gets a block's complete content unchecked (a reader
/// that needs a prefix only must drain the stream to its end before using
/// the prefix as final: see `garage_api::objects::stream`).
fn verified_stream(body: ByteStream, hash: Hash) -> ByteStream {
    struct State {
        body: ByteStream,
        hasher: garage_util::data::Blake2Hasher,
        held: Option<Bytes>,
    }
    let hasher = garage_util::data::Blake2Hasher::new();
    let start = State {
        body,
        hasher,
        held: None,
    };
    let stream = futures::stream::unfold(Some(start), move |st| async move {
        let mut st = st?;
        loop {
            match st.body.next().await {
                Some(Ok(chunk)) => {
                    let (hasher, c) = (st.hasher, chunk.clone());
                    let hashed = tokio::task::spawn_blocking(move || {
                        let mut hasher = hasher;
                        hasher.update(&c);
                        hasher
                    })
                    .await;
                    let Ok(hasher) = hashed else {
                        return Some((
                            Err(std::io::Error::other("block hashing task failed")),
                            None,
                        ));
                    };
                    st.hasher = hasher;
                    if let Some(prev) = st.held.replace(chunk) {
                        return Some((Ok(prev), Some(st)));
                    }
                }
                Some(Err(e)) => return Some((Err(e), None)),
                None => {
                    if st.hasher.finalize() != hash {
                        metrics::counter!("block_corrupted_total", "found_by" => "read")
                            .increment(1);
                        return Some((
                            Err(std::io::Error::other(format!(
                                "block {hash:?} is corrupted on the replica that sent it"
                            ))),
                            None,
                        ));
                    }
                    return st.held.take().map(|last| (Ok(last), None));
                }
            }
        }
    });
    Box::pin(stream)
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Task(e.to_string()))
}

impl BlockManager {
    pub fn new(
        system: Arc<System>,
        store: Arc<BlockStore>,
        rc: BlockRc,
        compression_level: Option<i32>,
    ) -> Arc<Self> {
        let endpoint = system
            .netapp
            .endpoint::<BlockRpc, BlockManager>("garage_block/manager");
        let resync_settings = crate::resync::ResyncSettings::load(&rc);
        let m = Arc::new_cyclic(|this| Self {
            system,
            store,
            rc,
            compression_level,
            resync_settings,
            resync_busy: Default::default(),
            stray_shards: tokio::sync::Notify::new(),
            census: Default::default(),
            scrub_changed: tokio::sync::Notify::new(),
            endpoint,
            this: this.clone(),
        });
        m.endpoint.set_handler(m.clone());
        m
    }

    /// Stores `data` (whose blake2 hash is `hash`) on its nodes; returns
    /// once a write quorum of each live layout version's set has it on disk
    /// (synced per `data_fsync`).
    #[tracing::instrument(level = "debug", name = "block_put", skip_all,
        fields(otel.name = "block put", block.hash = %hash, block.size = data.len()))]
    pub async fn put_block(&self, hash: Hash, data: Bytes) -> Result<()> {
        let res = self.put_block_inner(hash, data).await;
        if res.is_err() {
            metrics::counter!("block_quorum_errors_total", "op" => "write").increment(1);
        }
        res
    }

    async fn put_block_inner(&self, hash: Hash, data: Bytes) -> Result<()> {
        let level = self.compression_level;
        let block = blocking(move || DataBlock::from_plain(data, level)).await?;
        let guard = self.system.start_write("block write");
        let sets = guard
            .layout
            .write_sets(LayoutVersion::partition_of(hash.as_slice()));
        if sets.is_empty() {
            return Err(Error::NoNodes);
        }
        let quorum = self.system.write_quorum();
        let mut nodes: Vec<NodeId> = sets.iter().flatten().copied().collect();
        nodes.sort();
        nodes.dedup();
        let mut pending = FuturesUnordered::new();
        for node in nodes {
            let endpoint = self.endpoint.clone();
            let system = self.system.clone();
            let (compressed, bytes) = (block.is_compressed(), block.bytes().clone());
            pending.push(tokio::spawn(
                async move {
                    system.ensure_connected(&node).await;
                    let mut r = endpoint
                        .call_streaming(
                            &node,
                            BlockRpc::PutBlock { hash, compressed },
                            Some(body_of(bytes.clone())),
                            Priority::Background,
                        )
                        .await;
                    // A connection replaced under the call (both sides dialed at
                    // once) or not yet up: one more try (writes are idempotent).
                    if matches!(
                        r,
                        Err(NetError::ConnectionClosed | NetError::NotConnected(_))
                    ) {
                        system.ensure_connected(&node).await;
                        r = endpoint
                            .call_streaming(
                                &node,
                                BlockRpc::PutBlock { hash, compressed },
                                Some(body_of(bytes)),
                                Priority::Background,
                            )
                            .await;
                    }
                    (node, r)
                }
                .in_current_span(),
            ));
        }
        let mut ok: Vec<NodeId> = Vec::new();
        let mut errors = Vec::new();
        let deadline = tokio::time::Instant::now() + BLOCK_RPC_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, pending.next()).await {
                Err(_) | Ok(None) => {
                    return Err(Error::Quorum {
                        hash,
                        needed: quorum,
                        ok: ok.len(),
                        errors,
                    })
                }
                Ok(Some(Ok((node, Ok((BlockRpc::Ok, _)))))) => {
                    ok.push(node);
                    let done = sets.iter().all(|set| {
                        set.iter().filter(|n| ok.contains(n)).count() >= quorum.min(set.len())
                    });
                    if done {
                        return Ok(());
                    }
                }
                Ok(Some(Ok((node, Ok((BlockRpc::Error(e), _)))))) => {
                    errors.push(format!("{node:?}: {e}"))
                }
                Ok(Some(Ok((node, Ok((other, _)))))) => {
                    errors.push(format!("{node:?}: unexpected answer {other:?}"))
                }
                Ok(Some(Ok((node, Err(e))))) => errors.push(format!("{node:?}: {e}")),
                Ok(Some(Err(e))) => errors.push(format!("write task failed: {e}")),
            }
        }
    }

    /// Reads a block, nearest replica first, checking its hash; a replica
    /// that fails, times out or sends bad bytes is skipped.
    #[tracing::instrument(level = "debug", name = "block_get", skip_all,
        fields(otel.name = "block get", block.hash = %hash))]
    pub async fn get_block(&self, hash: &Hash) -> Result<Bytes> {
        let mut errors = Vec::new();
        for node in self.read_candidates(hash)? {
            match tokio::time::timeout(BLOCK_READ_TIMEOUT, self.get_from(&node, hash)).await {
                Ok(Ok(b)) => return Ok(b),
                Ok(Err(e)) => errors.push(format!("{node:?}: {e}")),
                Err(_) => errors.push(format!("{node:?}: timeout")),
            }
        }
        metrics::counter!("block_read_errors_total").increment(1);
        Err(Error::Unavailable {
            hash: *hash,
            errors,
        })
    }

    async fn get_from(&self, node: &NodeId, hash: &Hash) -> std::result::Result<Bytes, String> {
        self.system.ensure_connected(node).await;
        let (resp, body) = self
            .endpoint
            .call_streaming(
                node,
                BlockRpc::GetBlock { hash: *hash },
                None,
                Priority::Normal,
            )
            .await
            .map_err(|e: NetError| e.to_string())?;
        let compressed = match resp {
            BlockRpc::BlockHeader { compressed } => compressed,
            BlockRpc::Error(e) => return Err(e),
            other => return Err(format!("unexpected answer {other:?}")),
        };
        let bytes = read_body(body.ok_or("no block body")?, MAX_BLOCK_BYTES).await?;
        if !compressed && *node == self.system.id() {
            // This node's own copy, checked by `handle_get` just before.
            return Ok(bytes);
        }
        let block = if compressed {
            DataBlock::Compressed(bytes)
        } else {
            DataBlock::Plain(bytes)
        };
        let hash = *hash;
        blocking(move || block.verify_and_decode(&hash))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }

    /// Reads a block as a stream of its content, nearest replica first. A
    /// plain block is forwarded chunk by chunk as it arrives (a gateway
    /// never holds it whole), hashed on the blocking pool along the way; if
    /// the hash does not match, the stream ends with an error instead of
    /// its last chunk (this node's own copy is hashed once, as it is read
    /// from disk). A compressed block is decompressed whole first.
    #[tracing::instrument(level = "debug", name = "block_get", skip_all,
        fields(otel.name = "block get", block.hash = %hash))]
    pub async fn get_block_stream(&self, hash: &Hash) -> Result<ByteStream> {
        let mut errors = Vec::new();
        for node in self.read_candidates(hash)? {
            self.system.ensure_connected(&node).await;
            let call = self.endpoint.call_streaming(
                &node,
                BlockRpc::GetBlock { hash: *hash },
                None,
                Priority::Normal,
            );
            let (resp, body) = match tokio::time::timeout(BLOCK_READ_TIMEOUT, call).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    errors.push(format!("{node:?}: {e}"));
                    continue;
                }
                Err(_) => {
                    errors.push(format!("{node:?}: timeout"));
                    continue;
                }
            };
            let Some(body) = body else {
                errors.push(format!("{node:?}: {resp:?}"));
                continue;
            };
            match resp {
                // This node's own copy was checked against its hash by
                // `handle_get`, in this process, just before: the bytes
                // are those checked, and are not hashed a second time.
                BlockRpc::BlockHeader { compressed: false } if node == self.system.id() => {
                    return Ok(body);
                }
                BlockRpc::BlockHeader { compressed: false } => {
                    return Ok(verified_stream(body, *hash));
                }
                BlockRpc::BlockHeader { compressed: true } => {
                    let bytes = match read_body(body, MAX_BLOCK_BYTES).await {
                        Ok(b) => b,
                        Err(e) => {
                            errors.push(format!("{node:?}: {e}"));
                            continue;
                        }
                    };
                    let h = *hash;
                    match blocking(move || DataBlock::Compressed(bytes).verify_and_decode(&h))
                        .await?
                    {
                        Ok(plain) => return Ok(body_of(plain)),
                        Err(e) => errors.push(format!("{node:?}: {e}")),
                    }
                }
                other => errors.push(format!("{node:?}: {other:?}")),
            }
        }
        metrics::counter!("block_read_errors_total").increment(1);
        Err(Error::Unavailable {
            hash: *hash,
            errors,
        })
    }

    /// Moves a corrupted local copy aside and queues the block for resync,
    /// which fetches a good copy from another replica.
    ///
    /// The stored copy is checked again first: two readers may both have
    /// seen the bad copy, and by the time the second gets here the first
    /// may have moved it aside and a resync put a good copy in its place,
    /// which must stay. A copy already gone is not an error.
    pub async fn set_aside_corrupted(&self, hash: Hash) -> Result<Option<std::path::PathBuf>> {
        let store = self.store.clone();
        let aside = blocking(move || -> std::result::Result<_, StoreError> {
            match store.read(&hash)? {
                Some(b) if b.verify_and_decode(&hash).is_err() => match store.move_aside(&hash) {
                    Err(StoreError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        Ok(None)
                    }
                    r => r,
                },
                _ => Ok(None),
            }
        })
        .await??;
        let queue = self.rc.resync_queue.clone();
        blocking(move || {
            queue.insert(
                crate::rc::queue_key(garage_util::time::now_msec(), &hash),
                [],
            )
        })
        .await?
        .map_err(|e| Error::Task(format!("resync queue: {e}")))?;
        Ok(aside)
    }

    /// Whether a read of replicated block `hash` tries this node's own
    /// copy first (this node is one of the block's replicas).
    pub fn reads_locally(&self, hash: &Hash) -> bool {
        self.read_candidates(hash)
            .is_ok_and(|c| c.first() == Some(&self.system.id()))
    }

    /// Nodes that may hold the block, nearest first.
    fn read_candidates(&self, hash: &Hash) -> Result<Vec<NodeId>> {
        let layout = self.system.layout();
        let partition = LayoutVersion::partition_of(hash.as_slice());
        let mut candidates: Vec<NodeId> = Vec::new();
        for n in layout
            .read_version(self.system.write_quorum())
            .nodes_of(partition)
            .into_iter()
            .chain(layout.all_storage_nodes_of(partition))
        {
            if !candidates.contains(&n) {
                candidates.push(n);
            }
        }
        if candidates.is_empty() {
            return Err(Error::NoNodes);
        }
        Ok(self.system.nodes_by_distance(&candidates))
    }

    /// The block from this node's own store, checked against its hash
    /// (`None`: not stored here, or corrupted, which scrub and resync
    /// handle).
    pub async fn read_local(&self, hash: &Hash) -> Result<Option<Bytes>> {
        let store = self.store.clone();
        let h = *hash;
        let block = blocking(move || store.read(&h)).await??;
        Ok(block.and_then(|b| b.verify_and_decode(hash).ok()))
    }

    /// Whether `node` references the block but lacks it.
    pub async fn need_block(&self, node: &NodeId, hash: &Hash) -> Result<bool> {
        self.system.ensure_connected(node).await;
        match self
            .endpoint
            .call(node, BlockRpc::NeedBlock(*hash), Priority::Background)
            .await
        {
            Ok(BlockRpc::NeedBlockReply(b)) => Ok(b),
            Ok(other) => Err(Error::Unavailable {
                hash: *hash,
                errors: vec![format!("{node:?}: unexpected answer {other:?}")],
            }),
            Err(e) => Err(Error::Unavailable {
                hash: *hash,
                errors: vec![format!("{node:?}: {e}")],
            }),
        }
    }

    /// Sends a block to one node.
    pub async fn put_to(&self, node: &NodeId, hash: &Hash, data: Bytes) -> Result<()> {
        let level = self.compression_level;
        let block = blocking(move || DataBlock::from_plain(data, level)).await?;
        self.system.ensure_connected(node).await;
        let r = self
            .endpoint
            .call_streaming(
                node,
                BlockRpc::PutBlock {
                    hash: *hash,
                    compressed: block.is_compressed(),
                },
                Some(body_of(block.bytes().clone())),
                Priority::Background,
            )
            .await;
        match r {
            Ok((BlockRpc::Ok, _)) => Ok(()),
            Ok((other, _)) => Err(Error::Quorum {
                hash: *hash,
                needed: 1,
                ok: 0,
                errors: vec![format!("{node:?}: {other:?}")],
            }),
            Err(e) => Err(Error::Quorum {
                hash: *hash,
                needed: 1,
                ok: 0,
                errors: vec![format!("{node:?}: {e}")],
            }),
        }
    }

    /// Whether this node stores the block.
    pub async fn has_block(&self, hash: Hash) -> Result<bool> {
        let store = self.store.clone();
        blocking(move || store.find(&hash).is_some()).await
    }

    async fn handle_put(&self, hash: Hash, compressed: bool, body: Option<ByteStream>) -> BlockRpc {
        let Some(body) = body else {
            return BlockRpc::Error("PutBlock without a body".into());
        };
        let bytes = match read_body(body, MAX_BLOCK_BYTES).await {
            Ok(b) => b,
            Err(e) => return BlockRpc::Error(e),
        };
        let block = if compressed {
            DataBlock::Compressed(bytes)
        } else {
            DataBlock::Plain(bytes)
        };
        let (store, rc) = (self.store.clone(), self.rc.clone());
        let res = blocking(move || -> Result<()> {
            // Never store bytes that are not the block they claim to be.
            block.verify_and_decode(&hash)?;
            // A block waiting for deletion that is written again is kept:
            // this write is acknowledged, and its reference comes next.
            store.write_then(&hash, &block, || {
                rc.touch(&hash, garage_util::time::now_msec())
                    .map_err(|e| StoreError::Meta(e.to_string()))
            })?;
            Ok(())
        })
        .await;
        match res {
            Ok(Ok(())) => BlockRpc::Ok,
            Ok(Err(e)) | Err(e) => BlockRpc::Error(e.to_string()),
        }
    }

    /// Sends a stored block, checked against its hash first: a corrupted
    /// copy is never sent. It is moved aside and queued for resync (which
    /// fetches a good copy from another replica), and the reader gets an
    /// error, so it falls back to the next replica. A reader on this node
    /// (`local`) gets the content decoded by that check, so a compressed
    /// block is not decompressed and hashed a second time.
    async fn handle_get(&self, hash: Hash, local: bool) -> (BlockRpc, Option<ByteStream>) {
        let store = self.store.clone();
        let read = blocking(
            move || -> std::result::Result<Option<(DataBlock, Option<Bytes>)>, StoreError> {
                let Some(block) = store.read(&hash)? else {
                    return Ok(None);
                };
                let plain = block.verify_and_decode(&hash).ok();
                Ok(Some((block, plain)))
            },
        );
        match read.await {
            Ok(Ok(Some((_, Some(plain))))) if local => (
                BlockRpc::BlockHeader { compressed: false },
                Some(body_of(plain)),
            ),
            Ok(Ok(Some((block, Some(_))))) => (
                BlockRpc::BlockHeader {
                    compressed: block.is_compressed(),
                },
                Some(body_of(block.bytes().clone())),
            ),
            Ok(Ok(Some((_, None)))) => {
                metrics::counter!("block_corrupted_total", "found_by" => "read").increment(1);
                let msg = match self.set_aside_corrupted(hash).await {
                    Ok(aside) => format!(
                        "block {hash:?} is corrupted on this node (moved aside to {aside:?}, repair queued)"
                    ),
                    Err(e) => format!("block {hash:?} is corrupted on this node ({e})"),
                };
                tracing::warn!("{msg}");
                (BlockRpc::Error(msg), None)
            }
            Ok(Ok(None)) => (
                BlockRpc::Error(format!("block {hash:?} is not stored here")),
                None,
            ),
            Ok(Err(e)) => (BlockRpc::Error(e.to_string()), None),
            Err(e) => (BlockRpc::Error(e.to_string()), None),
        }
    }
}

#[async_trait::async_trait]
impl EndpointHandler<BlockRpc> for BlockManager {
    async fn handle(&self, msg: BlockRpc, from: NodeId) -> BlockRpc {
        self.handle_streaming(msg, None, from).await.0
    }

    async fn handle_streaming(
        &self,
        msg: BlockRpc,
        body: Option<ByteStream>,
        from: NodeId,
    ) -> (BlockRpc, Option<ByteStream>) {
        match msg {
            BlockRpc::PutBlock { hash, compressed } => {
                debug!(peer = ?from, "storing block {hash:?}");
                (self.handle_put(hash, compressed, body).await, None)
            }
            BlockRpc::GetBlock { hash } => self.handle_get(hash, from == self.system.id()).await,
            BlockRpc::PutShard { addr, index } => {
                debug!(peer = ?from, "storing shard {index} of {addr:?}");
                (self.handle_put_shard(addr, index, body).await, None)
            }
            BlockRpc::GetShard { addr, index } => self.handle_get_shard(addr, index).await,
            BlockRpc::MissingShards { addr, indices } => {
                let store = self.store.clone();
                match blocking(move || {
                    indices
                        .into_iter()
                        .filter(|i| store.find_shard(&addr, *i).is_none())
                        .collect::<Vec<u8>>()
                })
                .await
                {
                    Ok(missing) => (BlockRpc::MissingShardsReply(missing), None),
                    Err(e) => (BlockRpc::Error(e.to_string()), None),
                }
            }
            BlockRpc::DeleteShards { addr } => (self.handle_delete_shards(addr).await, None),
            BlockRpc::CountsRefs(addr) => {
                let rc = self.rc.clone();
                match blocking(move || rc.get(&addr)).await {
                    Ok(Ok(e)) => (
                        BlockRpc::CountsRefsReply(e.is_some_and(|e| e.count() > 0)),
                        None,
                    ),
                    Ok(Err(e)) => (BlockRpc::Error(e.to_string()), None),
                    Err(e) => (BlockRpc::Error(e.to_string()), None),
                }
            }
            BlockRpc::NeedBlock(hash) => {
                let rc = self.rc.clone();
                let referenced = matches!(blocking(move || rc.get(&hash)).await, Ok(Ok(Some(e))) if e.count() > 0);
                let need = match self.has_block(hash).await {
                    Ok(stored) => referenced && !stored,
                    Err(e) => return (BlockRpc::Error(e.to_string()), None),
                };
                (BlockRpc::NeedBlockReply(need), None)
            }
            other => (BlockRpc::Error(format!("not a request: {other:?}")), None),
        }
    }
}
