//! End to end: the replicated metadata tables, through real `garage`
//! processes and the `garage key` / `garage bucket` commands.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::{table_stats, wait_until, Cluster, CLUSTER_DEADLINE};
use common::gateway::Gateway;
use common::stdout;

/// Starts `n` of the cluster's nodes in zones dc1.. and applies a layout.
fn cluster(total: usize, started: usize) -> Cluster {
    let mut c = Cluster::new(total, 3);
    c.env
        .push(("GARAGE_TABLE_GC_DELAY_SECS".into(), "3".into()));
    c.env
        .push(("GARAGE_TABLE_SYNC_INTERVAL_SECS".into(), "30".into()));
    c.start_first(started);
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == started
    });
    let zones: Vec<String> = (0..started).map(|i| format!("dc{}", i + 1)).collect();
    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
    c.apply_layout(&zones, "1G");
    c
}

/// The key ids node `i` lists (ListKeys through `garage json-api`), or
/// none if it cannot answer.
fn key_ids(c: &Cluster, i: usize) -> Option<BTreeSet<String>> {
    let o = c.garage(i, &["json-api", "ListKeys"]);
    if !o.status.success() {
        return None;
    }
    let list: serde_json::Value = serde_json::from_str(&stdout(&o)).ok()?;
    Some(
        list.as_array()?
            .iter()
            .filter_map(|k| k["id"].as_str().map(String::from))
            .collect(),
    )
}

fn create_key(c: &Cluster, i: usize, name: &str) -> String {
    let k = c.json_api(i, "CreateKey", serde_json::json!({ "name": name }));
    k["accessKeyId"]
        .as_str()
        .unwrap_or_else(|| panic!("no key id in {k}"))
        .to_string()
}

/// Whether node `i` lists a bucket with global alias `name` (`garage
/// --json bucket list`).
fn bucket_listed(c: &Cluster, i: usize, name: &str) -> bool {
    let list = c.garage_json(i, &["bucket", "list"]);
    list.as_array()
        .unwrap_or_else(|| panic!("bucket list is not a list: {list}"))
        .iter()
        .any(|b| {
            b["globalAliases"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(name)))
        })
}

/// Whether node `i` sees a single live layout version, no layout change in
/// progress (GetClusterLayoutHistory: no `updateTrackers`).
fn layout_stable(c: &Cluster, i: usize) -> bool {
    let h = c.json_api(i, "GetClusterLayoutHistory", serde_json::json!({}));
    h["updateTrackers"].is_null()
}

/// Waits until the given nodes report equal Merkle digests for every table.
fn wait_converged(c: &Cluster, nodes: &[usize], deadline: Duration) -> Duration {
    wait_until("Merkle digests equal on every node", deadline, || {
        let all: Vec<_> = nodes.iter().map(|i| table_stats(c, *i)).collect();
        !all[0].is_empty() && all.iter().all(|s| *s == all[0])
    })
}

#[test]
fn replicate_survive_a_kill_and_converge_after_restart() {
    let mut c = cluster(3, 3);
    let k = create_key(&c, 0, "alice");
    for i in 1..3 {
        let info = c.garage_json(i, &["key", "info", "alice"]);
        assert_eq!(
            info["accessKeyId"].as_str(),
            Some(k.as_str()),
            "node {i}: {info}"
        );
    }
    c.garage_ok(1, &["bucket", "create", "photos"]);
    c.garage_ok(
        2,
        &[
            "bucket", "allow", "--read", "--write", "photos", "--key", "alice",
        ],
    );
    let info = c.garage_json(0, &["bucket", "info", "photos"]);
    let keys = info["keys"].as_array().expect("bucket info lists keys");
    assert!(
        keys.iter()
            .any(|e| e["accessKeyId"].as_str() == Some(k.as_str())
                && e["permissions"]["read"] == true
                && e["permissions"]["write"] == true),
        "{info}"
    );

    // One node down: writes and reads still work through the others.
    c.kill(2);
    let k2 = create_key(&c, 0, "bob");
    c.garage_ok(1, &["bucket", "create", "videos"]);
    let ids = key_ids(&c, 1).unwrap();
    assert!(ids.contains(&k) && ids.contains(&k2));
    assert!(bucket_listed(&c, 0, "videos"));

    // Restarted, it converges without any client touching the data.
    c.start(2);
    let t = wait_converged(&c, &[0, 1, 2], Duration::from_secs(60));
    eprintln!("restarted node converged after {t:?}");
    let info = c.garage_json(2, &["key", "info", "bob"]);
    assert_eq!(info["accessKeyId"].as_str(), Some(k2.as_str()), "{info}");
}

#[test]
fn an_isolated_node_catches_up_after_the_partition_heals() {
    let c = cluster(3, 3);
    create_key(&c, 0, "before");
    c.set_isolated(2, true);
    wait_until("node 0 sees node 2 failed", Duration::from_secs(20), || {
        c.health(0).1.len() == 1
    });
    // The majority keeps working.
    let during: Vec<String> = (0..5)
        .map(|i| create_key(&c, i % 2, &format!("during{i}")))
        .collect();
    c.garage_ok(1, &["bucket", "create", "made-during-partition"]);
    c.set_isolated(2, false);
    let o = c.garage(0, &["repair", "tables"]);
    assert!(!o.status.success(), "repair needs --yes");
    let out = c.garage_ok(0, &["repair", "--yes", "tables"]);
    assert!(out.contains("Repair launched"), "{out}");
    let t = wait_converged(&c, &[0, 1, 2], Duration::from_secs(60));
    eprintln!("healed node converged after {t:?}");
    let ids = key_ids(&c, 2).unwrap();
    for k in during.iter() {
        assert!(ids.contains(k), "{k} missing on node 2");
    }
    assert!(bucket_listed(&c, 2, "made-during-partition"));
}

#[test]
fn a_deleted_key_never_comes_back_from_a_node_that_missed_the_delete() {
    let mut c = cluster(3, 3);
    let k = create_key(&c, 0, "doomed");
    wait_converged(&c, &[0, 1, 2], Duration::from_secs(30));
    c.kill(2);
    c.garage_ok(0, &["key", "delete", "--yes", &k]);
    // The GC delay (3 s) passes; node 2 lacks the tombstone, so it stays.
    std::thread::sleep(Duration::from_secs(5));
    let s = table_stats(&c, 0);
    assert_eq!(s["key"].0, 1, "the tombstone must wait for node 2: {s:?}");
    // Node 2 returns with the old key; the tombstone reaches it, then the
    // GC removes it everywhere, and the key never reappears.
    c.start(2);
    wait_until(
        "tombstone collected on every node",
        Duration::from_secs(90),
        || (0..3).all(|i| table_stats(&c, i).get("key").map(|s| s.0) == Some(0)),
    );
    for i in 0..3 {
        assert!(
            !key_ids(&c, i).unwrap().contains(&k),
            "key back on node {i}"
        );
        let o = c.garage(i, &["key", "info", &k]);
        assert!(!o.status.success());
    }
}

#[test]
fn layout_changes_under_a_steady_writer_lose_nothing() {
    let mut c = cluster(5, 3);
    // A gateway node in this process writes keys without pause.
    let gw = Gateway::join(&c, 4, 2);
    let keys = gw.metadata.keys.clone();

    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let failed = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, failed, stop, keys) =
            (acked.clone(), failed.clone(), stop.clone(), keys.clone());
        let handle = gw.rt.handle().clone();
        std::thread::spawn(move || {
            handle.block_on(async move {
                use futures::stream::StreamExt;
                let mut n = 0usize;
                // At least 10 000 acknowledged entries, and until the layout
                // changes are done; bounded so a stuck test still ends.
                while (acked.lock().unwrap().len() < 10_000 || !stop.load(Ordering::Relaxed))
                    && n < 200_000
                {
                    let batch: Vec<_> = (0..50)
                        .map(|i| garage_model::key_table::Key::new(&format!("w{}", n + i)))
                        .collect();
                    n += batch.len();
                    futures::stream::iter(batch)
                        .for_each_concurrent(8, |k| {
                            let keys = keys.clone();
                            let acked = acked.clone();
                            let failed = failed.clone();
                            async move {
                                match keys.insert(&k).await {
                                    Ok(()) => acked.lock().unwrap().push(k.key_id.clone()),
                                    Err(e) => failed.lock().unwrap().push(e.to_string()),
                                }
                            }
                        })
                        .await;
                }
            })
        })
    };

    // 3 -> 5 nodes.
    wait_until("writer under way", CLUSTER_DEADLINE, || {
        acked.lock().unwrap().len() > 500
    });
    c.start(3);
    c.start(4);
    wait_until("all nodes up", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 6
    });
    for (i, z) in [(3, "dc4"), (4, "dc5")] {
        let id = c.nodes[i].id().to_string();
        c.garage_ok(0, &["layout", "assign", "-z", z, "-c", "1G", &id[..16]]);
    }
    c.garage_ok(0, &["layout", "apply", "--version", "3"]);
    let stable = |c: &Cluster| layout_stable(c, 0);
    wait_until(
        "layout 3 transition finished",
        Duration::from_secs(120),
        || stable(&c),
    );
    // 5 -> 4 nodes.
    let removed = c.nodes[1].id().to_string();
    c.garage_ok(0, &["layout", "remove", &removed[..16]]);
    c.garage_ok(0, &["layout", "apply", "--version", "4"]);
    wait_until(
        "layout 4 transition finished",
        Duration::from_secs(120),
        || stable(&c),
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    let acked = acked.lock().unwrap().clone();
    let failed = failed.lock().unwrap().clone();
    eprintln!(
        "writer: {} acknowledged, {} failed (first: {:?})",
        acked.len(),
        failed.len(),
        failed.first()
    );
    assert!(acked.len() >= 10_000);
    for i in 0..5 {
        let ids = key_ids(&c, i).expect("key list works on every node");
        let missing: Vec<_> = acked.iter().filter(|k| !ids.contains(*k)).collect();
        assert!(
            missing.is_empty(),
            "node {i} lacks {} acknowledged keys, e.g. {:?}",
            missing.len(),
            missing.first()
        );
    }
}

/// Issue 14, bug 1: adding a node in a new zone, then removing a node,
/// with objects stored: every object stays readable, with its bytes,
/// through every node. (On the code before the fix, the nodes that
/// offloaded partitions to the new node deleted the versions of every
/// object cluster-wide: 320 of 320 unreadable.) Then two of the three
/// nodes holding the data die for good and are replaced
/// (`skip-dead-nodes`): everything is rebuilt from the one survivor.
#[test]
fn objects_survive_layout_changes_and_the_loss_of_two_nodes() {
    use common::s3::{aws_ok, endpoint, make_key};
    let mut c = cluster(5, 3);
    let key = make_key(&c, "layout");
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().join("up");
    // 8 buckets of 40 objects of 10 KB, each with its own bytes.
    let buckets: Vec<String> = (0..8).map(|b| format!("layout-{b}")).collect();
    for (b, bucket) in buckets.iter().enumerate() {
        let src = up.join(bucket);
        std::fs::create_dir_all(&src).unwrap();
        for o in 0..40 {
            let bytes: Vec<u8> = (0..10_000u32)
                .map(|i| (i.wrapping_mul(31) as u8) ^ ((b * 40 + o) as u8))
                .collect();
            std::fs::write(src.join(format!("o{o:02}")), bytes).unwrap();
        }
        let e = endpoint(&c, 0);
        aws_ok(
            &key,
            &e,
            dir.path(),
            &["s3", "mb", &format!("s3://{bucket}")],
        );
        aws_ok(
            &key,
            &e,
            dir.path(),
            &[
                "s3",
                "cp",
                "--recursive",
                src.to_str().unwrap(),
                &format!("s3://{bucket}/"),
            ],
        );
    }
    // Every object, through node i, with exactly the bytes written (each
    // bucket listed, each object read, by the `aws-sdk-s3` crate: 14
    // checks of 320 objects through aws-cli's recursive copies took about
    // 150 s of the suite); returns how many are missing or wrong.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let check = |c: &Cluster, i: usize| -> usize {
        let cl = common::s3::sdk_client(c, i, &key);
        rt.block_on(async {
            let mut bad = 0;
            for bucket in buckets.iter() {
                let listed: BTreeSet<String> =
                    match cl.list_objects_v2().bucket(bucket).send().await {
                        Ok(l) => l
                            .contents()
                            .iter()
                            .filter_map(|o| o.key().map(String::from))
                            .collect(),
                        Err(_) => BTreeSet::new(),
                    };
                for o in 0..40 {
                    let name = format!("o{o:02}");
                    let want = std::fs::read(up.join(bucket).join(&name)).unwrap();
                    let got = match cl.get_object().bucket(bucket).key(&name).send().await {
                        Ok(r) => r.body.collect().await.ok().map(|b| b.to_vec()),
                        Err(_) => None,
                    };
                    if !listed.contains(&name) || got != Some(want) {
                        bad += 1;
                    }
                }
            }
            bad
        })
    };
    for i in 0..3 {
        assert_eq!(check(&c, i), 0, "before any change, through node {i}");
    }
    let stable = |c: &Cluster| layout_stable(c, 0);
    // The nodes that no longer hold a partition dropped their copy: the
    // 320 object entries are stored exactly 3 times in all.
    let wait_offloaded = |c: &Cluster| {
        wait_until("object entries offloaded", Duration::from_secs(180), || {
            let copies: usize = (0..5)
                .map(|i| table_stats(c, i).get("object").map_or(0, |s| s.0))
                .sum();
            copies == 3 * 320
        });
    };

    // A 4th node in a new zone.
    c.start(3);
    wait_until("node 0 sees 4 nodes", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 4
    });
    let id3 = c.nodes[3].id().to_string();
    c.garage_ok(
        0,
        &["layout", "assign", "-z", "dc4", "-c", "1G", &id3[..16]],
    );
    c.garage_ok(0, &["layout", "apply", "--version", "2"]);
    wait_until(
        "layout 2 transition finished",
        Duration::from_secs(180),
        || stable(&c),
    );
    wait_offloaded(&c);
    for i in 0..4 {
        assert_eq!(check(&c, i), 0, "after adding dc4, through node {i}");
    }

    // Then node 1 leaves the layout.
    let id1 = c.nodes[1].id().to_string();
    c.garage_ok(0, &["layout", "remove", &id1[..16]]);
    c.garage_ok(0, &["layout", "apply", "--version", "3"]);
    wait_until(
        "layout 3 transition finished",
        Duration::from_secs(180),
        || stable(&c),
    );
    wait_offloaded(&c);
    for i in 0..4 {
        assert_eq!(check(&c, i), 0, "after removing node 1, through node {i}");
    }

    // Nodes 2 and 3 (zones dc3 and dc4) die for good; node 1 comes back
    // in zone dc2 and a new node 4 joins in zone dc5.
    c.kill(2);
    c.kill(3);
    c.start(4);
    let id4 = c.nodes[4].id().to_string();
    wait_until("node 0 sees node 4", CLUSTER_DEADLINE, || {
        c.health(0).0.contains(&id4[..16].to_string())
    });
    for (id, z) in [(&id1, "dc2"), (&id4, "dc5")] {
        c.garage_ok(0, &["layout", "assign", "-z", z, "-c", "1G", &id[..16]]);
    }
    for id in [c.nodes[2].id().to_string(), id3] {
        c.garage_ok(0, &["layout", "remove", &id[..16]]);
    }
    c.garage_ok(0, &["layout", "apply", "--version", "4"]);
    // Two of the three holders are dead: garage cannot know that the
    // survivor holds every acknowledged write (a write quorum may have
    // been the two dead nodes), so the operator says so.
    c.garage_ok(
        0,
        &[
            "layout",
            "skip-dead-nodes",
            "--version",
            "4",
            "--allow-missing-data",
        ],
    );
    wait_until("new nodes synced", Duration::from_secs(180), || stable(&c));
    wait_offloaded(&c);
    for i in [0, 1, 4] {
        assert_eq!(
            check(&c, i),
            0,
            "after replacing two dead nodes, through node {i}"
        );
    }
}

/// A GET of a multi-block object reads the version's block list from the
/// node's own copy when it holds it whole (no second round across sites),
/// and from a quorum when its copy misses the version: here node 2 could
/// not reach node 0 while node 0 wrote the object (node 1 reached both),
/// so its copy has nothing of it. Both answers are the object's bytes, and
/// each GET counts where its list came from.
#[test]
fn a_get_reads_its_block_list_locally_when_it_can() {
    // No anti-entropy pass during the test: it would hand node 2 the
    // version it missed.
    let mut c = Cluster::new(3, 3);
    c.env
        .push(("GARAGE_TABLE_SYNC_INTERVAL_SECS".into(), "3600".into()));
    c.start_all();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 3
    });
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = common::s3::make_key(&c, "near");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (s0, s2) = (
        common::s3::sdk_client(&c, 0, &key),
        common::s3::sdk_client(&c, 2, &key),
    );
    let data = |seed: u8| -> Vec<u8> {
        (0..(5u32 << 20) + 777)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ seed)
            .collect()
    };
    let put = |name: &str, bytes: &[u8]| {
        rt.block_on(
            s0.put_object()
                .bucket("near")
                .key(name)
                .body(bytes.to_vec().into())
                .send(),
        )
        .unwrap();
    };
    let get = |name: &str| -> Vec<u8> {
        rt.block_on(async {
            let r = s2
                .get_object()
                .bucket("near")
                .key(name)
                .send()
                .await
                .unwrap();
            r.body.collect().await.unwrap().to_vec()
        })
    };
    let counts = |c: &Cluster| {
        (
            c.counter(2, "api_get_block_lists_local_total"),
            c.counter(2, "api_get_block_lists_quorum_total"),
        )
    };
    rt.block_on(s0.create_bucket().bucket("near").send())
        .unwrap();

    // Written with every node up: node 2's copy lists every block (each
    // write goes to every replica; the quorum acknowledges it), so its GET
    // reads the list locally once the third copy has landed.
    let whole = data(1);
    put("whole", &whole);
    wait_until(
        "node 2 reads the list of whole from its copy",
        CLUSTER_DEADLINE,
        || {
            let before = counts(&c);
            assert_eq!(get("whole"), whole, "whole through node 2");
            counts(&c).0 > before.0
        },
    );

    // Written while node 2 could not reach node 0: its copy misses the
    // version, and the list comes from a quorum (node 2 and node 1).
    c.set_split(&[vec![0], vec![2]]);
    let id0 = c.nodes[0].id()[..16].to_string();
    wait_until("node 2 sees node 0 down", CLUSTER_DEADLINE, || {
        c.health(2).1.contains(&id0)
    });
    let missed = data(2);
    let t = std::time::Instant::now();
    put("missed", &missed);
    eprintln!("PUT through node 0 in {:?}", t.elapsed());
    let before = counts(&c);
    let t = std::time::Instant::now();
    assert_eq!(get("missed"), missed, "missed through node 2");
    eprintln!("GET through node 2 in {:?}", t.elapsed());
    let after = counts(&c);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (0, 1),
        "node 2 must read the list of a version it missed from a quorum"
    );
    c.set_split(&[]);
}
