//! Benchmark of the network layer: `cargo bench -p garage_net`.
//!
//! Two `NetApp`s in one process, connected over loopback TCP, on a 2-thread
//! tokio runtime. Prints:
//! - small-message RPC round-trip latency (median, p99) over
//!   `GARAGE_BENCH_CALLS` calls (default 2000), one at a time;
//! - throughput of streamed 1 MiB request bodies, one at a time and 4 in
//!   parallel;
//! - latency of a small `High` call while a `Background` transfer streams on
//!   the same connection, next to the same call on an idle connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use garage_net::{
    ByteStream, Endpoint, EndpointHandler, Message, NetApp, NetConfig, NetworkKey, NodeId, NodeKey,
    Priority,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

#[derive(Serialize, Deserialize)]
struct Ping {
    n: u64,
}
impl Message for Ping {
    type Response = u64;
}
struct PingHandler;
#[async_trait::async_trait]
impl EndpointHandler<Ping> for PingHandler {
    async fn handle(&self, msg: Ping, _: NodeId) -> u64 {
        msg.n
    }
}

/// Reads the request body, answers with its length.
#[derive(Serialize, Deserialize)]
struct Sink;
impl Message for Sink {
    type Response = u64;
}
struct SinkHandler;
#[async_trait::async_trait]
impl EndpointHandler<Sink> for SinkHandler {
    async fn handle(&self, _: Sink, _: NodeId) -> u64 {
        0
    }
    async fn handle_streaming(
        &self,
        _: Sink,
        body: Option<ByteStream>,
        _: NodeId,
    ) -> (u64, Option<ByteStream>) {
        let mut n = 0u64;
        if let Some(mut body) = body {
            while let Some(c) = body.next().await {
                n += c.expect("body chunk").len() as u64;
            }
        }
        (n, None)
    }
}

const MIB: usize = 1 << 20;

/// `len` bytes in 64 KiB pieces of one shared buffer: the benchmark
/// measures the network layer, not a data generator.
fn body(len: usize) -> ByteStream {
    let piece = Bytes::from(vec![0x5a; 64 * 1024]);
    let n = len / piece.len();
    Box::pin(futures::stream::iter(
        (0..n).map(move |_| Ok(piece.clone())),
    ))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn fmt_us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn latencies(e: &Endpoint<Ping, PingHandler>, target: NodeId, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let r = e
            .call(&target, Ping { n: i as u64 }, Priority::High)
            .await
            .expect("ping");
        out.push(t.elapsed());
        assert_eq!(r, i as u64);
    }
    out.sort();
    out
}

async fn start(key: NetworkKey) -> (Arc<NetApp>, std::net::SocketAddr, watch::Sender<bool>) {
    let app = NetApp::new(key, NodeKey::generate(), NetConfig::default());
    let listener = app
        .clone()
        .bind("127.0.0.1:0".parse().expect("address"))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, rx) = watch::channel(false);
    tokio::spawn(listener.run(rx));
    (app, addr, stop)
}

async fn run() {
    let calls: usize = std::env::var("GARAGE_BENCH_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let key = NetworkKey::from_bytes([7; 32]);
    let (a, _, _stop_a) = start(key.clone()).await;
    let (b, b_addr, _stop_b) = start(key).await;
    a.connect(b_addr, Some(b.id())).await.expect("connect");
    let ping = a.endpoint::<Ping, PingHandler>("bench/ping");
    b.endpoint::<Ping, PingHandler>("bench/ping")
        .set_handler(Arc::new(PingHandler));
    let sink = a.endpoint::<Sink, SinkHandler>("bench/sink");
    b.endpoint::<Sink, SinkHandler>("bench/sink")
        .set_handler(Arc::new(SinkHandler));
    let target = b.id();

    latencies(&ping, target, 200).await; // warm up
    let lat = latencies(&ping, target, calls).await;
    println!(
        "small RPC round trip, {calls} calls one at a time: median {}, p99 {}, max {}",
        fmt_us(percentile(&lat, 0.5)),
        fmt_us(percentile(&lat, 0.99)),
        fmt_us(*lat.last().expect("calls > 0"))
    );

    for parallel in [1usize, 4] {
        let per_task = 256 / parallel;
        let t = Instant::now();
        let tasks = (0..parallel).map(|_| {
            let sink = sink.clone();
            async move {
                for _ in 0..per_task {
                    let (n, _) = sink
                        .call_streaming(&target, Sink, Some(body(MIB)), Priority::Normal)
                        .await
                        .expect("sink call");
                    assert_eq!(n, MIB as u64);
                }
            }
        });
        futures::future::join_all(tasks).await;
        let secs = t.elapsed().as_secs_f64();
        let total = (per_task * parallel) as f64;
        println!(
            "streamed 1 MiB request bodies, {parallel} at a time: {} bodies in {secs:.2} s = {:.0} MB/s",
            total,
            total * MIB as f64 / 1e6 / secs
        );
    }

    // A Background transfer big enough to outlast the High calls.
    let bg_len = 1024 * MIB;
    let bg_sink = sink.clone();
    let transfer = tokio::spawn(async move {
        let t = Instant::now();
        let r = bg_sink
            .call_streaming(&target, Sink, Some(body(bg_len)), Priority::Background)
            .await;
        (r.map(|(n, _)| n), t.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(50)).await; // let it get going
    let busy = latencies(&ping, target, 200).await;
    let still_running = !transfer.is_finished();
    let (n, took) = transfer.await.expect("transfer task");
    assert_eq!(n.expect("background transfer") as usize, bg_len);
    let idle = latencies(&ping, target, 200).await;
    println!(
        "High call during a Background {} MiB transfer ({:.0} MB/s, transfer {} the calls): median {}, p99 {}; idle connection: median {}, p99 {}",
        bg_len / MIB,
        bg_len as f64 / 1e6 / took.as_secs_f64(),
        if still_running { "outlasted" } else { "ended before the end of" },
        fmt_us(percentile(&busy, 0.5)),
        fmt_us(percentile(&busy, 0.99)),
        fmt_us(percentile(&idle, 0.5)),
        fmt_us(percentile(&idle, 0.99)),
    );
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(run());
}
