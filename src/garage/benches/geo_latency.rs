//! Geo latency: how many inter-node round trips each S3 call costs.
//!
//! Starts real `garage server` processes (3 nodes, then 5; each node its
//! own zone, replication 3) whose node-to-node traffic crosses the test
//! harness's delay proxy, and sends one request at a time to node 1 with
//! the aws-sdk-s3 client (and one HTTP client for the website endpoint),
//! first with no added delay, then with every inter-node byte delayed to
//! make the configured RTT. For each call:
//!
//! rounds = (mean latency with delay − mean latency without) / RTT
//!
//! ```sh
//! cargo bench -p garage --bench geo_latency
//! GARAGE_BENCH_RTT_MS=100 GARAGE_BENCH_JITTER_MS=10 GARAGE_BENCH_NODES=3 \
//!   GARAGE_BENCH_REPEAT=30 cargo bench -p garage --bench geo_latency
//! ```
//!
//! Every request loop is bounded in count; every wait has a deadline. The
//! client is on the same machine as node 1 (no delay between them), as a
//! client next to its site's gateway.

#[path = "../tests/e2e/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::make_key;

const WEB_PORT: u16 = 3902;
const ROOT_DOMAIN: &str = "web.bench";
const BUCKET: &str = "geo-bench";
/// A bucket with object lock (so versioning) and a default GOVERNANCE
/// retention: every write there makes a locked version.
const LOCKED: &str = "geo-bench-locked";
/// A bucket with a policy (public reads, a deny on another prefix): its
/// requests evaluate the policy, anonymous ones included.
const PUBLIC: &str = "geo-bench-public";
const MIB: usize = 1 << 20;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
        Err(_) => default,
    }
}

struct Settings {
    rtt: Duration,
    /// The RTT varies by up to this much either way (each direction by
    /// half of it).
    jitter: Duration,
    repeat: usize,
}

/// The calls measured, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Call {
    ListBuckets,
    ListObjectsV2,
    PutSmall,
    GetSmall,
    HeadSmall,
    DeleteObject,
    PutBig,
    GetBig,
    GetHuge,
    HeadBig,
    WebsiteGet,
    PutLocked,
    GetLocked,
    DeleteLocked,
    GetPolicy,
    GetAnonymous,
    PutBigIa,
    GetBigIa,
}

impl Call {
    const ALL: [Call; 18] = [
        Call::ListBuckets,
        Call::ListObjectsV2,
        Call::PutSmall,
        Call::GetSmall,
        Call::HeadSmall,
        Call::DeleteObject,
        Call::PutBig,
        Call::GetBig,
        Call::GetHuge,
        Call::HeadBig,
        Call::WebsiteGet,
        Call::PutLocked,
        Call::GetLocked,
        Call::DeleteLocked,
        Call::GetPolicy,
        Call::GetAnonymous,
        Call::PutBigIa,
        Call::GetBigIa,
    ];

    fn name(self) -> &'static str {
        match self {
            Call::ListBuckets => "ListBuckets",
            Call::ListObjectsV2 => "ListObjectsV2",
            Call::PutSmall => "PutObject 16 B",
            Call::GetSmall => "GetObject 16 B",
            Call::HeadSmall => "HeadObject 16 B",
            Call::DeleteObject => "DeleteObject",
            Call::PutBig => "PutObject 1 MiB",
            Call::GetBig => "GetObject 1 MiB",
            Call::GetHuge => "GetObject 10 MiB (10 blocks)",
            Call::HeadBig => "HeadObject 1 MiB",
            Call::WebsiteGet => "website GET (index)",
            Call::PutLocked => "PutObject 16 B, locked version",
            Call::GetLocked => "GetObject 16 B, versioned key",
            Call::DeleteLocked => "DeleteObject, versioned (marker)",
            Call::GetPolicy => "GetObject 16 B, bucket with a policy",
            Call::GetAnonymous => "GetObject 16 B, anonymous (policy allows)",
            Call::PutBigIa => "PutObject 1 MiB, STANDARD_IA (erasure-coded)",
            Call::GetBigIa => "GetObject 1 MiB, STANDARD_IA (erasure-coded)",
        }
    }

    /// The most rounds issue 16 allows.
    fn goal(self) -> u32 {
        match self {
            Call::ListBuckets => 0,
            Call::PutBig | Call::PutBigIa => 2,
            _ => 1,
        }
    }
}

/// A cluster of `n` nodes in `n` zones, with a website endpoint on each,
/// a key, and a bucket served as a website.
struct Bench {
    cluster: Cluster,
    rt: tokio::runtime::Runtime,
    s3: Client,
    http: reqwest::Client,
    web_url: String,
    /// Distinct key names per phase.
    next: usize,
}

impl Bench {
    fn start(n: usize) -> Bench {
        let mut c = Cluster::new(n, 3);
        let add_web = |c: &Cluster, i: usize| {
            let node = &c.nodes[i];
            let text = std::fs::read_to_string(&node.config).unwrap();
            std::fs::write(
                &node.config,
                format!(
                    "{text}\n[s3_web]\nbind_addr = \"{}:{WEB_PORT}\"\nroot_domain = \".{ROOT_DOMAIN}\"\n",
                    node.ip
                ),
            )
            .unwrap();
        };
        add_web(&c, 0);
        c.start(0);
        let boot = vec![format!("{}@{}", c.nodes[0].id(), c.nodes[0].public_addr())];
        for i in 1..n {
            c.write_config(i, &c.secret.clone(), &boot);
            add_web(&c, i);
            c.start(i);
        }
        wait_until("nodes see each other", CLUSTER_DEADLINE, || {
            c.health(0).0.len() == n
        });
        let zones: Vec<String> = (1..=n).map(|z| format!("dc{z}")).collect();
        let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
        c.apply_layout(&zones, "1G");
        let key = make_key(&c, "geo-bench");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("garage"))
            .credentials_provider(Credentials::new(&key.0, &key.1, None, None, "bench"))
            .endpoint_url(format!("http://{}:3900", c.nodes[0].ip))
            .force_path_style(true)
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
            .build();
        let s3 = Client::from_conf(conf);
        // The layout may still be settling: bounded retries.
        wait_until("the bucket is created", CLUSTER_DEADLINE, || {
            rt.block_on(s3.create_bucket().bucket(BUCKET).send())
                .is_ok()
        });
        c.garage_ok(0, &["bucket", "website", "--allow", BUCKET]);
        rt.block_on(async {
            s3.create_bucket()
                .bucket(LOCKED)
                .object_lock_enabled_for_bucket(true)
                .send()
                .await
                .expect("CreateBucket with object lock");
            let rule = aws_sdk_s3::types::ObjectLockRule::builder()
                .default_retention(
                    aws_sdk_s3::types::DefaultRetention::builder()
                        .mode(aws_sdk_s3::types::ObjectLockRetentionMode::Governance)
                        .days(1)
                        .build(),
                )
                .build();
            s3.put_object_lock_configuration()
                .bucket(LOCKED)
                .object_lock_configuration(
                    aws_sdk_s3::types::ObjectLockConfiguration::builder()
                        .object_lock_enabled(aws_sdk_s3::types::ObjectLockEnabled::Enabled)
                        .rule(rule)
                        .build(),
                )
                .send()
                .await
                .expect("PutObjectLockConfiguration");
        });
        rt.block_on(async {
            s3.create_bucket()
                .bucket(PUBLIC)
                .send()
                .await
                .expect("CreateBucket (public)");
            let policy = format!(
                r#"{{"Version":"2012-10-17","Statement":[
                {{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{PUBLIC}/*"}},
                {{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{PUBLIC}/private/*"}}]}}"#
            );
            s3.put_bucket_policy()
                .bucket(PUBLIC)
                .policy(policy)
                .send()
                .await
                .expect("PutBucketPolicy");
        });
        let web_url = format!("http://{}:{WEB_PORT}/", c.nodes[0].ip);
        let b = Bench {
            cluster: c,
            rt,
            s3,
            http: reqwest::Client::new(),
            web_url,
            next: 0,
        };
        b.rt.block_on(async {
            b.s3.put_object()
                .bucket(BUCKET)
                .key("index.html")
                .content_type("text/html")
                .body(ByteStream::from_static(b"<h1>geo bench</h1>"))
                .send()
                .await
                .expect("PutObject index.html");
        });
        b
    }

    /// Objects that the reads of one phase find: `count` of 16 B, of
    /// 1 MiB and of 10 MiB, and as many 16 B objects to delete.
    fn prepare(&mut self, count: usize) -> Prepared {
        let phase = self.next;
        self.next += 1;
        let p = Prepared {
            small: (0..count).map(|i| format!("p{phase}/small/{i}")).collect(),
            big: (0..count).map(|i| format!("p{phase}/big/{i}")).collect(),
            huge: (0..count).map(|i| format!("p{phase}/huge/{i}")).collect(),
            doomed: (0..count).map(|i| format!("p{phase}/doomed/{i}")).collect(),
            fresh_small: (0..count).map(|i| format!("p{phase}/new/{i}")).collect(),
            fresh_big: (0..count).map(|i| format!("p{phase}/newbig/{i}")).collect(),
            big_ia: (0..count).map(|i| format!("p{phase}/bigia/{i}")).collect(),
            fresh_big_ia: (0..count)
                .map(|i| format!("p{phase}/newbigia/{i}"))
                .collect(),
            prefix: format!("p{phase}/small/"),
        };
        let big = random_bytes(MIB);
        self.rt.block_on(async {
            for k in p.small.iter().chain(p.doomed.iter()) {
                self.put(k, vec![7u8; 16]).await;
                self.put_in(LOCKED, k, vec![7u8; 16]).await;
                self.put_in(PUBLIC, k, vec![7u8; 16]).await;
            }
            for k in &p.big {
                self.put(k, big.clone()).await;
            }
            let huge = random_bytes(10 * MIB);
            for k in &p.huge {
                self.put(k, huge.clone()).await;
            }
            for k in &p.big_ia {
                self.put_ia(k, big.clone()).await;
            }
        });
        p
    }

    async fn put_ia(&self, key: &str, body: Vec<u8>) {
        self.s3
            .put_object()
            .bucket(BUCKET)
            .key(key)
            .storage_class(aws_sdk_s3::types::StorageClass::StandardIa)
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap_or_else(|e| panic!("PutObject {key} (STANDARD_IA): {e:?}"));
    }

    async fn put(&self, key: &str, body: Vec<u8>) {
        self.put_in(BUCKET, key, body).await
    }

    async fn put_in(&self, bucket: &str, key: &str, body: Vec<u8>) {
        self.s3
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap_or_else(|e| panic!("PutObject {key}: {e:?}"));
    }

    /// Runs `call` once (the `i`-th time in this phase); returns its
    /// latency.
    fn run(&self, call: Call, p: &Prepared, i: usize, big: &[u8]) -> Duration {
        let s3 = &self.s3;
        let t = Instant::now();
        self.rt.block_on(async {
            match call {
                Call::ListBuckets => {
                    let out = s3.list_buckets().send().await.expect("ListBuckets");
                    assert!(!out.buckets().is_empty());
                }
                Call::ListObjectsV2 => {
                    let out = s3
                        .list_objects_v2()
                        .bucket(BUCKET)
                        .prefix(&p.prefix)
                        .send()
                        .await
                        .expect("ListObjectsV2");
                    assert_eq!(out.contents().len(), p.small.len());
                }
                Call::PutSmall => self.put(&p.fresh_small[i], vec![1u8; 16]).await,
                Call::PutLocked => self.put_in(LOCKED, &p.fresh_small[i], vec![1u8; 16]).await,
                Call::GetLocked => {
                    let out = s3
                        .get_object()
                        .bucket(LOCKED)
                        .key(&p.small[i])
                        .send()
                        .await
                        .expect("GetObject (locked bucket)");
                    assert!(out.object_lock_mode().is_some());
                    out.body.collect().await.expect("GetObject body");
                }
                Call::DeleteLocked => {
                    let out = s3
                        .delete_object()
                        .bucket(LOCKED)
                        .key(&p.doomed[i])
                        .send()
                        .await
                        .expect("DeleteObject (locked bucket)");
                    assert_eq!(out.delete_marker(), Some(true));
                }
                Call::GetPolicy => {
                    let out = s3
                        .get_object()
                        .bucket(PUBLIC)
                        .key(&p.small[i])
                        .send()
                        .await
                        .expect("GetObject (bucket with a policy)");
                    let body = out.body.collect().await.expect("GetObject body");
                    assert_eq!(body.into_bytes().len(), 16);
                }
                Call::GetAnonymous => {
                    let url = self
                        .web_url
                        .replace(&format!(":{WEB_PORT}/"), &format!(":3900/{PUBLIC}/"));
                    let r = self
                        .http
                        .get(format!("{url}{}", p.small[i]))
                        .timeout(Duration::from_secs(30))
                        .send()
                        .await
                        .expect("anonymous GET");
                    assert_eq!(r.status().as_u16(), 200);
                    assert_eq!(r.bytes().await.expect("body").len(), 16);
                }
                Call::PutBig => self.put(&p.fresh_big[i], big.to_vec()).await,
                Call::PutBigIa => self.put_ia(&p.fresh_big_ia[i], big.to_vec()).await,
                Call::GetSmall | Call::GetBig | Call::GetBigIa | Call::GetHuge => {
                    let (key, len) = match call {
                        Call::GetSmall => (&p.small[i], 16),
                        Call::GetBigIa => (&p.big_ia[i], MIB),
                        Call::GetHuge => (&p.huge[i], 10 * MIB),
                        _ => (&p.big[i], MIB),
                    };
                    let out = s3
                        .get_object()
                        .bucket(BUCKET)
                        .key(key)
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("GetObject {key}: {e:?}"));
                    let body = out.body.collect().await.expect("GetObject body");
                    assert_eq!(body.into_bytes().len(), len);
                }
                Call::HeadSmall | Call::HeadBig => {
                    let key = match call {
                        Call::HeadSmall => &p.small[i],
                        _ => &p.big[i],
                    };
                    s3.head_object()
                        .bucket(BUCKET)
                        .key(key)
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("HeadObject {key}: {e:?}"));
                }
                Call::DeleteObject => {
                    s3.delete_object()
                        .bucket(BUCKET)
                        .key(&p.doomed[i])
                        .send()
                        .await
                        .expect("DeleteObject");
                }
                Call::WebsiteGet => {
                    let r = self
                        .http
                        .get(&self.web_url)
                        .header("Host", format!("{BUCKET}.{ROOT_DOMAIN}"))
                        .timeout(Duration::from_secs(30))
                        .send()
                        .await
                        .expect("website GET");
                    assert_eq!(r.status().as_u16(), 200);
                    r.bytes().await.expect("website body");
                }
            }
        });
        t.elapsed()
    }

    /// Every call `repeat` times (after one untimed warm-up each) at the
    /// current link latency.
    fn measure(&mut self, repeat: usize) -> Vec<(Call, Vec<Duration>)> {
        let p = self.prepare(repeat + 1);
        let big = random_bytes(MIB);
        Call::ALL
            .iter()
            .map(|&call| {
                self.run(call, &p, repeat, &big);
                let times = (0..repeat).map(|i| self.run(call, &p, i, &big)).collect();
                (call, times)
            })
            .collect()
    }
}

struct Prepared {
    small: Vec<String>,
    big: Vec<String>,
    /// 10 MiB: a multi-block GET (its block list read after the object
    /// entry).
    huge: Vec<String>,
    doomed: Vec<String>,
    fresh_small: Vec<String>,
    fresh_big: Vec<String>,
    big_ia: Vec<String>,
    fresh_big_ia: Vec<String>,
    prefix: String,
}

fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

fn mean_ms(v: &[Duration]) -> f64 {
    v.iter().map(|d| d.as_secs_f64() * 1000.0).sum::<f64>() / v.len() as f64
}

fn median_ms(v: &[Duration]) -> f64 {
    let mut s: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

fn bench_cluster(n: usize, s: &Settings) {
    eprintln!("starting {n} nodes in {n} zones...");
    let mut b = Bench::start(n);
    let base = b.measure(s.repeat);
    let one_way = s.rtt / 2;
    b.cluster.set_latency(one_way);
    b.cluster.net.set_jitter(s.jitter / 2);
    // Let the nodes' ping estimates see the new latency.
    std::thread::sleep(Duration::from_secs(3));
    let delayed = b.measure(s.repeat);
    b.cluster.set_latency(Duration::ZERO);
    b.cluster.net.set_jitter(Duration::ZERO);

    let rtt_ms = s.rtt.as_secs_f64() * 1000.0;
    println!();
    println!(
        "### {n} nodes in {n} zones, replication 3, RTT {rtt_ms:.0} ms ± {:.0} ms, {} requests per call through node 1",
        s.jitter.as_secs_f64() * 1000.0,
        s.repeat
    );
    println!();
    println!("| call | no delay: mean (ms) | delayed: mean (ms) | delayed: median (ms) | rounds | goal |");
    println!("|---|---:|---:|---:|---:|---:|");
    for ((call, t0), (_, t1)) in base.iter().zip(delayed.iter()) {
        // Rounded to a tenth, without the sign of a rounded-away noise.
        let rounds = ((mean_ms(t1) - mean_ms(t0)) / rtt_ms * 10.0).round() / 10.0 + 0.0;
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            call.name(),
            mean_ms(t0),
            mean_ms(t1),
            median_ms(t1),
            rounds,
            call.goal()
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let s = Settings {
        rtt: Duration::from_millis(env_or("GARAGE_BENCH_RTT_MS", 50)),
        jitter: Duration::from_millis(env_or("GARAGE_BENCH_JITTER_MS", 5)),
        repeat: env_or("GARAGE_BENCH_REPEAT", 20usize).max(1),
    };
    let sizes: String = env_or("GARAGE_BENCH_NODES", "3,5".to_string());
    for n in sizes.split(',') {
        let n: usize = n
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("GARAGE_BENCH_NODES={sizes:?}: give node counts like 3,5"));
        assert!(
            n >= 3,
            "GARAGE_BENCH_NODES: replication 3 needs 3 nodes or more"
        );
        bench_cluster(n, &s);
    }
}
