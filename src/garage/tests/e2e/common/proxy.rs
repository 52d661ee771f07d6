//! A user-space TCP proxy standing for the network between test nodes.
//!
//! Every node of a [`super::cluster::Cluster`] advertises a proxy address as
//! its `rpc_public_addr`, so all node-to-node traffic crosses a [`Proxy`].
//! Nodes dial out from their own loopback address (`rpc_bind_outgoing`), so
//! a proxy knows both ends of each connection. Through the shared [`Net`],
//! a test can:
//! - isolate a node: bytes to and from it stop flowing, but no connection is
//!   closed, as when a site's link goes down (only pings can notice);
//! - split the network into groups that cannot reach each other (a
//!   majority and a minority, say), with the same effect between groups;
//! - make those cuts reset connections instead (a router that answers
//!   with RST, a NAT that forgets its mappings): every connection across
//!   a cut is closed, and new ones are closed as soon as they carry bytes;
//! - add one-way latency to every link (`tc netem` is not available);
//! - limit the bandwidth of every link.
//!
//! Threads only, bounded by timeouts so that dropping the proxy stops them.

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How often blocked or idle threads look at the shared state.
const POLL: Duration = Duration::from_millis(20);
/// Chunks in flight per direction before the reader waits (back-pressure).
const IN_FLIGHT: usize = 256;
/// Bytes written at once on a rate-limited link.
const PACE_PIECE: usize = 1500;

#[derive(Default)]
struct NetState {
    isolated: HashSet<IpAddr>,
    /// A network split: nodes in different groups cannot reach each
    /// other (nodes in no group reach everyone not isolated).
    groups: std::collections::HashMap<IpAddr, usize>,
    delay: Duration,
    /// Each chunk's one-way latency is `delay` ± up to `jitter` (uniform).
    jitter: Duration,
    /// Bytes per second per direction of each connection, if limited.
    rate: Option<u64>,
    /// Cuts close connections rather than stall them.
    reset: bool,
}

/// What all proxies of one cluster share: which nodes are cut off, and the
/// one-way latency of every link.
#[derive(Default)]
pub struct Net {
    state: Mutex<NetState>,
    stop: AtomicBool,
    /// Bytes written to their destination so far, over all links.
    forwarded: AtomicU64,
}

impl Net {
    pub fn new() -> Arc<Net> {
        Arc::new(Net::default())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cuts every link to and from `ip` (or restores them).
    pub fn set_isolated(&self, ip: IpAddr, isolated: bool) {
        let mut s = self.state();
        if isolated {
            s.isolated.insert(ip);
        } else {
            s.isolated.remove(&ip);
        }
    }

    /// Whether cuts (isolation, splits) close the connections crossing
    /// them (true) or stall their bytes (false, the default).
    pub fn set_reset(&self, reset: bool) {
        self.state().reset = reset;
    }

    fn resets(&self) -> bool {
        self.state().reset
    }

    /// One-way latency added to every byte crossing any link.
    pub fn set_delay(&self, delay: Duration) {
        self.state().delay = delay;
    }

    /// Spreads each chunk's latency uniformly over `delay ± jitter` (a
    /// link never reorders bytes: a chunk leaves no earlier than the one
    /// before it).
    pub fn set_jitter(&self, jitter: Duration) {
        self.state().jitter = jitter;
    }

    /// Limits every direction of every link to `bytes_per_sec` (or lifts
    /// the limit).
    pub fn set_rate(&self, bytes_per_sec: Option<u64>) {
        self.state().rate = bytes_per_sec;
    }

    fn rate(&self) -> Option<u64> {
        self.state().rate
    }

    /// Splits the network: each node of `groups[g]` reaches only the
    /// nodes of the same group (an empty list heals the split).
    pub fn set_split(&self, groups: &[Vec<IpAddr>]) {
        let mut s = self.state();
        s.groups = groups
            .iter()
            .enumerate()
            .flat_map(|(g, ips)| ips.iter().map(move |ip| (*ip, g)))
            .collect();
    }

    fn blocked(&self, a: IpAddr, b: IpAddr) -> bool {
        let s = self.state();
        let split = matches!((s.groups.get(&a), s.groups.get(&b)), (Some(x), Some(y)) if x != y);
        split || s.isolated.contains(&a) || s.isolated.contains(&b)
    }

    /// The latency of the next chunk.
    fn delay(&self) -> Duration {
        let s = self.state();
        if s.jitter.is_zero() {
            return s.delay;
        }
        let j = s.jitter.as_secs_f64();
        let d = s.delay.as_secs_f64() + (rand::random::<f64>() * 2.0 - 1.0) * j;
        Duration::from_secs_f64(d.max(0.0))
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Bytes forwarded so far, over all links and directions.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// Stops every proxy thread (they exit within a poll interval).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Listens on `listen` and forwards each connection to `target`.
pub struct Proxy {
    pub listen: SocketAddr,
}

impl Proxy {
    pub fn start(net: Arc<Net>, listen: SocketAddr, target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind(listen)
            .unwrap_or_else(|e| panic!("proxy cannot listen on {listen}: {e}"));
        listener.set_nonblocking(true).unwrap();
        thread::spawn(move || accept_loop(net, listener, target));
        Proxy { listen }
    }
}

fn accept_loop(net: Arc<Net>, listener: TcpListener, target: SocketAddr) {
    while !net.stopped() {
        match listener.accept() {
            Ok((client, from)) => {
                let net = net.clone();
                thread::spawn(move || {
                    // The node behind the proxy sees the proxy as the peer;
                    // a refused connection just closes the client's side.
                    if let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(5))
                    {
                        link(net, client, from.ip(), server, target.ip());
                    }
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(POLL),
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// Forwards both directions between `a` (from address `a_ip`) and `b`.
fn link(net: Arc<Net>, a: TcpStream, a_ip: IpAddr, b: TcpStream, b_ip: IpAddr) {
    a.set_nonblocking(false).unwrap();
    // The nodes set TCP_NODELAY on their sockets; the proxy must too, or
    // Nagle's algorithm on its side holds small writes behind unacked
    // ones until the peer's delayed ACK (~40 ms), which no real link adds.
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    let both = [a.try_clone().unwrap(), b.try_clone().unwrap()];
    let both2 = [a.try_clone().unwrap(), b.try_clone().unwrap()];
    let n2 = net.clone();
    thread::spawn(move || pipe(n2, a, b2, (a_ip, b_ip), both2));
    pipe(net, b, a2, (a_ip, b_ip), both);
}

/// Copies `from` into `to`, each chunk delayed by the current latency and
/// held while either end is isolated (or, in reset mode, closing both
/// ends of the connection, `both`). EOF is passed on as a half-close.
fn pipe(
    net: Arc<Net>,
    mut from: TcpStream,
    to: TcpStream,
    ends: (IpAddr, IpAddr),
    both: [TcpStream; 2],
) {
    let (tx, rx) = sync_channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let writer_net = net.clone();
    let mut to_w = to.try_clone().unwrap();
    let writer = thread::spawn(move || write_side(writer_net, rx, &mut to_w, ends, both));
    read_side(&net, &mut from, tx);
    let _ = writer.join();
    let _ = to.shutdown(Shutdown::Write);
}

fn read_side(net: &Net, from: &mut TcpStream, tx: SyncSender<(Instant, Vec<u8>)>) {
    from.set_read_timeout(Some(POLL * 5)).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    while !net.stopped() {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => (),
            Err(_) => return,
        }
    }
}

fn write_side(
    net: Arc<Net>,
    rx: Receiver<(Instant, Vec<u8>)>,
    to: &mut TcpStream,
    (a, b): (IpAddr, IpAddr),
    both: [TcpStream; 2],
) {
    while !net.stopped() {
        let (at, chunk) = match rx.recv_timeout(POLL * 5) {
            Ok(c) => c,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let due = at + net.delay();
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        while net.blocked(a, b) {
            if net.stopped() {
                return;
            }
            if net.resets() {
                for s in &both {
                    let _ = s.shutdown(Shutdown::Both);
                }
                return;
            }
            thread::sleep(POLL);
        }
        // Paced in small pieces when the rate is limited, so that the
        // first bytes of a large chunk arrive early, as on a slow link.
        for piece in chunk.chunks(PACE_PIECE) {
            if to.write_all(piece).is_err() {
                return;
            }
            net.forwarded
                .fetch_add(piece.len() as u64, Ordering::Relaxed);
            if let Some(rate) = net.rate() {
                thread::sleep(Duration::from_secs_f64(piece.len() as f64 / rate as f64));
            }
        }
    }
}
