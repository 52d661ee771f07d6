//! The "Notification delivery" worker: empties this node's outbox, every
//! topic at once, each in order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_model::garage::Garage;
use garage_model::notify::outbox::Queued;
use garage_model::notify::topic_table::TopicConfig;
use garage_table::EmptyKey;
use garage_util::worker::backoff::Backoff;
use garage_util::worker::{Step, Worker, WorkerHandle, WorkerSpec};
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::sender::{message, Sender};

/// Events sent to one topic in one step.
const BATCH: usize = 100;
/// The wait after a failure, doubled after each failure in a row.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// What the worker keeps of one topic between steps.
struct TopicState {
    /// The configuration its sender was made for (a change makes a new
    /// one).
    config: TopicConfig,
    sender: Sender,
    backoff: Backoff,
    /// Failed sends of the oldest event waiting (for `max_retries`).
    head_attempts: u32,
    head_seq: Option<u64>,
}

pub struct DeliveryWorker {
    garage: Arc<Garage>,
    wake: Arc<Notify>,
    topics: HashMap<String, TopicState>,
    /// Topics with events waiting that no node could tell of yet, or
    /// whose endpoint this node cannot use (each logged once).
    unknown: HashSet<String>,
}

impl DeliveryWorker {
    pub fn new(garage: Arc<Garage>) -> Self {
        let wake = garage.writer.notifier.wake.clone();
        Self {
            garage,
            wake,
            topics: HashMap::new(),
            unknown: HashSet::new(),
        }
    }

    /// The earliest time a waiting topic may be tried again.
    fn next_retry(&self) -> Option<Instant> {
        self.topics
            .values()
            .filter_map(|t| t.backoff.retry_at())
            .min()
    }
}

/// What one topic's turn did.
enum Outcome {
    /// This many events went.
    Sent(usize),
    /// Nothing to send, or waiting out a failure.
    Nothing,
    Failed(String),
}

/// A topic's attribute as a number, if set.
fn number(c: &TopicConfig, name: &str) -> Option<u64> {
    c.attributes.get(name).and_then(|v| v.parse().ok())
}

impl Worker for DeliveryWorker {
    fn spec(&self) -> WorkerSpec {
        let outbox_garage = self.garage.clone();
        WorkerSpec::new(
            "Notification delivery",
            "sends the bucket notification events of this node's outbox to their topics",
        )
        .queue(move || Ok(outbox_garage.writer.notifier.outbox.len()))
    }

    async fn work(
        &mut self,
        handle: &WorkerHandle,
        _must_exit: &watch::Receiver<bool>,
    ) -> Result<Step, String> {
        let notifier = self.garage.writer.notifier.clone();
        let backlog = notifier.outbox.backlog();
        // Topics with nothing waiting keep their connection, wait for
        // no retry, and their gauges are zeroed.
        for (t, s) in self
            .topics
            .iter_mut()
            .filter(|(t, _)| !backlog.contains_key(*t))
        {
            s.backoff.idle();
            metrics::gauge!("notify_queued_events", "topic" => t.clone()).set(0.0);
            metrics::gauge!("notify_lag_seconds", "topic" => t.clone()).set(0.0);
        }
        if backlog.is_empty() {
            handle.set_progress(None);
            return Ok(Step::Idle);
        }
        let mut turns = Vec::new();
        for (name, b) in &backlog {
            metrics::gauge!("notify_queued_events", "topic" => name.clone()).set(b.events as f64);
            // This node's copy of the topic (every node holds them all);
            // one it has not heard of yet is asked of the others.
            let table = &self.garage.topic_table;
            let mut topic = table
                .get_local(&EmptyKey, name)
                .await
                .map_err(|e| format!("cannot read topic {name}: {e}"))?;
            if topic.is_none() {
                topic = table.get(&EmptyKey, name).await.ok().flatten();
            }
            let Some(topic) = topic else {
                // Not known anywhere yet: its events wait (logged once).
                if self.unknown.insert(name.clone()) {
                    warn!(topic = %name, "notification events wait for a topic this node does not know yet");
                }
                continue;
            };
            let Some(config) = topic.live().cloned() else {
                // Deleted: its queue goes with it (as Ceph's).
                drop_all(&self.garage, name).map_err(|e| e.to_string())?;
                self.topics.remove(name);
                continue;
            };
            let state = match self.topics.remove(name) {
                Some(s) if s.config == config => s,
                _ => match config.endpoint().and_then(|e| Sender::new(&e, name)) {
                    Ok(sender) => TopicState {
                        sender,
                        config,
                        backoff: Backoff::new(RETRY_MIN, RETRY_MAX),
                        head_attempts: 0,
                        head_seq: None,
                    },
                    // Checked when the topic was made: only an endpoint
                    // this release does not know gets here. Its events
                    // wait (logged once); the other topics go on.
                    Err(e) => {
                        if self.unknown.insert(name.clone()) {
                            warn!(topic = %name, "notification events wait: this node cannot send to the topic's endpoint: {e}");
                        }
                        continue;
                    }
                },
            };
            self.unknown.remove(name);
            turns.push((name.clone(), state));
        }
        let garage = self.garage.clone();
        let results = futures::future::join_all(
            turns
                .into_iter()
                .map(|(name, mut state)| {
                    let garage = garage.clone();
                    async move {
                        let out = turn(&garage, &name, &mut state).await;
                        (name, state, out)
                    }
                })
                .collect::<Vec<_>>(),
        )
        .await;
        let mut sent = 0;
        let mut waiting = 0;
        for (name, mut state, out) in results {
            match out {
                Outcome::Sent(n) => {
                    sent += n;
                    if state.backoff.succeeded() {
                        info!(topic = %name, "notification endpoint reachable again");
                    }
                }
                Outcome::Nothing => waiting += 1,
                Outcome::Failed(e) => {
                    waiting += 1;
                    let wait = state.backoff.failed();
                    metrics::counter!("notify_send_errors_total", "topic" => name.clone(), "kind" => kind(&state))
                        .increment(1);
                    warn!(
                        topic = %name,
                        failures = state.backoff.failures(),
                        retry_in_ms = wait.as_millis() as u64,
                        "cannot deliver notification events: {e}"
                    );
                }
            }
            self.topics.insert(name, state);
        }
        handle.set_progress(Some(format!(
            "{} event(s) waiting for {} topic(s), {waiting} waiting to retry",
            notifier.outbox.len(),
            backlog.len()
        )));
        Ok(if sent > 0 { Step::Busy } else { Step::Idle })
    }

    async fn wait_for_work(&mut self) {
        let wake = self.wake.clone();
        let notified = wake.notified();
        match self.next_retry() {
            Some(at) => {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None if self.garage.writer.notifier.outbox.is_empty() => notified.await,
            // Events wait for topics not yet tried, or not known yet.
            None => {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep(RETRY_MIN) => {}
                }
            }
        }
    }
}

fn kind(s: &TopicState) -> &'static str {
    match &s.sender {
        Sender::Webhook(_) => "webhook",
        Sender::Nats(_) => "nats",
        Sender::Amqp(_) => "amqp",
        Sender::Kafka(_) => "kafka",
        Sender::Mqtt(_) => "mqtt",
    }
}

/// One topic's turn: its next batch, sent in order.
async fn turn(garage: &Garage, name: &str, state: &mut TopicState) -> Outcome {
    if state.backoff.waiting() {
        return Outcome::Nothing;
    }
    let outbox = &garage.writer.notifier.outbox;
    let batch: Vec<(u64, Queued)> = match outbox.peek(name, BATCH) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(format!("cannot read the outbox: {e}")),
    };
    let Some((first_seq, first)) = batch.first() else {
        return Outcome::Nothing;
    };
    let now_ms = garage_util::time::now_msec();
    metrics::gauge!("notify_lag_seconds", "topic" => name.to_string())
        .set(now_ms.saturating_sub(first.queued_ms) as f64 / 1000.0);
    // Events past the topic's limits go (Ceph's `time_to_live` in
    // seconds, `max_retries`); by default they wait for ever.
    if state.head_seq != Some(*first_seq) {
        state.head_seq = Some(*first_seq);
        state.head_attempts = 0;
    }
    let ttl = number(&state.config, "time_to_live").map(|s| s * 1000);
    let max_retries = number(&state.config, "max_retries");
    let expired: Vec<u64> = batch
        .iter()
        .filter(|(_, q)| ttl.is_some_and(|t| now_ms.saturating_sub(q.queued_ms) > t))
        .map(|(s, _)| *s)
        .chain(
            max_retries
                .filter(|m| u64::from(state.head_attempts) > *m)
                .map(|_| *first_seq),
        )
        .collect();
    if !expired.is_empty() {
        metrics::counter!("notify_events_expired_total", "topic" => name.to_string(), "kind" => kind(state))
            .increment(expired.len() as u64);
        warn!(
            topic = name,
            "{} notification event(s) dropped: past the topic's time_to_live or max_retries",
            expired.len()
        );
        if let Err(e) = outbox.remove(name, &expired) {
            return Outcome::Failed(format!("cannot update the outbox: {e}"));
        }
        return Outcome::Sent(0);
    }
    let messages: Vec<String> = batch.iter().map(|(_, q)| message(&q.record)).collect();
    let (acked, err) = state.sender.send(&messages).await;
    if acked > 0 {
        let seqs: Vec<u64> = batch[..acked].iter().map(|(s, _)| *s).collect();
        if let Err(e) = outbox.remove(name, &seqs) {
            return Outcome::Failed(format!("cannot update the outbox: {e}"));
        }
        metrics::counter!("notify_events_sent_total", "topic" => name.to_string(), "kind" => kind(state))
            .increment(acked as u64);
    }
    match err {
        None => Outcome::Sent(acked),
        Some(e) => {
            if acked == 0 {
                state.head_attempts += 1;
            }
            Outcome::Failed(e)
        }
    }
}

/// Drops every event of a deleted topic.
fn drop_all(garage: &Garage, name: &str) -> Result<(), garage_db::Error> {
    let outbox = &garage.writer.notifier.outbox;
    loop {
        let batch = outbox.peek(name, 1000)?;
        if batch.is_empty() {
            return Ok(());
        }
        let seqs: Vec<u64> = batch.iter().map(|(s, _)| *s).collect();
        metrics::counter!("notify_events_dropped_total").increment(seqs.len() as u64);
        warn!(
            topic = name,
            "{} notification event(s) dropped: their topic was deleted",
            seqs.len()
        );
        outbox.remove(name, &seqs)?;
    }
}
