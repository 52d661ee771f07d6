//! A history checker in the spirit of Jepsen: concurrent S3 clients (the
//! `aws-sdk-s3` crate) on a cluster of real `garage` processes in several
//! zones, while a seeded nemesis kills, isolates, pauses nodes, flips bits
//! and deletes files in their data dirs, and changes the layout (a node in
//! a new zone, a node removed, capacities, a zone move). Every operation is
//! logged with its start, end and result; afterwards the history is
//! checked against a register model per key (see `doc/checker.md`).
//!
//! `cargo test -p garage --test checker` runs a short seeded run (about
//! two minutes); `script/checker.sh` runs long ones. Settings (env):
//! `CHECKER_SEED` (default 14), `CHECKER_SECS` (workload duration,
//! default 50), `CHECKER_CLIENTS` (default 4), `CHECKER_LONG=1` (random
//! nemeses for the whole duration instead of the fixed short schedule).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::cluster::{parse_status, wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::make_key;
use common::stdout;

/// Objects are spread over this many buckets: the object table is
/// partitioned by bucket, so several buckets spread them over partitions
/// (a layout change moves some and not others).
const BUCKETS: usize = 8;

/// The bucket of `key`.
fn bucket_of(key: &str) -> String {
    let h = key
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
    format!("checker-{}", h as usize % BUCKETS)
}
const KEYS: usize = 10;
/// Keys written once before the faults start and then only read: data
/// at rest through every fault (a layout change that loses objects shows
/// here, where overwrites would hide it).
const STILL_KEYS: usize = 40;
/// Sizes: empty, inline (≤ 3 KiB), one block, two blocks.
const SIZES: &[usize] = &[0, 100, 5000, 1_500_000];
const OP_TIMEOUT: Duration = Duration::from_secs(20);
/// Nodes 0..STORAGE start in the layout; node STORAGE joins later.
const STORAGE: usize = 4;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The body written by write `id`: `<id>` repeated, cut to `size`, so that
/// any GET result says which write it is and whether a byte changed.
fn body_of(id: u64, size: usize) -> Vec<u8> {
    let unit = format!("<{id:010}>");
    unit.bytes().cycle().take(size).collect()
}

/// The write id a body claims to come from (bodies of 12 bytes or more).
fn id_in_body(b: &[u8]) -> Option<u64> {
    if b.len() < 12 || b[0] != b'<' || b[11] != b'>' {
        return None;
    }
    std::str::from_utf8(&b[1..11]).ok()?.parse().ok()
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// Acknowledged by the server.
    Ok,
    /// Refused for sure (412 for a conditional write): did not happen.
    Refused,
    /// Error or timeout: may or may not have happened, now or later.
    Unknown(String),
}

/// What a read returned.
#[derive(Clone, Debug, PartialEq)]
enum Read {
    /// The object, as (write id from its metadata, body).
    Value(u64, Vec<u8>),
    Absent,
    Failed(String),
}

#[derive(Clone, Debug)]
enum Kind {
    /// A PUT (multipart when `parts > 1`) of write `id`.
    Put {
        id: u64,
        size: usize,
        parts: usize,
    },
    /// `If-None-Match: *` PUT of write `id`.
    Lock {
        id: u64,
    },
    /// CopyObject from `src`, the copy tagged with write `id` (`src` is
    /// only for the history dump).
    Copy {
        id: u64,
        #[allow(dead_code)]
        src: String,
    },
    Delete,
    Get(Read),
    List(Option<BTreeSet<String>>),
}

#[derive(Clone, Debug)]
struct Op {
    client: usize,
    node: usize,
    key: String,
    start: Duration,
    end: Duration,
    kind: Kind,
    outcome: Outcome,
}

impl Op {
    /// The value this op writes to its key: `Some(id)` or `None` (absent);
    /// `Err(())` if it is not a write.
    fn written(&self) -> Result<Option<u64>, ()> {
        match &self.kind {
            Kind::Put { id, .. } | Kind::Lock { id } | Kind::Copy { id, .. } => Ok(Some(*id)),
            Kind::Delete => Ok(None),
            _ => Err(()),
        }
    }
}

#[derive(Default)]
struct History {
    ops: Vec<Op>,
    faults: Vec<String>,
}

struct Shared {
    t0: Instant,
    clients: Vec<Client>,
    /// Nodes the workload may send requests to (a node being started is
    /// not one, a paused or isolated one is: its requests time out).
    up: Mutex<Vec<bool>>,
    history: Mutex<History>,
    next_id: Mutex<u64>,
}

impl Shared {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }
    fn new_id(&self) -> u64 {
        let mut n = self.next_id.lock().unwrap();
        *n += 1;
        *n
    }
    fn record(&self, op: Op) {
        self.history.lock().unwrap().ops.push(op);
    }
    fn fault(&self, what: String) {
        eprintln!(
            "checker: [{:>6.1}s] nemesis: {what}",
            self.now().as_secs_f64()
        );
        self.history.lock().unwrap().faults.push(what);
    }
}

fn client_of(ip: std::net::Ipv4Addr, key: &(String, String)) -> Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("garage"))
        .credentials_provider(Credentials::new(&key.0, &key.1, None, None, "checker"))
        .endpoint_url(format!("http://{ip}:3900"))
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
        .build();
    Client::from_conf(conf)
}

fn unknown(e: impl std::fmt::Debug) -> Outcome {
    let s = format!("{e:?}");
    Outcome::Unknown(s.chars().take(200).collect())
}

fn is_412<E: std::fmt::Debug>(e: &aws_sdk_s3::error::SdkError<E>) -> bool {
    e.raw_response().is_some_and(|r| r.status().as_u16() == 412)
}

async fn put(c: &Client, key: &str, id: u64, size: usize, lock: bool) -> Outcome {
    let mut req = c
        .put_object()
        .bucket(bucket_of(key))
        .key(key)
        .metadata("w", id.to_string())
        .body(ByteStream::from(body_of(id, size)));
    if lock {
        req = req.if_none_match("*");
    }
    match req.send().await {
        Ok(_) => Outcome::Ok,
        Err(e) if lock && is_412(&e) => Outcome::Refused,
        Err(e) => unknown(e),
    }
}

async fn multipart(c: &Client, key: &str, id: u64, size: usize) -> Outcome {
    let body = body_of(id, size);
    let up = match c
        .create_multipart_upload()
        .bucket(bucket_of(key))
        .key(key)
        .metadata("w", id.to_string())
        .send()
        .await
    {
        Ok(u) => u,
        Err(e) => return unknown(e),
    };
    let upload_id = up.upload_id().unwrap_or_default().to_string();
    let mut parts = Vec::new();
    let part = 5 << 20;
    for (i, chunk) in body.chunks(part).enumerate() {
        let n = i as i32 + 1;
        match c
            .upload_part()
            .bucket(bucket_of(key))
            .key(key)
            .upload_id(&upload_id)
            .part_number(n)
            .body(ByteStream::from(chunk.to_vec()))
            .send()
            .await
        {
            Ok(p) => parts.push(
                CompletedPart::builder()
                    .part_number(n)
                    .e_tag(p.e_tag().unwrap_or_default())
                    .build(),
            ),
            Err(e) => return unknown(e),
        }
    }
    match c
        .complete_multipart_upload()
        .bucket(bucket_of(key))
        .key(key)
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
    {
        Ok(_) => Outcome::Ok,
        Err(e) => unknown(e),
    }
}

async fn get(c: &Client, key: &str) -> Read {
    match c.get_object().bucket(bucket_of(key)).key(key).send().await {
        Ok(o) => {
            let id = o
                .metadata()
                .and_then(|m| m.get("w"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            match o.body.collect().await {
                Ok(b) => Read::Value(id, b.to_vec()),
                Err(e) => Read::Failed(format!("body: {e:?}").chars().take(200).collect()),
            }
        }
        Err(e) => {
            if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) {
                Read::Absent
            } else {
                Read::Failed(format!("{e:?}").chars().take(200).collect())
            }
        }
    }
}

/// The keys of every bucket (ListObjectsV2, paged).
async fn list(c: &Client) -> Option<BTreeSet<String>> {
    let mut keys = BTreeSet::new();
    for b in 0..BUCKETS {
        let bucket = format!("checker-{b}");
        let mut token = None;
        let mut done = false;
        for _ in 0..100 {
            let out = c
                .list_objects_v2()
                .bucket(&bucket)
                .set_continuation_token(token.clone())
                .send()
                .await
                .ok()?;
            for o in out.contents() {
                keys.insert(o.key().unwrap_or_default().to_string());
            }
            token = out.next_continuation_token().map(String::from);
            if token.is_none() {
                done = true;
                break;
            }
        }
        if !done {
            return None;
        }
    }
    Some(keys)
}

/// One client: random operations on the shared keys until `until`.
async fn client_loop(sh: Arc<Shared>, me: usize, seed: u64, until: Duration) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(me as u64));
    while sh.now() < until {
        let node = {
            let up = sh.up.lock().unwrap();
            let live: Vec<usize> = (0..up.len()).filter(|i| up[*i]).collect();
            live[rng.random_range(0..live.len())]
        };
        let c = sh.clients[node].clone();
        let mut key = format!("k{}", rng.random_range(0..KEYS));
        let roll = rng.random_range(0..100);
        let start = sh.now();
        let (kind, outcome) = match roll {
            0..35 => {
                let id = sh.new_id();
                let size = SIZES[rng.random_range(0..SIZES.len())];
                let o = tokio::time::timeout(OP_TIMEOUT, put(&c, &key, id, size, false)).await;
                let parts = 1;
                (Kind::Put { id, size, parts }, o.unwrap_or_else(unknown))
            }
            35..38 => {
                let id = sh.new_id();
                let size = (5 << 20) + 1000;
                let o = tokio::time::timeout(OP_TIMEOUT * 2, multipart(&c, &key, id, size)).await;
                (Kind::Put { id, size, parts: 2 }, o.unwrap_or_else(unknown))
            }
            38..72 => {
                if rng.random_range(0..3) == 0 {
                    key = format!("s{}", rng.random_range(0..STILL_KEYS));
                }
                let r = tokio::time::timeout(OP_TIMEOUT, get(&c, &key))
                    .await
                    .unwrap_or_else(|_| Read::Failed("timeout".into()));
                (Kind::Get(r), Outcome::Ok)
            }
            72..84 => {
                let o = tokio::time::timeout(
                    OP_TIMEOUT,
                    c.delete_object().bucket(bucket_of(&key)).key(&key).send(),
                )
                .await;
                let o = match o {
                    Ok(Ok(_)) => Outcome::Ok,
                    Ok(Err(e)) => unknown(e),
                    Err(e) => unknown(e),
                };
                (Kind::Delete, o)
            }
            84..92 => {
                let l = tokio::time::timeout(OP_TIMEOUT, list(&c))
                    .await
                    .ok()
                    .flatten();
                (Kind::List(l), Outcome::Ok)
            }
            _ => {
                let id = sh.new_id();
                let src = format!("k{}", rng.random_range(0..KEYS));
                let o = tokio::time::timeout(
                    OP_TIMEOUT,
                    c.copy_object()
                        .bucket(bucket_of(&key))
                        .key(&key)
                        .copy_source(format!("{}/{src}", bucket_of(&src)))
                        .metadata_directive(aws_sdk_s3::types::MetadataDirective::Replace)
                        .metadata("w", id.to_string())
                        .send(),
                )
                .await;
                let o = match o {
                    Ok(Ok(_)) => Outcome::Ok,
                    // The source did not exist: nothing written.
                    Ok(Err(e)) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => {
                        Outcome::Refused
                    }
                    Ok(Err(e)) => unknown(e),
                    Err(e) => unknown(e),
                };
                (Kind::Copy { id, src }, o)
            }
        };
        sh.record(Op {
            client: me,
            node,
            key,
            start,
            end: sh.now(),
            kind,
            outcome,
        });
    }
}

/// `If-None-Match: *` writers racing for one fresh key through every
/// live node.
async fn lock_race(sh: Arc<Shared>, key: String, writers: usize) {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let sh = sh.clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let node = {
                let up = sh.up.lock().unwrap();
                let live: Vec<usize> = (0..up.len()).filter(|i| up[*i]).collect();
                live[w % live.len()]
            };
            let c = sh.clients[node].clone();
            let id = sh.new_id();
            let start = sh.now();
            let o = tokio::time::timeout(OP_TIMEOUT * 2, put(&c, &key, id, 200, true))
                .await
                .unwrap_or_else(unknown);
            sh.record(Op {
                client: 100 + w,
                node,
                key,
                start,
                end: sh.now(),
                kind: Kind::Lock { id },
                outcome: o,
            });
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

// ---- Nemesis ----

#[derive(Clone, Copy, Debug)]
enum Fault {
    BitFlip,
    Kill,
    AddZone,
    Isolate,
    Pause,
    RemoveNode,
    Capacity,
    MoveZone,
}

struct Nemesis {
    c: Cluster,
    rng: StdRng,
    /// Nodes in the layout now, with their zones.
    zones: BTreeMap<usize, String>,
    next_zone: usize,
}

impl Nemesis {
    fn id(&self, i: usize) -> String {
        self.c.nodes[i].id()[..16].to_string()
    }

    /// A node of the layout other than node 0 (which runs the CLI).
    fn victim(&mut self) -> Option<usize> {
        let v: Vec<usize> = self.zones.keys().copied().filter(|i| *i != 0).collect();
        (!v.is_empty()).then(|| v[self.rng.random_range(0..v.len())])
    }

    fn apply(&self) {
        let show = self.c.garage_ok(0, &["layout", "show"]);
        let version = show
            .lines()
            .find_map(|l| l.trim().strip_prefix("garage layout apply --version "))
            .unwrap_or_else(|| panic!("no apply line in:\n{show}"))
            .to_string();
        self.c
            .garage_ok(0, &["layout", "apply", "--version", &version]);
    }

    fn assign(&self, i: usize, zone: &str, cap: &str) {
        self.c
            .garage_ok(0, &["layout", "assign", "-z", zone, "-c", cap, &self.id(i)]);
    }

    fn stable(&self) -> bool {
        self.c.garage(0, &["layout", "history"]).status.success()
            && stdout(&self.c.garage(0, &["layout", "history"])).contains("stable state")
    }

    fn block_files(&self, i: usize) -> Vec<PathBuf> {
        self.c.block_files(i)
    }

    /// Runs one fault to its end (faults that last hold for `hold`).
    fn run(&mut self, f: Fault, sh: &Shared, hold: Duration) {
        match f {
            Fault::BitFlip => {
                let Some(i) = self.victim() else { return };
                let files = self.block_files(i);
                if files.len() < 2 {
                    sh.fault(format!("bit flip on node {i}: no block files yet"));
                    return;
                }
                let a = &files[self.rng.random_range(0..files.len())];
                let mut bytes = std::fs::read(a).unwrap_or_default();
                if !bytes.is_empty() {
                    let at = self.rng.random_range(0..bytes.len());
                    bytes[at] ^= 1 << self.rng.random_range(0..8);
                    let _ = std::fs::write(a, &bytes);
                }
                let b = &files[self.rng.random_range(0..files.len())];
                let _ = std::fs::remove_file(b);
                sh.fault(format!(
                    "node {i}: flipped a bit of {} and deleted {}",
                    a.display(),
                    b.display()
                ));
            }
            Fault::Kill => {
                let Some(i) = self.victim() else { return };
                sh.up.lock().unwrap()[i] = false;
                self.c.kill(i);
                sh.fault(format!("kill -9 node {i}"));
                std::thread::sleep(hold);
                self.c.start(i);
                sh.up.lock().unwrap()[i] = true;
                sh.fault(format!("node {i} restarted"));
            }
            Fault::Isolate => {
                let Some(i) = self.victim() else { return };
                self.c.set_isolated(i, true);
                sh.fault(format!("node {i} isolated"));
                std::thread::sleep(hold);
                self.c.set_isolated(i, false);
                sh.fault(format!("node {i} reconnected"));
            }
            Fault::Pause => {
                let Some(i) = self.victim() else { return };
                self.c.nodes[i].proc().signal("STOP");
                sh.fault(format!("node {i} paused (SIGSTOP)"));
                std::thread::sleep(hold.min(Duration::from_secs(5)));
                self.c.nodes[i].proc().signal("CONT");
                sh.fault(format!("node {i} resumed (SIGCONT)"));
            }
            Fault::AddZone => {
                // A node outside the layout joins in a new zone (started
                // if it never ran).
                let Some(i) = (0..self.c.nodes.len()).find(|i| !self.zones.contains_key(i)) else {
                    return;
                };
                if self.c.nodes[i].proc.is_none() {
                    self.c.start(i);
                    sh.up.lock().unwrap()[i] = true;
                }
                let id = self.c.nodes[i].id()[..16].to_string();
                wait_until("node 0 sees the new node", CLUSTER_DEADLINE, || {
                    parse_status(&stdout(&self.c.garage(0, &["status"])))
                        .0
                        .contains(&id)
                });
                let zone = format!("dc{}", self.next_zone);
                self.next_zone += 1;
                self.assign(i, &zone, "1G");
                self.apply();
                self.zones.insert(i, zone.clone());
                sh.fault(format!("layout: node {i} added in new zone {zone}"));
            }
            Fault::RemoveNode => {
                // Keep at least 3 zones for replication 3.
                let zones: BTreeSet<&String> = self.zones.values().collect();
                if self.zones.len() <= 3 || zones.len() <= 3 {
                    sh.fault("layout: removal skipped (3 nodes left)".into());
                    return;
                }
                let Some(i) = self.victim() else { return };
                self.c.garage_ok(0, &["layout", "remove", &self.id(i)]);
                self.apply();
                self.zones.remove(&i);
                sh.fault(format!("layout: node {i} removed"));
            }
            Fault::Capacity => {
                let Some(i) = self.victim() else { return };
                let cap = ["1G", "2G", "500M"][self.rng.random_range(0..3)];
                let zone = self.zones[&i].clone();
                self.assign(i, &zone, cap);
                self.apply();
                sh.fault(format!("layout: node {i} capacity {cap}"));
            }
            Fault::MoveZone => {
                let Some(i) = self.victim() else { return };
                let zone = format!("dc{}", self.next_zone);
                self.next_zone += 1;
                self.assign(i, &zone, "1G");
                self.apply();
                self.zones.insert(i, zone.clone());
                sh.fault(format!("layout: node {i} moved to zone {zone}"));
            }
        }
    }
}

// ---- Checking ----

/// Checks every read of `key` against the writes of `key`: a read may
/// return the value of a write (or the absence left by a delete, or the
/// initial absence) that started before the read ended, unless an
/// acknowledged write ran entirely between that write's end and the read's
/// start (LWW timestamps are taken within a write's span, so such a write
/// always wins). A read's bytes must be exactly those written.
fn check_reads(ops: &[Op], anomalies: &mut Vec<String>) {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    // Bodies of every write id (for copies: the source's writes).
    let mut puts: BTreeMap<u64, (&str, usize)> = BTreeMap::new();
    for op in ops {
        if let Kind::Put { id, size, .. } = op.kind {
            puts.insert(id, (op.key.as_str(), size));
        }
        if let Kind::Lock { id } = op.kind {
            puts.insert(id, (op.key.as_str(), 200));
        }
    }
    for (key, kops) in by_key.iter() {
        // (start, end, value, acked) of every write that may have happened.
        let writes: Vec<(Duration, Duration, Option<u64>, bool)> = kops
            .iter()
            .filter(|o| o.outcome != Outcome::Refused)
            .filter_map(|o| {
                o.written()
                    .ok()
                    .map(|v| (o.start, o.end, v, o.outcome == Outcome::Ok))
            })
            .chain(std::iter::once((
                Duration::ZERO,
                Duration::ZERO,
                None,
                true,
            )))
            .collect();
        for g in kops.iter() {
            let Kind::Get(read) = &g.kind else { continue };
            let value = match read {
                Read::Failed(_) => continue,
                Read::Absent => None,
                Read::Value(id, body) => {
                    // The bytes: those of the write, or for a copy those of
                    // a write to the copy's source.
                    let ok = match puts.get(id) {
                        Some((k, size)) if k == key => *body == body_of(*id, *size),
                        _ => {
                            // A copy tagged `id` (of a copy, maybe): its
                            // bytes are exactly those of some PUT.
                            let copied = kops
                                .iter()
                                .any(|o| matches!(&o.kind, Kind::Copy { id: c, .. } if c == id));
                            let of_put = |w: u64| {
                                puts.get(&w)
                                    .is_some_and(|(_, size)| *body == body_of(w, *size))
                            };
                            copied
                                && match id_in_body(body) {
                                    Some(w) => of_put(w),
                                    // Bodies too short to carry an id.
                                    None => puts.keys().any(|w| of_put(*w)),
                                }
                        }
                    };
                    if !ok {
                        anomalies.push(format!(
                            "{key}: GET at {:?} by client {} through node {} returned {} bytes for write {id} that are not the bytes written",
                            g.start, g.client, g.node, body.len()
                        ));
                        continue;
                    }
                    Some(*id)
                }
            };
            let possible = writes.iter().any(|(ws, we, wv, _)| {
                *wv == value
                    && *ws <= g.end
                    && !writes
                        .iter()
                        .any(|(os, oe, _, acked)| *acked && *os > *we && *oe < g.start)
            });
            if !possible {
                anomalies.push(format!(
                    "{key}: GET [{:?}..{:?}] by client {} through node {} returned {} which an acknowledged later write had replaced (or which was never written)",
                    g.start,
                    g.end,
                    g.client,
                    g.node,
                    match value {
                        Some(v) => format!("write {v}"),
                        None => "\"absent\"".into(),
                    }
                ));
            }
        }
    }
}

/// Among concurrent `If-None-Match: *` writers of a fresh key, at most one
/// succeeds, and exactly one when none failed.
fn check_locks(ops: &[Op], anomalies: &mut Vec<String>) {
    let mut races: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| matches!(o.kind, Kind::Lock { .. })) {
        races.entry(o.key.as_str()).or_default().push(o);
    }
    for (key, r) in races {
        let won = r.iter().filter(|o| o.outcome == Outcome::Ok).count();
        let unknown = r
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
            .count();
        if won > 1 || (won == 0 && unknown == 0) {
            anomalies.push(format!(
                "{key}: {won} of {} If-None-Match writers won ({unknown} unknown)",
                r.len()
            ));
        }
    }
}

fn summary(h: &History) -> String {
    let mut counts: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for o in &h.ops {
        let k = match &o.kind {
            Kind::Put { parts: 1, .. } => "put",
            Kind::Put { .. } => "multipart put",
            Kind::Lock { .. } => "if-none-match put",
            Kind::Copy { .. } => "copy",
            Kind::Delete => "delete",
            Kind::Get(_) => "get",
            Kind::List(_) => "list",
        };
        let e = counts.entry(k).or_default();
        let failed = matches!(
            (&o.kind, &o.outcome),
            (Kind::Get(Read::Failed(_)), _) | (Kind::List(None), _) | (_, Outcome::Unknown(_))
        );
        let refused = o.outcome == Outcome::Refused;
        if failed {
            e.1 += 1;
        } else if refused {
            e.2 += 1;
        } else {
            e.0 += 1;
        }
    }
    let mut s = format!("{} operations:\n", h.ops.len());
    for (k, (ok, failed, refused)) in counts {
        s.push_str(&format!(
            "  {k:<18} {ok:>5} ok  {failed:>4} failed/unknown  {refused:>4} refused\n"
        ));
    }
    s.push_str(&format!("{} faults injected:\n", h.faults.len()));
    for f in &h.faults {
        s.push_str(&format!("  {f}\n"));
    }
    s
}

#[test]
fn checker() {
    let seed = env_u64("CHECKER_SEED", 14);
    let secs = env_u64("CHECKER_SECS", 50);
    let n_clients = env_u64("CHECKER_CLIENTS", 4) as usize;
    let long = std::env::var("CHECKER_LONG").is_ok_and(|v| v == "1");
    eprintln!("checker: seed {seed}, {secs} s, {n_clients} clients, long = {long}");

    let mut c = Cluster::new(STORAGE + 1, 3);
    for (k, v) in [
        ("GARAGE_BLOCK_DELETE_DELAY_SECS", "5"),
        ("GARAGE_TABLE_GC_DELAY_SECS", "10"),
        ("GARAGE_TABLE_SYNC_INTERVAL_SECS", "30"),
    ] {
        c.env.push((k.into(), v.into()));
    }
    c.start_first(STORAGE);
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        parse_status(&stdout(&c.garage(0, &["status"]))).0.len() == STORAGE
    });
    // Four nodes in three zones.
    let zones = ["dc1", "dc2", "dc3", "dc1"];
    c.apply_layout(&zones, "1G");
    let key = make_key(&c, "checker");
    for b in 0..BUCKETS {
        let bucket = format!("checker-{b}");
        c.garage_ok(0, &["bucket", "create", &bucket]);
        c.garage_ok(
            0,
            &[
                "bucket", "allow", "--read", "--write", &bucket, "--key", &key.0,
            ],
        );
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let clients: Vec<Client> = {
        let _g = rt.enter();
        c.nodes.iter().map(|n| client_of(n.ip, &key)).collect()
    };
    let mut up = vec![true; STORAGE];
    up.push(false);
    let sh = Arc::new(Shared {
        t0: Instant::now(),
        clients,
        up: Mutex::new(up),
        history: Mutex::new(History::default()),
        next_id: Mutex::new(0),
    });
    let until = Duration::from_secs(secs);

    // The keys at rest, written before any fault.
    rt.block_on(async {
        for k in 0..STILL_KEYS {
            let node = k % STORAGE;
            let id = sh.new_id();
            let size = SIZES[k % SIZES.len()];
            let key = format!("s{k}");
            let start = sh.now();
            let o = tokio::time::timeout(OP_TIMEOUT, put(&sh.clients[node], &key, id, size, false))
                .await
                .unwrap_or_else(unknown);
            assert_eq!(o, Outcome::Ok, "writing {key} before any fault");
            sh.record(Op {
                client: 998,
                node,
                key,
                start,
                end: sh.now(),
                kind: Kind::Put { id, size, parts: 1 },
                outcome: o,
            });
        }
    });
    let until = sh.now() + until;

    // The workload.
    let mut handles = Vec::new();
    for me in 0..n_clients {
        handles.push(rt.spawn(client_loop(sh.clone(), me, seed, until)));
    }

    // The nemesis, on this thread; lock races between its faults.
    let mut nem = Nemesis {
        c,
        rng: StdRng::seed_from_u64(seed),
        zones: zones
            .iter()
            .enumerate()
            .map(|(i, z)| (i, z.to_string()))
            .collect(),
        next_zone: 4,
    };
    let schedule: Vec<Fault> = if long {
        Vec::new()
    } else {
        // The short run: every kind of fault the issue asks for in CI.
        vec![
            Fault::BitFlip,
            Fault::Kill,
            Fault::AddZone,
            Fault::Isolate,
            Fault::Pause,
            Fault::RemoveNode,
        ]
    };
    let all = [
        Fault::BitFlip,
        Fault::Kill,
        Fault::AddZone,
        Fault::Isolate,
        Fault::Pause,
        Fault::RemoveNode,
        Fault::Capacity,
        Fault::MoveZone,
    ];
    let hold = Duration::from_secs(4);
    let mut step = 0usize;
    let mut locks = 0usize;
    while sh.now() + hold < until {
        let f = if long {
            all[nem.rng.random_range(0..all.len())]
        } else if step < schedule.len() {
            schedule[step]
        } else {
            break;
        };
        step += 1;
        // Spread the short schedule over the workload.
        let at = if long {
            sh.now() + Duration::from_secs(nem.rng.random_range(1..6))
        } else {
            until * step as u32 / (schedule.len() as u32 + 1)
        };
        while sh.now() < at {
            std::thread::sleep(Duration::from_millis(100));
        }
        let race = rt.spawn(lock_race(sh.clone(), format!("lock-{locks}"), 5));
        locks += 1;
        nem.run(f, &sh, hold);
        let _ = rt.block_on(race);
    }
    for h in handles {
        rt.block_on(h).unwrap();
    }
    let workload_end = sh.now();

    // Heal, then let the cluster converge.
    for i in 0..nem.c.nodes.len() {
        nem.c.set_isolated(i, false);
        if nem.c.nodes[i].proc.is_some() {
            nem.c.nodes[i].proc().signal("CONT");
        }
    }
    let t = wait_until("the layout is stable", Duration::from_secs(240), || {
        nem.stable()
    });
    eprintln!("checker: layout stable {t:?} after the workload");
    let storage: Vec<usize> = nem.zones.keys().copied().collect();
    for i in &storage {
        nem.c.garage_ok(*i, &["repair", "--yes", "tables"]);
        nem.c.garage_ok(*i, &["repair", "--yes", "blocks"]);
        nem.c.garage_ok(*i, &["repair", "--yes", "scrub", "start"]);
    }

    // Final reads: every key through every storage node, until they agree.
    let mut anomalies = Vec::new();
    let keys: Vec<String> = (0..KEYS)
        .map(|k| format!("k{k}"))
        .chain((0..STILL_KEYS).map(|k| format!("s{k}")))
        .chain((0..locks).map(|l| format!("lock-{l}")))
        .collect();
    let mut last = BTreeMap::new();
    let converged = {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut all_agree = true;
            last.clear();
            for k in &keys {
                let mut seen: Vec<Read> = Vec::new();
                for i in &storage {
                    let start = sh.now();
                    let r = rt.block_on(async {
                        tokio::time::timeout(OP_TIMEOUT, get(&sh.clients[*i], k))
                            .await
                            .unwrap_or_else(|_| Read::Failed("timeout".into()))
                    });
                    sh.record(Op {
                        client: 999,
                        node: *i,
                        key: k.clone(),
                        start,
                        end: sh.now(),
                        kind: Kind::Get(r.clone()),
                        outcome: Outcome::Ok,
                    });
                    seen.push(r);
                }
                if seen.iter().any(|r| matches!(r, Read::Failed(_)))
                    || seen.windows(2).any(|w| w[0] != w[1])
                {
                    all_agree = false;
                }
                last.insert(k.clone(), seen[0].clone());
            }
            if all_agree {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    };
    if !converged {
        let failing: Vec<(&String, &Read)> = last
            .iter()
            .filter(|(_, r)| matches!(r, Read::Failed(_)))
            .collect();
        anomalies.push(format!(
            "replicas did not converge within 120 s; {} keys unreadable after healing, e.g. {:?}",
            failing.len(),
            failing.first()
        ));
    }
    // Listings equal the final state, through every storage node.
    let present: BTreeSet<String> = last
        .iter()
        .filter(|(_, r)| matches!(r, Read::Value(..)))
        .map(|(k, _)| k.clone())
        .collect();
    for i in &storage {
        let l = rt.block_on(list(&sh.clients[*i]));
        if l.as_ref() != Some(&present) {
            anomalies.push(format!(
                "listing through node {i} is {l:?}, the objects are {present:?}"
            ));
        }
    }
    // Blocks converge: resync queues drain and every stored block file
    // is intact (scrub moved corrupted ones aside, resync fetched them).
    let intact = |nem: &Nemesis| -> Vec<String> {
        let mut bad = Vec::new();
        for i in &storage {
            let store = garage_block::BlockStore::new(
                garage_block::dirs::DataDirs::single(&nem.c.nodes[*i].dir.join("data")),
                false,
            );
            for f in nem.block_files(*i) {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                let Some(h) = hex::decode(&name[..64])
                    .ok()
                    .and_then(|b| garage_util::data::Hash::try_from_slice(&b))
                else {
                    continue;
                };
                let good = matches!(store.read(&h), Ok(Some(b)) if b.verify_and_decode(&h).is_ok());
                if !good {
                    bad.push(format!("node {i}: {}", f.display()));
                }
            }
        }
        bad
    };
    let queues_empty = |nem: &Nemesis| {
        storage.iter().all(|i| {
            stdout(&nem.c.garage(*i, &["stats"]))
                .lines()
                .any(|l| l.trim() == "resync queue length: 0")
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !(queues_empty(&nem) && intact(&nem).is_empty()) {
        std::thread::sleep(Duration::from_secs(2));
    }
    let bad = intact(&nem);
    if !bad.is_empty() {
        anomalies.push(format!("corrupted block files left after scrub: {bad:?}"));
    }

    let h = sh.history.lock().unwrap();
    check_reads(&h.ops, &mut anomalies);
    check_locks(&h.ops, &mut anomalies);
    eprintln!(
        "checker: seed {seed}: workload {:.0} s\n{}anomalies: {}",
        workload_end.as_secs_f64(),
        summary(&h),
        anomalies.len()
    );
    for a in anomalies.iter().take(50) {
        eprintln!("  ANOMALY {a}");
    }
    if let Ok(path) = std::env::var("CHECKER_HISTORY") {
        let mut out = String::new();
        for o in &h.ops {
            out.push_str(&format!("{o:?}\n"));
        }
        std::fs::write(path, out).unwrap();
    }
    let gets = h
        .ops
        .iter()
        .filter(|o| matches!(o.kind, Kind::Get(Read::Value(..))))
        .count();
    assert!(
        gets > 20,
        "too few successful reads ({gets}) to check anything"
    );
    assert!(anomalies.is_empty(), "{} anomalies", anomalies.len());
}
