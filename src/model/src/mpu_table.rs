//! Multipart uploads in progress: upload id -> its parts. Each part is an
//! object version of its own (in the version table); aborting or
//! completing the upload deletes the parts' versions it no longer needs.

use garage_db as db;
use garage_table::{EmptyKey, Entry, InsertQueue, TableSchema};
use garage_util::crdt::{Bool, Crdt, Map};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

use crate::version_table::{Version, VersionBacklink, VersionTable};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MpuPartKey {
    pub part_number: u64,
    pub timestamp: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpuPart {
    pub version: Uuid,
    pub etag: Option<String>,
    pub size: Option<u64>,
}

/// A part is written once, then learns its etag and size: merging keeps
/// what is known (the larger value if two differ, for determinism).
impl Crdt for MpuPart {
    fn merge(&mut self, other: &Self) {
        if other.version > self.version {
            self.version = other.version;
        }
        if other.etag > self.etag {
            self.etag = other.etag.clone();
        }
        if other.size > self.size {
            self.size = other.size;
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultipartUpload {
    pub upload_id: Uuid,
    pub timestamp: u64,
    pub deleted: Bool,
    pub parts: Map<MpuPartKey, MpuPart>,
    pub bucket_id: Uuid,
    pub key: String,
}

impl MultipartUpload {
    pub fn new(upload_id: Uuid, timestamp: u64, bucket_id: Uuid, key: String) -> Self {
        Self {
            upload_id,
            timestamp,
            deleted: Bool::new(false),
            parts: Map::new(),
            bucket_id,
            key,
        }
    }
}

impl Crdt for MultipartUpload {
    fn merge(&mut self, other: &Self) {
        self.deleted.merge(&other.deleted);
        if self.deleted.get() {
            self.parts.clear();
        } else {
            self.parts.merge(&other.parts);
        }
    }
}

impl Entry<Uuid, EmptyKey> for MultipartUpload {
    fn partition_key(&self) -> &Uuid {
        &self.upload_id
    }
    fn sort_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn is_tombstone(&self) -> bool {
        self.deleted.get()
    }
}

pub struct MpuTable {
    pub versions: InsertQueue<VersionTable>,
}

impl TableSchema for MpuTable {
    const TABLE_NAME: &'static str = "multipart_upload";
    type P = Uuid;
    type S = EmptyKey;
    type E = MultipartUpload;
    type Filter = ();

    fn matches_filter(_: &MultipartUpload, _: &()) -> bool {
        true
    }

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&MultipartUpload>,
        new: Option<&MultipartUpload>,
    ) -> db::Result<()> {
        let (Some(old), Some(new)) = (old, new) else {
            return Ok(());
        };
        if new.deleted.get() && !old.deleted.get() {
            for (_, part) in old.parts.items() {
                self.versions.push(
                    tx,
                    &Version::deleted(
                        part.version,
                        VersionBacklink::MultipartUpload {
                            upload_id: new.upload_id,
                        },
                    ),
                )?;
            }
        }
        Ok(())
    }
}
