//! Fuzz target of configuration parsing (bolero; `cargo test -p
//! garage_util fuzz_`, `GARAGE_FUZZ_SECONDS` each, default 1 s): any
//! text, and a full configuration with random edits, is parsed and
//! validated without a panic, and every error names the file.

use crate::fuzzing::budget;
use std::path::PathBuf;

use super::{Config, ConfigSource};

const SAMPLE: &str = r#"metadata_dir = "/var/lib/garage/meta"
data_dir = [{ path = "/d1", capacity = "2T" }, { path = "/d2", read_only = true }]
db_engine = "sqlite"
replication_factor = 3
consistency_mode = "degraded"
compression_level = 2
block_size = "1M"
rpc_bind_addr = "[::]:3901"
rpc_public_addr = "10.0.0.1:3901"
rpc_secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
bootstrap_peers = ["ec79480e0ce52ae26fd00c9da684e4fa56658d9c64cdcecb094e936de0bfe71f@10.0.0.2:3901"]
metadata_auto_snapshot_interval = "6h"

[s3_api]
s3_region = "garage"
api_bind_addr = "[::]:3900"
root_domain = ".s3.example.com"

[s3_web]
bind_addr = "[::]:3902"
root_domain = ".web.example.com"

[admin]
api_bind_addr = "0.0.0.0:3903"
admin_token = "t"
metrics_token = "m"
"#;

fn parse(text: &str) {
    let source = ConfigSource::File(PathBuf::from("/etc/fuzz.toml"));
    if let Err(e) = Config::parse(text, source) {
        let m = e.to_string();
        assert!(m.contains("fuzz.toml"), "the error names the file: {m}");
    }
}

#[test]
fn fuzz_config_parse() {
    parse(SAMPLE);
    assert!(
        Config::parse(SAMPLE, ConfigSource::BuiltIn).is_ok(),
        "the sample is valid"
    );
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(8192)
        .with_type::<(String, Vec<(u16, u8)>)>()
        .for_each(|(text, edits)| {
            parse(text);
            let mut b = SAMPLE.as_bytes().to_vec();
            for (pos, v) in edits {
                if b.is_empty() {
                    break;
                }
                let i = usize::from(*pos) % b.len();
                match v % 4 {
                    0 => b[i] = *v,
                    1 => b.insert(i, *v),
                    2 => {
                        b.remove(i);
                    }
                    _ => b.truncate(i.max(1)),
                }
            }
            parse(&String::from_utf8_lossy(&b));
        });
}
