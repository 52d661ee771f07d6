//! Versions of an erasure-coded storage class that have blocks stored
//! replicated, waiting to be re-encoded in their class.
//!
//! A block of an erasure-coded class is written replicated when a node of
//! its shards is down or not yet seen (`garage_block::shards`); the write
//! is not refused for it. The node that wrote such a block queues the
//! block's version here (a local tree, kept across restarts), with the
//! bytes stored replicated; the catch-up worker of the S3 API re-encodes
//! the version once every node of its shards is up, and removes it.
//!
//! Keyed by version uuid (a part's version for a multipart upload, whose
//! blocks move into the completed object's version), so a version queued
//! twice is one entry, its bytes summed.

use garage_db as db;
use garage_util::data::Uuid;

/// The queue (tree `ec_catch_up`): version uuid → (bytes stored
/// replicated, when first queued in ms), both u64 big-endian.
#[derive(Clone)]
pub struct EcCatchUp {
    tree: db::Tree,
}

/// One queued version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub version: Uuid,
    /// Bytes of its blocks stored replicated.
    pub bytes: u64,
    /// When it was first queued (ms since the epoch, this node's clock).
    pub since_ms: u64,
}

fn decode(k: &[u8], v: &[u8]) -> Option<Waiting> {
    let version = Uuid::try_from_slice(k)?;
    let bytes = u64::from_be_bytes(v.get(0..8)?.try_into().ok()?);
    let since_ms = u64::from_be_bytes(v.get(8..16)?.try_into().ok()?);
    Some(Waiting {
        version,
        bytes,
        since_ms,
    })
}

impl EcCatchUp {
    pub fn open(db: &db::Db) -> db::Result<Self> {
        Ok(Self {
            tree: db.open_tree("ec_catch_up")?,
        })
    }

    /// Queues `version` with `bytes` more stored replicated.
    pub fn push(&self, version: Uuid, bytes: u64) -> db::Result<()> {
        let now = garage_util::time::now_msec();
        let (before, since) = match self.tree.get(version.as_slice())? {
            Some(v) => decode(version.as_slice(), &v).map_or((0, now), |w| (w.bytes, w.since_ms)),
            None => (0, now),
        };
        let mut value = Vec::with_capacity(16);
        value.extend_from_slice(&before.saturating_add(bytes).to_be_bytes());
        value.extend_from_slice(&since.to_be_bytes());
        self.tree.insert(version.as_slice(), value)
    }

    /// Up to `limit` queued versions, in uuid order after `after` (to page
    /// through the queue).
    pub fn list(&self, after: Option<Uuid>, limit: usize) -> db::Result<Vec<Waiting>> {
        let iter = match after {
            Some(a) => self.tree.range::<&[u8], _>((
                std::ops::Bound::Excluded(a.as_slice()),
                std::ops::Bound::Unbounded,
            )),
            None => self.tree.iter(),
        };
        let mut out = Vec::new();
        for kv in iter {
            let (k, v) = kv?;
            if let Some(w) = decode(&k, &v) {
                out.push(w);
            }
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Takes `version` off the queue (re-encoded, or gone).
    pub fn remove(&self, version: &Uuid) -> db::Result<()> {
        self.tree.remove(version.as_slice())
    }

    /// Versions waiting.
    pub fn len(&self) -> db::Result<usize> {
        self.tree.len()
    }

    pub fn is_empty(&self) -> db::Result<bool> {
        self.tree.is_empty()
    }

    /// Versions waiting and their bytes stored replicated (a scan of the
    /// queue, which is short: it holds what outages left behind).
    pub fn totals(&self) -> db::Result<(u64, u64)> {
        let (mut n, mut bytes) = (0u64, 0u64);
        for kv in self.tree.iter() {
            let (k, v) = kv?;
            if let Some(w) = decode(&k, &v) {
                n += 1;
                bytes = bytes.saturating_add(w.bytes);
            }
        }
        Ok((n, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_versions_sum_their_bytes_and_page() {
        let (_dir, db) = crate::testing::temp_db_of(garage_db::Engine::Sqlite);
        let q = EcCatchUp::open(&db).unwrap();
        assert!(q.is_empty().unwrap());
        let a = Uuid::from([1u8; 32]);
        let b = Uuid::from([2u8; 32]);
        q.push(a, 100).unwrap();
        q.push(b, 5).unwrap();
        q.push(a, 20).unwrap();
        assert_eq!(q.len().unwrap(), 2);
        assert_eq!(q.totals().unwrap(), (2, 125));
        let first = q.list(None, 1).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].version, first[0].bytes), (a, 120));
        let next = q.list(Some(a), 10).unwrap();
        assert_eq!(next.iter().map(|w| w.version).collect::<Vec<_>>(), vec![b]);
        q.remove(&a).unwrap();
        assert_eq!(q.totals().unwrap(), (1, 5));
    }
}
