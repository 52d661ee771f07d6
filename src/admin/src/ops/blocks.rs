//! Blocks and background workers of a node: block references, resync
//! retries, purges, block repairs, worker rows and variables.

use garage_block::manager::BlockManager;
use garage_block::rc::queue_key;
use garage_model::block_ref_table::BlockRefTable;
use garage_model::purge::{Purge, PurgeCount};
use garage_model::version_table::{read_version, VersionBacklink};
use garage_table::data::TableData;
use garage_util::data::{Hash, Uuid};
use garage_util::time::now_msec;
use tracing::info;

use garage_model::garage::Garage;

type Result<T> = std::result::Result<T, String>;

pub fn parse_hash(s: &str) -> Result<Hash> {
    s.parse()
        .map_err(|_| format!("{s:?} is not a block hash: give its 64 hexadecimal digits"))
}

/// A `block_ref` entry of a block and the version it names.
pub struct BlockRef {
    pub version: Uuid,
    /// What the version belongs to; none if the version is not found.
    pub backlink: Option<VersionBacklink>,
    /// Whether the version is deleted; none if it is not found.
    pub deleted: Option<bool>,
    /// Whether the `block_ref` entry itself is marked deleted.
    pub ref_deleted: bool,
}

/// The versions referencing a block (at most 1000).
pub async fn block_refs(g: &Garage, h: &Hash) -> Result<Vec<BlockRef>> {
    let refs = g
        .block_ref_table
        .get_range(h, None, None, 1000, false)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(refs.len());
    for r in refs {
        let v = read_version(&g.version_table, &r.version)
            .await
            .map_err(|e| e.to_string())?;
        out.push(BlockRef {
            version: r.version,
            backlink: v.as_ref().map(|v| v.backlink.clone()),
            deleted: v.as_ref().map(|v| v.deleted.get()),
            ref_deleted: r.deleted.get(),
        });
    }
    Ok(out)
}

/// Queues blocks (every block in error with `all`) for a resync now;
/// returns how many.
pub fn retry_now(m: &BlockManager, all: bool, blocks: &[String]) -> Result<usize> {
    let hashes: Vec<Hash> = if all {
        return m.retry_errors_now(usize::MAX).map_err(|e| e.to_string());
    } else if blocks.is_empty() {
        return Err("give block hashes, or --all".into());
    } else {
        blocks
            .iter()
            .map(|b| parse_hash(b))
            .collect::<Result<_>>()?
    };
    for h in hashes.iter() {
        m.rc.resync_queue
            .insert(queue_key(now_msec(), h), [])
            .map_err(|e| e.to_string())?;
    }
    Ok(hashes.len())
}

/// Deletes every object version and upload that uses these blocks.
pub async fn purge_blocks(g: &Garage, hashes: &[Hash]) -> Result<PurgeCount> {
    let purge = Purge {
        writer: g.writer.clone(),
    };
    let mut total = PurgeCount::default();
    for h in hashes.iter() {
        let c = purge.purge_block(h).await.map_err(|e| e.to_string())?;
        info!(
            block = %h.hex(),
            "block purge: {} versions deleted, {} objects deleted, {} uploads aborted, {} locked versions kept",
            c.versions, c.objects_deleted, c.uploads_aborted, c.locked
        );
        total.versions += c.versions;
        total.objects_deleted += c.objects_deleted;
        total.uploads_aborted += c.uploads_aborted;
        total.locked += c.locked;
    }
    Ok(total)
}

/// What a block repair does (`garage repair blocks | rebalance | scrub`,
/// LaunchRepairOperation).
#[derive(Debug, Clone, Copy)]
pub enum BlockRepair {
    /// Queue every block with a reference count for a resync check.
    Blocks,
    /// Move blocks to their data directory.
    Rebalance,
    /// Recount every block's references from the local `block_ref` table
    /// and fix the counts that differ.
    BlockRc,
    ScrubStart,
    ScrubPause,
    ScrubResume,
    ScrubCancel,
}

/// Runs a block repair; what it did, in words.
pub async fn repair(garage: &std::sync::Arc<Garage>, what: BlockRepair) -> Result<String> {
    let m = &garage.block_manager;
    match what {
        BlockRepair::Blocks => {
            let mut n = 0;
            for item in m.rc.rc.iter() {
                let (k, _) = item.map_err(|e| e.to_string())?;
                if let Some(h) = Hash::try_from_slice(&k) {
                    m.rc.resync_queue
                        .insert(queue_key(now_msec(), &h), [])
                        .map_err(|e| e.to_string())?;
                    n += 1;
                }
            }
            Ok(format!("{n} blocks queued for a resync check."))
        }
        BlockRepair::Rebalance => {
            let n = m.rebalance().await.map_err(|e| e.to_string())?;
            Ok(format!("{n} blocks moved to their data directory."))
        }
        BlockRepair::BlockRc => {
            let g = garage.clone();
            let (checked, fixed) = tokio::task::spawn_blocking(move || recount_rc(&g))
                .await
                .map_err(|e| format!("block-rc task failed: {e}"))??;
            info!("repair block-rc: {checked} blocks checked, {fixed} counts fixed");
            crate::ops::repair::count_run("block-rc", checked as u64, fixed as u64, 0);
            Ok(format!(
                "{checked} block reference counts checked, {fixed} fixed."
            ))
        }
        BlockRepair::ScrubStart => {
            m.scrub_start().map_err(|e| e.to_string())?;
            Ok("Scrub started.".into())
        }
        cmd => {
            let mut st = m.scrub_state().map_err(|e| e.to_string())?;
            let msg = match cmd {
                BlockRepair::ScrubPause => {
                    st.paused = true;
                    "Scrub paused."
                }
                BlockRepair::ScrubResume => {
                    st.paused = false;
                    "Scrub resumed."
                }
                _ => {
                    st.running = false;
                    st.cursor = None;
                    "Scrub cancelled."
                }
            };
            m.change_scrub_state(&st).map_err(|e| e.to_string())?;
            Ok(msg.into())
        }
    }
}

/// The live (not deleted) `block_ref` entries of block `h`, as the
/// transaction `tx` sees them: every entry whose key starts with the hash,
/// whatever the version id that follows it.
pub fn live_block_refs(
    tx: &garage_db::Transaction<'_>,
    data: &TableData<BlockRefTable>,
    h: &Hash,
) -> garage_db::TxResult<u64, String> {
    live_block_refs_and_code(tx, data, h).map(|(n, _)| n)
}

/// [`live_block_refs`], and the erasure code the entries give the block
/// (`None`: replicated), in one pass.
fn live_block_refs_and_code(
    tx: &garage_db::Transaction<'_>,
    data: &TableData<BlockRefTable>,
    h: &Hash,
) -> garage_db::TxResult<(u64, Option<garage_rpc::layout::Placement>), String> {
    let mut live = 0;
    let mut code = None;
    for item in tx.range(&data.store, h.as_slice()..)? {
        let (k, v) = item?;
        if !k.starts_with(h.as_slice()) {
            break;
        }
        let r = data
            .decode_stored(&k, &v)
            .map_err(|e| garage_db::TxError::Abort(e.to_string()))?;
        if !r.deleted.get() {
            live += 1;
        }
        code = code.or(r.ec);
    }
    Ok((live, code))
}

/// `repair block-rc`: every block's reference count recomputed from this
/// node's `block_ref` entries (the live ones), each block in one database
/// transaction with the entries it counts, so that a reference written
/// meanwhile is either counted or changes the count after the fix. Blocks
/// with a count and blocks with references are both visited. Returns how
/// many blocks were checked and how many counts were wrong (blocking:
/// database reads).
pub fn recount_rc(g: &Garage) -> Result<(usize, usize)> {
    let rc = &g.block_manager.rc;
    let data = &g.block_ref_table.data;
    let (mut checked, mut fixed) = (0, 0);
    let mut fix = |h: &Hash| -> Result<()> {
        let changed =
            g.db.transaction(|tx| -> garage_db::TxResult<bool, String> {
                let (live, code) = live_block_refs_and_code(tx, data, h)?;
                let changed = rc.reset(tx, h, live, now_msec())?;
                // An erasure-coded block's code, for its checks and GC.
                if let (true, Some(code)) = (live > 0, code) {
                    rc.note_ec(tx, h, code, now_msec())?;
                }
                Ok(changed)
            })
            .map_err(|e| format!("block {}: {e:?}", h.hex()))?;
        checked += 1;
        if changed {
            fixed += 1;
            info!(block = %h.hex(), "repair block-rc: reference count fixed");
        }
        Ok(())
    };
    for item in rc.rc.iter() {
        let (k, _) = item.map_err(|e| e.to_string())?;
        if let Some(h) = Hash::try_from_slice(&k) {
            fix(&h)?;
        }
    }
    // Blocks with references and no count at all.
    let mut last: Option<Hash> = None;
    for item in data.store.iter() {
        let (k, _) = item.map_err(|e| e.to_string())?;
        let Some(h) = k.get(..32).and_then(Hash::try_from_slice) else {
            continue;
        };
        if last == Some(h) {
            continue;
        }
        last = Some(h);
        if rc.get(&h).map_err(|e| e.to_string())?.is_none() {
            fix(&h)?;
        }
    }
    Ok((checked, fixed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_model::block_ref_table::{BlockRef, NoBlockRefHook};
    use std::sync::Arc;

    /// Every reference of a block is counted, including those whose version
    /// id starts with 0xff (the last keys of the block's range); the
    /// neighbouring blocks' references are not.
    #[test]
    fn live_block_refs_counts_exactly_the_blocks_references() {
        let dir = tempfile::tempdir().unwrap();
        let engine = garage_db::Engine::Lmdb;
        let db = garage_db::open(
            engine,
            &engine.db_path(dir.path()),
            &garage_db::OpenOptions::default(),
        )
        .unwrap();
        let data = TableData::new(
            BlockRefTable {
                hook: Arc::new(NoBlockRefHook),
            },
            db.clone(),
        )
        .unwrap();
        let h = Hash::from([7u8; 32]);
        let next = Hash::from([8u8; 32]);
        let id = |first: u8, last: u8| {
            let mut b = [last; 32];
            b[0] = first;
            Uuid::from(b)
        };
        for (block, version, deleted) in [
            (h, id(0x00, 1), false),
            (h, id(0x80, 2), false),
            (h, id(0xff, 3), false),
            (h, id(0xff, 0xff), false),
            (h, id(0x10, 4), true),
            (next, id(0x00, 5), false),
        ] {
            data.update_entry_with(&BlockRef::new(block, version, deleted))
                .unwrap();
        }
        let count = |b: &Hash| db.transaction(|tx| live_block_refs(tx, &data, b)).unwrap();
        assert_eq!(count(&h), 4);
        assert_eq!(count(&next), 1);
        assert_eq!(count(&Hash::from([0xffu8; 32])), 0);
    }
}
