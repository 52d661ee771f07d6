//! A short history of the node's own counters (requests, errors, block
//! bytes read and written), sampled every 10 s for the last hour: the web
//! console's charts read it (GetNodeMetricsHistory) without a Prometheus
//! server. Samples are cumulative totals; a chart shows their differences.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use garage_util::worker::{Registry, WorkerSpec, WorkerState};

/// Time between two samples.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Samples kept: one hour.
pub const KEPT: usize = 360;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSample {
    /// When (ms since the epoch).
    pub time: u64,
    /// S3 and website requests answered, since the node started.
    pub requests: f64,
    /// S3 and website answers with an error status.
    pub errors: f64,
    /// Bytes of block data written to and read from this node's disks.
    pub bytes_written: f64,
    pub bytes_read: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsHistory {
    pub interval_secs: u64,
    /// Oldest first, at most an hour of them.
    pub samples: Vec<MetricsSample>,
}

/// The node's samples (one daemon per process).
static HISTORY: Mutex<VecDeque<MetricsSample>> = Mutex::new(VecDeque::new());

fn sum(totals: &std::collections::BTreeMap<String, f64>, names: &[&str]) -> f64 {
    names.iter().filter_map(|n| totals.get(*n)).sum()
}

/// A sample of the counter totals `totals` at `time`.
pub fn sample(totals: &std::collections::BTreeMap<String, f64>, time: u64) -> MetricsSample {
    MetricsSample {
        time,
        requests: sum(totals, &["api_s3_requests_total", "web_requests_total"]),
        errors: sum(totals, &["api_s3_errors_total", "web_errors_total"]),
        bytes_written: sum(totals, &["block_bytes_written_total"]),
        bytes_read: sum(totals, &["block_bytes_read_total"]),
    }
}

fn push(h: &mut VecDeque<MetricsSample>, s: MetricsSample) {
    if h.len() == KEPT {
        h.pop_front();
    }
    h.push_back(s);
}

/// The samples so far.
pub fn history() -> MetricsHistory {
    MetricsHistory {
        interval_secs: INTERVAL.as_secs(),
        samples: HISTORY
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect(),
    }
}

/// Samples the counters (read through [`super::stats::COUNTER_TOTALS`])
/// every [`INTERVAL`] until `must_exit`; a worker while it runs.
pub async fn run(workers: &Registry, mut must_exit: tokio::sync::watch::Receiver<bool>) {
    let worker = workers.register(WorkerSpec::new(
        "Metrics history",
        "keeps an hour of the node's request and byte counters for the web console",
    ));
    worker.set_state(WorkerState::Idle);
    while !*must_exit.borrow() {
        if let Some(totals) = super::stats::COUNTER_TOTALS.get() {
            let s = sample(&totals(), garage_util::time::now_msec());
            push(&mut HISTORY.lock().unwrap_or_else(|e| e.into_inner()), s);
        }
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => (),
            _ = must_exit.changed() => (),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_sum_their_counters_and_an_hour_is_kept() {
        let totals = [
            ("api_s3_requests_total", 5.0),
            ("web_requests_total", 2.0),
            ("api_s3_errors_total", 1.0),
            ("block_bytes_written_total", 100.0),
            ("rpc_requests_total", 99.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let s = sample(&totals, 7);
        assert_eq!(
            s,
            MetricsSample {
                time: 7,
                requests: 7.0,
                errors: 1.0,
                bytes_written: 100.0,
                bytes_read: 0.0
            }
        );
        let mut h = VecDeque::new();
        for t in 0..(KEPT as u64 + 5) {
            push(
                &mut h,
                MetricsSample {
                    time: t,
                    ..s.clone()
                },
            );
        }
        assert_eq!(h.len(), KEPT);
        assert_eq!(h.front().unwrap().time, 5, "the oldest go first");
    }
}
