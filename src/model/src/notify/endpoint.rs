//! A topic's endpoint, parsed from its `push-endpoint` URL and
//! attributes: a webhook (`http://`, `https://`), a NATS server
//! (`nats://`) or an MQTT broker (`mqtt://`, `mqtts://`). Checked when a
//! topic is made, so that a bad endpoint is refused then, with what is
//! wrong, rather than found by the delivery worker.

use std::collections::BTreeMap;

/// Where a topic's events are sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// One POST per event, the record as a JSON body; any 2xx answer is
    /// an acknowledgement.
    Webhook {
        url: String,
        /// `verify-ssl` (default true): check the server's certificate.
        verify_tls: bool,
    },
    /// A publish on `subject`, confirmed by a round trip to the server,
    /// or by the JetStream stream that stores it (`nats-jetstream`).
    Nats {
        /// `nats://[user:password@]host:port`.
        server: String,
        /// `nats-subject`; `None`: the topic's name.
        subject: Option<String>,
        /// `nats-jetstream` (default false): each event is acknowledged
        /// by the stream that stores its subject (which must exist), so
        /// that a subscriber away meanwhile misses nothing.
        jetstream: bool,
    },
    /// A persistent publish to an AMQP 0.9.1 exchange (RabbitMQ), routed
    /// by the topic's name, confirmed by the broker (publisher confirms).
    Amqp {
        /// `amqp://[user:password@]host:port[/vhost]` or `amqps://…`.
        url: String,
        /// `amqp-exchange`: the exchange, which must exist.
        exchange: String,
        /// `amqp-ack-level`.
        ack: AmqpAck,
    },
    /// A record produced to partition 0 of a Kafka topic (one partition:
    /// the order of the events is kept), acknowledged by every in-sync
    /// replica.
    Kafka {
        /// `host:port` of the bootstrap broker.
        broker: String,
        /// `kafka-topic`; `None`: the topic's name. The Kafka topic must
        /// exist.
        topic: Option<String>,
    },
    /// A publish at QoS 1 (acknowledged by the broker), or 0 if asked.
    Mqtt {
        host: String,
        port: u16,
        tls: bool,
        user: Option<(String, String)>,
        /// `mqtt-topic`; `None`: the topic's name.
        topic: Option<String>,
        /// `mqtt-qos`: 0 or 1 (default 1).
        qos: u8,
    },
}

/// What acknowledges an AMQP event (Ceph's `amqp-ack-level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmqpAck {
    /// Sent is enough (`none`): an outage loses events.
    None,
    /// The broker confirmed it (`broker`, the default).
    Broker,
    /// The broker confirmed it and routed it to a queue (`routable`): an
    /// event no queue takes is a failure, kept and sent again.
    Routable,
}

impl Endpoint {
    /// Reads a `push-endpoint` URL and the attributes that go with it.
    pub fn parse(url: &str, attrs: &BTreeMap<String, String>) -> Result<Self, String> {
        let u = url::Url::parse(url)
            .map_err(|e| format!("push-endpoint {:?} is not a URL: {e}", redact_url(url)))?;
        let flag = |name: &str, default: bool| -> Result<bool, String> {
            match attrs.get(name).map(|s| s.to_ascii_lowercase()) {
                None => Ok(default),
                Some(v) if v == "true" => Ok(true),
                Some(v) if v == "false" => Ok(false),
                Some(v) => Err(format!("attribute {name} is true or false, not {v:?}")),
            }
        };
        let host = || {
            u.host_str()
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("push-endpoint {:?} names no host", redact_url(url)))
        };
        match u.scheme() {
            "http" | "https" => {
                host()?;
                Ok(Endpoint::Webhook {
                    url: url.to_string(),
                    verify_tls: flag("verify-ssl", true)?,
                })
            }
            "nats" => {
                host()?;
                Ok(Endpoint::Nats {
                    server: url.to_string(),
                    subject: attrs.get("nats-subject").cloned(),
                    jetstream: flag("nats-jetstream", false)?,
                })
            }
            "mqtt" | "mqtts" => {
                let tls = u.scheme() == "mqtts";
                let qos = match attrs.get("mqtt-qos").map(String::as_str) {
                    None | Some("1") => 1,
                    Some("0") => 0,
                    Some(q) => return Err(format!("attribute mqtt-qos is 0 or 1, not {q:?}")),
                };
                let user = match (u.username(), u.password()) {
                    ("", _) => None,
                    (n, p) => Some((decode(n), p.map(decode).unwrap_or_default())),
                };
                Ok(Endpoint::Mqtt {
                    host: host()?,
                    port: u.port().unwrap_or(if tls { 8883 } else { 1883 }),
                    tls,
                    user,
                    topic: attrs.get("mqtt-topic").cloned(),
                    qos,
                })
            }
            "amqp" | "amqps" => {
                host()?;
                let exchange = attrs
                    .get("amqp-exchange")
                    .filter(|e| !e.is_empty())
                    .cloned()
                    .ok_or("an amqp:// endpoint needs the attribute amqp-exchange (an exchange that exists)")?;
                let ack = match attrs.get("amqp-ack-level").map(String::as_str) {
                    None | Some("broker") => AmqpAck::Broker,
                    Some("none") => AmqpAck::None,
                    Some("routable") => AmqpAck::Routable,
                    Some(a) => {
                        return Err(format!(
                            "attribute amqp-ack-level is none, broker or routable, not {a:?}"
                        ))
                    }
                };
                Ok(Endpoint::Amqp {
                    url: url.to_string(),
                    exchange,
                    ack,
                })
            }
            "kafka" => {
                if !u.username().is_empty() {
                    return Err(
                        "kafka endpoints with a user name (SASL) are not served yet".to_string(),
                    );
                }
                Ok(Endpoint::Kafka {
                    broker: format!("{}:{}", host()?, u.port().unwrap_or(9092)),
                    topic: attrs.get("kafka-topic").cloned(),
                })
            }
            s => Err(format!(
                "push-endpoint scheme {s:?} is not known: use http(s)://, nats://, amqp://, kafka:// or mqtt://"
            )),
        }
    }

    /// The kind, for metrics and listings.
    pub fn kind(&self) -> &'static str {
        match self {
            Endpoint::Webhook { .. } => "webhook",
            Endpoint::Nats { .. } => "nats",
            Endpoint::Amqp { .. } => "amqp",
            Endpoint::Kafka { .. } => "kafka",
            Endpoint::Mqtt { .. } => "mqtt",
        }
    }
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// `url` with its password (if any) replaced by `****`: what logs,
/// listings and errors show.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("****"));
            u.to_string()
        }
        Ok(_) => url.to_string(),
        // Not a URL: show nothing after a possible `user:password@`.
        Err(_) => match url.rfind('@') {
            Some(i) => format!("****{}", &url[i..]),
            None => url.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn endpoints_are_read_from_their_url() {
        let none = attrs(&[]);
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8080/hook", &none).unwrap(),
            Endpoint::Webhook {
                url: "http://127.0.0.1:8080/hook".into(),
                verify_tls: true
            }
        );
        assert!(matches!(
            Endpoint::parse("https://h/x", &attrs(&[("verify-ssl", "false")])).unwrap(),
            Endpoint::Webhook {
                verify_tls: false,
                ..
            }
        ));
        assert_eq!(
            Endpoint::parse("nats://127.0.0.1:4222", &attrs(&[("nats-subject", "s.a")])).unwrap(),
            Endpoint::Nats {
                server: "nats://127.0.0.1:4222".into(),
                subject: Some("s.a".into()),
                jetstream: false,
            }
        );
        assert_eq!(
            Endpoint::parse("mqtt://u:p%40ss@127.0.0.1", &none).unwrap(),
            Endpoint::Mqtt {
                host: "127.0.0.1".into(),
                port: 1883,
                tls: false,
                user: Some(("u".into(), "p@ss".into())),
                topic: None,
                qos: 1
            }
        );
    }

    #[test]
    fn bad_endpoints_say_what_is_wrong_without_their_password() {
        let none = attrs(&[]);
        let e = Endpoint::parse("kafka://u:secret@h:9092", &none).unwrap_err();
        assert!(e.contains("not served yet") && !e.contains("secret"), "{e}");
        assert_eq!(
            Endpoint::parse("kafka://127.0.0.1", &none).unwrap(),
            Endpoint::Kafka {
                broker: "127.0.0.1:9092".into(),
                topic: None
            }
        );
        let e = Endpoint::parse("amqp://u:secret@h:5672", &none).unwrap_err();
        assert!(e.contains("amqp-exchange") && !e.contains("secret"), "{e}");
        let e = Endpoint::parse(
            "amqp://h",
            &attrs(&[("amqp-exchange", "x"), ("amqp-ack-level", "maybe")]),
        )
        .unwrap_err();
        assert!(e.contains("amqp-ack-level"), "{e}");
        assert_eq!(
            Endpoint::parse("amqp://h/vh", &attrs(&[("amqp-exchange", "x")])).unwrap(),
            Endpoint::Amqp {
                url: "amqp://h/vh".into(),
                exchange: "x".into(),
                ack: AmqpAck::Broker
            }
        );
        let e = Endpoint::parse("ftp://h", &none).unwrap_err();
        assert!(e.contains("\"ftp\""), "{e}");
        let e = Endpoint::parse("not a url with secret@", &none).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        let e = Endpoint::parse("http://h", &attrs(&[("verify-ssl", "maybe")])).unwrap_err();
        assert!(e.contains("verify-ssl"), "{e}");
        let e = Endpoint::parse("mqtt://h", &attrs(&[("mqtt-qos", "2")])).unwrap_err();
        assert!(e.contains("mqtt-qos"), "{e}");
        assert_eq!(redact_url("nats://u:pw@h:4222"), "nats://u:****@h:4222");
        assert_eq!(redact_url("http://h/x"), "http://h/x");
    }
}
