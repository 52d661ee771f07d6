//! Operators' logs: one line per event on stderr, each naming the node it
//! comes from once the node id is known, so that logs gathered from several
//! nodes can be told apart. `RUST_LOG` overrides the level.

use std::fmt;
use std::sync::OnceLock;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

static NODE: OnceLock<String> = OnceLock::new();

/// Names this process's node in every log line from now on (the short
/// form of its id).
pub fn set_node(short_id: String) {
    let _ = NODE.set(short_id);
}

/// The default line format with `node=<short id>` after the time.
struct WithNode(Format<Full, ()>);

impl<S, N> FormatEvent<S, N> for WithNode
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        SystemTime.format_time(&mut writer)?;
        match NODE.get() {
            Some(node) => write!(writer, " node={node} ")?,
            None => write!(writer, " ")?,
        }
        self.0.format_event(ctx, writer, event)
    }
}

/// Caps the crates that log secrets below some level, whatever `RUST_LOG`
/// asks (a second filter: a more specific `RUST_LOG` directive such as
/// `s3s::ops=trace` cannot lift it).
///
/// s3s logs at debug level whole requests with their headers (SSE-C keys),
/// PostObject forms (policies, SSE-C key fields) and, on a signature
/// mismatch, the signature it computed, which is the correct one: a reader
/// of the log could replay it. Its warnings and errors carry none of these.
///
/// The clients of the notification brokers (lapin and amq-protocol for
/// AMQP, async-nats, rskafka, rumqttc) are silenced: their lines may carry an
/// endpoint's URL with its password, and each failure of theirs is
/// already one `WARN` line of the delivery worker's, naming the topic.
fn never_secrets() -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("s3s", LevelFilter::INFO)
        .with_target("lapin", LevelFilter::OFF)
        .with_target("amq_protocol", LevelFilter::OFF)
        .with_target("amq_protocol_tcp", LevelFilter::OFF)
        .with_target("async_nats", LevelFilter::OFF)
        .with_target("rskafka", LevelFilter::OFF)
        .with_target("rumqttc", LevelFilter::OFF)
}

/// Installs the log subscriber; with `traces`, also the layer that exports
/// spans once `telemetry::start_traces` runs (the server only).
pub fn init(default_level: &str, traces: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .event_format(WithNode(
            Format::default().with_target(false).without_time(),
        ))
        .with_filter(filter)
        .with_filter(never_secrets());
    // The log filter applies to the log lines only: spans exported as
    // traces have their own filter (in `telemetry`).
    tracing_subscriber::registry()
        .with(traces.then(crate::telemetry::trace_layer))
        .with(fmt)
        .init();
}
