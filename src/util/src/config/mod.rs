//! `garage.toml`: the node configuration.
//!
//! Keys, types and defaults follow the reference system's configuration
//! reference (see `doc/configuration.md`), with one deliberate difference:
//! an unknown or misspelled key is an error naming the key, the file and the
//! line, not silently ignored. Options the reference removed in earlier
//! versions are still accepted, with a warning, so old files keep loading.

mod de;
#[cfg(test)]
mod fuzz_tests;
mod secrets;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;

pub use de::{check_rpc_secret, parse_duration, parse_size};
pub use secrets::{SecretOrigin, SecretOverrides, SECRET_FILE_NAME};

/// Where garage looks for its configuration when `-c` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/garage.toml";

/// The configuration `garage server` runs with when there is no config file:
/// a single node on loopback with everything under `./garage-data`.
pub const BUILTIN_DEFAULT_TOML: &str = r#"# garage's built-in single-node configuration
metadata_dir = "garage-data/meta"
data_dir = "garage-data/data"
db_engine = "lmdb"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:3901"
rpc_public_addr = "127.0.0.1:3901"

[s3_api]
api_bind_addr = "127.0.0.1:3900"
s3_region = "garage"
root_domain = ".s3.garage.localhost"

[s3_web]
bind_addr = "127.0.0.1:3902"
root_domain = ".web.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:3903"
"#;

/// Name shown as the "file" of the built-in configuration in messages.
pub const BUILTIN_NAME: &str = "<built-in default configuration>";

/// Why a key of the reference system is accepted and ignored.
const REMOVED: &str = "the reference system removed it; garage ignores it";
const NO_DISCOVERY: &str =
    "garage does not discover peers through Consul or Kubernetes: list them in `bootstrap_peers` or use `garage node connect`";
const NO_K2V: &str = "garage does not serve the K2V API";
const NO_WEB_INDEX: &str =
    "the index document is set per bucket (PutBucketWebsite, `garage bucket website --allow --index-document`); this key was removed in the reference's v0.6";
const NO_RPC_TLS: &str =
    "RPC is encrypted with `rpc_secret`; TLS options were removed in the reference's v0.5";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {file}: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid configuration file {file}:\n{message}")]
    Parse { file: PathBuf, message: String },
    #[error("invalid configuration file {file}: `{key}`: {message}")]
    Invalid {
        file: PathBuf,
        key: String,
        message: String,
    },
}

/// The whole configuration of a node.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the metadata database, node key and snapshots live.
    pub metadata_dir: PathBuf,
    /// Where data blocks live: one directory or several with capacities.
    pub data_dir: DataDirs,
    /// Where `garage meta snapshot` and auto-snapshots go; default
    /// `<metadata_dir>/snapshots`.
    #[serde(default)]
    pub metadata_snapshots_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::opt_duration")]
    pub metadata_auto_snapshot_interval: Option<Duration>,
    #[serde(default = "default_db_engine", deserialize_with = "de::db_engine")]
    pub db_engine: crate::db_engine::Engine,
    /// Sync every metadata commit to disk before acknowledging it.
    #[serde(default)]
    pub metadata_fsync: bool,
    /// Sync every data block to disk before acknowledging it.
    #[serde(default)]
    pub data_fsync: bool,
    #[serde(default)]
    pub disable_scrub: bool,
    #[serde(default)]
    pub use_local_tz: bool,
    #[serde(default = "default_block_size", deserialize_with = "de::size")]
    pub block_size: u64,
    #[serde(
        default = "default_block_ram_buffer_max",
        deserialize_with = "de::size"
    )]
    pub block_ram_buffer_max: u64,
    #[serde(default = "default_block_max_concurrent_reads")]
    pub block_max_concurrent_reads: usize,
    #[serde(default = "default_block_max_concurrent_writes_per_request")]
    pub block_max_concurrent_writes_per_request: usize,
    /// LMDB's map size; 0 or absent means 1 TiB.
    #[serde(default, deserialize_with = "de::size")]
    pub lmdb_map_size: u64,
    /// LMDB writes through its map, which then grows in preallocated steps.
    #[serde(default = "default_lmdb_write_map")]
    pub lmdb_write_map: bool,

    #[serde(deserialize_with = "de::replication_factor")]
    pub replication_factor: usize,
    #[serde(default)]
    pub consistency_mode: ConsistencyMode,
    /// Removed in the reference's v2; present only to give a clear error.
    #[serde(default)]
    replication_mode: Option<toml::Value>,
    /// zstd level for data blocks; `None` when set to `"none"`.
    #[serde(default = "default_compression", deserialize_with = "de::compression")]
    pub compression_level: Option<i32>,

    #[serde(default, deserialize_with = "de::opt_rpc_secret")]
    pub rpc_secret: Option<String>,
    #[serde(default)]
    pub rpc_secret_file: Option<PathBuf>,
    /// The SSE-S3 master key of earlier releases (64 hexadecimal
    /// characters), which wrapped the data keys of the SSE-S3 objects they
    /// wrote: only needed to read those. New objects use the cluster's
    /// own keys (`garage_model::kms`).
    #[serde(default)]
    pub sse_master_key: Option<String>,
    #[serde(default)]
    pub sse_master_key_file: Option<PathBuf>,
    pub rpc_bind_addr: SocketAddr,
    #[serde(default)]
    pub rpc_bind_outgoing: bool,
    #[serde(default)]
    pub rpc_public_addr: Option<String>,
    #[serde(default)]
    pub rpc_public_addr_subnet: Option<String>,
    #[serde(default)]
    pub rpc_ping_timeout_msec: Option<u64>,
    #[serde(default)]
    pub rpc_timeout_msec: Option<u64>,
    /// Largest offset of this node's clock from its peers' (ms) before the
    /// cluster health is degraded and time-based decisions are refused
    /// here (see [`crate::clock`]). Default 2000.
    #[serde(default)]
    pub max_clock_offset_msec: Option<u64>,
    #[serde(default)]
    pub bootstrap_peers: Vec<String>,
    /// Bucket notification events this node's outbox holds at most
    /// before new ones are dropped (counted, logged); default 1 000 000.
    #[serde(default)]
    pub notify_max_queued_events: Option<u64>,
    /// Versions this node's replication queue holds at most (default
    /// 10 000 000); past it, new versions are not queued (an error line
    /// each time; they stay PENDING until a resync).
    #[serde(default)]
    pub replication_max_queued_versions: Option<u64>,
    #[serde(default)]
    pub allow_world_readable_secrets: bool,
    #[serde(default)]
    pub allow_punycode: bool,

    pub s3_api: S3ApiConfig,
    #[serde(default)]
    pub s3_web: Option<WebConfig>,
    #[serde(default)]
    pub admin: AdminConfig,

    // Keys and sections of the reference system that garage accepts and
    // ignores, with a warning (see `Config::ignored_keys`): removed ones,
    // and those of features garage does not have, so that the reference's
    // documented files (quick-start, cookbooks, Helm chart) load.
    #[serde(default)]
    sled_cache_capacity: Option<toml::Value>,
    #[serde(default)]
    sled_flush_every_ms: Option<toml::Value>,
    #[serde(default)]
    block_manager_background_tranquility: Option<toml::Value>,
    #[serde(default)]
    fjall_block_cache_size: Option<toml::Value>,
    #[serde(default)]
    max_concurrent_rpc_requests: Option<toml::Value>,
    #[serde(default)]
    consul_host: Option<toml::Value>,
    #[serde(default)]
    consul_service_name: Option<toml::Value>,
    #[serde(default)]
    kubernetes_namespace: Option<toml::Value>,
    #[serde(default)]
    kubernetes_service_name: Option<toml::Value>,
    #[serde(default)]
    kubernetes_skip_crd: Option<toml::Value>,
    #[serde(default)]
    rpc_tls: Option<toml::Value>,
    #[serde(default)]
    consul_discovery: Option<toml::Value>,
    #[serde(default)]
    kubernetes_discovery: Option<toml::Value>,
    #[serde(default)]
    k2v_api: Option<toml::Value>,

    /// The file this configuration was read from (not a TOML key).
    #[serde(skip)]
    pub source: ConfigSource,
}

/// Where a configuration came from, for messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ConfigSource {
    File(PathBuf),
    #[default]
    BuiltIn,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::File(p) => write!(f, "{}", p.display()),
            ConfigSource::BuiltIn => f.write_str(BUILTIN_NAME),
        }
    }
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ConsistencyMode {
    /// Read and write quorums intersect: read-after-write consistency.
    #[default]
    Consistent,
    /// Reads from one node; writes still need a quorum.
    Degraded,
    /// Reads and writes from one node.
    Dangerous,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct S3ApiConfig {
    #[serde(default)]
    pub api_bind_addr: Option<String>,
    pub s3_region: String,
    /// Regions requests may also be signed for, besides `s3_region` (and
    /// `us-east-1` for ListBuckets, GetBucketLocation and CreateBucket,
    /// always accepted): for clients that cannot be told a region. See
    /// doc/s3.md "Regions".
    #[serde(default)]
    pub also_accept_regions: Vec<String>,
    #[serde(default)]
    pub root_domain: Option<String>,
    /// New buckets get SSE-S3 as their default encryption (as AWS's
    /// have since 2023). Off by default: see doc/s3.md "Encryption by
    /// default". Set it alike on every node: the node a bucket is
    /// created through decides.
    #[serde(default)]
    pub encrypt_new_buckets: bool,
    /// The object ownership setting of new buckets (as AWS's since 2023:
    /// `BucketOwnerEnforced`, ACLs disabled); a CreateBucket's
    /// `x-amz-object-ownership` wins. `ObjectWriter` keeps ACLs working on
    /// new buckets as before v0.3.0 (Mastodon's `public-read` uploads).
    /// See doc/access-control.md "Ownership controls".
    #[serde(default)]
    pub new_bucket_object_ownership: NewBucketOwnership,
}

/// `s3_api.new_bucket_object_ownership`.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NewBucketOwnership {
    #[default]
    BucketOwnerEnforced,
    BucketOwnerPreferred,
    ObjectWriter,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    pub bind_addr: String,
    pub root_domain: String,
    #[serde(default)]
    pub add_host_to_metrics: bool,
    /// Removed in the reference's v0.6, still in its quick-start: ignored.
    #[serde(default)]
    index: Option<toml::Value>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    #[serde(default)]
    pub api_bind_addr: Option<String>,
    #[serde(default)]
    pub admin_token: Option<String>,
    #[serde(default)]
    pub admin_token_file: Option<PathBuf>,
    #[serde(default)]
    pub metrics_token: Option<String>,
    #[serde(default)]
    pub metrics_token_file: Option<PathBuf>,
    #[serde(default)]
    pub metrics_require_token: bool,
    #[serde(default)]
    pub trace_sink: Option<String>,
}

/// `data_dir`: one directory, or several with a capacity each (or
/// `read_only`, for a directory that is only drained).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataDirs {
    Single(PathBuf),
    Multiple(Vec<DataDir>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    pub path: PathBuf,
    pub state: DataDirState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirState {
    Active { capacity: u64 },
    ReadOnly,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataDir {
    path: PathBuf,
    #[serde(default, deserialize_with = "de::opt_size")]
    capacity: Option<u64>,
    #[serde(default)]
    read_only: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDataDirs {
    Single(PathBuf),
    Multiple(Vec<RawDataDir>),
}

impl<'de> Deserialize<'de> for DataDirs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Parse the list through a toml::Value first so that errors inside an
        // entry keep their own message instead of "no variant matched".
        let value = toml::Value::deserialize(d)?;
        let raw = match value {
            toml::Value::String(s) => RawDataDirs::Single(PathBuf::from(s)),
            v @ toml::Value::Array(_) => {
                RawDataDirs::Multiple(Vec::<RawDataDir>::deserialize(v).map_err(D::Error::custom)?)
            }
            _ => {
                return Err(D::Error::custom(
                    "data_dir is a path, or a list of { path = \"...\", capacity = \"...\" } or { path = \"...\", read_only = true }",
                ))
            }
        };
        match raw {
            RawDataDirs::Single(p) => Ok(DataDirs::Single(p)),
            RawDataDirs::Multiple(list) => {
                let mut dirs = Vec::with_capacity(list.len());
                for d in list {
                    let state = match (d.capacity, d.read_only) {
                        (Some(0), false) => {
                            return Err(D::Error::custom(format!(
                                "data_dir {}: capacity must be more than 0",
                                d.path.display()
                            )))
                        }
                        (Some(capacity), false) => DataDirState::Active { capacity },
                        (None, true) => DataDirState::ReadOnly,
                        (Some(_), true) => {
                            return Err(D::Error::custom(format!(
                                "data_dir {}: a read_only directory takes no capacity",
                                d.path.display()
                            )))
                        }
                        (None, false) => {
                            return Err(D::Error::custom(format!(
                                "data_dir {}: give it a capacity (e.g. capacity = \"2T\") or mark it read_only = true",
                                d.path.display()
                            )))
                        }
                    };
                    dirs.push(DataDir {
                        path: d.path,
                        state,
                    });
                }
                if !dirs
                    .iter()
                    .any(|d| matches!(d.state, DataDirState::Active { .. }))
                {
                    return Err(D::Error::custom(
                        "data_dir needs at least one directory that is not read_only",
                    ));
                }
                Ok(DataDirs::Multiple(dirs))
            }
        }
    }
}

impl DataDirs {
    /// Every configured directory, read-only ones included.
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            DataDirs::Single(p) => vec![p.as_path()],
            DataDirs::Multiple(v) => v.iter().map(|d| d.path.as_path()).collect(),
        }
    }
}

fn default_db_engine() -> crate::db_engine::Engine {
    crate::db_engine::Engine::Lmdb
}
fn default_lmdb_write_map() -> bool {
    true
}
fn default_block_size() -> u64 {
    1 << 20
}
fn default_block_ram_buffer_max() -> u64 {
    256 << 20
}
fn default_block_max_concurrent_reads() -> usize {
    16
}
fn default_block_max_concurrent_writes_per_request() -> usize {
    10
}
fn default_compression() -> Option<i32> {
    Some(1)
}

/// Smallest accepted `metadata_auto_snapshot_interval`.
pub const MIN_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(600);

impl Config {
    /// Reads and validates the configuration file at `path`. Secrets are not
    /// resolved yet: see [`Config::resolve_secrets`].
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, ConfigSource::File(path.to_path_buf()))
    }

    /// The built-in single-node configuration, with its relative paths
    /// resolved against `base` (normally the working directory).
    pub fn builtin_default(base: &Path) -> Config {
        let mut c = Self::parse(BUILTIN_DEFAULT_TOML, ConfigSource::BuiltIn)
            .expect("the built-in configuration is valid (checked by a unit test)");
        c.metadata_dir = base.join(&c.metadata_dir);
        c.data_dir = DataDirs::Single(base.join(c.data_dir.paths()[0]));
        c
    }

    /// Parses configuration text. `source` names it in error messages.
    pub fn parse(text: &str, source: ConfigSource) -> Result<Config, ConfigError> {
        let file = PathBuf::from(source.to_string());
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        config.source = source;
        config.validate()?;
        Ok(config)
    }

    fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: PathBuf::from(self.source.to_string()),
            key: key.to_string(),
            message: message.into(),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.replication_mode.is_some() {
            return Err(self.invalid(
                "replication_mode",
                "this option is no longer supported: set replication_factor (e.g. 3) and, if needed, consistency_mode",
            ));
        }
        if let Some(i) = self.metadata_auto_snapshot_interval {
            if i < MIN_SNAPSHOT_INTERVAL {
                return Err(self.invalid(
                    "metadata_auto_snapshot_interval",
                    "must be at least 10 minutes (\"10m\")",
                ));
            }
        }
        if self.block_size < 1024 {
            return Err(self.invalid("block_size", "must be at least 1 KiB (default: 1 MiB)"));
        }
        if self.block_max_concurrent_reads == 0 {
            return Err(self.invalid("block_max_concurrent_reads", "must be at least 1"));
        }
        if self.block_max_concurrent_writes_per_request == 0 {
            return Err(self.invalid(
                "block_max_concurrent_writes_per_request",
                "must be at least 1",
            ));
        }
        if self.rpc_secret.is_some() && self.rpc_secret_file.is_some() {
            return Err(self.invalid(
                "rpc_secret_file",
                "only one of rpc_secret and rpc_secret_file can be set",
            ));
        }
        for r in &self.s3_api.also_accept_regions {
            if r.is_empty() || r.contains(|c: char| c == '/' || c.is_whitespace()) {
                return Err(self.invalid(
                    "s3_api.also_accept_regions",
                    format!("{r:?} is not a region name (a word such as \"us-east-1\", without '/' or spaces)"),
                ));
            }
        }
        Ok(())
    }

    /// Keys and sections of the reference system that this file sets and
    /// that garage ignores, each with why; the caller logs them.
    pub fn ignored_keys(&self) -> Vec<(&'static str, &'static str)> {
        let web_index = self.s3_web.as_ref().is_some_and(|w| w.index.is_some());
        [
            (
                "sled_cache_capacity",
                self.sled_cache_capacity.is_some(),
                REMOVED,
            ),
            (
                "sled_flush_every_ms",
                self.sled_flush_every_ms.is_some(),
                REMOVED,
            ),
            (
                "block_manager_background_tranquility",
                self.block_manager_background_tranquility.is_some(),
                REMOVED,
            ),
            (
                "fjall_block_cache_size",
                self.fjall_block_cache_size.is_some(),
                REMOVED,
            ),
            (
                "max_concurrent_rpc_requests",
                self.max_concurrent_rpc_requests.is_some(),
                REMOVED,
            ),
            ("consul_host", self.consul_host.is_some(), NO_DISCOVERY),
            (
                "consul_service_name",
                self.consul_service_name.is_some(),
                NO_DISCOVERY,
            ),
            (
                "kubernetes_namespace",
                self.kubernetes_namespace.is_some(),
                NO_DISCOVERY,
            ),
            (
                "kubernetes_service_name",
                self.kubernetes_service_name.is_some(),
                NO_DISCOVERY,
            ),
            (
                "kubernetes_skip_crd",
                self.kubernetes_skip_crd.is_some(),
                NO_DISCOVERY,
            ),
            ("[rpc_tls]", self.rpc_tls.is_some(), NO_RPC_TLS),
            (
                "[consul_discovery]",
                self.consul_discovery.is_some(),
                NO_DISCOVERY,
            ),
            (
                "[kubernetes_discovery]",
                self.kubernetes_discovery.is_some(),
                NO_DISCOVERY,
            ),
            ("[k2v_api]", self.k2v_api.is_some(), NO_K2V),
            ("s3_web.index", web_index, NO_WEB_INDEX),
        ]
        .into_iter()
        .filter(|(_, set, _)| *set)
        .map(|(k, _, why)| (k, why))
        .collect()
    }

    /// LMDB map size in bytes: the configured one rounded down to a whole
    /// number of 4 KiB pages, or 1 TiB.
    pub fn lmdb_map_size(&self) -> u64 {
        match self.lmdb_map_size {
            0 => crate::db_engine::DEFAULT_LMDB_MAP_SIZE,
            n => (n / 4096 * 4096).max(4096),
        }
    }

    pub fn metadata_snapshots_dir(&self) -> PathBuf {
        self.metadata_snapshots_dir
            .clone()
            .unwrap_or_else(|| self.metadata_dir.join("snapshots"))
    }

    /// Path of the metadata database for the configured engine.
    pub fn db_path(&self) -> PathBuf {
        self.db_engine.db_path(&self.metadata_dir)
    }

    /// Whether this configuration describes a node meant to join others:
    /// such a node must share an `rpc_secret` with them.
    pub fn is_multi_node(&self) -> bool {
        self.replication_factor > 1 || !self.bootstrap_peers.is_empty()
    }
}

#[cfg(test)]
mod tests;
