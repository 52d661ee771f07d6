//! Lifecycle transitions: a version's blocks re-encoded in place in an
//! erasure-coded storage class, keeping its version id, ETag, dates,
//! headers and checksums (S3's semantics: a transition changes where the
//! bytes are kept, nothing a client reads). The lifecycle worker decides
//! what moves (`worker.rs`); the transition worker there calls
//! [`Garage::transition`] for each.
//!
//! The steps, each safe to stop after (the next pass redoes what is left):
//! 1. each block not yet in the code is read whole (its hash checked),
//!    erasure-coded, and its shards written as a PUT writes them (acked per
//!    `doc/durability.md`), with a reference from the version;
//! 2. the version's segments are written with the new blocks, which win
//!    over the former ones in every merge (`VersionBlock`'s CRDT: coded
//!    over replicated, a higher `recoded` count over a lower);
//! 3. the object entry (and the history entry of a versioned version) is
//!    written with the class, the first block's new address and its code,
//!    which also wins over the old state (`ObjectVersionState::merge`);
//! 4. the version's references to the replaced blocks are dropped, so that
//!    the blocks are freed after the usual delete delay (a GET already
//!    streaming them finishes first).
//!
//! `GARAGE_TEST_CRASH_IN_TRANSITION` (tests only) aborts the process
//! after step 2, to test the resume path.
//!
//! A version deleted meanwhile stays deleted (deletion wins in the version
//! and object tables), and its new blocks lose their references with it.
//! Until step 4 the old blocks stay referenced: a stop in between leaves
//! two copies of some blocks until the next pass, never none. The next
//! pass finds those blocks already in the code, reads them to learn their
//! earlier addresses, and drops those references too.

use crate::notify::{Cause, Op};
use std::collections::HashSet;

use crate::block_ref_table::BlockRef;
use crate::object_table::{ObjectVersion, ObjectVersionData, ObjectVersionState};
use crate::version_table::{read_version, Version, VersionBlock, VersionBlockKey};
use garage_rpc::layout::Placement;
use garage_util::data::{blake2sum, Hash, Uuid};

use super::{LifecycleError, Result};
use crate::garage::Garage;

/// Blocks re-encoded at once per transition (each holds one block, 1 MiB,
/// in memory).
const IN_FLIGHT: usize = 4;

/// What one transition did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transitioned {
    /// Every block is in the class's code now; this many were re-encoded.
    Done { blocks: usize },
    /// Not now: a node of some block's shards is down (the block would
    /// be written replicated again). Retried at the next pass.
    NodesDown,
    /// The version has no blocks any more (deleted meanwhile).
    Gone,
}

impl Garage {
    /// Moves version `v` of `bucket`/`key` (complete data with blocks) to
    /// storage class `class`, whose code is `code`. See the module
    /// comment for the steps.
    pub async fn transition(
        &self,
        bucket: Uuid,
        key: &str,
        v: &ObjectVersion,
        class: &str,
        code: Placement,
    ) -> Result<Transitioned> {
        let ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, _)) = &v.state else {
            return Ok(Transitioned::Gone);
        };
        let Some(version) = read_version(&self.version_table, &v.uuid)
            .await?
            .filter(|x| !x.deleted.get() && !x.blocks.is_empty())
        else {
            return Ok(Transitioned::Gone);
        };
        // Once the cluster allows `recoded-blocks`, every block not in
        // `code` is re-encoded, and the new forms carry a higher `recoded`
        // count, which wins every merge of the block list and the object
        // entry. Before, only replicated blocks are: of two coded forms of
        // one position the merge keeps the larger, not the newer, so
        // replacing one could keep the old form in the list while step 4
        // drops its reference (the lifecycle worker then moves no data
        // between two coded classes).
        let recode = self.recode_allowed();
        let todo: Vec<(VersionBlockKey, VersionBlock)> = version
            .blocks
            .items()
            .filter(|(_, b)| {
                if recode {
                    b.ec != Some(code)
                } else {
                    b.ec.is_none()
                }
            })
            .map(|(k, b)| (*k, *b))
            .collect();
        if todo.iter().any(|(_, b)| !self.shard_nodes_up(b, code)) {
            return Ok(Transitioned::NodesDown);
        }
        // Step 1: the blocks, IN_FLIGHT at a time.
        let mut recoded: Vec<(VersionBlockKey, VersionBlock)> = Vec::with_capacity(todo.len());
        for chunk in todo.chunks(IN_FLIGHT) {
            let done = futures::future::try_join_all(
                chunk
                    .iter()
                    .map(|(_, b)| self.recode(v.uuid, *b, code, recode)),
            )
            .await?;
            recoded.extend(chunk.iter().map(|(k, _)| *k).zip(done));
        }
        // Step 2: the version's segments, whole (a segment is cut by the
        // block's index in its part, so every block is given).
        let mut blocks = version.blocks.clone();
        for (k, b) in recoded.iter() {
            blocks.put(*k, *b);
        }
        let segments = Version::segments(v.uuid, &version.backlink, blocks.items());
        self.version_table.insert_many(&segments).await?;
        if garage_util::tuning::tuning().crash_in_transition {
            // Tests of the resume path: the process dies between steps 2
            // and 3, as a power cut would leave it.
            tracing::error!(%key, "GARAGE_TEST_CRASH_IN_TRANSITION: aborting after step 2");
            std::process::abort();
        }
        // Step 3: the object's entry.
        let (first_key, first) = blocks
            .items()
            .next()
            .map(|(k, b)| (*k, *b))
            .expect("the version has blocks");
        debug_assert_eq!(first_key.offset, 0);
        let mut meta = meta.clone();
        meta.storage_class = Some(class.to_string());
        meta.first_ec = first.ec;
        if recode {
            meta.recoded += 1;
        }
        let moved = ObjectVersion {
            state: ObjectVersionState::Complete(ObjectVersionData::FirstBlock(meta, first.hash)),
            ..v.clone()
        };
        self.writer
            .write_moved(bucket, key, &moved, &Cause::node(Op::Transition))
            .await?;
        // Step 4: the references to the replaced blocks: those replaced
        // now, and those an earlier run replaced before it stopped (blocks
        // already in the code while the object is not yet in the class).
        let mut old: HashSet<Hash> = todo.iter().map(|(_, b)| b.hash).collect();
        old.extend(self.earlier_forms(&version, code).await?);
        let kept: HashSet<Hash> = blocks.items().map(|(_, b)| b.hash).collect();
        let dropped: Vec<BlockRef> = old
            .into_iter()
            .filter(|h| !kept.contains(h))
            .map(|h| BlockRef::new(h, v.uuid, true))
            .collect();
        if !dropped.is_empty() {
            self.block_ref_table.insert_many(&dropped).await?;
        }
        Ok(Transitioned::Done {
            blocks: recoded.len(),
        })
    }

    /// The addresses the blocks of `version` already in `code` had before
    /// (an earlier run of the transition re-encoded them, then stopped
    /// before dropping their references): each block is read to learn its
    /// content hash, which is its replicated address, and its address in
    /// every other code the layout knows. Dropping a reference that does
    /// not exist does nothing, so all of them are given.
    async fn earlier_forms(&self, version: &Version, code: Placement) -> Result<Vec<Hash>> {
        let coded: Vec<VersionBlock> = version
            .blocks
            .items()
            .filter(|(_, b)| b.ec == Some(code))
            .map(|(_, b)| *b)
            .collect();
        if coded.is_empty() {
            return Ok(Vec::new());
        }
        let codes: Vec<Placement> = self
            .block_manager
            .system
            .layout()
            .current()
            .ec_rings
            .iter()
            .map(|r| r.placement())
            .filter(|c| *c != code)
            .collect();
        let mut out = Vec::new();
        for chunk in coded.chunks(IN_FLIGHT) {
            let contents = futures::future::try_join_all(chunk.iter().map(|b| async move {
                let data = self.block_manager.get_any(&b.hash, b.ec).await?;
                tokio::task::spawn_blocking(move || blake2sum(&data))
                    .await
                    .map_err(|e| LifecycleError::Internal(format!("hashing task: {e}")))
            }))
            .await?;
            for content in contents {
                out.push(content);
                out.extend(
                    codes
                        .iter()
                        .map(|c| garage_block::ec::ec_address(&content, *c)),
                );
            }
        }
        Ok(out)
    }

    /// Whether every node of the shards `b` would have in `code` is up
    /// (for a block in another code, its address in `code` is not known
    /// before it is read; those are checked by [`Api::recode`]).
    fn shard_nodes_up(&self, b: &VersionBlock, code: Placement) -> bool {
        b.ec.is_some() || {
            let addr = garage_block::ec::ec_address(&b.hash, code);
            self.block_manager.ec_writable(&addr, code)
        }
    }

    /// Whether the cluster allows `recoded-blocks` (see [`Garage::transition`]).
    pub fn recode_allowed(&self) -> bool {
        self.block_manager
            .system
            .feature_allowed(&garage_rpc::system::versions::RECODED_BLOCKS)
    }

    /// Block `b` of version `uuid` read, checked, erasure-coded in `code`,
    /// its shards written and referenced by the version: the new block,
    /// one re-encoding newer than `b` when `count`.
    async fn recode(
        &self,
        uuid: Uuid,
        b: VersionBlock,
        code: Placement,
        count: bool,
    ) -> Result<VersionBlock> {
        let data = self.block_manager.get_any(&b.hash, b.ec).await?;
        let content = match b.ec {
            // Read by its address: checked against it.
            None => b.hash,
            Some(_) => {
                let d = data.clone();
                tokio::task::spawn_blocking(move || blake2sum(&d))
                    .await
                    .map_err(|e| LifecycleError::Internal(format!("hashing task: {e}")))?
            }
        };
        let addr = garage_block::ec::ec_address(&content, code);
        if !self.block_manager.ec_writable(&addr, code) {
            return Err(LifecycleError::Internal(format!(
                "a node of the shards of block {} is down",
                addr.short()
            )));
        }
        let block = VersionBlock {
            hash: addr,
            size: b.size,
            ec: Some(code),
            recoded: b.recoded + u32::from(count),
        };
        let block_ref = BlockRef::to_block(&block, uuid);
        let (put, r) = tokio::join!(
            self.block_manager.put_block_ec(content, data, code),
            self.block_ref_table.insert(&block_ref),
        );
        put?;
        r?;
        Ok(block)
    }
}
