//! Timings of the table workers. The defaults suit production; tests and
//! benchmarks shorten them through environment variables, read when a
//! table is created:
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
    pub fn from_env() -> Self {
        let d = Self::default();
        Self {
            sync_interval: secs_from_env("GARAGE_TABLE_SYNC_INTERVAL_SECS", d.sync_interval),
            gc_delay: secs_from_env("GARAGE_TABLE_GC_DELAY_SECS", d.gc_delay),
        }
    }
}

fn secs_from_env(name: &str, default: Duration) -> Duration {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => match v.parse::<u64>() {
            Ok(n) => Duration::from_secs(n),
            Err(_) => {
                tracing::warn!("{name}={v:?} is not a number of seconds: using {default:?}");
                default
            }
        },
    }
}
