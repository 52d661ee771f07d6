//! Issue 17's S3 features with real clients against real `garage`
//! processes: tests/s3/features.py (boto3, every error case) on one node
//! and on three nodes in three zones; Terraform's locking pattern
//! (tests/s3/tf_lock.py: `If-None-Match: *` to lock, a conditional delete
//! to release) with 8 racing clients, through one node and through the
//! three nodes; SSE-S3 (tests/s3/sse_s3.py) on three nodes.

use crate::common;

use common::cluster::Cluster;
use common::s3::{endpoint, make_key, run_script};

fn run(script: &str, key: &(String, String), endpoints: &[String], done: &str) {
    run_script(script, done, key, endpoints, &[], None, || {});
}

#[test]
fn features_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "features");
    run(
        "features.py",
        &key,
        &[endpoint(&c, 0)],
        "all feature checks passed",
    );
    run(
        "tf_lock.py",
        &key,
        &[endpoint(&c, 0)],
        "all lock cycles passed",
    );
}

#[test]
fn features_and_terraform_locking_on_three_zones() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "features");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run("features.py", &key, &eps, "all feature checks passed");
    run("tf_lock.py", &key, &eps, "all lock cycles passed");
}

/// SSE-S3 (tests/s3/sse_s3.py) on three nodes in three zones whose master
/// key comes from the environment; the objects' plaintext is on no disk.
#[test]
fn sse_s3_on_three_zones() {
    let master = "5e".repeat(32);
    let c = Cluster::three_zones_with_env(&[("GARAGE_SSE_MASTER_KEY", &master)]);
    c.note_secret(&master);
    let key = make_key(&c, "sse");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run("sse_s3.py", &key, &eps, "all SSE-S3 checks passed");
    for n in &c.nodes {
        common::plaintext_not_stored(
            &n.dir,
            b"SSE-S3-PLAINTEXT-MARKER-7d2f",
            b"PLAIN-SSE3-CONTROL-MARKER-7d2f",
        );
    }
    c.assert_no_secret_logged();
}
