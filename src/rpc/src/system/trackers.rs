//! This node's side of the layout update trackers: which writes are still
//! running under older layout versions (for `ack`), and how far each table
//! has synced (for `sync`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::layout::LayoutHistory;

#[derive(Default)]
pub struct Progress {
    /// Writes in flight, by the layout version they were started under.
    in_flight: Arc<Mutex<BTreeMap<u64, usize>>>,
    /// Tables of this node and the newest version each has synced.
    tables: Mutex<BTreeMap<String, u64>>,
}

/// Held for the duration of one write: the layout it uses, and a count
/// that keeps this node from acknowledging a newer version before the
/// write is done.
pub struct WriteGuard {
    pub layout: Arc<LayoutHistory>,
    version: u64,
    in_flight: Arc<Mutex<BTreeMap<u64, usize>>>,
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        let mut m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = m.get_mut(&self.version) {
            *c -= 1;
            if *c == 0 {
                m.remove(&self.version);
            }
        }
    }
}

impl Progress {
    pub fn start_write(&self, layout: Arc<LayoutHistory>) -> WriteGuard {
        let version = layout.current().version;
        *self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(version)
            .or_default() += 1;
        WriteGuard {
            layout,
            version,
            in_flight: self.in_flight.clone(),
        }
    }

    /// The newest version `<= current` this node can acknowledge: no write
    /// started under an older one is still running.
    pub fn ackable(&self, current: u64) -> u64 {
        let m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        match m.keys().next() {
            Some(&oldest) if oldest < current => oldest,
            _ => current,
        }
    }

    pub fn register_table(&self, name: &str) {
        self.tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_string())
            .or_insert(0);
    }

    pub fn table_synced(&self, name: &str, version: u64) {
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let e = t.entry(name.to_string()).or_insert(0);
        *e = (*e).max(version);
    }

    /// The newest version every table of this node has synced, if any
    /// table is registered.
    pub fn synced(&self) -> Option<u64> {
        self.tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .min()
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_waits_for_older_writes() {
        let p = Progress::default();
        let mut h = LayoutHistory::new(1);
        let old = Arc::new(h.clone());
        let g = p.start_write(old);
        h.stage_role(
            crate::NodeId::from([1; 32]),
            Some(crate::layout::NodeRole {
                zone: "a".into(),
                capacity: Some(1_000_000_000),
                tags: vec![],
            }),
        );
        h.apply(1).unwrap();
        let g1 = p.start_write(Arc::new(h));
        assert_eq!(p.ackable(1), 0, "a write under version 0 is running");
        drop(g);
        assert_eq!(p.ackable(1), 1);
        drop(g1);
        assert_eq!(p.ackable(1), 1);
    }

    #[test]
    fn synced_is_the_slowest_table() {
        let p = Progress::default();
        assert_eq!(p.synced(), None);
        p.register_table("a");
        p.register_table("b");
        p.table_synced("a", 3);
        assert_eq!(p.synced(), Some(0));
        p.table_synced("b", 2);
        assert_eq!(p.synced(), Some(2));
    }
}
