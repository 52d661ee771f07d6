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

/// Installs the log subscriber; with `traces`, also the layer that exports
/// spans once `telemetry::start_traces` runs (the server only).
pub fn init(default_level: &str, traces: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level))
        // s3s logs whole requests at debug level, headers included: SSE-C
        // keys must never reach the log, whatever RUST_LOG asks.
        .add_directive("s3s::service=info".parse().expect("a valid directive"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .event_format(WithNode(
            Format::default().with_target(false).without_time(),
        ))
        .with_filter(filter);
    // The log filter applies to the log lines only: spans exported as
    // traces have their own filter (in `telemetry`).
    tracing_subscriber::registry()
        .with(traces.then(crate::telemetry::trace_layer))
        .with(fmt)
        .init();
}
