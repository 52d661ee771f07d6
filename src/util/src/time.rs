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
//! Decisions that compare a stored time with "now" (retention, GC delays,
//! lifecycle ages) use the wall clock [`now_msec`], guarded by the node's
//! measured offset to its peers (`garage_rpc::system::clock`), never the
//! hybrid clock: one node running ahead moves every node's hybrid clock
//! ahead, which must not make anything expire early.

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

/// Stamps further ahead of this node's wall clock than this are not
/// observed: one entry with a wild timestamp (a clock years off, a
/// corrupted value) must not drag every later stamp of the node with it.
/// Ordering does not depend on observing them ([`increment_after`]).
pub const MAX_OBSERVED_AHEAD_MS: u64 = 24 * 3600 * 1000;

/// A stamp for a new write: after every stamp this node issued or
/// observed before, and at least the wall clock. Strictly increasing
/// within a process.
pub fn stamp() -> u64 {
    let now = now_msec();
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
    if ts <= now_msec().saturating_add(MAX_OBSERVED_AHEAD_MS) {
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
        // A stamp from a node whose clock is an hour ahead.
        let far = now_msec() + 3_600_000;
        observe(far);
        let c = stamp();
        assert!(c > far, "{c} must be after the observed {far}");
        // Observing an older stamp changes nothing.
        observe(a);
        assert!(stamp() > c);
        assert!(increment_after(c + 10) > c + 10);
        // A wild stamp is ordered after, not observed.
        let wild = u64::MAX - 5;
        assert_eq!(increment_after(wild), wild + 1);
        assert!(stamp() < wild);
        assert_eq!(increment_after(u64::MAX), u64::MAX);
    }
}
