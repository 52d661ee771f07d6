//! End to end: data blocks on three real `garage` processes, written and
//! referenced by a gateway node in this process (the S3 API does that
//! once it exists).

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::gateway::Gateway;
use garage_block::dirs::DataDirs;
use garage_block::manager::BlockManager;
use garage_block::rc::BlockRc;
use garage_block::BlockStore;
use garage_model::block_ref_table::{BlockRef, BlockRefTable, NoBlockRefHook};
use garage_model::version_table::{
    Version, VersionBacklink, VersionBlock, VersionBlockKey, VersionTable,
};
use garage_table::{InsertQueue, Table};
use garage_util::data::{blake2sum, gen_uuid, Hash, Uuid};

fn block_file(c: &Cluster, node: usize, h: &Hash) -> Option<PathBuf> {
    let hex = h.hex();
    let dir = c.nodes[node]
        .dir
        .join("data")
        .join(&hex[0..2])
        .join(&hex[2..4]);
    [hex.clone(), format!("{hex}.zst")]
        .into_iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists())
}

/// Blocks with a reference count entry on `node`, from its `garage stats`.
fn rc_count(c: &Cluster, node: usize) -> Option<u64> {
    let stats = c.try_garage_json(node, &["stats"])?;
    stats["success"][c.nodes[node].id()]["blockRcEntries"].as_u64()
}

/// The version and block_ref tables on gateway `gw`, workers running.
fn version_tables(gw: &Gateway) -> (Arc<Table<VersionTable>>, Arc<Table<BlockRefTable>>) {
    let _rt = gw.rt.enter();
    let versions = Table::new(
        VersionTable {
            block_refs: InsertQueue::open(&gw.db).unwrap(),
        },
        gw.db.clone(),
        gw.system.clone(),
    )
    .unwrap();
    let refs = Table::new(
        BlockRefTable {
            hook: Arc::new(NoBlockRefHook),
        },
        gw.db.clone(),
        gw.system.clone(),
    )
    .unwrap();
    versions.spawn_workers(&gw.exit);
    refs.spawn_workers(&gw.exit);
    (versions, refs)
}

/// Starts the three nodes and applies a layout over three zones.
fn start_three(c: &mut Cluster) {
    c.start_all();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 3
    });
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
}

#[test]
fn blocks_are_replicated_repaired_and_collected() {
    let mut c = Cluster::new(3, 3);
    for (k, v) in [
        ("GARAGE_BLOCK_DELETE_DELAY_SECS", "2"),
        ("GARAGE_TABLE_GC_DELAY_SECS", "3"),
        ("GARAGE_TABLE_SYNC_INTERVAL_SECS", "30"),
    ] {
        c.env.push((k.into(), v.into()));
    }
    start_three(&mut c);

    // The gateway joins with a gateway role.
    let gw = Gateway::join(&c, 4, 2);
    let gw_data = tempfile::tempdir().unwrap();
    let (versions, refs) = version_tables(&gw);
    let blocks = {
        let _rt = gw.rt.enter();
        BlockManager::new(
            gw.system.clone(),
            Arc::new(BlockStore::new(DataDirs::single(gw_data.path()), false)),
            BlockRc::open(&gw.db, 2000).unwrap(),
            Some(1),
        )
    };

    // A 20 MiB object: 20 blocks, a version listing them, their refs.
    let uuid = gen_uuid();
    let backlink = VersionBacklink::Object {
        bucket_id: gen_uuid(),
        key: "big".into(),
    };
    let mut hashes = Vec::new();
    gw.block_on(async {
        for i in 0..20u64 {
            let data: Vec<u8> = (0..1 << 20).map(|_| rand::random::<u8>()).collect();
            let data = Bytes::from(data);
            let h = blake2sum(&data);
            blocks.put_block(h, data).await.unwrap();
            // As a PUT writes it: block by block, into the version's
            // segments.
            let entry = Version::with_block(
                uuid,
                backlink.clone(),
                i,
                VersionBlockKey {
                    part_number: 1,
                    offset: i << 20,
                },
                VersionBlock {
                    hash: h,
                    size: 1 << 20,
                    ec: None,
                    recoded: 0,
                },
            );
            versions.insert(&entry).await.unwrap();
            refs.insert(&BlockRef::new(h, uuid, false)).await.unwrap();
            hashes.push(h);
        }
    });
    for i in 0..3 {
        wait_until(
            &format!("node {i} stores and counts the 20 blocks"),
            CLUSTER_DEADLINE,
            || hashes.iter().all(|h| block_file(&c, i, h).is_some()) && rc_count(&c, i) == Some(20),
        );
    }

    // `stats -a` through node 0 shows every node's counts.
    let all = c.garage_json(0, &["stats", "-a"]);
    let counting_20 = all["success"]
        .as_object()
        .expect("statistics by node")
        .values()
        .filter(|s| s["blockRcEntries"] == 20)
        .count();
    assert_eq!(counting_20, 3, "{all}");

    // A block file deleted on node 2 comes back through resync.
    let lost = hashes[5];
    std::fs::remove_file(block_file(&c, 2, &lost).unwrap()).unwrap();
    c.garage_ok(2, &["repair", "--yes", "blocks"]);
    wait_until(
        "the lost block is fetched back",
        Duration::from_secs(30),
        || block_file(&c, 2, &lost).is_some(),
    );

    // A flipped byte on node 1 is found by scrub and repaired.
    let hit = hashes[7];
    let path = block_file(&c, 1, &hit).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[1234] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    c.garage_ok(1, &["repair", "--yes", "scrub", "start"]);
    wait_until(
        "scrub and resync repair the block",
        Duration::from_secs(60),
        || {
            block_file(&c, 1, &hit)
                .and_then(|p| std::fs::read(p).ok())
                .is_some_and(|b| blake2sum(&b) == hit)
        },
    );

    // `block info` names the version that references a block, live.
    let info = c.garage_json(0, &["block", "info", &hashes[3].hex()]);
    assert!(
        info["success"][c.nodes[0].id()]["versions"]
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| v["versionId"] == uuid.hex().as_str()
                && v["deleted"] == false
                && v["garbageCollected"] == false)),
        "{info}"
    );
    let workers = c.json_api(1, "ListWorkers", serde_json::json!({}));
    let scrub_tid = workers["success"]
        .as_object()
        .and_then(|m| m.values().next())
        .and_then(|l| l.as_array())
        .and_then(|l| l.iter().find(|w| w["name"] == "Block scrub worker"))
        .map(|w| w["id"].to_string())
        .unwrap_or_else(|| panic!("no scrub worker in {workers}"));
    let listed = c.garage_json(1, &["worker", "list"]);
    assert!(
        listed["success"][c.nodes[1].id()]
            .as_array()
            .is_some_and(|l| l.iter().any(|w| w["name"] == "Block scrub worker")),
        "{listed}"
    );
    let scrub = c.garage_json(1, &["worker", "info", &scrub_tid]);
    assert!(
        has_detail(&scrub["success"][c.nodes[1].id()], "Corrupted blocks found"),
        "{scrub}"
    );
    let o = c.garage(0, &["worker", "info", "9999"]);
    assert!(!o.status.success());

    // Purging one block without --yes is refused; with it, the version
    // that uses the block is deleted: the refs of all its blocks drop, and
    // after the delay the files go from every node.
    let o = c.garage(0, &["block", "purge", &hashes[0].hex()]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--yes"),
        "{o:?}"
    );
    // The CLI's purge; its effect is checked below: every node deletes
    // the blocks. (PurgeBlocks' counts are checked by the object lock
    // test, through the admin API.)
    c.garage_ok(0, &["block", "purge", "--yes", &hashes[0].hex()]);
    for i in 0..3 {
        wait_until(
            &format!("node {i} deletes the blocks"),
            Duration::from_secs(90),
            || hashes.iter().all(|h| block_file(&c, i, h).is_none()),
        );
    }
}

/// With 5 Mbit/s between the gateway and the storage nodes, a 1 MiB block
/// read through the gateway is handed over as it arrives: its first bytes
/// reach the reader while most of the block has not crossed the link yet.
/// (This checks the behaviour by bytes, not by time; the timings are
/// printed, and measured in doc/benchmarks.md.)
#[test]
fn a_gateway_streams_a_block_as_it_arrives() {
    use futures::StreamExt;
    let mut c = Cluster::new(3, 3);
    start_three(&mut c);
    let gw = Gateway::join(&c, 4, 2);
    let gw_data = tempfile::tempdir().unwrap();
    let blocks = {
        let _rt = gw.rt.enter();
        BlockManager::new(
            gw.system.clone(),
            Arc::new(BlockStore::new(DataDirs::single(gw_data.path()), false)),
            BlockRc::open(&gw.db, 2000).unwrap(),
            None,
        )
    };
    let data: Vec<u8> = (0..1 << 20).map(|_| rand::random::<u8>()).collect();
    let data = Bytes::from(data);
    let h = blake2sum(&data);
    gw.block_on(blocks.put_block(h, data.clone())).unwrap();

    c.set_rate(Some(5_000_000 / 8));
    let before = c.net.forwarded();
    let (at_first, first, total, got) = gw.block_on(async {
        let start = std::time::Instant::now();
        let mut s = blocks.get_block_stream(&h).await.unwrap();
        let mut at_first = None;
        let mut first = None;
        let mut got = Vec::new();
        while let Some(chunk) = s.next().await {
            let chunk = chunk.unwrap();
            if at_first.is_none() && !chunk.is_empty() {
                at_first = Some(c.net.forwarded() - before);
                first = Some(start.elapsed());
            }
            got.extend_from_slice(&chunk);
        }
        (at_first.unwrap(), first.unwrap(), start.elapsed(), got)
    });
    c.set_rate(None);
    eprintln!(
        "first bytes after {first:?} ({at_first} bytes had crossed the links), whole block after {total:?}"
    );
    assert_eq!(Bytes::from(got), data);
    assert!(
        at_first < (1 << 19),
        "the gateway handed over its first bytes only after {at_first} bytes had crossed: it must forward them as they arrive"
    );
}

fn flip_byte(path: &std::path::Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 1;
    std::fs::write(path, bytes).unwrap();
}

/// Issue 14, bug 2: a flipped byte in a stored block is never served.
/// Bad copy on the node serving the GET: the GET returns the exact bytes
/// from another replica and the bad copy is repaired. Every copy bad:
/// the GET (whole or Range) never completes with 200 (on the code before
/// the fix, curl got 200 and the corrupted bytes).
#[test]
fn a_flipped_byte_in_a_block_is_never_served() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = Cluster::new(3, 3);
    c.env
        .push(("GARAGE_BLOCK_DELETE_DELAY_SECS".into(), "2".into()));
    start_three(&mut c);
    let key = make_key(&c, "rot");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e0 = endpoint(&c, 0);
    // Not compressible, so that the stored file is the plain block.
    let mut x = 0x2545_f491_u32;
    let data: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    std::fs::write(d.join("obj"), &data).unwrap();
    aws_ok(&key, &e0, d, &["s3", "mb", "s3://rot"]);
    aws_ok(&key, &e0, d, &["s3", "cp", "obj", "s3://rot/obj"]);
    wait_until("every node stores the block", CLUSTER_DEADLINE, || {
        (0..3).all(|i| c.block_files(i).len() == 1)
    });

    // Node 0's copy rots: GETs through node 0 still return the exact
    // bytes, and node 0 gets a good copy back.
    let file0 = c.block_files(0).remove(0);
    flip_byte(&file0, 50_000);
    let good = std::fs::read(c.block_files(1).remove(0)).unwrap();
    for n in 0..3 {
        aws_ok(
            &key,
            &e0,
            d,
            &["s3", "cp", "s3://rot/obj", &format!("back{n}")],
        );
        assert!(
            std::fs::read(d.join(format!("back{n}"))).unwrap() == data,
            "GET {n} through the node with the bad copy returned other bytes"
        );
    }
    wait_until("node 0's copy repaired", CLUSTER_DEADLINE, || {
        c.block_files(0)
            .first()
            .is_some_and(|p| std::fs::read(p).ok().as_ref() == Some(&good))
    });

    // Every copy rots: no GET completes with 200.
    for i in 0..3 {
        flip_byte(&c.block_files(i).remove(0), 70_000);
    }
    let url = aws_ok(&key, &e0, d, &["s3", "presign", "s3://rot/obj"]);
    let url = url.trim();
    for range in [None, Some("bytes=0-99"), Some("bytes=60000-99999")] {
        let mut cmd = std::process::Command::new("curl");
        cmd.args(["-s", "--max-time", "30", "-o"])
            .arg(d.join("got"))
            .args(["-w", "%{http_code}"]);
        if let Some(r) = range {
            cmd.args(["-H", &format!("Range: {r}")]);
        }
        let out = cmd.arg(url).output().expect("curl runs");
        let code = String::from_utf8_lossy(&out.stdout).into_owned();
        let complete = out.status.success() && (code == "200" || code == "206");
        assert!(
            !complete,
            "range {range:?}: a GET with every copy corrupted completed with {code}"
        );
    }
}

/// A presigned GET of `url` with curl (with a `Range` header if given),
/// body saved to `out`: whether it completed (curl exited 0 with a 200 or
/// 206), its status, and the body it saved.
fn curl_get(url: &str, range: Option<&str>, out: &std::path::Path) -> (bool, String, Vec<u8>) {
    let _ = std::fs::remove_file(out);
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "--max-time", "30", "-o"])
        .arg(out)
        .args(["-w", "%{http_code}"]);
    if let Some(r) = range {
        cmd.args(["-H", &format!("Range: {r}")]);
    }
    let o = cmd.arg(url).output().expect("curl runs");
    let code = String::from_utf8_lossy(&o.stdout).into_owned();
    let complete = o.status.success() && (code == "200" || code == "206");
    (complete, code, std::fs::read(out).unwrap_or_default())
}

/// Issue 14, bug 2 as reported: one node (so no other replica), a
/// 100 000-byte object, one byte of its block file flipped. Presigned GETs
/// with curl, whole and Range (a Range that ends before the flipped byte
/// too), never complete: the body is cut short. Each GET sees the bad
/// copy (it is put back after each) and moves it aside. Covers a plain
/// and a zstd-compressed block file. (On the code before the fix, the
/// whole GET of the plain object completed with 200 and the corrupted
/// bytes, and Range GETs with 206.)
#[test]
fn on_one_node_a_flipped_byte_fails_the_get() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "rot1");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e0 = endpoint(&c, 0);
    // Not compressible: stored as a plain file.
    let mut x = 0x9e37_79b9_u32;
    let plain: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    // Compressible (compression_level defaults to 1): a `.zst` file.
    let text: Vec<u8> = (0..100_000u32)
        .map(|i| b"bit rot on read "[(i % 16) as usize] ^ (i / 4096) as u8)
        .collect();
    aws_ok(&key, &e0, d, &["s3", "mb", "s3://rot"]);
    let mut objects = Vec::new();
    for (name, data, compressed) in [("plain", &plain, false), ("text", &text, true)] {
        std::fs::write(d.join(name), data).unwrap();
        aws_ok(
            &key,
            &e0,
            d,
            &["s3", "cp", name, &format!("s3://rot/{name}")],
        );
        let file = block_file(&c, 0, &blake2sum(data)).expect("the block is stored");
        assert_eq!(
            file.extension().is_some_and(|e| e == "zst"),
            compressed,
            "{name} stored as {file:?}"
        );
        let url = aws_ok(
            &key,
            &e0,
            d,
            &["s3", "presign", &format!("s3://rot/{name}")],
        );
        objects.push((name, data, file, url.trim().to_string()));
    }
    let got = d.join("got");
    for (name, data, file, url) in &objects {
        // Intact, the GET completes with the exact bytes.
        let (complete, code, body) = curl_get(url, None, &got);
        assert!(complete && body == **data, "{name}: intact GET gave {code}");

        let len = std::fs::metadata(file).unwrap().len() as usize;
        flip_byte(file, len / 2);
        let mut aside = file.clone().into_os_string();
        aside.push(".corrupted");
        let aside = PathBuf::from(aside);
        for range in [
            None,
            Some("bytes=0-99"),
            Some("bytes=50000-50099"),
            Some("bytes=99900-99999"),
        ] {
            let (complete, code, body) = curl_get(url, range, &got);
            let what = if body.is_empty() {
                "no bytes"
            } else if data.windows(body.len()).any(|w| w == body.as_slice()) {
                "bytes of the object"
            } else {
                "corrupted bytes"
            };
            assert!(
                !complete,
                "{name} {range:?}: the GET of a corrupted block completed with {code} and {} {what}",
                body.len()
            );
            // The node moved its bad copy aside; put it back for the next
            // GET, so that each one reads the bad copy.
            assert!(
                aside.exists(),
                "{name} {range:?}: the bad copy was not moved aside"
            );
            std::fs::rename(&aside, file).unwrap();
        }
    }
}

/// `garage repair block-rc` recounts every block's references from the
/// node's `block_ref` entries: counts broken on disk while the node was
/// stopped (too high, missing, and dropped to zero) are set right, the
/// blocks stay, and the object reads back whole. A second pass finds
/// nothing to fix.
#[test]
fn repair_block_rc_sets_wrong_counts_right() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = Cluster::new(1, 1);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "rc");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    // 5 MiB of pseudo-random bytes (xorshift): several distinct blocks.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let body: Vec<u8> = (0..5u32 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    std::fs::write(dir.path().join("f"), &body).unwrap();
    aws_ok(&key, &ep, dir.path(), &["s3", "mb", "s3://rc-test"]);
    aws_ok(&key, &ep, dir.path(), &["s3", "cp", "f", "s3://rc-test/f"]);

    let meta = c.nodes[0].dir.join("meta");
    let engine = garage_db::Engine::Lmdb;
    let open = || {
        garage_db::open(
            engine,
            &engine.db_path(&meta),
            &garage_db::OpenOptions::default(),
        )
        .unwrap()
    };
    c.kill(0);
    let hashes: Vec<Hash> = {
        let db = open();
        // Deletion a day away: nothing is deleted before the repair.
        let rc = BlockRc::open(&db, 86_400_000).unwrap();
        let hashes: Vec<Hash> = rc
            .rc
            .iter()
            .map(|i| Hash::try_from_slice(&i.unwrap().0).unwrap())
            .collect();
        assert!(hashes.len() >= 3, "one count per block: {}", hashes.len());
        let now = garage_util::time::now_msec();
        for (h, wrong) in hashes.iter().zip([Some(5), Some(0), None]) {
            match wrong {
                Some(n) => {
                    db.transaction(|tx| -> garage_db::TxResult<bool, ()> {
                        Ok(rc.reset(tx, h, n, now)?)
                    })
                    .unwrap();
                }
                None => rc.rc.remove(h.as_slice()).unwrap(),
            }
        }
        hashes
    };
    c.start(0);
    let n = hashes.len() as u64;
    // Its tally, from the node's repair counters (the node just started).
    let rc_series = |name: &str| c.counter(0, &format!("{name}{{repair=\"block-rc\"}}"));
    c.garage_ok(0, &["repair", "--yes", "block-rc"]);
    assert_eq!(
        (
            rc_series("repair_checked_total"),
            rc_series("repair_fixed_total")
        ),
        (n, 3),
        "block reference counts checked and fixed"
    );
    for h in hashes.iter() {
        let info = c.json_api(
            0,
            "GetBlockInfo",
            serde_json::json!({ "blockHash": h.hex() }),
        );
        let n = info["success"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap();
        assert_eq!(n["refcount"], 1, "{info}");
        assert!(block_file(&c, 0, h).is_some(), "block {h:?} must stay");
    }
    c.garage_ok(0, &["repair", "--yes", "block-rc"]);
    assert_eq!(
        (
            rc_series("repair_runs_total"),
            rc_series("repair_checked_total"),
            rc_series("repair_fixed_total")
        ),
        (2, 2 * n, 3),
        "the second run checks them all again and fixes none"
    );
    aws_ok(
        &key,
        &ep,
        dir.path(),
        &["s3", "cp", "s3://rc-test/f", "back"],
    );
    assert!(std::fs::read(dir.path().join("back")).unwrap() == body);
}

/// The node's workers as `ListWorkers` reports them (its only node).
fn workers(c: &Cluster, node: usize) -> Vec<serde_json::Value> {
    let v = c.json_api(node, "ListWorkers", serde_json::json!({}));
    v["success"]
        .as_object()
        .and_then(|m| m.values().next())
        .and_then(|l| l.as_array())
        .cloned()
        .unwrap_or_else(|| panic!("no worker list in {v}"))
}

/// Whether worker `w` (a WorkerInfo of the JSON answers) has a detail
/// (setting or counter) named `name`.
fn has_detail(w: &serde_json::Value, name: &str) -> bool {
    w["details"]
        .as_array()
        .is_some_and(|d| d.iter().any(|x| x["name"] == name))
}

fn named<'a>(list: &'a [serde_json::Value], name: &str) -> Vec<&'a serde_json::Value> {
    list.iter().filter(|w| w["name"] == name).collect()
}

/// The worker registry, with real data and a fault: every background loop
/// is listed under a stable id; the resync workers follow
/// `resync-worker-count` up and down; a block whose file is gone and that
/// no other node has shows as failed steps of a resync worker, with the
/// block named in the last error; `worker info` prints the same.
#[test]
fn workers_report_their_state_variables_and_errors() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = Cluster::new(1, 1);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "wk");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let body: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(dir.path().join("f"), &body).unwrap();
    aws_ok(&key, &ep, dir.path(), &["s3", "mb", "s3://wkr"]);
    aws_ok(&key, &ep, dir.path(), &["s3", "cp", "f", "s3://wkr/f"]);

    let list = workers(&c, 0);
    for name in [
        "object Merkle updater",
        "object GC",
        "object insert queue",
        "object sync",
        "block_ref sync",
        "Block resync worker #1",
        "Block scrub worker",
        "Lifecycle worker",
    ] {
        assert_eq!(named(&list, name).len(), 1, "{name} in {list:?}");
    }
    let ids: std::collections::BTreeSet<u64> =
        list.iter().map(|w| w["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), list.len(), "ids are unique: {list:?}");
    let again = workers(&c, 0);
    for w in list.iter() {
        let same = named(&again, w["name"].as_str().unwrap());
        assert_eq!(same[0]["id"], w["id"], "ids are stable: {w}");
    }

    // The count of resync workers follows the variable, both ways.
    let set = |v: &str| {
        c.json_api(
            0,
            "SetWorkerVariable",
            serde_json::json!({"variable": "resync-worker-count", "value": v}),
        )
    };
    set("3");
    wait_until("three resync workers", CLUSTER_DEADLINE, || {
        let l = workers(&c, 0);
        (1..=3).all(|i| named(&l, &format!("Block resync worker #{i}")).len() == 1)
    });
    set("1");
    wait_until("one resync worker", CLUSTER_DEADLINE, || {
        let l = workers(&c, 0);
        l.iter()
            .filter(|w| w["name"].as_str().unwrap().starts_with("Block resync"))
            .count()
            == 1
    });
    let o = c.garage(0, &["worker", "set", "resync-worker-count", "0"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("between 1 and"),
        "{o:?}"
    );
    let o = c.garage(0, &["worker", "get", "resync-speed"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("resync-worker-count"),
        "an unknown variable's error lists the known ones: {o:?}"
    );

    // A fault: the block's file is gone and no other node has it.
    let h = blake2sum(&body);
    let file = block_file(&c, 0, &h).expect("the block is stored");
    std::fs::remove_file(&file).unwrap();
    // Its effect is checked below: a resync worker reports the failure.
    c.garage_ok(0, &["repair", "--yes", "blocks"]);
    let mut failed = None;
    wait_until(
        "a resync worker reports the failure",
        CLUSTER_DEADLINE,
        || {
            failed = workers(&c, 0)
                .into_iter()
                .find(|w| w["name"] == "Block resync worker #1" && w["errors"].as_u64() > Some(0));
            failed.is_some()
        },
    );
    let w = failed.unwrap();
    assert!(w["consecutiveErrors"].as_u64().unwrap() >= 1, "{w}");
    let msg = w["lastError"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&h.hex()[..8]),
        "the error names the block: {w}"
    );
    let busy = c.json_api(0, "ListWorkers", serde_json::json!({"errorOnly": true}));
    let busy = busy["success"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert!(
        busy.as_array()
            .unwrap()
            .iter()
            .all(|e| e["consecutiveErrors"].as_u64() > Some(0)),
        "{busy}"
    );
    let info = c.garage_json(0, &["worker", "info", &w["id"].to_string()]);
    let one = &info["success"][c.nodes[0].id()];
    assert!(one["lastError"]["message"].is_string(), "{info}");
    assert!(has_detail(one, "Blocks in error"), "{info}");
    let list = c.garage_json(0, &["worker", "list"]);
    assert!(
        list["success"][c.nodes[0].id()]
            .as_array()
            .is_some_and(|l| l.iter().any(|w| w["name"] == "Block resync worker #1")),
        "{list}"
    );
}

/// Runs `garage repair --yes <what>` and waits for its worker to finish.
fn run_repair(c: &Cluster, what: &str) {
    let runs = || c.counter(0, &format!("repair_runs_total{{repair=\"{what}\"}}"));
    let before = runs();
    c.garage_ok(0, &["repair", "--yes", what]);
    let name = format!("Repair {what}");
    wait_until(&format!("repair {what} ends"), CLUSTER_DEADLINE, || {
        runs() == before + 1 && named(&workers(c, 0), &name).is_empty()
    });
}

/// `repair versions | mpu | block-refs | aliases` on real data, with
/// orphans planted through a gateway at quorum: each orphan older than the
/// grace period is deleted (or relinked), while the stored object, an
/// upload in progress, and an unlisted version younger than the grace
/// period (what an upload in a versioned bucket looks like) are kept; the
/// object reads back whole and the upload completes after the repairs.
/// The leftovers of writes whose coordinator died mid-way go too: a part
/// that never finished (no etag), a block reference whose version does not
/// exist, and one whose version does not list its block.
#[test]
fn repairs_delete_orphans_and_keep_what_is_in_progress() {
    use common::s3::{aws_ok, endpoint, make_key};
    use garage_model::bucket_alias_table::BucketAlias;
    use garage_model::mpu_table::{MpuPartTable, MpuTable, MultipartUpload};
    use garage_model::version_table::read_version;
    use garage_table::EmptyKey;
    let mut c = Cluster::new(1, 1);
    c.env
        .push(("GARAGE_REPAIR_GRACE_SECS".into(), "3600".into()));
    c.env.push(("GARAGE_REPAIR_SETTLE_SECS".into(), "1".into()));
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "rep");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(d.join("f"), &body).unwrap();
    std::fs::write(d.join("part"), vec![3u8; 100_000]).unwrap();
    aws_ok(&key, &ep, d, &["s3", "mb", "s3://rep"]);
    aws_ok(&key, &ep, d, &["s3", "cp", "f", "s3://rep/kept"]);
    let up = aws_ok(
        &key,
        &ep,
        d,
        &[
            "s3api",
            "create-multipart-upload",
            "--bucket",
            "rep",
            "--key",
            "up",
        ],
    );
    let upload_id = serde_json::from_str::<serde_json::Value>(&up).unwrap()["UploadId"]
        .as_str()
        .unwrap()
        .to_string();
    let part = aws_ok(
        &key,
        &ep,
        d,
        &[
            "s3api",
            "upload-part",
            "--bucket",
            "rep",
            "--key",
            "up",
            "--part-number",
            "1",
            "--upload-id",
            &upload_id,
            "--body",
            "part",
        ],
    );
    let etag = serde_json::from_str::<serde_json::Value>(&part).unwrap()["ETag"]
        .as_str()
        .unwrap()
        .to_string();

    let gw = Gateway::join(&c, 2, 2);
    let (versions, refs) = version_tables(&gw);
    let (mpus, parts) = {
        let _rt = gw.rt.enter();
        let mpus = Table::new(
            MpuTable {
                versions: InsertQueue::open(&gw.db).unwrap(),
                parts: InsertQueue::open(&gw.db).unwrap(),
                parts_store: MpuPartTable::store(&gw.db).unwrap(),
            },
            gw.db.clone(),
            gw.system.clone(),
        )
        .unwrap();
        mpus.spawn_workers(&gw.exit);
        let parts = Table::new(
            MpuPartTable {
                versions: InsertQueue::open(&gw.db).unwrap(),
                parts: InsertQueue::open(&gw.db).unwrap(),
                uploads_store: MpuTable::store(&gw.db).unwrap(),
            },
            gw.db.clone(),
            gw.system.clone(),
        )
        .unwrap();
        parts.spawn_workers(&gw.exit);
        (mpus, parts)
    };
    let now = garage_util::time::now_msec();
    let two_hours_ago = now - 2 * 3600 * 1000;
    let bucket = gw
        .block_on(gw.metadata.aliases.get(&EmptyKey, &"rep".to_string()))
        .unwrap()
        .and_then(|a| a.bucket())
        .expect("the bucket's alias");
    let ghost = |k: &str| VersionBacklink::Object {
        bucket_id: bucket,
        key: k.into(),
    };
    let (old_orphan, young_orphan, dead) = (gen_uuid(), gen_uuid(), gen_uuid());
    let dead_ref = BlockRef::new(blake2sum(b"a block of a deleted version"), dead, false);
    let ghost_upload = MultipartUpload::new(gen_uuid(), two_hours_ago, bucket, "ghost-up".into());
    // Leftovers of writes whose coordinator died: a reference with no
    // version, one whose version lists another block, and a part of the
    // real upload that started two hours ago and never finished.
    let no_version_ref = BlockRef::new(blake2sum(b"never written"), gen_uuid(), false);
    let (stale_part, other_block) = (gen_uuid(), blake2sum(b"the block it has"));
    let unlisted_ref = BlockRef::new(blake2sum(b"not in its version"), stale_part, false);
    let real_upload = {
        let bytes = hex::decode(&upload_id).expect("upload ids are hex");
        Uuid::try_from_slice(&bytes).expect("32 bytes")
    };
    let real = gw
        .block_on(mpus.get_quorum(&real_upload, &EmptyKey))
        .unwrap()
        .expect("the real upload");
    // A new cluster lists an upload's parts in the part table.
    assert!(real.parts_apart, "the upload's parts are apart");
    let stale = garage_model::mpu_table::MpuPartEntry::new(
        real_upload,
        garage_model::mpu_table::MpuPartKey {
            part_number: 2,
            timestamp: two_hours_ago,
        },
        garage_model::mpu_table::MpuPart {
            version: stale_part,
            etag: None,
            size: None,
            checksum: None,
        },
    );
    gw.block_on(async {
        let backlink = VersionBacklink::MultipartUpload {
            upload_id: real_upload,
        };
        let key0 = garage_model::version_table::VersionBlockKey {
            part_number: 2,
            offset: 0,
        };
        let block = garage_model::version_table::VersionBlock {
            hash: other_block,
            size: 10,
            ec: None,
            recoded: 0,
        };
        versions
            .insert(&Version::with_block(stale_part, backlink, 0, key0, block))
            .await
            .unwrap();
        parts.insert(&stale).await.unwrap();
        refs.insert(&no_version_ref).await.unwrap();
        refs.insert(&unlisted_ref).await.unwrap();
    });
    gw.block_on(async {
        let mut v = Version::new(old_orphan, ghost("ghost-old"));
        v.created = two_hours_ago;
        versions.insert(&v).await.unwrap();
        versions
            .insert(&Version::new(young_orphan, ghost("ghost-young")))
            .await
            .unwrap();
        versions
            .insert(&Version::deleted(dead, ghost("ghost-dead")))
            .await
            .unwrap();
        refs.insert(&dead_ref).await.unwrap();
        mpus.insert(&ghost_upload).await.unwrap();
        let aliases = &gw.metadata.aliases;
        aliases
            .insert(&BucketAlias::new("ghost-alias", Some(gen_uuid())))
            .await
            .unwrap();
        aliases
            .insert(&BucketAlias::new("second-name", Some(bucket)))
            .await
            .unwrap();
    });
    let deleted = |u: Uuid| {
        gw.block_on(read_version(&versions, &u))
            .unwrap()
            .map(|v| v.deleted.get())
    };

    run_repair(&c, "versions");
    assert_eq!(
        deleted(old_orphan),
        Some(true),
        "an old unlisted version goes"
    );
    assert_eq!(deleted(young_orphan), Some(false), "a young one stays");

    run_repair(&c, "mpu");
    let m = gw
        .block_on(mpus.get_quorum(&ghost_upload.upload_id, &EmptyKey))
        .unwrap()
        .unwrap();
    assert!(m.deleted.get(), "an upload without its object version goes");
    let uploads = aws_ok(
        &key,
        &ep,
        d,
        &["s3api", "list-multipart-uploads", "--bucket", "rep"],
    );
    assert!(
        uploads.contains(&upload_id),
        "the real upload stays: {uploads}"
    );
    assert_eq!(
        deleted(stale_part),
        Some(true),
        "a part that never finished, started before the grace period, goes"
    );

    run_repair(&c, "block-refs");
    let r = gw
        .block_on(refs.get_quorum(&dead_ref.block, &dead))
        .unwrap()
        .unwrap();
    assert!(r.deleted.get(), "the reference of a deleted version goes");
    for (r, what) in [
        (&no_version_ref, "a reference whose version does not exist"),
        (
            &unlisted_ref,
            "a reference whose version does not list its block",
        ),
    ] {
        let r = gw
            .block_on(refs.get_quorum(&r.block, &r.version))
            .unwrap()
            .unwrap();
        assert!(r.deleted.get(), "{what} goes");
    }
    // The references of what is stored, and of the upload's finished
    // part, stay.
    for (data, what) in [
        (body.clone(), "the stored object"),
        (vec![3u8; 100_000], "the finished part"),
    ] {
        let info = c.garage_json(0, &["block", "info", &blake2sum(&data).hex()]);
        assert_eq!(
            info["success"][c.nodes[0].id()]["refcount"],
            1,
            "the block of {what} keeps its reference: {info}"
        );
    }
    let stats = c.garage_json(0, &["stats"]);
    assert!(
        stats["success"][c.nodes[0].id()]["resyncDue"].is_u64(),
        "stats count what is due: {stats}"
    );

    run_repair(&c, "aliases");
    let a = gw
        .block_on(
            gw.metadata
                .aliases
                .get_quorum(&EmptyKey, &"ghost-alias".to_string()),
        )
        .unwrap()
        .unwrap();
    assert_eq!(a.bucket(), None, "a name of no bucket is removed");
    let info = c.garage_json(0, &["bucket", "info", "rep"]);
    assert!(
        info["globalAliases"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == "second-name")),
        "the bucket lists its name: {info}"
    );

    // What was kept still works.
    aws_ok(&key, &ep, d, &["s3", "cp", "s3://rep/kept", "back"]);
    assert!(
        std::fs::read(d.join("back")).unwrap() == body,
        "the object reads back whole"
    );
    std::fs::write(
        d.join("parts.json"),
        format!(r#"{{"Parts":[{{"PartNumber":1,"ETag":{etag:?}}}]}}"#),
    )
    .unwrap();
    aws_ok(
        &key,
        &ep,
        d,
        &[
            "s3api",
            "complete-multipart-upload",
            "--bucket",
            "rep",
            "--key",
            "up",
            "--upload-id",
            &upload_id,
            "--multipart-upload",
            "file://parts.json",
        ],
    );
    aws_ok(&key, &ep, d, &["s3", "cp", "s3://rep/up", "up-back"]);
    assert_eq!(
        std::fs::read(d.join("up-back")).unwrap(),
        vec![3u8; 100_000]
    );
}

/// `garage offline-repair object-counters`: refused while the daemon runs
/// and without --yes; on a stopped node whose counters were broken in its
/// real LMDB file (and the wrong value queued for publication, as a bug
/// would), it recounts from the object table, and after a restart
/// `bucket info` shows the true counts again.
#[test]
fn offline_repair_recounts_object_counters() {
    use common::s3::{aws_ok, endpoint, make_key};
    use garage_model::counter_table::{CounterTable, LocalCounters};
    let mut c = Cluster::new(1, 1);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "cnt");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a"), vec![1u8; 1000]).unwrap();
    std::fs::write(d.join("b"), vec![2u8; 3000]).unwrap();
    aws_ok(&key, &ep, d, &["s3", "mb", "s3://counted"]);
    aws_ok(&key, &ep, d, &["s3", "cp", "a", "s3://counted/a"]);
    aws_ok(&key, &ep, d, &["s3", "cp", "b", "s3://counted/b"]);
    let counts = |c: &Cluster| {
        let info = c.garage_json(0, &["bucket", "info", "counted"]);
        let get = |f: &str| {
            info[f]
                .as_i64()
                .unwrap_or_else(|| panic!("no {f} in {info}"))
        };
        (get("objects"), get("bytes"))
    };
    wait_until("the counts are published", CLUSTER_DEADLINE, || {
        counts(&c) == (2, 4000)
    });
    let o = c.garage(0, &["offline-repair", "--yes", "object-counters"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("running"),
        "refused while the daemon runs: {o:?}"
    );
    c.kill(0);
    let o = c.garage(0, &["offline-repair", "object-counters"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--yes"),
        "{o:?}"
    );

    let meta = c.nodes[0].dir.join("meta");
    let engine = garage_db::Engine::Lmdb;
    {
        let db = garage_db::open(
            engine,
            &engine.db_path(&meta),
            &garage_db::OpenOptions::default(),
        )
        .unwrap();
        let local = LocalCounters::open(&db).unwrap();
        let queue: InsertQueue<CounterTable> = InsertQueue::open(&db).unwrap();
        let node: Uuid = c.nodes[0].id().parse().unwrap();
        let (bucket, _) = local.tree.iter().next().unwrap().unwrap();
        let bucket = Uuid::try_from_slice(&bucket).unwrap();
        let wrong: garage_model::counter_table::Counts = [
            ("objects".to_string(), 40),
            ("bytes".to_string(), 7),
            ("unfinished_uploads".to_string(), 3),
        ]
        .into_iter()
        .collect();
        db.transaction(|tx| -> garage_db::TxResult<(), garage_db::Error> {
            let e = local.set(tx, node, bucket, &wrong)?;
            queue.push(tx, &e)?;
            Ok(())
        })
        .unwrap();
    }
    let out = c.garage_ok(0, &["offline-repair", "--yes", "object-counters"]);
    assert!(
        out.contains("1 buckets recounted, 1 counts corrected"),
        "{out}"
    );
    let again = c.garage_ok(0, &["offline-repair", "--yes", "object-counters"]);
    assert!(again.contains("0 counts corrected"), "{again}");
    c.start(0);
    wait_until("the true counts are published", CLUSTER_DEADLINE, || {
        counts(&c) == (2, 4000)
    });
}

/// Starts `repair --yes <what>` on `node` for each of `whats`.
fn start_repairs(c: &Cluster, node: usize, whats: &[&str]) {
    for what in whats {
        // That each ran to its end is checked by its counters.
        c.garage_ok(node, &["repair", "--yes", what]);
    }
}

/// Waits until `node` runs no metadata repair any more.
fn wait_repairs_end(c: &Cluster, node: usize) {
    wait_until(
        &format!("the repairs of node {node} end"),
        CLUSTER_DEADLINE,
        || {
            !workers(c, node)
                .iter()
                .any(|w| w["name"].as_str().is_some_and(|n| n.starts_with("Repair ")))
        },
    );
}

/// The metadata repairs delete nothing live, even run on every node at
/// once with no grace period, while a node joins in a fourth zone (a
/// layout change in progress) and another is killed in the middle of its
/// repairs. Blocks go one second after nothing references them
/// (`GARAGE_BLOCK_DELETE_DELAY_SECS`), so a reference deleted by mistake
/// would lose data. The data: inline, one-block and three-block objects,
/// an overwritten and a deleted one, a completed multipart upload (whose
/// upload entry the mpu repair removes), and a versioned bucket with three
/// versions of a key and a deleted key. Afterwards every object and every
/// kept version reads back byte for byte through each of the four nodes.
#[test]
fn repairs_on_every_node_during_a_layout_change_and_a_kill_keep_live_data() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = Cluster::new(4, 3);
    c.env.push(("GARAGE_REPAIR_GRACE_SECS".into(), "0".into()));
    c.env.push(("GARAGE_REPAIR_SETTLE_SECS".into(), "1".into()));
    c.env
        .push(("GARAGE_BLOCK_DELETE_DELAY_SECS".into(), "1".into()));
    c.start_first(3);
    wait_until("three nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 3
    });
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = make_key(&c, "live");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = |seed: u32, len: usize| -> Vec<u8> {
        let mut x = 0x9e37_79b9u32 ^ seed.wrapping_mul(0x85eb_ca6b);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    };
    // Writes `body` as bucket/key; its version id, if the bucket has them.
    let put = |bucket: &str, k: &str, body: &[u8]| -> Option<String> {
        std::fs::write(d.join("body"), body).unwrap();
        let out = aws_ok(
            &key,
            &ep,
            d,
            &[
                "s3api",
                "put-object",
                "--bucket",
                bucket,
                "--key",
                k,
                "--body",
                "body",
            ],
        );
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["VersionId"]
            .as_str()
            .map(str::to_string)
    };
    let s3 = |args: &[&str]| aws_ok(&key, &ep, d, args);
    s3(&["s3", "mb", "s3://plain"]);
    s3(&["s3", "mb", "s3://versioned"]);
    s3(&[
        "s3api",
        "put-bucket-versioning",
        "--bucket",
        "versioned",
        "--versioning-configuration",
        "Status=Enabled",
    ]);

    // (bucket, key, version id or none for the current one, bytes)
    let mut expect: Vec<(&str, &str, Option<String>, Vec<u8>)> = Vec::new();
    for (k, seed, len) in [
        ("small", 1, 100),
        ("one-block", 2, 300_000),
        ("three-blocks", 3, 2_500_000),
    ] {
        put("plain", k, &data(seed, len));
        expect.push(("plain", k, None, data(seed, len)));
    }
    put("plain", "overwritten", &data(4, 400_000));
    put("plain", "overwritten", &data(5, 700_000));
    expect.push(("plain", "overwritten", None, data(5, 700_000)));
    put("plain", "deleted", &data(6, 200_000));
    s3(&["s3", "rm", "s3://plain/deleted"]);
    // A multipart upload of two parts, completed.
    let up: serde_json::Value = serde_json::from_str(&s3(&[
        "s3api",
        "create-multipart-upload",
        "--bucket",
        "plain",
        "--key",
        "mpu",
    ]))
    .unwrap();
    let upload_id = up["UploadId"].as_str().unwrap().to_string();
    let parts = [data(7, 5 << 20), data(8, 1_000_000)];
    let mut etags = Vec::new();
    for (n, p) in parts.iter().enumerate() {
        std::fs::write(d.join("part"), p).unwrap();
        let r: serde_json::Value = serde_json::from_str(&s3(&[
            "s3api",
            "upload-part",
            "--bucket",
            "plain",
            "--key",
            "mpu",
            "--upload-id",
            &upload_id,
            "--part-number",
            &(n + 1).to_string(),
            "--body",
            "part",
        ]))
        .unwrap();
        etags.push(r["ETag"].as_str().unwrap().to_string());
    }
    let done = serde_json::json!({"Parts": etags.iter().enumerate()
        .map(|(n, e)| serde_json::json!({"PartNumber": n + 1, "ETag": e})).collect::<Vec<_>>()});
    s3(&[
        "s3api",
        "complete-multipart-upload",
        "--bucket",
        "plain",
        "--key",
        "mpu",
        "--upload-id",
        &upload_id,
        "--multipart-upload",
        &done.to_string(),
    ]);
    expect.push(("plain", "mpu", None, parts.concat()));
    // Versions: three of "v" (one inline), and "gone" deleted (a marker).
    for (seed, len) in [(10, 200_000), (11, 50), (12, 1_200_000)] {
        let v = put("versioned", "v", &data(seed, len)).expect("a version id");
        expect.push(("versioned", "v", Some(v), data(seed, len)));
    }
    let gone = put("versioned", "gone", &data(13, 150_000)).expect("a version id");
    expect.push(("versioned", "gone", Some(gone), data(13, 150_000)));
    s3(&["s3", "rm", "s3://versioned/gone"]);

    // Node 3 joins in a fourth zone and node 2 is killed; at once, while
    // the layout change is in progress and with one copy of every
    // partition down, nodes 0 and 1 run the three deleting repairs (each
    // decides by quorum reads). Then node 2 comes back, and it and the
    // new node (still syncing) run them too.
    c.start(3);
    wait_until("four nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 4
    });
    c.apply_layout(&["dc1", "dc2", "dc3", "dc4"], "1G");
    let repairs = ["versions", "mpu", "block-refs"];
    c.kill(2);
    for node in [0, 1] {
        start_repairs(&c, node, &repairs);
    }
    for node in [0, 1] {
        wait_repairs_end(&c, node);
    }
    c.start(2);
    for node in [2, 3] {
        start_repairs(&c, node, &repairs);
        wait_repairs_end(&c, node);
    }
    // Each repair walked live entries and removed none of them (the
    // node's repair counters, read through `garage --json stats`).
    for node in [0, 1, 2] {
        for what in ["versions", "block-refs"] {
            let series = |name: &str| c.counter(node, &format!("{name}{{repair=\"{what}\"}}"));
            let (runs, checked, fixed) = (
                series("repair_runs_total"),
                series("repair_checked_total"),
                series("repair_fixed_total"),
            );
            assert!(
                runs == 1 && checked > 0 && fixed == 0,
                "node {node}, repair {what}: {runs} runs, {checked} checked, {fixed} fixed"
            );
        }
    }
    // Let resyncs and the block deletions they decide run out.
    wait_until("every resync queue is empty", CLUSTER_DEADLINE, || {
        (0..4).all(|n| {
            workers(&c, n)
                .iter()
                .filter(|w| {
                    w["name"]
                        .as_str()
                        .is_some_and(|s| s.starts_with("Block resync"))
                })
                .all(|w| w["queueLength"].as_u64().unwrap_or(0) == 0)
        })
    });

    // Read back through every node by the `aws-sdk-s3` crate, in-process
    // (48 aws-cli runs took about 50 s).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for node in 0..4 {
        let cl = common::s3::sdk_client(&c, node, &key);
        rt.block_on(async {
            for (bucket, k, version, body) in &expect {
                let got = cl
                    .get_object()
                    .bucket(*bucket)
                    .key(*k)
                    .set_version_id(version.clone())
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("node {node}: {bucket}/{k} {version:?}: {e:?}"))
                    .body
                    .collect()
                    .await
                    .unwrap_or_else(|e| panic!("node {node}: {bucket}/{k} {version:?}: {e:?}"))
                    .to_vec();
                assert!(
                    &got == body,
                    "node {node}: {bucket}/{k} {version:?}: {} bytes back, {} written",
                    got.len(),
                    body.len()
                );
            }
            let gone = cl.head_object().bucket("plain").key("deleted").send().await;
            assert!(gone.is_err(), "node {node}: plain/deleted is back");
            let listed = cl
                .list_object_versions()
                .bucket("versioned")
                .send()
                .await
                .unwrap_or_else(|e| panic!("node {node}: listing the versions: {e:?}"));
            assert_eq!(
                (listed.versions().len(), listed.delete_markers().len()),
                (4, 1),
                "node {node}: {listed:?}"
            );
        });
    }
}

/// The blocks of 1 MiB chunks of `data` (random data: stored as is).
fn chunk_hashes(data: &[u8]) -> Vec<Hash> {
    data.chunks(1 << 20).map(blake2sum).collect()
}

/// When a multipart upload ends, the parts it does not keep release their
/// blocks on every node, through the part table (`multipart_part`: a new
/// cluster lists parts there): a part written twice keeps only its second
/// write once completed, and an aborted upload keeps nothing. The kept
/// parts' blocks stay and read back. Parts are written through two
/// different nodes.
#[test]
fn parts_an_upload_does_not_keep_release_their_blocks() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = Cluster::new(3, 3);
    c.env
        .push(("GARAGE_BLOCK_DELETE_DELAY_SECS".into(), "1".into()));
    start_three(&mut c);
    let key = make_key(&c, "parts");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let random = |n: usize| -> Vec<u8> { (0..n).map(|_| rand::random::<u8>()).collect() };
    let (first, replaced, second, dropped) = (
        random(5 << 20),
        random(200_000),
        random(300_000),
        random(1_500_000),
    );
    for (name, data) in [
        ("first", &first),
        ("replaced", &replaced),
        ("second", &second),
        ("dropped", &dropped),
    ] {
        std::fs::write(d.join(name), data).unwrap();
    }
    aws_ok(&key, &eps[0], d, &["s3", "mb", "s3://parts"]);
    let create = |ep: &str, k: &str| -> String {
        let out = aws_ok(
            &key,
            ep,
            d,
            &[
                "s3api",
                "create-multipart-upload",
                "--bucket",
                "parts",
                "--key",
                k,
            ],
        );
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["UploadId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let put_part = |ep: &str, k: &str, id: &str, n: &str, file: &str| -> String {
        let out = aws_ok(
            &key,
            ep,
            d,
            &[
                "s3api",
                "upload-part",
                "--bucket",
                "parts",
                "--key",
                k,
                "--upload-id",
                id,
                "--part-number",
                n,
                "--body",
                file,
            ],
        );
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["ETag"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let on_every_node = |h: &Hash| (0..3).all(|n| block_file(&c, n, h).is_some());
    let on_no_node = |h: &Hash| (0..3).all(|n| block_file(&c, n, h).is_none());

    // Completed: part 2 written twice (through two nodes), the second kept.
    let kept = create(&eps[0], "kept");
    let e1 = put_part(&eps[0], "kept", &kept, "1", "first");
    put_part(&eps[1], "kept", &kept, "2", "replaced");
    let e2 = put_part(&eps[2], "kept", &kept, "2", "second");
    // Aborted: its only part.
    let gone = create(&eps[1], "gone");
    put_part(&eps[1], "gone", &gone, "1", "dropped");
    wait_until(
        "the parts' blocks are on every node",
        CLUSTER_DEADLINE,
        || {
            chunk_hashes(&replaced)
                .iter()
                .chain(&chunk_hashes(&dropped))
                .all(on_every_node)
        },
    );
    let parts = format!(
        r#"{{"Parts":[{{"PartNumber":1,"ETag":{e1:?}}},{{"PartNumber":2,"ETag":{e2:?}}}]}}"#
    );
    aws_ok(
        &key,
        &eps[1],
        d,
        &[
            "s3api",
            "complete-multipart-upload",
            "--bucket",
            "parts",
            "--key",
            "kept",
            "--upload-id",
            &kept,
            "--multipart-upload",
            &parts,
        ],
    );
    aws_ok(
        &key,
        &eps[2],
        d,
        &[
            "s3api",
            "abort-multipart-upload",
            "--bucket",
            "parts",
            "--key",
            "gone",
            "--upload-id",
            &gone,
        ],
    );
    wait_until(
        "the replaced and the aborted parts' blocks are deleted on every node",
        CLUSTER_DEADLINE,
        || {
            chunk_hashes(&replaced)
                .iter()
                .chain(&chunk_hashes(&dropped))
                .all(on_no_node)
        },
    );
    for h in chunk_hashes(&first).iter().chain(&chunk_hashes(&second)) {
        assert!(on_every_node(h), "a kept part's block is deleted");
    }
    let mut whole = first.clone();
    whole.extend_from_slice(&second);
    for ep in &eps {
        aws_ok(
            &key,
            ep,
            d,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "parts",
                "--key",
                "kept",
                "out",
            ],
        );
        assert!(
            std::fs::read(d.join("out")).unwrap() == whole,
            "bytes through {ep}"
        );
    }
    let uploads = aws_ok(
        &key,
        &eps[0],
        d,
        &["s3api", "list-multipart-uploads", "--bucket", "parts"],
    );
    assert!(!uploads.contains("UploadId"), "no upload left: {uploads}");
}
