//! The blocks of each object version (or multipart upload part), by part
//! number and offset. Deleting a version drops its blocks and marks its
//! block references deleted, through the block_ref table's insert queue.

use garage_db as db;
use garage_table::{EmptyKey, Entry, InsertQueue, TableSchema};
use garage_util::crdt::{Bool, Crdt, LwwMap, Map};
use garage_util::data::{Hash, Uuid};
use serde::{Deserialize, Serialize};

use crate::block_ref_table::{BlockRef, BlockRefTable};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionBlockKey {
    pub part_number: u64,
    pub offset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionBlock {
    pub hash: Hash,
    pub size: u64,
}

/// Two writers never give one block position different contents; if they
/// did, the larger wins so that replicas agree.
impl Crdt for VersionBlock {
    fn merge(&mut self, other: &Self) {
        if other > self {
            *self = *other;
        }
    }
}

/// What a version belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum VersionBacklink {
    Object { bucket_id: Uuid, key: String },
    MultipartUpload { upload_id: Uuid },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub uuid: Uuid,
    pub deleted: Bool,
    pub blocks: Map<VersionBlockKey, VersionBlock>,
    /// ETag of each part of a multipart upload.
    pub parts_etags: LwwMap<u64, String>,
    pub backlink: VersionBacklink,
}

impl Version {
    pub fn new(uuid: Uuid, backlink: VersionBacklink) -> Self {
        Self {
            uuid,
            deleted: Bool::new(false),
            blocks: Map::new(),
            parts_etags: LwwMap::new(),
            backlink,
        }
    }

    pub fn deleted(uuid: Uuid, backlink: VersionBacklink) -> Self {
        Self {
            deleted: Bool::new(true),
            ..Self::new(uuid, backlink)
        }
    }

    /// Total size of the blocks.
    pub fn size(&self) -> u64 {
        self.blocks.items().map(|(_, b)| b.size).sum()
    }
}

impl Crdt for Version {
    fn merge(&mut self, other: &Self) {
        self.deleted.merge(&other.deleted);
        if other.backlink > self.backlink {
            self.backlink = other.backlink.clone();
        }
        if self.deleted.get() {
            // Deletion wins over everything: nothing can add blocks back.
            self.blocks.clear();
            self.parts_etags.clear();
        } else {
            self.blocks.merge(&other.blocks);
            self.parts_etags.merge(&other.parts_etags);
        }
    }
}

impl Entry<Uuid, EmptyKey> for Version {
    fn partition_key(&self) -> &Uuid {
        &self.uuid
    }
    fn sort_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn is_tombstone(&self) -> bool {
        self.deleted.get()
    }
}

pub struct VersionTable {
    pub block_refs: InsertQueue<BlockRefTable>,
}

impl TableSchema for VersionTable {
    const TABLE_NAME: &'static str = "version";
    type P = Uuid;
    type S = EmptyKey;
    type E = Version;
    type Filter = ();

    fn matches_filter(_: &Version, _: &()) -> bool {
        true
    }

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&Version>,
        new: Option<&Version>,
    ) -> db::Result<()> {
        let Some(new) = new else { return Ok(()) };
        if new.deleted.get() {
            // Every block the version had loses this reference.
            if let Some(old) = old.filter(|o| !o.deleted.get()) {
                for (_, b) in old.blocks.items() {
                    self.block_refs
                        .push(tx, &BlockRef::new(b.hash, new.uuid, true))?;
                }
            }
            return Ok(());
        }
        for (k, b) in new.blocks.items() {
            let known = old.and_then(|o| o.blocks.get(k)) == Some(b);
            if !known {
                self.block_refs
                    .push(tx, &BlockRef::new(b.hash, new.uuid, false))?;
            }
        }
        Ok(())
    }
}
