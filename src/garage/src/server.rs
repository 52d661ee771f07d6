//! `garage server`: loads the configuration, opens the metadata database and
//! the data directories, and runs until SIGINT or SIGTERM.
//!
//! It runs the cluster (RPC) layer, the tables, the block manager and its
//! workers, the S3 API, the website endpoint and the admin HTTP API.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use garage_db::Db;
use garage_util::config::{Config, DataDirState, DataDirs, SecretOrigin, DEFAULT_CONFIG_PATH};
use garage_util::worker;
use tracing::{error, info, warn};

use crate::args::Opt;
use crate::load_config::{load, Loaded};
use garage_admin::admin_rpc::{AdminEndpoint, AdminRpcHandler};
use garage_admin::ops::NodeConfig;
use garage_model::garage::Garage;
use garage_rpc::system::System;

/// Version of the layout of garage's own trees in the metadata database;
/// bumped whenever a later version changes it, so that an older binary
/// refuses a database it cannot read instead of damaging it.
pub const DB_FORMAT_VERSION: u64 = 1;
const META_TREE: &str = "garage_meta";
const FORMAT_KEY: &[u8] = b"db_format_version";

pub fn run(opt: &Opt) -> anyhow::Result<()> {
    let (single_node, default_bucket) = match &opt.cmd {
        crate::args::Command::Server {
            single_node,
            default_bucket,
            ..
        } => (*single_node, *default_bucket),
        _ => (false, false),
    };
    let (mut config, loaded) = load(opt, true)?;
    if single_node && config.replication_factor != 1 {
        anyhow::bail!(
            "--single-node needs replication_factor = 1 in {} (it is {}): one node cannot hold {} copies",
            config.source,
            config.replication_factor,
            config.replication_factor
        );
    }
    // Read before anything starts, so that a missing variable is named
    // at once.
    let defaults = match default_bucket {
        true => Some(crate::single::DefaultBucket::from_env()?),
        false => None,
    };
    match loaded {
        Loaded::BuiltIn => info!(
            "no configuration file (no -c, and {DEFAULT_CONFIG_PATH} does not exist): running a single node \
             with the built-in default configuration: replication_factor = 1, {} metadata, data under {}",
            config.db_engine,
            config
                .metadata_dir
                .parent()
                .unwrap_or(&config.metadata_dir)
                .display()
        ),
        Loaded::File => info!("configuration read from {}", config.source),
    }
    for (key, why) in config.ignored_keys() {
        warn!(
            "configuration key `{key}` in {} is ignored: {why}",
            config.source
        );
    }
    raise_open_files_limit();
    // Test timings on a production node are worth a line.
    let tuning = garage_util::tuning::tuning();
    if !tuning.set.is_empty() {
        info!(
            "test knobs set (garage_util::tuning): {}",
            tuning.set.join(", ")
        );
    }
    match config.ensure_rpc_secret()? {
        SecretOrigin::Configured => (),
        SecretOrigin::Generated { path, new: true } => info!(
            "no rpc_secret configured for this single node: generated one into {}",
            path.display()
        ),
        SecretOrigin::Generated { path, new: false } => {
            info!("RPC secret read from {}", path.display())
        }
    }

    let db = open_metadata(&config)?;
    prepare_data_dirs(&config)?;
    let builtin = matches!(loaded, Loaded::BuiltIn);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let metrics = crate::telemetry::install_metrics()?;
    let _ = garage_admin::ops::stats::COUNTER_TOTALS.set(crate::telemetry::counter_totals);
    let res = runtime.block_on(async move {
        let (exit_tx, exit_rx) = tokio::sync::watch::channel(false);
        let (system, mut tasks) = start_cluster(&config, exit_rx.clone()).await?;
        system.workers.set_exit(exit_rx.clone());
        if builtin || single_node {
            crate::single::ensure_layout(&system)?;
        }
        let garage = Garage::new(&config, db.clone(), system.clone())?;
        tasks.push(garage.cas_registers.spawn_handoff(&exit_rx));
        for t in garage.tables.iter() {
            tasks.extend(t.clone().spawn(&exit_rx));
        }
        tasks.extend(garage.block_manager.spawn_workers(&exit_rx));
        tasks.push(tokio::spawn(
            garage
                .kms
                .clone()
                .make_sse_s3_key_at_first_layout(system.clone(), exit_rx.clone()),
        ));
        tasks.extend(
            garage_model::lifecycle::worker::LifecycleWorker::new(garage.clone(), system.clone())
                .spawn(&exit_rx),
        );
        tasks.push(worker::runner::spawn(
            &system.workers,
            garage_model::lifecycle::catch_up::CatchUpWorker::new(garage.clone()),
            exit_rx.clone(),
        ));
        tasks.push(worker::runner::spawn(
            &system.workers,
            garage_admin::ops::history::HistoryWorker::new(Some(
                garage_admin::ops::history::file_in(&config.metadata_dir),
            )),
            exit_rx.clone(),
        ));
        tasks.push(worker::runner::spawn(
            &system.workers,
            crate::gauges::GaugesWorker::new(garage.clone()),
            exit_rx.clone(),
        ));
        tasks.push(worker::runner::spawn(
            &system.workers,
            garage_notify::DeliveryWorker::new(garage.clone()),
            exit_rx.clone(),
        ));
        let replication = garage_api::replication::worker::ReplicationWorker::new(s3_api(
            &config, &garage,
        ))
        .map_err(|e| anyhow::anyhow!("bucket replication: {e}"))?;
        tasks.push(worker::runner::spawn(
            &system.workers,
            replication,
            exit_rx.clone(),
        ));
        let admin_rpc =
            AdminRpcHandler::install(&system.netapp, garage.clone(), node_config(&config));
        // The handler holds the endpoint weakly; this keeps it for the
        // server's whole life, with or without the admin API listener.
        let _admin_rpc_alive = admin_rpc.clone();
        if let Some(task) =
            start_admin_api(&config, &garage, admin_rpc, metrics, exit_rx.clone()).await?
        {
            tasks.push(task);
        }
        let s3 = match &config.s3_api.api_bind_addr {
            Some(addr) => Some(start_s3(&config, &garage, addr, exit_rx.clone()).await?),
            None => {
                info!(
                    "no s3_api.api_bind_addr in {}: the S3 API is off",
                    config.source
                );
                None
            }
        };
        if let Some(d) = &defaults {
            d.ensure(&garage.metadata()).await?;
        }
        if let Some((task, endpoint)) = s3 {
            tasks.push(task);
            if builtin {
                crate::single::ensure_key_and_print(
                    &garage.metadata(),
                    &endpoint,
                    &config.s3_api.s3_region,
                )
                .await?;
            }
        }
        match &config.s3_web {
            Some(w) => tasks.push(start_web(&config, &garage, w, exit_rx.clone()).await?),
            None => info!(
                "no [s3_web] section in {}: the website endpoint is off",
                config.source
            ),
        }
        if let Some(interval) = config.metadata_auto_snapshot_interval {
            let dir = config.metadata_snapshots_dir();
            info!(
                "metadata auto-snapshots every {}s into {}",
                interval.as_secs(),
                dir.display()
            );
            tasks.push(worker::runner::spawn(
                &system.workers,
                AutoSnapshot::new(db.clone(), dir, interval),
                exit_rx.clone(),
            ));
        }
        // Listen for signals before saying we run, so that a signal sent as
        // soon as the line is seen is never lost to the default handler.
        let signals = Signals::new()?;
        info!("garage is running; stop it with Ctrl-C or SIGTERM");
        let signal = signals.wait().await;
        info!("received {signal}, shutting down");
        let _ = exit_tx.send(true);
        // One deadline for all of them (a worker's step under way gets
        // `EXIT_DEADLINE`, then is dropped).
        let deadline = worker::EXIT_DEADLINE + Duration::from_secs(1);
        let left = worker::runner::join_within(tasks, deadline).await;
        if left > 0 {
            warn!("{left} background tasks had not stopped {deadline:?} after the exit began: stopping anyway");
        }
        drop(db);
        Ok(())
    });
    // Spans still buffered are sent before the process ends.
    crate::telemetry::shutdown_traces();
    info!("garage stopped");
    res
}

/// Binds the S3 listener and starts serving; returns its task and its
/// endpoint URL.
async fn start_s3(
    config: &Config,
    garage: &Arc<Garage>,
    addr: &str,
    must_exit: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(tokio::task::JoinHandle<()>, String)> {
    let api = s3_api(config, garage);
    let server = garage_api::S3Server::bind(api, addr, config.s3_api.root_domain.as_deref())
        .await
        .map_err(|e| anyhow::anyhow!("{e} (in {})", config.source))?;
    let endpoint = server.url();
    info!(
        "S3 API listening on {endpoint} (region {})",
        config.s3_api.s3_region
    );
    Ok((tokio::spawn(server.run(must_exit)), endpoint))
}

/// Binds the website listener and starts serving; returns its task.
async fn start_web(
    config: &Config,
    garage: &Arc<Garage>,
    web: &garage_util::config::WebConfig,
    must_exit: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let server = garage_web::WebServer::bind(
        s3_api(config, garage),
        &web.bind_addr,
        &web.root_domain,
        web.add_host_to_metrics,
    )
    .await
    .map_err(|e| anyhow::anyhow!("s3_web.bind_addr in {}: {e}", config.source))?;
    info!(
        "website endpoint listening on {} (buckets as <bucket>.{}, or by a global alias equal to the host name)",
        server.url(),
        web.root_domain.trim_start_matches('.')
    );
    Ok(tokio::spawn(server.run(must_exit)))
}

/// Starts the admin HTTP API when `admin.api_bind_addr` is set.
async fn start_admin_api(
    config: &Config,
    garage: &Arc<Garage>,
    admin_rpc: Arc<AdminEndpoint>,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
    must_exit: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(addr) = &config.admin.api_bind_addr else {
        info!(
            "no admin.api_bind_addr in {}: the admin API is off",
            config.source
        );
        return Ok(None);
    };
    if config.admin.admin_token.is_none() {
        warn!(
            "no admin.admin_token in {}: the admin API answers only /health, \
             /v2/GetClusterHealth and /v2/openapi.json, and refuses every other request",
            config.source
        );
    }
    let state = Arc::new(garage_admin::admin_api::AdminState {
        garage: garage.clone(),
        admin_token: config.admin.admin_token.clone(),
        conf: node_config(config),
        root_domains: root_domains(config),
        admin_rpc,
    });
    let metrics_token = config.admin.metrics_token.clone();
    if metrics_token.is_none() && config.admin.metrics_require_token {
        bail!(
            "admin.metrics_require_token is true in {}, but no metrics_token is set \
             (metrics_token, metrics_token_file or GARAGE_METRICS_TOKEN)",
            config.source
        );
    }
    let router = garage_admin::admin_api::router(state.clone())
        .merge(garage_admin::console::router(state))
        .merge(crate::telemetry::metrics_router(metrics, metrics_token));
    let task = garage_admin::admin_api::start(addr, router, must_exit)
        .await
        .with_context(|| format!("admin API ({})", config.source))?;
    Ok(Some(task))
}

/// The S3 operations over this node's tables (for the S3 listener and the
/// lifecycle worker).
fn s3_api(config: &Config, garage: &Arc<Garage>) -> Arc<garage_api::Api> {
    garage_api::Api::new(
        garage,
        garage_api::Regions::new(&config.s3_api.s3_region, &config.s3_api.also_accept_regions),
    )
}

/// Raises this process's soft limit of open files to its hard limit (a
/// node holds a descriptor per connection and per block being read or
/// written), and logs the limit in force.
fn raise_open_files_limit() {
    let before = rlimit::getrlimit(rlimit::Resource::NOFILE).map(|(soft, _)| soft);
    match (before, rlimit::increase_nofile_limit(u64::MAX)) {
        (Ok(before), Ok(now)) if now > before => {
            info!("open files limit raised from {before} to {now} (the hard limit)")
        }
        (_, Ok(now)) => info!("open files limit: {now}"),
        (_, Err(e)) => warn!("cannot read or raise the open files limit: {e}"),
    }
}

/// Starts the RPC listener and the membership loops; returns the system
/// and their tasks.
async fn start_cluster(
    config: &Config,
    must_exit: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(Arc<System>, Vec<tokio::task::JoinHandle<()>>)> {
    let node_key = garage_net::NodeKey::load_or_generate(&config.metadata_dir)
        .with_context(|| format!("node key in {}", config.metadata_dir.display()))?;
    let secret = config
        .rpc_secret
        .as_deref()
        .expect("ensure_rpc_secret ran before");
    let network_key =
        garage_net::NetworkKey::from_hex(secret).map_err(|e| anyhow::anyhow!("rpc_secret: {e}"))?;
    let mut net_config = garage_net::NetConfig::default();
    garage_util::clock::set_bound(
        config
            .max_clock_offset_msec
            .unwrap_or(garage_util::clock::DEFAULT_BOUND_MS),
    );
    if let Some(ms) = config.rpc_timeout_msec {
        net_config.rpc_timeout = Duration::from_millis(ms);
    }
    if config.rpc_bind_outgoing {
        net_config.bind_outgoing = Some(config.rpc_bind_addr.ip());
    }
    let netapp = garage_net::NetApp::new(network_key, node_key, net_config);
    let public = crate::rpc_addr::public_addr(config)?;
    let system = garage_rpc::system::System::new(
        netapp.clone(),
        garage_rpc::system::SystemConfig {
            replication_factor: config.replication_factor,
            metadata_dir: config.metadata_dir.clone(),
            data_dirs: config
                .data_dir
                .paths()
                .iter()
                .map(|p| p.to_path_buf())
                .collect(),
            rpc_public_addr: public,
            bootstrap_peers: config.bootstrap_peers.clone(),
            consistency_mode: config.consistency_mode,
        },
    )?;
    let id = netapp.id();
    crate::logging::set_node(id.short());
    if let Some(sink) = &config.admin.trace_sink {
        crate::telemetry::start_traces(sink, &id.to_string())
            .with_context(|| format!("admin.trace_sink in {}", config.source))?;
    }
    let layout = system.layout();
    info!(
        "node id {id}; cluster layout version {} with {} node(s)",
        layout.current().version,
        layout.current().roles.len()
    );
    match public {
        Some(a) => info!("other nodes reach this one as {id}@{a}"),
        None => warn!(
            "rpc_bind_addr {} is not a specific address and rpc_public_addr is not set: \
             set rpc_public_addr so that other nodes can reach this one",
            config.rpc_bind_addr
        ),
    }
    let bind = config.rpc_bind_addr;
    // Bind before saying we run, so that a failure to bind stops startup.
    let listener = netapp.clone().bind(bind).await.with_context(|| {
        format!("cannot listen for RPC on rpc_bind_addr {bind} (is another garage running?)")
    })?;
    let listen_task = tokio::spawn({
        let must_exit = must_exit.clone();
        async move {
            if let Err(e) = listener.run(must_exit).await {
                error!("RPC listener stopped: {e}");
            }
        }
    });
    let system_task = tokio::spawn(system.clone().run(must_exit));
    Ok((system, vec![listen_task, system_task]))
}

/// What the admin operations need of the configuration.
fn node_config(config: &Config) -> NodeConfig {
    NodeConfig {
        region: config.s3_api.s3_region.clone(),
        s3_host: s3_host(config),
    }
}

/// The S3 endpoint as `ip:port` for presigned requests: `s3_api.api_bind_addr`
/// with an unspecified address made loopback; none for a Unix socket.
fn s3_host(config: &Config) -> Option<String> {
    let mut a: std::net::SocketAddr = config.s3_api.api_bind_addr.as_deref()?.parse().ok()?;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    Some(a.to_string())
}

pub(crate) fn open_metadata(config: &Config) -> anyhow::Result<Db> {
    std::fs::create_dir_all(&config.metadata_dir).with_context(|| {
        format!(
            "cannot create metadata_dir {}",
            config.metadata_dir.display()
        )
    })?;
    let path = config.db_path();
    let existed = path.exists();
    let db = garage_db::open(
        config.db_engine,
        &path,
        &garage_db::OpenOptions {
            fsync: config.metadata_fsync,
            lmdb_map_size: config.lmdb_map_size(),
            lmdb_write_map: config.lmdb_write_map,
            create: true,
        },
    )
    .with_context(|| {
        format!(
            "cannot open the {} metadata database at {}",
            config.db_engine,
            path.display()
        )
    })?;
    check_format(&db, &path)?;
    info!(
        "metadata: {} database at {} ({}, metadata_fsync = {})",
        config.db_engine,
        path.display(),
        if existed { "existing" } else { "new" },
        config.metadata_fsync
    );
    if !existed {
        for other in garage_db::Engine::ALL {
            let other_path = other.db_path(&config.metadata_dir);
            if other != config.db_engine && other_path.exists() {
                warn!(
                    "{} holds a {other} database, but db_engine is {}: convert it with \
                     `garage convert-db -a {other} -i {} -b {} -o {}` (with garage stopped) \
                     if this node's metadata is there",
                    config.metadata_dir.display(),
                    config.db_engine,
                    other_path.display(),
                    config.db_engine,
                    path.display()
                );
            }
        }
    }
    Ok(db)
}

fn check_format(db: &Db, path: &Path) -> anyhow::Result<()> {
    let meta = db.open_tree(META_TREE)?;
    match meta.get(FORMAT_KEY)? {
        None => meta.insert(FORMAT_KEY, DB_FORMAT_VERSION.to_be_bytes())?,
        Some(v) => {
            let v = <[u8; 8]>::try_from(v.as_slice())
                .map(u64::from_be_bytes)
                .map_err(|_| anyhow::anyhow!("corrupt format version in {}", path.display()))?;
            if v > DB_FORMAT_VERSION {
                bail!(
                    "the metadata database at {} has format version {v}, written by a newer garage; \
                     this binary reads version {DB_FORMAT_VERSION} and older: upgrade garage",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

fn prepare_data_dirs(config: &Config) -> anyhow::Result<()> {
    let dirs: Vec<(PathBuf, String)> = match &config.data_dir {
        DataDirs::Single(p) => vec![(p.clone(), "all data".into())],
        DataDirs::Multiple(v) => v
            .iter()
            .map(|d| {
                let what = match d.state {
                    DataDirState::Active { capacity } => {
                        format!(
                            "capacity {}",
                            bytesize::ByteSize::b(capacity).display().iec()
                        )
                    }
                    DataDirState::ReadOnly => "read-only".into(),
                };
                (d.path.clone(), what)
            })
            .collect(),
    };
    for (path, what) in dirs {
        if what != "read-only" {
            std::fs::create_dir_all(&path)
                .with_context(|| format!("cannot create data_dir {}", path.display()))?;
        } else if !path.is_dir() {
            bail!(
                "data_dir {} is marked read_only but does not exist",
                path.display()
            );
        }
        info!(
            "data: {} ({what}, data_fsync = {})",
            path.display(),
            config.data_fsync
        );
    }
    Ok(())
}

/// The root domains under which buckets are named (`/check` strips them).
fn root_domains(config: &garage_util::config::Config) -> Vec<String> {
    let web = config.s3_web.as_ref().map(|w| w.root_domain.clone());
    web.into_iter()
        .chain(config.s3_api.root_domain.clone())
        .filter(|d| !d.is_empty())
        .collect()
}

/// Writes a snapshot of the metadata database every `interval`
/// (`metadata_auto_snapshot_interval`).
struct AutoSnapshot {
    db: Db,
    dir: PathBuf,
    ticker: tokio::time::Interval,
    /// A tick passed since the last snapshot (none is due at start).
    due: bool,
}

impl AutoSnapshot {
    fn new(db: Db, dir: PathBuf, interval: Duration) -> Self {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        AutoSnapshot {
            db,
            dir,
            ticker,
            due: false,
        }
    }
}

impl worker::Worker for AutoSnapshot {
    fn spec(&self) -> worker::WorkerSpec {
        worker::WorkerSpec::new(
            "Metadata auto-snapshot",
            "writes a snapshot of the metadata database every metadata_auto_snapshot_interval",
        )
    }

    async fn work(
        &mut self,
        _: &worker::WorkerHandle,
        _: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<worker::Step, String> {
        if !std::mem::take(&mut self.due) {
            return Ok(worker::Step::Idle);
        }
        let (db, dir) = (self.db.clone(), self.dir.clone());
        let path = tokio::task::spawn_blocking(move || {
            garage_admin::ops::stats::snapshot_metadata(&db, &dir)
        })
        .await
        .map_err(|e| format!("metadata snapshot task failed: {e}"))?
        .map_err(|e| format!("{e:#}"))?;
        info!("metadata snapshot written to {}", path.display());
        Ok(worker::Step::Idle)
    }

    async fn wait_for_work(&mut self) {
        self.ticker.tick().await;
        self.due = true;
    }
}

struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        })
    }

    async fn wait(mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
