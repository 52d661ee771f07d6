//! Wall-clock time as garage stores it: milliseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_msec() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A timestamp for a new write that must win over one made at `previous`:
/// the current time, or `previous + 1` if the clock is behind it.
pub fn increment_after(previous: u64) -> u64 {
    now_msec().max(previous + 1)
}
