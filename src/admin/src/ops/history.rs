//! A short history of the node's own counters (requests, errors, S3 and
//! website bytes in and out, block bytes read and written), sampled every
//! 10 s for the last hour: the web console's charts read it
//! (GetNodeMetricsHistory) without a Prometheus server. Samples are
//! cumulative totals since the daemon started; a chart shows their
//! differences (a restart, where totals drop, counts as none).
//!
//! The samples are also appended to `metrics-history.jsonl` in the metadata
//! dir (one JSON line each, about 150 bytes every 10 s; the file is
//! rewritten with the last hour when it holds two), so a restarted daemon
//! still shows the hour before it. The file is a convenience: it is not
//! fsynced, and a line that does not parse is skipped.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use garage_util::worker::{Step, Worker, WorkerHandle, WorkerSpec};

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
    /// Bytes received and sent on the S3 and website connections.
    #[serde(default)]
    pub bytes_in: f64,
    #[serde(default)]
    pub bytes_out: f64,
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
        bytes_in: sum(
            totals,
            &[
                r#"http_bytes_received_total{listener="s3"}"#,
                r#"http_bytes_received_total{listener="web"}"#,
            ],
        ),
        bytes_out: sum(
            totals,
            &[
                r#"http_bytes_sent_total{listener="s3"}"#,
                r#"http_bytes_sent_total{listener="web"}"#,
            ],
        ),
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

/// The history file in `metadata_dir`.
pub fn file_in(metadata_dir: &Path) -> PathBuf {
    metadata_dir.join("metrics-history.jsonl")
}

/// The samples of the file `text` that are of the hour before `now`,
/// oldest first, at most [`KEPT`].
fn parse_file(text: &str, now: u64) -> VecDeque<MetricsSample> {
    let mut h = VecDeque::new();
    for line in text.lines() {
        if let Ok(s) = serde_json::from_str::<MetricsSample>(line) {
            if s.time + 3_600_000 >= now && s.time <= now {
                push(&mut h, s);
            }
        }
    }
    h
}

/// Writes `h` to `path` whole (through a temporary file and a rename).
fn rewrite(path: &Path, h: &VecDeque<MetricsSample>) -> std::io::Result<()> {
    let tmp = path.with_extension("jsonl.tmp");
    let mut text = String::new();
    for s in h {
        text.push_str(&serde_json::to_string(s).unwrap_or_default());
        text.push('\n');
    }
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

fn append(path: &Path, s: &MetricsSample) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{}\n", serde_json::to_string(s).unwrap_or_default()).as_bytes())
}

/// Samples the counters (read through [`super::stats::COUNTER_TOTALS`])
/// every [`INTERVAL`], keeping them in `file` too (see the module doc). Its
/// first step loads the samples the file kept; a failed write of the file
/// is recorded on the worker (`garage worker info`) and sampling goes on.
pub struct HistoryWorker {
    file: Option<PathBuf>,
    /// Lines in the file; it is rewritten when it holds two hours.
    lines: usize,
    loaded: bool,
    ticker: tokio::time::Interval,
}

impl HistoryWorker {
    pub fn new(file: Option<PathBuf>) -> Self {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            file,
            lines: 0,
            loaded: false,
            ticker,
        }
    }

    fn load(&mut self, handle: &WorkerHandle) {
        let Some(path) = &self.file else {
            return;
        };
        if let Ok(text) = std::fs::read_to_string(path) {
            let old = parse_file(&text, garage_util::time::now_msec());
            self.lines = old.len();
            if let Err(e) = rewrite(path, &old) {
                handle.error(format!("{}: {e}", path.display()));
            }
            *HISTORY.lock().unwrap_or_else(|e| e.into_inner()) = old;
        }
    }
}

impl Worker for HistoryWorker {
    fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(
            "Metrics history",
            "keeps an hour of the node's request and byte counters for the web console",
        )
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<Step, String> {
        if !self.loaded {
            self.loaded = true;
            self.load(handle);
        }
        let Some(totals) = super::stats::COUNTER_TOTALS.get() else {
            return Ok(Step::Idle);
        };
        let s = sample(&totals(), garage_util::time::now_msec());
        // The lock is held over the small write, so that a sample
        // GetNodeMetricsHistory has served is in the file.
        let mut h = HISTORY.lock().unwrap_or_else(|e| e.into_inner());
        push(&mut h, s.clone());
        if let Some(path) = &self.file {
            self.lines += 1;
            let r = if self.lines >= 2 * KEPT {
                self.lines = h.len();
                rewrite(path, &h)
            } else {
                append(path, &s)
            };
            if let Err(e) = r {
                handle.error(format!("{}: {e}", path.display()));
            }
        }
        Ok(Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        self.ticker.tick().await;
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
            ("http_bytes_sent_total", 1099.0),
            (r#"http_bytes_sent_total{listener="s3"}"#, 1000.0),
            (r#"http_bytes_sent_total{listener="admin"}"#, 99.0),
            (r#"http_bytes_received_total{listener="web"}"#, 30.0),
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
                bytes_read: 0.0,
                bytes_in: 30.0,
                bytes_out: 1000.0,
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

    #[test]
    fn the_file_keeps_the_last_hour_and_skips_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_in(dir.path());
        let at = |time| MetricsSample {
            time,
            requests: time as f64,
            ..Default::default()
        };
        let now = 10_000_000;
        let mut h = VecDeque::new();
        push(&mut h, at(now - 3_700_000)); // more than an hour ago
        push(&mut h, at(now - 3_500_000));
        rewrite(&path, &h).unwrap();
        append(&path, &at(now - 10_000)).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"time\": 12, half a line\n").unwrap();
        append(&path, &at(now + 60_000)).unwrap(); // from a clock ahead
        let back = parse_file(&std::fs::read_to_string(&path).unwrap(), now);
        assert_eq!(
            back.iter().map(|s| s.time).collect::<Vec<_>>(),
            vec![now - 3_500_000, now - 10_000]
        );
        assert_eq!(back[1], at(now - 10_000));
        // A line of an older version, without the traffic fields.
        let old = r#"{"time":5,"requests":1,"errors":0,"bytesWritten":2,"bytesRead":3}"#;
        assert_eq!(parse_file(old, 6).len(), 1);
    }
}
