//! The test knobs: timings whose defaults suit production and that tests
//! and benchmarks shorten through environment variables. They are read
//! once, on first use, into one [`Tuning`]; a value that is not a whole
//! number of seconds is warned about (naming the variable) and the
//! default kept. `garage server` logs the knobs that are set when it
//! starts, so that an operator sees a node running with test timings.
//!
//! | Variable | Default | What it shortens |
//! |---|---|---|
//! | `GARAGE_TABLE_SYNC_INTERVAL_SECS` | 600 | time between anti-entropy passes when nothing triggers one |
//! | `GARAGE_TABLE_GC_DELAY_SECS` | 86400 | how long a tombstone stays before the GC may remove it |
//! | `GARAGE_BLOCK_DELETE_DELAY_SECS` | 600 | how long an unreferenced block is kept |
//! | `GARAGE_LIFECYCLE_INTERVAL_SECS` | 86400 | time between lifecycle passes |
//! | `GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS` | 0 | added to the lifecycle worker's clock (rules count in days) |
//! | `GARAGE_REPAIR_GRACE_SECS` | 86400 | how long an entry nothing lists is presumed a write in progress |
//! | `GARAGE_REPAIR_SETTLE_SECS` | the RPC timeout | how long a block reference is watched before it is taken for a leftover |
//! | `GARAGE_ACCESS_LOG_FLUSH_SECS` | 60 | time between two deliveries of server access logs |
//! | `GARAGE_BLOCK_CENSUS_INTERVAL_SECS` | 900 | time between two counts of the files a node stores, by storage class, when no move is under way |
//! | `GARAGE_TEST_CRASH_IN_TRANSITION` | unset | set: a lifecycle transition aborts the process after its step 2 |

use std::sync::OnceLock;
use std::time::Duration;

/// Every test knob, parsed (see the module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    pub table_sync_interval: Duration,
    pub table_gc_delay: Duration,
    pub block_delete_delay: Duration,
    pub lifecycle_interval: Duration,
    pub lifecycle_clock_offset: Duration,
    pub repair_grace: Duration,
    /// `None`: the RPC timeout.
    pub repair_settle: Option<Duration>,
    pub access_log_flush: Duration,
    pub block_census_interval: Duration,
    pub crash_in_transition: bool,
    /// The knobs set, as `NAME=value`, for the startup log line.
    pub set: Vec<String>,
    /// A line per value refused (not a number of seconds).
    pub warnings: Vec<String>,
}

impl Default for Tuning {
    fn default() -> Self {
        Self::from_lookup(|_| None)
    }
}

impl Tuning {
    /// The knobs as `lookup` gives them (`std::env::var` in a process).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut set = Vec::new();
        let mut warnings = Vec::new();
        let mut secs = |name: &str| -> Option<Duration> {
            let v = lookup(name)?;
            set.push(format!("{name}={v}"));
            match v.trim().parse::<u64>() {
                Ok(n) => Some(Duration::from_secs(n)),
                Err(_) => {
                    warnings.push(format!(
                        "{name}={v:?} is not a whole number of seconds: the default is used"
                    ));
                    None
                }
            }
        };
        let s = |n: u64| Duration::from_secs(n);
        let table_sync_interval = secs("GARAGE_TABLE_SYNC_INTERVAL_SECS").unwrap_or(s(600));
        let table_gc_delay = secs("GARAGE_TABLE_GC_DELAY_SECS").unwrap_or(s(86400));
        let block_delete_delay = secs("GARAGE_BLOCK_DELETE_DELAY_SECS").unwrap_or(s(600));
        let lifecycle_interval = secs("GARAGE_LIFECYCLE_INTERVAL_SECS").unwrap_or(s(86400));
        let lifecycle_clock_offset =
            secs("GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS").unwrap_or(Duration::ZERO);
        let repair_grace = secs("GARAGE_REPAIR_GRACE_SECS").unwrap_or(s(86400));
        let repair_settle = secs("GARAGE_REPAIR_SETTLE_SECS");
        let access_log_flush = secs("GARAGE_ACCESS_LOG_FLUSH_SECS").unwrap_or(s(60));
        let block_census_interval = secs("GARAGE_BLOCK_CENSUS_INTERVAL_SECS").unwrap_or(s(900));
        let crash = lookup("GARAGE_TEST_CRASH_IN_TRANSITION");
        if let Some(v) = &crash {
            set.push(format!("GARAGE_TEST_CRASH_IN_TRANSITION={v}"));
        }
        Self {
            table_sync_interval,
            table_gc_delay,
            block_delete_delay,
            lifecycle_interval,
            lifecycle_clock_offset,
            repair_grace,
            repair_settle,
            access_log_flush,
            block_census_interval,
            crash_in_transition: crash.is_some(),
            set,
            warnings,
        }
    }
}

static TUNING: OnceLock<Tuning> = OnceLock::new();

/// This process's knobs, read from its environment on first use (each
/// refused value warned about then).
pub fn tuning() -> &'static Tuning {
    TUNING.get_or_init(|| {
        let t = Tuning::from_lookup(|name| std::env::var(name).ok());
        for w in &t.warnings {
            tracing::warn!("{w}");
        }
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_values_and_refused_values() {
        let d = Tuning::default();
        assert_eq!(d.table_gc_delay, Duration::from_secs(86400));
        assert_eq!(d.repair_settle, None);
        assert!(!d.crash_in_transition);
        assert!(d.set.is_empty() && d.warnings.is_empty());

        let t = Tuning::from_lookup(|name| match name {
            "GARAGE_BLOCK_DELETE_DELAY_SECS" => Some("2".into()),
            "GARAGE_TABLE_GC_DELAY_SECS" => Some("ten".into()),
            "GARAGE_TEST_CRASH_IN_TRANSITION" => Some("1".into()),
            _ => None,
        });
        assert_eq!(t.block_delete_delay, Duration::from_secs(2));
        assert_eq!(
            t.table_gc_delay,
            Duration::from_secs(86400),
            "refused: default"
        );
        assert!(t.crash_in_transition);
        assert_eq!(t.warnings.len(), 1);
        assert!(
            t.warnings[0].contains("GARAGE_TABLE_GC_DELAY_SECS=\"ten\""),
            "the warning names the variable and its value: {:?}",
            t.warnings
        );
        assert_eq!(t.set.len(), 3);
    }
}
