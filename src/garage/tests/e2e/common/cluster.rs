//! Clusters of real `garage server` processes for end-to-end tests.
//!
//! Each node of each test gets its own loopback address (127.a.b.c, `a`
//! from the test process, `b` from a per-process counter, `c` the node
//! index), so that tests running in parallel never compete for ports.
//! Nodes reach each other through a [`Proxy`] per node (see `proxy.rs`), so
//! a test can isolate a node or add latency between nodes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::proxy::{Net, Proxy};
use super::{garage_bin, stderr, stdout, Proc, DEADLINE};

pub const RPC_PORT: u16 = 3901;
/// Port of the proxy in front of each node: its advertised address.
pub const PROXY_PORT: u16 = 3911;

static NEXT_CLUSTER: AtomicU32 = AtomicU32::new(1);

/// A fresh 127.a.b.0 prefix for one cluster: `a` from the process (two
/// values each, so one test binary has 512 prefixes before any comes
/// back), `b` from a counter.
pub fn fresh_subnet() -> (u8, u8) {
    let n = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
    let a = 10 + (std::process::id() % 100) as u8 * 2 + ((n / 256) % 2) as u8;
    (a, (n % 256) as u8)
}

pub fn random_secret() -> String {
    (0..32)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

pub struct Node {
    pub index: usize,
    pub ip: Ipv4Addr,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub proc: Option<Proc>,
    /// Full node id, known once the node has started.
    pub id: Option<String>,
    /// Environment variables given to this node only (after the
    /// cluster's), e.g. its fake clock ([`Cluster::fake_clock`]).
    pub env: Vec<(String, String)>,
    /// The `garage` binary this node's daemon and CLI run (this build's
    /// when `None`): an earlier release's in the upgrade test.
    pub bin: Option<PathBuf>,
    _proxy: Proxy,
}

impl Node {
    /// The binary this node runs.
    pub fn binary(&self) -> PathBuf {
        self.bin.clone().unwrap_or_else(garage_bin)
    }
}

impl Node {
    /// Where the node listens.
    pub fn rpc_addr(&self) -> String {
        format!("{}:{}", self.ip, RPC_PORT)
    }

    /// Where other nodes reach it (through its proxy): its `rpc_public_addr`.
    pub fn public_addr(&self) -> String {
        format!("{}:{}", self.ip, PROXY_PORT)
    }

    pub fn id(&self) -> &str {
        self.id.as_deref().expect("node started")
    }

    pub fn proc(&self) -> &Proc {
        self.proc.as_ref().expect("node running")
    }
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub secret: String,
    pub replication_factor: usize,
    /// The links between nodes.
    pub net: Arc<Net>,
    /// Environment variables given to every `garage server` started.
    pub env: Vec<(String, String)>,
    /// Strings that must never appear in a node's log (the RPC secret,
    /// access keys' secrets, tokens): checked when the cluster is dropped.
    secrets: Mutex<Vec<String>>,
    _dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A test that already failed is not failed again here.
        if !std::thread::panicking() {
            self.assert_no_secret_logged();
        }
        // Processes first (dropping a Proc kills it), then the proxies.
        for n in self.nodes.iter_mut() {
            n.proc = None;
        }
        self.net.shutdown();
    }
}

impl Cluster {
    /// Writes the configuration of `n` nodes; starts none.
    pub fn new(n: usize, replication_factor: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = fresh_subnet();
        let secret = random_secret();
        let net = Net::new();
        let nodes = (0..n)
            .map(|i| {
                let ip = Ipv4Addr::new(127, a, b, 1 + i as u8);
                let ndir = dir.path().join(format!("node{i}"));
                std::fs::create_dir_all(&ndir).unwrap();
                let proxy = Proxy::start(
                    net.clone(),
                    SocketAddr::new(ip.into(), PROXY_PORT),
                    SocketAddr::new(ip.into(), RPC_PORT),
                );
                Node {
                    index: i,
                    ip,
                    config: ndir.join("garage.toml"),
                    dir: ndir,
                    proc: None,
                    id: None,
                    env: Vec::new(),
                    bin: None,
                    _proxy: proxy,
                }
            })
            .collect();
        let c = Self {
            nodes,
            secret: secret.clone(),
            replication_factor,
            net,
            env: Vec::new(),
            secrets: Mutex::new(vec![secret]),
            _dir: dir,
        };
        for i in 0..n {
            c.write_config(i, &c.secret.clone(), &[]);
        }
        c
    }

    pub fn write_config(&self, i: usize, secret: &str, bootstrap: &[String]) {
        let n = &self.nodes[i];
        let peers = bootstrap
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            r#"metadata_dir = "{meta}"
data_dir = "{data}"
replication_factor = {rf}
rpc_bind_addr = "{ip}:{RPC_PORT}"
rpc_public_addr = "{ip}:{PROXY_PORT}"
rpc_bind_outgoing = true
rpc_secret = "{secret}"
bootstrap_peers = [{peers}]

[s3_api]
s3_region = "garage"
api_bind_addr = "{ip}:3900"
"#,
            meta = n.dir.join("meta").display(),
            data = n.dir.join("data").display(),
            rf = self.replication_factor,
            ip = n.ip,
        );
        std::fs::write(&n.config, text).unwrap();
    }

    /// Adds a string that no node may ever write to its log.
    pub fn note_secret(&self, secret: &str) {
        self.secrets.lock().unwrap().push(secret.to_string());
    }

    /// Fails if the log of a running node contains a noted secret.
    pub fn assert_no_secret_logged(&self) {
        let secrets = self.secrets.lock().unwrap().clone();
        for n in &self.nodes {
            let Some(p) = &n.proc else { continue };
            let log = p.log();
            let found = super::leaked(&log, &secrets);
            assert!(
                found.is_empty(),
                "node {} logged {} secret(s) (of {} noted); first at: {:?}",
                n.index,
                found.len(),
                secrets.len(),
                log.lines().find(|l| l.contains(found[0]))
            );
        }
    }

    /// Three nodes in zones dc1, dc2 and dc3 (replication 3), started,
    /// seeing each other, with a layout applied.
    pub fn three_zones() -> Self {
        Self::three_zones_with_env(&[])
    }

    /// [`Cluster::three_zones`], each node started with `env` too.
    pub fn three_zones_with_env(env: &[(&str, &str)]) -> Self {
        let mut c = Self::new(3, 3);
        c.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        c.start_all();
        wait_until("nodes see each other", CLUSTER_DEADLINE, || {
            c.health(0).0.len() == 3
        });
        c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
        c
    }

    /// Sets `db_engine` ("lmdb" or "sqlite") in every node's
    /// configuration; call before starting them.
    pub fn use_db_engine(&self, engine: &str) {
        for n in &self.nodes {
            let text = std::fs::read_to_string(&n.config).unwrap();
            std::fs::write(&n.config, format!("db_engine = \"{engine}\"\n{text}")).unwrap();
        }
    }

    /// Starts node `i` and waits until it listens; records its id.
    pub fn start(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let p = Proc::spawn_with(
            super::base_command_of(&node.binary(), &node.dir)
                .args(["-c", node.config.to_str().unwrap(), "server"])
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .envs(node.env.iter().map(|(k, v)| (k, v))),
        );
        let line = p.wait_log("node id ");
        let id = line
            .split("node id ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_hexdigit()).next())
            .unwrap()
            .to_string();
        assert_eq!(id.len(), 64, "bad node id in {line:?}");
        if let Some(old) = &node.id {
            assert_eq!(old, &id, "node {i} changed id across restarts");
        }
        node.id = Some(id);
        p.wait_log("garage is running");
        node.proc = Some(p);
    }

    /// Starts node 0, then every other node with node 0 as its only
    /// bootstrap peer.
    pub fn start_all(&mut self) {
        self.start_first(self.nodes.len());
    }

    /// Like [`Cluster::start_all`] for nodes `0..k` only.
    pub fn start_first(&mut self, k: usize) {
        self.start(0);
        let boot = vec![format!(
            "{}@{}",
            self.nodes[0].id(),
            self.nodes[0].public_addr()
        )];
        for i in 1..self.nodes.len() {
            // Later nodes get the bootstrap peer too, for when they start.
            self.write_config(i, &self.secret.clone(), &boot);
            if i < k {
                self.start(i);
            }
        }
    }

    /// Runs `garage -c <node i's config> args...`, with node i's binary.
    pub fn garage(&self, i: usize, args: &[&str]) -> Output {
        let n = &self.nodes[i];
        let mut all = vec!["-c", n.config.to_str().unwrap()];
        all.extend_from_slice(args);
        super::base_command_of(&n.binary(), &n.dir)
            .args(&all)
            .output()
            .expect("cannot run garage")
    }

    /// Like [`Cluster::garage`], and the command must succeed.
    pub fn garage_ok(&self, i: usize, args: &[&str]) -> String {
        let o = self.garage(i, args);
        assert!(
            o.status.success(),
            "garage {args:?} on node {i} failed:\n{}\n{}",
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    /// Calls the admin API endpoint `endpoint` on node `i` through `garage
    /// json-api` (query parameters and body fields in one object); the
    /// JSON answer. The call must succeed.
    pub fn json_api(
        &self,
        i: usize,
        endpoint: &str,
        request: serde_json::Value,
    ) -> serde_json::Value {
        let out = self.garage_ok(i, &["json-api", endpoint, &request.to_string()]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{endpoint}: not JSON ({e}): {out}"))
    }

    /// Runs the read command `garage --json args...` on node `i` (status,
    /// layout show, bucket info, stats, ...): the JSON answer of the admin
    /// API endpoint behind it. The command must succeed. A per-node
    /// command (stats, worker, block) answers for node `i` itself under
    /// `["success"][<node i's full id>]`.
    pub fn garage_json(&self, i: usize, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        parse_json(args, &self.garage_ok(i, &all))
    }

    /// Like [`Cluster::garage_json`]; `None` when the command fails (node
    /// `i` is not answering).
    pub fn try_garage_json(&self, i: usize, args: &[&str]) -> Option<serde_json::Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let o = self.garage(i, &all);
        o.status.success().then(|| parse_json(args, &stdout(&o)))
    }

    /// The total of metric counter `name` on node `i` since it started
    /// (its series summed over their labels), from `garage --json stats`:
    /// 0 before its first increment.
    pub fn counter(&self, i: usize, name: &str) -> u64 {
        let stats = self.garage_json(i, &["stats"]);
        stats["success"][self.nodes[i].id()]["counters"][name]
            .as_f64()
            .unwrap_or(0.0) as u64
    }

    /// Node ids (16-character prefixes) that node `i` sees up, and down,
    /// from `garage --json status`; both empty when the command fails
    /// (node `i` is not answering).
    pub fn health(&self, i: usize) -> (Vec<String>, Vec<String>) {
        let Some(v) = self.try_garage_json(i, &["status"]) else {
            return (vec![], vec![]);
        };
        let (mut up, mut down) = (Vec::new(), Vec::new());
        for n in v["nodes"].as_array().expect("status --json lists nodes") {
            let id = n["id"].as_str().expect("a node id")[..16].to_string();
            match n["isUp"].as_bool() {
                Some(true) => up.push(id),
                _ => down.push(id),
            }
        }
        (up, down)
    }

    /// Assigns node i to `zones[i]` with `capacity`, and applies.
    pub fn apply_layout(&self, zones: &[&str], capacity: &str) {
        for (i, z) in zones.iter().enumerate() {
            let id = self.nodes[i].id().to_string();
            self.garage_ok(0, &["layout", "assign", "-z", z, "-c", capacity, &id[..16]]);
        }
        // The staged changes become the version after the current one.
        let layout = self.garage_json(0, &["layout", "show"]);
        let current = layout["version"]
            .as_u64()
            .unwrap_or_else(|| panic!("no layout version in {layout}"));
        let next = (current + 1).to_string();
        self.garage_ok(0, &["layout", "apply", "--version", &next]);
    }

    /// Stops node `i` as an operator does (SIGTERM: it finishes the
    /// requests under way) and waits for it to exit.
    pub fn stop(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].proc.take() {
            p.signal("TERM");
            let st = p.wait_exit();
            assert!(
                st.success(),
                "node {i} exited with {st} after SIGTERM:\n{}",
                p.log()
            );
        }
    }

    pub fn kill(&mut self, i: usize) {
        // Dropping the process handle SIGKILLs it and waits for it.
        self.nodes[i].proc = None;
    }

    /// Node `i` loses its disk: killed, its metadata and data directories
    /// (node key included) removed. Started again, it is a new node with a
    /// new id.
    pub fn wipe(&mut self, i: usize) {
        self.kill(i);
        let n = &mut self.nodes[i];
        for d in ["meta", "data"] {
            let path = n.dir.join(d);
            if path.exists() {
                std::fs::remove_dir_all(&path)
                    .unwrap_or_else(|e| panic!("cannot wipe {}: {e}", path.display()));
            }
        }
        n.id = None;
    }

    /// Whether network cuts (isolation, splits) reset the connections
    /// crossing them (true) or stall their bytes (false, the default).
    pub fn set_cuts_reset(&self, reset: bool) {
        self.net.set_reset(reset);
    }

    /// Cuts node `i` off from the other nodes (or reconnects it): its
    /// connections stay open but carry nothing, as when a site's link
    /// fails. Its own admin CLI still reaches it.
    pub fn set_isolated(&self, i: usize, isolated: bool) {
        self.net
            .set_isolated(IpAddr::V4(self.nodes[i].ip), isolated);
    }

    /// Splits the cluster: the nodes of each group reach only each other
    /// (links between groups carry nothing, connections stay open); an
    /// empty list heals the split.
    pub fn set_split(&self, groups: &[Vec<usize>]) {
        let ips: Vec<Vec<IpAddr>> = groups
            .iter()
            .map(|g| g.iter().map(|i| IpAddr::V4(self.nodes[*i].ip)).collect())
            .collect();
        self.net.set_split(&ips);
    }

    /// Bandwidth of every link between nodes, in bytes per second.
    pub fn set_rate(&self, bytes_per_sec: Option<u64>) {
        self.net.set_rate(bytes_per_sec);
    }

    /// One-way latency added between every pair of nodes.
    pub fn set_latency(&self, one_way: Duration) {
        self.net.set_delay(one_way);
    }

    /// The block files stored under node `i`'s data dir, sorted (not
    /// temporary files, nor those moved aside as corrupted).
    pub fn block_files(&self, i: usize) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let data = self.nodes[i].dir.join("data");
        for a in std::fs::read_dir(&data).into_iter().flatten().flatten() {
            for b in std::fs::read_dir(a.path()).into_iter().flatten().flatten() {
                for f in std::fs::read_dir(b.path()).into_iter().flatten().flatten() {
                    let n = f.file_name().to_string_lossy().into_owned();
                    if n.len() >= 64 && !n.contains(".corrupted") && !n.contains(".tmp") {
                        out.push(f.path());
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Gives node `i` (before it starts) a wall clock that the test moves
    /// with [`Cluster::set_clock_offset`]: libfaketime (Debian's
    /// `faketime` package, which CI installs) preloaded into the daemon
    /// itself, reading its offset from a file at most once a second; the
    /// monotonic clock is left alone, as when NTP steps a clock.
    pub fn fake_clock(&mut self, i: usize) {
        let lib = libfaketime();
        let file = self.nodes[i].dir.join("faketime");
        std::fs::write(&file, "+0\n").unwrap();
        self.nodes[i].env.extend([
            ("LD_PRELOAD".to_string(), lib.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE".into(), file.display().to_string()),
            ("FAKETIME_CACHE_DURATION".into(), "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            ("DONT_FAKE_MONOTONIC".into(), "1".into()),
        ]);
    }

    /// Sets node `i`'s wall clock `ms` milliseconds ahead of the real one
    /// (behind if negative); it takes effect within a second. The node
    /// must have a fake clock ([`Cluster::fake_clock`]).
    pub fn set_clock_offset(&self, i: usize, ms: i64) {
        let file = self.nodes[i].dir.join("faketime");
        assert!(file.exists(), "node {i} has no fake clock");
        let sign = if ms < 0 { "-" } else { "+" };
        let abs = ms.unsigned_abs();
        let text = format!("{sign}{}.{:03}\n", abs / 1000, abs % 1000);
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
    }

    pub fn binary() -> PathBuf {
        garage_bin()
    }
}

/// Where Debian's `faketime` package puts libfaketime.
pub fn libfaketime() -> PathBuf {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("libfaketime not found: install Debian's faketime package (apt-get install faketime); .ci/run does")
}

/// Per table of node `i`: items in its local store and Merkle digest,
/// from `garage --json stats`; empty when the command fails.
pub fn table_stats(c: &Cluster, i: usize) -> std::collections::BTreeMap<String, (usize, String)> {
    let mut out = std::collections::BTreeMap::new();
    let Some(v) = c.try_garage_json(i, &["stats"]) else {
        return out;
    };
    let Some(nodes) = v["success"].as_object() else {
        return out;
    };
    for t in nodes
        .values()
        .flat_map(|n| n["tables"].as_array().into_iter().flatten())
    {
        out.insert(
            t["name"].as_str().expect("a table name").to_string(),
            (
                t["items"].as_u64().expect("items") as usize,
                t["merkleDigest"].as_str().expect("a digest").to_string(),
            ),
        );
    }
    out
}

/// The standard output of `garage --json args...`, parsed.
fn parse_json(args: &[&str], out: &str) -> serde_json::Value {
    serde_json::from_str(out)
        .unwrap_or_else(|e| panic!("garage --json {args:?}: not JSON ({e}): {out}"))
}

/// Polls `check` until it returns true, failing after `deadline`.
pub fn wait_until(what: &str, deadline: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if check() {
            let took = start.elapsed();
            // Where the suite's time goes (`--nocapture` shows it).
            if took >= Duration::from_secs(2) {
                eprintln!(
                    "[{}] waited {:.1} s: {what}",
                    std::thread::current().name().unwrap_or("?"),
                    took.as_secs_f64()
                );
            }
            return took;
        }
        assert!(
            start.elapsed() < deadline,
            "{what}: not reached within {deadline:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub const CLUSTER_DEADLINE: Duration = DEADLINE;
