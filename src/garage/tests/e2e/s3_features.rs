//! Issue 17's S3 features with real clients against real `garage`
//! processes: tests/s3/features.py (boto3, every error case) and issue
//! 32's edges (tests/s3/edges.py) on one node and on three nodes in three
//! zones; Terraform's locking pattern
//! (tests/s3/tf_lock.py: `If-None-Match: *` to lock, a conditional delete
//! to release) with 8 racing clients, through one node and through the
//! three nodes; SSE-S3 and SSE-KMS (tests/s3/sse.py) on one node and on
//! three nodes in three zones, with no key configured by hand, then KMS
//! keys disabled, enabled and rotated with the CLI and used through
//! aws-cli, with a node killed.

use crate::common;

use common::cluster::{wait_until, Cluster};
use std::time::Duration;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
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
    run(
        "edges.py",
        &key,
        &[endpoint(&c, 0)],
        "all edge checks passed",
    );
}

#[test]
fn features_and_terraform_locking_on_three_zones() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "features");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run("features.py", &key, &eps, "all feature checks passed");
    run("tf_lock.py", &key, &eps, "all lock cycles passed");
    run("edges.py", &key, &eps, "all edge checks passed");
}

/// A KMS key made with the CLI on node 0, with alias `sse-test`; its id.
fn make_kms_key(c: &Cluster) -> String {
    let k = c.json_api(
        0,
        "CreateKmsKey",
        serde_json::json!({ "description": "sse test", "alias": "sse-test" }),
    );
    k["id"].as_str().expect("a key id").to_string()
}

/// tests/s3/sse.py through `endpoints`, with KMS key `kms_id`.
fn run_sse(key: &(String, String), endpoints: &[String], kms_id: &str) {
    run_script(
        "sse.py",
        "all SSE checks passed",
        key,
        endpoints,
        &[("KMS_KEY_ID", kms_id.to_string())],
        None,
        || {},
    );
}

/// The error code aws-cli printed, if it failed.
fn aws_error(o: &std::process::Output) -> String {
    let err = common::stderr(o);
    assert!(!o.status.success(), "expected a failure, got {err}");
    err
}

/// SSE-S3 and SSE-KMS on a fresh node with no key configured: the
/// cluster made SSE-S3's key at its first layout.
#[test]
fn sse_on_one_node_without_configured_keys() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "sse");
    let kms_id = make_kms_key(&c);
    run_sse(&key, &[endpoint(&c, 0)], &kms_id);
    let keys = c.garage_json(0, &["kms", "list"]);
    let ids: Vec<&str> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"sse-s3"), "SSE-S3's key was made: {keys}");
    common::plaintext_not_stored(
        &c.nodes[0].dir,
        b"SSE-S3-PLAINTEXT-MARKER-7d2f",
        b"PLAIN-SSE3-CONTROL-MARKER-7d2f",
    );
    // Restarted with `encrypt_new_buckets`: the keys' material is read
    // back from the table, and a new bucket encrypts plain writes.
    c.kill(0);
    let mut conf = std::fs::read_to_string(&c.nodes[0].config).unwrap();
    conf.push_str("encrypt_new_buckets = true\n");
    std::fs::write(&c.nodes[0].config, conf).unwrap();
    c.start(0);
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    let aws = |args: &[&str]| common::s3::aws_ok(&key, &ep, &dir, args);
    aws(&[
        "s3api",
        "head-object",
        "--bucket",
        "sse-s3",
        "--key",
        "kms-alias",
    ]);
    aws(&["s3api", "head-object", "--bucket", "sse-s3", "--key", "big"]);
    aws(&["s3", "mb", "s3://born-encrypted"]);
    let enc = aws(&[
        "s3api",
        "get-bucket-encryption",
        "--bucket",
        "born-encrypted",
    ]);
    assert!(enc.contains("AES256"), "{enc}");
    std::fs::write(dir.join("plain.txt"), b"plain").unwrap();
    let put = aws(&[
        "s3api",
        "put-object",
        "--bucket",
        "born-encrypted",
        "--key",
        "p",
        "--body",
        "plain.txt",
    ]);
    assert!(
        put.contains("\"ServerSideEncryption\": \"AES256\""),
        "{put}"
    );
}

/// SSE-S3 and SSE-KMS (tests/s3/sse.py) on three nodes in three zones
/// with no key configured; the objects' plaintext is on no disk. Then,
/// through aws-cli: a disabled key refuses reads and writes with
/// KMS.DisabledException, an enabled one serves them again, a rotated one
/// still reads what the earlier version wrapped; and with a node killed,
/// keys are still made, rotated and used.
#[test]
fn sse_on_three_zones_then_disable_rotate_and_kill() {
    let mut c = Cluster::three_zones();
    let key = make_key(&c, "sse");
    let kms_id = make_kms_key(&c);
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run_sse(&key, &eps, &kms_id);
    for n in &c.nodes {
        common::plaintext_not_stored(
            &n.dir,
            b"SSE-S3-PLAINTEXT-MARKER-7d2f",
            b"PLAIN-SSE3-CONTROL-MARKER-7d2f",
        );
    }
    let dir = c.nodes[0].dir.clone();
    let get = |c: &Cluster, i: usize, k: &str| {
        common::s3::aws(
            &key,
            &endpoint(c, i),
            &dir,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "sse-s3",
                "--key",
                k,
                "/dev/null",
            ],
        )
    };
    let put = |c: &Cluster, i: usize, k: &str, kms: &str| {
        common::s3::aws(
            &key,
            &endpoint(c, i),
            &dir,
            &[
                "s3api",
                "put-object",
                "--bucket",
                "sse-s3",
                "--key",
                k,
                "--server-side-encryption",
                "aws:kms",
                "--ssekms-key-id",
                kms,
            ],
        )
    };
    // Disabled: every node refuses, once the change reached it.
    let out = c.garage(0, &["kms", "disable", "alias/sse-test"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    for i in 0..3 {
        wait_until(
            &format!("node {i} refuses the disabled key"),
            secs(30),
            || {
                let o = get(&c, i, "kms-alias");
                !o.status.success() && common::stderr(&o).contains("KMS.DisabledException")
            },
        );
    }
    assert!(aws_error(&put(&c, 1, "refused", "alias/sse-test")).contains("KMS.DisabledException"));
    // Other keys are not affected.
    assert!(get(&c, 1, "big").status.success());
    assert!(get(&c, 2, "kms-default").status.success());
    let out = c.garage(1, &["kms", "enable", kms_id.as_str()]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    for i in 0..3 {
        wait_until(
            &format!("node {i} serves the enabled key"),
            secs(30),
            || get(&c, i, "kms-alias").status.success(),
        );
    }
    // Rotated: new objects use the new version, old ones still read.
    let out = c.garage(2, &["kms", "rotate", "alias/sse-test"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let info = c.garage_json(0, &["kms", "info", "alias/sse-test"]);
    assert_eq!(info["versions"], 2, "{info}");
    assert!(put(&c, 0, "after-rotation", &kms_id).status.success());
    for i in 0..3 {
        assert!(get(&c, i, "after-rotation").status.success());
        assert!(get(&c, i, "kms-id").status.success());
    }
    // A key whose id the operator chose, its material imported (a
    // configuration carried from Ceph or Vault names its keys).
    let material = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(material.path(), [42u8; 32]).unwrap();
    let mpath = material.path().to_str().unwrap();
    let args = [
        "kms",
        "create",
        "--id",
        "my-app-key",
        "--material-file",
        mpath,
    ];
    let out = c.garage(0, &args);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let info = c.garage_json(1, &["kms", "info", "my-app-key"]);
    assert_eq!(info["id"], "my-app-key", "{info}");
    assert!(put(&c, 1, "imported", "my-app-key").status.success());
    for i in 0..3 {
        assert!(get(&c, i, "imported").status.success());
    }
    let again = c.garage(2, &args);
    assert!(
        !again.status.success() && common::stderr(&again).contains("exists"),
        "{}",
        common::stderr(&again)
    );
    let no_id = c.garage(2, &["kms", "create", "--material-file", mpath]);
    assert!(
        !no_id.status.success() && common::stderr(&no_id).contains("needs --id"),
        "{}",
        common::stderr(&no_id)
    );
    // A node down: keys are still made, rotated and used (a majority of
    // the nodes holds the key table).
    c.kill(2);
    let out = c.garage(0, &["kms", "create", "--alias", "while-down"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let out = c.garage(1, &["kms", "rotate", "sse-s3"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(put(&c, 1, "while-down", "alias/while-down")
        .status
        .success());
    for i in 0..2 {
        for k in ["while-down", "kms-mp", "big", "mp", "kms-to-s3"] {
            let o = get(&c, i, k);
            assert!(
                o.status.success(),
                "{k} via node {i}: {}",
                common::stderr(&o)
            );
        }
    }
    // Back, node 2 missed the new key and the new SSE-S3 version: it
    // reads what they wrapped at once (a quorum read fills what its copy
    // of the key table lacks), before anti-entropy brings it.
    let o = put(&c, 0, "after-rotation", "alias/while-down");
    assert!(o.status.success(), "{}", common::stderr(&o));
    c.start(2);
    wait_until("node 2 serves again", secs(60), || {
        get(&c, 2, "big").status.success()
    });
    for k in ["while-down", "after-rotation", "kms-id", "mp"] {
        let o = get(&c, 2, k);
        assert!(
            o.status.success(),
            "{k} via node 2 back: {}",
            common::stderr(&o)
        );
    }
    c.assert_no_secret_logged();
}
