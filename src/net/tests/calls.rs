//! Calls and streamed bodies over real TCP on 127.0.0.1: concurrency,
//! errors, flow control, priorities, connection loss.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use garage_net::{
    ByteStream, Endpoint, EndpointHandler, Message, NetConfig, NetError, NodeId, Priority, WINDOW,
};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

#[derive(Serialize, Deserialize, Debug, Clone)]
struct Ping {
    n: u64,
    pad: String,
}
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Pong {
    n: u64,
    pad_len: usize,
    from: NodeId,
}
impl Message for Ping {
    type Response = Pong;
}
struct PingHandler;
#[async_trait::async_trait]
impl EndpointHandler<Ping> for PingHandler {
    async fn handle(&self, msg: Ping, from: NodeId) -> Pong {
        if msg.n == u64::MAX {
            panic!("asked to panic");
        }
        Pong {
            n: msg.n * 2,
            pad_len: msg.pad.len(),
            from,
        }
    }
}

fn ping(n: u64) -> Ping {
    Ping {
        n,
        pad: String::new(),
    }
}

fn serve_ping(n: &Node) -> Arc<Endpoint<Ping, PingHandler>> {
    let e = n.app.endpoint::<Ping, PingHandler>("test/ping");
    e.set_handler(Arc::new(PingHandler));
    e
}

/// Reads the request body (pausing `read_pause` after every 64 KiB, to
/// play a slow consumer), and answers with a body of `resp_len` bytes.
#[derive(Serialize, Deserialize)]
struct Xfer {
    resp_seed: u64,
    resp_len: usize,
}
#[derive(Serialize, Deserialize, Debug)]
struct XferResp {
    req_len: usize,
    req_hash: u64,
}
impl Message for Xfer {
    type Response = XferResp;
}
#[derive(Default)]
struct XferHandler {
    read_pause: Duration,
    /// Response body bytes produced so far.
    produced: Arc<AtomicUsize>,
    /// Notified once the first request body chunk arrived.
    started: Arc<Notify>,
    /// Set once the whole request body was read.
    done: Arc<AtomicBool>,
}
#[async_trait::async_trait]
impl EndpointHandler<Xfer> for XferHandler {
    async fn handle(&self, _: Xfer, _: NodeId) -> XferResp {
        unreachable!()
    }
    async fn handle_streaming(
        &self,
        msg: Xfer,
        body: Option<ByteStream>,
        _: NodeId,
    ) -> (XferResp, Option<ByteStream>) {
        let (mut req_len, mut h) = (0, Fnv::new());
        if let Some(mut body) = body {
            let mut since_pause = 0;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.unwrap();
                if req_len == 0 {
                    self.started.notify_one();
                }
                req_len += chunk.len();
                h.update(&chunk);
                since_pause += chunk.len();
                if !self.read_pause.is_zero() && since_pause >= 64 * 1024 {
                    since_pause = 0;
                    tokio::time::sleep(self.read_pause).await;
                }
            }
        }
        self.done.store(true, Ordering::SeqCst);
        let produced = self.produced.clone();
        let resp_body = (msg.resp_len > 0).then(|| {
            common::body(msg.resp_seed, msg.resp_len, 64 * 1024, move |n| {
                produced.store(n, Ordering::SeqCst)
            })
        });
        (
            XferResp {
                req_len,
                req_hash: h.0,
            },
            resp_body,
        )
    }
}

/// Never answers; counts its calls.
#[derive(Serialize, Deserialize)]
struct Hang;
impl Message for Hang {
    type Response = ();
}
struct HangHandler(Arc<AtomicUsize>);
#[async_trait::async_trait]
impl EndpointHandler<Hang> for HangHandler {
    async fn handle(&self, _: Hang, _: NodeId) {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_concurrent_calls_get_their_own_answers() {
    let (a, b) = pair().await;
    let e = serve_ping(&a);
    serve_ping(&b);
    let prios = [Priority::High, Priority::Normal, Priority::Background];
    let calls = (0..100u64).map(|i| {
        let e = e.clone();
        let target = b.app.id();
        async move {
            let msg = Ping {
                n: i,
                pad: "x".repeat(i as usize * 100),
            };
            (i, e.call(&target, msg, prios[i as usize % 3]).await)
        }
    });
    for (i, r) in within(futures::future::join_all(calls)).await {
        let r = r.unwrap();
        assert_eq!(
            (r.n, r.pad_len, r.from),
            (2 * i, i as usize * 100, a.app.id())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_larger_than_a_chunk_roundtrip() {
    let (a, b) = pair().await;
    let e = serve_ping(&a);
    serve_ping(&b);
    let msg = Ping {
        n: 1,
        pad: "y".repeat(300_000),
    };
    let r = e.call(&b.app.id(), msg, Priority::Normal).await.unwrap();
    assert_eq!(r.pad_len, 300_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_come_back_instead_of_hanging() {
    let (a, b) = pair().await;
    let e = serve_ping(&a); // b has no such endpoint
    match within(e.call(&b.app.id(), ping(1), Priority::High)).await {
        Err(NetError::Remote(m)) => assert!(m.contains("no handler for endpoint test/ping"), "{m}"),
        r => panic!("expected a remote error, got {r:?}"),
    }
    // An endpoint registered without a handler.
    let eb = b.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let ea = a.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let x = Xfer {
        resp_seed: 0,
        resp_len: 0,
    };
    assert!(matches!(
        within(ea.call(&b.app.id(), x, Priority::High)).await,
        Err(NetError::Remote(_))
    ));
    // A handler that panics.
    serve_ping(&b);
    match within(e.call(&b.app.id(), ping(u64::MAX), Priority::High)).await {
        Err(NetError::Remote(m)) => assert!(m.contains("panicked"), "{m}"),
        r => panic!("expected a remote error, got {r:?}"),
    }
    // The connection is unharmed.
    assert_eq!(
        e.call(&b.app.id(), ping(4), Priority::High)
            .await
            .unwrap()
            .n,
        8
    );
    drop(eb);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calling_an_unconnected_peer_fails_at_once() {
    let a = node().await;
    let e = serve_ping(&a);
    let stranger = garage_net::NodeKey::generate().id();
    let t = Instant::now();
    match e.call(&stranger, ping(1), Priority::High).await {
        Err(NetError::NotConnected(id)) => assert_eq!(id, stranger),
        r => panic!("expected NotConnected, got {r:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calling_ourselves_skips_the_network() {
    let a = node().await;
    let e = serve_ping(&a);
    let r = e.call(&a.app.id(), ping(21), Priority::High).await.unwrap();
    assert_eq!((r.n, r.from), (42, a.app.id()));
    assert!(a.app.connected_peers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_mib_bodies_arrive_intact_both_ways() {
    let (a, b) = pair().await;
    let ea = a.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let eb = b.app.endpoint::<Xfer, XferHandler>("test/xfer");
    eb.set_handler(Arc::new(XferHandler::default()));
    const LEN: usize = 8 << 20;
    let msg = Xfer {
        resp_seed: 2,
        resp_len: LEN,
    };
    // Odd piece size: chunk boundaries fall everywhere.
    let req_body = body(1, LEN, 100_003, |_| {});
    let t = Instant::now();
    let (resp, resp_body) =
        within(ea.call_streaming(&b.app.id(), msg, Some(req_body), Priority::Normal))
            .await
            .unwrap();
    assert_eq!(resp.req_len, LEN);
    assert_eq!(resp.req_hash, content_hash(1, LEN));
    let (len, hash) = within(drain(resp_body.unwrap())).await.unwrap();
    assert_eq!(len, LEN);
    assert_eq!(hash, content_hash(2, LEN));
    eprintln!("2 x 8 MiB streamed in {:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumer_stalls_neither_the_connection_nor_the_sender_memory() {
    let (a, b) = pair().await;
    let ping_a = serve_ping(&a);
    serve_ping(&b);
    let ea = a.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let eb = b.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let handler = Arc::new(XferHandler::default());
    let produced = handler.produced.clone();
    eb.set_handler(handler);
    const LEN: usize = 4 << 20;
    let msg = Xfer {
        resp_seed: 3,
        resp_len: LEN,
    };
    let (_, resp_body) = ea
        .call_streaming(&b.app.id(), msg, None, Priority::Normal)
        .await
        .unwrap();
    let mut resp_body = resp_body.unwrap();
    // We do not read: the sender fills the window and stops there.
    wait_until(|| produced.load(Ordering::SeqCst) >= WINDOW as usize).await;
    for i in 0..20 {
        let r = within(ping_a.call(&b.app.id(), ping(i), Priority::Normal)).await;
        assert_eq!(r.unwrap().n, 2 * i);
    }
    let held = produced.load(Ordering::SeqCst);
    assert!(
        held <= WINDOW as usize + 64 * 1024,
        "the sender produced {held} bytes for an unread body"
    );
    // Now read it all.
    let first = resp_body.next().await.unwrap().unwrap();
    let mut h = Fnv::new();
    h.update(&first);
    let mut n = first.len();
    while let Some(c) = within(resp_body.next()).await {
        let c = c.unwrap();
        n += c.len();
        h.update(&c);
    }
    assert_eq!((n, h.0), (LEN, content_hash(3, LEN)));
    assert_eq!(produced.load(Ordering::SeqCst), LEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_body_cancels_it() {
    let (a, b) = pair().await;
    let ping_a = serve_ping(&a);
    serve_ping(&b);
    let ea = a.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let eb = b.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let handler = Arc::new(XferHandler::default());
    let produced = handler.produced.clone();
    eb.set_handler(handler);
    let msg = Xfer {
        resp_seed: 3,
        resp_len: 64 << 20,
    };
    let (_, resp_body) = ea
        .call_streaming(&b.app.id(), msg, None, Priority::Normal)
        .await
        .unwrap();
    let mut resp_body = resp_body.unwrap();
    resp_body.next().await.unwrap().unwrap();
    drop(resp_body);
    // The connection goes on, and the 64 MiB are never produced.
    for i in 0..5 {
        assert_eq!(
            ping_a
                .call(&b.app.id(), ping(i), Priority::High)
                .await
                .unwrap()
                .n,
            2 * i
        );
    }
    assert!(produced.load(Ordering::SeqCst) <= 2 * WINDOW as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_call_overtakes_a_background_transfer() {
    let (a, b) = pair().await;
    let ping_a = serve_ping(&a);
    serve_ping(&b);
    let ea = a.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let eb = b.app.endpoint::<Xfer, XferHandler>("test/xfer");
    let handler = Arc::new(XferHandler {
        read_pause: Duration::from_millis(3),
        ..Default::default()
    });
    let (started, done) = (handler.started.clone(), handler.done.clone());
    eb.set_handler(handler);
    const LEN: usize = 4 << 20;
    let msg = Xfer {
        resp_seed: 0,
        resp_len: 0,
    };
    let transfer = tokio::spawn({
        let target = b.app.id();
        async move {
            let t = Instant::now();
            let r = ea
                .call_streaming(
                    &target,
                    msg,
                    Some(body(5, LEN, 64 * 1024, |_| {})),
                    Priority::Background,
                )
                .await;
            (r.map(|(r, _)| r.req_hash), t.elapsed())
        }
    });
    within(started.notified()).await;
    let t = Instant::now();
    let r = within(ping_a.call(&b.app.id(), ping(1), Priority::High)).await;
    let high = t.elapsed();
    assert_eq!(r.unwrap().n, 2);
    assert!(
        !done.load(Ordering::SeqCst),
        "the High call should complete while the transfer is in flight"
    );
    let (hash, total) = within(transfer).await.unwrap();
    assert_eq!(hash.unwrap(), content_hash(5, LEN));
    eprintln!("High call during a Background 4 MiB transfer: {high:?} (transfer took {total:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_loss_fails_pending_calls_at_once() {
    let (a, b) = pair().await;
    let started = Arc::new(AtomicUsize::new(0));
    let ea = a.app.endpoint::<Hang, HangHandler>("test/hang");
    let eb = b.app.endpoint::<Hang, HangHandler>("test/hang");
    eb.set_handler(Arc::new(HangHandler(started.clone())));

    // The peer closes: every pending call fails, long before rpc_timeout.
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let (ea, target) = (ea.clone(), b.app.id());
            tokio::spawn(async move { ea.call(&target, Hang, Priority::Normal).await })
        })
        .collect();
    wait_until(|| started.load(Ordering::SeqCst) == 10).await;
    let t = Instant::now();
    b.app.disconnect(&a.app.id());
    for c in calls {
        assert!(matches!(
            within(c).await.unwrap(),
            Err(NetError::ConnectionClosed)
        ));
    }
    eprintln!(
        "pending calls failed {:?} after the peer disconnected",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    wait_until(|| a.app.connected_peers().is_empty()).await;

    // We close: same, and a call made afterwards is refused at once.
    let (a2, b2) = pair().await;
    let ea2 = a2.app.endpoint::<Hang, HangHandler>("test/hang");
    let eb2 = b2.app.endpoint::<Hang, HangHandler>("test/hang");
    eb2.set_handler(Arc::new(HangHandler(started.clone())));
    let target = b2.app.id();
    let call = tokio::spawn({
        let ea2 = ea2.clone();
        async move { ea2.call(&target, Hang, Priority::High).await }
    });
    wait_until(|| started.load(Ordering::SeqCst) == 11).await;
    a2.app.disconnect(&target);
    assert!(matches!(
        within(call).await.unwrap(),
        Err(NetError::ConnectionClosed)
    ));
    assert!(matches!(
        ea2.call(&target, Hang, Priority::High).await,
        Err(NetError::NotConnected(_))
    ));
    drop((eb, a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_times_out_and_the_connection_survives() {
    let config = NetConfig {
        rpc_timeout: Duration::from_millis(300),
        ..NetConfig::default()
    };
    let a = node_with(net_key(1), config).await;
    let b = node().await;
    a.app.connect(b.addr, Some(b.app.id())).await.unwrap();
    let ea = a.app.endpoint::<Hang, HangHandler>("test/hang");
    let eb = b.app.endpoint::<Hang, HangHandler>("test/hang");
    eb.set_handler(Arc::new(HangHandler(Default::default())));
    let ping_a = serve_ping(&a);
    serve_ping(&b);
    match ea.call(&b.app.id(), Hang, Priority::Normal).await {
        Err(NetError::Timeout(d)) => assert_eq!(d, Duration::from_millis(300)),
        r => panic!("expected a timeout, got {r:?}"),
    }
    assert_eq!(
        ping_a
            .call(&b.app.id(), ping(3), Priority::High)
            .await
            .unwrap()
            .n,
        6
    );
    drop(ea);
}

/// Answers with its own request body as the response body.
#[derive(Serialize, Deserialize)]
struct EchoBody;
impl Message for EchoBody {
    type Response = ();
}
struct EchoBodyHandler;
#[async_trait::async_trait]
impl EndpointHandler<EchoBody> for EchoBodyHandler {
    async fn handle(&self, _: EchoBody, _: NodeId) {}
    async fn handle_streaming(
        &self,
        _: EchoBody,
        body: Option<ByteStream>,
        _: NodeId,
    ) -> ((), Option<ByteStream>) {
        ((), body)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_can_be_streamed_back_while_it_is_sent() {
    let (a, b) = pair().await;
    let ea = a.app.endpoint::<EchoBody, EchoBodyHandler>("test/echo");
    let eb = b.app.endpoint::<EchoBody, EchoBodyHandler>("test/echo");
    eb.set_handler(Arc::new(EchoBodyHandler));
    // Several windows' worth: both directions' flow control take turns.
    const LEN: usize = 4 * WINDOW as usize;
    let (_, back) = within(ea.call_streaming(
        &b.app.id(),
        EchoBody,
        Some(body(9, LEN, 50_000, |_| {})),
        Priority::Normal,
    ))
    .await
    .unwrap();
    let (len, hash) = within(drain(back.unwrap())).await.unwrap();
    assert_eq!((len, hash), (LEN, content_hash(9, LEN)));
}
