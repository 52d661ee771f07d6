//! The website listener: hyper (HTTP/1.1 and h2c) on `[s3_web]
//! bind_addr`, `TCP_NODELAY` on every connection, graceful stop, and the
//! request metrics (through the `metrics` facade: no-ops until an
//! exporter is installed).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_api::Api;
use hyper::body::Incoming;
use hyper::{Method, Request};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::serve::{Ask, Response, Web};

/// How long running requests get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(10);

/// Requests served, by method.
pub const REQUEST_COUNTER: &str = "web_request_counter";
/// Answers with a status of 400 or more, by method and status.
pub const ERROR_COUNTER: &str = "web_error_counter";
/// Time to the response's head, in seconds, by method.
pub const REQUEST_DURATION: &str = "web_request_duration";

pub struct WebServer {
    listener: TcpListener,
    web: Arc<Web>,
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

async fn serve(web: Arc<Web>, req: Request<Incoming>) -> Result<Response, Infallible> {
    let start = Instant::now();
    let method = method_label(req.method());
    metrics::counter!(REQUEST_COUNTER, "method" => method).increment(1);
    let (parts, _body) = req.into_parts();
    let resp = web
        .handle(&Ask {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
        })
        .await;
    let status = resp.status();
    metrics::histogram!(REQUEST_DURATION, "method" => method)
        .record(start.elapsed().as_secs_f64());
    if status.as_u16() >= 400 {
        metrics::counter!(
            ERROR_COUNTER,
            "method" => method,
            "status_code" => status.as_u16().to_string()
        )
        .increment(1);
    }
    let host = parts
        .headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("-");
    if status.is_server_error() {
        warn!("web {method} {host}{} -> {status}", parts.uri.path());
    } else {
        debug!("web {method} {host}{} -> {status}", parts.uri.path());
    }
    Ok(resp)
}

impl WebServer {
    /// Binds the listener (so that a taken port fails at startup).
    pub async fn bind(api: Arc<Api>, addr: SocketAddr, root_domain: &str) -> Result<Self, String> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen for the website endpoint on {addr}: {e}"))?;
        Ok(Self {
            listener,
            web: Arc::new(Web::new(api, root_domain)),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub async fn run(self, mut must_exit: watch::Receiver<bool>) {
        let http = ConnBuilder::new(TokioExecutor::new());
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        loop {
            let (stream, peer) = tokio::select! {
                r = self.listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        warn!("website listener: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = must_exit.changed() => break,
            };
            let _ = stream.set_nodelay(true);
            let web = self.web.clone();
            let service = hyper::service::service_fn(move |req| serve(web.clone(), req));
            let conn = http.serve_connection(TokioIo::new(stream), service);
            let conn = graceful.watch(conn.into_owned());
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    debug!("website connection from {peer} ended: {e}");
                }
            });
        }
        info!(
            "website listener stopping; waiting up to {}s for requests in progress",
            DRAIN.as_secs()
        );
        let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    }
}
