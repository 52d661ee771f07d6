//! Erasure-coded blocks across the cluster: shard `i` of block `addr`
//! lives on the `i`-th node of the placement of its code for `addr`'s
//! partition (in every live layout version, like replicas).
//!
//! Write rule: a block is acknowledged once, in every live layout version,
//! the shards on disk survive the loss of any one zone: their number minus
//! the most of them in one zone is at least `data`. With the automatic
//! codes (at most `parity` shards per zone, as many zones as it takes),
//! that is every shard; the writes still running go on in the background.
//! A block is written this way only when every node of its shards is up;
//! otherwise the caller stores it replicated (see
//! [`BlockManager::ec_writable`]).
//!
//! A placed class (a placement of scope other than 0, `garage layout
//! class`) is never stored elsewhere: its blocks are written to the nodes of
//! its ring that are up, all of them, and at least `data` (else the write
//! fails at once). With a node or a zone of the class down, a write is thus
//! acknowledged with fewer shards than the class keeps (one copy of
//! `replication 2` with one of its two zones down); the reference counter's
//! check writes the missing ones when their nodes are back (resync). Hedged
//! shards stay in the class's zones.
//!
//! Read: the `data` nearest shards are asked for at once; a shard that is
//! missing, corrupted or late is replaced by the next nearest one; the
//! block is rebuilt and checked against its content hash.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use garage_net::{ByteStream, NetError, NodeId, Priority};
use garage_rpc::layout::{LayoutHistory, LayoutVersion, Placement};
use garage_util::data::Hash;
use tracing::{debug, warn, Instrument};

use crate::block::DataBlock;
use crate::ec::{self, Shard};
use crate::manager::{
    blocking, body_of, read_body, BlockManager, BlockRpc, Error, Result, BLOCK_READ_TIMEOUT,
    BLOCK_RPC_TIMEOUT, MAX_BLOCK_BYTES,
};
use crate::rc::RcEntry;
use crate::resync::Outcome;

/// How long a write waits for shard nodes this node has never seen since
/// it started before storing a block replicated
/// ([`BlockManager::ec_writable_soon`]).
pub const FIRST_CONTACT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// A write's shards still missing once the others are stored are also
/// written to other nodes (hedged) after this many times as long as the
/// others took, and at least [`HEDGE_AFTER_MIN`]: a node cut off but not
/// yet seen as down (a failed link stalls rather than resets) would make
/// the write wait for the RPC timeout.
const HEDGE_FACTOR: u32 = 4;
pub const HEDGE_AFTER_MIN: std::time::Duration = std::time::Duration::from_secs(3);

/// For each live layout version (newest last): the node of each shard.
fn placements(layout: &LayoutHistory, addr: &Hash, code: Placement) -> Result<Vec<ShardSet>> {
    let partition = LayoutVersion::partition_of(addr.as_slice());
    let mut out = Vec::new();
    for v in layout.live_versions() {
        if v.storage_nodes.is_empty() {
            continue;
        }
        let nodes = match v.shard_nodes(code, partition) {
            Some(nodes) => nodes,
            // A placed class new in a later live version had no blocks
            // before it.
            None if code.scope != 0 => continue,
            None => return Err(Error::NoPlacement(code)),
        };
        let zones = nodes
            .iter()
            .map(|n| v.roles.get(n).map(|r| r.zone.clone()).unwrap_or_default())
            .collect();
        out.push(ShardSet { nodes, zones });
    }
    if out.is_empty() {
        return Err(if code.scope != 0 {
            Error::NoPlacement(code)
        } else {
            Error::NoNodes
        });
    }
    Ok(out)
}

struct ShardSet {
    /// Node of shard `i`.
    nodes: Vec<NodeId>,
    zones: Vec<String>,
}

/// Whether shards stored in `zones` (one per shard index stored) survive
/// the loss of any one zone.
fn survives_a_zone<'a>(zones: impl Iterator<Item = &'a str>, code: Placement) -> bool {
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    let mut total = 0;
    for z in zones {
        *per_zone.entry(z).or_default() += 1;
        total += 1;
    }
    let worst = per_zone.values().copied().max().unwrap_or(0);
    total - worst >= code.data()
}

impl BlockManager {
    /// Whether block `addr` can be written with `code` now: every live
    /// layout version places the code, and every node of its shards is up.
    pub fn ec_writable(&self, addr: &Hash, code: Placement) -> bool {
        let layout = self.system.layout();
        match placements(&layout, addr, code) {
            Ok(ps) => ps
                .iter()
                .flat_map(|p| p.nodes.iter())
                .all(|n| *n == self.system.id() || self.system.is_up(n)),
            Err(_) => false,
        }
    }

    /// [`BlockManager::ec_writable`], waiting up to
    /// [`FIRST_CONTACT_WAIT`] when the nodes of the shards that are not up
    /// are ones this node has never seen since it started (a fresh
    /// cluster, or this node just restarted: they are most likely being
    /// dialled), rather than falling back to replication at once. A node
    /// seen before and now down falls back at once.
    pub async fn ec_writable_soon(&self, addr: &Hash, code: Placement) -> bool {
        let deadline = tokio::time::Instant::now() + FIRST_CONTACT_WAIT;
        loop {
            if self.ec_writable(addr, code) {
                return true;
            }
            let layout = self.system.layout();
            let Ok(ps) = placements(&layout, addr, code) else {
                return false;
            };
            let me = self.system.id();
            let never_seen = ps
                .iter()
                .flat_map(|p| p.nodes.iter())
                .all(|n| *n == me || self.system.is_up(n) || !self.system.ever_seen(n));
            if !never_seen || tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Stores `data` (content hash `content`) erasure-coded with `code`,
    /// under address [`ec::ec_address`]; returns once the write rule of the
    /// module documentation holds.
    #[tracing::instrument(level = "debug", name = "block_put_ec", skip_all,
        fields(otel.name = "block put (erasure-coded)", block.hash = %content, block.size = data.len()))]
    pub async fn put_block_ec(
        self: &Arc<Self>,
        content: Hash,
        data: Bytes,
        code: Placement,
    ) -> Result<Hash> {
        let res = self.put_block_ec_inner(content, data, code).await;
        if res.is_err() {
            metrics::counter!("block_quorum_errors_total", "op" => "write").increment(1);
        }
        res
    }

    async fn put_block_ec_inner(
        self: &Arc<Self>,
        content: Hash,
        data: Bytes,
        code: Placement,
    ) -> Result<Hash> {
        let level = self.compression_level;
        let shards = blocking(move || -> std::result::Result<Vec<Bytes>, ec::EcError> {
            let block = DataBlock::from_plain(data, level);
            Ok(ec::encode(&block, content, code)?
                .iter()
                .map(Shard::to_bytes)
                .collect())
        })
        .await?
        .map_err(Error::Ec)?;
        let addr = ec::ec_address(&content, code);
        let guard = self.system.start_write("shard write");
        let places = placements(&guard.layout, &addr, code)?;
        let targets: BTreeSet<(NodeId, usize)> = places
            .iter()
            .flat_map(|p| p.nodes.iter().enumerate().map(|(i, n)| (*n, i)))
            .collect();
        let mut pending = FuturesUnordered::new();
        let send = |pending: &mut FuturesUnordered<_>, node: NodeId, index: usize| {
            let bytes = shards[index].clone();
            let m = self.clone();
            pending.push(tokio::spawn(
                async move {
                    let r = m.put_shard_to(&node, &addr, index as u8, bytes).await;
                    (node, index, r)
                }
                .in_current_span(),
            ));
        };
        for (node, index) in targets {
            send(&mut pending, node, index);
        }
        let mut stored: BTreeSet<(NodeId, usize)> = BTreeSet::new();
        // Shards written to a node outside the placement (hedges): index
        // -> zone of the node that has it.
        let mut hedged: BTreeMap<usize, String> = BTreeMap::new();
        let mut hedging: BTreeSet<NodeId> = BTreeSet::new();
        let mut errors = Vec::new();
        let start = tokio::time::Instant::now();
        let deadline = start + BLOCK_RPC_TIMEOUT;
        let mut hedge_at: Option<tokio::time::Instant> = None;
        let me = self.system.id();
        let is_up = |n: &NodeId| *n == me || self.system.is_up(n);
        // Shards whose write failed (a placed class does not wait for them).
        let mut failed: BTreeSet<(NodeId, usize)> = BTreeSet::new();
        if code.scope != 0 {
            // A placed class writes to the nodes of its zones that are up:
            // too few of them is an error at once, never a wait.
            for p in places.iter() {
                let up = p.nodes.iter().filter(|n| is_up(n)).count();
                if up < code.data() {
                    return Err(Error::Quorum {
                        hash: addr,
                        needed: code.data(),
                        ok: 0,
                        errors: vec![format!(
                            "only {up} of the {} nodes of this block's storage class ({}) are up",
                            code.shards(),
                            code.describe()
                        )],
                    });
                }
            }
        }
        loop {
            let done = places.iter().all(|p| {
                let have = |i: usize| stored.contains(&(p.nodes[i], i)) || hedged.contains_key(&i);
                if code.scope != 0 {
                    // Every shard whose node is up, and `data` at least
                    // (see the module documentation).
                    let got = (0..code.shards()).filter(|i| have(*i)).count();
                    let missing_up = (0..code.shards()).any(|i| {
                        !have(i) && is_up(&p.nodes[i]) && !failed.contains(&(p.nodes[i], i))
                    });
                    return got >= code.data() && !missing_up;
                }
                let zones = (0..code.shards()).filter_map(|i| {
                    if stored.contains(&(p.nodes[i], i)) {
                        Some(p.zones[i].as_str())
                    } else {
                        hedged.get(&i).map(String::as_str)
                    }
                });
                survives_a_zone(zones, code)
            });
            if done {
                if !hedged.is_empty() {
                    metrics::counter!("block_ec_hedged_writes_total").increment(1);
                }
                return Ok(addr);
            }
            let wake = hedge_at.map_or(deadline, |h| h.min(deadline));
            let next = tokio::time::timeout_at(wake, pending.next()).await;
            // Hedge when late, or at once when every call has ended
            // without the write being done (a node that refused).
            let hedge_now = match &next {
                Err(_) => hedge_at.is_some_and(|h| h <= tokio::time::Instant::now()),
                Ok(None) => hedging.is_empty(),
                Ok(Some(_)) => false,
            };
            if hedge_now {
                hedge_at = None;
                let layout = self.system.layout();
                let picks = self.hedge_targets(&layout, &places, &stored, &hedging, code);
                for (node, index) in picks {
                    debug!("shard {index} of {addr:?}: its node is late, also written to {node:?}");
                    hedging.insert(node);
                    send(&mut pending, node, index);
                }
                if !pending.is_empty() {
                    continue;
                }
            }
            match next {
                Err(_) | Ok(None) => {
                    return Err(Error::Quorum {
                        hash: addr,
                        needed: code.shards(),
                        ok: stored.len() + hedged.len(),
                        errors,
                    })
                }
                Ok(Some(Ok((node, index, Ok(()))))) => {
                    if hedging.contains(&node) {
                        let layout = self.system.layout();
                        let zone = layout
                            .current()
                            .roles
                            .get(&node)
                            .map(|r| r.zone.clone())
                            .unwrap_or_default();
                        hedged.insert(index, zone);
                    } else {
                        stored.insert((node, index));
                    }
                    // The shards still missing are hedged once they are
                    // late: several times as long as those stored took.
                    if hedging.is_empty() {
                        let waited = start.elapsed();
                        hedge_at = Some(start + (waited * HEDGE_FACTOR).max(HEDGE_AFTER_MIN));
                    }
                }
                Ok(Some(Ok((node, index, Err(e))))) => {
                    failed.insert((node, index));
                    errors.push(format!("shard {index} on {node:?}: {e}"))
                }
                Ok(Some(Err(e))) => errors.push(format!("write task failed: {e}")),
            }
        }
    }

    /// For a write whose shards are late on some of their nodes: for each
    /// shard index missing from a placement, a node that is up, outside
    /// every placement of the block and not hedged to yet, in the late
    /// node's zone if one is, else in the zone holding the fewest shards
    /// of the newest placement. Its placement pass hands the shard over to
    /// its node later (see `placement.rs`).
    fn hedge_targets(
        &self,
        layout: &LayoutHistory,
        places: &[ShardSet],
        stored: &BTreeSet<(NodeId, usize)>,
        hedging: &BTreeSet<NodeId>,
        code: Placement,
    ) -> Vec<(NodeId, usize)> {
        let current = layout.current();
        let in_placements: BTreeSet<NodeId> = places
            .iter()
            .flat_map(|p| p.nodes.iter().copied())
            .collect();
        // A placed class's shards never leave its zones.
        let class_zones = current
            .ring_of(code)
            .map(|r| r.zones.clone())
            .unwrap_or_default();
        let in_class = |n: &NodeId| {
            class_zones.is_empty()
                || current
                    .roles
                    .get(n)
                    .is_some_and(|r| class_zones.contains(&r.zone))
        };
        let mut free: Vec<(NodeId, String)> = current
            .storage_nodes
            .iter()
            .filter(|n| {
                !in_placements.contains(n)
                    && !hedging.contains(n)
                    && self.system.is_up(n)
                    && in_class(n)
            })
            .map(|n| {
                (
                    *n,
                    current
                        .roles
                        .get(n)
                        .map(|r| r.zone.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        let newest = places.last().expect("at least one placement");
        let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
        for z in &newest.zones {
            *per_zone.entry(z.clone()).or_default() += 1;
        }
        let mut picks = Vec::new();
        for i in 0..code.shards() {
            let late = places.iter().find(|p| !stored.contains(&(p.nodes[i], i)));
            let Some(p) = late else {
                continue;
            };
            let zone = &p.zones[i];
            let pos = free.iter().position(|(_, z)| z == zone).or_else(|| {
                (0..free.len()).min_by_key(|&k| per_zone.get(&free[k].1).copied().unwrap_or(0))
            });
            if let Some(k) = pos {
                let (n, z) = free.remove(k);
                *per_zone.entry(z).or_default() += 1;
                picks.push((n, i));
            }
        }
        picks
    }

    /// Sends shard `index` of `addr` (header and payload) to `node`.
    pub async fn put_shard_to(
        &self,
        node: &NodeId,
        addr: &Hash,
        index: u8,
        bytes: Bytes,
    ) -> std::result::Result<(), String> {
        let call = || async {
            let put = async {
                self.system.ensure_connected(node).await;
                self.endpoint
                    .call_streaming(
                        node,
                        BlockRpc::PutShard { addr: *addr, index },
                        Some(body_of(bytes.clone())),
                        Priority::Background,
                    )
                    .await
            };
            tokio::time::timeout(BLOCK_RPC_TIMEOUT, put)
                .await
                .unwrap_or(Err(NetError::Timeout(BLOCK_RPC_TIMEOUT)))
        };
        let mut r = call().await;
        // As for whole blocks: one more try on a replaced connection.
        if matches!(
            r,
            Err(NetError::ConnectionClosed | NetError::NotConnected(_))
        ) {
            r = call().await;
        }
        match r {
            Ok((BlockRpc::Ok, _)) => Ok(()),
            Ok((BlockRpc::Error(e), _)) => Err(e),
            Ok((other, _)) => Err(format!("unexpected answer {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The content of erasure-coded block `addr`, rebuilt from the nearest
    /// shards (see the module documentation).
    #[tracing::instrument(level = "debug", name = "block_get_ec", skip_all,
        fields(otel.name = "block get (erasure-coded)", block.hash = %addr))]
    pub async fn get_block_ec(&self, addr: &Hash, code: Placement) -> Result<Bytes> {
        let res = self.get_block_ec_inner(addr, code).await;
        if res.is_err() {
            metrics::counter!("block_read_errors_total").increment(1);
        }
        res
    }

    async fn get_block_ec_inner(&self, addr: &Hash, code: Placement) -> Result<Bytes> {
        self.get_shards(addr, code).await.map(|(_, _, plain)| plain)
    }

    /// Reads the nearest `data` good shards of `addr` and decodes them:
    /// the block as stored, its content hash and its content.
    async fn get_shards(&self, addr: &Hash, code: Placement) -> Result<(DataBlock, Hash, Bytes)> {
        // Pairs not tried yet, nearest first; a pair is tried when no other
        // node is being asked for the same shard.
        let mut remaining = self.shard_candidates(addr, code)?;
        let mut pending = FuturesUnordered::new();
        let mut asked: BTreeSet<usize> = BTreeSet::new();
        let mut good: Vec<(Shard, Bytes)> = Vec::new();
        let mut errors = Vec::new();
        let start = |pending: &mut FuturesUnordered<_>,
                     remaining: &mut Vec<(NodeId, usize)>,
                     asked: &mut BTreeSet<usize>| {
            let Some(pos) = remaining.iter().position(|(_, i)| !asked.contains(i)) else {
                return;
            };
            let (node, index) = remaining.remove(pos);
            asked.insert(index);
            let a = *addr;
            pending.push(async move {
                let r = tokio::time::timeout(
                    BLOCK_READ_TIMEOUT,
                    self.get_shard_from(&node, &a, index as u8),
                )
                .await
                .unwrap_or_else(|_| Err("timeout".into()));
                (node, index, r)
            });
        };
        for _ in 0..code.data() {
            start(&mut pending, &mut remaining, &mut asked);
        }
        // A running node that lacks its shard or holds a bad one: the
        // block's shards are repaired in the background once it is read.
        let mut repair = false;
        while let Some((node, index, r)) = pending.next().await {
            match r {
                Ok(s) => {
                    good.push(s);
                    if good.len() >= code.data() {
                        let a = *addr;
                        let shards: Vec<Shard> = good.iter().map(|(s, _)| s.clone()).collect();
                        let res = blocking(move || ec::decode_stored(&a, &shards))
                            .await?
                            .map_err(Error::Ec);
                        if res.is_ok() {
                            if repair {
                                self.repair_in_background(*addr, code);
                            }
                            return res;
                        }
                        // A shard changed after its holder checked it:
                        // those failing their checksum are dropped, and
                        // others asked for; none failing: the error stands.
                        let checked = std::mem::take(&mut good);
                        let (ok, bad): (Vec<_>, Vec<_>) =
                            blocking(move || -> (Vec<(Shard, Bytes)>, Vec<u8>) {
                                let mut ok = Vec::new();
                                let mut bad = Vec::new();
                                for (s, raw) in checked {
                                    let i = s.info.index;
                                    match Shard::parse(raw.clone(), Some((&a, i))) {
                                        Ok(_) => ok.push((s, raw)),
                                        Err(_) => bad.push(i),
                                    }
                                }
                                (ok, bad)
                            })
                            .await?;
                        if bad.is_empty() {
                            return res;
                        }
                        good = ok;
                        for i in bad {
                            errors.push(format!("shard {i}: changed in transit"));
                            // Not asked again from the same node.
                            asked.insert(i as usize);
                            start(&mut pending, &mut remaining, &mut asked);
                        }
                    }
                }
                Err(e) if e.contains("corrupted") || e.contains("not stored here") => {
                    repair = true;
                    errors.push(format!("shard {index} on {node:?}: {e}"));
                    asked.remove(&index);
                    start(&mut pending, &mut remaining, &mut asked);
                }
                Err(e) => {
                    errors.push(format!("shard {index} on {node:?}: {e}"));
                    // The next node of the same shard, or the next shard.
                    asked.remove(&index);
                    start(&mut pending, &mut remaining, &mut asked);
                }
            }
        }
        Err(Error::Unavailable {
            hash: *addr,
            errors,
        })
    }

    /// (node, shard index) pairs that may serve a shard of `addr`, nearest
    /// node first; each shard's node in the read version before its nodes
    /// in the other live versions. The nodes of retired versions come last:
    /// their shards stay there until the placement pass has handed them
    /// over to the new nodes.
    fn shard_candidates(&self, addr: &Hash, code: Placement) -> Result<Vec<(NodeId, usize)>> {
        let layout = self.system.layout();
        let partition = LayoutVersion::partition_of(addr.as_slice());
        let read = layout.read_version(self.system.write_quorum());
        let pairs_of = |versions: &mut dyn Iterator<Item = &LayoutVersion>| {
            let mut pairs: Vec<(NodeId, usize)> = Vec::new();
            for v in versions {
                if let Some(nodes) = v.shard_nodes(code, partition) {
                    for (i, n) in nodes.into_iter().enumerate() {
                        if !pairs.contains(&(n, i)) {
                            pairs.push((n, i));
                        }
                    }
                }
            }
            pairs
        };
        let mut pairs = pairs_of(&mut std::iter::once(read).chain(layout.live_versions()));
        if pairs.is_empty() {
            return Err(Error::NoPlacement(code));
        }
        let nodes: Vec<NodeId> = pairs.iter().map(|(n, _)| *n).collect();
        let order = self.system.nodes_by_distance(&nodes);
        // Stable: among a node's pairs, the read version's first.
        pairs.sort_by_key(|(n, _)| order.iter().position(|o| o == n));
        let retired: Vec<&LayoutVersion> = layout.retired_versions().collect();
        for p in pairs_of(&mut retired.into_iter().rev()) {
            if !pairs.contains(&p) && self.system.is_up(&p.0) {
                pairs.push(p);
            }
        }
        Ok(pairs)
    }

    async fn get_shard_from(
        &self,
        node: &NodeId,
        addr: &Hash,
        index: u8,
    ) -> std::result::Result<(Shard, Bytes), String> {
        self.system.ensure_connected(node).await;
        let (resp, body) = self
            .endpoint
            .call_streaming(
                node,
                BlockRpc::GetShard { addr: *addr, index },
                None,
                Priority::Normal,
            )
            .await
            .map_err(|e| e.to_string())?;
        match resp {
            BlockRpc::ShardBody => (),
            BlockRpc::Error(e) => return Err(e),
            other => return Err(format!("unexpected answer {other:?}")),
        }
        let bytes = read_body(body.ok_or("no shard body")?, MAX_BLOCK_BYTES).await?;
        // Its holder checked it (checksum) before sending it; the block
        // rebuilt from it is checked against its content hash.
        Shard::parse_header(bytes.clone(), Some((addr, index)))
            .map(|s| (s, bytes))
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn handle_put_shard(
        &self,
        addr: Hash,
        index: u8,
        body: Option<ByteStream>,
    ) -> BlockRpc {
        let Some(body) = body else {
            return BlockRpc::Error("PutShard without a body".into());
        };
        let bytes = match read_body(body, MAX_BLOCK_BYTES).await {
            Ok(b) => b,
            Err(e) => return BlockRpc::Error(e),
        };
        let store = self.store.clone();
        let res = blocking(move || -> Result<Placement> {
            // Never store a shard that is not the one it claims to be.
            let shard = Shard::parse(bytes.clone(), Some((&addr, index))).map_err(Error::Ec)?;
            store.write_shard(&addr, index, &bytes)?;
            Ok(shard.info.code)
        })
        .await;
        match res {
            Ok(Ok(code)) => {
                // A hedged write's shard (this node holds that index in no
                // live placement): the placement pass hands it over.
                let layout = self.system.layout();
                let partition = LayoutVersion::partition_of(addr.as_slice());
                let me = self.system.id();
                let holder = layout.live_versions().any(|v| {
                    v.shard_nodes(code, partition)
                        .is_some_and(|n| n.get(index as usize) == Some(&me))
                });
                if !holder {
                    self.stray_shards.notify_one();
                }
                BlockRpc::Ok
            }
            Ok(Err(e)) | Err(e) => BlockRpc::Error(e.to_string()),
        }
    }

    /// Sends a stored shard, checked first: a corrupted one is moved
    /// aside and never sent (the reader asks for another shard).
    pub(crate) async fn handle_get_shard(
        &self,
        addr: Hash,
        index: u8,
    ) -> (BlockRpc, Option<ByteStream>) {
        let store = self.store.clone();
        let read = blocking(
            move || -> std::result::Result<Option<(Bytes, bool)>, String> {
                let Some(bytes) = store.read_shard(&addr, index).map_err(|e| e.to_string())? else {
                    return Ok(None);
                };
                let good = Shard::parse(bytes.clone(), Some((&addr, index))).is_ok();
                if !good {
                    let _ = store.move_shard_aside(&addr, index);
                }
                Ok(Some((bytes, good)))
            },
        );
        match read.await {
            Ok(Ok(Some((bytes, true)))) => (BlockRpc::ShardBody, Some(body_of(bytes))),
            Ok(Ok(Some((_, false)))) => {
                metrics::counter!("block_corrupted_total", "found_by" => "read").increment(1);
                let msg =
                    format!("shard {index} of {addr:?} is corrupted on this node (moved aside)");
                warn!("{msg}");
                (BlockRpc::Error(msg), None)
            }
            Ok(Ok(None)) => (
                BlockRpc::Error(format!("shard {index} of {addr:?} is not stored here")),
                None,
            ),
            Ok(Err(e)) => (BlockRpc::Error(e), None),
            Err(e) => (BlockRpc::Error(e.to_string()), None),
        }
    }

    /// Block `addr` as a stream of its content: replicated (`ec` is
    /// `None`, see [`BlockManager::get_block_stream`]) or erasure-coded
    /// (rebuilt whole first).
    pub async fn get_stream(&self, addr: &Hash, ec: Option<Placement>) -> Result<ByteStream> {
        match ec {
            None => self.get_block_stream(addr).await,
            Some(code) => Ok(body_of(self.get_block_ec(addr, code).await?)),
        }
    }

    /// Block `addr`'s content, replicated or erasure-coded.
    pub async fn get_any(&self, addr: &Hash, ec: Option<Placement>) -> Result<Bytes> {
        match ec {
            None => self.get_block(addr).await,
            Some(code) => self.get_block_ec(addr, code).await,
        }
    }

    /// Starts [`BlockManager::repair_shards`] in the background.
    pub(crate) fn repair_in_background(&self, addr: Hash, code: Placement) {
        let Some(m) = self.this.upgrade() else {
            return;
        };
        tokio::spawn(
            async move {
                match m.repair_shards(&addr, code).await {
                    Ok(o) => debug!("shards of {addr:?} checked after a read: {o:?}"),
                    Err(e) => warn!("shards of {addr:?} not all repaired after a read: {e}"),
                }
            }
            .in_current_span(),
        );
    }

    pub(crate) async fn handle_delete_shards(&self, addr: Hash) -> BlockRpc {
        let store = self.store.clone();
        let age = std::time::Duration::from_millis(self.rc.delete_delay_ms);
        match blocking(move || store.delete_shards_older(&addr, age)).await {
            Ok(Ok(n)) => {
                debug!("shards of {addr:?} deleted on request (unreferenced), {n} younger kept");
                BlockRpc::Ok
            }
            Ok(Err(e)) => BlockRpc::Error(e.to_string()),
            Err(e) => BlockRpc::Error(e.to_string()),
        }
    }

    /// Whether this node is the first running one among the nodes that
    /// count `addr`'s references (its partition's nodes in the current
    /// layout): that node checks and repairs the block's shards, the
    /// others leave it.
    fn checks_shards_of(&self, addr: &Hash) -> bool {
        let layout = self.system.layout();
        let partition = LayoutVersion::partition_of(addr.as_slice());
        let me = self.system.id();
        layout
            .current()
            .nodes_of(partition)
            .into_iter()
            .find(|n| *n == me || self.system.is_up(n))
            == Some(me)
    }

    /// The resync of an erasure-coded block, on a node that counts its
    /// references: while referenced, every shard is on its node (missing
    /// ones are rebuilt from the others); once unreferenced for the delete
    /// delay, every node of its shards deletes them.
    pub(crate) async fn resync_ec(&self, addr: &Hash, code: Placement) -> Result<Outcome> {
        let to_err = |e: garage_db::Error| Error::Task(format!("metadata database: {e}"));
        match self.rc.get(addr).map_err(to_err)? {
            Some(RcEntry::Present { .. }) if self.checks_shards_of(addr) => {
                self.repair_shards(addr, code).await
            }
            Some(RcEntry::Deletable { deletable_after }) => {
                let now = garage_util::time::now_msec();
                // As for replicated blocks: a clock off its peers' defers
                // the deletion (see doc/ordering.md).
                let deferred = garage_util::clock::check().is_err();
                if now < deletable_after || deferred {
                    let after = match deferred {
                        true => deletable_after.max(now + 60_000),
                        false => deletable_after,
                    };
                    self.rc
                        .resync_queue
                        .insert(crate::rc::queue_key(after, addr), [])
                        .map_err(to_err)?;
                    return Ok(Outcome::NotYet);
                }
                // No reference counted here is not no reference at all:
                // this node's references may have moved to other nodes
                // (a layout change offloads them). Only a node that counts
                // the block's references in the current layout decides,
                // once every node counting them in a live version says it
                // counts none.
                let layout = self.system.layout();
                let partition = LayoutVersion::partition_of(addr.as_slice());
                let me = self.system.id();
                if !layout.current().nodes_of(partition).contains(&me) {
                    self.rc.clear_deleted(addr).map_err(to_err)?;
                    return Ok(Outcome::Nothing);
                }
                // Deleting shards is for every node at once: decided only
                // while the layout is settled (one live version, synced),
                // when the current version's counters hold every
                // reference. During a change, a counter that just took the
                // partition over may not have the references yet and
                // would answer that it counts none.
                let settled = layout.live_versions().count() == 1
                    && layout.read_version(self.system.write_quorum()).version
                        == layout.current().version;
                if !settled {
                    let after = now + self.rc.delete_delay_ms.max(10_000);
                    self.rc
                        .resync_queue
                        .insert(crate::rc::queue_key(after, addr), [])
                        .map_err(to_err)?;
                    return Ok(Outcome::NotYet);
                }
                let counters: BTreeSet<NodeId> = layout
                    .live_versions()
                    .flat_map(|v| v.nodes_of(partition))
                    .filter(|n| *n != me)
                    .collect();
                for node in counters {
                    match self.call_bounded(&node, BlockRpc::CountsRefs(*addr)).await {
                        Ok(BlockRpc::CountsRefsReply(false)) => (),
                        Ok(BlockRpc::CountsRefsReply(true)) => {
                            // Referenced there: its reference reaches this
                            // node too (sync), and counts here again.
                            self.rc.clear_deleted(addr).map_err(to_err)?;
                            return Ok(Outcome::Nothing);
                        }
                        Ok(other) => {
                            return Err(Error::Unavailable {
                                hash: *addr,
                                errors: vec![format!("{node:?}: {other:?}")],
                            })
                        }
                        Err(e) => {
                            return Err(Error::Unavailable {
                                hash: *addr,
                                errors: vec![format!("{node:?}: {e}")],
                            })
                        }
                    }
                }
                // The answers are old by their round trips: a reference that
                // came meanwhile keeps the shards.
                let still = self.rc.get(addr).map_err(to_err)?;
                let now = garage_util::time::now_msec();
                if !matches!(still, Some(RcEntry::Deletable { deletable_after }) if now >= deletable_after)
                {
                    return Ok(Outcome::Nothing);
                }
                let nodes: BTreeSet<NodeId> = placements(&layout, addr, code)?
                    .into_iter()
                    .flat_map(|p| p.nodes)
                    .collect();
                debug!(
                    "block {addr:?} referenced nowhere: deleting its shards on {} nodes",
                    nodes.len()
                );
                let mut errors = Vec::new();
                for node in nodes {
                    match self
                        .call_bounded(&node, BlockRpc::DeleteShards { addr: *addr })
                        .await
                    {
                        Ok(BlockRpc::Ok) => (),
                        Ok(other) => errors.push(format!("{node:?}: {other:?}")),
                        Err(e) => errors.push(format!("{node:?}: {e}")),
                    }
                }
                if !errors.is_empty() {
                    return Err(Error::Unavailable {
                        hash: *addr,
                        errors,
                    });
                }
                self.rc.clear_deleted(addr).map_err(to_err)?;
                Ok(Outcome::Deleted)
            }
            _ => Ok(Outcome::Nothing),
        }
    }

    /// Rebuilds the shards of `addr` missing from their nodes (in every
    /// live layout version) from the others.
    pub async fn repair_shards(&self, addr: &Hash, code: Placement) -> Result<Outcome> {
        let layout = self.system.layout();
        let targets: BTreeSet<(NodeId, usize)> = placements(&layout, addr, code)?
            .iter()
            .flat_map(|p| p.nodes.iter().enumerate().map(|(i, n)| (*n, i)))
            .collect();
        let mut by_node: BTreeMap<NodeId, Vec<u8>> = BTreeMap::new();
        for (n, i) in targets {
            by_node.entry(n).or_default().push(i as u8);
        }
        let mut missing: Vec<(NodeId, u8)> = Vec::new();
        let mut errors = Vec::new();
        for (node, indices) in by_node {
            match self
                .call_bounded(
                    &node,
                    BlockRpc::MissingShards {
                        addr: *addr,
                        indices,
                    },
                )
                .await
            {
                Ok(BlockRpc::MissingShardsReply(m)) => {
                    missing.extend(m.into_iter().map(|i| (node, i)))
                }
                Ok(other) => errors.push(format!("{node:?}: {other:?}")),
                Err(e) => errors.push(format!("{node:?}: {e}")),
            }
        }
        let mut outcome = Outcome::Nothing;
        if !missing.is_empty() {
            let (block, content, _) = self.get_shards(addr, code).await?;
            let shards = blocking(move || ec::encode(&block, content, code))
                .await?
                .map_err(Error::Ec)?;
            for (node, i) in missing {
                let bytes = shards[i as usize].to_bytes();
                match self.put_shard_to(&node, addr, i, bytes).await {
                    Ok(()) => {
                        debug!("shard {i} of {addr:?} rebuilt on {node:?}");
                        outcome = Outcome::Fetched
                    }
                    Err(e) => errors.push(format!("shard {i} to {node:?}: {e}")),
                }
            }
        }
        if !errors.is_empty() {
            return Err(Error::Unavailable {
                hash: *addr,
                errors,
            });
        }
        Ok(outcome)
    }

    /// A small background call to `node`, bounded by
    /// [`BLOCK_READ_TIMEOUT`] (a node cut off keeps its connection open
    /// and answers nothing).
    pub(crate) async fn call_bounded(
        &self,
        node: &NodeId,
        msg: BlockRpc,
    ) -> std::result::Result<BlockRpc, String> {
        let call = async {
            self.system.ensure_connected(node).await;
            self.endpoint.call(node, msg, Priority::Background).await
        };
        match tokio::time::timeout(BLOCK_READ_TIMEOUT, call).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timeout".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_rpc::layout::EcCode;

    #[test]
    fn stored_shards_survive_a_zone_only_with_data_shards_outside_each_zone() {
        let code = EcCode::new(2, 1).unwrap().into();
        assert!(survives_a_zone(["a", "b", "c"].into_iter(), code));
        // Two of three stored: losing either zone leaves one shard.
        assert!(!survives_a_zone(["a", "b"].into_iter(), code));
        // The late shard of zone c hedged to another node of zone c counts
        // as its own; hedged to zone a, it does not protect against a's loss.
        assert!(survives_a_zone(["a", "b", "c"].into_iter(), code));
        assert!(!survives_a_zone(["a", "b", "a"].into_iter(), code));
        let code = EcCode::new(4, 2).unwrap().into();
        assert!(survives_a_zone(
            ["a", "a", "b", "b", "c", "c"].into_iter(),
            code
        ));
        assert!(!survives_a_zone(
            ["a", "a", "a", "b", "c", "c"].into_iter(),
            code
        ));
        assert!(!survives_a_zone(
            ["a", "a", "b", "c", "c"].into_iter(),
            code
        ));
    }
}
