//! The S3 API with real clients against real `garage` processes: the boto3
//! suite (tests/s3/boto3_suite.py) on one node and on three nodes in three
//! zones (writes through one node, reads through each), aws-cli's
//! high-level commands, and uploads and downloads with a node SIGKILLed.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::cluster::Cluster;
use common::s3::{aws_ok, endpoint, make_key};
use common::{stderr, stdout};

fn boto3_suite(key: &(String, String), endpoints: &[String]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/boto3_suite.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&key.0)
        .arg(&key.1)
        .args(endpoints)
        .output()
        .expect("python3 runs (CI installs it with boto3)");
    assert!(
        out.status.success(),
        "boto3 suite failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("all checks passed"),
        "{}",
        stdout(&out)
    );
}

fn random_file(path: &Path, size: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..size).map(|_| rand::random::<u8>()).collect();
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn s3_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "suite");
    boto3_suite(&key, &[endpoint(&c, 0)]);
    sse_c_plaintext_is_not_stored(&c.nodes[0].dir);
}

/// The boto3 suite's SSE-C objects hold a marker that must not be found in
/// clear in any file of the node, while its plain control objects' marker
/// must be.
fn sse_c_plaintext_is_not_stored(node_dir: &Path) {
    common::plaintext_not_stored(
        node_dir,
        b"SSE-C-PLAINTEXT-MARKER-5b1e0c",
        b"PLAIN-CONTROL-MARKER-5b1e0c",
    );
}

/// The same suite on the SQLite engine (the others run on LMDB).
#[test]
fn s3_on_one_node_with_sqlite() {
    let mut c = Cluster::new(1, 1);
    c.use_db_engine("sqlite");
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "suite");
    boto3_suite(&key, &[endpoint(&c, 0)]);
}

#[test]
fn s3_on_three_nodes_in_three_zones() {
    let mut c = Cluster::three_zones();
    let key = make_key(&c, "suite");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    boto3_suite(&key, &eps);

    // aws-cli's high-level commands: multipart cp (17 MiB), sync, ls,
    // presign, rm.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    aws_ok(&key, &eps[0], d, &["s3", "mb", "s3://cli"]);
    std::fs::create_dir(d.join("site")).unwrap();
    let big = random_file(&d.join("big"), 17 << 20);
    random_file(&d.join("site/a.txt"), 10);
    random_file(&d.join("site/b.bin"), 5000);
    aws_ok(
        &key,
        &eps[0],
        d,
        &["s3", "cp", "big", "s3://cli/big", "--only-show-errors"],
    );
    aws_ok(
        &key,
        &eps[1],
        d,
        &["s3", "sync", "site", "s3://cli/site", "--only-show-errors"],
    );
    let ls = aws_ok(&key, &eps[2], d, &["s3", "ls", "--recursive", "s3://cli"]);
    for k in ["big", "site/a.txt", "site/b.bin"] {
        assert!(ls.contains(k), "{ls}");
    }
    aws_ok(
        &key,
        &eps[2],
        d,
        &["s3", "cp", "s3://cli/big", "big.back", "--only-show-errors"],
    );
    assert!(
        std::fs::read(d.join("big.back")).unwrap() == big,
        "17 MiB round trip differs"
    );
    let url = aws_ok(&key, &eps[1], d, &["s3", "presign", "s3://cli/site/a.txt"]);
    let fetched = Command::new("curl")
        .args(["-sf", url.trim()])
        .output()
        .expect("curl runs");
    assert!(
        fetched.status.success(),
        "presigned GET failed: {}",
        stderr(&fetched)
    );
    assert_eq!(fetched.stdout, std::fs::read(d.join("site/a.txt")).unwrap());
    aws_ok(
        &key,
        &eps[0],
        d,
        &[
            "s3",
            "rm",
            "--recursive",
            "s3://cli/site",
            "--only-show-errors",
        ],
    );
    let ls = aws_ok(&key, &eps[1], d, &["s3", "ls", "--recursive", "s3://cli"]);
    assert!(!ls.contains("site/"), "{ls}");

    // One node SIGKILLed: writes and reads through the others still work,
    // and what was acknowledged before is all there.
    c.kill(2);
    let after = random_file(&d.join("after"), 3 << 20);
    aws_ok(
        &key,
        &eps[0],
        d,
        &["s3", "cp", "after", "s3://cli/after", "--only-show-errors"],
    );
    aws_ok(
        &key,
        &eps[1],
        d,
        &[
            "s3",
            "cp",
            "s3://cli/after",
            "after.back",
            "--only-show-errors",
        ],
    );
    assert!(std::fs::read(d.join("after.back")).unwrap() == after);
    aws_ok(
        &key,
        &eps[1],
        d,
        &[
            "s3",
            "cp",
            "s3://cli/big",
            "big.back2",
            "--only-show-errors",
        ],
    );
    assert!(std::fs::read(d.join("big.back2")).unwrap() == big);
}

/// PostObject: browser forms made by boto3's `generate_presigned_post`,
/// posted by urllib3 (tests/s3/post_object.py).
#[test]
fn post_object_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "post");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/post_object.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&key.0)
        .arg(&key.1)
        .arg(endpoint(&c, 0))
        .output()
        .expect("python3 runs (CI installs it with boto3)");
    assert!(
        out.status.success() && stdout(&out).contains("all checks passed"),
        "PostObject checks failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
}

/// Objects whose block lists span several version segments (over 64
/// blocks in one part: a 70 MiB single PUT, a 70 MiB part), on three
/// nodes: written through one node, read whole and across the segment
/// boundary through the others, copied server-side, completed from parts,
/// listed by part in GetObjectAttributes; deleting the source keeps the
/// copy.
#[test]
fn objects_over_several_version_segments_on_three_nodes() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "segments");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s3api = |i: usize, args: &[&str]| {
        let mut all = vec!["s3api"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--output", "text"]);
        aws_ok(&key, &eps[i], d, &all)
    };
    s3api(0, &["create-bucket", "--bucket", "seg"]);
    let size = 70 << 20;
    let big = random_file(&d.join("big"), size);

    // A single PUT of 70 blocks: two segments of part 1.
    s3api(
        0,
        &[
            "put-object",
            "--bucket",
            "seg",
            "--key",
            "big",
            "--body",
            "big",
        ],
    );
    s3api(
        1,
        &["get-object", "--bucket", "seg", "--key", "big", "big.back"],
    );
    assert!(
        std::fs::read(d.join("big.back")).unwrap() == big,
        "70 MiB GET"
    );
    // A range across the first segment's end (block 64 starts at 64 MiB).
    let (lo, hi) = ((64 << 20) - 1000, (64 << 20) + 1000);
    let range = format!("bytes={lo}-{hi}");
    s3api(
        2,
        &[
            "get-object",
            "--bucket",
            "seg",
            "--key",
            "big",
            "--range",
            &range,
            "range.back",
        ],
    );
    assert!(std::fs::read(d.join("range.back")).unwrap() == big[lo..=hi]);

    // Server-side copy: the copy's version is written in segments too.
    s3api(
        0,
        &[
            "copy-object",
            "--bucket",
            "seg",
            "--key",
            "copy",
            "--copy-source",
            "seg/big",
        ],
    );

    // Multipart: a 70 MiB part then a 1-byte part.
    std::fs::write(d.join("one"), b"x").unwrap();
    let uid = s3api(
        0,
        &[
            "create-multipart-upload",
            "--bucket",
            "seg",
            "--key",
            "mp",
            "--query",
            "UploadId",
        ],
    );
    let uid = uid.trim();
    let mut parts = Vec::new();
    for (n, file) in [(1, "big"), (2, "one")] {
        let n = n.to_string();
        let etag = s3api(
            1,
            &[
                "upload-part",
                "--bucket",
                "seg",
                "--key",
                "mp",
                "--upload-id",
                uid,
                "--part-number",
                &n,
                "--body",
                file,
                "--query",
                "ETag",
            ],
        );
        let etag = etag.trim().trim_matches('"');
        parts.push(format!("{{\"PartNumber\":{n},\"ETag\":\"{etag}\"}}"));
    }
    let spec = format!("{{\"Parts\":[{}]}}", parts.join(","));
    std::fs::write(d.join("parts.json"), spec).unwrap();
    s3api(
        2,
        &[
            "complete-multipart-upload",
            "--bucket",
            "seg",
            "--key",
            "mp",
            "--upload-id",
            uid,
            "--multipart-upload",
            "file://parts.json",
        ],
    );
    s3api(
        1,
        &["get-object", "--bucket", "seg", "--key", "mp", "mp.back"],
    );
    let mut want = big.clone();
    want.push(b'x');
    assert!(
        std::fs::read(d.join("mp.back")).unwrap() == want,
        "multipart GET"
    );
    let sizes = s3api(
        2,
        &[
            "get-object-attributes",
            "--bucket",
            "seg",
            "--key",
            "mp",
            "--object-attributes",
            "ObjectParts",
            "--query",
            "ObjectParts.Parts[].Size",
        ],
    );
    let sizes: Vec<&str> = sizes.split_whitespace().collect();
    assert_eq!(sizes, [size.to_string().as_str(), "1"], "part sizes");

    // Deleting the source leaves the copy whole.
    s3api(0, &["delete-object", "--bucket", "seg", "--key", "big"]);
    let gone = common::s3::aws(
        &key,
        &eps[1],
        d,
        &["s3api", "head-object", "--bucket", "seg", "--key", "big"],
    );
    assert!(!gone.status.success(), "deleted object still there");
    s3api(
        2,
        &[
            "get-object",
            "--bucket",
            "seg",
            "--key",
            "copy",
            "copy.back",
        ],
    );
    assert!(
        std::fs::read(d.join("copy.back")).unwrap() == big,
        "copy GET"
    );
}
