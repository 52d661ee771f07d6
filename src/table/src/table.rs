//! A replicated table: quorum writes and reads with read repair, and the
//! handler that serves the other replicas.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use garage_net::{Endpoint, EndpointHandler, NetError, NodeId, Priority};
use garage_rpc::layout::LayoutVersion;
use garage_rpc::quorum::{call_quorum, QuorumError, Strategy};
use garage_rpc::system::System;
use garage_util::crdt::Crdt;
use serde_bytes::ByteBuf;
use tracing::{debug, warn, Instrument};

use crate::data::TableData;
use crate::encoding::{self, tree_key};
use crate::error::{off_runtime, Error, Result};
use crate::merkle;
use crate::replication::Replication;
use crate::rpc::TableRpc;
use crate::schema::{Entry, PartitionKey, Removal, TableSchema};

/// Entries by tree key.
type ByKey<E> = BTreeMap<Vec<u8>, E>;

/// How long a quorum operation waits for its answers.
pub const TABLE_RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one call of anti-entropy or of the GC waits for its answer.
pub const TABLE_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Entries per range request when `get_range` has to fetch more.
const RANGE_BATCH: usize = 1000;
/// How long a write to a fully replicated table waits for the nodes
/// beyond its quorum (see [`Replication::Full`]).
pub const FULL_WRITE_WAIT: Duration = Duration::from_secs(3);

pub struct Table<F: TableSchema> {
    pub system: Arc<System>,
    pub data: Arc<TableData<F>>,
    pub tuning: crate::tuning::Tuning,
    pub(crate) endpoint: Arc<Endpoint<TableRpc<F>, Table<F>>>,
    /// A fully replicated table's copy here was brought up to a read
    /// quorum's since this process started ([`Table::catch_up`]); until
    /// then its reads go to a quorum. Always true for a sharded table.
    caught_up: AtomicBool,
    /// When this process opened the table (see [`CATCH_UP_WAIT`]).
    opened: Instant,
}

/// How long after a start reads of a fully replicated table not yet
/// caught up wait for a quorum (its peers may still be connecting),
/// retrying; past it, a read asks a quorum once and answers from this
/// node's copy when none answers (a node cut off since its start).
const CATCH_UP_WAIT: Duration = Duration::from_secs(10);

/// How long one quorum attempt of a read not yet caught up may take.
const UNCAUGHT_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// The pause between two quorum attempts of a read not yet caught up.
const UNCAUGHT_RETRY: Duration = Duration::from_millis(100);

/// What a range read returns, and from where.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ranged {
    /// Live entries.
    Live,
    /// Tombstones too.
    WithTombstones,
    /// Tombstones too, from a quorum even where this node holds
    /// everything ([`Table::catch_up`]).
    CatchUp,
}

impl<F: TableSchema> Table<F> {
    /// Opens the table's trees and registers its endpoint. Its workers are
    /// started by [`Table::spawn_workers`].
    pub fn new(schema: F, db: garage_db::Db, system: Arc<System>) -> Result<Arc<Self>> {
        Self::with_tuning(schema, db, system, crate::tuning::Tuning::from_env())
    }

    /// Gives the table the compare-and-set registers its entries have
    /// ([`TableSchema::register_of`]): its tombstone GC then empties an
    /// entry's register before collecting it. Once; later calls are no-ops.
    pub fn use_registers(&self, registers: Arc<crate::cas::CasRegisters>) {
        let _ = self.data.registers.set(registers);
    }

    pub fn with_tuning(
        schema: F,
        db: garage_db::Db,
        system: Arc<System>,
        tuning: crate::tuning::Tuning,
    ) -> Result<Arc<Self>> {
        let data = TableData::new(schema, db)?;
        let sys = system.clone();
        let gate = move || sys.feature_allowed(&garage_rpc::system::versions::COMPRESSED_ENTRIES);
        // (A new table's gate is unset: this cannot fail.)
        let _ = data.store_compact.set(Box::new(gate));
        let endpoint = system
            .netapp
            .endpoint::<TableRpc<F>, Table<F>>(&format!("garage_table/{}", F::TABLE_NAME));
        let table = Arc::new(Self {
            system: system.clone(),
            data,
            tuning,
            endpoint,
            caught_up: AtomicBool::new(F::REPLICATION != Replication::Full),
            opened: Instant::now(),
        });
        table.endpoint.set_handler(table.clone());
        system.register_table(F::TABLE_NAME);
        Ok(table)
    }

    /// One call to `node`, bounded by [`TABLE_CALL_TIMEOUT`]: a sync pass
    /// or a GC round waiting on an answer that never comes (the network's
    /// own timeout is minutes) would hold a layout change that long.
    pub(crate) async fn call(&self, node: &NodeId, msg: TableRpc<F>) -> Result<TableRpc<F>> {
        let call = async {
            self.system.ensure_connected(node).await;
            self.endpoint.call(node, msg, Priority::Normal).await
        };
        let res = tokio::time::timeout(TABLE_CALL_TIMEOUT, call)
            .await
            .unwrap_or(Err(NetError::Timeout(TABLE_CALL_TIMEOUT)));
        match res {
            Ok(TableRpc::Error(msg)) => Err(Error::Remote {
                node: format!("{node:?}"),
                msg,
            }),
            Ok(r) => Ok(r),
            Err(e) => Err(Error::Net {
                node: format!("{node:?}"),
                msg: e.to_string(),
            }),
        }
    }

    // ---- Writes ----

    /// Inserts (merges) `entry`: returns once a write quorum of every live
    /// layout version's nodes for its partition has it stored.
    pub async fn insert(&self, entry: &F::E) -> Result<()> {
        self.insert_many(std::slice::from_ref(entry)).await
    }

    /// Inserts many entries, in one request per destination node; returns
    /// once every entry has a write quorum in each of its node sets.
    pub async fn insert_many(&self, entries: &[F::E]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let span = tracing::debug_span!(
            "table_insert",
            otel.name = format!("{} insert", F::TABLE_NAME),
            table = F::TABLE_NAME,
            entries = entries.len(),
            otel.status_code = tracing::field::Empty,
        );
        quorum_op::<F, _>(span, "write", self.insert_many_inner(entries)).await
    }

    /// Inserts entries that each carry a new write meant to come after
    /// every write acknowledged before it (a PUT, a delete marker): a
    /// replica that holds a newer write refuses the entry
    /// ([`TableSchema::newer_than`]) and reports that write's stamp.
    /// Returns, once a write quorum of each entry's node sets has
    /// answered, for each entry `None` if every answer so far stored it,
    /// else the largest stamp reported: the caller must then stamp its
    /// write again above it and insert it again before acknowledging
    /// anything (see doc/ordering.md). The stamps reported are observed
    /// by this node's hybrid clock.
    ///
    /// Why this orders sequential writes: a write acknowledged before this
    /// one started is stored at a write quorum of every live layout
    /// version, which intersects the quorum this one waits for; so at
    /// least one answer comes from a replica holding it, and refuses
    /// this entry if it sorts before it.
    pub async fn insert_ordered(&self, entries: &[F::E]) -> Result<Vec<Option<u64>>> {
        if entries.is_empty() {
            return Ok(vec![]);
        }
        let span = tracing::debug_span!(
            "table_insert",
            otel.name = format!("{} insert", F::TABLE_NAME),
            table = F::TABLE_NAME,
            entries = entries.len(),
            ordered = true,
            otel.status_code = tracing::field::Empty,
        );
        let refused = quorum_op::<F, _>(span, "write", self.insert_inner(entries, true)).await?;
        for ts in refused.iter().flatten() {
            garage_util::time::observe(*ts);
        }
        Ok(refused)
    }

    async fn insert_many_inner(&self, entries: &[F::E]) -> Result<()> {
        self.insert_inner(entries, false).await.map(|_| ())
    }

    async fn insert_inner(&self, entries: &[F::E], ordered: bool) -> Result<Vec<Option<u64>>> {
        let guard = self.system.start_write("table write");
        // For each entry, its node sets; for each node, what to send it
        // (with each entry's index).
        let mut sets_of: Vec<Vec<Vec<NodeId>>> = Vec::with_capacity(entries.len());
        let mut per_node: BTreeMap<NodeId, (Vec<usize>, Vec<ByteBuf>)> = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            let partition = LayoutVersion::partition_of(e.partition_key().hash().as_slice());
            let sets = F::REPLICATION.write_sets(&guard.layout, partition);
            if sets.is_empty() {
                return Err(Error::NoNodes);
            }
            let bytes = encoding::encode(e);
            let mut nodes: Vec<NodeId> = sets.iter().flatten().copied().collect();
            nodes.sort();
            nodes.dedup();
            for n in nodes {
                let (idx, batch) = per_node.entry(n).or_default();
                idx.push(i);
                batch.push(ByteBuf::from(bytes.clone()));
            }
            sets_of.push(sets);
        }
        let request = move |batch: Vec<ByteBuf>| match ordered {
            true => TableRpc::UpdateOrdered(batch),
            false => TableRpc::Update(batch),
        };

        // Every call runs to its end even once the quorum is reached, so
        // that all replicas get the write.
        let mut pending = FuturesUnordered::new();
        for (node, (idx, batch)) in per_node {
            let endpoint = self.endpoint.clone();
            let system = self.system.clone();
            let handle = tokio::spawn(
                async move {
                    system.ensure_connected(&node).await;
                    let mut r = endpoint
                        .call(&node, request(batch.clone()), Priority::Normal)
                        .await;
                    // A connection replaced under the call (both sides dialed at
                    // once) or not yet up: one more try on the new connection.
                    if matches!(
                        r,
                        Err(NetError::ConnectionClosed | NetError::NotConnected(_))
                    ) {
                        system.ensure_connected(&node).await;
                        r = endpoint.call(&node, request(batch), Priority::Normal).await;
                    }
                    (node, idx, r)
                }
                .in_current_span(),
            );
            pending.push(handle);
        }
        let mut ok: Vec<NodeId> = Vec::new();
        let mut refused: Vec<Option<u64>> = vec![None; entries.len()];
        let mut errors: Vec<(NodeId, String)> = Vec::new();
        let satisfied = |ok: &[NodeId]| {
            sets_of.iter().all(|sets| {
                sets.iter().all(|set| {
                    set.iter().filter(|n| ok.contains(n)).count() >= self.write_quorum(set.len())
                })
            })
        };
        let deadline = tokio::time::Instant::now() + TABLE_RPC_TIMEOUT;
        // A fully replicated table also waits (a little) for the nodes
        // beyond the quorum, so that when a change of a key or bucket
        // returns, every node that is reachable has it.
        let mut quorum_at: Option<tokio::time::Instant> = None;
        loop {
            let until = match quorum_at {
                Some(t) => (t + FULL_WRITE_WAIT).min(deadline),
                None => deadline,
            };
            match tokio::time::timeout_at(until, pending.next()).await {
                Err(_) | Ok(None) if quorum_at.is_some() => return Ok(refused),
                Err(_) | Ok(None) => {
                    let timed_out = !pending.is_empty();
                    let needed = sets_of
                        .iter()
                        .flatten()
                        .map(|set| self.write_quorum(set.len()))
                        .max()
                        .unwrap_or(0);
                    return Err(Error::Quorum(QuorumError {
                        needed,
                        ok: ok.len(),
                        timed_out,
                        errors,
                    }));
                }
                Ok(Some(Ok((node, _, Ok(TableRpc::Ok))))) => ok.push(node),
                // An answer that refused some entries still counts for the
                // quorum: what matters is that a quorum has been asked.
                Ok(Some(Ok((node, idx, Ok(TableRpc::Refused(r)))))) if r.len() == idx.len() => {
                    for (i, ts) in idx.into_iter().zip(r) {
                        if ts > refused[i] {
                            refused[i] = ts;
                        }
                    }
                    ok.push(node)
                }
                Ok(Some(Ok((node, _, Ok(TableRpc::Error(e)))))) => errors.push((node, e)),
                Ok(Some(Ok((node, _, Ok(other))))) => {
                    errors.push((node, format!("unexpected answer {}", other.kind())))
                }
                Ok(Some(Ok((node, _, Err(e))))) => errors.push((node, e.to_string())),
                Ok(Some(Err(e))) => warn!(table = F::TABLE_NAME, "write task failed: {e}"),
            }
            if quorum_at.is_none() && satisfied(&ok) {
                if F::REPLICATION == Replication::Sharded {
                    return Ok(refused);
                }
                quorum_at = Some(tokio::time::Instant::now());
            }
        }
    }

    /// Acknowledgements a write needs from a node set of size `n`.
    fn write_quorum(&self, n: usize) -> usize {
        match F::REPLICATION {
            Replication::Sharded => self.system.write_quorum().min(n),
            Replication::Full => self.system.quorums(n).0,
        }
    }

    /// Answers a read needs from a node set of size `n`.
    fn read_quorum(&self, n: usize) -> usize {
        match F::REPLICATION {
            Replication::Sharded => self.system.read_quorum(),
            Replication::Full => self.system.quorums(n).1,
        }
    }

    // ---- Reads ----

    /// The nodes to read `partition_key` from, nearest first.
    fn read_nodes(&self, partition_key: &F::P) -> Vec<NodeId> {
        let layout = self.system.layout();
        let partition = LayoutVersion::partition_of(partition_key.hash().as_slice());
        let nodes = F::REPLICATION.read_nodes(&layout, self.system.write_quorum(), partition);
        self.system.nodes_by_distance(&nodes)
    }

    /// Sends `msg()` to a read quorum of `p`'s replicas, nearest first
    /// (the next replica for each failure), and returns the answers that
    /// `extract` accepts.
    async fn quorum_read<R: Send>(
        &self,
        p: &F::P,
        msg: impl Fn() -> TableRpc<F>,
        extract: fn(TableRpc<F>) -> std::result::Result<R, TableRpc<F>>,
    ) -> Result<Vec<(NodeId, R)>> {
        let span = tracing::debug_span!(
            "table_read",
            otel.name = format!("{} read", F::TABLE_NAME),
            table = F::TABLE_NAME,
            otel.status_code = tracing::field::Empty,
        );
        quorum_op::<F, _>(span, "read", self.quorum_read_inner(p, msg, extract)).await
    }

    async fn quorum_read_inner<R: Send>(
        &self,
        p: &F::P,
        msg: impl Fn() -> TableRpc<F>,
        extract: fn(TableRpc<F>) -> std::result::Result<R, TableRpc<F>>,
    ) -> Result<Vec<(NodeId, R)>> {
        let nodes = self.read_nodes(p);
        if nodes.is_empty() {
            return Err(Error::NoNodes);
        }
        let answers = call_quorum(
            &nodes,
            self.read_quorum(nodes.len()),
            Strategy::NearestFirst,
            TABLE_RPC_TIMEOUT,
            |node| {
                let msg = msg();
                async move {
                    match self.call(&node, msg).await {
                        Ok(r) => extract(r)
                            .map_err(|other| format!("unexpected answer {}", other.kind())),
                        Err(e) => Err(e.to_string()),
                    }
                }
            },
        )
        .await?;
        Ok(answers)
    }

    /// Reads one entry. Tombstones are returned as they are.
    ///
    /// A sharded table reads from a quorum ([`Table::get_quorum`]). A fully
    /// replicated one answers from this node's copy, with no round trip,
    /// and asks a quorum only when its copy lacks the entry (a node that
    /// joined recently, or a write that has not reached it yet): so a
    /// local answer may lag behind a change acknowledged elsewhere, by the
    /// time the change takes to reach this node (see
    /// [`Replication::Full`]); callers that must not lag use
    /// [`Table::get_quorum`]. Until this node's copy has caught up with a
    /// quorum after a start ([`Table::catch_up`]), it asks a quorum first:
    /// a node restarted after being down does not answer with an entry
    /// changed meanwhile (a revoked key) for the seconds before
    /// anti-entropy reaches it. Without a quorum (see [`CATCH_UP_WAIT`]),
    /// it answers from its copy.
    pub async fn get(&self, p: &F::P, s: &F::S) -> Result<Option<F::E>> {
        if F::REPLICATION == Replication::Full {
            if !self.caught_up() {
                if let Some(e) = self.until_caught_up(|| self.get_quorum(p, s)).await {
                    return Ok(e);
                }
            }
            if let Some(e) = self.get_local(p, s).await? {
                return Ok(Some(e));
            }
        }
        self.get_quorum(p, s).await
    }

    /// A quorum's answer to `read`, for a fully replicated table not
    /// caught up yet: tried again while [`CATCH_UP_WAIT`] after the start
    /// has not passed (peers still connecting) and the copy has not caught
    /// up meanwhile; once past it, tried once. `None`: no quorum
    /// answered, the caller answers from this node's copy.
    async fn until_caught_up<T, Fut>(&self, read: impl Fn() -> Fut) -> Option<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let deadline = self.opened + CATCH_UP_WAIT;
        // Bounded by the deadline: at most CATCH_UP_WAIT / UNCAUGHT_RETRY
        // attempts, each at most UNCAUGHT_READ_TIMEOUT.
        loop {
            match tokio::time::timeout(UNCAUGHT_READ_TIMEOUT, read()).await {
                Ok(Ok(v)) => return Some(v),
                Ok(Err(e)) => debug!(table = F::TABLE_NAME, "no quorum before catching up: {e}"),
                Err(_) => debug!(
                    table = F::TABLE_NAME,
                    "no quorum within {UNCAUGHT_READ_TIMEOUT:?} before catching up"
                ),
            }
            if Instant::now() >= deadline || self.caught_up() {
                return None;
            }
            tokio::time::sleep(UNCAUGHT_RETRY).await;
        }
    }

    /// Whether this node's copy may answer reads alone (see
    /// [`Table::catch_up`]).
    pub fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    /// Makes this copy not caught up, as after a start (tests).
    #[cfg(test)]
    pub(crate) fn forget_catch_up(&self) {
        self.caught_up.store(false, Ordering::Release)
    }

    /// Brings this node's copy of a fully replicated table up to a read
    /// quorum's, once after start: every partition it holds is read from
    /// a quorum, tombstones included, and read repair writes here what
    /// another replica has newer. Until it succeeds, reads go to a quorum
    /// ([`Table::get`]). Run by the table's sync worker before its pass
    /// (anti-entropy pushes what a replica lacks; this pulls). Returns
    /// how many entries were read.
    pub(crate) async fn catch_up(&self) -> Result<usize> {
        if self.caught_up() {
            return Ok(0);
        }
        let mut read = 0;
        let mut from: Option<Vec<u8>> = None;
        // One round per partition key held (fully replicated tables have
        // one); bounded like the range loop.
        for _ in 0..1_000_000 {
            let Some(p) = self.data.first_partition_from(from.as_deref())? else {
                break;
            };
            let merged = self
                .range(&p, None, None, usize::MAX, false, Ranged::CatchUp)
                .await?;
            read += merged.len();
            // Here before this copy answers alone (read repair is sent
            // in the background).
            let encoded: Vec<Vec<u8>> = merged.iter().map(encoding::encode).collect();
            self.data.update_many_grouped(&encoded).await?;
            match crate::data::prefix_end(p.hash().as_slice()) {
                Some(end) => from = Some(end),
                None => break,
            }
        }
        self.caught_up.store(true, Ordering::Release);
        Ok(read)
    }

    /// This node's copy of an entry, if it has one.
    pub async fn get_local(&self, p: &F::P, s: &F::S) -> Result<Option<F::E>> {
        let read = |data: &TableData<F>, p: &F::P, s: &F::S| match data.read_entry(p, s)? {
            Some(b) => Ok(Some(data.decode_entry(&b)?)),
            None => Ok(None),
        };
        // One key: microseconds on LMDB, cheaper than a trip through the
        // blocking pool (this runs several times per S3 request: key,
        // bucket, alias).
        if self.data.db.reads_never_wait() {
            return read(&self.data, p, s);
        }
        let data = self.data.clone();
        let (p, s) = (p.clone(), s.clone());
        off_runtime(move || read(&data, &p, &s)).await
    }

    /// Reads one entry from a read quorum and merges the answers; replicas
    /// that answered something older get the merge back (read repair).
    /// Tombstones are returned as they are.
    pub async fn get_quorum(&self, p: &F::P, s: &F::S) -> Result<Option<F::E>> {
        let answers = self
            .quorum_read(
                p,
                || TableRpc::ReadEntry(p.clone(), s.clone()),
                |r| match r {
                    TableRpc::ReadEntryResponse(v) => Ok(v),
                    other => Err(other),
                },
            )
            .await?;
        let mut merged: Option<F::E> = None;
        let mut decoded: Vec<(NodeId, Option<F::E>)> = Vec::new();
        for (node, v) in answers {
            let e = match v {
                Some(b) => Some(self.data.decode_entry(&b)?),
                None => None,
            };
            if let Some(e) = &e {
                match &mut merged {
                    Some(m) => m.merge(e),
                    None => merged = Some(e.clone()),
                }
            }
            decoded.push((node, e));
        }
        if let Some(m) = &merged {
            let behind: Vec<NodeId> = decoded
                .iter()
                .filter(|(_, e)| e.as_ref() != Some(m))
                .map(|(n, _)| *n)
                .collect();
            self.repair(behind, vec![m.clone()]);
        }
        Ok(merged)
    }

    /// Sends `entries` to `nodes` in the background.
    fn repair(&self, nodes: Vec<NodeId>, entries: Vec<F::E>) {
        if nodes.is_empty() || entries.is_empty() {
            return;
        }
        let batch: Vec<ByteBuf> = entries
            .iter()
            .map(|e| ByteBuf::from(encoding::encode(e)))
            .collect();
        for node in nodes {
            let endpoint = self.endpoint.clone();
            let batch = batch.clone();
            tokio::spawn(
                async move {
                    debug!(
                        table = F::TABLE_NAME,
                        "read repair of {} entries on {node:?}",
                        batch.len()
                    );
                    if let Err(e) = endpoint
                        .call(&node, TableRpc::Update(batch), Priority::Normal)
                        .await
                    {
                        debug!(table = F::TABLE_NAME, "read repair on {node:?} failed: {e}");
                    }
                }
                .in_current_span(),
            );
        }
    }

    /// Whether this node's copy of a fully replicated table is complete
    /// enough to answer range reads: the node has a role in the layout
    /// version that reads use, so it has been synced with the others (a
    /// node that just joined reads from a quorum until then).
    fn holds_everything(&self) -> bool {
        F::REPLICATION == Replication::Full
            && self
                .system
                .layout()
                .read_version(self.system.write_quorum())
                .roles
                .contains_key(&self.system.id())
    }

    /// Up to `limit` entries of `p` from `start` in this node's copy,
    /// tombstones included, in order.
    async fn get_range_local(
        &self,
        p: &F::P,
        start: Option<&F::S>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<F::E>> {
        let data = self.data.clone();
        let (p, start) = (p.clone(), start.cloned());
        off_runtime(move || {
            data.read_range(&p, start.as_ref(), limit, reverse)?
                .iter()
                .map(|b| data.decode_entry(b))
                .collect()
        })
        .await
    }

    /// One round of a range read: up to `limit` entries of `p` from
    /// `start`, merged over a read quorum, tombstones included, in order.
    async fn get_range_round(
        &self,
        p: &F::P,
        start: Option<&F::S>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<F::E>> {
        let answers = self
            .quorum_read(
                p,
                || TableRpc::ReadRange {
                    partition_key: p.clone(),
                    start: start.cloned(),
                    limit,
                    reverse,
                },
                |r| match r {
                    TableRpc::Entries(v) => Ok(v),
                    other => Err(other),
                },
            )
            .await?;
        // Merge by tree key; remember what each node had.
        let mut merged: BTreeMap<Vec<u8>, F::E> = BTreeMap::new();
        let mut had: Vec<(NodeId, ByKey<F::E>)> = Vec::new();
        for (node, entries) in answers {
            let mut mine = BTreeMap::new();
            for b in entries {
                let e = self.data.decode_entry(&b)?;
                let k = tree_key(e.partition_key(), e.sort_key());
                match merged.get_mut(&k) {
                    Some(m) => m.merge(&e),
                    None => {
                        merged.insert(k.clone(), e.clone());
                    }
                }
                mine.insert(k, e);
            }
            had.push((node, mine));
        }
        // Only the first `limit` merged keys are certain: a node's answer
        // stops at its own `limit`-th key.
        let keys: Vec<Vec<u8>> = if reverse {
            merged.keys().rev().take(limit).cloned().collect()
        } else {
            merged.keys().take(limit).cloned().collect()
        };
        for (node, mine) in had {
            let behind: Vec<F::E> = keys
                .iter()
                .filter(|k| mine.get(*k) != merged.get(*k))
                .filter(|k| {
                    // A node that stopped before this key did not say it
                    // lacks it.
                    let last = if reverse {
                        mine.keys().next()
                    } else {
                        mine.keys().next_back()
                    };
                    mine.len() < limit
                        || last.is_some_and(|l| if reverse { *k >= l } else { *k <= l })
                })
                .map(|k| merged[k].clone())
                .collect();
            self.repair(vec![node], behind);
        }
        Ok(keys
            .into_iter()
            .map(|k| merged.remove(&k).expect("merged key"))
            .collect())
    }

    /// Up to `limit` live (non-tombstone) entries of partition key `p` that
    /// match `filter`, from `start` (included) in sort-key order, or down
    /// from it when `reverse`. Reads as many rounds as needed.
    pub async fn get_range(
        &self,
        p: &F::P,
        start: Option<F::S>,
        filter: Option<F::Filter>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<F::E>> {
        self.range(p, start, filter, limit, reverse, Ranged::Live)
            .await
    }

    /// Every entry of partition key `p` in sort-key order, tombstones
    /// included, merged over a read quorum with read repair: for items
    /// split over several entries of one partition key (see
    /// [`crate::cascade`]), where a tombstone says the item is deleted.
    /// More than `limit` entries is an error ([`Error::TooManyEntries`]),
    /// never a silently cut item.
    pub async fn get_partition(&self, p: &F::P, limit: usize) -> Result<Vec<F::E>> {
        let all = self
            .range(
                p,
                None,
                None,
                limit.saturating_add(1),
                false,
                Ranged::WithTombstones,
            )
            .await?;
        if all.len() > limit {
            return Err(Error::TooManyEntries { limit });
        }
        Ok(all)
    }

    /// The entries of partition `p` in this node's copy, tombstones
    /// included, when this node is one of the partition's read replicas
    /// (`None` otherwise): no round trip. The copy may lag behind the
    /// quorum, so this serves only data that never changes once complete
    /// and that its reader checks complete (a complete version's block
    /// list, see `garage_model::version_table::read_version_near`);
    /// anything else reads a quorum ([`Table::get_partition`]).
    pub async fn get_partition_local(&self, p: &F::P, limit: usize) -> Result<Option<Vec<F::E>>> {
        Ok(self
            .get_partitions_local(std::slice::from_ref(p), limit)
            .await?
            .pop()
            .flatten())
    }

    /// [`Table::get_partition_local`] for several partition keys, in one
    /// pass over the database off the runtime (10 000 parts of an upload:
    /// one task, not 10 000): `None` for a key whose partition this node
    /// does not hold.
    pub async fn get_partitions_local(
        &self,
        ps: &[F::P],
        limit: usize,
    ) -> Result<Vec<Option<Vec<F::E>>>> {
        let me = self.system.id();
        let held: Vec<bool> = ps
            .iter()
            .map(|p| self.read_nodes(p).contains(&me))
            .collect();
        let data = self.data.clone();
        let ps = ps.to_vec();
        off_runtime(move || {
            ps.iter()
                .zip(held)
                .map(|(p, held)| {
                    if !held {
                        return Ok(None);
                    }
                    let raw = data.read_range(p, None, limit.saturating_add(1), false)?;
                    if raw.len() > limit {
                        return Err(Error::TooManyEntries { limit });
                    }
                    raw.iter()
                        .map(|b| data.decode_entry(b))
                        .collect::<Result<Vec<_>>>()
                        .map(Some)
                })
                .collect()
        })
        .await
    }

    /// The range reads' loop. A fully replicated table not caught up yet
    /// reads a quorum, and this node's copy when no quorum answers.
    async fn range(
        &self,
        p: &F::P,
        start: Option<F::S>,
        filter: Option<F::Filter>,
        limit: usize,
        reverse: bool,
        what: Ranged,
    ) -> Result<Vec<F::E>> {
        let tombstones = what != Ranged::Live;
        let quorum = what == Ranged::CatchUp;
        let mut out = Vec::new();
        let mut start = start;
        let mut skip_first = false;
        let batch = limit.clamp(1, RANGE_BATCH);
        let holds = self.holds_everything();
        let local = holds && !quorum && self.caught_up();
        let fallback = holds && !quorum && !local;
        // Each round moves past at least one entry, and the partition is
        // finite: the loop ends. The round count bound is a safety net.
        for _ in 0..1_000_000 {
            if out.len() >= limit {
                break;
            }
            let n = batch + skip_first as usize;
            let round = if local {
                self.get_range_local(p, start.as_ref(), n, reverse).await?
            } else if fallback {
                let fresh = self
                    .until_caught_up(|| self.get_range_round(p, start.as_ref(), n, reverse))
                    .await;
                match fresh {
                    Some(r) => r,
                    None => self.get_range_local(p, start.as_ref(), n, reverse).await?,
                }
            } else {
                self.get_range_round(p, start.as_ref(), n, reverse).await?
            };
            let got = round.len();
            let mut last = None;
            for (i, e) in round.into_iter().enumerate() {
                if i == 0 && skip_first && Some(e.sort_key()) == start.as_ref() {
                    continue;
                }
                last = Some(e.sort_key().clone());
                if (e.is_tombstone() && !tombstones)
                    || filter.as_ref().is_some_and(|f| !F::matches_filter(&e, f))
                {
                    continue;
                }
                out.push(e);
                if out.len() >= limit {
                    break;
                }
            }
            if got < batch + skip_first as usize || last.is_none() {
                break;
            }
            start = last;
            skip_first = true;
        }
        Ok(out)
    }

    /// Starts the table's workers: Merkle updater, anti-entropy, GC and
    /// insert queue.
    ///
    /// Each registers with the node's worker registry (in this order, so
    /// `garage worker list` numbers them the same on every start); the
    /// queue lengths are read from the database when asked.
    pub fn spawn_workers(
        self: &Arc<Self>,
        must_exit: &tokio::sync::watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        use garage_util::worker::runner;
        let workers = &self.system.workers;
        let merkle = runner::spawn(
            workers,
            merkle::MerkleUpdater {
                data: self.data.clone(),
            },
            must_exit.clone(),
        );
        let gc = runner::spawn(
            workers,
            crate::gc::GcWorker {
                table: self.clone(),
            },
            must_exit.clone(),
        );
        let queue = runner::spawn(
            workers,
            crate::queue::InsertQueueWorker {
                table: self.clone(),
            },
            must_exit.clone(),
        );
        let sync = runner::spawn(
            workers,
            crate::sync::SyncWorker::new(self.clone()),
            must_exit.clone(),
        );
        vec![merkle, gc, queue, sync]
    }
}

#[async_trait::async_trait]
impl<F: TableSchema> EndpointHandler<TableRpc<F>> for Table<F> {
    async fn handle(&self, msg: TableRpc<F>, _from: NodeId) -> TableRpc<F> {
        let data = self.data.clone();
        // Writes go through the database's group commit (one transaction
        // for the writes that arrive meanwhile); one-key reads run here when
        // the engine never makes them wait; the rest on the blocking pool.
        let res = match msg {
            TableRpc::Update(entries) => Ok(handle_update(&data, entries).await),
            TableRpc::UpdateOrdered(entries) => Ok(handle_update_ordered(&data, entries).await),
            msg @ TableRpc::ReadEntry(..) if data.db.reads_never_wait() => {
                Ok(handle_local(&data, msg))
            }
            msg => tokio::task::spawn_blocking(move || handle_local(&data, msg)).await,
        };
        match res {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => TableRpc::Error(e.to_string()),
            Err(e) => TableRpc::Error(format!("table handler failed: {e}")),
        }
    }
}

async fn handle_update<F: TableSchema>(
    data: &Arc<TableData<F>>,
    entries: Vec<ByteBuf>,
) -> Result<TableRpc<F>> {
    metrics::counter!("table_items_received_total", "table_name" => F::TABLE_NAME)
        .increment(entries.len() as u64);
    data.update_many_grouped(&entries).await?;
    Ok(TableRpc::Ok)
}

async fn handle_update_ordered<F: TableSchema>(
    data: &Arc<TableData<F>>,
    entries: Vec<ByteBuf>,
) -> Result<TableRpc<F>> {
    metrics::counter!("table_items_received_total", "table_name" => F::TABLE_NAME)
        .increment(entries.len() as u64);
    let refused = data.update_many_ordered_grouped(&entries).await?;
    Ok(if refused.iter().any(|r| r.is_some()) {
        metrics::counter!("table_ordered_refusals_total", "table_name" => F::TABLE_NAME)
            .increment(refused.iter().filter(|r| r.is_some()).count() as u64);
        TableRpc::Refused(refused)
    } else {
        TableRpc::Ok
    })
}

/// Serves a request from the local store (blocking: database calls).
fn handle_local<F: TableSchema>(data: &TableData<F>, msg: TableRpc<F>) -> Result<TableRpc<F>> {
    Ok(match msg {
        TableRpc::ReadEntry(p, s) => {
            TableRpc::ReadEntryResponse(data.read_entry(&p, &s)?.map(ByteBuf::from))
        }
        TableRpc::ReadRange {
            partition_key,
            start,
            limit,
            reverse,
        } => TableRpc::Entries(
            data.read_range(&partition_key, start.as_ref(), limit, reverse)?
                .into_iter()
                .map(ByteBuf::from)
                .collect(),
        ),
        TableRpc::GetMerkleNodes {
            partition,
            prefixes,
        } => TableRpc::MerkleNodes(
            prefixes
                .iter()
                .map(|p| merkle::read_node(&data.merkle_tree, partition, p))
                .collect::<Result<Vec<_>>>()?,
        ),
        TableRpc::DeleteIfEqualHash(items) => {
            for (k, h) in items {
                // Only the GC sends these: every replica holds the tombstone.
                // One whose register this node's acceptor still holds a
                // value of stays: this node's own GC empties the register
                // first (the sender may not have known of it).
                let held = match data.store.get(&k)? {
                    Some(b) => data
                        .held_register(&crate::data::to_canonical(&k, b)?)?
                        .is_some(),
                    None => false,
                };
                if !held {
                    data.delete_if_equal_hash(&k, &h, Removal::Collected)?;
                }
            }
            TableRpc::Ok
        }
        other => TableRpc::Error(format!("not a request: {}", other.kind())),
    })
}

/// Runs a quorum operation inside `span`; a failure marks the span as an
/// error and counts in `table_quorum_errors_total{table_name, op}`.
async fn quorum_op<F: TableSchema, T>(
    span: tracing::Span,
    op: &'static str,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let res = fut.instrument(span.clone()).await;
    if res.is_err() {
        span.record("otel.status_code", "ERROR");
        metrics::counter!("table_quorum_errors_total", "table_name" => F::TABLE_NAME, "op" => op)
            .increment(1);
    }
    res
}
