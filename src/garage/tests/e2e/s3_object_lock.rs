//! Object lock (issue 17, item 2) against real `garage` processes: the
//! boto3 checks of tests/s3/object_lock.py on one node, on three nodes in
//! three zones, and on three nodes with one SIGKILLed after the first
//! locked writes; aws-cli, `garage bucket info` and `garage block purge`
//! (which must keep locked versions); and a restic backup whose `forget
//! --prune` is undone because the deleted data was locked.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::cluster::Cluster;
use common::s3::{aws, aws_ok, endpoint, make_key, run_script, run_script_killing_node_2};
use common::{stderr, stdout};

const DONE: &str = "all object lock checks passed";

/// The script's keys and the bucket `lockable`: the first key owns it,
/// the second may read and write it.
fn keys(c: &Cluster) -> ((String, String), (String, String)) {
    let owner = make_key(c, "lock-owner");
    let writer = make_key(c, "lock-writer");
    c.garage_ok(0, &["bucket", "create", "lockable"]);
    c.garage_ok(
        0,
        &[
            "bucket", "allow", "--read", "--write", "--owner", "lockable", "--key", &owner.0,
        ],
    );
    c.garage_ok(
        0,
        &[
            "bucket", "allow", "--read", "--write", "lockable", "--key", &writer.0,
        ],
    );
    (owner, writer)
}

fn run(c: &Cluster, endpoints: &[String], pause: Option<&Path>, meanwhile: impl FnOnce()) {
    let (owner, writer) = keys(c);
    let env = [("GARAGE_TEST_WRITER", format!("{}:{}", writer.0, writer.1))];
    run_script(
        "object_lock.py",
        DONE,
        &owner,
        endpoints,
        &env,
        pause,
        meanwhile,
    );
}

#[test]
fn object_lock_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    run(&c, &[endpoint(&c, 0)], None, || {});
    let info = c.garage_json(0, &["bucket", "info", "lockable"]);
    assert_eq!(
        info["objectLock"], "enabled, default GOVERNANCE 1 days",
        "{info}"
    );
    let key = make_key(&c, "cli");
    with_aws_cli_and_purge(&c, &key);
    with_restic(&c, &key);
}

#[test]
fn object_lock_on_three_zones() {
    let c = Cluster::three_zones();
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    run(&c, &eps, None, || {});
}

/// Node 2 is SIGKILLed once the locked versions are written; every
/// check of the locks then goes through nodes 0 and 1.
#[test]
fn object_lock_with_a_node_killed_mid_test() {
    let mut c = Cluster::three_zones();
    let (owner, writer) = keys(&c);
    let env = [("GARAGE_TEST_WRITER", format!("{}:{}", writer.0, writer.1))];
    run_script_killing_node_2(&mut c, "object_lock.py", DONE, &owner, &env);
}

/// aws-cli's CreateBucket with object lock.
fn create_locked(bucket: &str) -> [&str; 5] {
    [
        "s3api",
        "create-bucket",
        "--bucket",
        bucket,
        "--object-lock-enabled-for-bucket",
    ]
}

/// aws-cli makes a bucket with object lock and a COMPLIANCE version with
/// blocks; `garage block purge` of every block keeps that version (and
/// its data), and says so.
fn with_aws_cli_and_purge(c: &Cluster, key: &(String, String)) {
    let ep = endpoint(c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s3 = |args: &[&str]| aws_ok(key, &ep, d, args);
    s3(&create_locked("vault"));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(d.join("f"), &data).unwrap();
    let until = "2099-01-01T00:00:00Z";
    let out = s3(&[
        "s3api",
        "put-object",
        "--bucket",
        "vault",
        "--key",
        "kept",
        "--body",
        "f",
        "--object-lock-mode",
        "COMPLIANCE",
        "--object-lock-retain-until-date",
        until,
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let vid = v["VersionId"].as_str().unwrap().to_string();
    let got = s3(&[
        "s3api",
        "get-object-retention",
        "--bucket",
        "vault",
        "--key",
        "kept",
    ]);
    assert!(
        got.contains("COMPLIANCE") && got.contains("2099-01-01"),
        "{got}"
    );
    let o = aws(
        key,
        &ep,
        d,
        &[
            "s3api",
            "delete-object",
            "--bucket",
            "vault",
            "--key",
            "kept",
            "--version-id",
            &vid,
            "--bypass-governance-retention",
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("AccessDenied"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let info = c.garage_json(0, &["bucket", "info", "vault"]);
    assert_eq!(info["objectLock"], "enabled", "{info}");

    // Purge every block the node stores.
    let hashes: Vec<String> = c
        .block_files(0)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy()[..64].to_string())
        .collect();
    assert!(!hashes.is_empty());
    // PurgeBlocks, what `garage block purge --yes` calls, on node 0.
    let out = c.json_api(0, "PurgeBlocks", serde_json::json!(hashes));
    let purged = &out["success"][c.nodes[0].id()];
    assert!(
        purged["versionsLocked"].as_u64().unwrap_or(0) > 0,
        "the locked version must be kept: {out}"
    );
    s3(&[
        "s3api",
        "get-object",
        "--bucket",
        "vault",
        "--key",
        "kept",
        "--version-id",
        &vid,
        "back",
    ]);
    assert_eq!(std::fs::read(d.join("back")).unwrap(), data);
}

/// restic backs up into a bucket with a default COMPLIANCE retention;
/// `forget --prune` deletes the first snapshot's data (delete markers
/// over locked versions); deleting the markers brings it back, and the
/// first snapshot restores byte for byte. Deleting the versions by id,
/// as an attacker with the key would, is refused.
fn with_restic(c: &Cluster, key: &(String, String)) {
    let ep = endpoint(c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s3 = |args: &[&str]| aws_ok(key, &ep, d, args);
    s3(&create_locked("backups"));
    s3(&[
        "s3api",
        "put-object-lock-configuration",
        "--bucket",
        "backups",
        "--object-lock-configuration",
        r#"{"ObjectLockEnabled":"Enabled","Rule":{"DefaultRetention":{"Mode":"COMPLIANCE","Days":1}}}"#,
    ]);
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    let first: Vec<u8> = (0..2_000_000u32).map(|i| (i * 13 % 241) as u8).collect();
    std::fs::write(src.join("file"), &first).unwrap();
    let restic = |args: &[&str]| {
        let o = Command::new("restic")
            .args(["-r", &format!("s3:{ep}/backups"), "--cache-dir"])
            .arg(d.join("cache"))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &key.0)
            .env("AWS_SECRET_ACCESS_KEY", &key.1)
            .env("AWS_DEFAULT_REGION", "garage")
            .env("RESTIC_PASSWORD", "test-password")
            .output()
            .expect("restic runs (CI installs Debian's restic)");
        assert!(
            o.status.success(),
            "restic {args:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    };
    restic(&["init"]);
    let backup = |p: &Path| restic(&["backup", "--host", "h", "--json", p.to_str().unwrap()]);
    backup(&src);
    let snaps: serde_json::Value = serde_json::from_str(&restic(&["snapshots", "--json"])).unwrap();
    let snap1 = snaps[0]["id"].as_str().unwrap().to_string();
    let second: Vec<u8> = first.iter().rev().map(|b| b ^ 0x5a).collect();
    std::fs::write(src.join("file"), &second).unwrap();
    backup(&src);
    // Every pack read back and checked against its hash.
    let check = restic(&["check", "--read-data"]);
    assert!(check.contains("no errors were found"), "{check}");
    restic(&["forget", "--keep-last", "1", "--prune"]);
    let snaps: serde_json::Value = serde_json::from_str(&restic(&["snapshots", "--json"])).unwrap();
    assert_eq!(snaps.as_array().unwrap().len(), 1, "{snaps}");

    // Every deletion was a delete marker: remove them all (but those of
    // restic's own lock files, which are meant to go).
    let out = s3(&["s3api", "list-object-versions", "--bucket", "backups"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let markers = v["DeleteMarkers"].as_array().cloned().unwrap_or_default();
    assert!(!markers.is_empty(), "prune deleted nothing: {out}");
    // What an attacker holding the key would do next: delete the versions
    // themselves. The default COMPLIANCE retention refuses, for every one.
    let versions = v["Versions"].as_array().cloned().unwrap_or_default();
    let mut refused = 0;
    for x in versions.iter().filter(|x| {
        let k = x["Key"].as_str().unwrap();
        k.starts_with("data/") || k.starts_with("snapshots/")
    }) {
        let o = aws(
            key,
            &ep,
            d,
            &[
                "s3api",
                "delete-object",
                "--bucket",
                "backups",
                "--key",
                x["Key"].as_str().unwrap(),
                "--version-id",
                x["VersionId"].as_str().unwrap(),
                "--bypass-governance-retention",
            ],
        );
        assert!(stderr(&o).contains("AccessDenied"), "{}", stderr(&o));
        refused += 1;
    }
    assert!(refused >= 3, "{out}");
    for m in markers.iter() {
        if m["Key"].as_str().unwrap().starts_with("locks/") {
            continue;
        }
        s3(&[
            "s3api",
            "delete-object",
            "--bucket",
            "backups",
            "--key",
            m["Key"].as_str().unwrap(),
            "--version-id",
            m["VersionId"].as_str().unwrap(),
        ]);
    }
    let target = d.join("restored");
    restic(&["restore", &snap1, "--target", target.to_str().unwrap()]);
    let restored = target.join(src.strip_prefix("/").unwrap()).join("file");
    assert_eq!(std::fs::read(restored).unwrap(), first);
}
