//! The key, bucket and alias tables are fully replicated and read locally
//! (doc/geo-latency.md): what a grant or a revocation made through one
//! node means on the others, with a node cut off while it is made.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cluster::{table_stats, wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{aws, endpoint, make_key};
use common::stderr;

/// Writes and reads `bucket/k` through node `i`; returns `Ok` or the
/// error code aws-cli printed.
fn put_get(
    c: &Cluster,
    key: &(String, String),
    i: usize,
    dir: &Path,
    bucket: &str,
) -> Result<(), String> {
    std::fs::write(dir.join("body"), format!("from node {i}")).unwrap();
    let e = endpoint(c, i);
    let o = aws(
        key,
        &e,
        dir,
        &[
            "s3api",
            "put-object",
            "--bucket",
            bucket,
            "--key",
            "k",
            "--body",
            "body",
        ],
    );
    if !o.status.success() {
        return Err(stderr(&o));
    }
    let o = aws(
        key,
        &e,
        dir,
        &["s3api", "head-object", "--bucket", bucket, "--key", "k"],
    );
    if !o.status.success() {
        return Err(stderr(&o));
    }
    Ok(())
}

fn denied(r: &Result<(), String>) -> bool {
    matches!(r, Err(e) if e.contains("AccessDenied") || e.contains("403") || e.contains("Forbidden"))
}

/// Every node with a role holds the whole key, bucket and alias tables,
/// a gateway too (which stores no shard of any sharded table): after a
/// key and a bucket are made through node 0, each node's own tables have
/// them (`garage stats` counts its local items), and S3 requests through
/// the gateway are served.
#[test]
fn every_node_holds_the_key_bucket_and_alias_tables() {
    let mut c = Cluster::new(4, 3);
    c.start_all();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 4
    });
    let gw = c.nodes[3].id().to_string();
    c.garage_ok(0, &["layout", "assign", "-z", "dc1", "-g", &gw[..16]]);
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = make_key(&c, "replicated");
    c.garage_ok(0, &["bucket", "create", "everywhere"]);
    c.garage_ok(
        0,
        &[
            "bucket",
            "allow",
            "--read",
            "--write",
            "everywhere",
            "--key",
            &key.0,
        ],
    );
    // The changes returned once every reachable node had them.
    for i in 0..4 {
        let stats = table_stats(&c, i);
        for table in ["key", "bucket", "bucket_alias"] {
            let (items, _) = stats
                .get(table)
                .unwrap_or_else(|| panic!("node {i} has no {table} table: {stats:?}"));
            assert!(*items >= 1, "node {i}: {table} has {items} items");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for i in 0..4 {
        put_get(&c, &key, i, dir.path(), "everywhere").unwrap_or_else(|e| panic!("node {i}: {e}"));
    }
}

/// A permission revoked through node 0 while node 2 is cut off: nodes 0
/// and 1 refuse the key as soon as the command returns; node 2 refuses it
/// once it is back (the change reaches it when its links carry bytes
/// again, or by the sync pass that runs when a peer comes back), within a
/// deadline. A permission granted while node 2 is cut off is honoured by
/// node 2 as soon as it is back (a refusal is confirmed by a quorum read).
#[test]
fn revocations_reach_every_node_and_grants_are_never_refused() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "revoked");
    let dir = tempfile::tempdir().unwrap();
    c.garage_ok(0, &["bucket", "create", "rev"]);
    c.garage_ok(
        0,
        &[
            "bucket", "allow", "--read", "--write", "rev", "--key", &key.0,
        ],
    );
    for i in 0..3 {
        put_get(&c, &key, i, dir.path(), "rev").unwrap_or_else(|e| panic!("node {i}: {e}"));
    }

    c.set_isolated(2, true);
    let t = Instant::now();
    c.garage_ok(
        0,
        &[
            "bucket", "deny", "--read", "--write", "rev", "--key", &key.0,
        ],
    );
    eprintln!("deny returned in {:?} with node 2 cut off", t.elapsed());
    for i in 0..2 {
        let r = put_get(&c, &key, i, dir.path(), "rev");
        assert!(denied(&r), "node {i} still accepts the revoked key: {r:?}");
    }
    c.set_isolated(2, false);
    wait_until("node 2 refuses the revoked key", CLUSTER_DEADLINE, || {
        denied(&put_get(&c, &key, 2, dir.path(), "rev"))
    });

    // A grant made while node 2 is cut off.
    c.set_isolated(2, true);
    c.garage_ok(0, &["bucket", "create", "granted"]);
    c.garage_ok(
        0,
        &[
            "bucket", "allow", "--read", "--write", "granted", "--key", &key.0,
        ],
    );
    c.set_isolated(2, false);
    // Node 2 may need a moment to see its peers up again (its own writes
    // need a quorum), but it never answers AccessDenied or NoSuchBucket.
    let deadline = Instant::now() + CLUSTER_DEADLINE;
    loop {
        match put_get(&c, &key, 2, dir.path(), "granted") {
            Ok(()) => break,
            Err(e) => {
                assert!(
                    !e.contains("AccessDenied") && !e.contains("NoSuchBucket"),
                    "node 2 refused a key granted while it was cut off: {e}"
                );
                assert!(
                    Instant::now() < deadline,
                    "node 2 never served the bucket: {e}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}
