//! RPC metrics, recorded through the `metrics` facade (the binary installs
//! the exporter; without one, recording costs next to nothing). Names and
//! labels are listed in `doc/metrics.md`.

use std::time::Duration;

use crate::error::NetError;
use crate::ident::NodeId;

/// Counts one finished call of endpoint `path` to `to` and its duration;
/// timeouts and communication failures are counted apart.
pub(crate) fn record_call<T>(path: &str, to: &NodeId, took: Duration, res: &Result<T, NetError>) {
    let to = to.short();
    let path = path.to_string();
    metrics::counter!("rpc_requests_total", "rpc_endpoint" => path.clone(), "to" => to.clone())
        .increment(1);
    metrics::histogram!("rpc_duration_seconds", "rpc_endpoint" => path.clone(), "to" => to.clone())
        .record(took.as_secs_f64());
    match res {
        Ok(_) => (),
        Err(NetError::Timeout(_)) => {
            metrics::counter!("rpc_timeouts_total", "rpc_endpoint" => path, "to" => to).increment(1)
        }
        Err(NetError::Remote(_)) => {
            metrics::counter!("rpc_remote_errors_total", "rpc_endpoint" => path, "to" => to)
                .increment(1)
        }
        Err(_) => metrics::counter!("rpc_netapp_errors_total", "rpc_endpoint" => path, "to" => to)
            .increment(1),
    }
}
