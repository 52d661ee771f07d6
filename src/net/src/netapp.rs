//! [`NetApp`]: this node's end of the network: accepts and dials
//! connections, keeps at most one per peer, and routes calls to endpoints.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::admission::{Admission, Limits, LogLimiter, Ticket};
use crate::body::ByteStream;
use crate::conn::{Conn, ConnMeta, Unstarted};
use crate::endpoint::{no_handler, Endpoint, EndpointHandler, ErasedHandler, Message};
use crate::error::NetError;
use crate::handshake;
use crate::ident::{NetworkKey, NodeId, NodeKey};
use crate::version::{Version, VersionInfo, V0_1_0};

/// Settings of the network layer.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// How long a call may take from sending the request to receiving the
    /// response header. Default 300 s.
    pub rpc_timeout: Duration,
    /// How long dialing (TCP connect) plus the handshake may take, and how
    /// long an incoming connection has to complete its handshake. Default
    /// 10 s.
    pub handshake_timeout: Duration,
    /// Local address to dial from (`rpc_bind_outgoing`), if any.
    pub bind_outgoing: Option<IpAddr>,
    /// How many incoming handshakes may run at once (see
    /// [`crate::admission`]).
    pub admission: Limits,
    /// How long an incoming connection may stay silent before its first
    /// handshake byte; a dialer sends it at once. Default 3 s.
    pub first_byte_timeout: Duration,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            rpc_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(10),
            bind_outgoing: None,
            admission: Limits::default(),
            first_byte_timeout: Duration::from_secs(3),
        }
    }
}

type ConnectedFn = Arc<dyn Fn(NodeId, SocketAddr, bool) + Send + Sync>;
type DisconnectedFn = Arc<dyn Fn(NodeId, bool) + Send + Sync>;

/// This node on the network. Shared as `Arc<NetApp>`.
pub struct NetApp {
    node_key: NodeKey,
    network_key: NetworkKey,
    config: NetConfig,
    endpoints: RwLock<HashMap<String, Arc<dyn ErasedHandler>>>,
    conns: Mutex<HashMap<NodeId, Arc<Conn>>>,
    on_connected: RwLock<Vec<ConnectedFn>>,
    on_disconnected: RwLock<Vec<DisconnectedFn>>,
    next_conn_id: AtomicU64,
    /// Numbers our dials, increasing across restarts (it starts from the
    /// clock), so that a peer can tell our newest connection from a stale one.
    dial_seq: AtomicU64,
    /// One gate per address being dialed: concurrent `connect`s to the
    /// same address take turns, so that the later ones find the
    /// connection the first one made instead of dialing a duplicate
    /// (which would replace it and fail the calls in flight on it).
    dialing: Mutex<HashMap<SocketAddr, Arc<tokio::sync::Mutex<()>>>>,
    /// Incoming handshakes running now.
    admission: Arc<Admission>,
    refusals_log: LogLimiter,
    failures_log: LogLimiter,
    incompatible_log: LogLimiter,
    /// Dials that failed (a peer down, or another node at its address,
    /// redialed every second or so): one line now and then, not one each.
    dial_log: LogLimiter,
    /// What we tell peers of our version; its cluster part changes when
    /// the cluster is finalized ([`NetApp::set_cluster_version`]).
    version: RwLock<VersionInfo>,
}

impl NetApp {
    pub fn new(network_key: NetworkKey, node_key: NodeKey, config: NetConfig) -> Arc<Self> {
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Arc::new(NetApp {
            node_key,
            network_key,
            config: config.clone(),
            endpoints: RwLock::new(HashMap::new()),
            conns: Mutex::new(HashMap::new()),
            on_connected: RwLock::new(Vec::new()),
            on_disconnected: RwLock::new(Vec::new()),
            next_conn_id: AtomicU64::new(0),
            dial_seq: AtomicU64::new(now_us),
            dialing: Mutex::new(HashMap::new()),
            admission: Admission::new(config.admission),
            refusals_log: LogLimiter::default(),
            failures_log: LogLimiter::default(),
            dial_log: LogLimiter::default(),
            incompatible_log: LogLimiter::default(),
            version: RwLock::new(VersionInfo::this_build(V0_1_0)),
        })
    }

    pub fn id(&self) -> NodeId {
        self.node_key.id()
    }

    pub fn config(&self) -> &NetConfig {
        &self.config
    }

    /// What this node tells its peers of its version.
    pub fn version(&self) -> VersionInfo {
        *self.version.read().unwrap()
    }

    /// Sets the cluster version this node knows to be finalized, told to
    /// peers from the next handshake on. Connected peers whose release is
    /// below it are not disconnected here: the caller decides.
    pub fn set_cluster_version(&self, cluster: Version) {
        self.version.write().unwrap().cluster = cluster;
    }

    /// What a connected peer told of its version in the handshake.
    pub fn peer_version(&self, peer: &NodeId) -> Option<VersionInfo> {
        self.conns.lock().unwrap().get(peer).map(|c| c.peer_version)
    }

    /// Incoming handshakes running now.
    pub fn handshakes_running(&self) -> usize {
        self.admission.total()
    }

    /// Binds `bind` and accepts connections until `must_exit` becomes true.
    /// Established connections stay open after that.
    pub async fn listen(
        self: Arc<Self>,
        bind: SocketAddr,
        must_exit: watch::Receiver<bool>,
    ) -> Result<(), NetError> {
        self.bind(bind).await?.run(must_exit).await
    }

    /// Binds `bind` without accepting yet: the caller learns at once whether
    /// the address is usable (and, for port 0, which port it got), then
    /// calls [`Listener::run`].
    pub async fn bind(self: Arc<Self>, bind: SocketAddr) -> Result<Listener, NetError> {
        let listener = TcpListener::bind(bind).await?;
        Ok(Listener {
            netapp: self,
            listener,
        })
    }

    /// Takes an accepted connection: its handshake runs in its own task if
    /// admitted, else it is closed at once.
    fn incoming(self: &Arc<Self>, sock: TcpStream, addr: SocketAddr) {
        match self.admission.admit(addr.ip()) {
            Ok(ticket) => {
                let netapp = self.clone();
                tokio::spawn(async move { netapp.handle_incoming(sock, addr, ticket).await });
            }
            Err(why) => {
                drop(sock);
                metrics::counter!("rpc_connections_refused_total", "reason" => why.as_str())
                    .increment(1);
                if let Some(held_back) = self.refusals_log.allow(std::time::Instant::now()) {
                    let (total, from_ip) = self.admission.running(addr.ip());
                    tracing::warn!(
                        "incoming connection from {addr} closed unauthenticated: too many handshakes running ({total} in all, {from_ip} from {}; limit {} and {} per address); {held_back} more refused since the last such line",
                        addr.ip(),
                        self.config.admission.total,
                        self.config.admission.per_ip,
                    );
                }
            }
        }
    }

    async fn handle_incoming(
        self: Arc<Self>,
        mut sock: TcpStream,
        addr: SocketAddr,
        ticket: Ticket,
    ) {
        let res = async {
            sock.set_nodelay(true)?;
            // A silent connection gives its place back early.
            tokio::time::timeout(self.config.first_byte_timeout, sock.peek(&mut [0u8; 1]))
                .await
                .map_err(|_| {
                    NetError::Handshake(format!(
                        "nothing received within {:?}",
                        self.config.first_byte_timeout
                    ))
                })??;
            let timeout = self.config.handshake_timeout;
            let session = tokio::time::timeout(
                timeout,
                handshake::accept(&mut sock, &self.network_key, &self.node_key),
            )
            .await
            .map_err(|_| self.handshake_timed_out())??;
            let ours = self.version();
            if let Err(reason) = ours.check_peer(&session.peer_version) {
                // Best effort: the refusal is for the dialer's log.
                let _ = tokio::time::timeout(
                    self.config.handshake_timeout,
                    handshake::refuse(&mut sock, &session, &reason),
                )
                .await;
                metrics::counter!("rpc_connections_refused_total", "reason" => "version")
                    .increment(1);
                return Err(NetError::Incompatible {
                    peer: session.peer,
                    reason,
                });
            }
            // Register before confirming: when the dialer's `connect`
            // returns, we know the connection too.
            let unstarted = self.new_conn(&session, addr, true);
            let keep = self.register(&unstarted.conn);
            let confirmed =
                tokio::time::timeout(timeout, handshake::confirm(&mut sock, &session, &ours))
                    .await
                    .map_err(|_| self.handshake_timed_out())
                    .and_then(|r| r);
            if let Err(e) = confirmed {
                if keep {
                    unstarted.conn.close(&e.to_string());
                    self.conn_closed(&unstarted.conn, &e.to_string());
                }
                return Err(e);
            }
            drop(ticket);
            // A losing duplicate is still confirmed, then dropped: the
            // dialer sees a completed handshake and keeps the winner.
            if keep {
                unstarted.start(self.clone(), sock, session);
            }
            Ok::<_, NetError>(())
        }
        .await;
        if let Err(e @ NetError::Incompatible { .. }) = &res {
            // Limited apart from other failures, so that the operator
            // sees it: it only comes from a node holding the secret.
            if let Some(held_back) = self.incompatible_log.allow(std::time::Instant::now()) {
                tracing::error!(
                    "incoming connection from {addr} refused: {e} ({held_back} such refusals not logged since the last such line)"
                );
            }
        } else if let Err(e) = res {
            metrics::counter!("rpc_handshakes_failed_total").increment(1);
            if let Some(held_back) = self.failures_log.allow(std::time::Instant::now()) {
                tracing::warn!(
                    "incoming connection from {addr}: {e} ({held_back} other failed handshakes not logged since the last such line)"
                );
            }
        }
    }

    fn handshake_timed_out(&self) -> NetError {
        NetError::Handshake(format!(
            "no complete handshake within {:?}",
            self.config.handshake_timeout
        ))
    }

    /// Connects to the node at `addr`, which must be `expected` if given,
    /// and returns its id. Returns at once if already connected to
    /// `expected` (or, without `expected`, if we dialed `addr` before). When
    /// it returns, the peer has registered the connection too, so calls
    /// work in both directions.
    pub async fn connect(
        self: &Arc<Self>,
        addr: SocketAddr,
        expected: Option<NodeId>,
    ) -> Result<NodeId, NetError> {
        if let Some(peer) = self.existing(addr, expected) {
            return Ok(peer);
        }
        let gate = self
            .dialing
            .lock()
            .unwrap()
            .entry(addr)
            .or_default()
            .clone();
        let res = {
            let _turn = gate.lock().await;
            // Connected while we waited for our turn?
            match self.existing(addr, expected) {
                Some(peer) => Ok(peer),
                None => self.dial(addr, expected).await,
            }
        };
        let mut dialing = self.dialing.lock().unwrap();
        // The map's and ours: nobody else waits at this gate.
        if Arc::strong_count(&gate) == 2 {
            dialing.remove(&addr);
        }
        res
    }

    /// The peer of an established connection to `expected` (or, without
    /// it, of an outgoing one to `addr`).
    fn existing(&self, addr: SocketAddr, expected: Option<NodeId>) -> Option<NodeId> {
        let conns = self.conns.lock().unwrap();
        let existing = match expected {
            Some(id) => conns.get(&id),
            None => conns.values().find(|c| !c.incoming && c.addr == addr),
        };
        existing.map(|c| c.peer)
    }

    async fn dial(
        self: &Arc<Self>,
        addr: SocketAddr,
        expected: Option<NodeId>,
    ) -> Result<NodeId, NetError> {
        let dial_seq = self.dial_seq.fetch_add(1, Ordering::Relaxed);
        let res = tokio::time::timeout(self.config.handshake_timeout, async {
            let mut sock = self.tcp_connect(addr).await?;
            sock.set_nodelay(true)?;
            let session = handshake::dial(
                &mut sock,
                &self.network_key,
                &self.node_key,
                expected,
                dial_seq,
                &self.version(),
            )
            .await?;
            Ok::<_, NetError>((sock, session))
        })
        .await
        .map_err(|_| self.handshake_timed_out())
        .and_then(|r| r);
        match res {
            Ok((sock, session)) => {
                let peer = session.peer;
                let unstarted = self.new_conn(&session, addr, false);
                if self.register(&unstarted.conn) {
                    unstarted.start(self.clone(), sock, session);
                }
                Ok(peer)
            }
            Err(NetError::Ourselves) => Err(NetError::Ourselves),
            Err(e @ NetError::Incompatible { .. }) => {
                tracing::error!("cannot connect to {addr}: {e}");
                Err(e)
            }
            Err(e) => {
                match self.dial_log.allow(std::time::Instant::now()) {
                    Some(0) => tracing::warn!("cannot connect to {addr}: {e}"),
                    Some(n) => tracing::warn!(
                        "cannot connect to {addr}: {e} ({n} other failed dials since the last line)"
                    ),
                    None => tracing::debug!("cannot connect to {addr}: {e}"),
                }
                Err(e)
            }
        }
    }

    async fn tcp_connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        match self.config.bind_outgoing {
            None => TcpStream::connect(addr).await,
            Some(ip) => {
                let sock = match ip {
                    IpAddr::V4(_) => TcpSocket::new_v4()?,
                    IpAddr::V6(_) => TcpSocket::new_v6()?,
                };
                sock.bind(SocketAddr::new(ip, 0))?;
                sock.connect(addr).await
            }
        }
    }

    fn new_conn(
        &self,
        session: &handshake::Session,
        addr: SocketAddr,
        incoming: bool,
    ) -> Unstarted {
        let conn_id = self.next_conn_id.fetch_add(1, Ordering::Relaxed);
        Unstarted::new(self.id(), conn_id, session, addr, incoming)
    }

    /// Makes `conn` the peer's connection unless the existing one wins (see
    /// [`conn_wins`]); returns whether it did. A replaced connection is
    /// closed.
    fn register(&self, conn: &Arc<Conn>) -> bool {
        let (peer, addr, incoming) = (conn.peer, conn.addr, conn.incoming);
        let replaced = {
            let mut conns = self.conns.lock().unwrap();
            let keep_old = conns
                .get(&peer)
                .is_some_and(|old| !conn_wins(&conn.meta, &old.meta, self.id(), peer));
            if keep_old {
                drop(conns);
                tracing::debug!(
                    "peer {peer:?}: keeping the existing connection, dropping the duplicate with {addr}"
                );
                return false;
            }
            conns.insert(peer, conn.clone())
        };
        if let Some(old) = replaced {
            tracing::debug!(
                "peer {peer:?}: connection with {} replaced by the one with {addr}",
                old.addr
            );
            old.close("replaced by a newer connection");
        }
        let dir = if incoming { "incoming" } else { "outgoing" };
        tracing::info!(
            "connected to peer {peer:?} at {addr} ({dir}, garage v{})",
            conn.peer_version.release
        );
        let handlers = self.on_connected.read().unwrap().clone();
        for f in handlers {
            f(peer, addr, incoming);
        }
        true
    }

    /// Called by a connection's task once it closed.
    pub(crate) fn conn_closed(&self, conn: &Conn, reason: &str) {
        let removed = {
            let mut conns = self.conns.lock().unwrap();
            if conns.get(&conn.peer).map(|c| c.conn_id) == Some(conn.conn_id) {
                conns.remove(&conn.peer);
                true
            } else {
                false
            }
        };
        if removed {
            tracing::info!("disconnected from peer {:?}: {reason}", conn.peer);
            self.fire_disconnected(conn.peer, conn.incoming);
        } else {
            // Replaced, a losing duplicate, or already removed by
            // `disconnect`: the peer's state did not change.
            tracing::debug!(
                "earlier connection to peer {:?} closed: {reason}",
                conn.peer
            );
        }
    }

    fn fire_disconnected(&self, peer: NodeId, incoming: bool) {
        let handlers = self.on_disconnected.read().unwrap().clone();
        for f in handlers {
            f(peer, incoming);
        }
    }

    /// Closes the connection to `peer`, if any; its pending calls fail with
    /// [`NetError::ConnectionClosed`].
    pub fn disconnect(&self, peer: &NodeId) {
        let conn = self.conns.lock().unwrap().remove(peer);
        if let Some(conn) = conn {
            tracing::info!("disconnecting from peer {peer:?}");
            conn.close("disconnected by this node");
            self.fire_disconnected(*peer, conn.incoming);
        }
    }

    /// Connected peers and their address: the address we dialed, or for a
    /// connection they opened, their source address.
    pub fn connected_peers(&self) -> Vec<(NodeId, SocketAddr)> {
        let conns = self.conns.lock().unwrap();
        conns.values().map(|c| (c.peer, c.addr)).collect()
    }

    /// Adds a callback run when a connection to a peer becomes the one in
    /// use: with the peer's address (as in [`NetApp::connected_peers`]) and
    /// whether the peer dialed us. It can run again for a connected peer
    /// whose connection is replaced (see doc/net-protocol.md).
    pub fn on_connected(&self, f: impl Fn(NodeId, SocketAddr, bool) + Send + Sync + 'static) {
        self.on_connected.write().unwrap().push(Arc::new(f));
    }

    /// Adds a callback run when a peer no longer has a connection.
    pub fn on_disconnected(&self, f: impl Fn(NodeId, bool) + Send + Sync + 'static) {
        self.on_disconnected.write().unwrap().push(Arc::new(f));
    }

    /// Creates the endpoint `path`. Panics if it exists already: two
    /// endpoints with one path is a programming error.
    pub fn endpoint<M: Message, H: EndpointHandler<M>>(
        self: &Arc<Self>,
        path: &str,
    ) -> Arc<Endpoint<M, H>> {
        let (endpoint, slot) = Endpoint::new(self.clone(), path);
        let old = self
            .endpoints
            .write()
            .unwrap()
            .insert(path.to_string(), slot);
        assert!(old.is_none(), "endpoint {path} registered twice");
        Arc::new(endpoint)
    }

    /// Whether a connection to `peer` is up.
    pub fn is_connected(&self, peer: &NodeId) -> bool {
        self.conns.lock().unwrap().contains_key(peer)
    }

    pub(crate) fn conn(&self, peer: &NodeId) -> Option<Arc<Conn>> {
        self.conns.lock().unwrap().get(peer).cloned()
    }

    /// Serves one request header (`u16 path length | path | message`).
    pub(crate) async fn handle_request(
        &self,
        header: Bytes,
        body: Option<ByteStream>,
        from: NodeId,
    ) -> Result<(Vec<u8>, Option<ByteStream>), String> {
        let path_len = header
            .get(..2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or("malformed request header")?;
        let path = header
            .get(2..2 + path_len)
            .and_then(|p| std::str::from_utf8(p).ok())
            .ok_or("malformed request header")?;
        let handler = self.endpoints.read().unwrap().get(path).cloned();
        match handler {
            Some(h) => h.handle_raw(header.slice(2 + path_len..), body, from).await,
            None => Err(no_handler(path)),
        }
    }
}

/// A bound RPC socket, from [`NetApp::bind`].
pub struct Listener {
    netapp: Arc<NetApp>,
    listener: TcpListener,
}

impl Listener {
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        Ok(self.listener.local_addr()?)
    }

    /// Accepts connections until `must_exit` becomes true (or its sender is
    /// dropped). Each incoming connection does its handshake in its own task,
    /// so a slow or hostile one delays no other.
    pub async fn run(self, mut must_exit: watch::Receiver<bool>) -> Result<(), NetError> {
        tracing::info!(
            "listening for RPC connections on {}",
            self.listener.local_addr()?
        );
        while !*must_exit.borrow_and_update() {
            tokio::select! {
                r = self.listener.accept() => match r {
                    Ok((sock, addr)) => self.netapp.incoming(sock, addr),
                    Err(e) => {
                        // Typically out of file descriptors: back off rather
                        // than spin.
                        tracing::error!("cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                r = must_exit.changed() => {
                    if r.is_err() {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether a new connection replaces the existing one to the same peer.
///
/// Both nodes apply this rule to the same two connections and so keep the
/// same one: the connection dialed by the node with the smaller id wins; of
/// two dialed by the same node, the later dial (higher sequence number)
/// wins, since the dialer only dials again when it considers the older one
/// gone.
pub(crate) fn conn_wins(new: &ConnMeta, old: &ConnMeta, me: NodeId, peer: NodeId) -> bool {
    let smaller = me.min(peer);
    let (new_pref, old_pref) = (new.dialer == smaller, old.dialer == smaller);
    if new_pref != old_pref {
        new_pref
    } else {
        new.dial_seq > old.dial_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_rule_is_the_same_on_both_sides() {
        let (a, b) = (NodeId([1; 32]), NodeId([2; 32]));
        let by = |dialer, dial_seq| ConnMeta { dialer, dial_seq };
        // Simultaneous dial: whichever arrives second, the one a dialed stays.
        for (me, peer) in [(a, b), (b, a)] {
            assert!(conn_wins(&by(a, 5), &by(b, 9), me, peer));
            assert!(!conn_wins(&by(b, 9), &by(a, 5), me, peer));
        }
        // Same dialer: the later dial wins.
        assert!(conn_wins(&by(b, 10), &by(b, 9), a, b));
        assert!(!conn_wins(&by(b, 8), &by(b, 9), b, a));
    }
}
