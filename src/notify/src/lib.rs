//! `garage_notify`: delivery of bucket notification events. Each node
//! sends the events of the writes it served, from its outbox
//! (`garage_model::notify::outbox`), to each topic's endpoint: a webhook
//! ([`sender::Webhook`]), a NATS server, an AMQP, Kafka or MQTT broker.
//! One worker,
//! "Notification delivery", serves every topic at once, each in order:
//! a batch is taken off the outbox only once its endpoint acknowledged
//! it. A topic whose endpoint fails waits (1 s, doubling up to 60 s) and
//! keeps its events; the others go on.
//!
//! Metrics (labelled `topic` and `kind`): `notify_events_sent_total`,
//! `notify_send_errors_total`, `notify_events_expired_total` (dropped
//! after `max_retries` or `time_to_live`), and the gauges
//! `notify_queued_events` and `notify_lag_seconds` (the age of the
//! oldest event waiting).

pub mod sender;
pub mod worker;

pub use worker::DeliveryWorker;
