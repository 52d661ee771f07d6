//! Timings of the table workers. The defaults suit production; tests and
//! benchmarks shorten them through environment variables, read once by
//! `garage_util::tuning`:
//!
//! - `GARAGE_TABLE_SYNC_INTERVAL_SECS` (default 600): time between two
//!   anti-entropy passes when nothing triggers one sooner;
//! - `GARAGE_TABLE_GC_DELAY_SECS` (default 86400): how long a tombstone
//!   stays before the GC may remove it (a write that was in flight when the
//!   entry was deleted must not bring it back after the GC).

use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    pub sync_interval: Duration,
    pub gc_delay: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            sync_interval: Duration::from_secs(600),
            gc_delay: Duration::from_secs(86400),
        }
    }
}

impl Tuning {
    /// The values of `garage_util::tuning` (its environment variables).
    pub fn from_env() -> Self {
        let t = garage_util::tuning::tuning();
        Self {
            sync_interval: t.table_sync_interval,
            gc_delay: t.table_gc_delay,
        }
    }
}
