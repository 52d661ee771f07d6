//! Erasure-coded storage classes on six real nodes in three zones (two
//! per zone, so `STANDARD_IA` is 4+2): objects of both classes written
//! with the Rust `aws-sdk-s3` crate, the bytes on disk counted, shards
//! corrupted, a whole zone stopped (every object still reads back byte for
//! byte, and new writes succeed), then the zone back; shards following a
//! layout change; lifecycle transitions re-encoding objects in place, with
//! a node down while they are due; blocks written replicated in a fresh
//! cluster and during an outage re-encoded by the catch-up worker.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, StorageClass};
use aws_sdk_s3::Client;

use crate::common::{random_bytes, run};
use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{make_key, sdk_client};

const MIB: usize = 1 << 20;
const BUCKET: &str = "ec-bucket";

/// `n` nodes started, the first `zones.len()` of them in the layout in
/// those zones; unreferenced blocks and shards go after 2 s (not 10 min).
fn cluster(n: usize, zones: &[&str]) -> Cluster {
    cluster_with(n, zones, &[])
}

/// [`cluster`], with more environment for every node.
fn cluster_with(n: usize, zones: &[&str], env: &[(&str, &str)]) -> Cluster {
    let mut c = Cluster::new(n, 3);
    c.env
        .push(("GARAGE_BLOCK_DELETE_DELAY_SECS".into(), "2".into()));
    for (k, v) in env {
        c.env.push((k.to_string(), v.to_string()));
    }
    c.start_all();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == n
    });
    c.apply_layout(zones, "1G");
    c
}

/// The storage class `name` among those node `i`'s current layout offers
/// (`storageClasses` of `garage --json layout show`).
fn offered_class(c: &Cluster, i: usize, name: &str) -> serde_json::Value {
    let layout = c.garage_json(i, &["layout", "show"]);
    layout["storageClasses"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("the layout offers no class {name}: {layout}"))
}

/// Six nodes, zones dc1, dc1, dc2, dc2, dc3, dc3.
fn six_nodes() -> Cluster {
    cluster(6, &["dc1", "dc1", "dc2", "dc2", "dc3", "dc3"])
}

/// Bytes of the block and shard files of every node.
fn bytes_on_disk(c: &Cluster) -> u64 {
    (0..c.nodes.len())
        .flat_map(|i| c.block_files(i))
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum()
}

fn shard_files(c: &Cluster, i: usize) -> Vec<std::path::PathBuf> {
    c.block_files(i)
        .into_iter()
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e.to_string_lossy().starts_with('s'))
        })
        .collect()
}

async fn put(cl: &Client, key: &str, body: &[u8], class: Option<&str>) {
    common::s3::put_object(cl, BUCKET, key, body, class)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

async fn get(cl: &Client, key: &str) -> Vec<u8> {
    common::s3::get_object(cl, BUCKET, key)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

async fn class_of(cl: &Client, key: &str) -> String {
    let h = cl
        .head_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("HeadObject {key}: {e:?}"));
    h.storage_class()
        .map(|c| c.as_str().to_string())
        .unwrap_or_else(|| "STANDARD".into())
}

async fn multipart(cl: &Client, key: &str, parts: &[Vec<u8>], class: &str) {
    let up = cl
        .create_multipart_upload()
        .bucket(BUCKET)
        .key(key)
        .storage_class(StorageClass::from(class))
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap();
    let mut done = Vec::new();
    for (n, p) in parts.iter().enumerate() {
        let r = cl
            .upload_part()
            .bucket(BUCKET)
            .key(key)
            .upload_id(id)
            .part_number(n as i32 + 1)
            .body(ByteStream::from(p.clone()))
            .send()
            .await
            .unwrap();
        done.push(
            CompletedPart::builder()
                .part_number(n as i32 + 1)
                .e_tag(r.e_tag().unwrap())
                .build(),
        );
    }
    let listed = cl
        .list_parts()
        .bucket(BUCKET)
        .key(key)
        .upload_id(id)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.storage_class().map(|c| c.as_str()), Some(class));
    let uploads = cl
        .list_multipart_uploads()
        .bucket(BUCKET)
        .prefix(key)
        .send()
        .await
        .unwrap();
    let this = uploads
        .uploads()
        .iter()
        .find(|u| u.upload_id() == Some(id))
        .expect("the upload is listed");
    assert_eq!(
        this.storage_class().map(|c| c.as_str()),
        Some(class),
        "ListMultipartUploads reports the upload's class"
    );
    cl.complete_multipart_upload()
        .bucket(BUCKET)
        .key(key)
        .upload_id(id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(done))
                .build(),
        )
        .send()
        .await
        .unwrap();
}

#[test]
fn erasure_coded_objects_survive_a_zone() {
    let mut c = six_nodes();
    let ia = offered_class(&c, 0, "STANDARD_IA");
    assert_eq!(ia["kind"], "erasure", "{ia}");
    assert_eq!(ia["redundancy"], "4+2", "{ia}");
    assert!(
        ia["overhead"]
            .as_f64()
            .is_some_and(|o| (o - 1.5).abs() < 0.005),
        "{ia}"
    );
    let key = make_key(&c, "ec");
    let cl = sdk_client(&c, 0, &key);
    let mut objects: BTreeMap<String, (Vec<u8>, &str)> = BTreeMap::new();

    run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();

        // Bytes on disk per byte stored: 8 MiB of random data in each class.
        let before = bytes_on_disk(&c);
        let big = random_bytes(8 * MIB);
        put(&cl, "big-ia", &big, Some("STANDARD_IA")).await;
        let ia = bytes_on_disk(&c) - before;
        put(&cl, "big-std", &big, None).await;
        // A replicated PUT is acknowledged with two copies of three.
        wait_until("the third copies land", CLUSTER_DEADLINE, || {
            bytes_on_disk(&c) - before - ia >= 3 * big.len() as u64
        });
        let std = bytes_on_disk(&c) - before - ia;
        let (ia_x, std_x) = (ia as f64 / big.len() as f64, std as f64 / big.len() as f64);
        println!("bytes on disk per byte stored: STANDARD_IA {ia_x:.4}, STANDARD {std_x:.4}");
        assert!((1.5..=1.55).contains(&ia_x), "STANDARD_IA: {ia_x}");
        assert!(std_x >= 2.99, "STANDARD: {std_x}");
        objects.insert("big-ia".into(), (big.clone(), "STANDARD_IA"));
        objects.insert("big-std".into(), (big, "STANDARD"));

        // Sizes around the inline limit and the block size, both classes.
        for (n, size) in [1usize, 3073, MIB - 1, MIB, MIB + 1, 3 * MIB + 100]
            .into_iter()
            .enumerate()
        {
            let body = random_bytes(size);
            let k = format!("ia-{n}");
            put(&cl, &k, &body, Some("STANDARD_IA")).await;
            objects.insert(k, (body, "STANDARD_IA"));
        }
        let parts = vec![random_bytes(5 * MIB), random_bytes(MIB + 7)];
        multipart(&cl, "mpu-ia", &parts, "STANDARD_IA").await;
        objects.insert("mpu-ia".into(), (parts.concat(), "STANDARD_IA"));

        // An unknown class is refused with S3's error.
        let e = cl
            .put_object()
            .bucket(BUCKET)
            .key("nope")
            .storage_class(StorageClass::Glacier)
            .body(ByteStream::from(vec![1u8; 10]))
            .send()
            .await
            .expect_err("GLACIER is not offered");
        let raw = e.raw_response().map(|r| r.status().as_u16());
        assert_eq!(raw, Some(400), "{e:?}");
        assert!(format!("{e:?}").contains("InvalidStorageClass"), "{e:?}");

        // Classes reported by HEAD and by the listing.
        for (k, (_, class)) in objects.iter() {
            assert_eq!(class_of(&cl, k).await, *class, "{k}");
        }
        let list = cl.list_objects_v2().bucket(BUCKET).send().await.unwrap();
        for o in list.contents() {
            let want = objects[o.key().unwrap()].1;
            assert_eq!(o.storage_class().unwrap().as_str(), want, "{:?}", o.key());
        }

        // Copying an object onto itself with another class rewrites it.
        cl.copy_object()
            .bucket(BUCKET)
            .key("big-std")
            .copy_source(format!("{BUCKET}/big-std"))
            .storage_class(StorageClass::StandardIa)
            .send()
            .await
            .unwrap();
        assert_eq!(class_of(&cl, "big-std").await, "STANDARD_IA");
        objects.get_mut("big-std").unwrap().1 = "STANDARD_IA";
        for (k, (body, _)) in objects.iter() {
            assert!(get(&cl, k).await == *body, "{k} reads back");
        }
    });

    // Stop a whole zone (dc3: nodes 4 and 5).
    c.kill(4);
    c.kill(5);
    wait_until("dc3 seen down", Duration::from_secs(60), || {
        c.health(0).1.len() >= 2
    });
    run(async {
        for (k, (body, _)) in objects.iter() {
            assert!(get(&cl, k).await == *body, "{k} reads back with dc3 down");
        }
        // Writes still succeed, in both classes, and read back.
        for class in [Some("STANDARD_IA"), None] {
            let body = random_bytes(2 * MIB + 5);
            let k = format!("while-down-{}", class.unwrap_or("STANDARD"));
            put(&cl, &k, &body, class).await;
            assert!(get(&cl, &k).await == body, "{k}");
            assert_eq!(class_of(&cl, &k).await, class.unwrap_or("STANDARD"));
            objects.insert(k, (body, class.unwrap_or("STANDARD")));
        }
    });
    // The zone comes back: everything reads back through one of its nodes.
    c.start(4);
    c.start(5);
    let cl4 = sdk_client(&c, 4, &key);
    wait_until("dc3 back", CLUSTER_DEADLINE, || c.health(0).0.len() == 6);
    run(async {
        for (k, (body, _)) in objects.iter() {
            assert!(get(&cl4, k).await == *body, "{k} reads back from node 4");
        }
    });
    // The STANDARD_IA object written with dc3 down was stored replicated
    // and queued; with dc3 back it is re-encoded (its 3 blocks).
    wait_until(
        "the object written with dc3 down re-encoded",
        CLUSTER_DEADLINE,
        || catch_up(&c, 0).0 == 0 && catch_up(&c, 0).1 >= 3,
    );

    // Flip a byte in every shard node 0 holds (one of each erasure-coded
    // block written with every node up), and stop node 5 too: each such
    // block has 4 good shards left on the 5 running nodes. Node 0 reads
    // its own shard first: every read meets a bad shard, sets it aside,
    // and rebuilds the block from the others.
    let bad = shard_files(&c, 0);
    assert!(bad.len() >= 10, "node 0 holds shards: {}", bad.len());
    for p in bad.iter() {
        let mut b = std::fs::read(p).unwrap();
        let at = b.len() - 1;
        b[at] ^= 0x40;
        std::fs::write(p, b).unwrap();
    }
    c.kill(5);
    run(async {
        for (k, (body, _)) in objects.iter() {
            assert!(
                get(&cl, k).await == *body,
                "{k} reads back past a bad shard"
            );
        }
    });
    let aside: Vec<_> = walk(&c.nodes[0].dir.join("data"))
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".corrupted"))
        .collect();
    assert_eq!(aside.len(), bad.len(), "every bad shard was set aside");
    // Each read that met a bad shard repairs the block's shards in the
    // background: node 0 gets its shards back, rebuilt from the others.
    wait_until("node 0's shards rebuilt", CLUSTER_DEADLINE, || {
        shard_files(&c, 0).len() == bad.len()
    });
    for (p, q) in bad.iter().zip(shard_files(&c, 0).iter()) {
        assert_eq!(p, q);
        let aside = format!("{}.corrupted", p.display());
        let (good, was) = (std::fs::read(p).unwrap(), std::fs::read(aside).unwrap());
        assert_eq!(good.len(), was.len());
        let diff = good.iter().zip(was.iter()).filter(|(a, b)| a != b).count();
        assert_eq!(
            diff, 1,
            "the rebuilt shard differs only by the flipped byte"
        );
    }

    // Everything deleted (node 5 back): every node frees every shard and
    // every block.
    c.start(5);
    wait_until("node 5 back", CLUSTER_DEADLINE, || c.health(0).0.len() == 6);
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
    wait_until("every shard and block freed", CLUSTER_DEADLINE, || {
        (0..6).all(|i| c.block_files(i).is_empty())
    });
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Shards follow a layout change: a zone is added and a node removed with
/// erasure-coded objects on the cluster (and a PUT cut by a node killed
/// in the middle). Once the removed node has handed its shards over, it
/// and a whole zone are stopped: every object still reads back.
#[test]
fn shards_follow_a_layout_change() {
    let mut c = cluster(7, &["dc1", "dc1", "dc2", "dc2", "dc3", "dc3"]);
    let key = make_key(&c, "ec");
    let cl = sdk_client(&c, 0, &key);
    let mut objects: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();
        for n in 0..6 {
            let body = random_bytes(MIB * 2 + n * 1000);
            let k = format!("o{n}");
            put(&cl, &k, &body, Some("STANDARD_IA")).await;
            objects.insert(k, body);
        }
    });

    // A PUT of many blocks while node 3 is killed: it fails or succeeds,
    // and if it succeeded, the object is whole.
    let body = random_bytes(24 * MIB);
    let cut = {
        let cl = cl.clone();
        let body = body.clone();
        std::thread::spawn(move || {
            run(async move {
                cl.put_object()
                    .bucket(BUCKET)
                    .key("cut")
                    .storage_class(StorageClass::StandardIa)
                    .body(ByteStream::from(body))
                    .send()
                    .await
                    .is_ok()
            })
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    c.kill(3);
    let cut_ok = cut.join().unwrap();
    println!("PUT with node 3 killed in the middle: succeeded = {cut_ok}");
    if cut_ok {
        objects.insert("cut".into(), body);
    }
    run(async {
        for (k, body) in objects.iter() {
            assert!(
                get(&cl, k).await == *body,
                "{k} reads back with node 3 down"
            );
        }
    });
    // (Its blocks written after node 3 was seen down are replicated, and
    // may not have all their copies before the layout change below:
    // the rest of the test is about shards.)
    objects.remove("cut");
    c.start(3);

    // Node 6 joins in a new zone dc4, node 1 leaves.
    let id = |i: usize| c.nodes[i].id()[..16].to_string();
    c.garage_ok(0, &["layout", "assign", "-z", "dc4", "-c", "1G", &id(6)]);
    c.garage_ok(0, &["layout", "remove", &id(1)]);
    let show = c.garage_ok(0, &["layout", "show"]);
    assert!(
        show.contains("Block shards of storage class STANDARD_IA (erasure 4+2) that move"),
        "{show}"
    );
    c.garage_ok(0, &["layout", "apply", "--version", "2"]);
    let before = shard_files(&c, 1).len();
    assert!(before > 0, "node 1 held shards");
    wait_until("node 1 hands its shards over", CLUSTER_DEADLINE * 2, || {
        shard_files(&c, 1).is_empty()
    });
    assert!(!shard_files(&c, 6).is_empty(), "node 6 got shards");

    // Node 1 and zone dc2 (nodes 2 and 3) stopped: four nodes are left,
    // one per shard... of each 4+2 block: all of them must be there.
    for i in [1, 2, 3] {
        c.kill(i);
    }
    run(async {
        for (k, body) in objects.iter() {
            assert!(
                get(&cl, k).await == *body,
                "{k} reads back on the new layout with dc2 down"
            );
        }
    });
}

/// The erasure-coding catch-up worker of node `i`: its queue (versions
/// waiting) and its "blocks re-encoded" counter.
fn catch_up(c: &Cluster, i: usize) -> (u64, u64) {
    let v = c.json_api(i, "ListWorkers", serde_json::json!({}));
    let list = v["success"]
        .as_object()
        .and_then(|m| m.values().next())
        .and_then(|l| l.as_array())
        .cloned()
        .unwrap_or_else(|| panic!("no worker list in {v}"));
    let w = list
        .iter()
        .find(|w| w["name"] == "Erasure-coding catch-up worker")
        .unwrap_or_else(|| panic!("no catch-up worker on node {i}: {v}"));
    let detail = |name: &str| {
        w["details"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["name"] == name))
            .and_then(|d| d["value"].as_str())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        w["queueLength"].as_u64().unwrap_or(0),
        detail("blocks re-encoded"),
    )
}

/// `STANDARD_IA` keeps its 1.5× after outages (issue 44). Six nodes in
/// three zones (4+2): 12 objects of 2 MiB PUT through all six nodes at
/// once, as soon as the layout is applied; then node 5 stopped, 4 more
/// PUT and a multipart upload of 2 parts (their blocks are stored
/// replicated: a shard node is down, and the versions queued, the parts'
/// followed to the completed object), node 5 back. Each time the catch-up worker
/// re-encodes what was written replicated, within minutes, and the bytes
/// on disk come back to at most 1.6× the bytes stored; every object reads
/// back byte for byte, in its class.
#[test]
fn erasure_coding_catches_up_after_outages() {
    let mut c = six_nodes();
    let key = make_key(&c, "ec");
    let clients: Vec<Client> = (0..6).map(|i| sdk_client(&c, i, &key)).collect();
    let mut objects: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let size = 2 * MIB;
    let ratio = |c: &Cluster, n: usize| bytes_on_disk(c) as f64 / (n * size) as f64;
    run(async {
        clients[0]
            .create_bucket()
            .bucket(BUCKET)
            .send()
            .await
            .unwrap();
        let fresh: Vec<(String, Vec<u8>)> = (0..12)
            .map(|n| (format!("fresh-{n}"), random_bytes(size)))
            .collect();
        futures::future::join_all(
            fresh
                .iter()
                .enumerate()
                .map(|(n, (k, b))| put(&clients[n % 6], k, b, Some("STANDARD_IA"))),
        )
        .await;
        objects.extend(fresh);
    });
    let at_once = ratio(&c, objects.len());
    println!("fresh cluster: {at_once:.3}x on disk right after the PUTs");
    let queued: u64 = (0..6).map(|i| catch_up(&c, i).0).sum();
    println!("fresh cluster: {queued} versions queued for re-encoding");
    let mut last = 0.0;
    wait_until(
        "the fresh PUTs at most 1.6x on disk",
        Duration::from_secs(240),
        || {
            last = ratio(&c, objects.len());
            (0..6).all(|i| catch_up(&c, i).0 == 0) && last <= 1.6
        },
    );
    println!("fresh cluster: {last:.3}x on disk once caught up");

    // An outage: node 5 stopped, 4 objects written through node 0.
    c.kill(5);
    wait_until("node 5 seen down", CLUSTER_DEADLINE, || {
        !c.health(0).1.is_empty()
    });
    let (_, reencoded_before) = catch_up(&c, 0);
    run(async {
        for n in 0..4 {
            let (k, b) = (format!("outage-{n}"), random_bytes(size));
            put(&clients[0], &k, &b, Some("STANDARD_IA")).await;
            objects.insert(k, b);
        }
    });
    // A multipart upload too: its parts' versions are queued, and
    // followed to the completed object's version.
    let parts = vec![random_bytes(5 * MIB), random_bytes(MIB / 2)];
    run(multipart(&clients[0], "outage-mpu", &parts, "STANDARD_IA"));
    let (queue, _) = catch_up(&c, 0);
    assert_eq!(
        queue, 6,
        "each version written during the outage is queued (4 PUTs, 2 parts)"
    );
    let stored = |objects: &BTreeMap<String, Vec<u8>>| {
        objects.values().map(|b| b.len()).sum::<usize>() + 5 * MIB + MIB / 2
    };
    let ratio = |c: &Cluster, objects: &BTreeMap<String, Vec<u8>>| {
        bytes_on_disk(c) as f64 / stored(objects) as f64
    };
    let during = ratio(&c, &objects);
    println!("outage: {during:.3}x on disk with node 5 down");
    assert!(
        during > 1.6,
        "the outage's blocks are stored replicated: {during}"
    );
    c.start(5);
    wait_until("node 5 back", CLUSTER_DEADLINE, || c.health(0).0.len() == 6);
    wait_until(
        "the outage's PUTs re-encoded, at most 1.6x on disk",
        Duration::from_secs(240),
        || {
            last = ratio(&c, &objects);
            (0..6).all(|i| catch_up(&c, i).0 == 0) && last <= 1.6
        },
    );
    let (_, reencoded) = catch_up(&c, 0);
    println!(
        "outage: {last:.3}x on disk once caught up, {} blocks re-encoded by node 0",
        reencoded - reencoded_before
    );
    assert!(
        reencoded - reencoded_before >= 8 + 6,
        "node 0's worker re-encoded the outage's 8 + 6 blocks: {reencoded_before} -> {reencoded}"
    );
    objects.insert("outage-mpu".into(), parts.concat());
    run(async {
        for (k, body) in objects.iter() {
            assert!(get(&clients[1], k).await == *body, "{k} reads back");
            assert_eq!(class_of(&clients[1], k).await, "STANDARD_IA", "{k}");
        }
    });
}

/// The shards node `i`'s shard placement worker handed over to their
/// nodes since it started (its counter, through `garage --json stats`).
fn shards_handed_over(c: &Cluster, i: usize) -> u64 {
    c.counter(i, "block_shards_handed_over_total")
}

/// An erasure-coded PUT does not wait for a shard node cut off but not
/// yet seen as down (a failed link stalls rather than resets): its late
/// shards are also written to another node, of the same zone here
/// (hedged), and that node hands them over to their node once it is back.
/// Four nodes in three zones (2+1): node 1 isolated, 4 objects of 3 MiB
/// PUT through node 2 at once. Without the hedge the blocks placed on
/// node 1 would wait for the RPC timeout and fail, and node 0 would hold
/// nothing to hand over.
#[test]
fn a_late_shard_node_is_hedged_around() {
    let c = cluster(4, &["dc1", "dc1", "dc2", "dc3"]);
    let ia = offered_class(&c, 0, "STANDARD_IA");
    assert_eq!(ia["kind"], "erasure", "{ia}");
    assert_eq!(ia["redundancy"], "2+1", "{ia}");
    let key = make_key(&c, "hedge");
    let through_2 = sdk_client(&c, 2, &key);
    run(async {
        through_2
            .create_bucket()
            .bucket(BUCKET)
            .send()
            .await
            .unwrap()
    });
    let objects: Vec<(String, Vec<u8>)> = (0..4)
        .map(|n| (format!("hedged-{n}"), random_bytes(3 * MIB)))
        .collect();
    let before = shard_files(&c, 1).len();
    c.set_isolated(1, true);
    run(async {
        futures::future::join_all(
            objects
                .iter()
                .map(|(k, b)| put(&through_2, k, b, Some("STANDARD_IA"))),
        )
        .await
    });
    assert_eq!(
        shard_files(&c, 1).len(),
        before,
        "node 1 received nothing while isolated"
    );
    c.set_isolated(1, false);
    wait_until(
        "node 0 hands the hedged shards over to node 1",
        Duration::from_secs(180),
        || shards_handed_over(&c, 0) >= 1 && shard_files(&c, 1).len() > before,
    );
    let through_1 = sdk_client(&c, 1, &key);
    run(async {
        for (k, body) in objects.iter() {
            assert!(get(&through_1, k).await == *body, "{k} reads back");
        }
    });
}

/// A lifecycle transition interrupted by a crash (the process aborted
/// between writing the version's new blocks and the object's entry:
/// `GARAGE_TEST_CRASH_IN_TRANSITION`) is finished by the next pass after
/// the restart: the object reports its class, reads back byte for byte
/// with the same ETag, and the replicated blocks, still referenced when
/// the process died, are freed (the resume path reads the re-encoded
/// blocks to learn their earlier addresses).
#[test]
fn an_interrupted_transition_is_finished_after_a_restart() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, ExpirationStatus, LifecycleRule, LifecycleRuleFilter,
        Transition, TransitionStorageClass,
    };
    let two_days = (2 * 86400).to_string();
    let mut c = cluster_with(
        3,
        &["dc1", "dc2", "dc3"],
        &[
            ("GARAGE_LIFECYCLE_INTERVAL_SECS", "1"),
            ("GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS", &two_days),
            ("GARAGE_TEST_CRASH_IN_TRANSITION", "1"),
        ],
    );
    let key = make_key(&c, "ec");
    let cl = sdk_client(&c, 0, &key);
    let body = random_bytes(3 * MIB + 5);
    let etag = run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();
        put(&cl, "cold/a", &body, None).await;
        let etag = cl
            .head_object()
            .bucket(BUCKET)
            .key("cold/a")
            .send()
            .await
            .unwrap()
            .e_tag()
            .unwrap()
            .to_string();
        let rule = LifecycleRule::builder()
            .id("cold")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("cold/").build())
            .transitions(
                Transition::builder()
                    .days(1)
                    .storage_class(TransitionStorageClass::StandardIa)
                    .build(),
            )
            .build()
            .unwrap();
        cl.put_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .lifecycle_configuration(
                BucketLifecycleConfiguration::builder()
                    .rules(rule)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        etag
    });
    wait_until("4 blocks, 3 copies each", CLUSTER_DEADLINE, || {
        (0..3).map(|i| replicated_files(&c, i)).sum::<usize>() == 3 * 4
    });
    // The knob aborts the process (SIGABRT) between steps 2 and 3.
    let mut crashed = None;
    wait_until("the transition crashes its node", CLUSTER_DEADLINE, || {
        crashed = (0..3).find_map(|i| {
            let status = c.nodes[i].proc.as_mut()?.exited()?;
            Some((i, status))
        });
        crashed.is_some()
    });
    let (crashed, status) = crashed.unwrap();
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(6),
            "node {crashed} aborted: {status:?}"
        );
    }
    // The crashed node may be the one `cl` talks to: ask another.
    let cl = sdk_client(&c, (crashed + 1) % 3, &key);
    // The shards are written and the version lists them; the object is
    // not in its class yet, and the replicated blocks are still referenced.
    assert!(
        (0..3).map(|i| shard_files(&c, i).len()).sum::<usize>() >= 3 * 4,
        "every block's shards were written before the crash"
    );
    assert_eq!(run(class_of(&cl, "cold/a")), "STANDARD");
    c.env
        .retain(|(k, _)| k != "GARAGE_TEST_CRASH_IN_TRANSITION");
    c.start(crashed);
    wait_until(
        "the transition finished: the class reported, the replicated blocks freed",
        Duration::from_secs(120),
        || {
            run(class_of(&cl, "cold/a")) == "STANDARD_IA"
                && (0..3).map(|i| replicated_files(&c, i)).sum::<usize>() == 0
        },
    );
    run(async {
        assert!(get(&cl, "cold/a").await == body, "cold/a reads back");
        let h = cl
            .head_object()
            .bucket(BUCKET)
            .key("cold/a")
            .send()
            .await
            .unwrap();
        assert_eq!(h.e_tag(), Some(etag.as_str()), "the same ETag");
    });
}

/// Non-shard block files of node `i`: replicated blocks.
fn replicated_files(c: &Cluster, i: usize) -> usize {
    c.block_files(i).len() - shard_files(c, i).len()
}

/// What a client sees of an object besides its bytes: ETag, date, version
/// id, size.
async fn identity(cl: &Client, key: &str) -> (String, String, String, i64) {
    let h = cl
        .head_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap();
    (
        h.e_tag().unwrap().to_string(),
        format!("{:?}", h.last_modified()),
        h.version_id().unwrap_or("null").to_string(),
        h.content_length().unwrap(),
    )
}

/// A lifecycle Transition on three nodes in three zones (`STANDARD_IA` is
/// 2+1). While a node is down, the transitions due are deferred and the
/// objects stay readable; once it is back they are re-encoded in place:
/// same bytes, ETag, date and version id, the class reported, the bytes
/// per class counted, the replicated blocks freed (one block repeated in
/// two segments of a 65 MiB object included), small objects, other
/// prefixes and noncurrent versions left alone. Then the bucket's default
/// class.
#[test]
fn lifecycle_transitions_re_encode_objects_in_place() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, BucketVersioningStatus, ExpirationStatus,
        LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, Transition,
        TransitionStorageClass, VersioningConfiguration,
    };
    let two_days = (2 * 86400).to_string();
    let mut c = cluster_with(
        3,
        &["dc1", "dc2", "dc3"],
        &[
            ("GARAGE_LIFECYCLE_INTERVAL_SECS", "1"),
            ("GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS", &two_days),
        ],
    );
    let key = make_key(&c, "ec");
    let cl = sdk_client(&c, 0, &key);
    let mut objects: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let block = random_bytes(MIB);
    let rule = |id: &str, prefix: &str| {
        LifecycleRule::builder()
            .id(id)
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix(prefix).build())
    };
    let config = |rules: Vec<LifecycleRule>| {
        BucketLifecycleConfiguration::builder()
            .set_rules(Some(rules))
            .build()
            .unwrap()
    };
    let old_v1 = run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();
        cl.put_bucket_versioning()
            .bucket(BUCKET)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        for (k, body) in [
            ("cold/a", random_bytes(3 * MIB + 5)),
            ("cold/repeated", block.repeat(65)),
            ("cold/v", random_bytes(2 * MIB)),
            ("cold/small", random_bytes(10_000)),
            ("hot/x", random_bytes(2 * MIB)),
        ] {
            put(&cl, k, &body, None).await;
            objects.insert(k.into(), body);
        }
        let v1 = identity(&cl, "cold/v").await;
        let body = random_bytes(2 * MIB);
        put(&cl, "cold/v", &body, None).await;
        objects.insert("cold/v".into(), body);
        // A rule with nothing due tells which node runs the bucket's
        // lifecycle (the only node that counts passes over a bucket).
        cl.put_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .lifecycle_configuration(config(vec![rule("probe", "none/")
                .expiration(LifecycleExpiration::builder().days(30).build())
                .build()
                .unwrap()]))
            .send()
            .await
            .unwrap();
        v1
    });
    let mut runner = None;
    wait_until(
        "a node runs the bucket's lifecycle",
        CLUSTER_DEADLINE,
        || {
            // The only bucket with rules: its first node is the one
            // whose lifecycle worker passes over a bucket.
            runner = (0..3).find(|&i| c.counter(i, "lifecycle_bucket_passes_total") > 0);
            runner.is_some()
        },
    );
    let runner = runner.unwrap();
    let down = (runner + 1) % 3;
    let before: Vec<(String, (String, String, String, i64))> = run(async {
        let mut out = Vec::new();
        for k in objects.keys() {
            out.push((k.clone(), identity(&cl, k).await));
        }
        out
    });
    c.kill(down);
    let down_id = c.nodes[down].id()[..16].to_string();
    wait_until("the runner sees the node down", CLUSTER_DEADLINE, || {
        c.health(runner).1.contains(&down_id)
    });

    let client = sdk_client(&c, runner, &key);
    // A rule moving cold/ to `class` after a day.
    let put_transition = |class: TransitionStorageClass| {
        client
            .put_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .lifecycle_configuration(config(vec![rule("cold", "cold/")
                .transitions(Transition::builder().days(1).storage_class(class).build())
                .build()
                .unwrap()]))
            .send()
    };
    run(async {
        // A class the layout does not offer is refused.
        let e = put_transition(TransitionStorageClass::Glacier)
            .await
            .expect_err("GLACIER is not offered");
        assert!(format!("{e:?}").contains("InvalidStorageClass"), "{e:?}");
        put_transition(TransitionStorageClass::StandardIa)
            .await
            .unwrap();
        let got = client
            .get_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .send()
            .await
            .unwrap();
        let t = &got.rules()[0].transitions()[0];
        assert_eq!(
            (t.days(), t.storage_class()),
            (Some(1), Some(&TransitionStorageClass::StandardIa))
        );
    });
    wait_until("the transitions are deferred", CLUSTER_DEADLINE, || {
        c.counter(runner, "lifecycle_transitions_deferred_total") > 0
    });
    run(async {
        for (k, body) in objects.iter() {
            assert!(
                get(&client, k).await == *body,
                "{k} reads back with a node down"
            );
            assert_eq!(class_of(&client, k).await, "STANDARD", "{k} has not moved");
        }
    });

    c.start(down);
    run(async {
        for k in ["cold/a", "cold/repeated", "cold/v"] {
            let deadline = std::time::Instant::now() + CLUSTER_DEADLINE * 2;
            while class_of(&cl, k).await != "STANDARD_IA" {
                assert!(std::time::Instant::now() < deadline, "{k} never moved");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    // Left: cold/small (under 128 KiB), hot/x, and the noncurrent cold/v:
    // five distinct replicated blocks on each node, the rest freed.
    for i in 0..3 {
        wait_until("the replaced blocks are freed", CLUSTER_DEADLINE, || {
            replicated_files(&c, i) == 5
        });
    }
    run(async {
        for (k, (etag, date, version, size)) in before.iter() {
            assert!(get(&cl, k).await == objects[k], "{k} reads back");
            let now = identity(&cl, k).await;
            assert_eq!(
                (&now.0, &now.1, &now.2, now.3),
                (etag, date, version, *size),
                "{k}"
            );
            let want = if k.starts_with("cold/") && k != "cold/small" {
                "STANDARD_IA"
            } else {
                "STANDARD"
            };
            assert_eq!(class_of(&cl, k).await, want, "{k}");
        }
        let v1 = cl
            .head_object()
            .bucket(BUCKET)
            .key("cold/v")
            .version_id(&old_v1.2)
            .send()
            .await
            .unwrap();
        assert_eq!(v1.storage_class(), None, "the noncurrent version stays");
        let list = cl
            .list_objects_v2()
            .bucket(BUCKET)
            .prefix("cold/")
            .send()
            .await
            .unwrap();
        for o in list.contents() {
            let want = if o.key() == Some("cold/small") {
                "STANDARD"
            } else {
                "STANDARD_IA"
            };
            assert_eq!(o.storage_class().unwrap().as_str(), want, "{:?}", o.key());
        }
    });

    // Bytes per class in the bucket's counters.
    let moved: i64 = ["cold/a", "cold/repeated", "cold/v"]
        .iter()
        .map(|k| objects[*k].len() as i64)
        .sum();
    let total: i64 = objects.values().map(|b| b.len() as i64).sum();
    let by_class = |c: &Cluster| {
        c.json_api(
            0,
            "GetBucketInfo",
            serde_json::json!({ "globalAlias": BUCKET }),
        )["bytesByClass"]
            .clone()
    };
    wait_until("bytes per class are counted", CLUSTER_DEADLINE, || {
        by_class(&c) == serde_json::json!({ "STANDARD": total - moved, "STANDARD_IA": moved })
    });

    // The bucket's default class: writes that name none go there.
    let e = c.garage(0, &["bucket", "set-storage-class", BUCKET, "COLD"]);
    assert!(!e.status.success());
    assert!(
        common::stderr(&e).contains("offered: STANDARD, STANDARD_IA"),
        "{}",
        common::stderr(&e)
    );
    c.garage_ok(0, &["bucket", "set-storage-class", BUCKET, "STANDARD_IA"]);
    let info = c.garage_json(0, &["bucket", "info", BUCKET]);
    assert_eq!(info["defaultStorageClass"], "STANDARD_IA", "{info}");
    assert_eq!(info["bytesByClass"]["STANDARD_IA"], moved, "{info}");
    run(async {
        let body = random_bytes(MIB + 3);
        put(&cl, "def/x", &body, None).await;
        assert_eq!(class_of(&cl, "def/x").await, "STANDARD_IA");
        put(&cl, "def/y", &body, Some("STANDARD")).await;
        assert_eq!(class_of(&cl, "def/y").await, "STANDARD");
        assert!(get(&cl, "def/x").await == body);
    });
}

/// NoncurrentVersionTransition on three nodes in three zones: a day after
/// a version stopped being current it moves to `STANDARD_IA` (the class
/// reported for that version id, same bytes and ETag), except the newest
/// noncurrent version (NewerNoncurrentVersions 1), the current version and
/// a version too small to move; the rule reads back.
#[test]
fn noncurrent_versions_transition_after_their_days() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, BucketVersioningStatus, ExpirationStatus, LifecycleRule,
        LifecycleRuleFilter, NoncurrentVersionTransition, TransitionStorageClass,
        VersioningConfiguration,
    };
    let two_days = (2 * 86400).to_string();
    let c = cluster_with(
        3,
        &["dc1", "dc2", "dc3"],
        &[
            ("GARAGE_LIFECYCLE_INTERVAL_SECS", "1"),
            ("GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS", &two_days),
        ],
    );
    let key = make_key(&c, "nct");
    let cl = sdk_client(&c, 0, &key);
    run(async {
        cl.create_bucket().bucket(BUCKET).send().await.unwrap();
        cl.put_bucket_versioning()
            .bucket(BUCKET)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        // Three versions of k (oldest first), two of small.
        let mut k = Vec::new();
        for _ in 0..3 {
            let body = random_bytes(2 * MIB + 7);
            put(&cl, "k", &body, None).await;
            k.push((identity(&cl, "k").await, body));
        }
        let mut small = Vec::new();
        for _ in 0..2 {
            let body = random_bytes(10_000);
            put(&cl, "small", &body, None).await;
            small.push(identity(&cl, "small").await);
        }
        let rule = LifecycleRule::builder()
            .id("cold-history")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("").build())
            .noncurrent_version_transitions(
                NoncurrentVersionTransition::builder()
                    .noncurrent_days(1)
                    .newer_noncurrent_versions(1)
                    .storage_class(TransitionStorageClass::StandardIa)
                    .build(),
            )
            .build()
            .unwrap();
        cl.put_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .lifecycle_configuration(
                BucketLifecycleConfiguration::builder()
                    .rules(rule)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        let got = cl
            .get_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .send()
            .await
            .unwrap();
        let t = &got.rules()[0].noncurrent_version_transitions()[0];
        assert_eq!(
            (
                t.noncurrent_days(),
                t.newer_noncurrent_versions(),
                t.storage_class()
            ),
            (Some(1), Some(1), Some(&TransitionStorageClass::StandardIa))
        );

        let class_of_version = |key: &'static str, id: String| {
            let cl = cl.clone();
            async move {
                let h = cl
                    .head_object()
                    .bucket(BUCKET)
                    .key(key)
                    .version_id(id)
                    .send()
                    .await
                    .unwrap();
                (
                    h.storage_class()
                        .map(|c| c.as_str().to_string())
                        .unwrap_or_else(|| "STANDARD".into()),
                    h.e_tag().unwrap().to_string(),
                )
            }
        };
        let oldest = k[0].0 .2.clone();
        let deadline = std::time::Instant::now() + CLUSTER_DEADLINE * 2;
        while class_of_version("k", oldest.clone()).await.0 != "STANDARD_IA" {
            assert!(
                std::time::Instant::now() < deadline,
                "the oldest version never moved"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Same bytes and ETag; the others stay where they were.
        let (_, etag) = class_of_version("k", oldest.clone()).await;
        assert_eq!(etag, k[0].0 .0);
        let body = cl
            .get_object()
            .bucket(BUCKET)
            .key("k")
            .version_id(&oldest)
            .send()
            .await
            .unwrap()
            .body
            .collect()
            .await
            .unwrap()
            .to_vec();
        assert!(body == k[0].1, "the moved version reads back");
        for (what, key, id) in [
            ("the newest noncurrent version", "k", k[1].0 .2.clone()),
            ("the current version", "k", k[2].0 .2.clone()),
            ("a small version", "small", small[0].2.clone()),
        ] {
            assert_eq!(class_of_version(key, id).await.0, "STANDARD", "{what}");
        }
        let versions = cl
            .list_object_versions()
            .bucket(BUCKET)
            .prefix("k")
            .send()
            .await
            .unwrap();
        for v in versions.versions() {
            let want = if v.version_id() == Some(oldest.as_str()) {
                "STANDARD_IA"
            } else {
                "STANDARD"
            };
            assert_eq!(
                v.storage_class().map(|c| c.as_str()),
                Some(want),
                "{:?}",
                v.version_id()
            );
        }
    });
}
