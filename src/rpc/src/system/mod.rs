//! The node's view of the cluster: who is there, who answers, and which
//! layout is current. Peers are found from `bootstrap_peers` and by gossip
//! (every ping answer carries the answering node's known peers, so one
//! bootstrap peer is enough to find all); every node pings every connected
//! peer every [`PING_INTERVAL`], measuring the round-trip time; layouts are
//! compared by digest on each ping and pulled and merged when they differ.

pub mod clock;
pub mod health;
pub mod peers;
pub mod status;
pub mod trackers;
pub mod versions;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use garage_net::{
    EndpointHandler, Message, NetApp, NetError, NodeId, Priority, Version, VersionInfo,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::layout::{LayoutError, LayoutHistory, LayoutParameters, NodeRole, Tracker};
use garage_util::config::ConsistencyMode;
use peers::{Peers, PingFailure};
use status::{free_space, free_space_of_all, hostname, FreeSpace, LayoutDigest, NodeStatus};
use versions::ClusterVersions;

/// How often each connected peer is pinged.
pub const PING_INTERVAL: Duration = Duration::from_secs(2);
/// How long a ping may take before it counts as missed.
pub const PING_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a call waits to connect to a known but unconnected node.
pub const ENSURE_CONNECTED_TIMEOUT: Duration = Duration::from_secs(5);
/// A request dials a peer it cannot reach at most this often.
pub const ON_DEMAND_DIAL_INTERVAL: Duration = Duration::from_secs(2);
/// How often unconnected known peers are (re)tried, within their backoff.
pub const DISCOVERY_INTERVAL: Duration = Duration::from_secs(1);
/// Time between two tries of a bootstrap peer given by address alone that
/// has not answered yet.
const BOOTSTRAP_RETRY: Duration = Duration::from_secs(3);
/// Time between two resolutions of the bootstrap peers given by address
/// alone, once all have answered.
const BOOTSTRAP_REFRESH: Duration = Duration::from_secs(60);
/// File in `metadata_dir` that holds the layout.
/// A layout change still running after this long is logged once, with
/// what it waits for (which nodes' trackers lag, and this node's writes
/// still running under an older version).
const LAYOUT_STALL_WARNING: Duration = Duration::from_secs(60);
pub const LAYOUT_FILE: &str = "cluster_layout";
/// File in `metadata_dir` that holds the known peers and their addresses,
/// so that a restarted node finds the cluster without bootstrap peers.
pub const PEER_LIST_FILE: &str = "peer_list";
/// Name of the endpoint carrying [`SystemRpc`]; the admin CLI talks to it too.
pub const SYSTEM_ENDPOINT: &str = "garage_rpc/system";

/// Messages of the system endpoint; requests and answers share the type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SystemRpc {
    /// A ping carrying the sender's status; answered by `Pong`.
    Ping(NodeStatus),
    Pong(NodeStatus, Vec<(NodeId, SocketAddr)>),
    PullLayout,
    /// A layout, sent as an answer to `PullLayout` or pushed after a change.
    Layout(Box<LayoutHistory>),
    Ok,
    Error(String),
}

impl Message for SystemRpc {
    type Response = SystemRpc;
}

/// A change to the layout, asked by an administrator.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LayoutUpdate {
    StageRoles(Vec<(NodeId, Option<NodeRole>)>),
    StageParameters(LayoutParameters),
    Apply {
        version: u64,
    },
    Revert,
    /// Move the trackers of the nodes that are down to `version`.
    SkipDeadNodes {
        version: u64,
        allow_missing_data: bool,
    },
}

/// What `garage status` shows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub nodes: Vec<KnownNode>,
    pub layout: LayoutHistory,
    /// The answering node's [`System::health`] (absent from older nodes).
    #[serde(default)]
    pub health: Option<health::ClusterHealth>,
    /// Releases and the active cluster version (absent from v0.1.0 nodes).
    #[serde(default)]
    pub versions: Option<ClusterVersions>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KnownNode {
    pub id: NodeId,
    pub addr: Option<SocketAddr>,
    pub is_up: bool,
    pub last_seen_secs_ago: Option<u64>,
    pub rtt_ms: Option<f64>,
    pub hostname: Option<String>,
    pub layout_version: Option<u64>,
    pub metadata_space: Option<FreeSpace>,
    pub data_space: Option<FreeSpace>,
    /// How far the node's wall clock is from the cluster's (the median of
    /// the nodes' clocks), in ms, as the answering node measures it
    /// (positive: ahead); absent when not measured (absent from older
    /// nodes too).
    #[serde(default)]
    pub clock_offset_ms: Option<i64>,
    /// The node's release and the cluster version it knows (absent when
    /// not known, and from the answers of v0.1.0 nodes).
    #[serde(default)]
    pub version: Option<VersionInfo>,
}

/// Settings the system needs from the node configuration.
#[derive(Clone, Debug)]
pub struct SystemConfig {
    pub replication_factor: usize,
    pub metadata_dir: PathBuf,
    pub data_dirs: Vec<PathBuf>,
    pub rpc_public_addr: Option<SocketAddr>,
    /// `<node_id>@<host>:<port>` strings.
    pub bootstrap_peers: Vec<String>,
    pub consistency_mode: ConsistencyMode,
}

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("invalid peer {0:?}: expected <node_id>@<host>:<port>, with the 64-hex-character node id shown by `garage node id` (or, where allowed, <host>:<port> alone)")]
    BadPeer(String),
    #[error("cannot resolve {addr}: {msg}")]
    Resolve { addr: String, msg: String },
    #[error("the current layout version is {current}, not {given}: run `garage layout skip-dead-nodes --version {current}`")]
    SkipVersion { given: u64, current: u64 },
    #[error("every node of the layout is up: there is no dead node to skip")]
    NoDeadNodes,
    #[error("the cluster layout has replication factor {layout}, but this node's configuration says replication_factor = {config}: the replication factor of a cluster cannot be changed this way")]
    ReplicationMismatch { layout: usize, config: usize },
    #[error("cluster version: {0}")]
    ClusterVersion(String),
    #[error("{what} needs the cluster finalized at v{since} or later (feature {feature}), and it is at v{active}: {how}")]
    NotFinalized {
        what: String,
        feature: &'static str,
        since: Version,
        active: Version,
        how: &'static str,
    },
    #[error("the cluster cannot be finalized at v{target} yet:\n  {}", .blockers.join("\n  "))]
    CannotFinalize {
        target: Version,
        blockers: Vec<String>,
    },
}

pub struct System {
    pub netapp: Arc<NetApp>,
    config: SystemConfig,
    layout_path: PathBuf,
    /// Held while the layout file is written: two concurrent saves would
    /// share its temporary file (one rename then fails), or write an older
    /// layout over a newer one.
    layout_save: Mutex<()>,
    /// The layout and its digest, replaced as a whole on each change so
    /// readers get a cheap consistent snapshot.
    layout: RwLock<(Arc<LayoutHistory>, LayoutDigest)>,
    peers: Mutex<Peers>,
    /// When an on-demand dial of a peer last failed: requests do not dial
    /// a dead peer again within [`ON_DEMAND_DIAL_INTERVAL`] (the reconnect
    /// loop keeps trying, with backoff).
    failed_dials: Mutex<std::collections::HashMap<NodeId, Instant>>,
    progress: trackers::Progress,
    /// A layout change that does not finish: warned once it lasts.
    stall: Mutex<trackers::StallWatch>,
    /// This node's background workers and their tunable variables.
    pub workers: garage_util::worker::Registry,
    hostname: String,
    endpoint: Arc<garage_net::Endpoint<SystemRpc, System>>,
    /// Every new layout, for the layers above (table sync after a change).
    layout_notify: watch::Sender<Arc<LayoutHistory>>,
    /// Bumped each time a peer connects or answers again after being down.
    peers_up: watch::Sender<u64>,
    /// The peer list last written to [`PEER_LIST_FILE`].
    saved_peers: Mutex<Vec<(NodeId, SocketAddr)>>,
    /// Nodes last seen off the cluster's clock (logged once each).
    clock_alarms: Mutex<std::collections::BTreeSet<NodeId>>,
    /// Held while the cluster version is raised and saved.
    cluster_version_save: Mutex<()>,
    /// Wakes the ping loop before its interval (the cluster was just
    /// finalized: the peers learn it from the next ping).
    ping_now: tokio::sync::Notify,
}

/// A peer as the configuration (`bootstrap_peers`) or the CLI names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerName {
    /// `<node_id>@<host>:<port>`: the handshake must prove that id.
    Known(NodeId, String),
    /// `<host>:<port>` alone (e.g. a Kubernetes pod's DNS name): the id is
    /// learned by connecting, the handshake proving the peer holds
    /// `rpc_secret`.
    Address(String),
}

/// Parses `<node_id>@<host>:<port>` or `<host>:<port>` (not resolved).
pub fn parse_peer_name(s: &str) -> Result<PeerName, SystemError> {
    let bad = || SystemError::BadPeer(s.to_string());
    let (id, host) = match s.split_once('@') {
        Some((id, host)) => (Some(id.parse::<NodeId>().map_err(|_| bad())?), host),
        None => (None, s),
    };
    let (name, port) = host.rsplit_once(':').ok_or_else(bad)?;
    if name.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(match id {
        Some(id) => PeerName::Known(id, host.to_string()),
        None => PeerName::Address(host.to_string()),
    })
}

/// Resolves `<host>:<port>` to its first address.
pub fn resolve(host: &str) -> Result<SocketAddr, SystemError> {
    use std::net::ToSocketAddrs;
    let err = |msg: String| SystemError::Resolve {
        addr: host.to_string(),
        msg,
    };
    host.to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address".into()))
}

/// Parses `<node_id>@<host>:<port>`, resolving the host.
pub fn parse_peer(s: &str) -> Result<(NodeId, SocketAddr), SystemError> {
    match parse_peer_name(s)? {
        PeerName::Known(id, host) => Ok((id, resolve(&host)?)),
        PeerName::Address(_) => Err(SystemError::BadPeer(s.to_string())),
    }
}

fn digest(layout: &LayoutHistory) -> LayoutDigest {
    let bytes = layout.to_bytes();
    let hash = blake2_256(&bytes);
    LayoutDigest {
        version: layout.current().version,
        hash,
    }
}

fn blake2_256(data: &[u8]) -> [u8; 32] {
    *garage_util::data::blake2sum(data).as_bytes()
}

impl System {
    /// Loads the layout from `metadata_dir` (or starts an empty one) and
    /// registers the system endpoint on `netapp`.
    pub fn new(netapp: Arc<NetApp>, config: SystemConfig) -> Result<Arc<Self>, SystemError> {
        let layout_path = config.metadata_dir.join(LAYOUT_FILE);
        let layout = match LayoutHistory::load(&layout_path)? {
            Some(l) => {
                if l.current().replication_factor != config.replication_factor {
                    return Err(SystemError::ReplicationMismatch {
                        layout: l.current().replication_factor,
                        config: config.replication_factor,
                    });
                }
                l
            }
            None => LayoutHistory::new(config.replication_factor),
        };
        let cluster_version =
            versions::load(&config.metadata_dir).map_err(SystemError::ClusterVersion)?;
        if cluster_version > Version::current() {
            return Err(SystemError::ClusterVersion(format!(
                "this node runs garage v{}, but the cluster was finalized at v{cluster_version} (file {} in metadata_dir): a finalized cluster cannot be rolled back; run v{cluster_version} or later",
                Version::current(),
                versions::CLUSTER_VERSION_FILE
            )));
        }
        netapp.set_cluster_version(cluster_version);
        let endpoint = netapp.endpoint::<SystemRpc, System>(SYSTEM_ENDPOINT);
        let sys = Arc::new(Self {
            netapp: netapp.clone(),
            config,
            layout_path,
            layout_save: Mutex::new(()),
            layout: RwLock::new((Arc::new(layout.clone()), digest(&layout))),
            peers: Mutex::new(Peers::default()),
            failed_dials: Mutex::new(std::collections::HashMap::new()),
            progress: trackers::Progress::default(),
            stall: Mutex::new(trackers::StallWatch::new(LAYOUT_STALL_WARNING)),
            workers: garage_util::worker::Registry::new(),
            hostname: hostname(),
            endpoint,
            layout_notify: watch::channel(Arc::new(layout.clone())).0,
            peers_up: watch::channel(0).0,
            saved_peers: Mutex::new(Vec::new()),
            clock_alarms: Mutex::new(Default::default()),
            cluster_version_save: Mutex::new(()),
            ping_now: tokio::sync::Notify::new(),
        });
        sys.endpoint.set_handler(sys.clone());
        let weak = Arc::downgrade(&sys);
        netapp.on_connected(move |id, addr, incoming| {
            if let Some(sys) = weak.upgrade() {
                // An incoming connection may be an admin client, and its
                // source port is ephemeral: such a peer counts once it pings
                // us with its status and address.
                if incoming {
                    let was_connected = sys.peers().get(&id).map(|p| p.connected);
                    sys.peers().mark_connected_if_known(&id, Instant::now());
                    if was_connected == Some(false) {
                        sys.peers_up.send_modify(|n| *n += 1);
                    }
                } else {
                    sys.peers().connected(id, Some(addr), Instant::now());
                    info!(peer = ?id, %addr, "connected to peer");
                    sys.peers_up.send_modify(|n| *n += 1);
                }
            }
        });
        let weak = Arc::downgrade(&sys);
        netapp.on_disconnected(move |id, _incoming| {
            if let Some(sys) = weak.upgrade() {
                let known = sys.peers().get(&id).is_some();
                sys.peers().disconnected(&id, Instant::now());
                if known {
                    warn!(peer = ?id, "peer disconnected");
                }
            }
        });
        Ok(sys)
    }

    pub fn id(&self) -> NodeId {
        self.netapp.id()
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, Peers> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A snapshot of the layout.
    pub fn layout(&self) -> Arc<LayoutHistory> {
        self.layout
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    fn layout_digest(&self) -> LayoutDigest {
        self.layout.read().unwrap_or_else(|e| e.into_inner()).1
    }

    /// Changes the layout with `f`; if it changed, saves it, pushes it to
    /// every peer and returns true. `f` returns whether it changed
    /// anything, and may fail.
    fn modify_layout<E>(
        &self,
        f: impl FnOnce(&mut LayoutHistory) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let changed = {
            let mut guard = self.layout.write().unwrap_or_else(|e| e.into_inner());
            let mut l = (*guard.0).clone();
            let before = l.current().version;
            if !f(&mut l)? {
                return Ok(false);
            }
            if l.current().version != before {
                info!("cluster layout is now version {}", l.current().version);
            }
            let d = digest(&l);
            *guard = (Arc::new(l), d);
            true
        };
        if changed {
            self.layout_changed();
        }
        Ok(changed)
    }

    pub fn local_status(&self) -> NodeStatus {
        NodeStatus {
            hostname: self.hostname.clone(),
            replication_factor: self.config.replication_factor,
            rpc_public_addr: self.config.rpc_public_addr,
            layout: self.layout_digest(),
            metadata_space: free_space(&self.config.metadata_dir),
            data_space: free_space_of_all(&self.config.data_dirs),
            clock_ms: garage_util::time::now_msec(),
            version: Some(self.netapp.version()),
        }
    }

    fn peer_list_path(&self) -> PathBuf {
        self.config.metadata_dir.join(PEER_LIST_FILE)
    }

    /// Peers saved by an earlier run (an unreadable file is ignored, with a
    /// warning: bootstrap peers and gossip rebuild it).
    fn load_peer_list(&self) -> Vec<(NodeId, SocketAddr)> {
        let path = self.peer_list_path();
        match std::fs::read(&path) {
            Ok(b) => match rmp_serde::from_slice(&b) {
                Ok(v) => v,
                Err(e) => {
                    warn!("ignoring unreadable peer list {}: {e}", path.display());
                    Vec::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                warn!("cannot read peer list {}: {e}", path.display());
                Vec::new()
            }
        }
    }

    /// Saves the known peers' addresses when they changed.
    fn save_peer_list(&self) {
        let mut list: Vec<(NodeId, SocketAddr)> = self
            .peers()
            .iter()
            .filter_map(|(id, p)| p.addr.map(|a| (*id, a)))
            .collect();
        list.sort();
        let mut saved = self.saved_peers.lock().unwrap_or_else(|e| e.into_inner());
        if *saved == list {
            return;
        }
        let path = self.peer_list_path();
        let tmp = path.with_extension("tmp");
        let bytes = rmp_serde::to_vec(&list).expect("a peer list serializes");
        match std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, &path)) {
            Ok(()) => *saved = list,
            Err(e) => warn!("cannot save the peer list to {}: {e}", path.display()),
        }
    }

    /// Runs discovery, pings and layout gossip until `must_exit` is true.
    pub async fn run(self: Arc<Self>, must_exit: watch::Receiver<bool>) {
        let now = Instant::now();
        let me = self.id();
        for (id, addr) in self.load_peer_list() {
            if id != me {
                self.peers().learn(id, Some(addr), now);
            }
        }
        let mut by_address = Vec::new();
        for p in self.config.bootstrap_peers.iter() {
            match parse_peer_name(p) {
                Ok(PeerName::Known(id, host)) => match resolve(&host) {
                    Ok(addr) => self.peers().learn(id, Some(addr), now),
                    Err(e) => warn!("bootstrap_peers: {e}"),
                },
                Ok(PeerName::Address(host)) => by_address.push(host),
                Err(e) => warn!("bootstrap_peers: {e}"),
            }
        }
        tokio::join!(
            self.clone().discovery_loop(must_exit.clone()),
            self.clone().ping_loop(must_exit.clone()),
            self.clone().find_by_address(by_address, must_exit.clone()),
        );
    }

    /// Learns the ids of the bootstrap peers given by address alone, by
    /// connecting to them: each is tried until it answers (its name may
    /// not resolve yet: a pod not yet scheduled), 3 s apart at first and
    /// then less often, up to a minute; once all have answered, all are
    /// resolved again every minute, so that a peer whose address changed
    /// (a pod moved) is found again. An address that is this node's own is
    /// left out.
    async fn find_by_address(
        self: Arc<Self>,
        hosts: Vec<String>,
        mut must_exit: watch::Receiver<bool>,
    ) {
        if hosts.is_empty() {
            return;
        }
        // Per host: the id it was last found to be (None: ourselves).
        let mut found: std::collections::HashMap<String, Option<NodeId>> = Default::default();
        let mut known = std::collections::HashSet::new();
        let mut retry = BOOTSTRAP_RETRY;
        while !*must_exit.borrow() {
            let todo: Vec<&String> = hosts.iter().filter(|h| !known.contains(*h)).collect();
            for host in todo {
                match self.dial_by_address(host).await {
                    Ok(who) => {
                        if let Some((id, addr)) = who {
                            self.peers().learn(id, Some(addr), Instant::now());
                        }
                        let id = who.map(|(id, _)| id);
                        if found.insert(host.clone(), id) != Some(id) {
                            match id {
                                Some(id) => info!("bootstrap peer {host} is node {id:?}"),
                                None => debug!("bootstrap peer {host} is this node"),
                            }
                        }
                        known.insert(host.clone());
                    }
                    Err(e) => debug!("bootstrap peer {host}: {e}"),
                }
            }
            let wait = if known.len() == hosts.len() {
                known.clear();
                retry = BOOTSTRAP_RETRY;
                BOOTSTRAP_REFRESH
            } else {
                let w = retry;
                retry = (retry * 2).min(BOOTSTRAP_REFRESH);
                w
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => (),
                _ = must_exit.changed() => (),
            }
        }
    }

    /// Resolves `host` and connects to it: the node there and its address,
    /// or `None` if it is this node.
    async fn dial_by_address(&self, host: &str) -> Result<Option<(NodeId, SocketAddr)>, String> {
        let addr = tokio::net::lookup_host(host)
            .await
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no address")?;
        match tokio::time::timeout(Duration::from_secs(10), self.netapp.connect(addr, None)).await {
            Ok(Ok(id)) => Ok(Some((id, addr))),
            Ok(Err(NetError::Ourselves)) => Ok(None),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".to_string()),
        }
    }

    async fn discovery_loop(self: Arc<Self>, mut must_exit: watch::Receiver<bool>) {
        while !*must_exit.borrow() {
            let targets = self.peers().to_connect(&self.id(), Instant::now());
            for (id, addr) in targets {
                let sys = self.clone();
                tokio::spawn(async move {
                    match sys.netapp.connect(addr, Some(id)).await {
                        Ok(_) => debug!(peer = ?id, %addr, "connected"),
                        Err(e) => {
                            debug!(peer = ?id, %addr, "cannot connect: {e}");
                            sys.peers().connect_failed(&id, Instant::now());
                        }
                    }
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(DISCOVERY_INTERVAL) => (),
                _ = must_exit.changed() => (),
            }
        }
    }

    async fn ping_loop(self: Arc<Self>, mut must_exit: watch::Receiver<bool>) {
        while !*must_exit.borrow() {
            let connected = self.peers().connected_ids();
            for id in connected {
                tokio::spawn(self.clone().ping(id));
            }
            self.update_trackers();
            self.update_clock_health();
            self.save_peer_list();
            tokio::select! {
                _ = tokio::time::sleep(PING_INTERVAL) => (),
                _ = self.ping_now.notified() => (),
                _ = must_exit.changed() => (),
            }
        }
    }

    async fn ping(self: Arc<Self>, id: NodeId) {
        self.ping_once(id).await
    }

    /// Pings `id` once: it learns this node's status and address, and this
    /// node records its answer.
    async fn ping_once(&self, id: NodeId) {
        let start = Instant::now();
        let msg = SystemRpc::Ping(self.local_status());
        let sent_ms = garage_util::time::now_msec();
        let res =
            tokio::time::timeout(PING_TIMEOUT, self.endpoint.call(&id, msg, Priority::High)).await;
        match res {
            Ok(Ok(SystemRpc::Pong(status, known))) => {
                let rtt = start.elapsed();
                let offset = clock::offset_of_peer(sent_ms, garage_util::time::now_msec(), &status);
                let pull = self.record_peer_status(id, &status, &known, Some(rtt), offset);
                self.update_clock_health();
                if pull {
                    self.pull_layout(id).await;
                }
            }
            Ok(Ok(other)) => warn!(peer = ?id, "unexpected answer to ping: {other:?}"),
            Ok(Err(e)) => self.ping_failed(id, &e.to_string()),
            Err(_) => self.ping_failed(id, "timeout"),
        }
    }

    fn ping_failed(&self, id: NodeId, why: &str) {
        let outcome = self.peers().ping_failed(&id);
        match outcome {
            PingFailure::Counted => debug!(peer = ?id, "ping missed: {why}"),
            PingFailure::NowDown => warn!(
                peer = ?id,
                "peer is down: {} pings missed (last: {why})",
                peers::MAX_FAILED_PINGS
            ),
            PingFailure::DropConnection => {
                warn!(peer = ?id, "peer silent for {} pings: dropping the connection to dial it again", peers::DROP_AFTER_FAILED_PINGS);
                self.netapp.disconnect(&id);
            }
        }
    }

    /// Records what a peer said about itself and the peers it knows.
    /// Returns true when the peer's layout differs from ours and is not
    /// older, so ours should be merged with it.
    fn record_peer_status(
        &self,
        id: NodeId,
        status: &NodeStatus,
        known: &[(NodeId, SocketAddr)],
        rtt: Option<Duration>,
        clock_offset_ms: Option<i64>,
    ) -> bool {
        let now = Instant::now();
        {
            let mut peers = self.peers();
            let was_down = peers.get(&id).is_some_and(|p| !p.is_up() && p.connected);
            peers.heard_from(&id, status.clone(), rtt, clock_offset_ms, now);
            if was_down {
                info!(peer = ?id, "peer is up again");
                self.peers_up.send_modify(|n| *n += 1);
            }
            let me = self.id();
            for (kid, addr) in known {
                if *kid != me && peers.get(kid).is_none() {
                    debug!(peer = ?kid, %addr, "learnt of peer by gossip");
                    peers.learn(*kid, Some(*addr), now);
                }
            }
        }
        self.peer_version_heard(id, status);
        if status.replication_factor != self.config.replication_factor {
            warn!(peer = ?id, "peer has replication_factor = {} but this node has {}: they cannot form one cluster", status.replication_factor, self.config.replication_factor);
            return false;
        }
        let mine = self.layout_digest();
        status.layout != mine && status.layout.version >= mine.version
    }

    async fn pull_layout(&self, id: NodeId) {
        match self
            .endpoint
            .call(&id, SystemRpc::PullLayout, Priority::High)
            .await
        {
            Ok(SystemRpc::Layout(l)) => self.merge_layout(&l),
            Ok(other) => warn!(peer = ?id, "unexpected answer to PullLayout: {other:?}"),
            Err(e) => debug!(peer = ?id, "cannot pull layout: {e}"),
        }
    }

    /// Merges a received layout; saves it and tells every peer when ours
    /// changed.
    fn merge_layout(&self, other: &LayoutHistory) {
        if other.current().replication_factor != self.config.replication_factor {
            warn!(
                "ignoring a layout with replication factor {} (this node has {})",
                other.current().replication_factor,
                self.config.replication_factor
            );
            return;
        }
        let _ = self.modify_layout(|l| Ok::<_, ()>(l.merge(other)));
        self.update_trackers();
    }

    /// Saves the layout and pushes it to every connected peer.
    fn layout_changed(&self) {
        let layout = self.layout();
        self.layout_notify.send_replace(layout.clone());
        {
            let _saving = self.layout_save.lock().unwrap_or_else(|e| e.into_inner());
            // The newest layout, read under the lock: a save that waited
            // for another one never writes an older layout after it.
            if let Err(e) = self.layout().save(&self.layout_path) {
                warn!("cannot save the cluster layout: {e}");
            }
        }
        let connected = self.peers().connected_ids();
        for id in connected {
            let ep = self.endpoint.clone();
            let msg = SystemRpc::Layout(Box::new((*layout).clone()));
            tokio::spawn(async move {
                if let Err(e) = ep.call(&id, msg, Priority::High).await {
                    debug!(peer = ?id, "cannot push layout: {e}");
                }
            });
        }
    }

    fn known_peers(&self) -> Vec<(NodeId, SocketAddr)> {
        let mut v: Vec<(NodeId, SocketAddr)> = self
            .peers()
            .iter()
            .filter(|(_, p)| p.is_up())
            .filter_map(|(id, p)| p.addr.map(|a| (*id, a)))
            .collect();
        if let Some(a) = self.config.rpc_public_addr {
            v.push((self.id(), a));
        }
        v
    }

    /// Nodes known to this node, itself included, for `garage status`.
    pub fn cluster_status(&self) -> ClusterStatus {
        // Before the peer list is locked below (health locks it too).
        let health = self.health();
        let clocks = self.clock_view();
        let layout = self.layout();
        let now = Instant::now();
        let me = self.local_status();
        let mut nodes = vec![KnownNode {
            id: self.id(),
            addr: self.config.rpc_public_addr,
            is_up: true,
            last_seen_secs_ago: Some(0),
            rtt_ms: Some(0.0),
            hostname: Some(me.hostname.clone()),
            layout_version: Some(me.layout.version),
            metadata_space: me.metadata_space,
            data_space: me.data_space,
            clock_offset_ms: None,
            version: me.version,
        }];
        let peers = self.peers();
        for (id, p) in peers.iter() {
            if *id == self.id() {
                continue;
            }
            nodes.push(KnownNode {
                id: *id,
                addr: p.addr,
                is_up: p.is_up(),
                last_seen_secs_ago: p.last_seen.map(|t| now.duration_since(t).as_secs()),
                rtt_ms: p.rtt.map(|d| d.as_secs_f64() * 1000.0),
                hostname: p.status.as_ref().map(|s| s.hostname.clone()),
                layout_version: p.status.as_ref().map(|s| s.layout.version),
                metadata_space: p.status.as_ref().and_then(|s| s.metadata_space),
                data_space: p.status.as_ref().and_then(|s| s.data_space),
                clock_offset_ms: None,
                version: self.known_version(id, p.status.as_ref()),
            });
        }
        drop(peers);
        // Nodes with a role that we never heard of are listed as down.
        for id in layout.current().roles.keys() {
            if !nodes.iter().any(|n| n.id == *id) {
                nodes.push(KnownNode {
                    id: *id,
                    addr: None,
                    is_up: false,
                    last_seen_secs_ago: None,
                    rtt_ms: None,
                    hostname: None,
                    layout_version: None,
                    metadata_space: None,
                    data_space: None,
                    clock_offset_ms: None,
                    version: None,
                });
            }
        }
        let me = self.id();
        for n in nodes.iter_mut() {
            n.clock_offset_ms = clocks.offset_of(&me, &n.id);
        }
        nodes.sort_by_key(|n| n.id);
        let versions = Some(self.versions_of(&nodes, &layout));
        ClusterStatus {
            nodes,
            layout: (*layout).clone(),
            health: Some(health),
            versions,
        }
    }

    /// Stages, applies or reverts a layout change on this node (it then
    /// spreads by gossip).
    pub fn update_layout(&self, update: LayoutUpdate) -> Result<(), SystemError> {
        let mut first_layout = false;
        self.modify_layout(|l| -> Result<bool, SystemError> {
            match update {
                LayoutUpdate::StageRoles(roles) => {
                    for (id, role) in roles {
                        l.stage_role(id, role);
                    }
                }
                LayoutUpdate::StageParameters(p) => {
                    let feature = versions::PLACEMENT_CLASSES;
                    if !p.class_defs.is_empty() && !self.feature_allowed(&feature) {
                        return Err(SystemError::NotFinalized {
                            what: "a storage class with a place (`garage layout class`)".into(),
                            feature: feature.name,
                            since: feature.since,
                            active: self.active_version(),
                            how: if l.current().version == 0 {
                                "apply a first layout (a new cluster is finalized with it), then define the class"
                            } else {
                                "upgrade every node, then run `garage upgrade finalize`"
                            },
                        });
                    }
                    l.stage_parameters(p)
                }
                LayoutUpdate::Apply { version } => {
                    let report = l.apply(version)?;
                    first_layout = version == 1;
                    info!(
                        "applied cluster layout version {version}: partition size {} bytes, {} partition copies moved",
                        report.partition_size, report.moved
                    );
                }
                LayoutUpdate::Revert => l.revert(),
                LayoutUpdate::SkipDeadNodes {
                    version,
                    allow_missing_data,
                } => {
                    let current = l.current().version;
                    if version != current {
                        return Err(SystemError::SkipVersion { given: version, current });
                    }
                    let dead: Vec<NodeId> = l
                        .tracked_nodes()
                        .into_iter()
                        .filter(|n| !self.is_up(n))
                        .collect();
                    if dead.is_empty() {
                        return Err(SystemError::NoDeadNodes);
                    }
                    for n in dead {
                        warn!(peer = ?n, "layout trackers of dead node moved to version {version} (allow_missing_data = {allow_missing_data})");
                        l.raise_tracker(Tracker::Ack, n, version);
                        l.raise_tracker(Tracker::SyncAck, n, version);
                        if allow_missing_data {
                            l.raise_tracker(Tracker::Sync, n, version);
                        }
                    }
                }
            }
            Ok(true)
        })?;
        self.update_trackers();
        if first_layout {
            self.finalize_new_cluster();
        }
        Ok(())
    }

    /// Raises this node's trackers as far as it can: `ack` once no write
    /// runs under an older version, `sync` once every table synced, and
    /// `sync_ack` once every node synced.
    fn update_trackers(&self) {
        let me = self.id();
        let _ = self.modify_layout(|l| {
            let current = l.current().version;
            let mut changed = l.raise_tracker(Tracker::Ack, me, self.progress.ackable(current));
            if let Some(v) = self.progress.synced() {
                changed |= l.raise_tracker(Tracker::Sync, me, v);
            }
            let all_synced = l.synced_version(self.write_quorum());
            changed |= l.raise_tracker(Tracker::SyncAck, me, all_synced);
            Ok::<_, ()>(changed)
        });
        let why = trackers::stall_reason(&self.layout(), &me, &self.progress);
        let event = self
            .stall
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(why, std::time::Instant::now());
        match event {
            Some(trackers::StallEvent::Stalled(why)) => warn!(
                "layout change not finished after {}s: {why}",
                LAYOUT_STALL_WARNING.as_secs()
            ),
            Some(trackers::StallEvent::Resumed) => {
                info!("layout change finished: every live version is the current one")
            }
            None => (),
        }
    }

    /// Starts a write: the returned guard holds the layout to use and keeps
    /// this node from acknowledging a newer layout until it is dropped.
    pub fn start_write(&self, what: &'static str) -> trackers::WriteGuard {
        self.progress.start_write(self.layout(), what)
    }

    /// A table of this node takes part in layout syncs.
    pub fn register_table(&self, name: &str) {
        self.progress.register_table(name);
    }

    /// Table `name` has pushed all its entries to the nodes of `version`.
    pub fn table_synced(&self, name: &str, version: u64) {
        self.progress.table_synced(name, version);
        self.update_trackers();
    }

    /// Changes each time a peer connects or comes back up.
    pub fn subscribe_peers_up(&self) -> watch::Receiver<u64> {
        self.peers_up.subscribe()
    }

    /// Every new layout, as it is adopted.
    pub fn subscribe_layout(&self) -> watch::Receiver<Arc<LayoutHistory>> {
        self.layout_notify.subscribe()
    }

    /// `nodes` ordered nearest first: this node, then peers by measured
    /// round-trip time, then peers that are down.
    pub fn nodes_by_distance(&self, nodes: &[NodeId]) -> Vec<NodeId> {
        let me = self.id();
        let mut v = Vec::with_capacity(nodes.len());
        if nodes.contains(&me) {
            v.push(me);
        }
        let others: Vec<NodeId> = nodes.iter().filter(|n| **n != me).copied().collect();
        v.extend(self.peers().by_distance(&others));
        v
    }

    /// When peer `id` last came up after being down (None: never seen up,
    /// or this node itself, which is up since it started).
    pub fn up_since(&self, id: &NodeId) -> Option<Instant> {
        self.peers().get(id).and_then(|p| p.up_since)
    }

    /// Whether `id` is this node or a peer that answers pings.
    pub fn is_up(&self, id: &NodeId) -> bool {
        *id == self.id() || self.peers().get(id).is_some_and(|p| p.is_up())
    }

    /// Whether `id` is this node or a peer that has answered since this
    /// node started (a peer never seen is most likely being dialled).
    pub fn ever_seen(&self, id: &NodeId) -> bool {
        *id == self.id() || self.peers().get(id).is_some_and(|p| p.last_seen.is_some())
    }

    pub fn replication_factor(&self) -> usize {
        self.config.replication_factor
    }

    /// Answers needed for a write: a majority of each partition's nodes,
    /// or one in `dangerous` mode.
    pub fn write_quorum(&self) -> usize {
        self.quorums(self.config.replication_factor).0
    }

    /// Answers needed for a read: enough to intersect every write quorum
    /// in `consistent` mode, one otherwise.
    pub fn read_quorum(&self) -> usize {
        self.quorums(self.config.replication_factor).1
    }

    /// The (write, read) quorums over a set of `n` nodes holding the same
    /// entries: a majority writes (one in `dangerous` mode); a read
    /// intersects every write in `consistent` mode, else needs one answer.
    pub fn quorums(&self, n: usize) -> (usize, usize) {
        let n = n.max(1);
        let write = match self.config.consistency_mode {
            ConsistencyMode::Dangerous => 1,
            _ => n / 2 + 1,
        };
        let read = match self.config.consistency_mode {
            ConsistencyMode::Consistent => n + 1 - write,
            _ => 1,
        };
        (write, read)
    }

    /// Connects to `id` now if it is not connected and its address is
    /// known (a node that just joined the layout, before discovery got to
    /// it). Failures are left to the call that follows.
    pub async fn ensure_connected(&self, id: &NodeId) {
        if *id == self.id() || self.netapp.is_connected(id) {
            return;
        }
        let addr = self.peers().get(id).and_then(|p| p.addr);
        let recently_failed = {
            let failed = self.failed_dials.lock().expect("failed dials lock");
            failed
                .get(id)
                .is_some_and(|t| t.elapsed() < ON_DEMAND_DIAL_INTERVAL)
        };
        if let (Some(addr), false) = (addr, recently_failed) {
            let ok = match tokio::time::timeout(
                ENSURE_CONNECTED_TIMEOUT,
                self.netapp.connect(addr, Some(*id)),
            )
            .await
            {
                Ok(Ok(_)) => {
                    debug!(peer = ?id, %addr, "connected on demand");
                    true
                }
                Ok(Err(e)) => {
                    debug!(peer = ?id, %addr, "cannot connect on demand: {e}");
                    false
                }
                Err(_) => {
                    debug!(peer = ?id, %addr, "cannot connect on demand: timeout");
                    false
                }
            };
            let mut failed = self.failed_dials.lock().expect("failed dials lock");
            if ok {
                failed.remove(id);
            } else {
                failed.insert(*id, Instant::now());
            }
        }
    }

    /// Connects to `<id>@<host>:<port>` now, and pings it once: when this
    /// returns, each side knows the other (its status, its address), so a
    /// `garage layout assign` of this node through the peer works at once
    /// instead of after the next ping round.
    pub async fn connect(&self, peer: &str) -> Result<(), SystemError> {
        let (id, addr) = parse_peer(peer)?;
        self.peers().learn(id, Some(addr), Instant::now());
        self.netapp.connect(addr, Some(id)).await?;
        self.ping_once(id).await;
        Ok(())
    }
}

#[async_trait::async_trait]
impl EndpointHandler<SystemRpc> for System {
    async fn handle(&self, msg: SystemRpc, from: NodeId) -> SystemRpc {
        match msg {
            SystemRpc::Ping(status) => {
                // Only nodes ping: this one is a peer, reachable at the
                // address it advertises.
                {
                    let mut peers = self.peers();
                    peers.learn(from, status.rpc_public_addr, Instant::now());
                    peers.mark_connected_if_known(&from, Instant::now());
                }
                // The answer must not wait on anything: a newer layout on
                // the pinging side is pulled when our own ping to it sees it.
                self.record_peer_status(from, &status, &[], None, None);
                SystemRpc::Pong(self.local_status(), self.known_peers())
            }
            SystemRpc::PullLayout => SystemRpc::Layout(Box::new((*self.layout()).clone())),
            SystemRpc::Layout(l) => {
                self.merge_layout(&l);
                SystemRpc::Ok
            }
            other @ (SystemRpc::Pong(..) | SystemRpc::Ok | SystemRpc::Error(_)) => {
                SystemRpc::Error(format!("not a request: {other:?}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_named_with_or_without_an_id() {
        let id = "a".repeat(64);
        let known = parse_peer_name(&format!("{id}@node1.example:3901")).unwrap();
        assert!(matches!(known, PeerName::Known(_, ref h) if h == "node1.example:3901"));
        assert_eq!(
            parse_peer_name("garage-0.garage-headless:3901").unwrap(),
            PeerName::Address("garage-0.garage-headless:3901".into())
        );
        assert_eq!(
            parse_peer_name("[::1]:3901").unwrap(),
            PeerName::Address("[::1]:3901".into())
        );
        for bad in [
            "node1",
            "node1:port",
            ":3901",
            "node1:99999",
            "abc@node1:3901",
            &format!("{id}@node1"),
        ] {
            assert!(
                matches!(parse_peer_name(bad), Err(SystemError::BadPeer(_))),
                "{bad}"
            );
        }
        // Where an id is needed, an address alone is refused.
        assert!(matches!(
            parse_peer("127.0.0.1:3901"),
            Err(SystemError::BadPeer(_))
        ));
        assert_eq!(
            parse_peer(&format!("{id}@127.0.0.1:3901")).unwrap().1,
            "127.0.0.1:3901".parse().unwrap()
        );
    }
}
