//! What the fuzz targets of the crates above share (see
//! `doc/security.md`): how long each runs. `garage_net`, below this
//! crate, has its own copy.

use std::time::Duration;

/// How long one fuzz target runs: `GARAGE_FUZZ_SECONDS` (default 1 s,
/// what CI runs).
pub fn budget() -> Duration {
    let s = std::env::var("GARAGE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(s)
}
