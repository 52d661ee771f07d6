//! Scale benchmark (issue 29): the reference system's own ingest benchmark
//! (batches of 8 192 objects of 16 B sent concurrently), then, on the
//! filled bucket, a full ListObjectsV2 walk, delimiter listings at points
//! across the key space, GET and HEAD of random keys, a DeleteObjects
//! sweep of 10 % of the keys, the restart time of node 1, and the metadata
//! space before and after the deletes and the GC.
//!
//! It runs against a cluster started by `script/cluster3.sh DIR` (either
//! system: it only speaks S3, reads `DIR/pids` for the resident memory of
//! each node and `DIR/nI/meta` for the metadata bytes, and restarts node 1
//! with `BIN -c DIR/n1/garage.toml server`). `script/bench-scale.sh` starts
//! the clusters and runs it; see doc/benchmarks.md.
//!
//! Keys are `aa/bb/hhhhhhhhhhhhhhhh`: `h` is a bijective mix of the
//! object's index (so any key can be regenerated, and keys arrive in
//! random order as in the reference benchmark), `aa` and `bb` its top two
//! bytes (256 directories of 256 subdirectories).
//!
//! Every request loop is bounded in count; every wait has a deadline.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, RequestChecksumCalculation};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use aws_sdk_s3::Client;
use clap::Parser;
use futures::stream::{self, StreamExt};

#[derive(Parser, Debug, Clone)]
#[command(about = "Scale benchmark against a cluster started by script/cluster3.sh")]
struct Args {
    /// The cluster's directory (script/cluster3.sh DIR): pids, nI/meta.
    #[arg(long)]
    dir: PathBuf,
    /// The binary that runs the cluster (to restart node 1).
    #[arg(long)]
    bin: PathBuf,
    #[arg(long, default_value = "http://127.0.0.1:3910")]
    endpoint: String,
    #[arg(long, env = "AWS_ACCESS_KEY_ID")]
    key: String,
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY")]
    secret: String,
    #[arg(long, default_value = "garage")]
    region: String,
    #[arg(long, default_value = "scale")]
    bucket: String,
    /// Objects to ingest.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Objects per batch (each batch sent concurrently, then timed).
    #[arg(long, default_value_t = 8192)]
    batch: u64,
    /// PUTs in flight within a batch.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Bytes per object.
    #[arg(long, default_value_t = 16)]
    size: usize,
    /// Random GETs and HEADs (each), one at a time.
    #[arg(long, default_value_t = 1000)]
    reads: usize,
    /// Seconds to wait after the delete sweep before measuring the space
    /// again (start the cluster with a short GARAGE_TABLE_GC_DELAY_SECS).
    #[arg(long, default_value_t = 90)]
    gc_wait: u64,
    /// Only the ingest (no listings, reads, deletes, restart).
    #[arg(long)]
    ingest_only: bool,
    /// After the ingest, a GET load instead of the rest: `--gets` GETs of
    /// random keys at each of these concurrencies (comma-separated), with
    /// objects per second, time to first byte and whole-GET latency.
    #[arg(long, value_delimiter = ',')]
    get_load: Vec<usize>,
    /// GETs per concurrency level of `--get-load`.
    #[arg(long, default_value_t = 2000)]
    gets: usize,
}

/// A bijection of u64 (splitmix64's finaliser): keys in random order.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key_of(i: u64) -> String {
    let h = mix(i);
    format!("{:02x}/{:02x}/{:016x}", h >> 56, (h >> 48) & 0xff, h)
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The cluster's nodes: pid and metadata directory of each.
struct Nodes {
    dir: PathBuf,
    pids: Vec<u32>,
}

impl Nodes {
    fn read(dir: &Path) -> Self {
        let pids = std::fs::read_to_string(dir.join("pids"))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join("pids").display()))
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect::<Vec<u32>>();
        assert!(!pids.is_empty(), "no pid in {}/pids", dir.display());
        Nodes {
            dir: dir.to_path_buf(),
            pids,
        }
    }

    fn write_pids(&self) {
        let text: String = self.pids.iter().map(|p| format!("{p}\n")).collect();
        std::fs::write(self.dir.join("pids"), text).expect("write pids");
    }

    /// Resident memory of each node, MB.
    fn rss_mb(&self) -> Vec<f64> {
        self.status_mb("VmRSS:")
    }

    /// The part of it that is the process's own (not mapped files), MB.
    fn anon_mb(&self) -> Vec<f64> {
        self.status_mb("RssAnon:")
    }

    fn status_mb(&self, field: &str) -> Vec<f64> {
        self.pids
            .iter()
            .map(|p| {
                let status =
                    std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
                status
                    .lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<f64>().ok())
                    .map(|kb| kb / 1024.0)
                    .unwrap_or(f64::NAN)
            })
            .collect()
    }

    /// Bytes on disk (allocated blocks) under each node's metadata dir.
    fn meta_bytes(&self) -> Vec<u64> {
        (1..=self.pids.len())
            .map(|i| disk_usage(&self.dir.join(format!("n{i}/meta"))))
            .collect()
    }
}

/// The bytes of metadata under `p`: each file's allocated blocks, but for
/// LMDB's `data.mdb` the pages its last transaction uses (with
/// `lmdb_write_map` the file is preallocated ahead of them).
fn disk_usage(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| disk_usage(&e.path())).sum())
            .unwrap_or(0)
    } else if p.file_name() == Some("data.mdb".as_ref()) {
        let blocks = meta.blocks() * 512;
        lmdb_pages_used(p).map_or(blocks, |u| u.min(blocks))
    } else {
        meta.blocks() * 512
    }
}

/// The bytes in use in an LMDB data file (64-bit layout): from the meta
/// page (of the two at the file's start) with the larger transaction id,
/// its last page number and its page size.
fn lmdb_pages_used(p: &Path) -> Option<u64> {
    use std::io::Read;
    let mut head = vec![0u8; 2 * 4096];
    std::fs::File::open(p).ok()?.read_exact(&mut head).ok()?;
    let u32_at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap());
    // Page header 16 B; meta: magic, version, address, map size, two
    // database records of 48 B (the first one's pad holds the page
    // size), last page, transaction id.
    const MAGIC: u32 = 0xBEEF_C0DE;
    if u32_at(16) != MAGIC {
        return None;
    }
    let psize = u64::from(u32_at(40));
    if !(512..=65536).contains(&psize) {
        return None;
    }
    let meta = |base: usize| (u64_at(base + 144), u64_at(base + 136));
    let (t0, l0) = meta(0);
    let (t1, l1) = meta(psize as usize);
    let last = if t1 > t0 { l1 } else { l0 };
    Some((last + 1) * psize)
}

fn fmt_list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" / ")
}

fn client(args: &Args) -> Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(args.region.clone()))
        .credentials_provider(Credentials::new(
            &args.key,
            &args.secret,
            None,
            None,
            "bench",
        ))
        .endpoint_url(&args.endpoint)
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
        .build();
    Client::from_conf(conf)
}

/// One PUT, tried at most 3 times; false if all failed. Bodies of 4 KiB
/// and more are pseudo-random bytes drawn from the object's index, as
/// media files are: no two objects share a data block (both systems
/// deduplicate blocks by content) and no block compresses.
async fn put(s3: &Client, bucket: &str, i: u64, body: &[u8]) -> bool {
    let mut body = body.to_vec();
    if body.len() >= 4096 {
        for (n, word) in body.chunks_mut(8).enumerate() {
            let r = mix(i.wrapping_mul(0x1_0000_0001) ^ n as u64).to_le_bytes();
            word.copy_from_slice(&r[..word.len()]);
        }
    }
    for _ in 0..3 {
        let r = s3
            .put_object()
            .bucket(bucket)
            .key(key_of(i))
            .body(ByteStream::from(body.clone()))
            .send()
            .await;
        if r.is_ok() {
            return true;
        }
    }
    false
}

async fn ingest(args: &Args, s3: &Client, nodes: &Nodes) -> Vec<f64> {
    let body = vec![b'x'; args.size];
    let mut times = vec![];
    let start = Instant::now();
    println!(
        "## ingest: {} objects of {} B, batches of {}, {} in flight",
        args.objects, args.size, args.batch, args.concurrency
    );
    println!(
        "batch\tobjects\tsecs\tobj/s\tRSS MB (per node)\tanon MB\tmeta B/object (per node)\tfailed"
    );
    let nbatches = args.objects.div_ceil(args.batch);
    for b in 0..nbatches {
        let lo = b * args.batch;
        let hi = ((b + 1) * args.batch).min(args.objects);
        let t = Instant::now();
        let failed = stream::iter(lo..hi)
            .map(|i| put(s3, &args.bucket, i, &body))
            .buffer_unordered(args.concurrency)
            .filter(|ok| futures::future::ready(!ok))
            .count()
            .await;
        let secs = t.elapsed().as_secs_f64();
        times.push(secs);
        let rss: Vec<String> = nodes.rss_mb().iter().map(|m| format!("{m:.0}")).collect();
        let anon: Vec<String> = nodes.anon_mb().iter().map(|m| format!("{m:.0}")).collect();
        let per: Vec<String> = nodes
            .meta_bytes()
            .iter()
            .map(|b| format!("{:.0}", *b as f64 / hi as f64))
            .collect();
        println!(
            "{}\t{}\t{:.2}\t{:.0}\t{}\t{}\t{}\t{}",
            b + 1,
            hi,
            secs,
            (hi - lo) as f64 / secs,
            fmt_list(&rss),
            fmt_list(&anon),
            fmt_list(&per),
            failed
        );
        assert!(
            failed == 0,
            "{failed} PUTs failed 3 times in batch {}",
            b + 1
        );
    }
    let total = start.elapsed().as_secs_f64();
    // Full batches only (a shorter last batch would flatter the end).
    let full = &times[..(args.objects / args.batch).max(1) as usize];
    let k = (full.len() / 10).max(1);
    let first: f64 = full[..k].iter().sum::<f64>() / k as f64;
    let last: f64 = full[full.len() - k..].iter().sum::<f64>() / k as f64;
    println!(
        "ingest: {:.0} objects/s over the run ({total:.0} s); batch time, mean of the first {k} full batches -> last {k}: {first:.2} s -> {last:.2} s (x {:.2})",
        args.objects as f64 / total,
        last / first
    );
    times
}

/// A full ListObjectsV2 walk, pages of 1000: keys, keys/s, page times.
async fn walk(s3: &Client, bucket: &str, label: &str) -> u64 {
    let mut token: Option<String> = None;
    let mut pages = vec![];
    let mut keys = 0u64;
    let start = Instant::now();
    // Bounded: at most 100 000 pages (100 M keys).
    for _ in 0..100_000 {
        let t = Instant::now();
        let r = s3
            .list_objects_v2()
            .bucket(bucket)
            .max_keys(1000)
            .set_continuation_token(token.take())
            .send()
            .await
            .expect("ListObjectsV2");
        pages.push(ms(t.elapsed()));
        keys += r.contents().len() as u64;
        match r.next_continuation_token() {
            Some(t) if r.is_truncated() == Some(true) => token = Some(t.to_string()),
            _ => break,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let k = (pages.len() / 10).max(1);
    let first: f64 = pages[..k].iter().sum::<f64>() / k as f64;
    let last: f64 = pages[pages.len() - k..].iter().sum::<f64>() / k as f64;
    let mut sorted = pages.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "walk ({label}): {keys} keys in {} pages, {secs:.1} s, {:.0} keys/s; ms per page median {:.1}, p99 {:.1}; first 10 % of pages {first:.1} ms, last 10 % {last:.1} ms",
        pages.len(),
        keys as f64 / secs,
        pct(&sorted, 0.5),
        pct(&sorted, 0.99)
    );
    keys
}

/// Delimiter listings at points across the key space.
async fn delimiter_listings(s3: &Client, bucket: &str) {
    let mut top = vec![];
    let mut mid = vec![];
    let mut leaf = vec![];
    // The top level (256 common prefixes, every key skipped over), three times.
    for _ in 0..3 {
        let t = Instant::now();
        let r = s3
            .list_objects_v2()
            .bucket(bucket)
            .delimiter("/")
            .max_keys(1000)
            .send()
            .await
            .expect("list");
        top.push(ms(t.elapsed()));
        assert_eq!(r.common_prefixes().len(), 256, "top-level common prefixes");
    }
    // 16 directories spread over the key space: their 256 subdirectories,
    // and the first page of keys in one subdirectory.
    for j in 0..16u64 {
        let a = j * 16 + 7;
        let t = Instant::now();
        let r = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(format!("{a:02x}/"))
            .delimiter("/")
            .max_keys(1000)
            .send()
            .await
            .expect("list");
        mid.push(ms(t.elapsed()));
        assert!(
            !r.common_prefixes().is_empty(),
            "no common prefix under {a:02x}/"
        );
        let t = Instant::now();
        s3.list_objects_v2()
            .bucket(bucket)
            .prefix(format!("{a:02x}/80/"))
            .delimiter("/")
            .max_keys(1000)
            .send()
            .await
            .expect("list");
        leaf.push(ms(t.elapsed()));
    }
    for (name, v) in [
        ("prefix \"\" (256 common prefixes over all keys)", &mut top),
        ("prefix \"aa/\" (256 common prefixes), 16 points", &mut mid),
        ("prefix \"aa/80/\" (keys), 16 points", &mut leaf),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "delimiter listing, {name}: ms per page median {:.1}, max {:.1}",
            pct(v, 0.5),
            pct(v, 1.0)
        );
    }
}

/// The GET of object `i` (its headers; the body is read by the caller).
async fn get_object(
    s3: &Client,
    bucket: &str,
    i: u64,
) -> aws_sdk_s3::operation::get_object::GetObjectOutput {
    s3.get_object()
        .bucket(bucket)
        .key(key_of(i))
        .send()
        .await
        .expect("GetObject")
}

async fn random_reads(args: &Args, s3: &Client, present: impl Fn(u64) -> bool) {
    let mut get = vec![];
    let mut head = vec![];
    let mut i = 0u64;
    for n in 0..args.reads {
        // Keys spread over the whole ingest (a mix of the read's number).
        i = mix(i ^ n as u64) % args.objects;
        if !present(i) {
            continue;
        }
        let t = Instant::now();
        let r = get_object(s3, &args.bucket, i).await;
        let body = r.body.collect().await.expect("GET body").into_bytes();
        get.push(ms(t.elapsed()));
        assert_eq!(body.len(), args.size, "GET {}", key_of(i));
        let t = Instant::now();
        s3.head_object()
            .bucket(&args.bucket)
            .key(key_of(i))
            .send()
            .await
            .expect("HeadObject");
        head.push(ms(t.elapsed()));
    }
    for (name, v) in [("GET", &mut get), ("HEAD", &mut head)] {
        v.sort_by(f64::total_cmp);
        println!(
            "{name} of random keys ({}): median {:.2} ms, p99 {:.2} ms",
            v.len(),
            pct(v, 0.5),
            pct(v, 0.99)
        );
    }
}

/// `args.gets` GETs of random keys, `concurrency` in flight: objects/s,
/// MiB/s, and per GET the time to its first body byte and to its end.
async fn get_load(args: &Args, s3: &Client, concurrency: usize) {
    let start = Instant::now();
    let times: Vec<(f64, f64)> = stream::iter(0..args.gets as u64)
        .map(|n| async move {
            let i = mix(n ^ 0x5eed) % args.objects;
            let t = Instant::now();
            let mut r = get_object(s3, &args.bucket, i).await;
            let mut first = None;
            let mut len = 0;
            while let Some(chunk) = r.body.next().await {
                let chunk = chunk.expect("GET body");
                if first.is_none() && !chunk.is_empty() {
                    first = Some(ms(t.elapsed()));
                }
                len += chunk.len();
            }
            assert_eq!(len, args.size, "GET {}", key_of(i));
            (first.unwrap_or(f64::NAN), ms(t.elapsed()))
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let secs = start.elapsed().as_secs_f64();
    let mut ttfb: Vec<f64> = times.iter().map(|t| t.0).collect();
    let mut whole: Vec<f64> = times.iter().map(|t| t.1).collect();
    ttfb.sort_by(f64::total_cmp);
    whole.sort_by(f64::total_cmp);
    println!(
        "GET load, {} B objects, {concurrency} in flight: {} GETs in {secs:.1} s, {:.0} objects/s, {:.1} MiB/s; first byte median {:.2} ms, p90 {:.2}; whole GET median {:.2} ms, p90 {:.2}, p99 {:.2}",
        args.size,
        times.len(),
        times.len() as f64 / secs,
        (times.len() * args.size) as f64 / secs / (1 << 20) as f64,
        pct(&ttfb, 0.5),
        pct(&ttfb, 0.9),
        pct(&whole, 0.5),
        pct(&whole, 0.9),
        pct(&whole, 0.99)
    );
}

/// Deletes every tenth key with DeleteObjects (1000 keys per call, 4 calls
/// in flight).
async fn delete_sweep(args: &Args, s3: &Client) -> u64 {
    let doomed: Vec<u64> = (0..args.objects).filter(|i| i % 10 == 0).collect();
    let start = Instant::now();
    let chunks: Vec<Vec<u64>> = doomed.chunks(1000).map(|c| c.to_vec()).collect();
    let deleted: usize = stream::iter(chunks)
        .map(|chunk| async move {
            let objects: Vec<ObjectIdentifier> = chunk
                .iter()
                .map(|i| {
                    ObjectIdentifier::builder()
                        .key(key_of(*i))
                        .build()
                        .expect("identifier")
                })
                .collect();
            let del = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .expect("delete");
            let r = s3
                .delete_objects()
                .bucket(&args.bucket)
                .delete(del)
                .send()
                .await
                .expect("DeleteObjects");
            assert!(
                r.errors().is_empty(),
                "DeleteObjects errors: {:?}",
                r.errors()
            );
            chunk.len()
        })
        .buffer_unordered(4)
        .fold(0, |a, n| async move { a + n })
        .await;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "DeleteObjects sweep: {deleted} keys in {secs:.1} s, {:.0} keys/s",
        deleted as f64 / secs
    );
    deleted as u64
}

/// Stops node 1 (SIGTERM), starts it again, and times until it answers a
/// HEAD of a present key.
async fn restart(args: &Args, s3: &Client, nodes: &mut Nodes) {
    let pid = nodes.pids[0];
    let t = Instant::now();
    let status = Command::new("kill")
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill {pid}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            Instant::now() < deadline,
            "node 1 (pid {pid}) did not stop within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stop = t.elapsed();
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(args.dir.join("n1/log"))
        .expect("n1/log");
    let t = Instant::now();
    // The restarted node outlives this program: script/bench-scale.sh
    // stops it by the pid written below, as it does the others.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(&args.bin)
        .arg("-c")
        .arg(args.dir.join("n1/garage.toml"))
        .arg("server")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start node 1");
    nodes.pids[0] = child.id();
    nodes.write_pids();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let r = s3
            .head_object()
            .bucket(&args.bucket)
            .key(key_of(1))
            .send()
            .await;
        if r.is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 1 did not serve a HEAD within 600 s of its restart"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "restart of node 1: stopped in {:.2} s, serving S3 again {:.2} s after start (RSS {:.0} MB)",
        stop.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        nodes.rss_mb()[0]
    );
}

fn print_space(label: &str, nodes: &Nodes) -> Vec<u64> {
    let b = nodes.meta_bytes();
    let mb: Vec<String> = b
        .iter()
        .map(|x| format!("{:.1}", *x as f64 / 1e6))
        .collect();
    println!("metadata on disk {label}: {} MB (per node)", fmt_list(&mb));
    b
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(args));
}

async fn run(args: Args) {
    let mut nodes = Nodes::read(&args.dir);
    let s3 = client(&args);
    // The layout may still be settling: bounded retries.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match s3.create_bucket().bucket(&args.bucket).send().await {
            Ok(_) => break,
            Err(e) => {
                let code = e
                    .as_service_error()
                    .and_then(|e| e.meta().code().map(str::to_string));
                if matches!(code.as_deref(), Some("BucketAlreadyOwnedByYou")) {
                    break;
                }
                assert!(Instant::now() < deadline, "CreateBucket: {e:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    ingest(&args, &s3, &nodes).await;
    if !args.get_load.is_empty() {
        for c in &args.get_load {
            get_load(&args, &s3, *c).await;
        }
        return;
    }
    if args.ingest_only {
        return;
    }
    let n = walk(&s3, &args.bucket, "after the ingest").await;
    assert_eq!(n, args.objects, "the walk lists every ingested key");
    delimiter_listings(&s3, &args.bucket).await;
    random_reads(&args, &s3, |_| true).await;
    let before = print_space("before the deletes", &nodes);
    let deleted = delete_sweep(&args, &s3).await;
    print_space("just after the deletes", &nodes);
    let n = walk(&s3, &args.bucket, "after the deletes").await;
    assert_eq!(n, args.objects - deleted, "the walk lists every key left");
    restart(&args, &s3, &mut nodes).await;
    random_reads(&args, &s3, |i| i % 10 != 0).await;
    if args.gc_wait > 0 {
        println!("waiting {} s for the GC", args.gc_wait);
        tokio::time::sleep(Duration::from_secs(args.gc_wait)).await;
    }
    let after = print_space(&format!("{} s after the deletes", args.gc_wait), &nodes);
    let given: Vec<String> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| format!("{:.1}", (*b as f64 - *a as f64) / 1e6))
        .collect();
    println!("space given back: {} MB (per node)", fmt_list(&given));
}
