//! Command-line interface. Verbs, flags and environment variables follow the
//! reference system's CLI so that operators' scripts keep working; global
//! options may be given before or after the verb.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "garage",
    version,
    about = "garage: a geo-distributed, S3-compatible object store (daemon and admin CLI)",
    long_about = None,
    disable_help_flag = true,
    after_help = "Run a single node with the built-in configuration: garage server\n\
                  Configuration reference: doc/configuration.md"
)]
pub struct Opt {
    /// Print help
    #[arg(long, action = ArgAction::Help, global = true)]
    help: Option<bool>,

    /// Node to talk to for admin commands, as <full-node-id>@<ip>:<port>
    /// (`-h` is this option, as in the reference CLI; help is `--help`)
    #[arg(short = 'h', long, env = "GARAGE_RPC_HOST", global = true)]
    pub rpc_host: Option<String>,

    /// Configuration file [default: /etc/garage.toml; `garage server` falls
    /// back to a built-in single-node configuration when that file does not
    /// exist]
    #[arg(short = 'c', long, env = "GARAGE_CONFIG_FILE", global = true)]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub secrets: SecretOpt,

    #[command(subcommand)]
    pub cmd: Command,
}

/// Secrets given on the command line or in the environment; they take
/// precedence over the configuration file.
#[derive(Args, Debug, Default)]
pub struct SecretOpt {
    /// RPC secret (64 hexadecimal characters)
    #[arg(
        short = 's',
        long,
        env = "GARAGE_RPC_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub rpc_secret: Option<String>,
    /// File holding the RPC secret
    #[arg(long, env = "GARAGE_RPC_SECRET_FILE", global = true)]
    pub rpc_secret_file: Option<PathBuf>,
    /// Admin API bearer token
    #[arg(
        long,
        env = "GARAGE_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub admin_token: Option<String>,
    /// File holding the admin API bearer token
    #[arg(long, env = "GARAGE_ADMIN_TOKEN_FILE", global = true)]
    pub admin_token_file: Option<PathBuf>,
    /// Bearer token for /metrics
    #[arg(
        long,
        env = "GARAGE_METRICS_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub metrics_token: Option<String>,
    /// File holding the bearer token for /metrics
    #[arg(long, env = "GARAGE_METRICS_TOKEN_FILE", global = true)]
    pub metrics_token_file: Option<PathBuf>,
    /// Accept secret files that other users can read
    #[arg(long, env = "GARAGE_ALLOW_WORLD_READABLE_SECRETS", global = true)]
    pub allow_world_readable_secrets: Option<bool>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the garage daemon
    Server,
    /// Show the nodes of the cluster and their health [not available yet]
    Status(Pending),
    /// Node identity and connections: id, connect [not available yet]
    Node(Pending),
    /// Cluster layout: show, assign, remove, apply, revert, history, config [not available yet]
    Layout(Pending),
    /// Buckets: create, list, info, delete, alias, allow, deny, website, set-quotas [not available yet]
    Bucket(Pending),
    /// Access keys: create, list, info, delete, allow, deny, import, rename [not available yet]
    Key(Pending),
    /// Start repair operations: tables, blocks, rebalance, scrub [not available yet]
    Repair(Pending),
    /// Statistics of this node and the cluster [not available yet]
    Stats(Pending),
    /// Background workers: list, info, get, set [not available yet]
    Worker(Pending),
    /// Data blocks: list-errors, info, retry-now, purge [not available yet]
    Block(Pending),
    /// Copy a metadata database into another engine
    ConvertDb(ConvertDbOpt),
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::Server => "server",
            Command::Status(_) => "status",
            Command::Node(_) => "node",
            Command::Layout(_) => "layout",
            Command::Bucket(_) => "bucket",
            Command::Key(_) => "key",
            Command::Repair(_) => "repair",
            Command::Stats(_) => "stats",
            Command::Worker(_) => "worker",
            Command::Block(_) => "block",
            Command::ConvertDb(_) => "convert-db",
        }
    }
}

/// Arguments of a verb this build does not provide yet.
#[derive(Args, Debug)]
pub struct Pending {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ConvertDbOpt {
    /// Engine of the input database (lmdb or sqlite)
    #[arg(short = 'a', long = "input-engine")]
    pub input_engine: String,
    /// Path of the input database (e.g. <metadata_dir>/db.lmdb)
    #[arg(short = 'i', long = "input-path")]
    pub input_path: PathBuf,
    /// Engine of the output database (lmdb or sqlite)
    #[arg(short = 'b', long = "output-engine")]
    pub output_engine: String,
    /// Path of the output database (e.g. <metadata_dir>/db.sqlite); must not exist yet
    #[arg(short = 'o', long = "output-path")]
    pub output_path: PathBuf,
    /// LMDB map size of an LMDB output, e.g. "100GiB" [default: 1TiB]
    #[arg(long)]
    pub lmdb_map_size: Option<String>,
}
