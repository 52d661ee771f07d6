//! Versioning (issue 17, item 1) with boto3 against real `garage`
//! processes (tests/s3/versioning.py): on one node; on three nodes in
//! three zones; and on three nodes with one SIGKILLed after the first
//! writes, the rest of the checks going through the two left.

use crate::common;

use std::path::Path;

use common::cluster::Cluster;
use common::s3::{aws, aws_ok, endpoint, make_key, run_script, run_script_killing_node_2};
use common::stdout;

const DONE: &str = "all versioning checks passed";

fn run(
    key: &(String, String),
    endpoints: &[String],
    pause: Option<&Path>,
    meanwhile: impl FnOnce(),
) {
    run_script("versioning.py", DONE, key, endpoints, &[], pause, meanwhile)
}

#[test]
fn versioning_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "versions");
    run(&key, &[endpoint(&c, 0)], None, || {});
    with_aws_cli(&c, &key);
}

/// The same switch and listing with aws-cli, and `garage bucket info`
/// showing the bucket's versioning.
fn with_aws_cli(c: &Cluster, key: &(String, String)) {
    let ep = endpoint(c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s3 = |args: &[&str]| aws_ok(key, &ep, d, args);
    s3(&["s3api", "create-bucket", "--bucket", "vinfo"]);
    let info = c.garage_json(0, &["bucket", "info", "vinfo"]);
    assert_eq!(info["versioning"], "off", "{info}");
    s3(&[
        "s3api",
        "put-bucket-versioning",
        "--bucket",
        "vinfo",
        "--versioning-configuration",
        "Status=Enabled",
    ]);
    let got = s3(&["s3api", "get-bucket-versioning", "--bucket", "vinfo"]);
    assert!(got.contains("\"Enabled\""), "{got}");
    std::fs::write(d.join("f"), b"hello").unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let out = s3(&[
            "s3api",
            "put-object",
            "--bucket",
            "vinfo",
            "--key",
            "k",
            "--body",
            "f",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        ids.push(v["VersionId"].as_str().unwrap().to_string());
    }
    let out = s3(&["s3api", "list-object-versions", "--bucket", "vinfo"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let listed: Vec<&str> = v["Versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["VersionId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![ids[1].as_str(), ids[0].as_str()]);
    let o = aws(
        key,
        &ep,
        d,
        &[
            "s3api",
            "put-bucket-versioning",
            "--bucket",
            "vinfo",
            "--versioning-configuration",
            "Status=Off",
        ],
    );
    assert!(!o.status.success(), "{}", stdout(&o));
    let info = c.garage_json(0, &["bucket", "info", "vinfo"]);
    assert_eq!(info["versioning"], "enabled", "{info}");
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
    run_script_killing_node_2(&mut c, "versioning.py", DONE, &key, &[]);
}
