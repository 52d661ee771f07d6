//! The website listener on `[s3_web] bind_addr` (the shared listener
//! loop of [`garage_http::listener`]: `ip:port` or a Unix socket path,
//! graceful stop), and the request metrics (through the `metrics` facade:
//! no-ops until an exporter is installed).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_api::Api;
use garage_http::listener::Listener;
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::host::host_name;
use crate::serve::{Ask, Response, Web};

/// Requests served, by method.
pub const REQUEST_COUNTER: &str = "web_requests_total";
/// Answers with a status of 400 or more, by method and status.
pub const ERROR_COUNTER: &str = "web_errors_total";
/// Time to the response's head, in seconds, by method.
pub const REQUEST_DURATION: &str = "web_request_duration_seconds";

pub struct WebServer {
    listener: Listener,
    web: Arc<Web>,
    /// `add_host_to_metrics`: a `host` label on the metrics.
    host_label: bool,
}

/// The method as a metric label: one of a fixed set, so that a client
/// cannot make up new label values.
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "other",
    }
}

async fn serve(
    web: Arc<Web>,
    host_label: bool,
    req: Request<Incoming>,
) -> Result<Response, Infallible> {
    let start = Instant::now();
    let method = method_label(req.method());
    let (parts, _body) = req.into_parts();
    let host = parts
        .headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let handled = web
        .handle(&Ask {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
        })
        .await;
    let resp = handled.response;
    let status = resp.status();
    let label = host_label.then(|| metric_host(&host, handled.site_found));
    record(method, label, status, start.elapsed());
    if status.is_server_error() {
        warn!(
            "web {method} {host}{} -> {status}: {}",
            parts.uri.path(),
            handled
                .server_error
                .as_deref()
                .unwrap_or("server error (no cause recorded)")
        );
    } else {
        debug!("web {method} {host}{} -> {status}", parts.uri.path());
    }
    Ok(resp)
}

/// The `host` label of a request: the host name of an existing site, else
/// `unknown` (any other Host header would make a new series).
fn metric_host(host: &str, site_found: bool) -> String {
    match host_name(host) {
        Some(h) if site_found => h,
        _ => "unknown".to_string(),
    }
}

/// Counts one answered request in the metrics (with a `host` label when
/// `host` is given).
fn record(method: &'static str, host: Option<String>, status: StatusCode, elapsed: Duration) {
    let mut labels = vec![("method", method.to_string())];
    if let Some(h) = host {
        labels.push(("host", h));
    }
    metrics::counter!(REQUEST_COUNTER, &labels).increment(1);
    metrics::histogram!(REQUEST_DURATION, &labels).record(elapsed.as_secs_f64());
    if status.as_u16() >= 400 {
        labels.push(("status_code", status.as_u16().to_string()));
        metrics::counter!(ERROR_COUNTER, &labels).increment(1);
    }
}

impl WebServer {
    /// Binds the listener (so that a taken address fails at startup):
    /// `bind_addr` is `ip:port` or the path of a Unix socket (a stale
    /// socket file there is replaced, nothing else).
    pub async fn bind(
        api: Arc<Api>,
        bind_addr: &str,
        root_domain: &str,
        host_label: bool,
    ) -> Result<Self, String> {
        let listener = Listener::bind(bind_addr, "s3_web.bind_addr").await?;
        Ok(Self {
            listener,
            web: Arc::new(Web::new(api, root_domain)),
            host_label,
        })
    }

    /// Where it listens: `http://ip:port`, or `unix:<path>`.
    pub fn url(&self) -> String {
        self.listener.url()
    }

    pub async fn run(self, must_exit: watch::Receiver<bool>) {
        let (web, host_label) = (self.web, self.host_label);
        self.listener
            .serve(
                "website",
                move |_peer| {
                    let web = web.clone();
                    hyper::service::service_fn(move |req| serve(web.clone(), host_label, req))
                },
                must_exit,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use metrics::{
        Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    use super::*;

    /// A recorder keeping every counter and histogram by name and labels.
    #[derive(Default)]
    struct Kept {
        counters: Mutex<Vec<(String, Arc<AtomicU64>)>>,
        histograms: Mutex<Vec<(String, Arc<Samples>)>>,
    }

    #[derive(Default)]
    struct Samples(Mutex<Vec<f64>>);

    impl metrics::HistogramFn for Samples {
        fn record(&self, value: f64) {
            self.0.lock().unwrap().push(value);
        }
    }

    fn id(key: &Key) -> String {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        format!("{}{{{}}}", key.name(), labels.join(","))
    }

    impl Recorder for Kept {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let mut c = self.counters.lock().unwrap();
            let name = id(key);
            let a = match c.iter().find(|(n, _)| *n == name) {
                Some((_, a)) => a.clone(),
                None => {
                    let a = Arc::new(AtomicU64::new(0));
                    c.push((name, a.clone()));
                    a
                }
            };
            Counter::from_arc(a)
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            let mut h = self.histograms.lock().unwrap();
            let name = id(key);
            let s = match h.iter().find(|(n, _)| *n == name) {
                Some((_, s)) => s.clone(),
                None => {
                    let s = Arc::new(Samples::default());
                    h.push((name, s.clone()));
                    s
                }
            };
            Histogram::from_arc(s)
        }
    }

    impl Kept {
        fn counter(&self, name: &str) -> u64 {
            self.counters
                .lock()
                .unwrap()
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, a)| a.load(Ordering::Relaxed))
                .unwrap_or(0)
        }
        fn samples(&self, name: &str) -> Vec<f64> {
            self.histograms
                .lock()
                .unwrap()
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.0.lock().unwrap().clone())
                .unwrap_or_default()
        }
    }

    #[test]
    fn requests_are_counted_by_method_and_errors_by_status() {
        let kept = Kept::default();
        metrics::with_local_recorder(&kept, || {
            record("GET", None, StatusCode::OK, Duration::from_millis(3));
            record("GET", None, StatusCode::NOT_FOUND, Duration::from_millis(2));
            record(
                "HEAD",
                None,
                StatusCode::NOT_MODIFIED,
                Duration::from_millis(1),
            );
            record(
                "GET",
                Some("site.web.example".into()),
                StatusCode::SERVICE_UNAVAILABLE,
                Duration::from_millis(5),
            );
        });
        assert_eq!(kept.counter("web_requests_total{method=GET}"), 2);
        assert_eq!(kept.counter("web_requests_total{method=HEAD}"), 1);
        assert_eq!(
            kept.counter("web_errors_total{method=GET,status_code=404}"),
            1
        );
        // 304 is not an error.
        assert_eq!(
            kept.counter("web_errors_total{method=HEAD,status_code=304}"),
            0
        );
        assert_eq!(
            kept.counter("web_errors_total{method=GET,host=site.web.example,status_code=503}"),
            1
        );
        assert_eq!(
            kept.samples("web_request_duration_seconds{method=GET}"),
            vec![0.003, 0.002]
        );
        assert_eq!(
            method_label(&Method::from_bytes(b"PROPFIND").unwrap()),
            "other"
        );
    }

    #[test]
    fn host_label_only_names_existing_sites() {
        assert_eq!(
            metric_host("Site.Web.Example:3902", true),
            "site.web.example"
        );
        assert_eq!(metric_host("random-123.example", false), "unknown");
        assert_eq!(metric_host("", false), "unknown");
    }
}
