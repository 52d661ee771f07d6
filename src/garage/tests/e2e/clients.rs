//! The S3 tools people already point at S3, each against a real node, one
//! short scenario each: rclone (sync and check of a tree with a
//! multipart-sized file), s3cmd (multipart put, get, list, delete), the
//! AWS SDKs for JavaScript v3, Go v2 and Java v2 with their default
//! integrity checksums (`tests/clients/js`, `tests/clients/go`,
//! `tests/clients/java`), a PostgreSQL WAL archiver (barman-cloud)
//! pushing and restoring the segments of a real PostgreSQL server, and
//! MinIO's `mc` with aws-cli, both left on their default region (one node
//! and three zones; `common::mc`, doc/s3.md "Regions"). restic
//! (init, backup, check --read-data, restore) is exercised by
//! `s3_object_lock.rs`, aws-cli and boto3 by `s3.rs`, the Rust SDK by
//! `sdk.rs`.
//!
//! Needs Debian's `rclone` and `s3cmd`, Node.js with the packages of
//! `tests/clients/js` installed (`npm ci` there), Go (the Go client and
//! `mc` are built by the tests from their modules), a JDK with Maven (the Java client
//! is compiled by the test), PostgreSQL's server and barman-cloud.
//! `.ci/run` installs them all and fetches the modules and artifacts
//! beforehand.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::random_bytes;
use common::cluster::Cluster;
use common::mc::Mc;
use common::s3::{aws_ok, endpoint, make_key};
use common::{stderr, stdout};

const MIB: usize = 1 << 20;

/// One node with a layout and a key allowed to create buckets.
fn node() -> (Cluster, (String, String)) {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "clients");
    (c, key)
}

fn clients_dir(which: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(which)
}

/// Runs `cmd`, which must succeed; its standard output.
fn ok(what: &str, cmd: &mut Command) -> String {
    let o: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} does not run ({e}): .ci/run installs it"));
    assert!(
        o.status.success(),
        "{what} failed:\n{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// The environment the JS and Go clients read.
fn client_env(cmd: &mut Command, c: &Cluster, key: &(String, String), bucket: &str) {
    cmd.env("GARAGE_ENDPOINT", endpoint(c, 0))
        .env("GARAGE_KEY_ID", &key.0)
        .env("GARAGE_SECRET", &key.1)
        .env("GARAGE_BUCKET", bucket);
}

/// rclone syncs a tree with a file larger than its multipart cutoff, checks
/// it (hashes, then the downloaded bytes), and syncs a change (a file
/// removed, one added).
#[test]
fn rclone_syncs_and_checks_a_tree() {
    let (c, key) = node();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("tree");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a.txt"), b"hello rclone\n").unwrap();
    std::fs::write(src.join("sub/b.bin"), random_bytes(100_000)).unwrap();
    std::fs::write(src.join("big.bin"), random_bytes(12 * MIB + 5)).unwrap();
    let rclone = |args: &[&str]| {
        let mut cmd = Command::new("rclone");
        cmd.args(["--config"])
            .arg(tmp.path().join("rclone.conf"))
            .args(["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"])
            .args(args)
            .env("RCLONE_CONFIG_G_TYPE", "s3")
            .env("RCLONE_CONFIG_G_PROVIDER", "Other")
            .env("RCLONE_CONFIG_G_ACCESS_KEY_ID", &key.0)
            .env("RCLONE_CONFIG_G_SECRET_ACCESS_KEY", &key.1)
            .env("RCLONE_CONFIG_G_ENDPOINT", endpoint(&c, 0))
            .env("RCLONE_CONFIG_G_REGION", "garage")
            .env("RCLONE_CONFIG_G_FORCE_PATH_STYLE", "true")
            // A CA bundle in the environment (some machines set one) makes
            // rclone's SDK refuse its HTTP transport; the endpoint is
            // plain HTTP anyway.
            .env_remove("AWS_CA_BUNDLE");
        ok(&format!("rclone {args:?}"), &mut cmd)
    };
    let s = src.to_str().unwrap();
    rclone(&["mkdir", "g:rclone-bucket"]);
    rclone(&["sync", s, "g:rclone-bucket/tree"]);
    rclone(&["check", s, "g:rclone-bucket/tree"]);
    rclone(&["check", "--download", s, "g:rclone-bucket/tree"]);
    // The multipart file went up in three parts.
    let size = rclone(&["size", "--json", "g:rclone-bucket/tree"]);
    let v: serde_json::Value = serde_json::from_str(&size).unwrap();
    assert_eq!(v["count"], 3, "{size}");
    std::fs::remove_file(src.join("a.txt")).unwrap();
    std::fs::write(src.join("c.txt"), b"new\n").unwrap();
    rclone(&["sync", s, "g:rclone-bucket/tree"]);
    let mut listed: Vec<String> = rclone(&["lsf", "-R", "--files-only", "g:rclone-bucket/tree"])
        .lines()
        .map(String::from)
        .collect();
    listed.sort();
    assert_eq!(listed, ["big.bin", "c.txt", "sub/b.bin"]);
    rclone(&["check", "--download", s, "g:rclone-bucket/tree"]);
}

/// s3cmd: a bucket, a multipart put of a 12 MiB file in 5 MiB chunks, the
/// file back byte for byte, the listing, deletes.
#[test]
fn s3cmd_puts_multipart_and_gets_back() {
    let (c, key) = node();
    let tmp = tempfile::tempdir().unwrap();
    let host = format!("{}:3900", c.nodes[0].ip);
    let conf = tmp.path().join("s3cfg");
    std::fs::write(
        &conf,
        format!(
            "[default]\naccess_key = {}\nsecret_key = {}\nhost_base = {host}\nhost_bucket = {host}\n\
             use_https = False\nbucket_location = garage\nsignature_v2 = False\n",
            key.0, key.1
        ),
    )
    .unwrap();
    let s3cmd = |args: &[&str]| {
        let mut cmd = Command::new("s3cmd");
        cmd.arg("-c").arg(&conf).args(args);
        ok(&format!("s3cmd {args:?}"), &mut cmd)
    };
    let big = random_bytes(12 * MIB + 11);
    let f = tmp.path().join("big.bin");
    std::fs::write(&f, &big).unwrap();
    let back = tmp.path().join("back.bin");
    s3cmd(&["mb", "s3://s3cmd-bucket"]);
    s3cmd(&[
        "put",
        "--multipart-chunk-size-mb=5",
        f.to_str().unwrap(),
        "s3://s3cmd-bucket/big.bin",
    ]);
    // A multipart object's ETag ends with its number of parts (s3cmd shows
    // an MD5 of its own instead; aws-cli asks).
    let head = common::s3::aws_ok(
        &key,
        &endpoint(&c, 0),
        tmp.path(),
        &[
            "s3api",
            "head-object",
            "--bucket",
            "s3cmd-bucket",
            "--key",
            "big.bin",
        ],
    );
    assert!(head.contains("-3\\\""), "not a 3-part upload:\n{head}");
    s3cmd(&["get", "s3://s3cmd-bucket/big.bin", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == big, "big.bin reads back");
    let ls = s3cmd(&["ls", "s3://s3cmd-bucket"]);
    assert!(
        ls.contains("s3://s3cmd-bucket/big.bin") && ls.contains(&big.len().to_string()),
        "{ls}"
    );
    s3cmd(&["del", "s3://s3cmd-bucket/big.bin"]);
    s3cmd(&["rb", "s3://s3cmd-bucket"]);
    assert!(!s3cmd(&["ls"]).contains("s3://s3cmd-bucket"));
}

/// The AWS SDK for JavaScript v3 (`tests/clients/js/client.mjs`):
/// PutObject with its default CRC32, lib-storage multipart, presigned GET
/// and PUT with fetch, listing, DeleteObjects.
#[test]
fn javascript_sdk_v3_with_default_checksums() {
    let (c, key) = node();
    let dir = clients_dir("js");
    assert!(
        dir.join("node_modules/@aws-sdk/client-s3").is_dir(),
        "run `npm ci` in {} first (.ci/run does)",
        dir.display()
    );
    let mut cmd = Command::new("node");
    cmd.arg("client.mjs").current_dir(&dir);
    client_env(&mut cmd, &c, &key, "js-sdk");
    let out = ok("node client.mjs", &mut cmd);
    assert_eq!(out.trim(), "ok");
}

/// The AWS SDK for Go v2 (`tests/clients/go`): PutObject with its default
/// CRC32, the transfer manager's multipart upload, GetObject with the
/// checksum validated, listing, deletes.
#[test]
fn go_sdk_v2_with_default_checksums() {
    let (c, key) = node();
    let dir = clients_dir("go");
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("s3client");
    ok(
        "go build (tests/clients/go)",
        Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(&dir),
    );
    let mut cmd = Command::new(&bin);
    client_env(&mut cmd, &c, &key, "go-sdk");
    let out = ok("the Go client", &mut cmd);
    assert_eq!(out.trim(), "ok");
}

/// The AWS SDK for Java v2 (`tests/clients/java`): PutObject with its
/// default CRC32 (a trailer of an aws-chunked body over plain HTTP), a
/// multipart upload with a CRC32 per part, GetObject with the checksum
/// validated, listing, deletes.
#[test]
fn java_sdk_v2_with_default_checksums() {
    let (c, key) = node();
    let dir = clients_dir("java");
    let tmp = tempfile::tempdir().unwrap();
    let cp_file = tmp.path().join("classpath.txt");
    ok(
        "mvn compile (tests/clients/java)",
        Command::new("mvn")
            .args(["-q", "-B", "compile", "dependency:build-classpath"])
            .arg(format!("-Dmdep.outputFile={}", cp_file.display()))
            .current_dir(&dir),
    );
    let cp = format!(
        "{}:{}",
        dir.join("target/classes").display(),
        std::fs::read_to_string(&cp_file).unwrap().trim()
    );
    let mut cmd = Command::new("java");
    cmd.args(["-cp", &cp, "garage.Client"]);
    client_env(&mut cmd, &c, &key, "java-sdk");
    let out = ok("the Java client", &mut cmd);
    assert_eq!(out.trim(), "ok");
}

/// Runs `cmd` as the `postgres` user when this test runs as root
/// (PostgreSQL refuses to run as root), as itself otherwise.
fn as_postgres(program: &Path, args: &[&str]) -> Command {
    let root = ok("id -u", Command::new("id").arg("-u")).trim() == "0";
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args);
    cmd
}

/// Stops the PostgreSQL server when dropped (a failed test included).
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = as_postgres(
            &self.bin.join("pg_ctl"),
            &["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"],
        )
        .output();
    }
}

/// A PostgreSQL WAL archiver, barman-cloud: a real PostgreSQL server
/// (Debian's) writes WAL segments, its `archive_command` hands them over,
/// `barman-cloud-wal-archive` pushes each to a bucket (plain and gzip), and
/// `barman-cloud-wal-restore` brings each back byte for byte; a segment
/// never archived is not found.
///
/// The archiver runs as the test, not from `archive_command` itself: the
/// server runs as the `postgres` user, who cannot run the barman installed
/// for the test's user (pip, under its home).
#[test]
fn barman_cloud_archives_and_restores_wal_segments() {
    use std::os::unix::fs::PermissionsExt;
    let (c, key) = node();
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server is not installed (Debian's postgresql; .ci/run installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .find(|p| p.join("postgres").exists())
        .expect("no /usr/lib/postgresql/*/bin/postgres");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = tmp.path().join("pg");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (data, outbox) = (root.join("data"), root.join("outbox"));
    std::fs::create_dir(&outbox).unwrap();
    std::fs::set_permissions(&outbox, std::fs::Permissions::from_mode(0o777)).unwrap();
    let pg = |prog: &str, args: &[&str]| ok(prog, &mut as_postgres(&bin.join(prog), args));
    pg(
        "initdb",
        &[
            "-D",
            data.to_str().unwrap(),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
        ],
    );
    let mut conf = std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .unwrap();
    std::io::Write::write_all(
        &mut conf,
        format!(
            "listen_addresses = ''\nunix_socket_directories = '{r}'\nfsync = off\n\
             wal_level = replica\narchive_mode = on\narchive_command = 'cp %p {o}/%f'\n",
            r = root.display(),
            o = outbox.display()
        )
        .as_bytes(),
    )
    .unwrap();
    let log = root.join("server.log");
    pg(
        "pg_ctl",
        &[
            "-D",
            data.to_str().unwrap(),
            "-l",
            log.to_str().unwrap(),
            "-w",
            "start",
        ],
    );
    let _server = Postgres {
        bin: bin.clone(),
        data: data.clone(),
    };
    // Three segments' worth of switches, with writes in between.
    for i in 0..3 {
        pg(
            "psql",
            &[
                "-h",
                root.to_str().unwrap(),
                "-U",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                &format!("create table t{i} as select generate_series(1, 50000) x; select pg_switch_wal();"),
            ],
        );
    }
    let mut segments: Vec<PathBuf> = Vec::new();
    common::cluster::wait_until("PostgreSQL archives 3 segments", common::DEADLINE, || {
        segments = std::fs::read_dir(&outbox)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().unwrap().len() == 24)
            .collect();
        segments.len() >= 3
    });
    segments.sort();

    let ep = endpoint(&c, 0);
    common::s3::aws_ok(&key, &ep, tmp.path(), &["s3", "mb", "s3://wal-archive"]);
    let barman = |tool: &str, args: &[&str]| {
        let mut cmd = Command::new(tool);
        cmd.args(["--endpoint-url", &ep, "--addressing-style", "path"])
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &key.0)
            .env("AWS_SECRET_ACCESS_KEY", &key.1)
            .env("AWS_DEFAULT_REGION", "garage")
            .env_remove("AWS_CA_BUNDLE");
        cmd
    };
    for (i, s) in segments.iter().enumerate() {
        // Every other segment gzip-compressed.
        let mut args = vec!["s3://wal-archive/pg", "pg", s.to_str().unwrap()];
        if i % 2 == 1 {
            args.insert(0, "-z");
        }
        ok(
            "barman-cloud-wal-archive",
            &mut barman("barman-cloud-wal-archive", &args),
        );
    }
    let back = tmp.path().join("restored");
    for s in segments.iter() {
        let name = s.file_name().unwrap().to_str().unwrap();
        ok(
            "barman-cloud-wal-restore",
            &mut barman(
                "barman-cloud-wal-restore",
                &["s3://wal-archive/pg", "pg", name, back.to_str().unwrap()],
            ),
        );
        assert!(
            std::fs::read(&back).unwrap() == std::fs::read(s).unwrap(),
            "segment {name} restores byte for byte"
        );
    }
    let missing = barman(
        "barman-cloud-wal-restore",
        &[
            "s3://wal-archive/pg",
            "pg",
            "0000000100000000000000FF",
            back.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert!(
        !missing.status.success(),
        "a segment never archived is not found"
    );
}

/// The `mc` session of a MinIO user, with no region anywhere: alias, mb,
/// cp, cat, ls, tags, versioning enabled and suspended, ls and rm of
/// versions, mirror and diff, object lock (retention, legal hold),
/// lifecycle rules, a presigned link; `mc admin` is told it is not
/// served. Then aws-cli on `us-east-1`: mb, ls, cp both ways.
fn mc_and_aws_cli_on_their_default_region(c: &Cluster, key: &(String, String), at: usize) {
    let ep = endpoint(c, at);
    let mc = Mc::new(&ep, key);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f.bin");
    let data = random_bytes(6 * MIB + 5);
    std::fs::write(&file, &data).unwrap();
    let f = file.to_str().unwrap();

    mc.ok(&["mb", "g/mcb"]);
    let buckets = mc.json(&["ls", "g"]);
    assert!(buckets.iter().any(|b| b["key"] == "mcb/"), "{buckets:?}");
    mc.ok(&["cp", f, "g/mcb/f.bin"]);
    let o = mc.run(&["cat", "g/mcb/f.bin"]);
    assert!(
        o.status.success() && o.stdout == data,
        "mc cat: {}",
        stderr(&o)
    );
    let listed = mc.json(&["ls", "g/mcb"]);
    assert!(
        listed
            .iter()
            .any(|e| e["key"] == "f.bin" && e["size"] == data.len()),
        "{listed:?}"
    );

    // Tags.
    mc.ok(&["tag", "set", "g/mcb/f.bin", "team=a&kind=raw"]);
    let tags = mc.json(&["tag", "list", "g/mcb/f.bin"]);
    assert_eq!(tags[0]["tagset"]["team"], "a", "{tags:?}");
    assert_eq!(tags[0]["tagset"]["kind"], "raw", "{tags:?}");

    // Versioning: two versions listed, then both removed.
    mc.ok(&["version", "enable", "g/mcb"]);
    let info = mc.json(&["version", "info", "g/mcb"]);
    assert_eq!(info[0]["versioning"]["status"], "Enabled", "{info:?}");
    std::fs::write(&file, b"second").unwrap();
    mc.ok(&["cp", f, "g/mcb/f.bin"]);
    let versions = mc.json(&["ls", "--versions", "g/mcb/f.bin"]);
    let sizes: Vec<&serde_json::Value> = versions.iter().map(|v| &v["size"]).collect();
    assert_eq!(sizes, [6, data.len()], "newest first: {versions:?}");
    assert_eq!(
        versions[1]["versionId"], "null",
        "the version written before versioning: {versions:?}"
    );
    mc.ok(&["version", "suspend", "g/mcb"]);
    let info = mc.json(&["version", "info", "g/mcb"]);
    assert_eq!(info[0]["versioning"]["status"], "Suspended", "{info:?}");
    mc.ok(&["rm", "--versions", "--force", "g/mcb/f.bin"]);
    let left = mc.json(&["ls", "--versions", "g/mcb"]);
    assert!(
        left.iter().all(|v| v["key"] != "f.bin"),
        "versions left: {left:?}"
    );

    // Mirror and diff.
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("a.txt"), b"alpha").unwrap();
    std::fs::write(tree.join("sub/b.txt"), b"beta").unwrap();
    let t = tree.to_str().unwrap();
    mc.ok(&["mirror", t, "g/mcb/tree"]);
    let same = mc.ok(&["diff", t, "g/mcb/tree"]);
    assert!(same.trim().is_empty(), "mc diff of a mirrored tree: {same}");
    std::fs::write(tree.join("c.txt"), b"new").unwrap();
    let differs = mc.ok(&["diff", t, "g/mcb/tree"]);
    assert!(
        differs.contains("c.txt"),
        "mc diff misses a new file: {differs}"
    );
    mc.ok(&["mirror", t, "g/mcb/tree"]);
    assert!(mc.ok(&["diff", t, "g/mcb/tree"]).trim().is_empty());

    // Object lock: default retention, an object's retention, legal hold.
    mc.ok(&["mb", "--with-lock", "g/mclock"]);
    mc.ok(&[
        "retention",
        "set",
        "--default",
        "GOVERNANCE",
        "1d",
        "g/mclock",
    ]);
    let d = mc.json(&["retention", "info", "--default", "g/mclock"]);
    assert_eq!(d[0]["mode"], "GOVERNANCE", "{d:?}");
    mc.ok(&["cp", f, "g/mclock/o"]);
    mc.ok(&["retention", "set", "COMPLIANCE", "2d", "g/mclock/o"]);
    let r = mc.json(&["retention", "info", "g/mclock/o"]);
    assert_eq!(r[0]["mode"], "COMPLIANCE", "{r:?}");
    mc.ok(&["legalhold", "set", "g/mclock/o"]);
    let h = mc.json(&["legalhold", "info", "g/mclock/o"]);
    assert_eq!(h[0]["legalhold"], "ON", "{h:?}");
    let o = mc.run(&["rm", "--versions", "--force", "g/mclock/o"]);
    assert!(
        !o.status.success() || !stderr(&o).is_empty(),
        "a locked version was removed: {}",
        stdout(&o)
    );
    assert!(mc.ok(&["cat", "g/mclock/o"]).as_bytes() == b"second");

    // Lifecycle.
    mc.ok(&[
        "ilm",
        "rule",
        "add",
        "--expire-days",
        "30",
        "--prefix",
        "logs/",
        "g/mcb",
    ]);
    let rules = mc.json(&["ilm", "rule", "ls", "g/mcb"]);
    let text = serde_json::to_string(&rules).unwrap();
    assert!(
        text.contains("\"Days\":30") && text.contains("logs/"),
        "{text}"
    );

    // A presigned link, fetched by another client.
    let share = mc.json(&["share", "download", "--expire", "1h", "g/mcb/tree/a.txt"]);
    let url = share[0]["share"].as_str().expect("a share URL").to_string();
    let got = ok(
        "curl of mc's shared link",
        Command::new("curl").args(["-sf", &url]),
    );
    assert_eq!(got, "alpha");

    // MinIO's admin API is not served, and says so.
    let o = mc.run(&["admin", "info", "g"]);
    assert!(!o.status.success());
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("is not served"), "mc admin info: {said}");

    // aws-cli on us-east-1: the global operations are accepted, the
    // others redirected to the region the refusal names.
    let east = |args: &[&str]| {
        let mut a = vec!["--region", "us-east-1"];
        a.extend_from_slice(args);
        aws_ok(key, &ep, tmp.path(), &a)
    };
    east(&["s3", "mb", "s3://aws-east"]);
    assert!(east(&["s3", "ls"]).contains("aws-east"));
    east(&["s3", "cp", "f.bin", "s3://aws-east/f.bin"]);
    east(&["s3", "cp", "s3://aws-east/f.bin", "back.bin"]);
    assert_eq!(
        std::fs::read(tmp.path().join("back.bin")).unwrap(),
        b"second"
    );
    let loc = east(&["s3api", "get-bucket-location", "--bucket", "aws-east"]);
    assert!(loc.contains("garage"), "{loc}");
}

#[test]
fn mc_and_aws_cli_on_their_default_region_on_one_node() {
    let (c, key) = node();
    mc_and_aws_cli_on_their_default_region(&c, &key, 0);
}

#[test]
fn mc_and_aws_cli_on_their_default_region_on_three_zones() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "clients");
    // Through another node than the one the key was made on.
    mc_and_aws_cli_on_their_default_region(&c, &key, 2);
}
