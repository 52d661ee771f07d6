//! Operators come with the reference system's configuration files: each
//! file of `tests/configs/` (the key sets of the reference's quick-start,
//! cookbooks, full example, Helm chart, development and Jepsen clusters,
//! multi-disk example; written for this test) and the container image's
//! `script/docker/garage.toml` must start a node. Keys that do nothing here
//! are named in a one-line warning each; unknown keys stay errors (the
//! config unit tests). The quick-start's next steps then work with the
//! same file.

use crate::common;

use std::path::{Path, PathBuf};

use common::cluster::{fresh_subnet, random_secret};
use common::{base_command, stdout, Proc};

/// Fills a file's placeholders for a node under `dir` on address `ip`;
/// returns the config path.
fn instantiate(template: &str, dir: &Path, ip: &str) -> PathBuf {
    let (meta, data) = (dir.join("meta"), dir.join("data"));
    for d in ["old", "hdd1", "hdd2"] {
        std::fs::create_dir_all(data.join(d)).unwrap();
    }
    let text = template
        .replace("@META@", meta.to_str().unwrap())
        .replace("@DATA@", data.to_str().unwrap())
        .replace("@IP@", ip)
        .replace("@SECRET@", &random_secret())
        .replace("@TOKEN@", "test-token-Zq8v");
    let path = dir.join("garage.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts a node with `template`; it must run, listen for S3, and warn
/// once about each of `ignored`.
fn starts(name: &str, template: &str, ignored: &[&str]) -> (Proc, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = fresh_subnet();
    let ip = format!("127.{a}.{b}.1");
    let config = instantiate(template, dir.path(), &ip);
    let p =
        Proc::spawn_with(base_command(dir.path()).args(["-c", config.to_str().unwrap(), "server"]));
    p.wait_log("garage is running");
    let log = p.log();
    assert!(
        log.contains(&format!("S3 API listening on http://{ip}:3900")),
        "{name}: {log}"
    );
    for key in ignored {
        let warning = format!("configuration key `{key}` in ");
        assert_eq!(
            log.matches(&warning).count(),
            1,
            "{name}: expected one warning about {key}:\n{log}"
        );
    }
    assert_eq!(
        log.matches("configuration key `").count(),
        ignored.len(),
        "{name}: unexpected warnings:\n{log}"
    );
    (p, config, dir)
}

fn file(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_reference_quick_start_runs_as_documented() {
    let (_p, config, dir) = starts(
        "quick-start",
        &file("quick-start.toml"),
        &["[k2v_api]", "s3_web.index"],
    );
    // Its next steps: status, layout, key, bucket, all with the same file.
    let cli = |args: &[&str]| {
        let o = base_command(dir.path())
            .arg("-c")
            .arg(&config)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "garage {args:?}: {o:?}");
        stdout(&o)
    };
    // `garage status` as documented; the node id from its JSON answer.
    cli(&["status"]);
    let status: serde_json::Value = serde_json::from_str(&cli(&["--json", "status"])).unwrap();
    let id = status["nodes"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no node id in:\n{status}"))[..16]
        .to_string();
    cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &id]);
    cli(&["layout", "apply", "--version", "1"]);
    cli(&["bucket", "create", "nextcloud-bucket"]);
    cli(&["key", "create", "nextcloud-app-key"]);
    cli(&[
        "bucket",
        "allow",
        "--read",
        "--write",
        "--owner",
        "nextcloud-bucket",
        "--key",
        "nextcloud-app-key",
    ]);
    let info = cli(&["bucket", "info", "nextcloud-bucket"]);
    assert!(info.contains("nextcloud-app-key"), "{info}");
}

#[test]
fn the_reference_documented_files_start_a_node() {
    let cases: &[(&str, &[&str])] = &[
        ("real-world.toml", &["s3_web.index"]),
        (
            "reference-full.toml",
            &["[consul_discovery]", "[kubernetes_discovery]"],
        ),
        ("helm.toml", &["[kubernetes_discovery]", "s3_web.index"]),
        ("dev-cluster.toml", &["s3_web.index"]),
        (
            "k8s-legacy.toml",
            &[
                "kubernetes_namespace",
                "kubernetes_service_name",
                "kubernetes_skip_crd",
                "s3_web.index",
            ],
        ),
        ("jepsen.toml", &["[k2v_api]"]),
        ("multi-hdd.toml", &[]),
    ];
    for (name, ignored) in cases {
        let (p, _, _dir) = starts(name, &file(name), ignored);
        drop(p);
    }
}

/// The container image's configuration (Dockerfile), with its paths and
/// addresses moved to the test's own.
#[test]
fn the_container_configuration_starts_a_node() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../script/docker/garage.toml"),
    )
    .unwrap()
    .replace("/var/lib/garage/meta", "@META@")
    .replace("/var/lib/garage/data", "@DATA@")
    .replace("[::]", "@IP@");
    let (p, _, _dir) = starts("script/docker/garage.toml", &text, &[]);
    let log = p.log();
    assert!(log.contains("admin API"), "{log}");
}

/// `garage server --single-node --default-bucket` (the reference v2.3's
/// container start): with only a configuration file and three environment
/// variables, the node gives itself a layout, imports the key and makes the
/// bucket; S3 works at once with that key, and a restart changes nothing.
/// A missing variable, or --single-node with replication_factor 3, is
/// refused with a message naming it.
#[test]
fn single_node_with_a_default_bucket_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = fresh_subnet();
    let ip = format!("127.{a}.{b}.1");
    let config = instantiate(&file("multi-hdd.toml"), dir.path(), &ip);
    let key_id = "GK0123456789abcdef01234567";
    let secret = "ab".repeat(32);
    let start = |env: &[(&str, &str)]| {
        let mut cmd = base_command(dir.path());
        cmd.args([
            "-c",
            config.to_str().unwrap(),
            "server",
            "--single-node",
            "--default-bucket",
        ])
        .env_remove("GARAGE_DEFAULT_ACCESS_KEY")
        .env_remove("GARAGE_DEFAULT_SECRET_KEY")
        .env_remove("GARAGE_DEFAULT_BUCKET")
        .envs(env.iter().copied());
        cmd
    };
    let o = start(&[("GARAGE_DEFAULT_ACCESS_KEY", key_id)])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("GARAGE_DEFAULT_SECRET_KEY"),
        "{o:?}"
    );
    let env = [
        ("GARAGE_DEFAULT_ACCESS_KEY", key_id),
        ("GARAGE_DEFAULT_SECRET_KEY", secret.as_str()),
        ("GARAGE_DEFAULT_BUCKET", "app-data"),
    ];
    let key = (key_id.to_string(), secret.clone());
    let ep = format!("http://{ip}:3900");
    for round in 0..2 {
        let p = Proc::spawn_with(&mut start(&env));
        p.wait_log("default bucket app-data ready for access key");
        let d = dir.path();
        std::fs::write(d.join("f"), format!("round {round}")).unwrap();
        common::s3::aws_ok(
            &key,
            &ep,
            d,
            &["s3", "cp", "f", &format!("s3://app-data/r{round}")],
        );
        let ls = common::s3::aws_ok(&key, &ep, d, &["s3", "ls", "s3://app-data/"]);
        assert_eq!(ls.lines().count(), round + 1, "{ls}");
        drop(p);
    }
    // replication_factor 3: one node cannot be a cluster.
    let rf3 = instantiate(&file("dev-cluster.toml"), dir.path(), &ip);
    let o = base_command(dir.path())
        .args(["-c", rf3.to_str().unwrap(), "server", "--single-node"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("replication_factor = 1"),
        "{o:?}"
    );
}
