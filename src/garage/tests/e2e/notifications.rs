//! Bucket notifications (issue 48) with real clients and real brokers
//! against real `garage` processes: topics made with `aws sns`, rules with
//! `aws s3api put-bucket-notification-configuration`, writes through the
//! AWS SDK, and every event counted at a webhook receiver, a NATS
//! JetStream stream and an MQTT subscriber, with the endpoint stopped and
//! a node killed while events wait.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use crate::common;

use common::brokers::{free_port, kafka, mosquitto, nats, rabbitmq, webhook, webhook_tls};
use common::cluster::{wait_until, Cluster};
use common::s3::{aws, aws_ok, endpoint, make_key, put_object, sdk_client};

/// One event as a subscriber got it.
#[derive(Clone, Debug)]
struct Got {
    id: String,
    name: String,
    key: String,
    sequencer: String,
    etag: String,
    size: u64,
}

/// The records of one message (`{"Records":[…]}`).
fn records(message: &str) -> Vec<Got> {
    let v: serde_json::Value = serde_json::from_str(message)
        .unwrap_or_else(|e| panic!("a message is not JSON ({e}): {message}"));
    v["Records"]
        .as_array()
        .unwrap_or_else(|| panic!("no Records in {message}"))
        .iter()
        .map(|r| {
            assert_eq!(r["eventSource"], "aws:s3", "{r}");
            assert_eq!(r["eventVersion"], "2.2", "{r}");
            assert_eq!(r["awsRegion"], "garage", "{r}");
            let o = &r["s3"]["object"];
            Got {
                id: r["eventId"].as_str().unwrap().to_string(),
                name: r["eventName"].as_str().unwrap().to_string(),
                key: o["key"].as_str().unwrap().to_string(),
                sequencer: o["sequencer"].as_str().unwrap().to_string(),
                etag: o["eTag"].as_str().unwrap_or("").to_string(),
                size: o["size"].as_u64().unwrap_or(0),
            }
        })
        .collect()
}

/// What a subscriber got, checked: each event once at least, the events
/// of each key first seen in the order of their writes. Returns the
/// events (first copies) and the number of copies beyond the first.
fn check(got: &[Got], expected: usize) -> (Vec<Got>, usize) {
    let mut seen = HashSet::new();
    let mut first = Vec::new();
    for g in got {
        if seen.insert(g.id.clone()) {
            first.push(g.clone());
        }
    }
    let dups = got.len() - first.len();
    assert_eq!(
        first.len(),
        expected,
        "{} distinct events for {expected} writes ({dups} copies)",
        first.len()
    );
    let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for g in &first {
        by_key.entry(&g.key).or_default().push(&g.sequencer);
    }
    for (k, seqs) in by_key {
        let mut sorted = seqs.clone();
        sorted.sort();
        assert_eq!(seqs, sorted, "the events of {k} came out of order");
    }
    (first, dups)
}

fn lines(path: &Path) -> Vec<Got> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .flat_map(records)
        .collect()
}

/// Writes `n` objects through node `node`, keys `prefix{i % keys}`, each
/// an acknowledged PutObject; returns their ETags by key, in order.
fn write(
    c: &Cluster,
    node: usize,
    key: &(String, String),
    bucket: &str,
    prefix: &str,
    n: usize,
    keys: usize,
) -> Vec<(String, String)> {
    let cl = sdk_client(c, node, key);
    common::run(async {
        let mut out = Vec::new();
        for i in 0..n {
            let k = format!("{prefix}{}", i % keys);
            let body = format!("{prefix} write {i}");
            put_object(&cl, bucket, &k, body.as_bytes(), None)
                .await
                .unwrap();
            out.push((k, md5_hex(body.as_bytes())));
        }
        out
    })
}

/// An MD5 as lowercase hex (the ETag of a single-part object).
fn md5_hex(b: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// Makes topic `name` sending to `url` (with `attrs`), and a rule on
/// `bucket` for created and removed objects.
fn subscribe(
    key: &(String, String),
    ep: &str,
    dir: &Path,
    bucket: &str,
    name: &str,
    url: &str,
    attrs: &str,
) {
    let attributes = match attrs {
        "" => format!("push-endpoint={url}"),
        a => format!("push-endpoint={url},{a}"),
    };
    let out = aws_ok(
        key,
        ep,
        dir,
        &[
            "sns",
            "create-topic",
            "--name",
            name,
            "--attributes",
            &attributes,
        ],
    );
    assert!(
        out.contains(&format!("arn:aws:sns:garage::{name}")),
        "{out}"
    );
    let config = serde_json::json!({
        "TopicConfigurations": [{
            "Id": format!("{name}-rule"),
            "TopicArn": format!("arn:aws:sns:garage::{name}"),
            "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
        }]
    });
    aws_ok(
        key,
        ep,
        dir,
        &[
            "s3api",
            "put-bucket-notification-configuration",
            "--bucket",
            bucket,
            "--notification-configuration",
            &config.to_string(),
        ],
    );
}

#[test]
fn webhook_events_arrive_in_order_through_an_outage_and_a_kill() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "notify");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    let cli = |args: &[&str]| aws_ok(&key, &ep, &dir, args);
    cli(&["s3", "mb", "s3://photos"]);
    let out = dir.join("webhook.jsonl");
    let port = free_port();
    let mut hook = webhook(port, &out);
    let url = format!("http://127.0.0.1:{port}/events");

    // Refusals: a rule naming no topic, a topic with no endpoint, a
    // scheme not served, an event type not served.
    let bad = aws(
        &key,
        &ep,
        &dir,
        &[
            "sns",
            "create-topic",
            "--name",
            "t",
            "--attributes",
            "push-endpoint=ftp://h/",
        ],
    );
    assert!(
        common::stderr(&bad).contains("InvalidParameter"),
        "{}",
        common::stderr(&bad)
    );
    let bad = aws(&key, &ep, &dir, &["sns", "create-topic", "--name", "t"]);
    assert!(
        common::stderr(&bad).contains("push-endpoint"),
        "{}",
        common::stderr(&bad)
    );
    // A rule for `event` to `topic`, refused with `why` in the error.
    let refused_rule = |topic: &str, event: &str, why: &str| {
        let rule = serde_json::json!({"TopicConfigurations": [{
            "TopicArn": format!("arn:aws:sns:garage::{topic}"), "Events": [event]}]});
        let bad = aws(
            &key,
            &ep,
            &dir,
            &[
                "s3api",
                "put-bucket-notification-configuration",
                "--bucket",
                "photos",
                "--notification-configuration",
                &rule.to_string(),
            ],
        );
        let e = common::stderr(&bad);
        assert!(!bad.status.success() && e.contains(why), "{e}");
    };
    refused_rule("nosuch", "s3:ObjectCreated:*", "nosuch");
    subscribe(
        &key,
        &ep,
        &dir,
        "photos",
        "hook",
        &url,
        "OpaqueData=opaque-1",
    );
    refused_rule("hook", "s3:ObjectRestore:Post", "not served");
    let got = cli(&[
        "s3api",
        "get-bucket-notification-configuration",
        "--bucket",
        "photos",
    ]);
    assert!(
        got.contains("arn:aws:sns:garage::hook") && got.contains("s3:ObjectRemoved:*"),
        "{got}"
    );
    let attrs = cli(&[
        "sns",
        "get-topic-attributes",
        "--topic-arn",
        "arn:aws:sns:garage::hook",
    ]);
    assert!(
        attrs.contains(&url) && attrs.contains("opaque-1"),
        "{attrs}"
    );

    // 1. While the receiver is up: 40 writes of 8 keys, and one delete.
    let mut written = write(&c, 0, &key, "photos", "a/k ", 40, 8);
    cli(&["s3", "rm", "s3://photos/a/k 0"]);
    let expected = written.len() + 1;
    wait_until(
        "the first events at the webhook",
        Duration::from_secs(60),
        || {
            lines(&out)
                .iter()
                .map(|g| &g.id)
                .collect::<HashSet<_>>()
                .len()
                >= expected
        },
    );
    let (first, _) = check(&lines(&out), expected);
    // Each write's record: its key (URL-encoded, slashes kept), size and
    // ETag, in the order of the writes.
    let puts: Vec<&Got> = first
        .iter()
        .filter(|g| g.name == "ObjectCreated:Put")
        .collect();
    assert_eq!(puts.len(), 40);
    for (g, (k, etag)) in puts.iter().zip(&written) {
        assert_eq!(g.key, k.replace(' ', "+"));
        assert_eq!(&g.etag, etag);
        assert!(g.size > 0);
    }
    assert_eq!(first.last().unwrap().name, "ObjectRemoved:Delete");

    // 2. The receiver stops; 200 writes wait in the outbox; the node is
    // killed right after the last one is acknowledged, and restarted.
    hook.stop();
    written.extend(write(&c, 0, &key, "photos", "b/", 200, 10));
    c.kill(0);
    c.start(0);
    // 3. 50 more writes after the restart, still with no receiver.
    written.extend(write(&c, 0, &key, "photos", "b/", 50, 10));
    let status = cli(&[
        "sns",
        "get-topic-attributes",
        "--topic-arn",
        "arn:aws:sns:garage::hook",
    ]);
    assert!(status.contains("QueuedEventsOnThisNode"), "{status}");
    // The CLI: the topic, and the events waiting on the node.
    let list = c.garage_ok(0, &["topic", "list"]);
    assert!(
        list.contains("hook") && list.contains("webhook") && list.contains(&url),
        "{list}"
    );
    let info = c.garage_ok(0, &["topic", "info", "hook"]);
    let node = &c.nodes[0].id()[..16];
    let queued = info
        .lines()
        .find(|l| l.contains(node))
        .unwrap_or_else(|| panic!("no line for node {node}: {info}"));
    let n: u64 = queued
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count in {queued:?}"));
    assert!(n > 0, "{info}");
    // 4. The receiver comes back: everything arrives, in order per key.
    hook.start();
    let expected = written.len() + 1;
    let took = wait_until(
        "every event at the webhook",
        Duration::from_secs(120),
        || {
            lines(&out)
                .iter()
                .map(|g| &g.id)
                .collect::<HashSet<_>>()
                .len()
                >= expected
        },
    );
    let (first, dups) = check(&lines(&out), expected);
    eprintln!(
        "webhook: {expected} events, {dups} delivered twice, the backlog of 250 sent {:.1} s after the receiver came back",
        took.as_secs_f64()
    );
    let puts: Vec<&Got> = first
        .iter()
        .filter(|g| g.name == "ObjectCreated:Put")
        .collect();
    assert_eq!(puts.len(), written.len());
    // The outbox is empty again.
    wait_until("an empty outbox", Duration::from_secs(30), || {
        cli(&[
            "sns",
            "get-topic-attributes",
            "--topic-arn",
            "arn:aws:sns:garage::hook",
        ])
        .contains("\"garage:QueuedEventsOnThisNode\": \"0\"")
    });
    // Deleting the topic: it is listed no more.
    cli(&[
        "sns",
        "delete-topic",
        "--topic-arn",
        "arn:aws:sns:garage::hook",
    ]);
    let list = cli(&["sns", "list-topics"]);
    assert!(!list.contains("hook"), "{list}");
    c.assert_no_secret_logged();
}

#[test]
fn https_webhooks_check_the_certificate_unless_told_not_to() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "notify");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    for b in ["lenient", "strict"] {
        aws_ok(&key, &ep, &dir, &["s3", "mb", &format!("s3://{b}")]);
    }
    let out = dir.join("tls.jsonl");
    let port = free_port();
    let _hook = webhook_tls(port, &out, &dir);
    let url = format!("https://127.0.0.1:{port}/events");
    // A self-signed certificate: accepted with verify-ssl=false only.
    subscribe(
        &key,
        &ep,
        &dir,
        "lenient",
        "lenient",
        &url,
        "verify-ssl=false",
    );
    subscribe(&key, &ep, &dir, "strict", "strict", &url, "");
    let n = write(&c, 0, &key, "lenient", "t/", 10, 3).len();
    write(&c, 0, &key, "strict", "t/", 3, 3);
    wait_until("the events over HTTPS", Duration::from_secs(60), || {
        lines(&out)
            .iter()
            .map(|g| &g.id)
            .collect::<HashSet<_>>()
            .len()
            >= n
    });
    wait_until(
        "the strict topic's failed sends",
        Duration::from_secs(60),
        || c.counter(0, "notify_send_errors_total") > 0,
    );
    let (first, _) = check(&lines(&out), n);
    assert!(first.iter().all(|g| g.key.starts_with("t/")));
    let info = c.garage_ok(0, &["topic", "info", "strict"]);
    assert!(info.contains("3 events"), "{info}");
    c.assert_no_secret_logged();
}

/// Makes JetStream stream `name`, storing `subject`, on the server of
/// `port`.
fn create_stream(port: u16, name: &str, subject: &str) {
    common::run(async {
        let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
            .await
            .unwrap();
        async_nats::jetstream::new(client)
            .create_stream(async_nats::jetstream::stream::Config {
                name: name.into(),
                subjects: vec![subject.into()],
                ..Default::default()
            })
            .await
            .unwrap();
    });
}

/// The events of a NATS JetStream stream, read from its start.
async fn jetstream_events(port: u16, stream: &str) -> Vec<Got> {
    let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
        .await
        .unwrap();
    let js = async_nats::jetstream::new(client);
    let mut s = js.get_stream(stream).await.unwrap();
    let n = s.info().await.unwrap().state.messages;
    let mut out = Vec::new();
    for seq in 1..=n {
        let m = s.get_raw_message(seq).await.unwrap();
        out.extend(records(std::str::from_utf8(&m.payload).unwrap()));
    }
    out
}

#[test]
fn nats_events_from_three_zones_with_a_node_killed_and_the_server_restarted() {
    let mut c = Cluster::three_zones();
    let key = make_key(&c, "notify");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://ingest"]);
    let port = free_port();
    let store = dir.join("nats-store");
    let mut server = nats(port, &store);
    create_stream(port, "EVENTS", "garage.events");
    subscribe(
        &key,
        &ep,
        &dir,
        "ingest",
        "stream",
        &format!("nats://127.0.0.1:{port}"),
        "nats-subject=garage.events,nats-jetstream=true",
    );
    // Each key is written through one node (the order of one key's
    // events is kept per node that served its writes).
    let mut n = 0;
    for i in 0..3 {
        n += write(&c, i, &key, "ingest", &format!("n{i}/"), 30, 5).len();
    }
    wait_until(
        "the first events in the stream",
        Duration::from_secs(60),
        || common::run(jetstream_events(port, "EVENTS")).len() >= n,
    );
    // Node 2 writes, then is killed at once: its events wait in its
    // outbox. The server stops; nodes 0 and 1 write meanwhile.
    n += write(&c, 2, &key, "ingest", "n2/", 30, 5).len();
    c.kill(2);
    server.stop();
    for i in 0..2 {
        n += write(&c, i, &key, "ingest", &format!("n{i}/"), 40, 5).len();
    }
    server.start();
    c.start(2);
    let took = wait_until(
        "every event in the stream",
        Duration::from_secs(120),
        || {
            let got = common::run(jetstream_events(port, "EVENTS"));
            got.iter().map(|g| &g.id).collect::<HashSet<_>>().len() >= n
        },
    );
    let got = common::run(jetstream_events(port, "EVENTS"));
    let (_, dups) = check(&got, n);
    eprintln!(
        "nats: {n} events, {dups} stored twice, all in the stream {:.1} s after the server and node 2 came back",
        took.as_secs_f64()
    );
    c.assert_no_secret_logged();
}

#[test]
fn mqtt_events_survive_a_broker_restart() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "notify");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://media"]);
    let port = free_port();
    let store = dir.join("mosquitto");
    std::fs::create_dir_all(&store).unwrap();
    let mut broker = mosquitto(port, &store);
    // A subscriber with a persistent session at QoS 1: the broker keeps
    // what it missed (across the broker's restart too).
    let got: std::sync::Arc<std::sync::Mutex<Vec<Got>>> = Default::default();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (sub, mut events) = {
        let mut o = rumqttc::MqttOptions::new("test-subscriber", "127.0.0.1", port);
        o.set_clean_session(false);
        o.set_keep_alive(Duration::from_secs(5));
        rumqttc::AsyncClient::new(o, 100)
    };
    let g2 = got.clone();
    rt.spawn(async move {
        loop {
            match events.poll().await {
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(p))) => {
                    g2.lock()
                        .unwrap()
                        .extend(records(std::str::from_utf8(&p.payload).unwrap()));
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    });
    rt.block_on(sub.subscribe("garage/media", rumqttc::QoS::AtLeastOnce))
        .unwrap();
    subscribe(
        &key,
        &ep,
        &dir,
        "media",
        "mq",
        &format!("mqtt://127.0.0.1:{port}"),
        "mqtt-topic=garage/media",
    );
    let count = |got: &std::sync::Mutex<Vec<Got>>| {
        got.lock()
            .unwrap()
            .iter()
            .map(|g| g.id.clone())
            .collect::<HashSet<_>>()
            .len()
    };
    let mut n = write(&c, 0, &key, "media", "m/", 30, 5).len();
    wait_until(
        "the first events at the subscriber",
        Duration::from_secs(60),
        || count(&got) >= n,
    );
    broker.stop();
    n += write(&c, 0, &key, "media", "m/", 30, 5).len();
    broker.start();
    let took = wait_until(
        "every event at the subscriber",
        Duration::from_secs(120),
        || count(&got) >= n,
    );
    let all = got.lock().unwrap().clone();
    let (_, dups) = check(&all, n);
    eprintln!(
        "mqtt: {n} events, {dups} received twice, all in {:.1} s after the broker came back",
        took.as_secs_f64()
    );
}

/// Takes every message waiting in queue `queue` of the broker on `port`.
async fn amqp_take(port: u16, queue: &str) -> Vec<Got> {
    let c = lapin::Connection::connect(
        &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
        lapin::ConnectionProperties::default(),
    )
    .await
    .unwrap();
    let ch = c.create_channel().await.unwrap();
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get(
            queue.into(),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
    {
        out.extend(records(std::str::from_utf8(&m.delivery.data).unwrap()));
    }
    let _ = c.close(200, "done".into()).await;
    out
}

#[test]
fn amqp_events_survive_a_broker_restart() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "notify");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://uploads"]);
    let port = free_port();
    let mut broker = rabbitmq(port, &dir.join("rabbitmq"));
    // A durable exchange, and a durable queue taking all its messages.
    common::run(async {
        let conn = lapin::Connection::connect(
            &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
            lapin::ConnectionProperties::default(),
        )
        .await
        .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let durable = |d| lapin::options::ExchangeDeclareOptions {
            durable: d,
            ..Default::default()
        };
        ch.exchange_declare(
            "garage".into(),
            lapin::ExchangeKind::Topic,
            durable(true),
            Default::default(),
        )
        .await
        .unwrap();
        ch.queue_declare(
            "events".into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .unwrap();
        ch.queue_bind(
            "events".into(),
            "garage".into(),
            "#".into(),
            Default::default(),
            Default::default(),
        )
        .await
        .unwrap();
        let _ = conn.close(200, "done".into()).await;
    });
    subscribe(
        &key,
        &ep,
        &dir,
        "uploads",
        "rabbit",
        &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
        "amqp-exchange=garage,amqp-ack-level=routable",
    );
    let mut got = Vec::new();
    let mut n = write(&c, 0, &key, "uploads", "u/", 30, 5).len();
    wait_until(
        "the first events in the queue",
        Duration::from_secs(60),
        || {
            got.extend(common::run(amqp_take(port, "events")));
            got.iter().map(|g| &g.id).collect::<HashSet<_>>().len() >= n
        },
    );
    broker.stop();
    n += write(&c, 0, &key, "uploads", "u/", 30, 5).len();
    broker.start();
    let took = wait_until("every event in the queue", Duration::from_secs(120), || {
        got.extend(common::run(amqp_take(port, "events")));
        got.iter().map(|g| &g.id).collect::<HashSet<_>>().len() >= n
    });
    let (_, dups) = check(&got, n);
    eprintln!(
        "amqp: {n} events, {dups} received twice, all in {:.1} s after the broker came back",
        took.as_secs_f64()
    );
    c.assert_no_secret_logged();
}

/// Every record of partition 0 of Kafka topic `topic`.
async fn kafka_events(port: u16, topic: &str) -> Vec<Got> {
    use rskafka::client::partition::UnknownTopicHandling;
    let client = rskafka::client::ClientBuilder::new(vec![format!("127.0.0.1:{port}")])
        .build()
        .await
        .unwrap();
    let p = client
        .partition_client(topic.to_string(), 0, UnknownTopicHandling::Retry)
        .await
        .unwrap();
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let (records, high) = p.fetch_records(offset, 1..1_000_000, 500).await.unwrap();
        for r in &records {
            let v = r.record.value.as_deref().unwrap_or_default();
            out.extend(records_of(v));
            offset = r.offset + 1;
        }
        if records.is_empty() || offset >= high {
            return out;
        }
    }
}

fn records_of(v: &[u8]) -> Vec<Got> {
    records(std::str::from_utf8(v).unwrap())
}

#[test]
fn kafka_events_survive_a_broker_restart() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "notify");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://logs"]);
    let port = free_port();
    let mut broker = kafka(port, &dir.join("kafka"));
    common::run(async {
        let client = rskafka::client::ClientBuilder::new(vec![format!("127.0.0.1:{port}")])
            .build()
            .await
            .unwrap();
        client
            .controller_client()
            .unwrap()
            .create_topic("s3-events", 1, 1, 5_000)
            .await
            .unwrap();
    });
    subscribe(
        &key,
        &ep,
        &dir,
        "logs",
        "kafka-topic",
        &format!("kafka://127.0.0.1:{port}"),
        "kafka-topic=s3-events",
    );
    let distinct = |got: &[Got]| got.iter().map(|g| &g.id).collect::<HashSet<_>>().len();
    let mut n = write(&c, 0, &key, "logs", "l/", 30, 5).len();
    wait_until("the first events in Kafka", Duration::from_secs(60), || {
        distinct(&common::run(kafka_events(port, "s3-events"))) >= n
    });
    broker.stop();
    n += write(&c, 0, &key, "logs", "l/", 30, 5).len();
    broker.start();
    let took = wait_until("every event in Kafka", Duration::from_secs(120), || {
        distinct(&common::run(kafka_events(port, "s3-events"))) >= n
    });
    let got = common::run(kafka_events(port, "s3-events"));
    let (_, dups) = check(&got, n);
    eprintln!(
        "kafka: {n} events, {dups} stored twice, all in {:.1} s after the broker came back",
        took.as_secs_f64()
    );
    c.assert_no_secret_logged();
}

/// A number from the environment (the benchmark's knobs).
pub(crate) fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?}")))
        .unwrap_or(default)
}

/// PUT latencies (ms) of `n` objects of 1 KiB through node 0.
fn put_latencies(c: &Cluster, key: &(String, String), bucket: &str, n: usize) -> Vec<f64> {
    let cl = sdk_client(c, 0, key);
    let body = vec![7u8; 1024];
    common::run(async {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let t = std::time::Instant::now();
            put_object(&cl, bucket, &format!("o{i}"), &body, None)
                .await
                .unwrap();
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        out
    })
}

pub(crate) fn summary(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    format!(
        "mean {:.1} ms, p50 {:.1} ms, p99 {:.1} ms",
        v.iter().sum::<f64>() / v.len() as f64,
        at(0.5),
        at(0.99)
    )
}

/// The notification benchmark (script/bench-notify.sh): on three zones,
/// PUT latency without and with a rule, events/s delivered while
/// writing, and the drain rate of a backlog of EVENTS events to a webhook
/// and to NATS JetStream; `GARAGE_TEST_NOTIFY_RTT_MS` between nodes
/// (the harness's delay proxy).
#[test]
#[ignore = "a benchmark: script/bench-notify.sh"]
fn bench_notifications() {
    let n = knob("GARAGE_TEST_NOTIFY_EVENTS", 2000);
    let rtt = knob("GARAGE_TEST_NOTIFY_RTT_MS", 0) as u64;
    let outage_secs = knob("GARAGE_TEST_NOTIFY_OUTAGE_SECS", 0) as u64;
    let c = Cluster::three_zones();
    if rtt > 0 {
        c.set_latency(Duration::from_millis(rtt / 2));
    }
    let key = make_key(&c, "bench");
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    for b in ["plain", "hooked", "drained", "streamed"] {
        aws_ok(&key, &ep, &dir, &["s3", "mb", &format!("s3://{b}")]);
    }
    let out = dir.join("bench-hook.jsonl");
    let port = free_port();
    let mut hook = webhook(port, &out);
    let url = format!("http://127.0.0.1:{port}/e");
    subscribe(&key, &ep, &dir, "hooked", "bh", &url, "");
    subscribe(&key, &ep, &dir, "drained", "bd", &url, "");
    let nport = free_port();
    let _nats = nats(nport, &dir.join("nats-bench"));
    create_stream(nport, "BENCH", "bench");
    subscribe(
        &key,
        &ep,
        &dir,
        "streamed",
        "bn",
        &format!("nats://127.0.0.1:{nport}"),
        "nats-subject=bench,nats-jetstream=true",
    );
    let distinct = |path: &Path| {
        lines(path)
            .iter()
            .map(|g| g.id.clone())
            .collect::<HashSet<_>>()
            .len()
    };

    let plain = put_latencies(&c, &key, "plain", n);
    let t = std::time::Instant::now();
    let hooked = put_latencies(&c, &key, "hooked", n);
    wait_until(
        "the written events at the webhook",
        Duration::from_secs(600),
        || distinct(&out) >= n,
    );
    let live = t.elapsed();
    eprintln!("bench: RTT {rtt} ms, {n} PUTs of 1 KiB through one node, one at a time");
    eprintln!("bench: PUT without a rule: {}", summary(plain));
    eprintln!("bench: PUT with a webhook rule: {}", summary(hooked));
    eprintln!(
        "bench: webhook, live: {n} events delivered {:.1} s after the first PUT ({:.0} events/s, bounded by the writes)",
        live.as_secs_f64(),
        n as f64 / live.as_secs_f64()
    );
    // A backlog, then its drain: the receiver down for the writes' time,
    // or `GARAGE_TEST_NOTIFY_OUTAGE_SECS` if longer.
    hook.stop();
    let down = std::time::Instant::now();
    put_latencies(&c, &key, "drained", n);
    std::thread::sleep(Duration::from_secs(outage_secs).saturating_sub(down.elapsed()));
    eprintln!(
        "bench: webhook receiver down {:.0} s while {n} objects were written",
        down.elapsed().as_secs_f64()
    );
    let before = distinct(&out);
    hook.start();
    // From the first event of the backlog to arrive (the topic waits out
    // its back-off first) to the last.
    let t = std::time::Instant::now();
    let mut first = None;
    loop {
        let now = distinct(&out);
        if now > before && first.is_none() {
            first = Some(std::time::Instant::now());
        }
        if now >= before + n {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the backlog at the webhook"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = first.expect("an event arrived");
    let d = first.elapsed();
    eprintln!(
        "bench: webhook, backlog: {n} events drained in {:.2} s ({:.0} events/s), the first {:.1} s after the receiver came back (the topic's back-off)",
        d.as_secs_f64(),
        n as f64 / d.as_secs_f64().max(0.001),
        first.duration_since(t).as_secs_f64()
    );
    _ = std::fs::remove_file(&out);
    let t = std::time::Instant::now();
    put_latencies(&c, &key, "streamed", n);
    let w = t.elapsed();
    wait_until("the events in the stream", Duration::from_secs(600), || {
        common::run(jetstream_events(nport, "BENCH")).len() >= n
    });
    let d = t.elapsed();
    eprintln!(
        "bench: NATS JetStream, live: {n} events stored {:.1} s after the first PUT (writes took {:.1} s)",
        d.as_secs_f64(),
        w.as_secs_f64()
    );
}
