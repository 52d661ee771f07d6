//! The outbox: this node's durable queue of events to send, per topic,
//! in the order they were queued. An entry's key is the topic's name, a
//! zero byte and a sequence number (8 bytes, big-endian) taken in the
//! transaction that inserts it, so that the order of keys is the order of
//! commits: the delivery worker never sees an event before one queued
//! earlier on this node. Entries are removed once their endpoint
//! acknowledged them (at least once: an event sent and not yet removed
//! when the node stops is sent again).

use std::collections::BTreeMap;
use std::sync::Mutex;

use garage_db as db;
use serde::{Deserialize, Serialize};

/// One queued event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queued {
    /// The object key (logs; the record has it URL-encoded).
    pub key: String,
    /// When it was queued (ms since the epoch): the lag metric's start.
    pub queued_ms: u64,
    /// The record (one element of `Records`), as JSON text.
    pub record: String,
}

/// What waits for one topic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    pub events: u64,
    pub bytes: u64,
}

pub struct Outbox {
    db: db::Db,
    tree: db::Tree,
    /// The next sequence number (key `seq`).
    meta: db::Tree,
    /// Per topic, what waits (kept as entries come and go; counted from
    /// the tree at start).
    backlog: Mutex<BTreeMap<String, Backlog>>,
}

const SEQ_KEY: &[u8] = b"seq";

fn entry_key(topic: &str, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(topic.len() + 9);
    k.extend_from_slice(topic.as_bytes());
    k.push(0);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn split_key(k: &[u8]) -> Option<(&str, u64)> {
    let (topic, seq) = k.split_at_checked(k.len().checked_sub(9)?)?;
    let (zero, seq) = seq.split_first()?;
    if *zero != 0 {
        return None;
    }
    Some((
        std::str::from_utf8(topic).ok()?,
        u64::from_be_bytes(seq.try_into().ok()?),
    ))
}

impl Outbox {
    pub fn open(db: &db::Db) -> db::Result<Self> {
        Self::open_named(db, "notify_outbox")
    }

    /// A queue of its own in trees `name` and `name_meta` (the replication
    /// queue is one, its "topics" being destinations).
    pub fn open_named(db: &db::Db, name: &str) -> db::Result<Self> {
        let tree = db.open_tree(name)?;
        let meta = db.open_tree(&format!("{name}_meta"))?;
        let mut backlog: BTreeMap<String, Backlog> = BTreeMap::new();
        for kv in tree.iter() {
            let (k, v) = kv?;
            if let Some((topic, _)) = split_key(&k) {
                let b = backlog.entry(topic.to_string()).or_default();
                b.events += 1;
                b.bytes += v.len() as u64;
            }
        }
        Ok(Self {
            db: db.clone(),
            tree,
            meta,
            backlog: Mutex::new(backlog),
        })
    }

    /// Queues `events` (topic, event), in this order, in one transaction
    /// shared with other writes queued meanwhile (group commit); returns
    /// once it is committed (and synced as the metadata fsync policy
    /// says).
    pub async fn push(&self, events: Vec<(String, Queued)>) -> db::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let encoded: Vec<(String, Vec<u8>)> = events
            .iter()
            .map(|(t, q)| {
                (
                    t.clone(),
                    rmp_serde::to_vec_named(q).expect("event encodes"),
                )
            })
            .collect();
        let (tree, meta) = (self.tree.clone(), self.meta.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job_items = encoded.clone();
        self.db.transaction_grouped(
            move |t| {
                let mut seq = match t.get(&meta, SEQ_KEY)? {
                    Some(v) => u64::from_be_bytes(v.as_slice().try_into().unwrap_or([0; 8])),
                    None => 0,
                };
                for (topic, bytes) in &job_items {
                    t.insert(&tree, entry_key(topic, seq), bytes)?;
                    seq += 1;
                }
                t.insert(&meta, SEQ_KEY, seq.to_be_bytes())?;
                Ok::<_, db::TxError<()>>(())
            },
            move |r| {
                let _ = tx.send(r);
            },
        );
        match rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.into_db_error()),
            Err(_) => return Err(db::Error::Aborted("the commit thread stopped".into())),
        }
        let mut b = self.backlog.lock().expect("outbox lock");
        for (topic, bytes) in &encoded {
            let e = b.entry(topic.clone()).or_default();
            e.events += 1;
            e.bytes += bytes.len() as u64;
        }
        Ok(())
    }

    /// The topics with events waiting, and what waits for each.
    pub fn backlog(&self) -> BTreeMap<String, Backlog> {
        let b = self.backlog.lock().expect("outbox lock");
        b.iter()
            .filter(|(_, b)| b.events > 0)
            .map(|(t, b)| (t.clone(), *b))
            .collect()
    }

    /// Events waiting in all.
    pub fn len(&self) -> u64 {
        self.backlog
            .lock()
            .expect("outbox lock")
            .values()
            .map(|b| b.events)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `limit` events of `topic`, oldest first, with their
    /// sequence numbers.
    pub fn peek(&self, topic: &str, limit: usize) -> db::Result<Vec<(u64, Queued)>> {
        let start = entry_key(topic, 0);
        let end = entry_key(topic, u64::MAX);
        let mut out = Vec::new();
        for kv in self
            .tree
            .range::<&[u8], _>(start.as_slice()..=end.as_slice())
        {
            let (k, v) = kv?;
            let Some((_, seq)) = split_key(&k) else {
                continue;
            };
            match rmp_serde::from_slice::<Queued>(&v) {
                Ok(q) => out.push((seq, q)),
                Err(e) => {
                    // Never expected: drop it, loudly, rather than block
                    // the topic for ever.
                    tracing::error!(topic, seq, "unreadable queued event dropped: {e}");
                    self.remove(topic, &[seq])?;
                }
            }
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Removes events of `topic` (delivered, or dropped with the topic).
    pub fn remove(&self, topic: &str, seqs: &[u64]) -> db::Result<()> {
        let (tree, keys) = (
            self.tree.clone(),
            seqs.iter()
                .map(|s| entry_key(topic, *s))
                .collect::<Vec<_>>(),
        );
        let removed = self.db.transaction(|t| {
            let mut n = Backlog::default();
            for k in &keys {
                if let Some(v) = t.get(&tree, k)? {
                    n.events += 1;
                    n.bytes += v.len() as u64;
                    t.remove(&tree, k)?;
                }
            }
            Ok::<_, db::TxError<()>>(n)
        });
        let n = removed.map_err(db::TxError::into_db_error)?;
        let mut b = self.backlog.lock().expect("outbox lock");
        if let Some(e) = b.get_mut(topic) {
            e.events = e.events.saturating_sub(n.events);
            e.bytes = e.bytes.saturating_sub(n.bytes);
            if e.events == 0 {
                b.remove(topic);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(key: &str) -> Queued {
        Queued {
            key: key.into(),
            queued_ms: 1,
            record: format!("{{\"k\":\"{key}\"}}"),
        }
    }

    #[tokio::test]
    async fn events_wait_per_topic_in_order_and_survive_a_reopen() {
        let (dir, db) = crate::testing::temp_db_of(garage_db::Engine::Lmdb);
        let o = Outbox::open(&db).unwrap();
        o.push(vec![("a".into(), q("1")), ("b".into(), q("2"))])
            .await
            .unwrap();
        o.push(vec![("a".into(), q("3"))]).await.unwrap();
        assert_eq!(o.len(), 3);
        let a = o.peek("a", 10).unwrap();
        assert_eq!(
            a.iter().map(|(_, e)| e.key.as_str()).collect::<Vec<_>>(),
            ["1", "3"]
        );
        assert!(a[0].0 < a[1].0);
        o.remove("a", &[a[0].0]).unwrap();
        drop(o);
        let o = Outbox::open(&db).unwrap();
        let bl = o.backlog();
        assert_eq!(bl.len(), 2);
        assert_eq!(bl["a"].events, 1);
        assert_eq!(o.peek("a", 10).unwrap()[0].1.key, "3");
        // A topic whose name is a prefix of another's does not see its
        // events.
        o.push(vec![("ab".into(), q("4"))]).await.unwrap();
        assert_eq!(o.peek("a", 10).unwrap().len(), 1);
        // Sequence numbers keep growing after a reopen.
        let before = o.peek("b", 1).unwrap()[0].0;
        assert!(o.peek("ab", 1).unwrap()[0].0 > before);
        drop(dir);
    }
}
