//! Clock health: how far this node's wall clock is from its peers', and
//! whether decisions that compare a stored time with "now" may be taken.
//!
//! `garage_rpc` measures each peer's offset from the ping round trips and
//! sets this node's offset from the cluster (the median of the nodes'
//! clocks) here with [`set_offset`]; anything that would act because
//! enough time has passed (retention expiry, lifecycle expiration, the GC
//! delays, the conditional register's void age) asks [`check`] first and
//! refuses or defers when the clock is off by more than the bound
//! (`max_clock_offset_msec`, [`set_bound`]): a clock running ahead must
//! never make something expire early. See doc/ordering.md.
//!
//! The same measure gives the cluster's time ([`cluster_now_msec`]): this
//! node's wall clock corrected by its offset from the median of the
//! nodes' clocks when that offset is beyond the bound. New writes are stamped with it and the SigV4 time window
//! is judged against it, so one node whose clock is off neither stamps
//! `Last-Modified` in the future or past nor refuses correctly signed
//! requests. Where the median is ambiguous (two nodes, or an even count
//! whose middle clocks disagree), the correction keeps this node's own
//! clock: a node never moves its time towards a clock it cannot tell is
//! right.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Default bound on a node's offset from its peers' clocks.
pub const DEFAULT_BOUND_MS: u64 = 2000;

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
/// This node's measured offset from the cluster's time, for
/// [`cluster_now_msec`] (see [`correction_from_median`]).
static CORRECTION_MS: AtomicI64 = AtomicI64::new(0);
static MEASURED: AtomicBool = AtomicBool::new(false);
static BOUND_MS: AtomicU64 = AtomicU64::new(DEFAULT_BOUND_MS);
/// When the offset was last measured: the wall clock and the monotonic
/// clock then, so that a jump of the wall clock since counts at once,
/// before the next ping measures it.
static MEASURED_AT: Mutex<Option<(u64, Instant)>> = Mutex::new(None);

/// This node's clock is too far from its peers' for a time-based
/// decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this node's clock is {offset_ms} ms off its peers' clocks (bound: {bound_ms} ms, max_clock_offset_msec): time-based decisions are refused here until the clock is corrected")]
pub struct ClockSkewed {
    pub offset_ms: i64,
    pub bound_ms: u64,
}

/// Sets the bound (from `max_clock_offset_msec`).
pub fn set_bound(ms: u64) {
    BOUND_MS.store(ms, Ordering::Relaxed);
}

pub fn bound_ms() -> u64 {
    BOUND_MS.load(Ordering::Relaxed)
}

/// Records this node's measured offset from the cluster's clocks
/// (positive: ahead): `offset` as [`offsets_from_median`] gives it (for
/// [`check`], failing closed), `correction` as [`correction_from_median`]
/// gives it (for [`cluster_now_msec`]).
pub fn set_offset(offset: i64, correction: i64) {
    let at = (crate::time::now_msec(), Instant::now());
    let mut m = MEASURED_AT.lock().unwrap_or_else(|e| e.into_inner());
    OFFSET_MS.store(offset, Ordering::Relaxed);
    CORRECTION_MS.store(correction, Ordering::Relaxed);
    *m = Some(at);
    MEASURED.store(true, Ordering::Relaxed);
}

/// How far the wall clock has moved since the last measure against the
/// monotonic clock: a clock stepped since the last ping counts at once.
fn stepped_since_measure(m: &Option<(u64, Instant)>) -> i64 {
    match *m {
        None => 0,
        Some((wall, mono)) => {
            let wall_moved = crate::time::now_msec() as i64 - wall as i64;
            let mono_moved = mono.elapsed().as_millis() as i64;
            wall_moved - mono_moved
        }
    }
}

/// This node's offset from the cluster's clocks: the last measure, plus
/// any step of the wall clock since. 0 before any measure, or alone.
pub fn offset_ms() -> i64 {
    let m = MEASURED_AT.lock().unwrap_or_else(|e| e.into_inner());
    OFFSET_MS.load(Ordering::Relaxed) + stepped_since_measure(&m)
}

/// This node's correction to the cluster's time (positive: its wall
/// clock is ahead): the last measure plus any step since, when that is
/// beyond the bound (a node that knows it is off); 0 within the bound (a
/// healthy node keeps its own clock, not the noise of the measures),
/// before any measure, alone, or when the median is ambiguous.
pub fn correction_ms() -> i64 {
    let m = MEASURED_AT.lock().unwrap_or_else(|e| e.into_inner());
    let c = CORRECTION_MS.load(Ordering::Relaxed) + stepped_since_measure(&m);
    match c.unsigned_abs() > bound_ms() {
        true => c,
        false => 0,
    }
}

/// The cluster's time, in ms since the Unix epoch: this node's wall clock
/// corrected by [`correction_ms`]. What new writes are stamped with and
/// what request signatures are judged against.
pub fn cluster_now_msec() -> u64 {
    let now = crate::time::now_msec() as i64;
    now.saturating_sub(correction_ms()).max(0) as u64
}

/// Whether an offset has been measured (a node with no peers has none).
pub fn measured() -> bool {
    MEASURED.load(Ordering::Relaxed)
}

/// The wall clock now, when this very reading is within the bound of the
/// peers' clocks (a step of the wall clock since the last measure counts):
/// for a decision that compares a stored time with now. [`check`] then a
/// separate reading of the clock leaves a window in which the clock may
/// step (found by the history checker, seed 21126: a conditional write
/// read a value proposed moments before as 300 s old, and two
/// `If-None-Match: *` writers won).
pub fn checked_now_msec() -> Result<u64, ClockSkewed> {
    let m = MEASURED_AT.lock().unwrap_or_else(|e| e.into_inner());
    let now = crate::time::now_msec();
    let stepped = match *m {
        None => 0,
        Some((wall, mono)) => now as i64 - wall as i64 - mono.elapsed().as_millis() as i64,
    };
    let offset_ms = OFFSET_MS.load(Ordering::Relaxed) + stepped;
    let bound_ms = bound_ms();
    match offset_ms.unsigned_abs() > bound_ms {
        true => Err(ClockSkewed {
            offset_ms,
            bound_ms,
        }),
        false => Ok(now),
    }
}

/// Ok when this node's clock is within the bound of its peers'.
pub fn check() -> Result<(), ClockSkewed> {
    checked_now_msec().map(drop)
}

/// The offset of each node from the cluster's clock, given this node's
/// measures of its peers' offsets (positive: the peer is ahead of this
/// node). The cluster's clock is the median of all clocks, this node's
/// included (offset 0); with an even count, of the two middle clocks the
/// one farther from this node's, so that of two nodes that disagree both
/// are seen as off (failing closed). Returns this node's offset from the
/// cluster, then each peer's, in the order given.
pub fn offsets_from_median(peers: &[i64]) -> (i64, Vec<i64>) {
    let median = median_of(peers, Tie::Farther);
    (-median, peers.iter().map(|o| o - median).collect())
}

/// Of the two middle clocks of an even count, which one is the median.
#[derive(Clone, Copy)]
enum Tie {
    /// The one farther from this node's (failing closed).
    Farther,
    /// The one nearer this node's (never moving towards a clock that
    /// cannot be told right).
    Nearer,
}

/// The median of this node's clock (offset 0) and its peers' offsets.
fn median_of(peers: &[i64], tie: Tie) -> i64 {
    let mut all: Vec<i64> = peers.to_vec();
    all.push(0);
    all.sort();
    let n = all.len();
    if n % 2 == 1 {
        return all[n / 2];
    }
    let (a, b) = (all[n / 2 - 1], all[n / 2]);
    let a_nearer = a.unsigned_abs() <= b.unsigned_abs();
    match (tie, a_nearer) {
        (Tie::Nearer, true) | (Tie::Farther, false) => a,
        _ => b,
    }
}

/// This node's offset from the cluster's time for [`cluster_now_msec`],
/// given its measures of its peers' offsets (positive: the peer is
/// ahead): the median of all clocks, this node's included; with an even
/// count, of the two middle clocks the one nearer this node's, so that a
/// node never corrects its time towards one clock it cannot tell is right
/// (of two nodes, neither moves).
pub fn correction_from_median(peers: &[i64]) -> i64 {
    -median_of(peers, Tie::Nearer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_names_the_node_that_is_off() {
        // Three nodes, this one 10 minutes ahead: both peers say so.
        let (me, peers) = offsets_from_median(&[-600_000, -600_000]);
        assert_eq!(me, 600_000);
        assert_eq!(peers, vec![0, 0]);
        // Three nodes, one peer 1 s behind: only it is off.
        let (me, peers) = offsets_from_median(&[-1000, 3]);
        assert_eq!(me, 0);
        assert_eq!(peers, vec![-1000, 3]);
        // Two nodes that disagree: both are off.
        let (me, _) = offsets_from_median(&[5000]);
        assert_eq!(me.abs(), 5000);
        let (me, _) = offsets_from_median(&[-5000]);
        assert_eq!(me.abs(), 5000);
        // Alone: no offset.
        assert_eq!(offsets_from_median(&[]), (0, vec![]));
    }

    #[test]
    fn correction_follows_the_majority_only() {
        // This node 14 minutes ahead of two peers that agree.
        assert_eq!(correction_from_median(&[-840_000, -840_000]), 840_000);
        // One peer off: this node keeps its time.
        assert_eq!(correction_from_median(&[840_000, 0]), 0);
        assert_eq!(correction_from_median(&[-3_600_000, 5]), 0);
        // Two nodes that disagree: neither moves.
        assert_eq!(correction_from_median(&[5000]), 0);
        assert_eq!(correction_from_median(&[-5000]), 0);
        // Four nodes, this one an hour behind the other three: the
        // nearer of the two middle clocks.
        assert_eq!(
            correction_from_median(&[3_600_000, 3_600_010, 3_599_990]),
            -3_599_990
        );
        assert_eq!(correction_from_median(&[]), 0);
    }

    #[test]
    fn check_fails_closed_beyond_the_bound() {
        // One test touches the globals, so that tests in parallel agree.
        set_bound(2000);
        set_offset(1500, 1500);
        assert!(check().is_ok());
        // Within the bound: no correction.
        assert!(crate::time::now_msec().abs_diff(cluster_now_msec()) < 100);
        // Beyond it: the cluster's time.
        set_offset(60_000, 60_000);
        let wall = crate::time::now_msec();
        let cluster = cluster_now_msec();
        assert!(
            wall.abs_diff(cluster + 60_000) < 100,
            "{wall} vs {cluster} + 60000"
        );
        set_offset(-2001, 0);
        let e = check().unwrap_err();
        assert_eq!(e.offset_ms, -2001);
        assert!(e.to_string().contains("max_clock_offset_msec"));
        assert!(crate::time::now_msec().abs_diff(cluster_now_msec()) < 100);
        set_offset(0, 0);
    }
}
