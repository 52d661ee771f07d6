//! Objects: (bucket id, key) -> the object's versions, oldest first.
//!
//! A version is uploading, complete or aborted; a complete version holds a
//! delete marker, the data itself when it is small (at most
//! [`INLINE_THRESHOLD`] bytes: one round trip, no block), or the hash of
//! its first block (the rest is in the version table). Merging unites the
//! versions by id and then keeps only the newest complete version and
//! anything newer, so the list stays short. Versions that disappear or are
//! aborted are deleted from the version table through its insert queue,
//! and every change moves this node's per-bucket counters.

use garage_db as db;
use garage_table::{Entry, InsertQueue, TableSchema};
use garage_util::crdt::Crdt;
use garage_util::data::{Hash, Uuid};
use serde::{Deserialize, Serialize};

use crate::counter_table::{
    CounterTable, Counts, LocalCounters, BYTES, OBJECTS, UNFINISHED_UPLOADS,
};
use crate::version_table::{Version, VersionBacklink, VersionTable};

/// Objects up to this size are stored inline in the object table.
pub const INLINE_THRESHOLD: usize = 3072;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    pub bucket_id: Uuid,
    pub key: String,
    /// Sorted by (timestamp, uuid).
    versions: Vec<ObjectVersion>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectVersion {
    pub uuid: Uuid,
    pub timestamp: u64,
    pub state: ObjectVersionState,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObjectVersionState {
    Uploading {
        multipart: bool,
        headers: Vec<(String, String)>,
    },
    Complete(ObjectVersionData),
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObjectVersionData {
    DeleteMarker,
    Inline(ObjectVersionMeta, #[serde(with = "serde_bytes")] Vec<u8>),
    FirstBlock(ObjectVersionMeta, Hash),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectVersionMeta {
    pub headers: Vec<(String, String)>,
    pub size: u64,
    pub etag: String,
}

impl ObjectVersionState {
    /// Uploading < Aborted < Complete: a version only moves forward, and a
    /// complete version stays complete (so pruning, which keeps the newest
    /// complete version, never drops something a later merge would need).
    /// Two different complete states (never written in practice) resolve to
    /// the larger so that replicas agree.
    fn merge(&mut self, other: &Self) {
        use ObjectVersionState::*;
        let rank = |s: &Self| match s {
            Uploading { .. } => 0,
            Aborted => 1,
            Complete(_) => 2,
        };
        if (rank(other), other) > (rank(self), &*self) {
            *self = other.clone();
        }
    }
}

impl ObjectVersion {
    pub fn is_complete(&self) -> bool {
        matches!(self.state, ObjectVersionState::Complete(_))
    }

    pub fn is_uploading(&self, multipart: Option<bool>) -> bool {
        match &self.state {
            ObjectVersionState::Uploading { multipart: m, .. } => multipart.is_none_or(|x| x == *m),
            _ => false,
        }
    }

    /// Complete with data (not a delete marker).
    pub fn is_data(&self) -> bool {
        matches!(
            self.state,
            ObjectVersionState::Complete(ObjectVersionData::Inline(..))
                | ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..))
        )
    }

    pub fn size(&self) -> u64 {
        match &self.state {
            ObjectVersionState::Complete(ObjectVersionData::Inline(m, _))
            | ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, _)) => m.size,
            _ => 0,
        }
    }

    /// Whether the version may have blocks in the version table.
    fn may_have_blocks(&self) -> bool {
        matches!(
            self.state,
            ObjectVersionState::Uploading { .. }
                | ObjectVersionState::Complete(ObjectVersionData::FirstBlock(..))
        )
    }
}

impl Object {
    pub fn new(bucket_id: Uuid, key: String, versions: Vec<ObjectVersion>) -> Self {
        let mut o = Self {
            bucket_id,
            key,
            versions: Vec::new(),
        };
        for v in versions {
            o.merge_version(v);
        }
        o.prune();
        o
    }

    pub fn versions(&self) -> &[ObjectVersion] {
        &self.versions
    }

    /// The newest complete version.
    pub fn last_complete(&self) -> Option<&ObjectVersion> {
        self.versions.iter().rev().find(|v| v.is_complete())
    }

    fn merge_version(&mut self, v: ObjectVersion) {
        match self
            .versions
            .binary_search_by(|x| (x.timestamp, x.uuid).cmp(&(v.timestamp, v.uuid)))
        {
            Ok(i) => self.versions[i].state.merge(&v.state),
            Err(i) => self.versions.insert(i, v),
        }
    }

    /// Drops every version older than the newest complete one.
    fn prune(&mut self) {
        if let Some(i) = self.versions.iter().rposition(|v| v.is_complete()) {
            self.versions.drain(..i);
        }
    }

    fn counts(&self) -> Counts {
        let current = self.last_complete().filter(|v| v.is_data());
        let mut c = Counts::new();
        c.insert(OBJECTS.into(), current.is_some() as i64);
        c.insert(BYTES.into(), current.map(|v| v.size() as i64).unwrap_or(0));
        c.insert(
            UNFINISHED_UPLOADS.into(),
            self.versions
                .iter()
                .filter(|v| v.is_uploading(None))
                .count() as i64,
        );
        c
    }
}

impl Crdt for Object {
    fn merge(&mut self, other: &Self) {
        for v in other.versions.iter() {
            self.merge_version(v.clone());
        }
        self.prune();
    }
}

impl Entry<Uuid, String> for Object {
    fn partition_key(&self) -> &Uuid {
        &self.bucket_id
    }
    fn sort_key(&self) -> &String {
        &self.key
    }
    /// Nothing left but a delete marker (or nothing at all).
    fn is_tombstone(&self) -> bool {
        self.versions.iter().all(|v| {
            matches!(
                v.state,
                ObjectVersionState::Complete(ObjectVersionData::DeleteMarker)
                    | ObjectVersionState::Aborted
            )
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ObjectFilter {
    /// Objects whose newest complete version has data.
    IsData,
    /// Objects with an upload in progress (multipart or not, or either).
    IsUploading { multipart: Option<bool> },
}

pub struct ObjectTable {
    /// This node's id, for its counters.
    pub node: Uuid,
    pub versions: InsertQueue<VersionTable>,
    pub counters: InsertQueue<CounterTable>,
    pub local_counters: LocalCounters,
}

impl TableSchema for ObjectTable {
    const TABLE_NAME: &'static str = "object";
    type P = Uuid;
    type S = String;
    type E = Object;
    type Filter = ObjectFilter;

    fn matches_filter(entry: &Object, filter: &ObjectFilter) -> bool {
        match filter {
            ObjectFilter::IsData => entry.last_complete().is_some_and(|v| v.is_data()),
            ObjectFilter::IsUploading { multipart } => {
                entry.versions.iter().any(|v| v.is_uploading(*multipart))
            }
        }
    }

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> db::Result<()> {
        let Some(any) = old.or(new) else {
            return Ok(());
        };
        // Versions that went away or were aborted: delete their blocks.
        if let Some(old) = old {
            for v in old.versions.iter().filter(|v| v.may_have_blocks()) {
                let now = new.and_then(|n| n.versions.iter().find(|x| x.uuid == v.uuid));
                let gone = match now {
                    None => true,
                    Some(x) => matches!(x.state, ObjectVersionState::Aborted),
                };
                if gone {
                    self.versions.push(
                        tx,
                        &Version::deleted(
                            v.uuid,
                            VersionBacklink::Object {
                                bucket_id: old.bucket_id,
                                key: old.key.clone(),
                            },
                        ),
                    )?;
                }
            }
        }
        // Counters.
        let before = old.map(Object::counts).unwrap_or_default();
        let after = new.map(Object::counts).unwrap_or_default();
        let mut delta = Counts::new();
        for k in [OBJECTS, BYTES, UNFINISHED_UPLOADS] {
            let d = after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
            delta.insert(k.to_string(), d);
        }
        if let Some(entry) = self
            .local_counters
            .apply(tx, self.node, any.bucket_id, &delta)?
        {
            self.counters.push(tx, &entry)?;
        }
        Ok(())
    }
}
