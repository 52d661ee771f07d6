//! Command-line interface. Verbs, flags and environment variables follow the
//! reference system's CLI so that operators' scripts keep working. The
//! secret and host options may be given before or after the verb; `-c` is
//! the configuration file before the verb (and after `server`), while after
//! `layout assign` it is the capacity, as in the reference CLI.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

impl Opt {
    /// The configuration file given with `-c`, before or after `server`.
    pub fn config_path(&self) -> Option<&PathBuf> {
        match &self.cmd {
            Command::Server {
                config: Some(path), ..
            } => Some(path),
            _ => self.config.as_ref(),
        }
    }
}

/// `garage --version`: the release, the commit, and what this build reads
/// and writes (see doc/upgrading.md). `-V` prints the first line only.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("GARAGE_COMMIT"),
    "\nnode-to-node protocol: garage-net/1 with versions in the handshake",
    "\ntalks to nodes of: v0.2.0 and later (refuses older ones, and any below the cluster's finalized version)",
    "\ncluster versions: 0.1.0, 0.2.0, 0.3.0 (active version: what `garage upgrade finalize` last set; `garage status` shows it)",
    "\ntable entries: reads formats 1 (named MessagePack) and 2 (compact), writes 2",
    "\nlayout file: format 1; blocks: plain or zstd, replicated or erasure-coded shards (as v0.1.0)",
    "\nfeatures used once the cluster is finalized at 0.3.0: noncurrent-version-transition",
);

#[derive(Parser, Debug)]
#[command(
    name = "garage",
    version,
    long_version = LONG_VERSION,
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

    /// Node to talk to for admin commands, as <full-node-id>@<ip>:<port>,
    /// or <host>:<port> alone (its id is then learned by connecting)
    /// (`-h` is this option, as in the reference CLI; help is `--help`)
    #[arg(short = 'h', long, env = "GARAGE_RPC_HOST", global = true)]
    pub rpc_host: Option<String>,

    /// Print the answer of a read command (status, layout show, bucket
    /// list/info, key list/info, stats, worker list/info/get, block
    /// list-errors/info, admin-token list/info) as one JSON document, with
    /// the fields of the admin API endpoint it calls
    #[arg(long, global = true)]
    pub json: bool,

    /// Configuration file [default: /etc/garage.toml; `garage server` falls
    /// back to a built-in single-node configuration when that file does not
    /// exist]
    #[arg(short = 'c', long, env = "GARAGE_CONFIG_FILE")]
    config: Option<PathBuf>,

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
    /// Earlier releases' SSE-S3 master key (64 hexadecimal characters): only to read the SSE-S3 objects they wrote
    #[arg(
        long,
        env = "GARAGE_SSE_MASTER_KEY",
        hide_env_values = true,
        global = true
    )]
    pub sse_master_key: Option<String>,
    /// File holding earlier releases' SSE-S3 master key
    #[arg(long, env = "GARAGE_SSE_MASTER_KEY_FILE", global = true)]
    pub sse_master_key_file: Option<PathBuf>,
    /// Accept secret files that other users can read
    #[arg(long, env = "GARAGE_ALLOW_WORLD_READABLE_SECRETS", global = true)]
    pub allow_world_readable_secrets: Option<bool>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the garage daemon
    Server {
        /// Configuration file (same as `garage -c FILE server`)
        #[arg(short = 'c', long)]
        config: Option<PathBuf>,
        /// On first start, give this node a role (zone dc1, 100 GiB) and
        /// apply that layout: a one-node cluster with no CLI step (needs
        /// replication_factor = 1)
        #[arg(long)]
        single_node: bool,
        /// On every start, make sure the key GARAGE_DEFAULT_ACCESS_KEY (with
        /// secret GARAGE_DEFAULT_SECRET_KEY) and the bucket
        /// GARAGE_DEFAULT_BUCKET exist, the key with read, write and owner
        /// permission on the bucket (for containers)
        #[arg(long)]
        default_bucket: bool,
    },
    /// Show the nodes of the cluster and their health
    Status,
    /// Node identity and connections
    #[command(subcommand)]
    Node(NodeOperation),
    /// Cluster layout: which nodes store data, in which zones
    #[command(subcommand)]
    Layout(LayoutOperation),
    /// Buckets: list, info, create, delete, alias, unalias, allow, deny, website, set-quotas, replication
    #[command(subcommand)]
    Bucket(BucketOperation),
    /// Access keys: list, info, create, rename, delete, allow, deny, import
    #[command(subcommand)]
    Key(KeyOperation),
    /// Start repair operations (tables, blocks, rebalance, block-rc, versions, mpu, block-refs, aliases, scrub)
    Repair(RepairOpt),
    /// Statistics of the node's tables and blocks
    Stats {
        /// Every node of the cluster, not only the one reached
        #[arg(short = 'a', long)]
        all_nodes: bool,
    },
    /// Background workers: list, get, set
    #[command(subcommand)]
    Worker(WorkerOperation),
    /// Data blocks: list-errors, info, retry-now
    #[command(subcommand)]
    Block(BlockOperation),
    /// Metadata database: snapshot
    #[command(subcommand)]
    Meta(MetaOperation),
    /// Call any admin API endpoint by name with a JSON request (its query
    /// parameters and body fields in one object; `-` reads it from standard
    /// input) and print the JSON answer
    JsonApi {
        /// Endpoint name, e.g. GetClusterStatus, GetBucketInfo
        endpoint: String,
        /// The request, e.g. '{"globalAlias": "photos"}'
        request: Option<String>,
    },
    /// Admin API tokens: list, info, create, rename, set, delete, delete-expired
    #[command(subcommand)]
    AdminToken(AdminTokenOperation),
    /// The cluster's encryption keys (SSE-S3, SSE-KMS): list, info,
    /// create, rotate, disable, enable, alias, unalias, describe
    #[command(subcommand)]
    Kms(KmsOperation),
    /// Bucket notification topics (where events go): list, info, create,
    /// delete
    #[command(subcommand)]
    Topic(TopicOperation),
    /// Bucket replication remotes (the S3 endpoints buckets replicate
    /// to): list, info, add, delete
    #[command(subcommand)]
    Remote(RemoteOperation),
    /// IAM users, groups and policies: any action of `aws iam`, with its
    /// parameters, as the operator (`garage iam create-user --user-name
    /// alice`, `garage iam attach-user-policy --user-name alice
    /// --policy-arn arn:aws:iam::aws:policy/AmazonS3FullAccess`); a
    /// value `file://PATH` is read from the file
    Iam {
        /// The action, as aws-cli names it (`create-user`) or as AWS does
        /// (`CreateUser`)
        action: String,
        /// `--param-name value` pairs (`--user-name alice`), or AWS's
        /// names (`--Tags.member.1.Key team`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        params: Vec<String>,
    },
    /// Rolling upgrades: status (versions per node, the active cluster
    /// version), finalize (adopt this node's release for good)
    #[command(subcommand)]
    Upgrade(UpgradeOperation),
    /// Copy a metadata database into another engine
    ConvertDb(ConvertDbOpt),
    /// Repair this node's metadata database directly, with its daemon stopped
    OfflineRepair(OfflineRepairOpt),
}

#[derive(Args, Debug)]
pub struct OfflineRepairOpt {
    /// Confirm: the daemon of this node is stopped
    #[arg(long)]
    pub yes: bool,
    #[command(subcommand)]
    pub what: OfflineRepairWhat,
}

#[derive(Subcommand, Debug, Clone)]
pub enum OfflineRepairWhat {
    /// Recount this node's per-bucket counters (objects, bytes, unfinished uploads) from its object table
    ObjectCounters,
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::Server { .. } => "server",
            Command::Status => "status",
            Command::Node(_) => "node",
            Command::Layout(_) => "layout",
            Command::Bucket(_) => "bucket",
            Command::Key(_) => "key",
            Command::Repair(_) => "repair",
            Command::Stats { .. } => "stats",
            Command::Worker(_) => "worker",
            Command::Block(_) => "block",
            Command::Meta(_) => "meta",
            Command::AdminToken(_) => "admin-token",
            Command::Kms(_) => "kms",
            Command::Topic(_) => "topic",
            Command::Remote(_) => "remote",
            Command::Iam { .. } => "iam",
            Command::Upgrade(_) => "upgrade",
            Command::JsonApi { .. } => "json-api",
            Command::ConvertDb(_) => "convert-db",
            Command::OfflineRepair(_) => "offline-repair",
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum UpgradeOperation {
    /// Each node's release, the cluster's active version, and whether it
    /// can be finalized now
    Status,
    /// Raise the cluster's active version to the release of the node
    /// reached, once every node of the layout is up and runs it: the new
    /// release's features are then used, and older releases (a rollback)
    /// are refused for good
    Finalize,
}

#[derive(Subcommand, Debug)]
pub enum NodeOperation {
    /// Print the id of the node, as <id>@<address> to give to `node connect`
    Id {
        /// Print only <id>@<address>
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Connect the node to another one: <node_id>@<host>:<port>
    Connect {
        /// The other node, as printed by its `garage node id`
        node: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum LayoutOperation {
    /// Show the current layout, the staged changes and what applying them would do
    Show,
    /// Stage a role (zone, capacity or gateway, tags) for one or several nodes
    Assign(AssignRoleOpt),
    /// Stage the removal of a node from the layout
    Remove {
        /// Node id, or a unique prefix of it
        node_id: String,
    },
    /// Stage a change of the layout parameters
    Config {
        /// Zone redundancy: the number of distinct zones each partition spans, or "maximum"
        #[arg(short = 'r', long)]
        redundancy: Option<String>,
        /// An erasure-coded storage class: NAME=DATA+PARITY (e.g. STANDARD_IA=4+2), NAME=auto (a code chosen for the zones) or NAME=off; repeatable
        #[arg(long = "storage-class", value_name = "NAME=CODE")]
        storage_class: Vec<String>,
    },
    /// Stage a storage class with a place: its redundancy (copies or an
    /// erasure code) and the zones its blocks may use; or change or remove one
    Class(ClassOpt),
    /// Apply the staged changes as the next layout version
    Apply {
        /// The new version number, as shown by `garage layout show` (guards against applying unreviewed changes)
        #[arg(long)]
        version: Option<u64>,
    },
    /// Drop all staged changes
    Revert {
        /// Confirm
        #[arg(long)]
        yes: bool,
    },
    /// List the applied layout versions, and the progress of a layout change
    History,
    /// Let a layout change finish although some nodes are down for good
    SkipDeadNodes {
        /// The layout version to move the dead nodes' trackers to (the current one)
        #[arg(long)]
        version: u64,
        /// Also count the dead nodes as synced: entries only they held are lost
        #[arg(long)]
        allow_missing_data: bool,
    },
}

#[derive(Args, Debug)]
pub struct ClassOpt {
    /// Class name: capital letters, digits, '_' and '-' (e.g. EU, ARCHIVE, LOCAL)
    pub name: String,
    /// Copies of each block, 1 to 8
    #[arg(long, conflicts_with = "erasure")]
    pub replication: Option<u8>,
    /// An erasure code, DATA+PARITY (e.g. 4+2), or "auto" (a code chosen for the class's zones)
    #[arg(long)]
    pub erasure: Option<String>,
    /// The zones the class's blocks may go to, comma-separated; "all" for every zone (the default of a new class)
    #[arg(long, value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Accept one copy (--replication 1), which does not survive the loss of its node
    #[arg(long)]
    pub allow_no_redundancy: bool,
    /// Remove the class (blocks stored with it stay where they are)
    #[arg(long, conflicts_with_all = ["replication", "erasure", "zones", "allow_no_redundancy"])]
    pub remove: bool,
}

#[derive(Args, Debug)]
pub struct AssignRoleOpt {
    /// Node ids, or unique prefixes of them
    #[arg(required = true)]
    pub node_ids: Vec<String>,
    /// Zone (a site, a datacenter) the nodes are in
    #[arg(short = 'z', long)]
    pub zone: Option<String>,
    /// Storage capacity, e.g. 100G or 2TiB
    #[arg(short = 'c', long)]
    pub capacity: Option<String>,
    /// Make the nodes gateways: they route requests and store nothing
    #[arg(short = 'g', long)]
    pub gateway: bool,
    /// Tags (repeat the option for several)
    #[arg(short = 't', long = "tag")]
    pub tags: Vec<String>,
    /// Nodes to remove from the layout at the same time
    #[arg(long)]
    pub replace: Vec<String>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum BucketOperation {
    /// List the buckets
    List,
    /// Abort the multipart uploads older than a given age (their parts
    /// are released)
    CleanupIncompleteUploads {
        /// Uploads started longer ago than this (e.g. 1d, 12h)
        #[arg(long, default_value = "1d")]
        older_than: String,
        /// Buckets: global aliases, ids or unique id prefixes
        #[arg(required = true)]
        buckets: Vec<String>,
    },
    /// Information about a bucket
    Info {
        /// Global alias, id or unique id prefix
        name: String,
    },
    /// Create a bucket, with a global alias
    Create {
        /// Bucket name (3-63 lowercase letters, digits, '-' and '.')
        name: String,
    },
    /// Delete an empty bucket
    Delete {
        /// Confirm
        #[arg(long)]
        yes: bool,
        /// Global alias, id or unique id prefix
        name: String,
    },
    /// Give a bucket another name (global, or local to a key with --local)
    Alias {
        /// Make the alias local to this access key
        #[arg(long)]
        local: Option<String>,
        /// The bucket: global alias, id or unique id prefix
        existing_bucket: String,
        /// The new name
        new_name: String,
    },
    /// Remove a name of a bucket (global, or local to a key with --local)
    Unalias {
        /// The alias is local to this access key
        #[arg(long)]
        local: Option<String>,
        name: String,
    },
    /// Allow a key to read, write or own a bucket
    Allow(PermOpt),
    /// Take rights on a bucket away from a key
    Deny(PermOpt),
    /// Turn the website endpoint on or off for a bucket, and set its index and error documents
    Website(WebsiteOpt),
    /// Set the quotas of a bucket
    SetQuotas {
        /// Global alias, id or unique id prefix
        bucket: String,
        /// Maximum total size of the objects, e.g. 10GB, or "none"
        #[arg(long)]
        max_size: Option<String>,
        /// Maximum number of objects, or "none"
        #[arg(long)]
        max_objects: Option<String>,
    },
    /// Set the storage class of writes that name none (x-amz-storage-class)
    SetStorageClass {
        /// Global alias, id or unique id prefix
        bucket: String,
        /// STANDARD (replicated) or an erasure-coded class of the layout
        /// (see `garage layout show`), e.g. STANDARD_IA
        class: String,
    },
    /// Pin a bucket to storage classes: writes naming another class are
    /// refused (InvalidStorageClass), and those naming none take the default
    SetPlacement {
        /// Global alias, id or unique id prefix
        bucket: String,
        /// The classes writes may use, comma-separated (e.g. EU or EU,ARCHIVE); "any" lifts the limit
        #[arg(long, value_delimiter = ',', required = true)]
        allow: Vec<String>,
        /// The class of writes that name none; the first allowed class if not given
        #[arg(long)]
        default: Option<String>,
    },
    /// Bucket replication: resync
    #[command(subcommand)]
    Replication(BucketReplicationOperation),
}

#[derive(Subcommand, Debug, Clone)]
pub enum BucketReplicationOperation {
    /// Queue again, on the node reached, the bucket's versions that its
    /// replication rules send somewhere and that the destination lacks
    /// (pending, failed, or written before the rules)
    Resync {
        /// Global alias, id or unique id prefix
        bucket: String,
        /// Every version the rules send somewhere, even those the
        /// destination has (for a destination that lost data)
        #[arg(long)]
        all: bool,
    },
}

#[derive(Args, Debug, Clone)]
pub struct WebsiteOpt {
    /// Serve the bucket on the website endpoint
    #[arg(long)]
    pub allow: bool,
    /// Stop serving it (its website configuration is kept)
    #[arg(long)]
    pub deny: bool,
    /// With --allow: the object served for paths ending in '/' (index.html
    /// when the bucket has no index document yet)
    #[arg(short = 'i', long)]
    pub index_document: Option<String>,
    /// With --allow: the object served, with status 404, for a missing object
    #[arg(short = 'e', long)]
    pub error_document: Option<String>,
    /// The bucket: global alias, id or unique id prefix
    pub bucket: String,
}

#[derive(Args, Debug, Clone)]
pub struct PermOpt {
    /// Read objects
    #[arg(long)]
    pub read: bool,
    /// Write objects
    #[arg(long)]
    pub write: bool,
    /// Own the bucket (change its settings, delete it)
    #[arg(long)]
    pub owner: bool,
    /// The access key: id, unique id prefix or name
    #[arg(long)]
    pub key: String,
    /// The bucket: global alias, id or unique id prefix
    pub bucket: String,
}

#[derive(Subcommand, Debug, Clone)]
pub enum KeyOperation {
    /// List the access keys
    List,
    /// Information about a key
    Info {
        /// Also print the secret key
        #[arg(long)]
        show_secret: bool,
        /// Key id, unique id prefix or name
        key_pattern: String,
    },
    /// Create an access key
    Create {
        /// Name of the key
        #[arg(default_value = "Unnamed key")]
        name: String,
    },
    /// Rename a key
    Rename {
        key_pattern: String,
        new_name: String,
    },
    /// Delete a key, revoking its rights on every bucket
    Delete {
        /// Confirm
        #[arg(long)]
        yes: bool,
        key_pattern: String,
    },
    /// Give a key rights beyond buckets
    Allow {
        /// Let the key create buckets
        #[arg(long)]
        create_bucket: bool,
        key_pattern: String,
    },
    /// Take rights beyond buckets away from a key
    Deny {
        /// No longer let the key create buckets
        #[arg(long)]
        create_bucket: bool,
        key_pattern: String,
    },
    /// Import a key made elsewhere (its id and secret)
    Import {
        /// Name of the key
        #[arg(short = 'n', long, default_value = "Imported key")]
        name: String,
        /// Confirm (importing is for migrations: a key must not be in two clusters)
        #[arg(long)]
        yes: bool,
        key_id: String,
        secret_key: String,
    },
}

#[derive(Args, Debug)]
pub struct RepairOpt {
    /// Confirm: a repair can load the cluster
    #[arg(long)]
    pub yes: bool,
    #[command(subcommand)]
    pub what: RepairWhat,
}

#[derive(Subcommand, Debug, Clone)]
pub enum RepairWhat {
    /// Compare every table with the other replicas now and send what they lack
    Tables,
    /// Queue every block this node references for a resync check
    Blocks,
    /// Move every block to the data directory the placement gives it
    Rebalance,
    /// Recount every block's references from this node's block_ref table and fix the counts
    BlockRc,
    /// Delete versions that no object or upload lists (unlisted ones only once older than a day)
    Versions,
    /// Delete multipart uploads whose object version is complete, aborted or (after a day) absent
    Mpu,
    /// Delete block references whose version is deleted
    BlockRefs,
    /// Make bucket aliases agree between the buckets, the keys and the alias table
    Aliases,
    /// Check every block file against its hash
    #[command(subcommand)]
    Scrub(ScrubCmd),
}

#[derive(Subcommand, Debug, Clone)]
pub enum ScrubCmd {
    /// Start a pass from the beginning
    Start,
    /// Pause the pass in progress
    Pause,
    /// Resume a paused pass
    Resume,
    /// Stop the pass in progress
    Cancel,
    /// Sleep this many times the time each block took (higher: gentler)
    SetTranquility { tranquility: u32 },
}

#[derive(Subcommand, Debug, Clone)]
pub enum WorkerOperation {
    /// The background workers of the node and their queues
    List,
    /// Everything about one worker (its number in `worker list`)
    Info { tid: usize },
    /// Show a worker variable (all of them without a name)
    Get { variable: Option<String> },
    /// Set a worker variable: resync-tranquility, resync-worker-count, scrub-tranquility
    Set { variable: String, value: String },
}

#[derive(Subcommand, Debug, Clone)]
pub enum KmsOperation {
    /// Every key, SSE-S3's included
    List,
    /// One key, by id, alias/NAME or ARN
    Info { key: String },
    /// A new key, for SSE-KMS
    Create {
        /// What it is for
        #[arg(long, default_value = "")]
        description: String,
        /// An alias name (used as alias/NAME)
        #[arg(long)]
        alias: Option<String>,
        /// The key's id, chosen (`my-app-key`), as a configuration carried
        /// from Ceph or Vault names it; by default a new one
        #[arg(long)]
        id: Option<String>,
        /// Import existing key material from this file: the 32 bytes of
        /// an AES-256 key, raw or in base64 (needs --id)
        #[arg(long)]
        material_file: Option<std::path::PathBuf>,
    },
    /// Make a new version of a key's material wrap new data keys (the
    /// earlier versions still open what they wrapped)
    Rotate { key: String },
    /// Refuse every use of a key (reads and writes of its objects fail
    /// with KMS.DisabledException) until it is enabled again
    Disable { key: String },
    /// Allow a disabled key again
    Enable { key: String },
    /// Give a key an alias (used as alias/NAME)
    Alias { key: String, alias: String },
    /// Take an alias from a key
    Unalias { key: String, alias: String },
    /// Change a key's description
    Describe { key: String, description: String },
}

#[derive(Subcommand, Debug, Clone)]
pub enum TopicOperation {
    /// Every notification topic
    List,
    /// One topic, and the events waiting for it on each node
    Info { name: String },
    /// A new topic (or a new configuration for an existing one, whoever
    /// owns it)
    Create {
        /// Its name: 1 to 256 ASCII letters, digits, '-' and '_'
        name: String,
        /// Where its events go: http(s)://…, nats://[user:password@]host:port
        /// or mqtt(s)://[user:password@]host:port
        #[arg(long)]
        endpoint: String,
        /// An attribute (OpaqueData, verify-ssl, nats-subject,
        /// nats-jetstream, mqtt-topic, mqtt-qos, time_to_live, max_retries);
        /// repeat for several
        #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_attr)]
        attrs: Vec<(String, String)>,
        /// The access key id that owns it (it may then change or delete it
        /// through the S3 endpoint); none by default
        #[arg(long)]
        owner: Option<String>,
    },
    /// Delete a topic, whoever owns it (the events waiting for it are
    /// dropped)
    Delete { name: String },
}

#[derive(Subcommand, Debug, Clone)]
pub enum RemoteOperation {
    /// Every replication remote (never their secret key)
    List,
    /// One remote, and the versions waiting for its buckets on each node
    Info { name: String },
    /// A new remote (or a new configuration for an existing one): an S3
    /// endpoint and an access key of it with write rights on the
    /// destination buckets
    #[command(group(clap::ArgGroup::new("secret").required(true).multiple(false)))]
    Add {
        /// Its name: 1 to 64 ASCII letters, digits, '-' and '_'
        name: String,
        /// Its S3 endpoint: http(s)://host[:port], without a path
        #[arg(long)]
        endpoint: String,
        /// The region its requests are signed for
        #[arg(long, default_value = "garage")]
        region: String,
        /// The remote's access key id
        #[arg(long)]
        access_key_id: String,
        /// The remote's secret key (--secret-file keeps it out of the
        /// shell's history and of the process list)
        #[arg(long, group = "secret")]
        secret_access_key: Option<Secret>,
        /// A file holding the remote's secret key
        #[arg(long, group = "secret")]
        secret_file: Option<PathBuf>,
    },
    /// Delete a remote: the versions waiting for its buckets are marked
    /// FAILED (`garage bucket replication resync` sends them once a
    /// remote of that name is added again)
    Delete { name: String },
}

/// A secret given on the command line: its `Debug` does not show it.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("****")
    }
}

/// A `KEY=VALUE` pair (the value may hold `=`).
fn parse_attr(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

#[derive(Subcommand, Debug, Clone)]
pub enum AdminTokenOperation {
    /// Every admin token (not the configuration's admin_token)
    List,
    /// One token, by id, unique id prefix, or name
    Info { token: String },
    /// A new token; its secret is printed once
    Create {
        /// Its name
        name: String,
        /// Expires after this long (e.g. 30d, 12h)
        #[arg(long, conflicts_with = "expires_at")]
        expires_in: Option<String>,
        /// Expires at this RFC 3339 date
        #[arg(long)]
        expires_at: Option<String>,
        /// Endpoints it may call, comma-separated (e.g. ListBuckets,GetBucketInfo or List*); all by default
        #[arg(long, default_value = "*")]
        scope: String,
        /// Print only the token
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Rename a token
    Rename { token: String, new_name: String },
    /// Change a token's expiration or scope
    Set {
        token: String,
        #[arg(long, conflicts_with_all = ["expires_at", "never_expires"])]
        expires_in: Option<String>,
        #[arg(long, conflicts_with = "never_expires")]
        expires_at: Option<String>,
        #[arg(long)]
        never_expires: bool,
        /// Endpoints it may call, comma-separated
        #[arg(long)]
        scope: Option<String>,
    },
    /// Revoke a token
    Delete {
        token: String,
        /// Confirm
        #[arg(long)]
        yes: bool,
    },
    /// Revoke every expired token
    DeleteExpired {
        /// Confirm
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum MetaOperation {
    /// Write a snapshot of the metadata database into
    /// metadata_snapshots_dir (the two newest are kept)
    Snapshot {
        /// On every node of the cluster, not only the one reached
        #[arg(short = 'a', long)]
        all: bool,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum BlockOperation {
    /// Blocks whose resync failed, with their retry state
    ListErrors,
    /// What this node knows of a block
    Info {
        /// Full block hash (64 hex digits)
        hash: String,
    },
    /// Retry failed resyncs now
    RetryNow {
        /// Every failed block
        #[arg(long)]
        all: bool,
        /// Block hashes
        blocks: Vec<String>,
    },
    /// Delete every object, version and upload that references the given
    /// blocks: for blocks lost on every node, so that reads stop failing
    Purge {
        /// Confirm: the objects that use these blocks are deleted
        #[arg(long)]
        yes: bool,
        /// Block hashes
        #[arg(required = true)]
        blocks: Vec<String>,
    },
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Opt::command().debug_assert();
    }

    #[test]
    fn remote_add_takes_a_secret_or_a_secret_file() {
        let opt = Opt::try_parse_from([
            "garage",
            "remote",
            "add",
            "dr",
            "--endpoint",
            "http://h:3900",
            "--access-key-id",
            "GK1",
            "--secret-access-key",
            "s3cr3t",
        ])
        .unwrap();
        assert!(!format!("{opt:?}").contains("s3cr3t"));
        match opt.cmd {
            Command::Remote(RemoteOperation::Add {
                region,
                secret_access_key,
                secret_file,
                ..
            }) => {
                assert_eq!(region, "garage");
                assert_eq!(secret_access_key.unwrap().0, "s3cr3t");
                assert!(secret_file.is_none());
            }
            other => panic!("parsed as {other:?}"),
        }
        let base = [
            "garage",
            "remote",
            "add",
            "dr",
            "--endpoint",
            "http://h",
            "--access-key-id",
            "GK1",
        ];
        // One of the two is required, not both.
        assert!(Opt::try_parse_from(base).is_err());
        let both = [
            &base[..],
            &["--secret-access-key", "s", "--secret-file", "/f"],
        ]
        .concat();
        assert!(Opt::try_parse_from(both).is_err());
        let file = [&base[..], &["--secret-file", "/f", "--region", "eu"]].concat();
        match Opt::try_parse_from(file).unwrap().cmd {
            Command::Remote(RemoteOperation::Add {
                region,
                secret_file,
                ..
            }) => {
                assert_eq!(region, "eu");
                assert_eq!(secret_file, Some(PathBuf::from("/f")));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn bucket_replication_resync() {
        let opt = Opt::try_parse_from([
            "garage",
            "bucket",
            "replication",
            "resync",
            "photos",
            "--all",
        ])
        .unwrap();
        match opt.cmd {
            Command::Bucket(BucketOperation::Replication(BucketReplicationOperation::Resync {
                bucket,
                all,
            })) => {
                assert_eq!(bucket, "photos");
                assert!(all);
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn dash_c_is_config_before_the_verb_and_capacity_after_assign() {
        let opt = Opt::try_parse_from([
            "garage", "-c", "/x.toml", "layout", "assign", "-z", "dc1", "-c", "1G", "abcd",
        ])
        .unwrap();
        assert_eq!(opt.config_path(), Some(&PathBuf::from("/x.toml")));
        match opt.cmd {
            Command::Layout(LayoutOperation::Assign(a)) => {
                assert_eq!(a.capacity.as_deref(), Some("1G"));
                assert_eq!(a.zone.as_deref(), Some("dc1"));
            }
            other => panic!("parsed as {other:?}"),
        }
        let opt = Opt::try_parse_from(["garage", "server", "-c", "/y.toml"]).unwrap();
        assert_eq!(opt.config_path(), Some(&PathBuf::from("/y.toml")));
    }
}
