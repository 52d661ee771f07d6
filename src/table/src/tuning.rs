//! Timings of the table workers. The defaults suit production; tests and
//! benchmarks shorten them through environment variables, read once:
//!
//! - `GARAGE_TABLE_SYNC_INTERVAL_SECS` (default 600): time between two
//!   anti-entropy passes when nothing triggers one sooner;
//! - `GARAGE_TABLE_GC_DELAY_SECS` (default 86400): how long a tombstone
//!   stays before the GC may remove it (a write that was in flight when the
//!   entry was deleted must not bring it back after the GC).

use std::sync::OnceLock;
use std::time::Duration;

fn secs_from_env(name: &str, default: u64) -> Duration {
    let v = std::env::var(name)
        .ok()
        .and_then(|v| match v.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                tracing::warn!("{name}={v:?} is not a number of seconds: using {default}");
                None
            }
        })
        .unwrap_or(default);
    Duration::from_secs(v)
}

pub fn sync_interval() -> Duration {
    static V: OnceLock<Duration> = OnceLock::new();
    *V.get_or_init(|| secs_from_env("GARAGE_TABLE_SYNC_INTERVAL_SECS", 600))
}

pub fn gc_delay() -> Duration {
    static V: OnceLock<Duration> = OnceLock::new();
    *V.get_or_init(|| secs_from_env("GARAGE_TABLE_GC_DELAY_SECS", 86400))
}
