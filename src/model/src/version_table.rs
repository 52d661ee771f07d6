//! The blocks of each object version (or multipart upload part), by part
//! number and offset.
//!
//! A version is stored as several entries of one partition key (its id):
//! a *head* (empty sort key), written when the version is deleted, and
//! *segments* of at most [`SEGMENT_BLOCKS`] blocks each, keyed by part
//! number and block index (see [`VersionSegment`]). Writing a block merges
//! it into one segment, so the metadata rewritten per block is bounded
//! whatever the object's size (one entry holding every block made an
//! upload cost quadratic bytes). A deleted head deletes every segment,
//! present or to come, through the table's partition-wide deletion
//! ([`garage_table::cascade`]); deleted segments mark their block
//! references deleted, through the block_ref table's insert queue.
//!
//! Entries written before segments existed (one entry holding every
//! block, at the empty sort key) are heads with blocks: they are read and
//! deleted in place, with no migration.

use garage_db as db;
use garage_rpc::layout::Placement;
use garage_table::{Entry, InsertQueue, SortKey, Table, TableSchema};
use garage_util::crdt::{Bool, Crdt, LwwMap, Map};
use garage_util::data::{Hash, Uuid};
use serde::{Deserialize, Serialize};

use crate::block_ref_table::{BlockRef, BlockRefTable};

/// Blocks per segment entry: a block write rewrites at most this many
/// blocks' worth of metadata (about 5 KiB).
pub const SEGMENT_BLOCKS: u64 = 64;

/// Most entries read for one version: 5 TiB in 1 MiB blocks, with room
/// for the head and partial segments of 10 000 parts. A version with more
/// is an error to read ([`garage_table::Error::TooManyEntries`]).
pub const MAX_VERSION_ENTRIES: usize = 5 * 1024 * 1024 / SEGMENT_BLOCKS as usize + 10_001;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionBlockKey {
    pub part_number: u64,
    pub offset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionBlock {
    /// The block's address: its content hash, or for an erasure-coded
    /// block the address derived from it (`garage_block::ec::ec_address`).
    pub hash: Hash,
    pub size: u64,
    /// The erasure code of the block, `None` for a replicated one.
    #[serde(default)]
    pub ec: Option<Placement>,
    /// How many times a lifecycle transition re-encoded this position
    /// (gated by `recoded-blocks`; 0, and not written, before): the newest
    /// form wins every merge.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recoded: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One block position changes only when a lifecycle transition re-encodes
/// it (`crate::lifecycle::transition`): the same bytes in another form
/// replace the block. The form re-encoded more times wins (`recoded`, the
/// newest: a move between two coded classes, or to a class's new
/// redundancy); at equal counts an erasure-coded block wins over a
/// replicated one (a transition of a cluster before `recoded-blocks`, and
/// the catch-up of a block written replicated); otherwise (two writers
/// never give one position different contents; if they did) the larger
/// wins, so that replicas agree. The reference to the replaced block is
/// dropped by the transition once the whole version is re-encoded, not
/// here: the same block may sit in another segment.
impl Crdt for VersionBlock {
    fn merge(&mut self, other: &Self) {
        let rank = |b: &Self| (b.recoded, b.ec.is_some(), *b);
        if rank(other) > rank(self) {
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

/// Sort key of a version entry: empty for the head; for a segment, the
/// part number then the block index in the part divided by
/// [`SEGMENT_BLOCKS`], both 8 bytes big-endian (so segments sort in block
/// order).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionSegment(#[serde(with = "serde_bytes")] Vec<u8>);

impl VersionSegment {
    pub const HEAD: Self = Self(Vec::new());

    /// The segment holding block number `index` (from 0) of part
    /// `part_number`.
    pub fn of_block(part_number: u64, index: u64) -> Self {
        let mut k = Vec::with_capacity(16);
        k.extend_from_slice(&part_number.to_be_bytes());
        k.extend_from_slice(&(index / SEGMENT_BLOCKS).to_be_bytes());
        Self(k)
    }

    pub fn is_head(&self) -> bool {
        self.0.is_empty()
    }
}

impl SortKey for VersionSegment {
    fn sort_key(&self) -> &[u8] {
        &self.0
    }
}

/// One entry of a version: its head or one of its segments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub uuid: Uuid,
    /// Absent in entries written before segments existed: their head.
    #[serde(default)]
    pub segment: VersionSegment,
    pub deleted: Bool,
    /// The blocks of this segment (of the whole version in a head written
    /// before segments existed; none in any other head).
    pub blocks: Map<VersionBlockKey, VersionBlock>,
    /// ETag of each part of a multipart upload (head only).
    pub parts_etags: LwwMap<u64, String>,
    pub backlink: VersionBacklink,
    /// When the first write of this entry was made (ms since the epoch),
    /// merged as the earliest known; 0 in entries of earlier builds. Tells
    /// `garage repair versions` an upload in progress (whose object does not
    /// list it yet) from an orphan.
    #[serde(default)]
    pub created: u64,
}

impl Version {
    /// A head.
    pub fn new(uuid: Uuid, backlink: VersionBacklink) -> Self {
        Self::segment(uuid, backlink, VersionSegment::HEAD)
    }

    /// An empty entry at `segment`.
    pub fn segment(uuid: Uuid, backlink: VersionBacklink, segment: VersionSegment) -> Self {
        Self {
            uuid,
            segment,
            deleted: Bool::new(false),
            blocks: Map::new(),
            parts_etags: LwwMap::new(),
            backlink,
            created: garage_util::time::now_msec(),
        }
    }

    /// The deleted head: deletes the whole version.
    pub fn deleted(uuid: Uuid, backlink: VersionBacklink) -> Self {
        Self {
            deleted: Bool::new(true),
            ..Self::new(uuid, backlink)
        }
    }

    /// The segment entry that records block number `index` (from 0) of its
    /// part, at `key`.
    pub fn with_block(
        uuid: Uuid,
        backlink: VersionBacklink,
        index: u64,
        key: VersionBlockKey,
        block: VersionBlock,
    ) -> Self {
        let segment = VersionSegment::of_block(key.part_number, index);
        let mut v = Self::segment(uuid, backlink, segment);
        v.blocks.put(key, block);
        v
    }

    /// The segment entries of a version holding `blocks` (in any order),
    /// cut as [`Version::with_block`] would have: for writing a whole
    /// block list at once (copies, completed multipart uploads).
    pub fn segments<'a>(
        uuid: Uuid,
        backlink: &VersionBacklink,
        blocks: impl IntoIterator<Item = (&'a VersionBlockKey, &'a VersionBlock)>,
    ) -> Vec<Version> {
        let mut sorted: Vec<(VersionBlockKey, VersionBlock)> =
            blocks.into_iter().map(|(k, b)| (*k, *b)).collect();
        sorted.sort();
        let mut out: Vec<Version> = Vec::new();
        let mut part = None;
        let mut index = 0u64;
        for (k, b) in sorted {
            if part != Some(k.part_number) {
                part = Some(k.part_number);
                index = 0;
            }
            let segment = VersionSegment::of_block(k.part_number, index);
            match out.last_mut() {
                Some(last) if last.segment == segment => last.blocks.put(k, b),
                _ => out.push(Self::with_block(uuid, backlink.clone(), index, k, b)),
            }
            index += 1;
        }
        out
    }

    /// Total size of the blocks.
    pub fn size(&self) -> u64 {
        self.blocks.items().map(|(_, b)| b.size).sum()
    }

    /// The whole version from its entries (head and segments, in any
    /// order): deleted if any entry is, else every block. `None` if there
    /// are no entries.
    pub fn from_entries(entries: &[Version]) -> Option<Version> {
        let first = entries.first()?;
        let mut v = Version::new(first.uuid, first.backlink.clone());
        v.created = 0;
        for e in entries {
            v.merge(&Version {
                segment: VersionSegment::HEAD,
                ..e.clone()
            });
        }
        Some(v)
    }
}

impl Crdt for Version {
    fn merge(&mut self, other: &Self) {
        self.deleted.merge(&other.deleted);
        self.created = match (self.created, other.created) {
            (0, o) => o,
            (s, 0) => s,
            (s, o) => s.min(o),
        };
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

impl Entry<Uuid, VersionSegment> for Version {
    fn partition_key(&self) -> &Uuid {
        &self.uuid
    }
    fn sort_key(&self) -> &VersionSegment {
        &self.segment
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
    type S = VersionSegment;
    type E = Version;
    type Filter = ();

    fn matches_filter(_: &Version, _: &()) -> bool {
        true
    }

    fn partition_head(&self) -> Option<VersionSegment> {
        Some(VersionSegment::HEAD)
    }

    /// Deleted, with no blocks: merged into a segment, it clears it for
    /// good (deletion wins over everything in [`Version::merge`]).
    fn partition_tombstone(&self, entry: &Version, _head: &Version) -> Version {
        Version {
            deleted: Bool::new(true),
            ..Version::segment(entry.uuid, entry.backlink.clone(), entry.segment.clone())
        }
    }

    fn updated(
        &self,
        tx: &mut db::Transaction<'_>,
        old: Option<&Version>,
        new: &Version,
    ) -> db::Result<()> {
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
                self.block_refs.push(tx, &BlockRef::to_block(b, new.uuid))?;
            }
        }
        Ok(())
    }
}

/// Reads version `uuid` whole, from a read quorum (with read repair): its
/// head and segments merged by [`Version::from_entries`].
pub async fn read_version(
    table: &Table<VersionTable>,
    uuid: &Uuid,
) -> Result<Option<Version>, garage_table::Error> {
    let entries = table.get_partition(uuid, MAX_VERSION_ENTRIES).await?;
    Ok(Version::from_entries(&entries))
}

/// Quorum reads in flight at once in [`read_versions_near`].
const QUORUM_READS_IN_FLIGHT: usize = 32;

/// [`read_version_near`] for many versions (`complete(i, v)` judges the
/// local copy of `uuids[i]`): the local copies read in one pass, the
/// others at quorum, [`QUORUM_READS_IN_FLIGHT`] at a time. In the order of
/// `uuids`.
pub async fn read_versions_near(
    table: &Table<VersionTable>,
    uuids: &[Uuid],
    complete: impl Fn(usize, &Version) -> bool,
) -> Result<Vec<Option<Version>>, garage_table::Error> {
    use futures::{StreamExt, TryStreamExt};
    let local = table
        .get_partitions_local(uuids, MAX_VERSION_ENTRIES)
        .await?;
    let mut out: Vec<Option<Version>> = Vec::with_capacity(uuids.len());
    let mut missing = Vec::new();
    for (i, entries) in local.into_iter().enumerate() {
        let whole = entries
            .and_then(|e| Version::from_entries(&e))
            .filter(|v| !v.deleted.get() && complete(i, v));
        if whole.is_none() {
            missing.push(i);
        }
        out.push(whole);
    }
    tracing::debug!(
        local = uuids.len() - missing.len(),
        quorum = missing.len(),
        "block lists of {} versions read",
        uuids.len()
    );
    let read: Vec<(usize, Option<Version>)> = futures::stream::iter(missing)
        .map(|i| async move { read_version(table, &uuids[i]).await.map(|v| (i, v)) })
        .buffer_unordered(QUORUM_READS_IN_FLIGHT)
        .try_collect()
        .await?;
    for (i, v) in read {
        out[i] = v;
    }
    Ok(out)
}

/// Where a version entry was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// This node's copy: no round trip.
    Local,
    /// A read quorum.
    Quorum,
}

/// The entry of a version known to be complete (its object entry, read
/// at quorum, says so), for a reader of its blocks: this node's copy when
/// this node holds it and `complete` accepts it, with no round trip;
/// otherwise [`read_version`]. A complete version's block list never
/// changes but for a re-encoding that keeps its bytes (a lifecycle
/// transition), so a local copy that lists every block (`complete`: its
/// blocks add up to the object's size) is the quorum's, or names blocks
/// of the same bytes that were replaced: a reader that fails to fetch one
/// reads again with [`read_version`].
pub async fn read_version_near(
    table: &Table<VersionTable>,
    uuid: &Uuid,
    complete: impl Fn(&Version) -> bool,
) -> Result<(Option<Version>, ReadFrom), garage_table::Error> {
    if let Some(entries) = table.get_partition_local(uuid, MAX_VERSION_ENTRIES).await? {
        if let Some(v) = Version::from_entries(&entries) {
            if !v.deleted.get() && complete(&v) {
                return Ok((Some(v), ReadFrom::Local));
            }
        }
    }
    Ok((read_version(table, uuid).await?, ReadFrom::Quorum))
}
