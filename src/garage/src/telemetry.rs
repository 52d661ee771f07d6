//! Metrics and traces of the daemon.
//!
//! Metrics: the library crates record through the `metrics` facade; this
//! module installs the Prometheus recorder once per process, describes
//! every metric (Prometheus `# HELP` lines), and serves the text format at
//! `GET /metrics` ([`metrics_router`]), behind `metrics_token` when one is
//! set. Gauges that come from state (tables, queues, disks, cluster
//! health) are refreshed by `gauges.rs`.
//!
//! Traces: when `[admin] trace_sink` is set, spans of the garage crates
//! are exported over OTLP/HTTP ([`start_traces`]); otherwise no exporter
//! exists and the spans are never even created (their level is below the
//! default log level). Names: `doc/metrics.md`, `doc/tracing.md`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use garage_admin::bearer::{check_bearer, TokenCheck};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::Registry;

/// Histogram buckets of request and RPC durations, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often the state gauges are recomputed (by `gauges.rs`); the
/// exporter keeps a gauge three times as long without an update.
pub const REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Sets `garage_build_info` (again at each refresh: gauges not set for a
/// while are dropped by the exporter).
pub fn build_info() {
    metrics::gauge!("garage_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Installs the process's Prometheus recorder (once; later calls return
/// the same handle) and describes every metric.
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    // A gauge not set for three refreshes is dropped: series of removed or
    // re-roled nodes do not linger (every gauge is set by each refresh).
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)?
        .idle_timeout(
            metrics_util::MetricKindMask::GAUGE,
            Some(3 * REFRESH_INTERVAL),
        )
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("cannot install the metrics recorder: {e}"))?;
    describe();
    build_info();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// The installed recorder's handle, if [`install_metrics`] ran.
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE.get()
}

/// Counters whose series [`counter_totals`] also gives one by one, as
/// `name{labels}` (e.g. `http_bytes_sent_total{listener="s3"}`).
const BY_SERIES: &[&str] = &[
    "http_bytes_received_total",
    "http_bytes_sent_total",
    "repair_runs_total",
    "repair_checked_total",
    "repair_fixed_total",
    "repair_kept_total",
];

/// Every counter's total over all its label sets, by metric name, read
/// from the same recorder `/metrics` renders (for `garage stats`, and the
/// console's history); and the series of the [`BY_SERIES`] counters.
pub fn counter_totals() -> std::collections::BTreeMap<String, f64> {
    let mut totals = std::collections::BTreeMap::new();
    let Some(h) = handle() else {
        return totals;
    };
    let text = h.render();
    let counters: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        if !counters.contains(&name) {
            continue;
        }
        if let Some((series, v)) = line
            .rsplit_once(' ')
            .and_then(|(s, v)| Some((s, v.parse::<f64>().ok()?)))
        {
            *totals.entry(name.to_string()).or_insert(0.0) += v;
            if BY_SERIES.contains(&name) && series.len() > name.len() {
                *totals.entry(series.to_string()).or_insert(0.0) += v;
            }
        }
    }
    totals
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        "garage_build_info",
        "Version of garage running on this node (value 1)"
    );
    describe_gauge!(
        "garage_replication_factor",
        "Replication factor of the cluster"
    );
    describe_gauge!(
        "cluster_active_version_info",
        "The cluster version this node knows to be finalized, as the version label (value 1)"
    );
    describe_gauge!(
        "garage_local_disk_avail",
        Unit::Bytes,
        "Free space of the data and metadata volumes of this node"
    );
    describe_gauge!(
        "garage_local_disk_capacity",
        Unit::Bytes,
        "Total space of the data and metadata volumes of this node"
    );
    // S3 and web requests.
    describe_counter!(
        "api_s3_requests_total",
        "S3 requests received, by operation"
    );
    describe_counter!(
        "api_s3_errors_total",
        "S3 requests answered with an error status, by operation and status"
    );
    describe_histogram!(
        "api_s3_request_duration_seconds",
        Unit::Seconds,
        "Time from an S3 request's arrival to its response header, by operation"
    );
    describe_counter!("web_requests_total", "Website requests received, by method");
    describe_counter!(
        "web_errors_total",
        "Website requests answered with an error status, by method and status"
    );
    describe_histogram!(
        "web_request_duration_seconds",
        Unit::Seconds,
        "Time from a website request's arrival to its response header, by method"
    );
    describe_counter!(
        "http_bytes_received_total",
        Unit::Bytes,
        "Bytes received on the HTTP connections of a listener (s3, web, admin), headers included"
    );
    describe_counter!(
        "http_bytes_sent_total",
        Unit::Bytes,
        "Bytes sent on the HTTP connections of a listener (s3, web, admin), headers included"
    );
    // RPC.
    describe_counter!("rpc_requests_total", "RPC calls made, by endpoint and peer");
    describe_histogram!(
        "rpc_duration_seconds",
        Unit::Seconds,
        "Duration of RPC calls until their response header, by endpoint and peer"
    );
    describe_counter!("rpc_timeouts_total", "RPC calls that timed out");
    describe_counter!(
        "rpc_netapp_errors_total",
        "RPC calls that failed for a communication reason (not connected, connection lost, codec)"
    );
    describe_counter!(
        "rpc_remote_errors_total",
        "RPC calls the remote node could not handle (no handler, undecodable message)"
    );
    // Tables.
    describe_gauge!(
        "table_size",
        "Entries in this node's copy of a table, tombstones included"
    );
    describe_gauge!(
        "table_merkle_tree_size",
        "Nodes of a table's Merkle tree on this node"
    );
    describe_gauge!(
        "table_merkle_updater_todo_queue_length",
        "Entry changes not yet applied to a table's Merkle tree"
    );
    describe_gauge!(
        "table_gc_todo_queue_length",
        "Tombstones waiting for garbage collection in a table"
    );
    describe_gauge!(
        "table_insert_queue_length",
        "Entries queued by other tables' hooks, not yet sent"
    );
    describe_counter!(
        "table_sync_items_sent_total",
        "Entries sent to other replicas by anti-entropy sync, by table and peer"
    );
    describe_counter!(
        "table_items_received_total",
        "Entries received for storage from other nodes (writes, sync, read repair), by table"
    );
    describe_counter!(
        "table_quorum_errors_total",
        "Table reads and writes that did not reach their quorum"
    );
    describe_counter!(
        "table_gc_kept_for_register_total",
        "Tombstones the GC kept for a later round: their conditional-write register holds a value they do not supersede"
    );
    // Blocks.
    describe_gauge!(
        "block_rc_entries",
        "Blocks with a reference count on this node"
    );
    describe_gauge!(
        "block_resync_queue_length",
        "Blocks waiting in the resync queue"
    );
    describe_gauge!(
        "block_resync_lag_seconds",
        "How long the oldest resync queue entry due now has been due (0: none is due): how far the resync is behind"
    );
    describe_gauge!(
        "block_resync_errored_blocks",
        "Blocks whose last resync attempt failed"
    );
    describe_gauge!(
        "block_class_files",
        "Block and shard files on this node's data directories, by storage class and redundancy (its last census)"
    );
    describe_gauge!(
        "block_class_bytes",
        Unit::Bytes,
        "Bytes of those files on disk, by storage class and redundancy (its last census)"
    );
    describe_gauge!(
        "block_class_to_hand_over_files",
        "Files of the class this node holds outside every live layout version, waiting to be handed over to their new node: what is left of a move here"
    );
    describe_gauge!(
        "block_class_to_hand_over_bytes",
        Unit::Bytes,
        "Bytes of those files"
    );
    describe_gauge!(
        "block_census_age_seconds",
        "How long ago this node last counted its block files by storage class"
    );
    describe_gauge!(
        "block_scrub_running",
        "1 while a scrub pass runs on this node (not paused)"
    );
    describe_gauge!(
        "block_scrub_progress_ratio",
        "How far the scrub pass in progress has gone through the block hash space (0 to 1; 0 when none)"
    );
    describe_counter!(
        "block_bytes_read_total",
        Unit::Bytes,
        "Bytes of block files read from this node's data directories"
    );
    describe_counter!(
        "block_bytes_written_total",
        Unit::Bytes,
        "Bytes of block files written to this node's data directories"
    );
    describe_counter!(
        "block_quorum_errors_total",
        "Block writes that did not reach their quorum"
    );
    describe_counter!(
        "block_ec_hedged_writes_total",
        "Erasure-coded block writes that also sent a late shard to another node"
    );
    describe_counter!(
        "block_read_errors_total",
        "Block reads that failed on every replica"
    );
    describe_counter!(
        "block_corrupted_total",
        "Block copies or shards that did not match their hash, by who found them (read, scrub)"
    );
    describe_gauge!(
        "ec_catch_up_waiting_versions",
        "Versions of an erasure-coded class with blocks this node wrote replicated, waiting to be re-encoded"
    );
    describe_gauge!(
        "ec_catch_up_waiting_bytes",
        "Bytes of those blocks, stored replicated while they wait"
    );
    describe_counter!(
        "ec_catch_up_reencoded_blocks_total",
        "Blocks the erasure-coding catch-up worker re-encoded in their class"
    );
    describe_counter!(
        "notify_events_queued_total",
        "Bucket notification events this node queued in its outbox"
    );
    describe_counter!(
        "notify_events_sent_total",
        "Bucket notification events acknowledged by their topic's endpoint"
    );
    describe_counter!(
        "notify_send_errors_total",
        "Failed sends of bucket notification events to a topic's endpoint"
    );
    describe_counter!(
        "notify_events_expired_total",
        "Bucket notification events dropped after their topic's time_to_live or max_retries"
    );
    describe_counter!(
        "notify_events_dropped_total",
        "Bucket notification events not queued or dropped (outbox full, topic missing or deleted, database error)"
    );
    describe_gauge!(
        "notify_queued_events",
        "Bucket notification events waiting in this node's outbox, per topic"
    );
    describe_gauge!(
        "notify_lag_seconds",
        Unit::Seconds,
        "How long the oldest event waiting for a topic in this node's outbox has waited"
    );
    describe_counter!(
        "replication_versions_queued_total",
        "Versions this node queued for a bucket replication destination (one per destination)"
    );
    describe_counter!(
        "replication_versions_not_queued_total",
        "Versions not queued for replication (queue full or database error); they stay PENDING until a resync"
    );
    describe_counter!(
        "replication_versions_sent_total",
        "Versions a replication destination accepted"
    );
    describe_counter!(
        "replication_bytes_sent_total",
        Unit::Bytes,
        "Body bytes of the versions a replication destination accepted"
    );
    describe_counter!(
        "replication_versions_failed_total",
        "Versions a replication destination refused (marked FAILED)"
    );
    describe_counter!(
        "replication_send_errors_total",
        "Failed attempts to send versions to a replication destination (retried)"
    );
    describe_gauge!(
        "replication_queued_versions",
        "Versions waiting in this node's replication queue, per destination"
    );
    describe_gauge!(
        "replication_lag_seconds",
        Unit::Seconds,
        "How long the oldest version waiting for a destination in this node's queue has waited"
    );
    describe_counter!(
        "block_shards_handed_over_total",
        "Erasure-coded shards this node held for another node and handed over to it"
    );
    describe_counter!(
        "api_get_block_lists_local_total",
        "Version entries (block lists) GETs read from this node's copy (no round trip)"
    );
    describe_counter!(
        "api_get_block_lists_quorum_total",
        "Version entries (block lists) GETs read from a quorum (this node's copy missing, incomplete, or naming a block that was gone)"
    );
    describe_counter!(
        "api_ordered_restamps_total",
        "New versions written again under a new id because a replica held a newer version"
    );
    describe_counter!(
        "repair_runs_total",
        "Repairs (garage repair) this node ran to the end, by repair"
    );
    describe_counter!(
        "repair_checked_total",
        "Entries those repairs examined, by repair"
    );
    describe_counter!(
        "repair_fixed_total",
        "Entries those repairs deleted or fixed, by repair"
    );
    describe_counter!(
        "repair_kept_total",
        "Entries listed nowhere that those repairs kept (young or undecided), by repair"
    );
    describe_counter!(
        "lifecycle_bucket_passes_total",
        "Passes of the lifecycle worker over a bucket with rules"
    );
    describe_counter!(
        "lifecycle_objects_scanned_total",
        "Objects the lifecycle passes looked at"
    );
    describe_counter!(
        "lifecycle_objects_expired_total",
        "Current versions the lifecycle passes expired"
    );
    describe_counter!(
        "lifecycle_uploads_aborted_total",
        "Incomplete multipart uploads the lifecycle passes aborted"
    );
    describe_counter!(
        "lifecycle_versions_deleted_total",
        "Noncurrent versions and lone delete markers the lifecycle passes deleted"
    );
    describe_counter!(
        "lifecycle_transitions_queued_total",
        "Versions the lifecycle passes queued for a storage-class transition"
    );
    describe_counter!(
        "lifecycle_transitions_deferred_total",
        "Transitions put off to the next pass because a node of the new shards was down"
    );
    // Cluster health.
    describe_gauge!(
        "cluster_healthy",
        "Whether every storage node of the layout answers (0 or 1)"
    );
    describe_gauge!(
        "cluster_available",
        "Whether every partition has a write quorum of answering nodes (0 or 1)"
    );
    describe_gauge!(
        "cluster_connected_nodes",
        "Nodes that answer, this one included"
    );
    describe_gauge!(
        "cluster_known_nodes",
        "Nodes this one knows of, itself included"
    );
    describe_gauge!(
        "cluster_layout_node_connected",
        "Whether each node of the layout answers (0 or 1)"
    );
    describe_gauge!(
        "cluster_storage_nodes",
        "Storage nodes in the current layout"
    );
    describe_gauge!(
        "cluster_storage_nodes_ok",
        "Storage nodes of the layout that answer"
    );
    describe_gauge!("cluster_partitions", "Partitions of the layout");
    describe_gauge!(
        "cluster_node_clock_offset_seconds",
        "Offset of each node's wall clock from the cluster's (the median of the nodes' clocks), measured from pings by this node; positive: ahead"
    );
    describe_gauge!(
        "cluster_clock_skewed_nodes",
        "Nodes whose clock is off the cluster's by more than max_clock_offset_msec"
    );
    describe_gauge!(
        "cluster_partitions_quorum",
        "Partitions with a write quorum of answering nodes"
    );
    describe_gauge!(
        "cluster_partitions_all_ok",
        "Partitions with all their nodes answering"
    );
}

/// Who may read `/metrics`.
#[derive(Clone)]
struct MetricsAccess {
    handle: PrometheusHandle,
    token: Option<Arc<str>>,
}

/// `GET /metrics` in the Prometheus text format. With a token, requests
/// must carry `Authorization: Bearer <token>`: none gets 401, a wrong one
/// 403 (compared in constant time, on hashes: the admin API's check).
pub fn metrics_router(handle: PrometheusHandle, metrics_token: Option<String>) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(MetricsAccess {
            handle,
            token: metrics_token.map(Arc::from),
        })
}

async fn serve_metrics(State(access): State<MetricsAccess>, headers: HeaderMap) -> Response {
    if let Some(token) = &access.token {
        let given = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        match check_bearer(token, given) {
            TokenCheck::Missing => {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "a metrics token is required: Authorization: Bearer <metrics_token>\n",
                )
                    .into_response()
            }
            TokenCheck::Wrong => {
                return (StatusCode::FORBIDDEN, "wrong metrics token\n").into_response()
            }
            TokenCheck::Valid => (),
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        access.handle.render(),
    )
        .into_response()
}

// ---- Traces ----

/// Whether spans are exported (set once the exporter runs).
static TRACING_ON: AtomicBool = AtomicBool::new(false);
type OtelLayer =
    tracing_opentelemetry::OpenTelemetryLayer<Registry, opentelemetry_sdk::trace::Tracer>;
static OTEL: OnceLock<OtelLayer> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The tracing layer that exports spans once [`start_traces`] ran, and
/// does nothing before (or ever, without `trace_sink`). It sits in the
/// subscriber from the start because the exporter can only be built once
/// the node id is known.
pub fn trace_layer() -> impl Layer<Registry> + Send + Sync {
    TraceGate.with_filter(TraceFilter)
}

/// Only the garage crates' spans, and only while exporting: the filter
/// is asked per span, so nothing is created when tracing is off.
struct TraceFilter;

impl<S> Filter<S> for TraceFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        TRACING_ON.load(Ordering::Relaxed)
            && meta.is_span()
            && meta.target().starts_with("garage")
            && *meta.level() <= tracing::Level::DEBUG
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::DEBUG)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if meta.is_span() && meta.target().starts_with("garage") {
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
}

struct TraceGate;

impl Layer<Registry> for TraceGate {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_new_span(attrs, id, ctx)
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_record(id, values, ctx)
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_follows_from(id, follows, ctx)
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_event(event, ctx)
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_enter(id, ctx)
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_exit(id, ctx)
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, Registry>) {
        if let Some(l) = OTEL.get() {
            l.on_close(id, ctx)
        }
    }

    /// Lets `tracing_opentelemetry::OpenTelemetrySpanExt` find the
    /// OpenTelemetry layer through this gate (its `WithContext` hook), so
    /// that a span's context can be read and set: the RPC trace context
    /// (`garage_net::trace`) needs both.
    #[allow(unsafe_code)]
    unsafe fn downcast_raw(&self, id: std::any::TypeId) -> Option<*const ()> {
        if id == std::any::TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: the layer is in a static `OnceLock`, never moved or
        // dropped once set, so a pointer into it stays valid; the inner
        // layer answers only for types it holds (the contract of
        // `downcast_raw`), as every wrapper of tracing-subscriber does.
        OTEL.get().and_then(|l| unsafe { l.downcast_raw(id) })
    }
}

/// `url` without the `user:pass@` part of its authority, for logs and
/// error messages.
fn without_userinfo(url: &str) -> String {
    let start = url.find("://").map(|i| i + 3).unwrap_or(0);
    let end = url[start..]
        .find(['/', '?', '#'])
        .map(|i| start + i)
        .unwrap_or(url.len());
    match url[start..end].rfind('@') {
        Some(at) => format!("{}{}", &url[..start], &url[start + at + 1..]),
        None => url.to_string(),
    }
}

/// Starts exporting spans to `sink` (an OTLP/HTTP endpoint such as
/// `http://collector:4318`; `/v1/traces` is added unless present), with
/// service name `garage` and the node id as resource attributes.
pub fn start_traces(sink: &str, node_id: &str) -> anyhow::Result<()> {
    use opentelemetry_otlp::WithExportConfig;
    let url = if sink.trim_end_matches('/').ends_with("/v1/traces") {
        sink.to_string()
    } else {
        format!("{}/v1/traces", sink.trim_end_matches('/'))
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url.clone())
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| {
            anyhow::anyhow!(
                "trace_sink {:?}: cannot build the OTLP exporter: {e}",
                without_userinfo(sink)
            )
        })?;
    let batch = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            opentelemetry_sdk::trace::BatchConfigBuilder::default()
                .with_scheduled_delay(Duration::from_secs(1))
                .build(),
        )
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("garage")
        .with_attribute(opentelemetry::KeyValue::new(
            "service.instance.id",
            node_id.to_string(),
        ))
        .with_attribute(opentelemetry::KeyValue::new(
            "garage.node_id",
            node_id.to_string(),
        ))
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(batch)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("garage");
    if OTEL
        .set(tracing_opentelemetry::layer().with_tracer(tracer))
        .is_err()
    {
        anyhow::bail!("traces are already being exported");
    }
    let _ = PROVIDER.set(provider);
    garage_net::trace::set_propagator(Box::new(OtelPropagator));
    TRACING_ON.store(true, Ordering::Relaxed);
    tracing::info!(
        "exporting traces over OTLP/HTTP to {}",
        without_userinfo(&url)
    );
    Ok(())
}

/// Carries trace contexts over RPC (`garage_net::trace`): the current
/// span's OpenTelemetry context out, a caller's context in as the parent
/// of the span serving its call.
struct OtelPropagator;

impl garage_net::trace::Propagator for OtelPropagator {
    fn current(&self) -> Option<garage_net::trace::TraceParent> {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let cx = tracing::Span::current().context();
        let sc = cx.span().span_context().clone();
        sc.is_valid().then(|| garage_net::trace::TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        })
    }

    fn adopt(&self, span: &tracing::Span, parent: garage_net::trace::TraceParent) {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
        };
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let remote = SpanContext::new(
            TraceId::from_bytes(parent.trace_id),
            SpanId::from_bytes(parent.span_id),
            TraceFlags::new(parent.flags),
            true,
            TraceState::default(),
        );
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

/// Sends the spans still buffered and stops the exporter (at shutdown).
pub fn shutdown_traces() {
    TRACING_ON.store(false, Ordering::Relaxed);
    if let Some(p) = PROVIDER.get() {
        if let Err(e) = p.shutdown() {
            tracing::warn!("trace exporter shutdown: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn userinfo_is_not_logged() {
        assert_eq!(
            without_userinfo("https://u:s3cret@collector:4318/v1/traces"),
            "https://collector:4318/v1/traces"
        );
        assert_eq!(
            without_userinfo("http://tok@collector:4318"),
            "http://collector:4318"
        );
        assert_eq!(
            without_userinfo("http://collector:4318/v1/traces?a=b@c"),
            "http://collector:4318/v1/traces?a=b@c"
        );
        assert_eq!(
            without_userinfo("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318"
        );
    }
}
