//! End to end: the real `garage` binary as an operator runs it.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{garage, stderr, stdout, Proc};

const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn write_config(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("garage.toml");
    std::fs::write(&path, body).unwrap();
    path
}

/// A single-node configuration on a loopback address of its own.
fn config_text(dir: &Path, extra_top: &str) -> String {
    let (a, b) = common::cluster::fresh_subnet();
    format!(
        r#"metadata_dir = "{meta}"
data_dir = "{data}"
replication_factor = 1
rpc_bind_addr = "127.{a}.{b}.1:3901"
{extra_top}
[s3_api]
s3_region = "garage"
api_bind_addr = "127.{a}.{b}.1:3900"
"#,
        meta = dir.join("meta").display(),
        data = dir.join("data").display(),
    )
}

#[test]
fn version_and_help_name_the_verbs() {
    let dir = tempfile::tempdir().unwrap();
    let o = garage(dir.path(), &["--version"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("garage "), "{}", stdout(&o));
    let o = garage(dir.path(), &["--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    for verb in [
        "server",
        "status",
        "node",
        "layout",
        "bucket",
        "key",
        "repair",
        "stats",
        "worker",
        "block",
        "convert-db",
    ] {
        assert!(
            help.contains(&format!("\n  {verb} ")),
            "help lacks {verb}:\n{help}"
        );
    }
    // An admin verb with no daemon to talk to says how to fix it.
    let o = garage(dir.path(), &["worker", "list"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is `garage server` running"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn default_single_node_runs_stops_and_restarts() {
    assert!(
        !Path::new("/etc/garage.toml").exists(),
        "this test checks the built-in configuration and needs a machine without /etc/garage.toml"
    );
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("stdout.txt");
    let mut p = Proc::spawn_with_stdout(
        common::base_command(dir.path()).arg("server"),
        std::fs::File::create(&out_path).unwrap().into(),
    );
    p.wait_log("built-in default configuration");
    let line = p.wait_log("metadata: lmdb database at");
    assert!(
        line.contains("garage-data/meta/db.lmdb") && line.contains("(new,"),
        "{line}"
    );
    p.wait_log("garage is running");
    assert!(dir
        .path()
        .join("garage-data/meta/db.lmdb/data.mdb")
        .is_file());
    assert!(dir.path().join("garage-data/data").is_dir());
    let secret = dir.path().join("garage-data/meta/rpc_secret");
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let secret_value = std::fs::read_to_string(&secret).unwrap();
    assert!(
        !p.log().contains(secret_value.trim()),
        "the secret was logged"
    );

    // Standard output names the S3 endpoint and a ready key (the log does
    // not hold its secret), and the key works with aws-cli.
    let printed = std::fs::read_to_string(&out_path).unwrap();
    let field = |label: &str| {
        printed
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {label:?} in stdout:\n{printed}"))
    };
    assert!(
        field("S3 endpoint:").starts_with("http://127.0.0.1:3900"),
        "{printed}"
    );
    let (key_id, key_secret) = (field("access key id:"), field("secret access key:"));
    assert!(
        !p.log().contains(&key_secret),
        "the S3 secret key was logged"
    );
    let mb = Command::new("aws")
        .env("AWS_ACCESS_KEY_ID", &key_id)
        .env("AWS_SECRET_ACCESS_KEY", &key_secret)
        .env("AWS_DEFAULT_REGION", "garage")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .args([
            "--endpoint-url",
            "http://127.0.0.1:3900",
            "s3",
            "mb",
            "s3://first",
        ])
        .output()
        .expect("aws-cli runs (CI installs it)");
    assert!(
        mb.status.success(),
        "{}",
        String::from_utf8_lossy(&mb.stderr)
    );

    // The session of a MinIO user, no region anywhere (`mc` signs for
    // us-east-1 and learns the bucket's region), and aws-cli on
    // us-east-1: both work unchanged (doc/s3.md "Regions"; the whole
    // session is in clients.rs).
    let key = (key_id.clone(), key_secret.clone());
    let mc = common::mc::Mc::new("http://127.0.0.1:3900", &key);
    mc.ok(&["mb", "g/mcb"]);
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("a.txt"), b"alpha").unwrap();
    std::fs::write(tree.join("sub/b.txt"), b"beta").unwrap();
    let a = tree.join("a.txt");
    mc.ok(&["cp", a.to_str().unwrap(), "g/mcb/a.txt"]);
    assert!(mc.ok(&["ls", "g/mcb"]).contains("a.txt"));
    mc.ok(&["tag", "set", "g/mcb/a.txt", "k=v"]);
    mc.ok(&["mirror", tree.to_str().unwrap(), "g/mcb/tree"]);
    assert_eq!(mc.ok(&["cat", "g/mcb/tree/sub/b.txt"]), "beta");
    let east = |args: &[&str]| {
        common::s3::aws_ok(
            &key,
            "http://127.0.0.1:3900",
            dir.path(),
            &[&["--region", "us-east-1"], args].concat(),
        )
    };
    east(&["s3", "mb", "s3://east"]);
    assert!(east(&["s3", "ls"]).contains("east"));
    east(&["s3", "cp", "tree/a.txt", "s3://east/a.txt"]);
    assert_eq!(east(&["s3", "cp", "s3://east/a.txt", "-"]), "alpha");

    p.signal("TERM");
    assert!(p.wait_exit().success());
    p.wait_log("garage stopped");

    // Second start: same data, same secret.
    let mut p = Proc::spawn(dir.path(), &["server"]);
    let line = p.wait_log("metadata: lmdb database at");
    assert!(line.contains("(existing,"), "{line}");
    p.wait_log("RPC secret read from");
    p.wait_log("garage is running");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), secret_value);
    assert!(
        !p.log().contains("created access key"),
        "the default key is created once"
    );
    p.signal("INT");
    assert!(p.wait_exit().success());
}

#[test]
fn config_file_with_sqlite_engine() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        &config_text(
            dir.path(),
            &format!("db_engine = \"sqlite\"\nrpc_secret = \"{SECRET}\"\nmetadata_fsync = true\n"),
        ),
    );
    let mut p = Proc::spawn(dir.path(), &["-c", cfg.to_str().unwrap(), "server"]);
    p.wait_log(&format!("configuration read from {}", cfg.display()));
    let line = p.wait_log("metadata: sqlite database at");
    assert!(line.contains("metadata_fsync = true"), "{line}");
    p.wait_log("garage is running");
    assert!(dir.path().join("meta/db.sqlite").is_file());
    // No secret file is generated when one is configured.
    assert!(!dir.path().join("meta/rpc_secret").exists());
    p.signal("TERM");
    assert!(p.wait_exit().success());
}

#[test]
fn misspelled_key_fails_naming_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), "metadata_fsnyc = true\n");
    let cfg = write_config(dir.path(), &text);
    let o = garage(dir.path(), &["server", "-c", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("metadata_fsnyc"), "{e}");
    assert!(e.contains(&cfg.display().to_string()), "{e}");
    assert!(e.contains("line 5"), "{e}");
    // Nothing was created for a config that was refused.
    assert!(!dir.path().join("meta").exists());
}

#[test]
fn missing_config_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let o = garage(dir.path(), &["server", "-c", "/nonexistent/garage.toml"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("/nonexistent/garage.toml"), "{e}");
}

#[test]
fn multi_node_without_secret_says_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        config_text(dir.path(), "").replace("replication_factor = 1", "replication_factor = 3");
    let cfg = write_config(dir.path(), &text);
    let o = garage(dir.path(), &["server", "-c", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("rpc_secret"), "{e}");
    assert!(e.contains("openssl rand -hex 32"), "{e}");
    assert!(e.contains(&cfg.display().to_string()), "{e}");

    // The same file runs with the secret given through the environment.
    let p = Proc::spawn_with(
        std::process::Command::new(common::garage_bin())
            .current_dir(dir.path())
            .env("GARAGE_RPC_SECRET", SECRET)
            .env("RUST_LOG", "info")
            .args(["server", "-c", cfg.to_str().unwrap()]),
    );
    p.wait_log("garage is running");
    assert!(!p.log().contains(SECRET), "the secret was logged");
}

#[test]
fn world_readable_secret_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("rpc_secret");
    std::fs::write(&secret, SECRET).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = config_text(
        dir.path(),
        &format!("rpc_secret_file = \"{}\"\n", secret.display()),
    );
    let cfg = write_config(dir.path(), &text);
    let o = garage(dir.path(), &["server", "-c", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("chmod 600") && e.contains(&secret.display().to_string()),
        "{e}"
    );

    // The operator can accept such a file explicitly.
    let p = Proc::spawn(
        dir.path(),
        &[
            "--allow-world-readable-secrets",
            "true",
            "server",
            "-c",
            cfg.to_str().unwrap(),
        ],
    );
    p.wait_log("garage is running");
}
