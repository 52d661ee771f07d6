//! The wait of a worker's queue after failures: none at first, then
//! `min`, doubled after each failure in a row up to `max`; cleared by a
//! success. The notification and replication workers keep one per topic
//! or destination, so that one endpoint down does not slow the others.

use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    failures: u32,
    retry_at: Option<Instant>,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max,
            failures: 0,
            retry_at: None,
        }
    }

    /// Failures in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether it must still wait.
    pub fn waiting(&self) -> bool {
        self.retry_at.is_some_and(|at| Instant::now() < at)
    }

    /// When it may be tried again, if it waits.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// One more failure: returns how long to wait now.
    pub fn failed(&mut self) -> Duration {
        self.failures += 1;
        let wait = self
            .min
            .saturating_mul(1 << self.failures.min(16).saturating_sub(1))
            .min(self.max);
        self.retry_at = Some(Instant::now() + wait);
        wait
    }

    /// A success: returns whether it had failed before (for a "reachable
    /// again" log line).
    pub fn succeeded(&mut self) -> bool {
        let had = self.failures > 0;
        self.failures = 0;
        self.retry_at = None;
        had
    }

    /// Nothing to do any more: no wait (the failures are kept).
    pub fn idle(&mut self) {
        self.retry_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_bound_and_a_success_clears_them() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        assert!(!b.waiting());
        let waits: Vec<u64> = (0..7).map(|_| b.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert!(b.waiting() && b.retry_at().is_some());
        assert_eq!(b.failures(), 7);
        assert!(b.succeeded());
        assert!(!b.waiting() && !b.succeeded());
    }
}
