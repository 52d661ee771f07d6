//! Helpers shared by the integration tests: nodes listening on 127.0.0.1
//! port 0, waiting on conditions with deadlines, and body streams with a
//! checksum.

#![allow(dead_code)] // each test binary uses a different part

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use garage_net::{ByteStream, NetApp, NetConfig, NetworkKey, NodeKey};
use tokio::sync::watch;

pub const DEADLINE: Duration = Duration::from_secs(10);

pub fn net_key(b: u8) -> NetworkKey {
    NetworkKey::from_bytes([b; 32])
}

pub struct Node {
    pub app: Arc<NetApp>,
    pub addr: SocketAddr,
    _stop: watch::Sender<bool>,
}

pub async fn node_with(key: NetworkKey, config: NetConfig) -> Node {
    let app = NetApp::new(key, NodeKey::generate(), config);
    let listener = app
        .clone()
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, must_exit) = watch::channel(false);
    tokio::spawn(listener.run(must_exit));
    Node {
        app,
        addr,
        _stop: stop,
    }
}

pub async fn node() -> Node {
    node_with(net_key(1), NetConfig::default()).await
}

/// Two connected nodes.
pub async fn pair() -> (Node, Node) {
    let (a, b) = (node().await, node().await);
    let id = a.app.connect(b.addr, Some(b.app.id())).await.unwrap();
    assert_eq!(id, b.app.id());
    // Both sides know the connection once `connect` returns.
    assert!(b
        .app
        .connected_peers()
        .iter()
        .any(|(p, _)| *p == a.app.id()));
    (a, b)
}

/// Waits until `cond` holds, failing the test after [`DEADLINE`].
pub async fn wait_until(cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < DEADLINE,
            "condition not met within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `f`, failing the test if it takes longer than [`DEADLINE`].
pub async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .expect("did not complete within the deadline")
}

/// FNV-1a, fed incrementally so chunk boundaries do not matter.
#[derive(Clone, Copy)]
pub struct Fnv(pub u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn update(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Deterministic pseudo-random content: byte `i` of stream `seed`.
pub fn content(seed: u64, start: usize, len: usize) -> Vec<u8> {
    (start..start + len)
        .map(|i| {
            let x = (i as u64 ^ seed.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (x >> 56) as u8
        })
        .collect()
}

pub fn content_hash(seed: u64, len: usize) -> u64 {
    let mut h = Fnv::new();
    h.update(&content(seed, 0, len));
    h.0
}

/// A body of `len` bytes of `content(seed)`, produced lazily in pieces of
/// `piece` bytes (the last may be shorter), calling `on_piece` with the
/// running total each time a piece is produced.
pub fn body(
    seed: u64,
    len: usize,
    piece: usize,
    on_piece: impl Fn(usize) + Send + 'static,
) -> ByteStream {
    Box::pin(futures::stream::unfold(0usize, move |pos| {
        let n = piece.min(len - pos);
        let item = (n > 0).then(|| {
            on_piece(pos + n);
            (Ok(Bytes::from(content(seed, pos, n))), pos + n)
        });
        std::future::ready(item)
    }))
}

/// Reads a whole body: its length and hash.
pub async fn drain(mut s: ByteStream) -> std::io::Result<(usize, u64)> {
    let mut h = Fnv::new();
    let mut n = 0;
    while let Some(chunk) = s.next().await {
        let chunk = chunk?;
        n += chunk.len();
        h.update(&chunk);
    }
    Ok((n, h.0))
}
