//! Anti-entropy: each node pushes what it holds to the other nodes that
//! should hold it, comparing Merkle trees to send only what differs.
//!
//! Sync is push-only: a node sends the entries the other side lacks or has
//! in another state, and the other side does the same in its own pass, so
//! both converge. A pass covers every partition this node holds, towards
//! every node holding it in a live layout version; when it succeeds, the
//! node reports the layout version it synced (the `sync` tracker), which is
//! how a layout change finishes. A node that no longer holds a partition
//! pushes it to the new holders while a layout version that gave it the
//! partition is live (the layout change waits for that); once no live
//! version gives it the partition, it drops its copy without sending it
//! (a stale copy sent then would bring back entries deleted meanwhile,
//! whose tombstones the GC collected without this node).
//!
//! A pass runs at start, after every layout change, when a layout version
//! retires (so that partitions held only there are dropped at once), when
//! a peer comes back, and every `sync_interval` (see `tuning.rs`); a
//! failed pass is retried sooner, and resumes: a (partition, node) pair it
//! completed is skipped by the next pass for the same layout version as
//! long as that node has stayed up since (see [`Resume`]). Without that,
//! the passes of a large table under frequent faults kept starting over
//! and never finished, and neither did layout changes. A node slow or
//! down when a version retires keeps its stale copies longer: the
//! tombstone GC reaches such nodes too (see `gc.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_net::NodeId;
use garage_rpc::layout::{LayoutHistory, Tracker};
use garage_util::data::blake2sum;
use garage_util::worker::runner::{Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use serde_bytes::ByteBuf;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::data::TableData;
use crate::error::{off_runtime, Error, Result};
use crate::merkle::{self, MerkleNode};
use crate::rpc::TableRpc;
use crate::schema::{Removal, TableSchema};
use crate::table::Table;

/// Entries per Update request.
const PUSH_BATCH: usize = 256;
/// Merkle nodes asked per request.
const MERKLE_BATCH: usize = 256;
/// Wait after a failed pass before the next.
const RETRY_DELAY: Duration = Duration::from_secs(5);
/// Wait after a peer comes back, so that a burst of reconnections causes
/// one pass.
const DEBOUNCE: Duration = Duration::from_secs(1);

/// The wait before another pass when the catch-up after start failed.
const CATCH_UP_RETRY: Duration = Duration::from_secs(1);

/// A table's anti-entropy (`garage worker list`: "<table> sync"): for a
/// fully replicated table, first the catch-up with a read quorum after
/// start (`Table::catch_up`, tried every [`CATCH_UP_RETRY`] until it
/// succeeds); a pass at start, then every `sync_interval`, after a
/// layout change that needs one, and [`DEBOUNCE`] after a peer comes
/// back. A failed pass is tried
/// again after [`RETRY_DELAY`], resuming from the partitions it
/// completed; a pass that keeps failing holds a layout change: said at
/// the 3rd failure in a row, then every 20th.
pub(crate) struct SyncWorker<F: TableSchema> {
    table: Arc<Table<F>>,
    layouts: watch::Receiver<Arc<LayoutHistory>>,
    peers_up: watch::Receiver<u64>,
    /// The layout version the last successful pass synced, and the oldest
    /// live version it saw.
    last_synced_layout: u64,
    last_min_live: u64,
    /// Failed passes in a row.
    failures: u64,
    resume: Resume,
    /// The wait before the next periodic pass.
    delay: Duration,
}

impl<F: TableSchema> SyncWorker<F> {
    pub(crate) fn new(table: Arc<Table<F>>) -> Self {
        let layouts = table.system.subscribe_layout();
        let peers_up = table.system.subscribe_peers_up();
        Self {
            table,
            layouts,
            peers_up,
            last_synced_layout: 0,
            last_min_live: 0,
            failures: 0,
            resume: Resume::default(),
            delay: Duration::ZERO,
        }
    }
}

impl<F: TableSchema> Worker for SyncWorker<F> {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            format!("{} sync", F::TABLE_NAME),
            "compares Merkle trees with the other replicas and sends what they lack",
        )
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        let t = &self.table;
        // Pull first, once after start: until this copy caught up with a
        // quorum, reads of it ask a quorum (see `Table::catch_up`).
        if !t.caught_up() {
            match t.catch_up().await {
                Ok(0) => (),
                Ok(n) => info!(
                    table = F::TABLE_NAME,
                    "caught up with a read quorum after start ({n} entries read): reads answer from this node's copy again"
                ),
                Err(e) => {
                    debug!(
                        table = F::TABLE_NAME,
                        "cannot catch up with a read quorum yet (reads ask a quorum meanwhile): {e}"
                    );
                    // Peers are likely still connecting (the sync pass
                    // needs them too): again soon, or when one comes up.
                    self.delay = CATCH_UP_RETRY;
                    return Ok(Step::Idle);
                }
            }
        }
        let layout = t.system.layout();
        let target = sync_target(&layout);
        let stats = match t.sync_pass_resuming(&layout, &mut self.resume).await {
            Ok(stats) => stats,
            Err(e) => {
                self.failures += 1;
                if self.failures == 3 || self.failures % 20 == 0 {
                    warn!(
                        table = F::TABLE_NAME,
                        "sync pass at layout version {target} failed {} times in a row, retrying in {RETRY_DELAY:?} ({} partition syncs done so far kept): {e}",
                        self.failures,
                        self.resume.len()
                    );
                }
                return Err(format!("sync pass failed: {e}"));
            }
        };
        self.failures = 0;
        handle.set_progress(Some(format!(
            "last pass {} at layout version {target}: {} partitions, {} entries sent, {} dropped (partitions no longer held), {} partition syncs resumed from failed passes",
            garage_util::time::rfc3339(garage_util::time::now_msec()),
            stats.partitions,
            stats.entries_sent,
            stats.entries_offloaded,
            stats.resumed
        )));
        if stats.entries_sent > 0 || stats.entries_offloaded > 0 || stats.resumed > 0 {
            info!(
                table = F::TABLE_NAME,
                "sync pass done at layout version {target}: {} partitions, {} Merkle requests, {} entries sent, {} dropped (partitions no longer held), {} partition syncs done by failed passes skipped",
                stats.partitions, stats.merkle_requests, stats.entries_sent, stats.entries_offloaded, stats.resumed
            );
        }
        t.system.table_synced(F::TABLE_NAME, target);
        self.last_synced_layout = target;
        self.last_min_live = layout.min_live_version();
        self.delay = if target < layout.current().version {
            // Not every node has acked the newest version yet.
            RETRY_DELAY
        } else {
            t.tuning.sync_interval
        };
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        let sleep = tokio::time::sleep(self.delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => return,
                r = self.layouts.changed() => {
                    if r.is_err() {
                        // The node is exiting: the runner stops the worker.
                        std::future::pending::<()>().await
                    }
                    // Tracker changes gossip often: a pass only for a new
                    // version, for a version all nodes have now acked, or
                    // when a version retires (the partitions this node
                    // held only there are dropped at once, not at the
                    // next periodic pass).
                    let l = self.table.system.layout();
                    if sync_target(&l) > self.last_synced_layout
                        || l.current().version > self.last_synced_layout
                        || l.min_live_version() > self.last_min_live
                    {
                        return;
                    }
                }
                r = self.peers_up.changed() => {
                    if r.is_err() {
                        std::future::pending::<()>().await
                    }
                    tokio::time::sleep(DEBOUNCE).await;
                    return;
                }
            }
        }
    }

    fn retry_delays(&self) -> (Duration, Duration) {
        (RETRY_DELAY, RETRY_DELAY)
    }

    fn routine_errors(&self) -> bool {
        true
    }
}

/// What one pass did, for logs and tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct SyncStats {
    pub partitions: usize,
    pub merkle_requests: usize,
    pub entries_sent: usize,
    /// Entries of partitions this node holds in no live layout version,
    /// dropped without being sent.
    pub entries_offloaded: usize,
    /// (partition, node) pairs a failed pass before this one completed,
    /// skipped.
    pub resumed: usize,
}

/// What the failed passes for one layout version completed: (partition,
/// node) pairs, with the instant each pair's sync started. A pair stays
/// done while its node has stayed up since that instant (a node that went
/// down or was cut off afterwards missed writes meanwhile, and gets the
/// partition again once it is back), and for at most `sync_interval` (a
/// node down for good keeps the passes failing: the pairs of the others
/// are still synced as often as by the periodic passes). A new target, or
/// a pass that succeeds, forgets everything (the next pass is a full one).
#[derive(Debug, Default)]
pub struct Resume {
    target: u64,
    done: HashMap<(u8, NodeId), Instant>,
    /// Pairs skipped so far by the passes using it.
    skipped: usize,
}

impl Resume {
    /// Starts a pass for `target`: progress made for another one is
    /// forgotten.
    fn begin(&mut self, target: u64) {
        if self.target != target {
            self.done.clear();
            self.target = target;
        }
    }

    /// Whether the pair can be skipped, `up_since` being when its node last
    /// came up (None: never seen up), if done less than `max_age` ago.
    fn skips(&self, p: u8, node: NodeId, up_since: Option<Instant>, max_age: Duration) -> bool {
        match (self.done.get(&(p, node)), up_since) {
            (Some(at), Some(up)) => up <= *at && at.elapsed() < max_age,
            _ => false,
        }
    }

    fn completed(&mut self, p: u8, node: NodeId, started: Instant) {
        self.done.insert((p, node), started);
    }

    fn clear(&mut self) {
        self.done.clear();
    }

    /// Pairs skipped so far by the passes given this.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Pairs remembered as done.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }
}

impl<F: TableSchema> Table<F> {
    /// One full pass; `Ok` only if every partition reached every node.
    pub async fn sync_pass(&self, layout: &LayoutHistory) -> Result<SyncStats> {
        self.sync_pass_resuming(layout, &mut Resume::default())
            .await
    }

    /// A pass that skips what `resume` says failed passes before it
    /// completed, and records what it completes; `Ok` only if every
    /// partition reached every node (`resume` is then cleared).
    pub async fn sync_pass_resuming(
        &self,
        layout: &LayoutHistory,
        resume: &mut Resume,
    ) -> Result<SyncStats> {
        // The trees must include everything stored before the pass.
        let data = self.data.clone();
        tokio::task::spawn_blocking(move || -> Result<()> {
            while merkle::process_batch(&data)? > 0 {}
            Ok(())
        })
        .await
        .map_err(|e| Error::Remote {
            node: "local".into(),
            msg: e.to_string(),
        })??;

        let me = self.system.id();
        let target = sync_target(layout);
        resume.begin(target);
        let mut stats = SyncStats::default();
        let mut first_error = None;
        for p in 0..=255u8 {
            let nodes = F::REPLICATION.all_nodes(layout, p as usize);
            let root = merkle::read_node(&self.data.merkle_tree, p, &[])?;
            if root == MerkleNode::Empty {
                continue;
            }
            stats.partitions += 1;
            if !nodes.contains(&me) && !nodes.is_empty() {
                // This node holds the partition in no live layout version:
                // the versions it was in have been retired, which needed
                // every node of the newer ones synced from the older
                // ones, and every write since reached quorums without it.
                // What it still has is stale: pushed now, an entry deleted
                // meanwhile whose tombstone the GC has collected (which
                // it did without this node) would come back. It is
                // dropped, not pushed.
                let data = self.data.clone();
                let n = off_runtime(move || drop_partition(&data, p)).await?;
                stats.entries_offloaded += n;
                continue;
            }
            // The pass is for `target`: it must reach the partition's nodes
            // in `target` and newer versions. Nodes only in older versions
            // (being drained) get it when they answer, but one that is
            // down for good must not keep the change from finishing.
            let required: Vec<NodeId> = layout
                .live_versions()
                .filter(|v| v.version >= target)
                .flat_map(|v| F::REPLICATION.nodes_in(v, p as usize))
                .collect();
            for n in nodes.iter().filter(|n| **n != me) {
                if resume.skips(p, *n, self.system.up_since(n), self.tuning.sync_interval) {
                    stats.resumed += 1;
                    resume.skipped += 1;
                    continue;
                }
                let started = Instant::now();
                let sent_before = stats.entries_sent;
                let res = self.sync_partition_with(p, *n, &mut stats).await;
                metrics::counter!("table_sync_items_sent_total", "table_name" => F::TABLE_NAME, "to" => n.short())
                    .increment((stats.entries_sent - sent_before) as u64);
                match res {
                    Err(e) if required.contains(n) => {
                        first_error.get_or_insert(e);
                    }
                    Err(e) => debug!(
                        table = F::TABLE_NAME,
                        partition = p,
                        "sync to {} (only in older layout versions) failed: {e}",
                        n.short()
                    ),
                    Ok(()) => resume.completed(p, *n, started),
                }
            }
        }
        match first_error {
            None => {
                resume.clear();
                Ok(stats)
            }
            Some(e) => Err(e),
        }
    }

    async fn sync_partition_with(&self, p: u8, node: NodeId, stats: &mut SyncStats) -> Result<()> {
        // Breadth first, asking the other node for up to MERKLE_BATCH
        // differing subtrees per request.
        let mut todo: Vec<Vec<u8>> = vec![vec![]];
        let mut to_send: Vec<Vec<u8>> = Vec::new();
        while !todo.is_empty() {
            let take = todo.len().min(MERKLE_BATCH);
            let mut prefixes: Vec<Vec<u8>> = todo.drain(..take).collect();
            let mut locals = Vec::with_capacity(prefixes.len());
            prefixes.retain(
                |pre| match merkle::read_node(&self.data.merkle_tree, p, pre) {
                    Ok(MerkleNode::Empty) => false,
                    Ok(n) => {
                        locals.push(Ok(n));
                        true
                    }
                    Err(e) => {
                        locals.push(Err(e));
                        true
                    }
                },
            );
            if prefixes.is_empty() {
                continue;
            }
            stats.merkle_requests += 1;
            let remotes = match self
                .call(
                    &node,
                    TableRpc::GetMerkleNodes {
                        partition: p,
                        prefixes: prefixes.iter().cloned().map(ByteBuf::from).collect(),
                    },
                )
                .await?
            {
                TableRpc::MerkleNodes(n) if n.len() == prefixes.len() => n,
                other => {
                    return Err(Error::Unexpected {
                        node: format!("{node:?}"),
                        msg: other.kind().into(),
                    })
                }
            };
            for ((prefix, local), remote) in prefixes.into_iter().zip(locals).zip(remotes) {
                let local = local?;
                if local == remote {
                    continue;
                }
                match (&local, &remote) {
                    (MerkleNode::Leaf(k, _), _) => to_send.push(k.clone()),
                    (MerkleNode::Intermediate(lc), MerkleNode::Intermediate(rc)) => {
                        for (b, h) in lc {
                            if !rc.contains(&(*b, *h)) {
                                let mut child = prefix.clone();
                                child.push(*b);
                                todo.push(child);
                            }
                        }
                    }
                    (MerkleNode::Intermediate(_), MerkleNode::Empty) if prefix.is_empty() => {
                        // The other node has nothing of this partition:
                        // send it all, in store order.
                        stats.entries_sent += self.push_whole_partition(p, node).await?;
                    }
                    (MerkleNode::Intermediate(_), _) => {
                        self.collect_leaves(p, &prefix, &mut to_send)?;
                    }
                    (MerkleNode::Empty, _) => (),
                }
                if to_send.len() >= PUSH_BATCH {
                    stats.entries_sent +=
                        self.push_keys(node, std::mem::take(&mut to_send)).await?;
                }
            }
        }
        if !to_send.is_empty() {
            stats.entries_sent += self.push_keys(node, to_send).await?;
        }
        Ok(())
    }

    fn collect_leaves(&self, p: u8, prefix: &[u8], out: &mut Vec<Vec<u8>>) -> Result<()> {
        let mut stack = vec![prefix.to_vec()];
        while let Some(pre) = stack.pop() {
            match merkle::read_node(&self.data.merkle_tree, p, &pre)? {
                MerkleNode::Empty => (),
                MerkleNode::Leaf(k, _) => out.push(k),
                MerkleNode::Intermediate(children) => {
                    for (b, _) in children {
                        let mut c = pre.clone();
                        c.push(b);
                        stack.push(c);
                    }
                }
            }
        }
        Ok(())
    }

    async fn push_keys(&self, node: NodeId, keys: Vec<Vec<u8>>) -> Result<usize> {
        let mut batch = Vec::with_capacity(keys.len());
        for k in keys {
            if let Some(v) = self.data.store.get(&k)? {
                batch.push(ByteBuf::from(crate::data::to_canonical(&k, v)?));
            }
        }
        let n = batch.len();
        self.send_update(node, batch).await?;
        Ok(n)
    }

    async fn send_update(&self, node: NodeId, batch: Vec<ByteBuf>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        match self.call(&node, TableRpc::Update(batch)).await? {
            TableRpc::Ok => Ok(()),
            other => Err(Error::Unexpected {
                node: format!("{node:?}"),
                msg: other.kind().into(),
            }),
        }
    }

    async fn push_whole_partition(&self, p: u8, node: NodeId) -> Result<usize> {
        let mut from: Option<Vec<u8>> = None;
        let mut sent = 0;
        // Bounded: each round moves past PUSH_BATCH entries of a finite
        // partition.
        loop {
            let items = self
                .data
                .partition_items(p, from.as_deref(), PUSH_BATCH + 1)?;
            let more = items.len() > PUSH_BATCH;
            let mut batch = Vec::new();
            for (k, v) in items.into_iter().take(PUSH_BATCH) {
                from = Some(k);
                batch.push(ByteBuf::from(v));
            }
            sent += batch.len();
            self.send_update(node, batch).await?;
            if !more {
                return Ok(sent);
            }
            // Continue after the last key sent.
            if let Some(f) = from.as_mut() {
                f.push(0);
            }
        }
    }
}

/// Drops this node's copy of partition `p`, which it holds in no live
/// layout version. Returns how many entries went. Blocking: a
/// whole partition's deletions.
fn drop_partition<F: TableSchema>(data: &TableData<F>, p: u8) -> Result<usize> {
    let mut dropped = 0;
    let mut from: Option<Vec<u8>> = None;
    loop {
        let items = data.partition_items(p, from.as_deref(), PUSH_BATCH)?;
        if items.is_empty() {
            return Ok(dropped);
        }
        for (k, v) in items {
            if data.delete_if_equal_hash(&k, &blake2sum(&v), Removal::Offloaded)? {
                dropped += 1;
            }
            let mut next = k;
            next.push(0);
            from = Some(next);
        }
    }
}

/// The layout version a pass starting now can report as synced: the
/// newest one every node has acknowledged (writes from then on reach its
/// nodes directly).
pub fn sync_target(layout: &LayoutHistory) -> u64 {
    layout
        .min_tracker(Tracker::Ack)
        .min(layout.current().version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_stays_done_while_its_node_stays_up_and_the_target_holds() {
        // Instants in the past, so that ages are known.
        let t0 = Instant::now() - Duration::from_secs(100);
        let t = |s| t0 + Duration::from_secs(s);
        let age = Duration::from_secs(3600);
        let a = NodeId::from([1; 32]);
        let b = NodeId::from([2; 32]);
        let mut r = Resume::default();
        r.begin(4);
        r.completed(7, a, t(10));
        r.completed(7, b, t(10));
        // Up since before the pair's sync: skipped.
        assert!(r.skips(7, a, Some(t(0)), age));
        assert!(r.skips(7, a, Some(t(10)), age));
        // Came back after it (killed, cut off): synced again.
        assert!(!r.skips(7, a, Some(t(11)), age));
        // Never seen up, another partition: not skipped.
        assert!(!r.skips(7, a, None, age));
        assert!(!r.skips(8, a, Some(t(0)), age));
        assert_eq!(r.len(), 2);
        // Done 90 s ago: not skipped past a shorter age.
        assert!(!r.skips(7, a, Some(t(0)), Duration::from_secs(60)));
        // The same target keeps the progress, another one drops it.
        r.begin(4);
        assert!(r.skips(7, b, Some(t(0)), age));
        r.begin(5);
        assert!(r.is_empty());
        assert!(!r.skips(7, b, Some(t(0)), age));
    }
}
