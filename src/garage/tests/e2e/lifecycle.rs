//! The lifecycle worker on a real single-node `garage`: an Expiration Date
//! in the past expires the objects under its prefix, and an
//! AbortIncompleteMultipartUpload of one day aborts the uploads under its
//! prefix (the worker's clock is moved two days forward), and a tag filter
//! expires the objects with that tag (written with it, or tagged later);
//! everything else stays. The worker runs every second here.

use crate::common;

use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{aws, aws_ok};
use common::stderr;

const RULES: &str = r#"{"Rules": [
  {"ID": "expire-old", "Status": "Enabled", "Filter": {"Prefix": "old/"},
   "Expiration": {"Date": "2020-01-01T00:00:00Z"}},
  {"ID": "abort-tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
   "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
  {"ID": "disabled", "Status": "Disabled", "Filter": {"Prefix": "keep/"},
   "Expiration": {"Date": "2020-01-01T00:00:00Z"}},
  {"ID": "expire-tagged", "Status": "Enabled",
   "Filter": {"Tag": {"Key": "class", "Value": "tmp"}},
   "Expiration": {"Date": "2020-01-01T00:00:00Z"}}
]}"#;

/// One node whose lifecycle worker runs every second with its clock two
/// days ahead.
fn lifecycle_node() -> Cluster {
    let mut c = Cluster::new(1, 1);
    c.env
        .push(("GARAGE_LIFECYCLE_INTERVAL_SECS".into(), "1".into()));
    c.env.push((
        "GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS".into(),
        (2 * 86400).to_string(),
    ));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    c
}

#[test]
fn lifecycle_worker_expires_objects_and_aborts_uploads() {
    let c = lifecycle_node();
    let key = common::s3::make_key(&c, "lifecycle");
    let ep = format!("http://{}:3900", c.nodes[0].ip);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small"), b"hello").unwrap();
    std::fs::write(d.join("big"), vec![7u8; 2 << 20]).unwrap();
    let s3 = |args: &[&str]| aws_ok(&key, &ep, d, args);

    s3(&["s3api", "create-bucket", "--bucket", "lifecycle"]);
    // Tags: written with the object (`tagged/*`), or given afterwards.
    for (k, f, tags) in [
        ("old/inline", "small", None),
        ("old/blocks", "big", None),
        ("keep/a", "small", None),
        ("older", "small", None),
        ("tagged/x", "small", Some("class=tmp")),
        ("tagged/y", "small", Some("class=keep")),
        ("tagged/z", "small", Some("a=b")),
    ] {
        let mut args = vec![
            "s3api",
            "put-object",
            "--bucket",
            "lifecycle",
            "--key",
            k,
            "--body",
            f,
        ];
        if let Some(t) = tags {
            args.extend(["--tagging", t]);
        }
        s3(&args);
    }
    s3(&[
        "s3api",
        "put-object-tagging",
        "--bucket",
        "lifecycle",
        "--key",
        "tagged/z",
        "--tagging",
        r#"{"TagSet": [{"Key": "class", "Value": "tmp"}]}"#,
    ]);
    let upload = |k: &str| {
        let o = s3(&[
            "s3api",
            "create-multipart-upload",
            "--bucket",
            "lifecycle",
            "--key",
            k,
            "--query",
            "UploadId",
            "--output",
            "text",
        ]);
        o.trim().to_string()
    };
    let tmp_upload = upload("tmp/u");
    let kept_upload = upload("keep/u");
    s3(&[
        "s3api",
        "upload-part",
        "--bucket",
        "lifecycle",
        "--key",
        "tmp/u",
        "--upload-id",
        &tmp_upload,
        "--part-number",
        "1",
        "--body",
        "big",
    ]);
    s3(&[
        "s3api",
        "put-bucket-lifecycle-configuration",
        "--bucket",
        "lifecycle",
        "--lifecycle-configuration",
        RULES,
    ]);

    let exists = |k: &str| {
        aws(
            &key,
            &ep,
            d,
            &["s3api", "head-object", "--bucket", "lifecycle", "--key", k],
        )
        .status
        .success()
    };
    let uploads = || {
        s3(&[
            "s3api",
            "list-multipart-uploads",
            "--bucket",
            "lifecycle",
            "--query",
            "Uploads[].UploadId",
            "--output",
            "text",
        ])
    };
    // The first pass comes a second after start, then every second.
    wait_until("the expired objects are gone", CLUSTER_DEADLINE, || {
        !exists("old/inline") && !exists("old/blocks") && !exists("tagged/x") && !exists("tagged/z")
    });
    wait_until("the old upload is aborted", CLUSTER_DEADLINE, || {
        !uploads().contains(&tmp_upload)
    });
    // The passes expired exactly those four objects and aborted that one
    // upload (the node's lifecycle counters, through `garage --json stats`).
    wait_until("the lifecycle counters", CLUSTER_DEADLINE, || {
        c.counter(0, "lifecycle_objects_expired_total") == 4
            && c.counter(0, "lifecycle_uploads_aborted_total") == 1
    });
    assert!(c.counter(0, "lifecycle_objects_scanned_total") >= 9);
    // Nothing else was touched: other prefixes and tags, the disabled rule.
    assert!(exists("keep/a") && exists("older") && exists("tagged/y"));
    assert!(uploads().contains(&kept_upload), "{}", uploads());
    let ls = s3(&["s3", "ls", "--recursive", "s3://lifecycle"]);
    assert!(!ls.contains("old/"), "{ls}");
    // The aborted upload is really gone, not just hidden from the list.
    let o = aws(
        &key,
        &ep,
        d,
        &[
            "s3api",
            "list-parts",
            "--bucket",
            "lifecycle",
            "--key",
            "tmp/u",
            "--upload-id",
            &tmp_upload,
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("NoSuchUpload"),
        "{}",
        stderr(&o)
    );
}

const VERSION_RULES: &str = r#"{"Rules": [
  {"ID": "noncurrent", "Status": "Enabled", "Filter": {"Prefix": "nc/"},
   "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}},
  {"ID": "markers", "Status": "Enabled", "Filter": {"Prefix": "dm/"},
   "Expiration": {"ExpiredObjectDeleteMarker": true}}
]}"#;

/// In a versioned bucket, with the worker's clock two days ahead:
/// NoncurrentVersionExpiration deletes the noncurrent versions under its
/// prefix except the newest one it keeps (and those under object lock),
/// ExpiredObjectDeleteMarker the delete markers left alone; the rest
/// stays.
#[test]
fn lifecycle_worker_deletes_noncurrent_versions_and_lone_markers() {
    let c = lifecycle_node();
    let key = common::s3::make_key(&c, "lifecycle");
    let ep = common::s3::endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("f"), b"hello").unwrap();
    let s3 = |args: &[&str]| aws_ok(&key, &ep, d, args);
    let b = "lcv";
    s3(&["s3api", "create-bucket", "--bucket", b]);
    s3(&[
        "s3api",
        "put-bucket-versioning",
        "--bucket",
        b,
        "--versioning-configuration",
        "Status=Enabled",
    ]);
    let put = |k: &str| {
        let o = s3(&[
            "s3api",
            "put-object",
            "--bucket",
            b,
            "--key",
            k,
            "--body",
            "f",
            "--query",
            "VersionId",
            "--output",
            "text",
        ]);
        o.trim().to_string()
    };
    let nc: Vec<String> = (0..3).map(|_| put("nc/a")).collect();
    // nc/b's oldest version is under COMPLIANCE retention: the rule
    // would delete it, its lock keeps it.
    s3(&[
        "s3api",
        "put-object-lock-configuration",
        "--bucket",
        b,
        "--object-lock-configuration",
        r#"{"ObjectLockEnabled":"Enabled"}"#,
    ]);
    let locked = s3(&[
        "s3api",
        "put-object",
        "--bucket",
        b,
        "--key",
        "nc/b",
        "--body",
        "f",
        "--object-lock-mode",
        "COMPLIANCE",
        "--object-lock-retain-until-date",
        "2099-01-01T00:00:00Z",
        "--query",
        "VersionId",
        "--output",
        "text",
    ]);
    let ncb: Vec<String> = vec![locked.trim().to_string(), put("nc/b"), put("nc/b")];
    let keep: Vec<String> = (0..2).map(|_| put("keep/a")).collect();
    let data = put("dm/a");
    s3(&["s3api", "delete-object", "--bucket", b, "--key", "dm/a"]);
    s3(&[
        "s3api",
        "delete-object",
        "--bucket",
        b,
        "--key",
        "dm/a",
        "--version-id",
        &data,
    ]);
    let versions = |prefix: &str| {
        let out = s3(&[
            "s3api",
            "list-object-versions",
            "--bucket",
            b,
            "--prefix",
            prefix,
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ids = |field: &str| -> Vec<String> {
            v[field]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| x["VersionId"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        (ids("Versions"), ids("DeleteMarkers"))
    };
    assert_eq!(versions("dm/").1.len(), 1, "the lone marker is there");
    s3(&[
        "s3api",
        "put-bucket-lifecycle-configuration",
        "--bucket",
        b,
        "--lifecycle-configuration",
        VERSION_RULES,
    ]);
    // `garage --json bucket info` (GetBucketInfo's lifecycleRules) says
    // them in words.
    let info = c.garage_json(0, &["bucket", "info", b]);
    let rules = info["lifecycleRules"]
        .as_array()
        .unwrap_or_else(|| panic!("no lifecycleRules in {info}"));
    for (id, filter, action) in [
        (
            "noncurrent",
            "prefix \"nc/\"",
            "expire noncurrent versions 1 day after they stop being current, keeping the 1 newest",
        ),
        ("markers", "prefix \"dm/\"", "remove expired delete markers"),
    ] {
        assert!(
            rules.iter().any(|r| r["id"] == id
                && r["enabled"] == true
                && r["filter"] == filter
                && r["actions"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == action))),
            "rule {id:?} ({filter}: {action}) in {info}"
        );
    }
    assert_eq!(info["corsRules"], serde_json::json!([]), "{info}");
    wait_until("the rules are applied", CLUSTER_DEADLINE, || {
        versions("nc/a").0.len() == 2 && versions("dm/").1.is_empty()
    });
    wait_until("the lifecycle counters", CLUSTER_DEADLINE, || {
        c.counter(0, "lifecycle_versions_deleted_total") == 2
    });
    assert_eq!(c.counter(0, "lifecycle_objects_expired_total"), 0);
    assert_eq!(versions("nc/a").0, vec![nc[2].clone(), nc[1].clone()]);
    assert_eq!(
        versions("nc/b").0,
        vec![ncb[2].clone(), ncb[1].clone(), ncb[0].clone()]
    );
    assert_eq!(versions("keep/").0, vec![keep[1].clone(), keep[0].clone()]);
    assert_eq!(versions("dm/"), (vec![], vec![]));
}
