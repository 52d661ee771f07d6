//! Issue 17's S3 features with real clients against real `garage`
//! processes: tests/s3/features.py (boto3, every error case) on one node
//! and on three nodes in three zones; Terraform's locking pattern
//! (tests/s3/tf_lock.py: `If-None-Match: *` to lock, a conditional delete
//! to release) with 8 racing clients, through one node and through the
//! three nodes.

mod common;

use std::path::Path;
use std::process::Command;

use common::cluster::Cluster;
use common::s3::{endpoint, make_key};
use common::{stderr, stdout};

/// Runs `tests/s3/<script>` with the key and endpoints; it must exit 0
/// and print `done`.
fn run_script(script: &str, key: &(String, String), endpoints: &[String], done: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/s3")
        .join(script);
    let out = Command::new("python3")
        .arg(path)
        .arg(&key.0)
        .arg(&key.1)
        .args(endpoints)
        .output()
        .expect("python3 runs (CI installs it with boto3)");
    eprintln!("{}", stdout(&out));
    assert!(
        out.status.success() && stdout(&out).contains(done),
        "{script} failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn features_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "features");
    run_script(
        "features.py",
        &key,
        &[endpoint(&c, 0)],
        "all feature checks passed",
    );
    run_script(
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
    run_script("features.py", &key, &eps, "all feature checks passed");
    run_script("tf_lock.py", &key, &eps, "all lock cycles passed");
}
