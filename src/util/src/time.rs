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

/// A stored time (ms since the epoch) as RFC 3339, in UTC.
pub fn rfc3339(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
