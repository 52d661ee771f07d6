//! Per-bucket counters: objects, bytes (in all, and per storage class other
//! than `STANDARD`), unfinished uploads.
//!
//! All objects of a bucket live in one partition of the object table (the
//! bucket id is its partition key), so each node storing that partition can
//! count them all. Each such node keeps its own counts in a local tree,
//! changed in the object table's transactions, and publishes them in the
//! replicated `bucket_counters` table under its node id. A reader takes,
//! per counter, the largest value among the nodes that store the bucket's
//! partition in the current layout.

use std::collections::BTreeMap;

use garage_db as db;
use garage_table::{EmptyKey, Entry, TableSchema};
use garage_util::crdt::{Crdt, Lww, Map};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

pub const OBJECTS: &str = "objects";
pub const BYTES: &str = "bytes";
pub const UNFINISHED_UPLOADS: &str = "unfinished_uploads";

pub type Counts = BTreeMap<String, i64>;

/// Prefix of the counters of bytes per storage class (the classes other
/// than `STANDARD`, whose bytes are the rest of [`BYTES`]).
const CLASS_BYTES_PREFIX: &str = "bytes.";

/// The counter of the bytes of current data in storage class `class`.
pub fn class_bytes_key(class: &str) -> String {
    format!("{CLASS_BYTES_PREFIX}{class}")
}

/// Bytes per storage class in `counts`, `STANDARD` included (the bytes no
/// other class counts), classes holding nothing left out.
pub fn bytes_by_class(counts: &Counts) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = counts
        .iter()
        .filter_map(|(k, n)| Some((k.strip_prefix(CLASS_BYTES_PREFIX)?.to_string(), *n)))
        .filter(|(_, n)| *n != 0)
        .collect();
    let rest = counts.get(BYTES).copied().unwrap_or(0) - out.values().sum::<i64>();
    if rest != 0 || out.is_empty() {
        out.insert("STANDARD".into(), rest);
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterEntry {
    pub bucket_id: Uuid,
    /// Node id -> that node's counts (last writer wins per node).
    pub values: Map<Uuid, Lww<Counts>>,
}

impl CounterEntry {
    /// Per counter, the largest value among `nodes`.
    pub fn total(&self, nodes: &[Uuid]) -> Counts {
        let mut out = Counts::new();
        for (node, v) in self.values.items() {
            if !nodes.contains(node) {
                continue;
            }
            for (k, n) in v.get() {
                let e = out.entry(k.clone()).or_insert(*n);
                *e = (*e).max(*n);
            }
        }
        out
    }
}

impl Crdt for CounterEntry {
    fn merge(&mut self, other: &Self) {
        self.values.merge(&other.values);
    }
}

impl Entry<Uuid, EmptyKey> for CounterEntry {
    fn partition_key(&self) -> &Uuid {
        &self.bucket_id
    }
    fn sort_key(&self) -> &EmptyKey {
        &EmptyKey
    }
}

pub struct CounterTable;

impl TableSchema for CounterTable {
    const TABLE_NAME: &'static str = "bucket_counters";
    type P = Uuid;
    type S = EmptyKey;
    type E = CounterEntry;
    type Filter = ();

    fn matches_filter(_: &CounterEntry, _: &()) -> bool {
        true
    }
}

/// This node's counts, in a local (not replicated) tree.
#[derive(Clone)]
pub struct LocalCounters {
    pub tree: db::Tree,
}

#[derive(Serialize, Deserialize, Default)]
struct Stored {
    ts: u64,
    counts: Counts,
}

impl LocalCounters {
    pub fn open(db: &db::Db) -> db::Result<Self> {
        Ok(Self {
            tree: db.open_tree("bucket_counters:local")?,
        })
    }

    fn decode(bytes: Option<Vec<u8>>) -> db::Result<Stored> {
        match bytes {
            None => Ok(Stored::default()),
            Some(b) => rmp_serde::from_slice(&b)
                .map_err(|e| db::Error::Aborted(format!("corrupt local counter: {e}"))),
        }
    }

    /// Adds `delta` to the bucket's counts; returns the entry to publish.
    pub fn apply(
        &self,
        tx: &mut db::Transaction<'_>,
        node: Uuid,
        bucket: Uuid,
        delta: &Counts,
    ) -> db::Result<Option<CounterEntry>> {
        if delta.values().all(|d| *d == 0) {
            return Ok(None);
        }
        let mut s = Self::decode(tx.get(&self.tree, bucket.as_slice())?)?;
        for (k, d) in delta {
            *s.counts.entry(k.clone()).or_insert(0) += d;
        }
        s.ts = garage_util::time::increment_after(s.ts);
        let bytes = rmp_serde::to_vec(&s).expect("counters serialize");
        tx.insert(&self.tree, bucket.as_slice(), bytes)?;
        Ok(Some(CounterEntry {
            bucket_id: bucket,
            values: Map::put_mutator(node, Lww::raw(s.ts, s.counts)),
        }))
    }

    /// Replaces the bucket's counts (a recount); returns the entry to
    /// publish.
    pub fn set(
        &self,
        tx: &mut db::Transaction<'_>,
        node: Uuid,
        bucket: Uuid,
        counts: &Counts,
    ) -> db::Result<CounterEntry> {
        let mut s = Self::decode(tx.get(&self.tree, bucket.as_slice())?)?;
        s.counts = counts.clone();
        s.ts = garage_util::time::increment_after(s.ts);
        let bytes = rmp_serde::to_vec(&s).expect("counters serialize");
        tx.insert(&self.tree, bucket.as_slice(), bytes)?;
        Ok(CounterEntry {
            bucket_id: bucket,
            values: Map::put_mutator(node, Lww::raw(s.ts, s.counts)),
        })
    }

    /// This node's counts for `bucket`.
    pub fn get(&self, bucket: &Uuid) -> db::Result<Counts> {
        Ok(Self::decode(self.tree.get(bucket.as_slice())?)?.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_by_class_gives_standard_the_rest() {
        let counts: Counts = [
            (BYTES.to_string(), 100),
            (OBJECTS.to_string(), 3),
            (class_bytes_key("STANDARD_IA"), 60),
            (class_bytes_key("COLD"), 0),
        ]
        .into_iter()
        .collect();
        let by = bytes_by_class(&counts);
        assert_eq!(
            by.into_iter().collect::<Vec<_>>(),
            vec![("STANDARD".into(), 40), ("STANDARD_IA".into(), 60)]
        );
        let all_ia: Counts = [(BYTES.to_string(), 5), (class_bytes_key("X"), 5)]
            .into_iter()
            .collect();
        assert_eq!(bytes_by_class(&all_ia).len(), 1);
        assert_eq!(bytes_by_class(&Counts::new()).get("STANDARD"), Some(&0));
    }
}
