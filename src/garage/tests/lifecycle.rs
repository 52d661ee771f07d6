//! The lifecycle worker on a real single-node `garage`: an Expiration Date
//! in the past expires the objects under its prefix, and an
//! AbortIncompleteMultipartUpload of one day aborts the uploads under its
//! prefix (the worker's clock is moved two days forward); everything else
//! stays. The worker runs every second here.

mod common;

use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{aws, aws_ok};
use common::stderr;

const RULES: &str = r#"{"Rules": [
  {"ID": "expire-old", "Status": "Enabled", "Filter": {"Prefix": "old/"},
   "Expiration": {"Date": "2020-01-01T00:00:00Z"}},
  {"ID": "abort-tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
   "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
  {"ID": "disabled", "Status": "Disabled", "Filter": {"Prefix": "keep/"},
   "Expiration": {"Date": "2020-01-01T00:00:00Z"}}
]}"#;

#[test]
fn lifecycle_worker_expires_objects_and_aborts_uploads() {
    let mut c = Cluster::new(1, 1);
    c.env
        .push(("GARAGE_LIFECYCLE_INTERVAL_SECS".into(), "1".into()));
    c.env.push((
        "GARAGE_LIFECYCLE_CLOCK_OFFSET_SECS".into(),
        (2 * 86400).to_string(),
    ));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let out = c.garage_ok(0, &["key", "create", "lifecycle"]);
    let field = |label: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {label} in {out}"))
    };
    let key = (field("Key ID:"), field("Secret key:"));
    c.garage_ok(0, &["key", "allow", "--create-bucket", &key.0]);
    let ep = format!("http://{}:3900", c.nodes[0].ip);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small"), b"hello").unwrap();
    std::fs::write(d.join("big"), vec![7u8; 2 << 20]).unwrap();
    let s3 = |args: &[&str]| aws_ok(&key, &ep, d, args);

    s3(&["s3api", "create-bucket", "--bucket", "lifecycle"]);
    for (k, f) in [
        ("old/inline", "small"),
        ("old/blocks", "big"),
        ("keep/a", "small"),
        ("older", "small"),
    ] {
        s3(&[
            "s3api",
            "put-object",
            "--bucket",
            "lifecycle",
            "--key",
            k,
            "--body",
            f,
        ]);
    }
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
        !exists("old/inline") && !exists("old/blocks")
    });
    wait_until("the old upload is aborted", CLUSTER_DEADLINE, || {
        !uploads().contains(&tmp_upload)
    });
    // One pass did it all, and said so.
    c.nodes[0]
        .proc()
        .wait_log("lifecycle: bucket lifecycle: 6 objects scanned, 2 expired, 1 uploads aborted");
    // Nothing else was touched: other prefixes, the disabled rule.
    assert!(exists("keep/a") && exists("older"));
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
