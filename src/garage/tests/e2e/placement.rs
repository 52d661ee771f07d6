//! Storage classes with a place (issue 47) on five real nodes in five
//! zones: a bucket pinned to a class of two zones (`EU`, two copies) keeps
//! every block file in those zones, checked on disk; a write naming another
//! class is refused; with one of the class's zones down, reads and writes
//! go on and the missing copies are written when it is back; the class
//! widened to a third zone under a live writer moves copies there, nothing
//! lost and no write failed.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::StorageClass;
use aws_sdk_s3::Client;

use crate::common::{random_bytes, run};
use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{make_key, sdk_client};

const MIB: usize = 1 << 20;
const BUCKET: &str = "eu-photos";
const ZONES: [&str; 5] = ["paris", "berlin", "madrid", "rome", "oslo"];

/// The shard files (a placed class's copies are shards) of node `i`, by
/// block address.
fn shards_of(c: &Cluster, i: usize) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in c.block_files(i) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some((addr, ext)) = name.split_once('.') {
            if ext.starts_with('s') {
                *out.entry(addr.to_string()).or_default() += 1;
            }
        }
    }
    out
}

/// The rows of `garage status`'s STORAGE CLASSES section, as cells
/// (columns are two or more spaces apart).
fn storage_rows(status: &str) -> Vec<Vec<String>> {
    status
        .lines()
        .skip_while(|l| !l.starts_with("==== STORAGE CLASSES"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('('))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

/// Every block file (whole blocks and shards) of node `i`.
fn files_of(c: &Cluster, i: usize) -> usize {
    c.block_files(i).len()
}

/// Copies of each block address over the nodes `nodes`.
fn copies_over(c: &Cluster, nodes: &[usize]) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    for i in nodes {
        for (a, n) in shards_of(c, *i) {
            *out.entry(a).or_default() += n;
        }
    }
    out
}

/// No node from `first` on (the zones outside the class) holds a block file.
fn nothing_outside(c: &Cluster, first: usize) {
    for (i, zone) in ZONES.iter().enumerate().skip(first) {
        assert_eq!(files_of(c, i), 0, "node {i} ({zone}) holds block files");
    }
}

async fn put(cl: &Client, key: &str, body: &[u8], class: Option<&str>) -> Result<(), String> {
    common::s3::put_object(cl, BUCKET, key, body, class).await
}

/// The object's bytes; it must be in `EU`.
async fn get(cl: &Client, key: &str) -> Vec<u8> {
    let (body, class) = common::s3::get_object(cl, BUCKET, key)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(class.as_deref(), Some("EU"), "{key}");
    body
}

/// A reader on node `node` cycling over `objects` until `stop` is set (at
/// most 20 000 GETs): the number of good reads and the failures (an error,
/// or other bytes).
#[allow(clippy::type_complexity)]
fn spawn_reader(
    c: &Cluster,
    node: usize,
    key: &(String, String),
    objects: &BTreeMap<String, Vec<u8>>,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<(u64, Vec<String>)>) {
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let cl = sdk_client(c, node, key);
        let objects = objects.clone();
        std::thread::spawn(move || {
            run(async {
                let (mut reads, mut failures) = (0u64, Vec::new());
                // Bounded: at most 20 000 reads, and stopped by the test.
                for (k, body) in objects.iter().cycle().take(20_000) {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    match common::s3::get_object(&cl, BUCKET, k).await {
                        Ok((b, _)) if b == *body => reads += 1,
                        Ok(_) => failures.push(format!("{k}: other bytes")),
                        Err(e) => failures.push(e),
                    }
                }
                (reads, failures)
            })
        })
    };
    (stop, reader)
}

/// Defines `EU`: two copies, in paris and berlin.
const EU_IN_PARIS_AND_BERLIN: [&str; 7] = [
    "layout",
    "class",
    "EU",
    "--replication",
    "2",
    "--zones",
    "paris,berlin",
];

/// Defines `ARCHIVE`: erasure-coded 2+1 over madrid, rome and oslo.
const ARCHIVE_IN_MADRID_ROME_OSLO: [&str; 7] = [
    "layout",
    "class",
    "ARCHIVE",
    "--erasure",
    "2+1",
    "--zones",
    "madrid,rome,oslo",
];

/// Five nodes, one in each of [`ZONES`], in the layout; unreferenced blocks
/// go after 2 s (not 10 min); `env` for every node too.
fn five_zones(env: &[(&str, &str)]) -> Cluster {
    five_zones_with_fake_clocks(env, &[])
}

/// [`five_zones`], the nodes `fake` with a wall clock the test moves
/// ([`Cluster::set_clock_offset`]).
fn five_zones_with_fake_clocks(env: &[(&str, &str)], fake: &[usize]) -> Cluster {
    let mut c = Cluster::new(5, 3);
    for i in fake {
        c.fake_clock(*i);
    }
    c.env
        .push(("GARAGE_BLOCK_DELETE_DELAY_SECS".into(), "2".into()));
    for (k, v) in env {
        c.env.push((k.to_string(), v.to_string()));
    }
    c.start_all();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 5
    });
    c.apply_layout(&ZONES, "1G");
    c
}

/// Applies the staged layout changes.
fn apply(c: &Cluster) {
    let layout = c.garage_json(0, &["layout", "show"]);
    let next = (layout["version"].as_u64().expect("a version") + 1).to_string();
    c.garage_ok(0, &["layout", "apply", "--version", &next]);
}

#[test]
fn a_bucket_pinned_to_two_zones_keeps_its_blocks_there() {
    let mut c = five_zones(&[("GARAGE_BLOCK_CENSUS_INTERVAL_SECS", "1")]);

    // A class that cannot survive a node is refused unless accepted.
    let refused = c.garage(0, &["layout", "class", "SCRATCH", "--replication", "1"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--allow-no-redundancy"),
        "{refused:?}"
    );
    c.garage_ok(0, &EU_IN_PARIS_AND_BERLIN);
    let preview = c.garage_ok(0, &["layout", "show"]);
    assert!(
        preview.contains("Storage class EU: replication 2 in zones berlin, paris"),
        "{preview}"
    );
    apply(&c);
    let shown = c.garage_json(0, &["layout", "show"]);
    let eu = shown["storageClasses"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "EU"))
        .cloned()
        .unwrap_or_else(|| panic!("no class EU in {shown}"));
    assert_eq!(eu["zones"], serde_json::json!(["berlin", "paris"]));
    assert_eq!(eu["survives"], "any 1 node(s) or a zone");

    let key = make_key(&c, "placement");
    let cl = sdk_client(&c, 0, &key);
    run(async { cl.create_bucket().bucket(BUCKET).send().await.unwrap() });
    let out = c.garage_ok(0, &["bucket", "set-placement", BUCKET, "--allow", "EU"]);
    assert!(out.contains("accepts only the storage classes EU"), "{out}");
    let info = c.garage_ok(0, &["bucket", "info", BUCKET]);
    assert!(info.contains("Placement:       only EU"), "{info}");

    // Writes: no class (the bucket's default, EU), EU by name; STANDARD and
    // the erasure-coded class of every zone are refused.
    let mut objects: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    run(async {
        for i in 0..12 {
            let body = random_bytes(MIB / 2 + i * 300_000);
            let k = format!("photo-{i}");
            let class = (i % 2 == 0).then_some("EU");
            put(&cl, &k, &body, class).await.unwrap();
            objects.insert(k, body);
        }
        for other in ["STANDARD", "STANDARD_IA"] {
            let e = put(&cl, "elsewhere", b"x", Some(other)).await.unwrap_err();
            assert!(e.contains("InvalidStorageClass"), "{other}: {e}");
        }
    });
    // On disk: every block twice, once in paris and once in berlin;
    // nothing in the other zones.
    let blocks = copies_over(&c, &[0, 1]);
    assert!(blocks.len() >= 12, "{} blocks", blocks.len());
    assert!(blocks.values().all(|n| *n == 2), "{blocks:?}");
    assert_eq!(shards_of(&c, 0).len(), blocks.len());
    assert_eq!(shards_of(&c, 1).len(), blocks.len());
    nothing_outside(&c, 2);

    // Berlin down: reads and writes go on.
    c.stop(1);
    wait_until("berlin seen down", CLUSTER_DEADLINE, || {
        c.health(0).1.len() == 1
    });
    // `garage status` still sums the censuses of the others, naming berlin.
    let status = c.garage_ok(0, &["status"]);
    let not_counted = status
        .lines()
        .find(|l| l.starts_with("Not counted:"))
        .unwrap_or_else(|| panic!("berlin not named as not counted: {status}"));
    assert!(
        not_counted.contains(&format!("{} (down)", &c.nodes[1].id()[..16])),
        "{status}"
    );
    assert!(
        storage_rows(&status).iter().any(|r| r[0] == "EU"),
        "{status}"
    );
    run(async {
        for (k, body) in objects.iter() {
            assert_eq!(&get(&cl, k).await, body, "{k} with berlin down");
        }
        for i in 0..4 {
            let body = random_bytes(MIB + i * 1000);
            let k = format!("while-down-{i}");
            put(&cl, &k, &body, None).await.unwrap();
            objects.insert(k, body);
        }
    });
    // Back: berlin gets the copies written without it.
    c.start(1);
    let caught_up = wait_until(
        "berlin holds every block again",
        Duration::from_secs(120),
        || {
            let all = copies_over(&c, &[0]);
            shards_of(&c, 1).len() == all.len() && all.len() > blocks.len()
        },
    );
    nothing_outside(&c, 2);
    eprintln!("berlin back: the copies written without it are there after {caught_up:?}");

    // Widened to madrid under a live writer.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, written) = (stop.clone(), written.clone());
        let cl = sdk_client(&c, 4, &key);
        std::thread::spawn(move || {
            run(async {
                let mut done: BTreeMap<String, Vec<u8>> = BTreeMap::new();
                let mut failures = Vec::new();
                let mut i = 0;
                // Bounded: at most 400 writes, and stopped by the test.
                while !stop.load(Ordering::Relaxed) && i < 400 {
                    let body = random_bytes(200_000 + (i % 7) * 150_000);
                    let k = format!("live-{i}");
                    match put(&cl, &k, &body, None).await {
                        Ok(()) => {
                            done.insert(k, body);
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => failures.push(e),
                    }
                    i += 1;
                }
                (done, failures)
            })
        })
    };
    wait_until("the writer has started", CLUSTER_DEADLINE, || {
        written.load(Ordering::Relaxed) >= 3
    });
    c.garage_ok(
        0,
        &["layout", "class", "EU", "--zones", "paris,berlin,madrid"],
    );
    let preview = c.garage_ok(0, &["layout", "show"]);
    assert!(
        preview.contains("storage class EU (replication 2) that move to a new node"),
        "{preview}"
    );
    apply(&c);
    let before = written.load(Ordering::Relaxed);
    wait_until("writes after the change", CLUSTER_DEADLINE, || {
        written.load(Ordering::Relaxed) >= before + 10
    });
    stop.store(true, Ordering::Relaxed);
    let (live, failures) = writer.join().unwrap();
    assert!(
        failures.is_empty(),
        "writes failed during the move: {failures:?}"
    );
    objects.extend(live);

    // Blocks end where the class says: two copies of each in paris, berlin
    // and madrid, madrid holding its share, nothing in rome or oslo.
    let moved_in = wait_until(
        "copies in place after the move",
        Duration::from_secs(180),
        || {
            let copies = copies_over(&c, &[0, 1, 2]);
            copies.values().all(|n| *n == 2)
                && !shards_of(&c, 2).is_empty()
                && (3..5).all(|i| files_of(&c, i) == 0)
        },
    );
    let copies = copies_over(&c, &[0, 1, 2]);
    eprintln!(
        "EU widened to madrid: {} blocks, {} on madrid, in place {moved_in:?} after the writer stopped; {} writes during the move, none failed",
        copies.len(),
        shards_of(&c, 2).len(),
        objects.keys().filter(|k| k.starts_with("live-")).count(),
    );
    // Each node's census says the same, in `garage status` and in
    // `/metrics`: EU's files are the shard files on disk, nothing is left
    // to hand over.
    let on_disk: usize = (0..3)
        .map(|i| shards_of(&c, i).values().sum::<usize>())
        .sum();
    wait_until("the census counts EU's files", CLUSTER_DEADLINE, || {
        let rows = storage_rows(&c.garage_ok(0, &["status"]));
        rows.iter().any(|r| {
            r[0] == "EU" && r[1] == "replication 2" && r[2] == on_disk.to_string() && r[4] == "-"
        })
    });
    let madrid_bytes: u64 = c
        .block_files(2)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let stats = c.garage_ok(2, &["stats"]);
    assert!(
        stats.contains("block files by storage class"),
        "garage stats lacks the census: {stats}"
    );
    let eu_row = stats
        .lines()
        .find(|l| l.trim_start().starts_with("EU "))
        .unwrap_or_else(|| panic!("no EU row in garage stats of madrid: {stats}"));
    eprintln!("madrid's census of EU: {eu_row} ({madrid_bytes} bytes in its files)");
    run(async {
        for (k, body) in objects.iter() {
            assert_eq!(&get(&cl, k).await, body, "{k} after the move");
        }
    });
    // Bit rot: a byte flipped in every copy paris holds. Every object still
    // reads back (from another copy), and each bad copy is rebuilt.
    let originals: Vec<(std::path::PathBuf, Vec<u8>)> = c
        .block_files(0)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    assert!(!originals.is_empty());
    for (p, b) in originals.iter() {
        let mut bad = b.clone();
        *bad.last_mut().unwrap() ^= 0x40;
        std::fs::write(p, bad).unwrap();
    }
    run(async {
        for (k, body) in objects.iter() {
            assert_eq!(&get(&cl, k).await, body, "{k} with paris's copies rotten");
        }
    });
    wait_until(
        "paris's rotten copies rebuilt",
        Duration::from_secs(120),
        || {
            originals
                .iter()
                .all(|(p, b)| std::fs::read(p).is_ok_and(|now| now == *b))
        },
    );
    // Deleted, their copies are collected from every zone of the class.
    run(async {
        for k in objects.keys() {
            cl.delete_object()
                .bucket(BUCKET)
                .key(k)
                .send()
                .await
                .unwrap();
        }
    });
    wait_until(
        "the deleted objects' copies are collected",
        Duration::from_secs(120),
        || (0..5).all(|i| files_of(&c, i) == 0),
    );

    // An erasure-coded class and a one-copy class with a place: ARCHIVE,
    // 2+1 over madrid, rome and oslo; LOCAL, one copy in oslo.
    c.garage_ok(0, &ARCHIVE_IN_MADRID_ROME_OSLO);
    c.garage_ok(
        0,
        &[
            "layout",
            "class",
            "LOCAL",
            "--replication",
            "1",
            "--zones",
            "oslo",
            "--allow-no-redundancy",
        ],
    );
    apply(&c);
    let shown = c.garage_ok(0, &["layout", "show"]);
    assert!(
        shown.contains("any 1 node(s) or a zone") && shown.contains("no node loss"),
        "{shown}"
    );
    run(async { cl.create_bucket().bucket("archive").send().await.unwrap() });
    c.garage_ok(
        0,
        &[
            "bucket",
            "set-placement",
            "archive",
            "--allow",
            "ARCHIVE,LOCAL",
            "--default",
            "ARCHIVE",
        ],
    );
    let mut archived: BTreeMap<String, (Vec<u8>, &str)> = BTreeMap::new();
    run(async {
        for i in 0..4 {
            let class = if i == 3 { "LOCAL" } else { "ARCHIVE" };
            let body = random_bytes(2 * MIB + 1000 + i * 1000);
            let k = format!("old-{i}");
            let mut req = cl
                .put_object()
                .bucket("archive")
                .key(&k)
                .body(ByteStream::from(body.clone()));
            if i == 3 {
                req = req.storage_class(StorageClass::from("LOCAL"));
            }
            req.send()
                .await
                .unwrap_or_else(|e| panic!("PutObject {k}: {e:?}"));
            archived.insert(k, (body, class));
        }
    });
    // ARCHIVE: 3 shards of each of its 9 blocks, one in each of its zones;
    // LOCAL: one copy of each of its 3 blocks, in oslo; none in paris or
    // berlin.
    assert_eq!(files_of(&c, 0) + files_of(&c, 1), 0);
    let in_archive_zones = copies_over(&c, &[2, 3, 4]);
    let count = |n: usize| in_archive_zones.values().filter(|c| **c == n).count();
    assert_eq!(
        (count(3), count(1), in_archive_zones.len()),
        (9, 3, 12),
        "{in_archive_zones:?}"
    );
    assert_eq!(
        shards_of(&c, 4).len(),
        12,
        "oslo holds a shard of every block"
    );
    // Rome down: ARCHIVE reads from the two other shards, LOCAL from oslo.
    c.stop(3);
    wait_until("rome seen down", CLUSTER_DEADLINE, || {
        c.health(0).1.len() == 1
    });
    run(async {
        for (k, (body, class)) in archived.iter() {
            let out = cl
                .get_object()
                .bucket("archive")
                .key(k)
                .send()
                .await
                .unwrap_or_else(|e| panic!("GetObject {k} with rome down: {e:?}"));
            assert_eq!(out.storage_class().map(|c| c.as_str()), Some(*class));
            assert_eq!(&out.body.collect().await.unwrap().to_vec(), body, "{k}");
        }
    });
    c.assert_no_secret_logged();
}

/// A bucket of 1 000 `STANDARD` objects moved to `EU` (replication 2 in
/// paris and berlin): pinned to it, its objects are rewritten in the
/// background (the lifecycle worker, without a rule); they keep their
/// bytes and report `EU`, and the replicated blocks in the other zones
/// are freed.
#[test]
fn a_bucket_moved_from_standard_to_eu() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, ExpirationStatus, LifecycleRule, LifecycleRuleFilter,
        Transition, TransitionStorageClass,
    };
    // `script/bench-move.sh` runs this test with fewer objects and a
    // round-trip time between the nodes (the harness's delay proxy).
    let knob = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .map(|v| {
                v.parse::<usize>()
                    .unwrap_or_else(|_| panic!("{name}={v:?}"))
            })
            .unwrap_or(default)
    };
    let objects_n = knob("GARAGE_TEST_MOVE_OBJECTS", 1000);
    let rtt = Duration::from_millis(knob("GARAGE_TEST_MOVE_RTT_MS", 0) as u64);
    const SIZE: usize = 8 * 1024;
    let c = five_zones(&[("GARAGE_LIFECYCLE_INTERVAL_SECS", "1")]);
    c.garage_ok(0, &EU_IN_PARIS_AND_BERLIN);
    apply(&c);
    let key = make_key(&c, "mover");
    let cl = sdk_client(&c, 0, &key);
    let objects: BTreeMap<String, Vec<u8>> = (0..objects_n)
        .map(|i| (format!("doc-{i:04}"), random_bytes(SIZE)))
        .collect();
    let written = std::time::Instant::now();
    run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();
        let mut writes = futures::stream::iter(objects.iter().map(|(k, b)| put(&cl, k, b, None)))
            .buffer_unordered(8);
        use futures::StreamExt;
        while let Some(r) = writes.next().await {
            r.unwrap();
        }
    });
    eprintln!(
        "{objects_n} objects of {SIZE} B written in {:?}",
        written.elapsed()
    );
    // STANDARD: three copies of every block, in three zones.
    let files: usize = (0..5).map(|i| files_of(&c, i)).sum();
    assert_eq!(files, 3 * objects_n);

    if !rtt.is_zero() {
        c.set_latency(rtt / 2);
    }
    // A reader during the move: every GET must succeed with the bytes.
    let (stop, reader) = spawn_reader(&c, 3, &key, &objects);
    // Pinned to EU: the lifecycle worker moves what is elsewhere (no rule
    // needed), by the transition machinery.
    c.garage_ok(0, &["bucket", "set-placement", BUCKET, "--allow", "EU"]);
    run(async {
        // A rule to another class is refused for a bucket pinned to EU.
        let other = LifecycleRule::builder()
            .id("to-ia")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("").build())
            .transitions(
                Transition::builder()
                    .days(0)
                    .storage_class(TransitionStorageClass::StandardIa)
                    .build(),
            )
            .build()
            .unwrap();
        let e = cl
            .put_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .lifecycle_configuration(
                BucketLifecycleConfiguration::builder()
                    .rules(other)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect_err("STANDARD_IA is outside the bucket's classes");
        assert!(format!("{e:?}").contains("InvalidStorageClass"), "{e:?}");
    });
    // Every object reports EU (one listing of 1 000 per check).
    let moved = wait_until("every object moved to EU", Duration::from_secs(600), || {
        run(async {
            let l = cl.list_objects_v2().bucket(BUCKET).send().await.unwrap();
            l.contents().len() == objects_n
                && l.contents()
                    .iter()
                    .all(|o| o.storage_class().map(|s| s.as_str()) == Some("EU"))
        })
    });
    stop.store(true, Ordering::Relaxed);
    let (reads, failures) = reader.join().unwrap();
    assert!(
        failures.is_empty(),
        "reads failed during the move: {failures:?}"
    );
    eprintln!("{reads} GETs during the move, none failed");
    // The replicated blocks are freed: paris and berlin hold one copy of
    // each block, the other zones nothing.
    let freed = wait_until(
        "the STANDARD blocks are freed",
        CLUSTER_DEADLINE * 2,
        || {
            (0..5).all(|i| {
                let shards = shards_of(&c, i).len();
                files_of(&c, i) == if i < 2 { shards } else { 0 }
            }) && shards_of(&c, 0).len() == objects_n
        },
    );
    assert_eq!(shards_of(&c, 1).len(), objects_n);
    nothing_outside(&c, 2);
    // The bucket's bytes by class, and on disk: two copies.
    let expect = format!(
        "in EU: {} B ({} B on disk)",
        objects_n * SIZE,
        2 * objects_n * SIZE
    );
    wait_until("the bucket's counters say EU", CLUSTER_DEADLINE, || {
        c.garage_ok(0, &["bucket", "info", BUCKET])
            .contains(&expect)
    });
    eprintln!(
        "{objects_n} objects moved from STANDARD to EU with {rtt:?} RTT between nodes in {moved:?} ({:.1} objects/s from the pinning), STANDARD blocks freed {freed:?} later",
        objects_n as f64 / moved.as_secs_f64(),
    );
    run(async {
        for (k, body) in objects.iter() {
            assert_eq!(&get(&cl, k).await, body, "{k} after the move");
        }
    });
}

/// A class's redundancy changed, and coded data moved to another class:
/// `EU` goes from two copies in paris and berlin to three copies in paris,
/// berlin and madrid, and the bucket, pinned to `EU`, gets its `ARCHIVE`
/// (2+1 over madrid, rome and oslo) objects moved to `EU`. With a reader
/// running, madrid killed in the middle and berlin's clock 10 min ahead
/// meanwhile: every object ends with three copies in the three
/// zones, the former forms (two-copy `EU`, `ARCHIVE` shards) are freed, no
/// GET fails.
#[test]
fn a_class_that_changes_redundancy_and_coded_data_moved_to_it() {
    const EACH: usize = 20;
    const SIZE: usize = 300_000;
    let mut c = five_zones_with_fake_clocks(
        &[
            ("GARAGE_LIFECYCLE_INTERVAL_SECS", "1"),
            ("GARAGE_BLOCK_CENSUS_INTERVAL_SECS", "1"),
        ],
        &[1],
    );
    c.garage_ok(0, &EU_IN_PARIS_AND_BERLIN);
    c.garage_ok(0, &ARCHIVE_IN_MADRID_ROME_OSLO);
    apply(&c);
    let key = make_key(&c, "recoder");
    let cl = sdk_client(&c, 0, &key);
    let objects: BTreeMap<String, Vec<u8>> = (0..2 * EACH)
        .map(|i| (format!("doc-{i:03}"), random_bytes(SIZE + i)))
        .collect();
    run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();
        for (i, (k, b)) in objects.iter().enumerate() {
            let class = if i < EACH { "EU" } else { "ARCHIVE" };
            put(&cl, k, b, Some(class)).await.unwrap();
        }
    });
    // EU: 2 copies over paris and berlin; ARCHIVE: 3 shards over the rest.
    assert_eq!(copies_over(&c, &[0, 1]).len(), EACH);
    assert_eq!(copies_over(&c, &[2, 3, 4]).len(), EACH);

    let (stop, reader) = spawn_reader(&c, 4, &key, &objects);
    let start = std::time::Instant::now();
    c.garage_ok(
        0,
        &[
            "layout",
            "class",
            "EU",
            "--replication",
            "3",
            "--zones",
            "paris,berlin,madrid",
        ],
    );
    apply(&c);
    c.garage_ok(0, &["bucket", "set-placement", BUCKET, "--allow", "EU"]);
    // Madrid (in both classes) killed once some objects are re-encoded:
    // the moves pause (a node of the new copies is down; ARCHIVE reads
    // from rome and oslo), and go on when it is back.
    wait_until("some objects re-encoded", Duration::from_secs(120), || {
        copies_over(&c, &[0, 1, 2]).values().any(|n| *n == 3)
    });
    c.kill(2);
    wait_until("madrid seen down", CLUSTER_DEADLINE, || {
        c.health(0).1.len() == 1
    });
    let moved_before_kill = copies_over(&c, &[0, 1, 2])
        .values()
        .filter(|n| **n == 3)
        .count();
    // Berlin's wall clock steps 10 minutes ahead meanwhile (its block
    // deletions and resync queue count in it; were it the bucket's
    // lifecycle node, its passes would wait, failing closed, until its
    // clock is back).
    c.set_clock_offset(1, 600_000);
    wait_until("berlin's clock seen 10 min ahead", CLUSTER_DEADLINE, || {
        let s = c.json_api(0, "GetClusterStatus", serde_json::json!({}));
        s["nodes"].as_array().into_iter().flatten().any(|n| {
            n["id"].as_str() == Some(c.nodes[1].id())
                && n["clockOffsetMs"].as_i64().is_some_and(|o| o > 500_000)
        })
    });
    // The faults are held: madrid down 3 s more, then berlin's skew 5 s
    // more with madrid back, then berlin's clock steps back.
    std::thread::sleep(Duration::from_secs(3));
    c.start(2);
    std::thread::sleep(Duration::from_secs(5));
    let under_skew = copies_over(&c, &[0, 1, 2])
        .values()
        .filter(|n| **n == 3)
        .count();
    c.set_clock_offset(1, 0);

    // In place: one address per object, three copies of each, in paris,
    // berlin and madrid; rome and oslo hold nothing (ARCHIVE's shards and
    // the two-copy forms are freed).
    let done = wait_until(
        "every object in three-copy EU, the former forms freed",
        Duration::from_secs(300),
        || {
            let copies = copies_over(&c, &[0, 1, 2]);
            copies.len() == 2 * EACH
                && copies.values().all(|n| *n == 3)
                && (0..3).all(|i| files_of(&c, i) == shards_of(&c, i).values().sum::<usize>())
                && (3..5).all(|i| files_of(&c, i) == 0)
        },
    );
    stop.store(true, Ordering::Relaxed);
    let (reads, failures) = reader.join().unwrap();
    assert!(
        failures.is_empty(),
        "reads failed during the moves: {failures:?}"
    );
    eprintln!(
        "{} objects re-encoded (EU 2 -> 3 copies, ARCHIVE 2+1 -> EU), madrid killed after {moved_before_kill} of them, then restarted while berlin's clock was 10 min ahead, {under_skew} done when it stepped back; former forms freed {done:?} after that ({:?} from the change); {reads} GETs during, none failed",
        2 * EACH,
        start.elapsed()
    );
    // Every object reads back, in EU (`get` checks the class).
    run(async {
        for (k, body) in objects.iter() {
            assert_eq!(&get(&cl, k).await, body, "{k} after the moves");
        }
    });
    // The census counts EU's three-copy files only.
    wait_until(
        "the census counts the new form only",
        CLUSTER_DEADLINE,
        || {
            let rows = storage_rows(&c.garage_ok(0, &["status"]));
            rows.iter()
                .any(|r| r[0] == "EU" && r[1] == "replication 3" && r[2] == (6 * EACH).to_string())
                && !rows
                    .iter()
                    .any(|r| r[1] == "replication 2" || r[0] == "ARCHIVE")
        },
    );
}
