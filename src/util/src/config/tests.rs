//! Tests of the configuration: parsing, defaults, and errors that name
//! the key and the file.

use super::*;

const MINIMAL: &str = r#"
metadata_dir = "/var/lib/garage/meta"
data_dir = "/var/lib/garage/data"
replication_factor = 3
rpc_bind_addr = "[::]:3901"
rpc_secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

[s3_api]
s3_region = "garage"
api_bind_addr = "[::]:3900"
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(
        text,
        ConfigSource::File(PathBuf::from("/etc/test-garage.toml")),
    )
}

#[test]
fn builtin_default_is_valid_single_node() {
    let c = Config::builtin_default(Path::new("/tmp/x"));
    assert_eq!(c.replication_factor, 1);
    assert_eq!(c.db_engine, crate::db_engine::Engine::Lmdb);
    assert_eq!(c.metadata_dir, PathBuf::from("/tmp/x/garage-data/meta"));
    assert_eq!(
        c.data_dir.paths(),
        vec![Path::new("/tmp/x/garage-data/data")]
    );
    assert!(c.rpc_bind_addr.ip().is_loopback());
    assert!(!c.is_multi_node());
    assert_eq!(c.source, ConfigSource::BuiltIn);
}

#[test]
fn defaults_follow_the_reference() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.block_size, 1048576);
    assert_eq!(c.block_ram_buffer_max, 256 << 20);
    assert_eq!(c.lmdb_map_size(), 1 << 40);
    assert!(c.lmdb_write_map);
    assert_eq!(c.compression_level, Some(1));
    assert!(!c.metadata_fsync && !c.data_fsync);
    assert_eq!(c.consistency_mode, ConsistencyMode::Consistent);
    assert_eq!(c.db_engine, crate::db_engine::Engine::Lmdb);
    assert_eq!(c.block_max_concurrent_reads, 16);
    assert_eq!(
        c.metadata_snapshots_dir(),
        PathBuf::from("/var/lib/garage/meta/snapshots")
    );
    assert!(c.s3_web.is_none());
    assert!(c.admin.api_bind_addr.is_none());
}

#[test]
fn full_reference_file_parses() {
    let text = r#"
metadata_dir = "/meta"
data_dir = [
    { path = "/mnt/old", read_only = true },
    { path = "/mnt/hdd1", capacity = "2T" },
    { path = "/mnt/hdd2", capacity = "500GiB" },
]
metadata_snapshots_dir = "/snap"
metadata_auto_snapshot_interval = "6h"
db_engine = "sqlite"
metadata_fsync = true
data_fsync = true
disable_scrub = true
use_local_tz = true
block_size = "10MiB"
block_ram_buffer_max = "1GiB"
block_max_concurrent_reads = 8
block_max_concurrent_writes_per_request = 4
lmdb_map_size = "100GiB"
lmdb_write_map = false
replication_factor = 3
consistency_mode = "degraded"
compression_level = "none"
rpc_secret_file = "/etc/garage/rpc_secret"
rpc_bind_addr = "0.0.0.0:3901"
rpc_bind_outgoing = true
rpc_public_addr = "node1.example.com:3901"
rpc_public_addr_subnet = "10.0.0.0/24"
rpc_ping_timeout_msec = 5000
rpc_timeout_msec = 60000
bootstrap_peers = ["563e1ac825ee3323aa441e72c26d1030d6d4414aeb3dd25287c531e7fc2bc95d@10.0.0.11:3901"]
allow_world_readable_secrets = false
allow_punycode = true

[s3_api]
api_bind_addr = "[::]:3900"
s3_region = "garage"
root_domain = ".s3.garage"

[s3_web]
bind_addr = "[::]:3902"
root_domain = ".web.garage"
add_host_to_metrics = true

[admin]
api_bind_addr = "0.0.0.0:3903"
metrics_token = "BCAdFjoa9G0KJR0WXnHHm7fs1ZAbfpI8iIZ+Z/a2NgI="
metrics_require_token = true
admin_token = "UkLeGWEvHnXBqnueR3ISEMWpOnm40jH2tM2HnnL/0F4="
trace_sink = "http://localhost:4317"
"#;
    let c = parse(text).unwrap();
    assert_eq!(c.db_engine, crate::db_engine::Engine::Sqlite);
    assert_eq!(c.block_size, 10 << 20);
    assert_eq!(c.compression_level, None);
    assert_eq!(c.consistency_mode, ConsistencyMode::Degraded);
    assert_eq!(
        c.metadata_auto_snapshot_interval,
        Some(Duration::from_secs(6 * 3600))
    );
    assert_eq!(c.lmdb_map_size(), 100 << 30);
    assert!(!c.lmdb_write_map);
    match &c.data_dir {
        DataDirs::Multiple(d) => {
            assert_eq!(d.len(), 3);
            assert_eq!(d[0].state, DataDirState::ReadOnly);
            assert_eq!(
                d[1].state,
                DataDirState::Active {
                    capacity: 2_000_000_000_000
                }
            );
            assert_eq!(
                d[2].state,
                DataDirState::Active {
                    capacity: 500 << 30
                }
            );
        }
        other => panic!("expected several data dirs, got {other:?}"),
    }
    assert!(c.is_multi_node());
    assert_eq!(c.s3_web.as_ref().unwrap().root_domain, ".web.garage");
    assert!(c.admin.metrics_require_token);
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn misspelled_key_names_key_file_and_line() {
    let text = MINIMAL.replace("metadata_dir", "metdata_dir");
    let e = err(&text);
    assert!(e.contains("/etc/test-garage.toml"), "{e}");
    assert!(e.contains("metdata_dir"), "{e}");
    assert!(e.contains("line 2"), "{e}");

    let e = err(&format!("{MINIMAL}api_bind_adr = \"[::]:3900\"\n"));
    assert!(e.contains("api_bind_adr") && e.contains("line 11"), "{e}");
}

#[test]
fn mistyped_values_are_rejected_with_line() {
    let e = err(&MINIMAL.replace("replication_factor = 3", "replication_factor = \"three\""));
    assert!(
        e.contains("replication_factor") || e.contains("line 4"),
        "{e}"
    );
    let e = err(&MINIMAL.replace("replication_factor = 3", "replication_factor = 0"));
    assert!(e.contains("at least 1") && e.contains("line 4"), "{e}");
    let e = err(&MINIMAL.replace(
        "rpc_bind_addr =",
        "block_size = \"ten megs\"\nrpc_bind_addr =",
    ));
    assert!(e.contains("invalid size"), "{e}");
    let e = err(&MINIMAL.replace(
        "rpc_bind_addr = \"[::]:3901\"",
        "rpc_bind_addr = \"nowhere\"",
    ));
    assert!(e.contains("line 5"), "{e}");
    let e = err(&MINIMAL.replace("rpc_secret = \"0123", "rpc_secret = \"zz23"));
    assert!(e.contains("openssl rand -hex 32"), "{e}");
}

#[test]
fn engine_and_mode_values() {
    let with =
        |k: &str| parse(&MINIMAL.replacen("rpc_bind_addr", &format!("{k}\nrpc_bind_addr"), 1));
    assert!(with("db_engine = \"postgres\"")
        .unwrap_err()
        .to_string()
        .contains("lmdb"));
    assert!(with("db_engine = \"sled\"")
        .unwrap_err()
        .to_string()
        .contains("convert-db"));
    assert!(with("consistency_mode = \"eventual\"").is_err());
    assert!(with("compression_level = 23").is_err());
    assert!(with("compression_level = \"1\"").is_err());
    assert_eq!(
        with("compression_level = -5").unwrap().compression_level,
        Some(-5)
    );
    let e = with("replication_mode = \"3\"").unwrap_err().to_string();
    assert!(
        e.contains("replication_mode") && e.contains("replication_factor"),
        "{e}"
    );
    let e = with("metadata_auto_snapshot_interval = \"1m\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("10 minutes"), "{e}");
    let c = with("sled_cache_capacity = 1000").unwrap();
    assert_eq!(
        c.ignored_keys().iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec!["sled_cache_capacity"]
    );
}

#[test]
fn data_dir_rules() {
    let with = |d: &str| parse(&MINIMAL.replace("data_dir = \"/var/lib/garage/data\"", d));
    let e = with("data_dir = [{ path = \"/a\" }]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("capacity") && e.contains("read_only"), "{e}");
    let e = with("data_dir = [{ path = \"/a\", read_only = true }]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not read_only"), "{e}");
    let e = with("data_dir = [{ path = \"/a\", capacity = \"1T\", read_only = true }]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("takes no capacity"), "{e}");
    let e = with("data_dir = [{ path = \"/a\", capacity = \"1T\", size = 3 }]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("size"), "{e}");
    let e = with("data_dir = 3").unwrap_err().to_string();
    assert!(e.contains("data_dir is a path"), "{e}");
}

#[test]
fn multi_node_without_secret_says_how_to_make_one() {
    let mut c = parse(&MINIMAL.replace(
        "rpc_secret = \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"",
        "",
    ))
    .unwrap();
    c.resolve_secrets(&SecretOverrides::default()).unwrap();
    let e = c.ensure_rpc_secret().unwrap_err().to_string();
    assert!(e.contains("openssl rand -hex 32"), "{e}");
    assert!(e.contains("/etc/test-garage.toml"), "{e}");
    assert!(e.contains("rpc_secret"), "{e}");
}

#[test]
fn single_node_generates_and_keeps_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::builtin_default(dir.path());
    c.resolve_secrets(&SecretOverrides::default()).unwrap();
    let origin = c.ensure_rpc_secret().unwrap();
    let first = c.rpc_secret.clone().unwrap();
    assert!(matches!(origin, SecretOrigin::Generated { new: true, .. }));
    let mut c2 = Config::builtin_default(dir.path());
    let origin = c2.ensure_rpc_secret().unwrap();
    assert!(matches!(origin, SecretOrigin::Generated { new: false, .. }));
    assert_eq!(c2.rpc_secret.unwrap(), first);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("garage-data/meta/rpc_secret"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn secret_precedence_and_file_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    let file_secret = "ab".repeat(32);
    std::fs::write(&file, format!("{file_secret}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

    let base = MINIMAL.replace(
        "rpc_secret = \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"",
        &format!("rpc_secret_file = \"{}\"", file.display()),
    );
    let mut c = parse(&base).unwrap();
    let e = c
        .resolve_secrets(&SecretOverrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("chmod 600") && e.contains("rpc_secret_file"),
        "{e}"
    );

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut c = parse(&base).unwrap();
    c.resolve_secrets(&SecretOverrides::default()).unwrap();
    assert_eq!(c.rpc_secret.as_deref(), Some(file_secret.as_str()));

    // A value from the command line or environment wins over the file.
    let cli = "cd".repeat(32);
    let mut c = parse(&base).unwrap();
    c.resolve_secrets(&SecretOverrides {
        rpc_secret: Some(cli.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.rpc_secret.as_deref(), Some(cli.as_str()));

    // A bad secret from the environment is named.
    let mut c = parse(&base).unwrap();
    let e = c
        .resolve_secrets(&SecretOverrides {
            rpc_secret: Some("short".into()),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rpc_secret") && e.contains("64 hexadecimal"),
        "{e}"
    );

    // Both forms in the file are refused.
    let both = MINIMAL.replace(
        "rpc_bind_addr",
        &format!("rpc_secret_file = \"{}\"\nrpc_bind_addr", file.display()),
    );
    assert!(err(&both).contains("only one of rpc_secret and rpc_secret_file"));
}

#[test]
fn sse_master_key_sources() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sse");
    std::fs::write(&file, format!("{}\n", "ef".repeat(32))).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let with =
        |k: &str| parse(&MINIMAL.replacen("rpc_bind_addr", &format!("{k}\nrpc_bind_addr"), 1));

    let mut c = with(&format!("sse_master_key_file = \"{}\"", file.display())).unwrap();
    c.resolve_secrets(&SecretOverrides::default()).unwrap();
    assert_eq!(c.sse_master_key, Some("ef".repeat(32)));

    // The environment's value wins; a bad one is named.
    let mut c = with(&format!("sse_master_key = \"{}\"", "01".repeat(32))).unwrap();
    c.resolve_secrets(&SecretOverrides {
        sse_master_key: Some("23".repeat(32)),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.sse_master_key, Some("23".repeat(32)));
    let mut c = with("sse_master_key = \"nothex\"").unwrap();
    let e = c
        .resolve_secrets(&SecretOverrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sse_master_key") && e.contains("64 hexadecimal"),
        "{e}"
    );
    let mut c = with(&format!(
        "sse_master_key = \"{}\"\nsse_master_key_file = \"{}\"",
        "01".repeat(32),
        file.display()
    ))
    .unwrap();
    let e = c
        .resolve_secrets(&SecretOverrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("only one of sse_master_key and sse_master_key_file"),
        "{e}"
    );
    // None configured: none (SSE-S3 is then refused by the S3 API).
    let mut c = with("").unwrap();
    c.resolve_secrets(&SecretOverrides::default()).unwrap();
    assert_eq!(c.sse_master_key, None);
}

#[test]
fn also_accepted_regions_are_region_names() {
    assert!(parse(MINIMAL)
        .unwrap()
        .s3_api
        .also_accept_regions
        .is_empty());
    let c = parse(&format!(
        "{MINIMAL}also_accept_regions = [\"us-east-1\", \"eu-west-1\"]\n"
    ))
    .unwrap();
    assert_eq!(c.s3_api.also_accept_regions, ["us-east-1", "eu-west-1"]);
    for bad in ["\"\"", "\"us east\"", "\"a/b\""] {
        let e = err(&format!("{MINIMAL}also_accept_regions = [{bad}]\n"));
        assert!(
            e.contains("s3_api.also_accept_regions") && e.contains("/etc/test-garage.toml"),
            "{e}"
        );
    }
}
