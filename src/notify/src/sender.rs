//! One topic's connection to its endpoint, and how a batch of events is
//! sent on it and acknowledged.

use std::time::Duration;

use garage_model::notify::endpoint::{AmqpAck, Endpoint};
use rumqttc::{AsyncClient, Event, Incoming, MqttOptions, QoS};
use tokio::sync::mpsc;

/// How long one send may take before it counts as failed.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The message of one event: AWS's `{"Records":[…]}` around its record.
pub fn message(record: &str) -> String {
    format!("{{\"Records\":[{record}]}}")
}

/// A connection to one topic's endpoint.
pub enum Sender {
    Webhook(Webhook),
    Nats(Nats),
    Amqp(Box<Amqp>),
    Kafka(Kafka),
    Mqtt(Mqtt),
}

impl Sender {
    /// A sender for `endpoint` of topic `topic` (connections are made at
    /// the first send).
    pub fn new(endpoint: &Endpoint, topic: &str) -> Result<Self, String> {
        Ok(match endpoint {
            Endpoint::Webhook { url, verify_tls } => {
                Sender::Webhook(Webhook::new(url, *verify_tls)?)
            }
            Endpoint::Nats {
                server,
                subject,
                jetstream,
            } => Sender::Nats(Nats {
                server: server.clone(),
                subject: subject.clone().unwrap_or_else(|| topic.to_string()),
                jetstream: *jetstream,
                client: None,
            }),
            Endpoint::Amqp { url, exchange, ack } => Sender::Amqp(Box::new(Amqp {
                url: url.clone(),
                exchange: exchange.clone(),
                routing_key: topic.to_string(),
                ack: *ack,
                conn: None,
            })),
            Endpoint::Kafka { broker, topic: t } => Sender::Kafka(Kafka {
                broker: broker.clone(),
                topic: t.clone().unwrap_or_else(|| topic.to_string()),
                partition: None,
            }),
            Endpoint::Mqtt {
                host,
                port,
                tls,
                user,
                topic: t,
                qos,
            } => Sender::Mqtt(Mqtt {
                host: host.clone(),
                port: *port,
                tls: *tls,
                user: user.clone(),
                topic: t.clone().unwrap_or_else(|| topic.to_string()),
                qos: *qos,
                conn: None,
                node: topic.to_string(),
            }),
        })
    }

    /// Sends `messages` in order; returns how many the endpoint
    /// acknowledged (all of them, or the error after the first ones).
    pub async fn send(&mut self, messages: &[String]) -> (usize, Option<String>) {
        match self {
            Sender::Webhook(w) => w.send(messages).await,
            Sender::Nats(n) => n.send(messages).await,
            Sender::Amqp(a) => a.send(messages).await,
            Sender::Kafka(k) => k.send(messages).await,
            Sender::Mqtt(m) => m.send(messages).await,
        }
    }
}

/// A webhook: one POST per event, acknowledged by any 2xx answer.
pub struct Webhook {
    url: String,
    client: reqwest::Client,
}

impl Webhook {
    fn new(url: &str, verify_tls: bool) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(SEND_TIMEOUT)
            .danger_accept_invalid_certs(!verify_tls)
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Self {
            url: url.to_string(),
            client,
        })
    }

    async fn send(&mut self, messages: &[String]) -> (usize, Option<String>) {
        for (i, m) in messages.iter().enumerate() {
            let r = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .body(m.clone())
                .send()
                .await;
            match r {
                Ok(resp) if resp.status().is_success() => {}
                // The URL (which may hold a password) is not in these
                // messages: reqwest's errors are stripped of it.
                Ok(resp) => return (i, Some(format!("the webhook answered {}", resp.status()))),
                Err(e) => {
                    return (
                        i,
                        Some(format!("cannot reach the webhook: {}", e.without_url())),
                    )
                }
            }
        }
        (messages.len(), None)
    }
}

/// A NATS subject: a batch is published, then a round trip to the server
/// (flush) confirms it got them.
pub struct Nats {
    server: String,
    subject: String,
    jetstream: bool,
    client: Option<async_nats::Client>,
}

impl Nats {
    async fn send(&mut self, messages: &[String]) -> (usize, Option<String>) {
        let client = match &self.client {
            Some(c) if c.connection_state() == async_nats::connection::State::Connected => {
                c.clone()
            }
            _ => {
                self.client = None;
                let opts = async_nats::ConnectOptions::new()
                    .connection_timeout(SEND_TIMEOUT)
                    .max_reconnects(Some(1));
                match tokio::time::timeout(SEND_TIMEOUT, opts.connect(self.server.as_str())).await {
                    Ok(Ok(c)) => {
                        self.client = Some(c.clone());
                        c
                    }
                    Ok(Err(e)) => {
                        return (
                            0,
                            Some(format!("cannot connect to the NATS server: {}", e.kind())),
                        )
                    }
                    Err(_) => {
                        return (
                            0,
                            Some("cannot connect to the NATS server: timed out".into()),
                        )
                    }
                }
            }
        };
        if self.jetstream {
            return self.send_jetstream(client, messages).await;
        }
        let sent = async {
            for m in messages {
                client
                    .publish(self.subject.clone(), bytes::Bytes::from(m.clone()))
                    .await
                    .map_err(|e| format!("NATS publish: {e}"))?;
            }
            client.flush().await.map_err(|e| format!("NATS flush: {e}"))
        };
        match tokio::time::timeout(SEND_TIMEOUT, sent).await {
            Ok(Ok(())) => (messages.len(), None),
            Ok(Err(e)) => {
                self.client = None;
                (0, Some(e))
            }
            Err(_) => {
                self.client = None;
                (
                    0,
                    Some("the NATS server did not confirm the batch in time".into()),
                )
            }
        }
    }
}

impl Nats {
    /// Publishes the batch, then waits for the stream's acknowledgement
    /// of each, in order.
    async fn send_jetstream(
        &mut self,
        client: async_nats::Client,
        messages: &[String],
    ) -> (usize, Option<String>) {
        let js = async_nats::jetstream::new(client);
        let mut acks = Vec::with_capacity(messages.len());
        for m in messages {
            match js
                .publish(self.subject.clone(), bytes::Bytes::from(m.clone()))
                .await
            {
                Ok(ack) => acks.push(ack),
                Err(e) => {
                    self.client = None;
                    return (0, Some(format!("JetStream publish: {e}")));
                }
            }
        }
        let mut acked = 0;
        for ack in acks {
            match tokio::time::timeout(SEND_TIMEOUT, ack).await {
                Ok(Ok(_)) => acked += 1,
                Ok(Err(e)) => {
                    self.client = None;
                    return (
                        acked,
                        Some(format!("JetStream did not store an event: {e}")),
                    );
                }
                Err(_) => {
                    self.client = None;
                    return (acked, Some("JetStream did not acknowledge in time".into()));
                }
            }
        }
        (acked, None)
    }
}

/// An AMQP 0.9.1 exchange: a batch of persistent publishes on a channel
/// in confirm mode, then the broker's confirmation of each, in order.
pub struct Amqp {
    url: String,
    exchange: String,
    routing_key: String,
    ack: AmqpAck,
    conn: Option<(lapin::Connection, lapin::Channel)>,
}

impl Amqp {
    async fn channel(&mut self) -> Result<lapin::Channel, String> {
        if let Some((c, ch)) = &self.conn {
            if c.status().connected() && ch.status().connected() {
                return Ok(ch.clone());
            }
        }
        self.conn = None;
        let connect = async {
            let c = lapin::Connection::connect(&self.url, lapin::ConnectionProperties::default())
                .await
                .map_err(|e| format!("cannot connect to the AMQP broker: {e}"))?;
            let ch = c
                .create_channel()
                .await
                .map_err(|e| format!("AMQP channel: {e}"))?;
            if self.ack != AmqpAck::None {
                ch.confirm_select(lapin::options::ConfirmSelectOptions::default())
                    .await
                    .map_err(|e| format!("AMQP confirm mode: {e}"))?;
            }
            Ok::<_, String>((c, ch))
        };
        let (c, ch) = tokio::time::timeout(SEND_TIMEOUT, connect)
            .await
            .map_err(|_| "cannot connect to the AMQP broker: timed out".to_string())??;
        self.conn = Some((c, ch.clone()));
        Ok(ch)
    }

    async fn send(&mut self, messages: &[String]) -> (usize, Option<String>) {
        let ch = match self.channel().await {
            Ok(ch) => ch,
            Err(e) => return (0, Some(e)),
        };
        let props = lapin::BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into());
        let opts = lapin::options::BasicPublishOptions {
            mandatory: self.ack == AmqpAck::Routable,
            ..Default::default()
        };
        let mut confirms = Vec::with_capacity(messages.len());
        for m in messages {
            match ch
                .basic_publish(
                    self.exchange.as_str().into(),
                    self.routing_key.as_str().into(),
                    opts,
                    m.as_bytes(),
                    props.clone(),
                )
                .await
            {
                Ok(c) => confirms.push(c),
                Err(e) => {
                    self.conn = None;
                    return (0, Some(format!("AMQP publish: {e}")));
                }
            }
        }
        if self.ack == AmqpAck::None {
            return (messages.len(), None);
        }
        let mut acked = 0;
        for c in confirms {
            match tokio::time::timeout(SEND_TIMEOUT, c).await {
                Ok(Ok(conf)) if conf.is_ack() => {
                    if conf.take_message().is_some() {
                        // Returned: no queue took it (`mandatory`).
                        return (
                            acked,
                            Some(format!(
                                "no queue is bound to exchange {} for routing key {}",
                                self.exchange, self.routing_key
                            )),
                        );
                    }
                    acked += 1;
                }
                Ok(Ok(_)) => {
                    return (
                        acked,
                        Some("the AMQP broker refused an event (nack)".into()),
                    )
                }
                Ok(Err(e)) => {
                    self.conn = None;
                    return (acked, Some(format!("AMQP confirmation: {e}")));
                }
                Err(_) => {
                    self.conn = None;
                    return (
                        acked,
                        Some("the AMQP broker did not confirm in time".into()),
                    );
                }
            }
        }
        (acked, None)
    }
}

/// A Kafka topic: each batch produced to its partition 0 in one request,
/// acknowledged once every in-sync replica has it.
pub struct Kafka {
    broker: String,
    topic: String,
    partition: Option<rskafka::client::partition::PartitionClient>,
}

impl Kafka {
    async fn send(&mut self, messages: &[String]) -> (usize, Option<String>) {
        use rskafka::client::partition::{Compression, UnknownTopicHandling};
        if self.partition.is_none() {
            let connect = async {
                let client = rskafka::client::ClientBuilder::new(vec![self.broker.clone()])
                    .build()
                    .await
                    .map_err(|e| format!("cannot connect to the Kafka broker: {e}"))?;
                client
                    .partition_client(self.topic.clone(), 0, UnknownTopicHandling::Error)
                    .await
                    .map_err(|e| format!("Kafka topic {}, partition 0: {e}", self.topic))
            };
            match tokio::time::timeout(SEND_TIMEOUT, connect).await {
                Ok(Ok(p)) => self.partition = Some(p),
                Ok(Err(e)) => return (0, Some(e)),
                Err(_) => {
                    return (
                        0,
                        Some("cannot connect to the Kafka broker: timed out".into()),
                    )
                }
            }
        }
        let p = self.partition.as_ref().expect("connected above");
        let now = chrono::Utc::now();
        let records = messages
            .iter()
            .map(|m| rskafka::record::Record {
                key: None,
                value: Some(m.clone().into_bytes()),
                headers: Default::default(),
                timestamp: now,
            })
            .collect();
        match tokio::time::timeout(SEND_TIMEOUT, p.produce(records, Compression::NoCompression))
            .await
        {
            Ok(Ok(_)) => (messages.len(), None),
            Ok(Err(e)) => {
                self.partition = None;
                (0, Some(format!("Kafka produce: {e}")))
            }
            Err(_) => {
                self.partition = None;
                (
                    0,
                    Some("the Kafka broker did not acknowledge in time".into()),
                )
            }
        }
    }
}

/// An MQTT client, what its event loop reports (an acknowledgement, or
/// an error), and the event loop's task.
type MqttConn = (
    AsyncClient,
    mpsc::Receiver<Result<(), String>>,
    tokio::task::JoinHandle<()>,
);

/// An MQTT topic, published at QoS 1 (each acknowledged by the broker in
/// order) or 0.
pub struct Mqtt {
    host: String,
    port: u16,
    tls: bool,
    user: Option<(String, String)>,
    topic: String,
    qos: u8,
    /// The client and what its event loop reports: an acknowledgement,
    /// or an error (then the connection is dropped and made again).
    conn: Option<MqttConn>,
    /// The topic's name, for the client id.
    node: String,
}

impl Drop for Mqtt {
    fn drop(&mut self) {
        if let Some((_, _, task)) = self.conn.take() {
            task.abort();
        }
    }
}

impl Mqtt {
    fn connect(&mut self) -> Result<(), String> {
        let id = format!("garage-{}-{}", self.node, std::process::id());
        let mut opts = MqttOptions::new(id, self.host.clone(), self.port);
        opts.set_keep_alive(Duration::from_secs(30));
        opts.set_clean_session(true);
        if let Some((u, p)) = &self.user {
            opts.set_credentials(u.clone(), p.clone());
        }
        if self.tls {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            opts.set_transport(rumqttc::Transport::tls_with_config(
                rumqttc::TlsConfiguration::Rustls(std::sync::Arc::new(config)),
            ));
        }
        let (client, mut eventloop) = AsyncClient::new(opts, 64);
        let (tx, rx) = mpsc::channel(1024);
        let task = tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Incoming::PubAck(_))) => {
                        if tx.send(Ok(())).await.is_err() {
                            return;
                        }
                    }
                    Ok(Event::Incoming(Incoming::ConnAck(c))) => {
                        if c.code != rumqttc::ConnectReturnCode::Success {
                            let _ = tx
                                .send(Err(format!(
                                    "the MQTT broker refused the connection: {:?}",
                                    c.code
                                )))
                                .await;
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Err(format!("MQTT connection: {e}"))).await;
                        return;
                    }
                }
            }
        });
        self.conn = Some((client, rx, task));
        Ok(())
    }

    async fn send(&mut self, messages: &[String]) -> (usize, Option<String>) {
        if self.conn.is_none() {
            if let Err(e) = self.connect() {
                return (0, Some(e));
            }
        }
        let qos = match self.qos {
            0 => QoS::AtMostOnce,
            _ => QoS::AtLeastOnce,
        };
        let (client, rx, _) = self.conn.as_mut().expect("connected above");
        let mut acked = 0;
        let mut failure = None;
        for m in messages {
            if let Err(e) = client
                .publish(self.topic.clone(), qos, false, m.clone().into_bytes())
                .await
            {
                failure = Some(format!("MQTT publish: {e}"));
                break;
            }
            if qos == QoS::AtMostOnce {
                acked += 1;
                continue;
            }
            match tokio::time::timeout(SEND_TIMEOUT, rx.recv()).await {
                Ok(Some(Ok(()))) => acked += 1,
                Ok(Some(Err(e))) => {
                    failure = Some(e);
                    break;
                }
                Ok(None) => {
                    failure = Some("the MQTT connection ended".into());
                    break;
                }
                Err(_) => {
                    failure = Some("the MQTT broker did not acknowledge in time".into());
                    break;
                }
            }
        }
        if failure.is_some() {
            if let Some((_, _, task)) = self.conn.take() {
                task.abort();
            }
        }
        (acked, failure)
    }
}
