//! Time as garage stores it: milliseconds since the Unix epoch, from the
//! wall clock, and the node's hybrid logical clock that stamps writes.
//!
//! Wall clocks of cheap machines drift and jump, so which of two writes
//! wins never depends on them alone (see doc/ordering.md). A write is
//! stamped by [`stamp`]: the wall clock, or one more than the largest
//! stamp this node has issued or *observed* ([`observe`]) if that is
//! larger. Replicas observe the stamps of the writes they store, and a
//! coordinator observes the newer stamps replicas report back, so a node
//! whose clock is behind stamps its next writes after what it has seen.
//!
//! Stamps start from the cluster's time ([`crate::clock::cluster_now_msec`]:
//! the wall clock corrected by this node's measured offset from the
//! median of the nodes' clocks), and a stamp is observed only if it is at
//! most `max_clock_offset_msec` ahead of it: a node whose clock runs
//! ahead cannot drag the others' stamps, and so their `Last-Modified`,
//! into the future. Ordering never depends on observing
//! ([`increment_after`] orders a write after the one it must win over,
//! however far ahead that one is).
//!
//! Decisions that compare a stored time with "now" (retention, GC delays,
//! lifecycle ages) use the wall clock [`now_msec`], guarded by the node's
//! measured offset to its peers (`garage_rpc::system::clock`), never the
//! hybrid clock, which a stamp from ahead may have moved.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_msec() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The largest stamp this process has issued or observed.
static HLC: AtomicU64 = AtomicU64::new(0);

/// How far ahead of the cluster's time a stamp may be and still be
/// observed: the clock bound (`max_clock_offset_msec`). A stamp further
/// ahead (a node whose clock runs ahead and does not know it yet, a
/// corrupted value) is not observed, so it cannot drag every later stamp
/// of this node with it. Ordering does not depend on observing them
/// ([`increment_after`]).
pub fn max_observed_ahead_ms() -> u64 {
    crate::clock::bound_ms()
}

/// A stamp for a new write: after every stamp this node issued or
/// observed before, and at least the cluster's time. Strictly increasing
/// within a process.
pub fn stamp() -> u64 {
    let now = crate::clock::cluster_now_msec();
    let mut last = HLC.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.saturating_add(1));
        match HLC.compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(l) => last = l,
        }
    }
}

/// Records a stamp seen on another node's write (or reported by a
/// replica): the next [`stamp`] is after it.
pub fn observe(ts: u64) {
    if ts <= crate::clock::cluster_now_msec().saturating_add(max_observed_ahead_ms()) {
        HLC.fetch_max(ts, Ordering::AcqRel);
    }
}

/// The largest stamp issued or observed so far (0 before any).
pub fn last_stamp() -> u64 {
    HLC.load(Ordering::Acquire)
}

/// A timestamp for a new write that must win over one made at `previous`:
/// a fresh [`stamp`], and after `previous` even if that one is too far
/// ahead to be observed.
pub fn increment_after(previous: u64) -> u64 {
    observe(previous);
    stamp().max(previous.saturating_add(1))
}

/// A stored time (ms since the epoch) as RFC 3339, in UTC.
pub fn rfc3339(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_increase_and_pass_observed_ones() {
        let a = stamp();
        let b = stamp();
        assert!(b > a);
        // A stamp from a node whose clock is a little ahead (within the
        // bound): observed, the next stamp is after it.
        let near = now_msec() + 500;
        observe(near);
        let c = stamp();
        assert!(c > near, "{c} must be after the observed {near}");
        // Observing an older stamp changes nothing.
        observe(a);
        assert!(stamp() > c);
        assert!(increment_after(c + 10) > c + 10);
        // A stamp from a node 14 minutes ahead is not observed: the next
        // stamps stay near the wall clock; a write that must win over it
        // is still ordered after it.
        let ahead = now_msec() + 14 * 60 * 1000;
        observe(ahead);
        let d = stamp();
        assert!(d < ahead - 60_000, "{d} was dragged towards {ahead}");
        assert!(increment_after(ahead) > ahead);
        assert!(stamp() < ahead - 60_000);
        // A wild stamp is ordered after, not observed.
        let wild = u64::MAX - 5;
        assert_eq!(increment_after(wild), wild + 1);
        assert!(stamp() < wild);
        assert_eq!(increment_after(u64::MAX), u64::MAX);
    }
}
