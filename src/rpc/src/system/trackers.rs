//! This node's side of the layout update trackers: which writes are still
//! running under older layout versions (for `ack`), and how far each table
//! has synced (for `sync`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::layout::{LayoutHistory, Tracker};

/// Writes in flight, by the layout version they were started under, then
/// by what they are (a label of the caller's).
type InFlight = Arc<Mutex<BTreeMap<u64, BTreeMap<&'static str, usize>>>>;

#[derive(Default)]
pub struct Progress {
    in_flight: InFlight,
    /// Tables of this node and the newest version each has synced.
    tables: Mutex<BTreeMap<String, u64>>,
}

/// Held for the duration of one write: the layout it uses, and a count
/// that keeps this node from acknowledging a newer version before the
/// write is done.
pub struct WriteGuard {
    pub layout: Arc<LayoutHistory>,
    version: u64,
    what: &'static str,
    in_flight: InFlight,
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        let mut m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(by_what) = m.get_mut(&self.version) {
            if let Some(c) = by_what.get_mut(self.what) {
                *c -= 1;
                if *c == 0 {
                    by_what.remove(self.what);
                }
            }
            if by_what.is_empty() {
                m.remove(&self.version);
            }
        }
    }
}

impl Progress {
    /// A write of kind `what` starts under `layout`.
    pub fn start_write(&self, layout: Arc<LayoutHistory>, what: &'static str) -> WriteGuard {
        let version = layout.current().version;
        *self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(version)
            .or_default()
            .entry(what)
            .or_default() += 1;
        WriteGuard {
            layout,
            version,
            what,
            in_flight: self.in_flight.clone(),
        }
    }

    /// The oldest layout version a write still running was started under,
    /// and those writes, counted by kind.
    pub fn oldest_in_flight(&self) -> Option<(u64, BTreeMap<&'static str, usize>)> {
        let m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().next().map(|(v, n)| (*v, n.clone()))
    }

    /// Tables that have not synced `version` yet.
    pub fn tables_behind(&self, version: u64) -> Vec<String> {
        let t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        t.iter()
            .filter(|(_, v)| **v < version)
            .map(|(n, v)| format!("{n} (at {v})"))
            .collect()
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

/// What keeps a layout change from finishing, as this node sees it: the
/// nodes whose trackers lag the current version (see
/// [`LayoutHistory::min_live_version`]), and this node's own reason when it
/// is one of them. `None` when every live version is the current one.
pub fn stall_reason(l: &LayoutHistory, me: &crate::NodeId, progress: &Progress) -> Option<String> {
    let current = l.current().version;
    if l.min_live_version() >= current {
        return None;
    }
    let mut lagging = Vec::new();
    for n in l.tracked_nodes() {
        let (a, s, sa) = (
            l.trackers.get(Tracker::Ack, &n),
            l.trackers.get(Tracker::Sync, &n),
            l.trackers.get(Tracker::SyncAck, &n),
        );
        if a < current || s < current || sa < current {
            lagging.push(format!("{} (ack {a}, sync {s}, sync_ack {sa})", n.short()));
        }
    }
    let mut why = format!(
        "layout version {current} not reached by every node (oldest live version {}); trackers behind: {}",
        l.min_live_version(),
        lagging.join(", ")
    );
    if let Some((v, kinds)) = progress.oldest_in_flight().filter(|(v, _)| *v < current) {
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        why.push_str(&format!(
            "; on this node {}, started under version {v} and still running: {}",
            me.short(),
            kinds.join(", ")
        ));
    }
    let behind = progress.tables_behind(l.trackers.get(Tracker::Ack, me).min(current));
    if !behind.is_empty() {
        why.push_str(&format!(
            "; tables of this node not synced yet: {}",
            behind.join(", ")
        ));
    }
    Some(why)
}

/// Turns a reason that may persist into log events: one warning once it has
/// lasted `after`, one notice when it ends (after a warning).
pub struct StallWatch {
    after: Duration,
    since: Option<Instant>,
    warned: bool,
}

/// What [`StallWatch::observe`] asks to log.
#[derive(Debug, PartialEq, Eq)]
pub enum StallEvent {
    Stalled(String),
    Resumed,
}

impl StallWatch {
    pub fn new(after: Duration) -> Self {
        Self {
            after,
            since: None,
            warned: false,
        }
    }

    pub fn observe(&mut self, reason: Option<String>, now: Instant) -> Option<StallEvent> {
        match reason {
            None => {
                self.since = None;
                std::mem::take(&mut self.warned).then_some(StallEvent::Resumed)
            }
            Some(why) => {
                let since = *self.since.get_or_insert(now);
                if !self.warned && now.duration_since(since) >= self.after {
                    self.warned = true;
                    return Some(StallEvent::Stalled(why));
                }
                None
            }
        }
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
        let g = p.start_write(old, "test write");
        h.stage_role(
            crate::NodeId::from([1; 32]),
            Some(crate::layout::NodeRole {
                zone: "a".into(),
                capacity: Some(1_000_000_000),
                tags: vec![],
            }),
        );
        h.apply(1).unwrap();
        let g1 = p.start_write(Arc::new(h), "test write");
        assert_eq!(p.ackable(1), 0, "a write under version 0 is running");
        drop(g);
        assert_eq!(p.ackable(1), 1);
        drop(g1);
        assert_eq!(p.ackable(1), 1);
    }

    #[test]
    fn a_stall_is_logged_once_after_its_delay_and_its_end_once() {
        let mut w = StallWatch::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let why = || Some("waiting".to_string());
        assert_eq!(w.observe(why(), t0), None);
        assert_eq!(w.observe(why(), t0 + Duration::from_secs(59)), None);
        assert_eq!(
            w.observe(why(), t0 + Duration::from_secs(60)),
            Some(StallEvent::Stalled("waiting".into()))
        );
        assert_eq!(w.observe(why(), t0 + Duration::from_secs(120)), None);
        assert_eq!(
            w.observe(None, t0 + Duration::from_secs(121)),
            Some(StallEvent::Resumed)
        );
        assert_eq!(w.observe(None, t0 + Duration::from_secs(122)), None);
        // A short stall says nothing.
        assert_eq!(w.observe(why(), t0 + Duration::from_secs(130)), None);
        assert_eq!(w.observe(None, t0 + Duration::from_secs(140)), None);
    }

    #[test]
    fn a_stall_names_the_lagging_nodes_and_this_nodes_old_writes() {
        let p = Progress::default();
        let me = crate::NodeId::from([1; 32]);
        let mut h = LayoutHistory::new(1);
        let role = |z: &str| {
            Some(crate::layout::NodeRole {
                zone: z.into(),
                capacity: Some(1_000_000_000),
                tags: vec![],
            })
        };
        h.stage_role(me, role("a"));
        h.apply(1).unwrap();
        for t in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            h.raise_tracker(t, me, 1);
        }
        assert_eq!(stall_reason(&h, &me, &p), None);
        let g = p.start_write(Arc::new(h.clone()), "test write");
        h.stage_role(crate::NodeId::from([2; 32]), role("b"));
        h.apply(2).unwrap();
        let why = stall_reason(&h, &me, &p).expect("version 1 still live");
        assert!(why.contains("ack 1, sync 1, sync_ack 1"), "{why}");
        assert!(
            why.contains("started under version 1 and still running: 1 test write"),
            "{why}"
        );
        drop(g);
        let why = stall_reason(&h, &me, &p).unwrap();
        assert!(!why.contains("still running"), "{why}");
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
