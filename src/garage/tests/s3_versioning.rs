//! Versioning (issue 17, item 1) with boto3 against real `garage`
//! processes (tests/s3/versioning.py): on one node; on three nodes in
//! three zones; and on three nodes with one SIGKILLed after the first
//! writes, the rest of the checks going through the two left.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster::{wait_until, Cluster};
use common::s3::{endpoint, make_key};

const DONE: &str = "all versioning checks passed";

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/versioning.py")
}

/// Runs versioning.py to the end; with `pause`, the script waits in that
/// directory for `go` after writing `ready`, and `meanwhile` runs then.
fn run(
    key: &(String, String),
    endpoints: &[String],
    pause: Option<&Path>,
    meanwhile: impl FnOnce(),
) {
    let mut cmd = Command::new("python3");
    cmd.arg(script())
        .arg(&key.0)
        .arg(&key.1)
        .args(endpoints)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = pause {
        cmd.env("GARAGE_TEST_PAUSE", d);
    }
    let child = cmd.spawn().expect("python3 runs (CI installs it with boto3)");
    if let Some(d) = pause {
        let ready = d.join("ready");
        wait_until("the script's first writes", Duration::from_secs(120), || {
            ready.exists()
        });
        meanwhile();
        std::fs::write(d.join("go"), b"").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    eprintln!("{so}");
    assert!(
        out.status.success() && so.contains(DONE),
        "versioning.py failed:\n{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn versioning_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "versions");
    run(&key, &[endpoint(&c, 0)], None, || {});
}

#[test]
fn versioning_on_three_zones() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "versions");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run(&key, &eps, None, || {});
}

/// Node 2 is SIGKILLed once the first versions are written; reads,
/// deletes by id, suspended writes, listings and the bucket's deletion
/// then go through nodes 0 and 1 (a quorum of each partition's three
/// replicas).
#[test]
fn versioning_with_a_node_killed_mid_test() {
    let mut c = Cluster::three_zones();
    let key = make_key(&c, "versions");
    let eps: Vec<String> = (0..2).map(|i| endpoint(&c, i)).collect();
    let dir = tempfile::tempdir().unwrap();
    run(&key, &eps, Some(dir.path()), || c.kill(2));
}
