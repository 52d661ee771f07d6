//! What a table is: entries with a partition key (which chooses the
//! partition, hence the nodes that store the entry), a sort key (the order
//! inside a partition) and a CRDT value that any two replicas can merge.

use std::fmt::Debug;

use garage_db as db;
use garage_util::crdt::Crdt;
use garage_util::data::{blake2sum, FixedBytes32, Hash};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::replication::Replication;

/// Chooses the partition of an entry: its `hash`'s first byte is the
/// partition number.
pub trait PartitionKey:
    Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static
{
    fn hash(&self) -> Hash;
}

/// Orders the entries of one partition (bytewise on `sort_key`).
pub trait SortKey:
    Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static
{
    fn sort_key(&self) -> &[u8];
}

/// Strings (bucket names, access key ids) are hashed.
impl PartitionKey for String {
    fn hash(&self) -> Hash {
        blake2sum(self.as_bytes())
    }
}

/// 32-byte ids are random or hashes already: used as they are.
impl PartitionKey for FixedBytes32 {
    fn hash(&self) -> Hash {
        *self
    }
}

impl SortKey for String {
    fn sort_key(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl SortKey for FixedBytes32 {
    fn sort_key(&self) -> &[u8] {
        self.as_slice()
    }
}

/// The sort key of tables that have one entry per partition key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyKey;

impl SortKey for EmptyKey {
    fn sort_key(&self) -> &[u8] {
        &[]
    }
}

impl PartitionKey for EmptyKey {
    fn hash(&self) -> Hash {
        blake2sum(&[])
    }
}

/// One entry of a table. `merge` (from [`Crdt`]) must be commutative,
/// associative and idempotent, and must never change the keys.
pub trait Entry<P: PartitionKey, S: SortKey>:
    Crdt + PartialEq + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    fn partition_key(&self) -> &P;
    fn sort_key(&self) -> &S;
    /// A tombstone: the entry only records a deletion. Tombstones are
    /// removed by the GC once every replica holds them.
    fn is_tombstone(&self) -> bool {
        false
    }
}

/// Why an entry left this node's store (see [`TableSchema::removed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Removal {
    /// The GC collected a tombstone that every replica holds.
    Collected,
    /// This node no longer stores the entry's partition (layout change);
    /// every node that now holds it had it before it went.
    Offloaded,
}

/// A table: its name, key and entry types, range filters, and the hook run
/// when an entry changes in the local store.
pub trait TableSchema: Send + Sync + 'static {
    /// Name of the table, also the prefix of its trees in the metadata
    /// database and of its RPC endpoint. Never change it.
    const TABLE_NAME: &'static str;

    /// Which nodes hold the entries: the partition's nodes (default), or
    /// every node with a role, which then reads locally.
    const REPLICATION: Replication = Replication::Sharded;

    type P: PartitionKey;
    type S: SortKey;
    type E: Entry<Self::P, Self::S>;
    /// Condition on entries for range reads (e.g. "objects that have data").
    type Filter: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static;

    fn matches_filter(entry: &Self::E, filter: &Self::Filter) -> bool;

    /// Runs inside the transaction that turns `old` (`None`: absent) into
    /// `new` in this node's store, so that derived data (counters, block
    /// references) changes atomically with the entry. It must only derive
    /// from `old` and `new`: it runs on every replica, and again whenever a
    /// merge changes the entry. A value that stops holding something
    /// (a version superseded, a reference marked deleted) is a change seen
    /// here, never a removal.
    fn updated(
        &self,
        _tx: &mut db::Transaction<'_>,
        _old: Option<&Self::E>,
        _new: &Self::E,
    ) -> db::Result<()> {
        Ok(())
    }

    /// Runs inside the transaction that removes `old` from this node's
    /// store. A removal is never a change of the entry's value: `why`
    /// says whether the GC collected a tombstone that every replica holds,
    /// or this node stopped storing the partition after a layout change
    /// (the entry lives on at its new holders). So a hook may drop what
    /// this node derived locally from `old` (its counts, the references
    /// that keep its local block copies) but must never propagate a
    /// deletion to other tables because of a removal.
    fn removed(
        &self,
        _tx: &mut db::Transaction<'_>,
        _old: &Self::E,
        _why: Removal,
    ) -> db::Result<()> {
        Ok(())
    }

    /// Partition-wide deletion (see [`crate::cascade`]): the sort key of
    /// the head entry of each partition key, whose tombstone deletes every
    /// entry of that partition key, present or to come. `None` (the
    /// default): entries are deleted one by one.
    fn partition_head(&self) -> Option<Self::S> {
        None
    }

    /// `entry` deleted because `head`, the head of its partition key, is a
    /// tombstone: a tombstone with `entry`'s keys that wins when merged
    /// with `entry` or any later value of it (the result of merging it into
    /// `entry` must be a tombstone). Only called when
    /// [`Self::partition_head`] is `Some`.
    fn partition_tombstone(&self, entry: &Self::E, _head: &Self::E) -> Self::E {
        entry.clone()
    }

    /// Ordered writes (see [`crate::Table::insert_ordered`] and
    /// doc/ordering.md): the stamp of a write that `stored` (this
    /// replica's entry) holds and that `incoming` was meant to come after
    /// but sorts before. `Some` makes the replica refuse `incoming` and
    /// report the stamp, so that the writer stamps again above it before
    /// acknowledging. `None` (the default): `incoming` is merged.
    fn newer_than(_stored: &Self::E, _incoming: &Self::E) -> Option<u64> {
        None
    }

    /// The largest write stamp `entry` carries, observed by the replica's
    /// hybrid clock when it stores an ordered write
    /// ([`garage_util::time::observe`]). `None`: it carries none.
    fn stamp_of(_entry: &Self::E) -> Option<u64> {
        None
    }

    /// Conditional writes ([`crate::cas`]): the register that belongs to
    /// `entry`, whose value is folded into the entry by conditional
    /// writers. Before the GC collects a tombstone of an entry whose
    /// register holds a value, it empties the register, if the value is
    /// superseded by the tombstone ([`Self::register_superseded`]);
    /// otherwise the tombstone stays. `None` (the default): no register.
    fn register_of(_entry: &Self::E) -> Option<crate::cas::RegisterId> {
        None
    }

    /// Whether register value `value` (empty: none) may be dropped once
    /// `tombstone` is collected: folding it into the tombstone would leave
    /// a tombstone.
    fn register_superseded(_tombstone: &Self::E, _value: &[u8]) -> bool {
        false
    }
}
