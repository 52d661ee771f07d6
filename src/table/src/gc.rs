//! Tombstone GC. A tombstone is removed only once every node holding its
//! partition in a live layout version has it: the GC first sends the
//! tombstone to all of them and needs every one to acknowledge, then asks
//! each to delete it if unchanged. A node that is down stops the GC of its
//! partitions (never the other way round), so a deleted entry cannot come
//! back from a replica that missed the delete.
//!
//! Nodes that held the partition in a retired version (kept in the
//! history) and hold it in no live one get the tombstone too: they drop a
//! partition they left at their next sync pass, and until then their copy
//! may be stale. Without this, a node that missed a delete after leaving
//! a partition, and came to hold it again in a later version before its
//! pass dropped the copy, brought the deleted entry back once the
//! tombstone was gone (found by the history checker, seed 91133). Those
//! still in the layout must acknowledge; nodes removed from the layout are
//! sent it when they answer (a removed node is usually shut down).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use garage_db as db;
use garage_rpc::layout::LayoutVersion;
use garage_util::data::Hash;
use garage_util::worker::runner::{Step, Worker};
use garage_util::worker::{WorkerHandle, WorkerSpec};
use serde_bytes::ByteBuf;
use tokio::sync::watch;
use tracing::{debug, info};

use crate::data::TableData;
use crate::error::{off_runtime, Error, Result};
use crate::rpc::TableRpc;
use crate::schema::{Removal, TableSchema};
use crate::table::Table;

/// Tombstones handled per round.
const GC_BATCH: usize = 1024;
/// Time between rounds when there was nothing due.
const GC_IDLE: Duration = Duration::from_secs(10);

/// A table's tombstone GC (`garage worker list`: "<table> GC"): rounds
/// while tombstones are due, one every [`GC_IDLE`] otherwise. A round
/// fails while a replica is away (routine: logged at debug level).
pub(crate) struct GcWorker<F: TableSchema> {
    pub(crate) table: Arc<Table<F>>,
}

impl<F: TableSchema> Worker for GcWorker<F> {
    fn spec(&self) -> WorkerSpec {
        let d = self.table.data.clone();
        WorkerSpec::new(
            format!("{} GC", F::TABLE_NAME),
            "removes tombstones once every replica has them",
        )
        .queue(move || Ok(d.gc_todo.len().map_err(|e| e.to_string())? as u64))
    }

    async fn work(
        &mut self,
        _: &WorkerHandle,
        _: &watch::Receiver<bool>,
    ) -> std::result::Result<Step, String> {
        match self.table.gc_round().await.map_err(|e| e.to_string())? {
            0 => Ok(Step::Idle),
            n => {
                info!(table = F::TABLE_NAME, "GC removed {n} tombstones");
                Ok(Step::Busy)
            }
        }
    }

    async fn wait_for_work(&mut self) {
        tokio::time::sleep(GC_IDLE).await
    }

    fn retry_delays(&self) -> (Duration, Duration) {
        (GC_IDLE, GC_IDLE)
    }

    fn routine_errors(&self) -> bool {
        true
    }
}

struct Due {
    key: Vec<u8>,
    todo_value: Vec<u8>,
    vhash: Hash,
}

impl<F: TableSchema> Table<F> {
    /// Removes the tombstones that are due and whose every replica is
    /// reachable; returns how many.
    pub async fn gc_round(&self) -> Result<usize> {
        // A clock off its peers' defers the collection: a jump ahead must
        // not cut the delay short (see doc/ordering.md).
        if let Err(e) = garage_util::clock::check() {
            debug!(table = F::TABLE_NAME, "tombstone GC deferred: {e}");
            return Ok(0);
        }
        let now = garage_util::time::now_msec();
        let delay_ms = self.tuning.gc_delay.as_millis() as u64;
        let data = self.data.clone();
        let by_partition = off_runtime(move || {
            let mut by_partition: BTreeMap<u8, Vec<Due>> = BTreeMap::new();
            let mut seen = 0;
            for item in data.gc_todo.iter() {
                let (key, value) = item?;
                seen += 1;
                if seen > GC_BATCH * 8 {
                    break;
                }
                let (Some(vhash), Some(ts)) = (
                    value.get(..32).and_then(Hash::try_from_slice),
                    value
                        .get(32..40)
                        .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes"))),
                ) else {
                    // Unreadable todo item: drop it (the entry stays).
                    data.gc_todo.remove(&key)?;
                    continue;
                };
                if now < ts.saturating_add(delay_ms) {
                    continue;
                }
                let p = key[0];
                by_partition.entry(p).or_default().push(Due {
                    key,
                    todo_value: value,
                    vhash,
                });
                if by_partition.values().map(Vec::len).sum::<usize>() >= GC_BATCH {
                    break;
                }
            }
            Ok(by_partition)
        })
        .await?;
        let layout = self.system.layout();
        let me = self.system.id();
        let mut removed = 0;
        for (p, items) in by_partition {
            let nodes = F::REPLICATION.all_nodes(&layout, LayoutVersion::partition_of(&[p]));
            if !nodes.contains(&me) {
                // Not ours any more: sync hands it over and drops it.
                continue;
            }
            // Still a tombstone with the same value? (A newer write may
            // have changed it; then it is no longer ours to remove.)
            let data = self.data.clone();
            let (entries, current) = off_runtime(move || {
                let mut entries = Vec::new();
                let mut current = Vec::new();
                for d in items {
                    let v = match data.store.get(&d.key)? {
                        Some(stored) => Some(crate::data::to_canonical(&d.key, stored)?),
                        None => None,
                    };
                    match v {
                        Some(v) if garage_util::data::blake2sum(&v) == d.vhash => {
                            entries.push(ByteBuf::from(v));
                            current.push(d);
                        }
                        _ => remove_todo(&data, &d)?,
                    }
                }
                Ok((entries, current))
            })
            .await?;
            // A tombstone whose register holds a value here: the register
            // is emptied first, if the tombstone supersedes its value;
            // else the tombstone stays for now (see `Self::empty_registers`).
            let (entries, current) = self.empty_registers(entries, current).await?;
            if current.is_empty() {
                continue;
            }
            // Former holders may keep a stale copy: members must take the
            // tombstone like the holders; removed nodes when they answer.
            let former = F::REPLICATION.former_nodes(&layout, LayoutVersion::partition_of(&[p]));
            let mut others: Vec<_> = nodes
                .iter()
                .chain(former.members.iter())
                .filter(|n| **n != me)
                .copied()
                .collect();
            // 1. Every replica must hold the tombstone.
            let mut all_ok = true;
            for n in others.iter() {
                if let Err(e) = self.call(n, TableRpc::Update(entries.clone())).await {
                    debug!(
                        table = F::TABLE_NAME,
                        "GC: {n:?} cannot take tombstones: {e}"
                    );
                    all_ok = false;
                    break;
                }
            }
            if !all_ok {
                continue;
            }
            for n in former.removed.iter().filter(|n| **n != me) {
                match self.call(n, TableRpc::Update(entries.clone())).await {
                    Ok(_) => others.push(*n),
                    Err(e) => debug!(
                        table = F::TABLE_NAME,
                        "GC: removed node {n:?} cannot take tombstones: {e}"
                    ),
                }
            }
            // 2. Every replica deletes it if unchanged; then this node.
            let del: Vec<(ByteBuf, Hash)> = current
                .iter()
                .map(|d| (ByteBuf::from(d.key.clone()), d.vhash))
                .collect();
            for n in others.iter() {
                match self.call(n, TableRpc::DeleteIfEqualHash(del.clone())).await {
                    Ok(TableRpc::Ok) => (),
                    Ok(other) => {
                        return Err(Error::Unexpected {
                            node: format!("{n:?}"),
                            msg: other.kind().into(),
                        })
                    }
                    Err(e) => return Err(e),
                }
            }
            let data = self.data.clone();
            removed += off_runtime(move || {
                let mut removed = 0;
                for d in current {
                    if data.delete_if_equal_hash(&d.key, &d.vhash, Removal::Collected)? {
                        removed += 1;
                    }
                    remove_todo(&data, &d)?;
                }
                Ok(removed)
            })
            .await?;
        }
        Ok(removed)
    }
}

impl<F: TableSchema> Table<F> {
    /// Of the tombstones `entries` (with their todo items `current`),
    /// those that may be collected now as far as their registers go: for
    /// one whose register this node's acceptor holds a value of, the
    /// register is emptied (a Paxos round) if the tombstone supersedes its
    /// value; if it does not, or the round fails, the tombstone stays
    /// until a later round. Why: a conditional writer folds the register's
    /// value into the entry it reads; with the tombstone gone, a value it
    /// deleted would come back (`doc/conditional-writes.md`). Replicas
    /// whose acceptor holds a value this node's does not keep their copy
    /// when asked to delete it, and their own GC empties the register.
    async fn empty_registers(
        &self,
        entries: Vec<ByteBuf>,
        current: Vec<Due>,
    ) -> Result<(Vec<ByteBuf>, Vec<Due>)> {
        let Some(regs) = self.data.registers.get() else {
            return Ok((entries, current));
        };
        let data = self.data.clone();
        let (entries, held) = off_runtime(move || {
            let held = entries
                .iter()
                .map(|b| data.held_register(b))
                .collect::<Result<Vec<_>>>()?;
            Ok((entries, held))
        })
        .await?;
        let mut keep = (Vec::new(), Vec::new());
        for ((bytes, d), held) in entries.into_iter().zip(current).zip(held) {
            let emptied = match held {
                None => true,
                Some(id) => {
                    let tomb = self.data.decode_entry(&bytes)?;
                    match regs
                        .empty_if(id, |v| F::register_superseded(&tomb, v))
                        .await
                    {
                        Ok(e) => e,
                        Err(e) => {
                            debug!(table = F::TABLE_NAME, "GC: register not emptied: {e}");
                            false
                        }
                    }
                }
            };
            if emptied {
                keep.0.push(bytes);
                keep.1.push(d);
            } else {
                metrics::counter!("table_gc_kept_for_register_total", "table_name" => F::TABLE_NAME)
                    .increment(1);
            }
        }
        Ok(keep)
    }
}

/// Drops `d` from the GC todo, unless it changed since it was read.
fn remove_todo<F: TableSchema>(data: &TableData<F>, d: &Due) -> Result<()> {
    let tree = &data.gc_todo;
    data.db.transaction(|tx| -> db::TxResult<(), Error> {
        if tx.get(tree, &d.key)?.as_deref() == Some(d.todo_value.as_slice()) {
            tx.remove(tree, &d.key)?;
        }
        Ok(())
    })?;
    Ok(())
}
