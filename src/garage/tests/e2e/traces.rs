//! Traces end to end: a node with `[admin] trace_sink` pointing at a small
//! OTLP/HTTP receiver run by the test (protobuf `POST /v1/traces`, decoded
//! with `opentelemetry-proto`); a PutObject from aws-cli must produce a
//! trace with the S3 request span and RPC spans under it; on three nodes,
//! exporting through a real OpenTelemetry Collector (`tests/otelcol`), the
//! spans serving its RPCs on the other nodes are in that trace too.

use crate::common;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use prost::Message;

use common::cluster::Cluster;
use common::s3::{aws_ok, endpoint, make_key};
use common::DEADLINE;

/// One received span, with its resource's attributes.
#[derive(Clone, Debug)]
struct Got {
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
    attrs: HashMap<String, String>,
    resource: HashMap<String, String>,
}

type Spans = Arc<Mutex<Vec<Got>>>;

fn attrs(kv: &[KeyValue]) -> HashMap<String, String> {
    kv.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                Some(any_value::Value::BoolValue(b)) => b.to_string(),
                Some(any_value::Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

async fn receive(State(spans): State<Spans>, body: Bytes) -> impl IntoResponse {
    let req = match ExportTraceServiceRequest::decode(body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}")).into_response(),
    };
    let mut out = spans.lock().unwrap();
    for rs in req.resource_spans {
        let resource = attrs(
            &rs.resource
                .as_ref()
                .map(|r| r.attributes.clone())
                .unwrap_or_default(),
        );
        for ss in rs.scope_spans {
            for s in ss.spans {
                out.push(Got {
                    name: s.name.clone(),
                    trace_id: s.trace_id.clone(),
                    span_id: s.span_id.clone(),
                    parent: s.parent_span_id.clone(),
                    attrs: attrs(&s.attributes),
                    resource: resource.clone(),
                });
            }
        }
    }
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

/// Starts the receiver on `ip` (a free port) in its own thread and
/// runtime; returns its address and the spans it collects.
fn start_receiver(ip: IpAddr) -> (SocketAddr, Spans) {
    let spans: Spans = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let s2 = spans.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new()
                .route("/v1/traces", post(receive))
                .with_state(s2);
            axum::serve(listener, app).await.unwrap();
        });
    });
    (rx.recv().unwrap(), spans)
}

/// Whether `span` has `ancestor` among its parents (same trace).
fn descends_from(all: &[Got], span: &Got, ancestor: &Got) -> bool {
    let mut cur = span.clone();
    for _ in 0..64 {
        if cur.parent.is_empty() {
            return false;
        }
        if cur.parent == ancestor.span_id {
            return true;
        }
        match all
            .iter()
            .find(|s| s.span_id == cur.parent && s.trace_id == cur.trace_id)
        {
            Some(p) => cur = p.clone(),
            None => return false,
        }
    }
    false
}

#[test]
fn put_object_produces_a_trace_with_rpc_child_spans() {
    let mut c = Cluster::new(1, 1);
    let ip = c.nodes[0].ip;
    let (addr, spans) = start_receiver(IpAddr::V4(ip));
    {
        let n = &c.nodes[0];
        let mut text = std::fs::read_to_string(&n.config).unwrap();
        text.push_str(&format!("\n[admin]\ntrace_sink = \"http://{addr}\"\n"));
        std::fs::write(&n.config, text).unwrap();
    }
    c.start_all();
    c.nodes[0]
        .proc()
        .wait_log("exporting traces over OTLP/HTTP");
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "traces");
    let ep = endpoint(&c, 0);
    let dir = c.nodes[0].dir.clone();
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://traced"]);
    // Larger than the inline limit: a block is written too.
    let f = dir.join("obj");
    std::fs::write(&f, vec![3u8; 100_000]).unwrap();
    aws_ok(
        &key,
        &ep,
        &dir,
        &[
            "s3api",
            "put-object",
            "--bucket",
            "traced",
            "--key",
            "obj",
            "--body",
            f.to_str().unwrap(),
        ],
    );

    let node_id = c.nodes[0].id().to_string();
    let start = Instant::now();
    loop {
        let all = spans.lock().unwrap().clone();
        let put = all.iter().find(|s| {
            s.name == "S3 PUT object"
                && s.attrs.get("s3.operation").map(String::as_str) == Some("PutObject")
        });
        if let Some(put) = put {
            let rpcs: Vec<&Got> = all
                .iter()
                .filter(|s| {
                    s.trace_id == put.trace_id
                        && s.name.starts_with("RPC ")
                        && descends_from(&all, s, put)
                })
                .collect();
            let has = |n: &str| rpcs.iter().any(|s| s.name == n);
            if has("RPC garage_table/object") && has("RPC garage_block/manager") {
                assert!(put.parent.is_empty(), "the S3 request span is the root");
                assert_eq!(
                    put.attrs.get("s3.operation").map(String::as_str),
                    Some("PutObject")
                );
                assert_eq!(
                    put.attrs.get("s3.bucket").map(String::as_str),
                    Some("traced")
                );
                assert_eq!(
                    put.attrs
                        .get("http.response.status_code")
                        .map(String::as_str),
                    Some("200")
                );
                assert_eq!(put.attrs.get("s3.request_id").map(|s| s.len()), Some(16));
                assert_eq!(
                    put.resource.get("service.name").map(String::as_str),
                    Some("garage")
                );
                assert_eq!(put.resource.get("garage.node_id"), Some(&node_id));
                // The block write nests the block RPC; the table write the
                // table RPC.
                let block_put = all
                    .iter()
                    .find(|s| s.trace_id == put.trace_id && s.name == "block put")
                    .expect("a block put span");
                assert!(descends_from(&all, block_put, put));
                assert!(
                    rpcs.iter()
                        .any(|r| r.name == "RPC garage_block/manager"
                            && r.parent == block_put.span_id)
                );
                break;
            }
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no PutObject trace with table and block RPC child spans; spans received:\n{}",
            all.iter()
                .map(|s| format!(
                    "{} trace={} parent={}",
                    s.name,
                    hex(&s.trace_id),
                    hex(&s.parent)
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A real OpenTelemetry Collector (`tests/otelcol`, built from the
/// upstream collector's Go modules) receiving OTLP/HTTP on `listen` and
/// forwarding to `forward_to`; killed when dropped.
struct Collector {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Collector {
    fn start(listen: SocketAddr, forward_to: SocketAddr) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("otelcol");
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otelcol");
        let o = std::process::Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(&src)
            .output()
            .expect("go runs (.ci/run checks it is installed)");
        assert!(
            o.status.success(),
            "go build of the collector: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let config = dir.path().join("otelcol.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: {listen}\n\
                 processors:\n  batch:\n    timeout: 200ms\n\
                 exporters:\n  otlphttp:\n    endpoint: http://{forward_to}\n    compression: none\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    traces:\n      \
                 receivers: [otlp]\n      processors: [batch]\n      exporters: [otlphttp]\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("otelcol.log")).unwrap();
        let child = std::process::Command::new(&bin)
            .arg(format!("--config=file:{}", config.display()))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the collector starts");
        let mut c = Self { child, _dir: dir };
        let deadline = Instant::now() + DEADLINE;
        while std::net::TcpStream::connect(listen).is_err() {
            let exited = c.child.try_wait().ok().flatten().is_some();
            assert!(
                Instant::now() < deadline && !exited,
                "the collector does not listen on {listen}:\n{}",
                std::fs::read_to_string(c._dir.path().join("otelcol.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        c
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One PutObject through node 0 of a three-zone cluster is one trace:
/// nodes 1 and 2 serve its table and block RPCs in spans carrying its
/// trace id, each the child of the RPC span on node 0 that called it. The
/// nodes export to a real OpenTelemetry Collector, which forwards the
/// spans it accepted to the test's receiver.
#[test]
fn a_put_on_three_nodes_is_one_trace() {
    let mut c = Cluster::new(3, 3);
    let (receiver, spans) = start_receiver(IpAddr::V4(c.nodes[0].ip));
    let addr = SocketAddr::new(IpAddr::V4(c.nodes[0].ip), 4318);
    let _collector = Collector::start(addr, receiver);
    let add_sink = |c: &Cluster, i: usize| {
        let mut text = std::fs::read_to_string(&c.nodes[i].config).unwrap();
        text.push_str(&format!("\n[admin]\ntrace_sink = \"http://{addr}\"\n"));
        std::fs::write(&c.nodes[i].config, text).unwrap();
    };
    // As `start_all`, with the sink added after the bootstrap peer is
    // written into the configurations.
    add_sink(&c, 0);
    c.start(0);
    let boot = vec![format!("{}@{}", c.nodes[0].id(), c.nodes[0].public_addr())];
    for i in 1..3 {
        c.write_config(i, &c.secret.clone(), &boot);
        add_sink(&c, i);
        c.start(i);
    }
    for n in c.nodes.iter() {
        n.proc().wait_log("exporting traces over OTLP/HTTP");
    }
    common::cluster::wait_until(
        "nodes see each other",
        common::cluster::CLUSTER_DEADLINE,
        || c.health(0).0.len() == 3,
    );
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = make_key(&c, "traces3");
    let ep = endpoint(&c, 0);
    let dir = c.nodes[0].dir.clone();
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://traced3"]);
    let f = dir.join("obj");
    std::fs::write(&f, vec![5u8; 300_000]).unwrap();
    aws_ok(
        &key,
        &ep,
        &dir,
        &[
            "s3api",
            "put-object",
            "--bucket",
            "traced3",
            "--key",
            "obj",
            "--body",
            f.to_str().unwrap(),
        ],
    );

    let id = |i: usize| c.nodes[i].id().to_string();
    let start = Instant::now();
    loop {
        let all = spans.lock().unwrap().clone();
        let node = |s: &Got| {
            s.resource
                .get("garage.node_id")
                .cloned()
                .unwrap_or_default()
        };
        let put = all.iter().find(|s| {
            s.attrs.get("s3.operation").map(String::as_str) == Some("PutObject") && node(s) == id(0)
        });
        // For each other node and endpoint: a serving span in the PUT's
        // trace whose parent is node 0's RPC span to that endpoint, itself
        // under the request.
        let served = |put: &Got, i: usize, endpoint: &str| {
            all.iter().any(|s| {
                s.trace_id == put.trace_id
                    && node(s) == id(i)
                    && s.name == format!("RPC serve {endpoint}")
                    && all.iter().any(|caller| {
                        caller.span_id == s.parent
                            && caller.trace_id == put.trace_id
                            && node(caller) == id(0)
                            && caller.name == format!("RPC {endpoint}")
                            && descends_from(&all, caller, put)
                    })
            })
        };
        let whole = put.is_some_and(|put| {
            (1..3).all(|i| {
                served(put, i, "garage_table/object") && served(put, i, "garage_block/manager")
            })
        });
        if whole {
            let put = put.unwrap();
            assert!(put.parent.is_empty(), "the S3 request span is the root");
            // Every span of the trace comes from one of the three nodes.
            let nodes: std::collections::BTreeSet<String> = all
                .iter()
                .filter(|s| s.trace_id == put.trace_id)
                .map(node)
                .collect();
            assert_eq!(nodes.len(), 3, "{nodes:?}");
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no PutObject trace served on nodes 1 and 2; spans received:\n{}",
            all.iter()
                .map(|s| format!(
                    "{} node={} trace={} span={} parent={}",
                    s.name,
                    &node(s)[..node(s).len().min(16)],
                    hex(&s.trace_id),
                    hex(&s.span_id),
                    hex(&s.parent)
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn no_trace_sink_means_no_exporter() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    let log = c.nodes[0].proc().log();
    assert!(!log.contains("exporting traces"), "{log}");
}
