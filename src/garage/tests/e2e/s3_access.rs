//! Access control (issue 17, item 5) against real `garage` processes:
//! the boto3 checks of tests/s3/access.py (ACLs, anonymous requests,
//! bucket policies, ownership controls, public access block) on one
//! node, on three nodes in three zones (changes through one node, checks
//! through another), and on three nodes with one SIGKILLed after the
//! setup; aws-cli with a public-read upload and a bucket policy read by
//! curl without credentials; `garage bucket info` showing both.

use crate::common;

use std::process::Command;

use common::cluster::Cluster;
use common::s3::{aws_ok, endpoint, make_key, run_script, run_script_killing_node_2};
use common::stdout;

const DONE: &str = "all access control checks passed";

/// The keys of the script: the first creates the bucket, the second has
/// no permission on it.
fn keys(c: &Cluster) -> ((String, String), [(&'static str, String); 1]) {
    let owner = make_key(c, "acl-owner");
    let other = make_key(c, "acl-other");
    (
        owner,
        [("GARAGE_TEST_OTHER", format!("{}:{}", other.0, other.1))],
    )
}

fn run(c: &Cluster, endpoints: &[String]) {
    let (owner, env) = keys(c);
    run_script("access.py", DONE, &owner, endpoints, &env, None, || {});
}

/// An anonymous GET with curl: the HTTP status.
fn curl_status(url: &str) -> String {
    let o = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
            url,
        ])
        .output()
        .expect("curl runs (CI installs it)");
    stdout(&o)
}

/// The statements of the bucket policy in `garage --json bucket info`'s
/// answer (`access.policy`, the policy document as a JSON string).
fn policy_statements(info: &serde_json::Value) -> Vec<serde_json::Value> {
    let policy = info["access"]["policy"]
        .as_str()
        .unwrap_or_else(|| panic!("no bucket policy in {info}"));
    let doc: serde_json::Value = serde_json::from_str(policy)
        .unwrap_or_else(|e| panic!("the bucket policy is not JSON ({e}): {policy}"));
    match &doc["Statement"] {
        serde_json::Value::Array(a) => a.clone(),
        serde_json::Value::Null => vec![],
        one => vec![one.clone()],
    }
}

#[test]
fn access_control_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    run(&c, &[endpoint(&c, 0)]);
    let info = c.garage_json(0, &["bucket", "info", "acl-test"]);
    assert_eq!(info["access"]["acl"], "public-read", "{info}");
    assert!(
        policy_statements(&info)
            .iter()
            .any(|st| st["Principal"] == "*"),
        "{info}"
    );

    // aws-cli: a public-read upload and a policy; curl reads without
    // credentials what they open, and nothing else.
    let key = make_key(&c, "cli");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s3 = |args: &[&str]| aws_ok(&key, &ep, d, args);
    s3(&[
        "s3api",
        "create-bucket",
        "--bucket",
        "site",
        "--object-ownership",
        "ObjectWriter",
    ]);
    std::fs::write(d.join("index.html"), b"<h1>public</h1>").unwrap();
    s3(&[
        "s3",
        "cp",
        "index.html",
        "s3://site/index.html",
        "--acl",
        "public-read",
    ]);
    s3(&["s3", "cp", "index.html", "s3://site/img/a.html"]);
    s3(&["s3", "cp", "index.html", "s3://site/secret.html"]);
    assert_eq!(curl_status(&format!("{ep}/site/index.html")), "200");
    assert_eq!(curl_status(&format!("{ep}/site/img/a.html")), "403");
    std::fs::write(
        d.join("policy.json"),
        r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/img/*"}]}"#,
    )
    .unwrap();
    s3(&[
        "s3api",
        "put-bucket-policy",
        "--bucket",
        "site",
        "--policy",
        "file://policy.json",
    ]);
    let status = s3(&["s3api", "get-bucket-policy-status", "--bucket", "site"]);
    assert!(status.contains("\"IsPublic\": true"), "{status}");
    assert_eq!(curl_status(&format!("{ep}/site/img/a.html")), "200");
    assert_eq!(curl_status(&format!("{ep}/site/secret.html")), "403");
    assert_eq!(curl_status(&format!("{ep}/site/")), "403");
    let info = c.garage_json(0, &["bucket", "info", "site"]);
    assert!(
        policy_statements(&info).iter().any(|st| {
            let r = &st["Resource"];
            r == "arn:aws:s3:::site/img/*"
                || r.as_array()
                    .is_some_and(|a| a.iter().any(|x| x == "arn:aws:s3:::site/img/*"))
        }),
        "{info}"
    );
    assert_eq!(info["access"]["acl"], "private", "{info}");
}

#[test]
fn access_control_on_three_zones() {
    let c = Cluster::three_zones();
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run(&c, &eps);
}

/// Node 2 is SIGKILLed once the objects are written; every decision is
/// then made by nodes 0 and 1.
#[test]
fn access_control_with_a_node_killed_mid_test() {
    let mut c = Cluster::three_zones();
    let (owner, env) = keys(&c);
    run_script_killing_node_2(&mut c, "access.py", DONE, &owner, &env);
}
