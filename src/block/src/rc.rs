//! Reference counts of the blocks this node stores, kept in the metadata
//! database and changed inside the `block_ref` table's transactions, so
//! they never drift from the references. Every change that may require
//! work on the block (fetch it, or delete it later) also queues the block
//! for the resync worker, in the same transaction.

use garage_db as db;
use garage_rpc::layout::{EcCode, Placement};
use garage_util::data::Hash;
use serde::{Deserialize, Serialize};

/// How long after its first reference the shards of an erasure-coded
/// block are first checked.
pub const EC_CHECK_DELAY_MS: u64 = 30_000;

/// A block's state on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RcEntry {
    /// Referenced `count` times: the block must be stored here.
    Present { count: u64 },
    /// No longer referenced: the block may be deleted once
    /// `deletable_after` (ms since the epoch) has passed, unless it is
    /// referenced again meanwhile.
    Deletable { deletable_after: u64 },
}

impl RcEntry {
    pub fn count(&self) -> u64 {
        match self {
            RcEntry::Present { count } => *count,
            RcEntry::Deletable { .. } => 0,
        }
    }
}

/// The reference count tree and the resync queue.
#[derive(Clone)]
pub struct BlockRc {
    db: db::Db,
    pub rc: db::Tree,
    /// Key: due time (ms, big-endian) ++ hash; value: empty.
    pub resync_queue: db::Tree,
    /// Blocks whose resync failed (see `resync.rs`).
    pub resync_errors: db::Tree,
    /// Scrub progress (see `scrub.rs`).
    pub scrub: db::Tree,
    /// The erasure code of each erasure-coded block counted here (hash ->
    /// data, parity): its references are counted here, its shards are on
    /// the nodes of its code's placement (see `crate::shards`).
    pub ec_codes: db::Tree,
    /// How long an unreferenced block is kept (a reference may come back:
    /// a version being written, a resynced table).
    pub delete_delay_ms: u64,
}

fn decode(bytes: Option<Vec<u8>>) -> db::Result<Option<RcEntry>> {
    bytes
        .map(|b| {
            rmp_serde::from_slice(&b)
                .map_err(|e| db::Error::Aborted(format!("corrupt block reference count: {e}")))
        })
        .transpose()
}

pub fn queue_key(due_ms: u64, hash: &Hash) -> Vec<u8> {
    let mut k = due_ms.to_be_bytes().to_vec();
    k.extend_from_slice(hash.as_slice());
    k
}

impl BlockRc {
    pub fn open(db: &db::Db, delete_delay_ms: u64) -> db::Result<Self> {
        Ok(Self {
            db: db.clone(),
            rc: db.open_tree("block_local_rc")?,
            resync_queue: db.open_tree("block_resync_queue")?,
            resync_errors: db.open_tree("block_resync_errors")?,
            scrub: db.open_tree("block_scrub")?,
            ec_codes: db.open_tree("block_ec_codes")?,
            delete_delay_ms,
        })
    }

    pub fn db(&self) -> &db::Db {
        &self.db
    }

    pub fn get(&self, hash: &Hash) -> db::Result<Option<RcEntry>> {
        decode(self.rc.get(hash.as_slice())?)
    }

    fn put(&self, tx: &mut db::Transaction<'_>, hash: &Hash, e: RcEntry) -> db::Result<()> {
        let bytes = rmp_serde::to_vec(&e).expect("an rc entry serializes");
        tx.insert(&self.rc, hash.as_slice(), bytes)
    }

    /// One more reference. The first one queues a resync now (fetch the
    /// block if it is not here).
    pub fn incref(&self, tx: &mut db::Transaction<'_>, hash: &Hash, now_ms: u64) -> db::Result<()> {
        let old = decode(tx.get(&self.rc, hash.as_slice())?)?;
        let count = old.map(|e| e.count()).unwrap_or(0) + 1;
        self.put(tx, hash, RcEntry::Present { count })?;
        if count == 1 {
            tx.insert(&self.resync_queue, queue_key(now_ms, hash), [])?;
        }
        Ok(())
    }

    /// No reference left: the block may be deleted after the delay, when
    /// a resync is queued for it.
    fn make_deletable(
        &self,
        tx: &mut db::Transaction<'_>,
        hash: &Hash,
        now_ms: u64,
    ) -> db::Result<()> {
        let after = now_ms + self.delete_delay_ms;
        self.put(
            tx,
            hash,
            RcEntry::Deletable {
                deletable_after: after,
            },
        )?;
        tx.insert(&self.resync_queue, queue_key(after, hash), [])
    }

    /// One reference less. The last one makes the block deletable after
    /// the delay, and queues a resync for then.
    pub fn decref(&self, tx: &mut db::Transaction<'_>, hash: &Hash, now_ms: u64) -> db::Result<()> {
        let old = decode(tx.get(&self.rc, hash.as_slice())?)?;
        match old.map(|e| e.count()).unwrap_or(0) {
            0 => Ok(()), // nothing to release (never counted here)
            1 => self.make_deletable(tx, hash, now_ms),
            n => self.put(tx, hash, RcEntry::Present { count: n - 1 }),
        }
    }

    /// The block was just written here (a PUT that will reference it):
    /// if it was waiting for deletion, the deletion waits a full delay
    /// again, so that the reference on its way arrives first.
    pub fn touch(&self, hash: &Hash, now_ms: u64) -> db::Result<()> {
        let rc = &self.rc;
        self.db
            .transaction(|tx| -> db::TxResult<(), ()> {
                if let Some(RcEntry::Deletable { deletable_after }) =
                    decode(tx.get(rc, hash.as_slice())?)?
                {
                    let after = deletable_after.max(now_ms + self.delete_delay_ms);
                    self.put(
                        tx,
                        hash,
                        RcEntry::Deletable {
                            deletable_after: after,
                        },
                    )?;
                    tx.insert(&self.resync_queue, queue_key(after, hash), [])?;
                }
                Ok(())
            })
            .map_err(|e| e.into_db_error())
    }

    /// Sets the block's count to `count`, recounted from the references
    /// (`garage repair block-rc`), in the transaction that read them.
    /// As [`incref`](Self::incref) and [`decref`](Self::decref) do, a count
    /// that becomes non-zero queues a resync now (fetch the block), and one
    /// that drops to zero makes the block deletable after the delay.
    /// Returns whether the entry changed.
    pub fn reset(
        &self,
        tx: &mut db::Transaction<'_>,
        hash: &Hash,
        count: u64,
        now_ms: u64,
    ) -> db::Result<bool> {
        let old = decode(tx.get(&self.rc, hash.as_slice())?)?;
        let old_count = old.map(|e| e.count()).unwrap_or(0);
        if old_count == count {
            return Ok(false);
        }
        if count == 0 {
            self.make_deletable(tx, hash, now_ms)?;
        } else {
            self.put(tx, hash, RcEntry::Present { count })?;
            if old_count == 0 {
                tx.insert(&self.resync_queue, queue_key(now_ms, hash), [])?;
            }
        }
        Ok(true)
    }

    /// Records that block `hash` is erasure-coded with `code`. Its first
    /// resync (a check that every shard is stored) waits
    /// [`EC_CHECK_DELAY_MS`]: the PUT that references it writes the
    /// shards at the same time as the reference.
    pub fn note_ec(
        &self,
        tx: &mut db::Transaction<'_>,
        hash: &Hash,
        code: Placement,
        now_ms: u64,
    ) -> db::Result<()> {
        tx.insert(&self.ec_codes, hash.as_slice(), encode_placement(code))?;
        if tx
            .get(&self.resync_queue, queue_key(now_ms, hash))?
            .is_some()
        {
            tx.remove(&self.resync_queue, queue_key(now_ms, hash))?;
            tx.insert(
                &self.resync_queue,
                queue_key(now_ms + EC_CHECK_DELAY_MS, hash),
                [],
            )?;
        }
        Ok(())
    }

    /// The erasure code of block `hash`, if it is erasure-coded.
    pub fn ec_code(&self, hash: &Hash) -> db::Result<Option<Placement>> {
        Ok(self
            .ec_codes
            .get(hash.as_slice())?
            .and_then(|v| decode_placement(&v)))
    }

    /// Forgets a block that was deleted (its entry said deletable).
    pub fn clear_deleted(&self, hash: &Hash) -> db::Result<()> {
        let rc = &self.rc;
        self.db
            .transaction(|tx| -> db::TxResult<(), ()> {
                if let Some(RcEntry::Deletable { .. }) = decode(tx.get(rc, hash.as_slice())?)? {
                    tx.remove(rc, hash.as_slice())?;
                    tx.remove(&self.ec_codes, hash.as_slice())?;
                }
                Ok(())
            })
            .map_err(|e| e.into_db_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_util::data::blake2sum;

    fn open() -> (tempfile::TempDir, db::Db, BlockRc) {
        let dir = tempfile::tempdir().unwrap();
        let engine = db::Engine::Lmdb;
        let d = db::open(
            engine,
            &engine.db_path(dir.path()),
            &db::OpenOptions::default(),
        )
        .unwrap();
        let rc = BlockRc::open(&d, 1000).unwrap();
        (dir, d, rc)
    }

    fn queued(rc: &BlockRc) -> Vec<(u64, Hash)> {
        rc.resync_queue
            .iter()
            .map(|i| {
                let (k, _) = i.unwrap();
                (
                    u64::from_be_bytes(k[..8].try_into().unwrap()),
                    Hash::try_from_slice(&k[8..]).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_recount_sets_the_count_and_queues_what_it_implies() {
        let (_d, db, rc) = open();
        let h = blake2sum(b"block");
        let reset = |count: u64, now: u64| {
            db.transaction(|t| -> db::TxResult<bool, ()> { Ok(rc.reset(t, &h, count, now)?) })
                .unwrap()
        };
        assert!(!reset(0, 5), "no entry and no reference: nothing to fix");
        assert!(rc.get(&h).unwrap().is_none());
        assert!(reset(3, 10));
        assert_eq!(rc.get(&h).unwrap(), Some(RcEntry::Present { count: 3 }));
        assert_eq!(
            queued(&rc),
            vec![(10, h)],
            "a count from 0 fetches the block"
        );
        assert!(!reset(3, 20));
        assert!(reset(2, 30));
        assert_eq!(
            queued(&rc).len(),
            1,
            "a count that stays non-zero queues nothing"
        );
        assert!(reset(0, 40));
        assert_eq!(
            rc.get(&h).unwrap(),
            Some(RcEntry::Deletable {
                deletable_after: 1040
            })
        );
        assert_eq!(queued(&rc), vec![(10, h), (1040, h)]);
        assert!(
            !reset(0, 50),
            "already deletable: the delay is not restarted"
        );
    }

    #[test]
    fn counts_follow_references_and_queue_resyncs() {
        let (_d, db, rc) = open();
        let h = blake2sum(b"block");
        let tx = |f: &dyn Fn(&mut db::Transaction<'_>) -> db::Result<()>| {
            db.transaction(|t| -> db::TxResult<(), ()> { Ok(f(t)?) })
                .unwrap()
        };
        tx(&|t| rc.incref(t, &h, 10));
        tx(&|t| rc.incref(t, &h, 20));
        assert_eq!(rc.get(&h).unwrap(), Some(RcEntry::Present { count: 2 }));
        assert_eq!(
            queued(&rc),
            vec![(10, h)],
            "only the first reference queues a fetch"
        );
        tx(&|t| rc.decref(t, &h, 30));
        assert_eq!(rc.get(&h).unwrap(), Some(RcEntry::Present { count: 1 }));
        tx(&|t| rc.decref(t, &h, 40));
        assert_eq!(
            rc.get(&h).unwrap(),
            Some(RcEntry::Deletable {
                deletable_after: 1040
            })
        );
        assert_eq!(queued(&rc), vec![(10, h), (1040, h)]);
        // Referenced again before the delay: present again.
        tx(&|t| rc.incref(t, &h, 50));
        assert_eq!(rc.get(&h).unwrap(), Some(RcEntry::Present { count: 1 }));
        rc.clear_deleted(&h).unwrap();
        assert!(
            rc.get(&h).unwrap().is_some(),
            "a present block is not cleared"
        );
        // A decref of an unknown block changes nothing.
        let other = blake2sum(b"other");
        tx(&|t| rc.decref(t, &other, 60));
        assert_eq!(rc.get(&other).unwrap(), None);
    }
}

/// How the placement of an erasure-coded block is kept in `ec_codes`: data
/// and parity counts, then the scope (4 bytes, big-endian) when not 0.
fn encode_placement(p: Placement) -> Vec<u8> {
    let mut v = vec![p.data, p.parity];
    if p.scope != 0 {
        v.extend_from_slice(&p.scope.to_be_bytes());
    }
    v
}

fn decode_placement(v: &[u8]) -> Option<Placement> {
    let (data, parity) = (*v.first()? as usize, *v.get(1)? as usize);
    match v.get(2..6) {
        None => EcCode::new(data, parity).ok().map(Placement::from),
        Some(s) => {
            let scope = u32::from_be_bytes(s.try_into().ok()?);
            let code = if data == 1 {
                EcCode::copies(parity + 1).ok()?
            } else {
                EcCode::new(data, parity).ok()?
            };
            Some(Placement::new(code, scope))
        }
    }
}

#[cfg(test)]
mod placement_tests {
    use super::*;

    #[test]
    fn placements_keep_their_bytes_and_scope() {
        let old = Placement::from(EcCode::new(2, 1).unwrap());
        assert_eq!(encode_placement(old), vec![2, 1]);
        assert_eq!(decode_placement(&[2, 1]), Some(old));
        let one = Placement::new(EcCode::copies(1).unwrap(), 77);
        assert_eq!(decode_placement(&encode_placement(one)), Some(one));
        let eu = Placement::new(EcCode::copies(2).unwrap(), u32::MAX);
        assert_eq!(decode_placement(&encode_placement(eu)), Some(eu));
        assert_eq!(decode_placement(&[1, 0]), None);
    }
}
