//! The one HTTP listener loop of the S3 API, the website endpoint and the
//! admin API: bound to `ip:port` (with `TCP_NODELAY` on every connection)
//! or to a Unix socket path (a stale socket file there is replaced,
//! nothing else), HTTP/1.1 and h2c with the header limits of
//! [`http_builder`], and a graceful stop that gives the
//! requests in progress [`DRAIN`] to finish. Every connection's bytes are
//! counted, by listener: `http_bytes_received_total` and
//! `http_bytes_sent_total` (headers and bodies, as on the wire before TLS,
//! which a proxy in front would add).

use std::io::IoSlice;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use garage_util::socket::{bind_unix_socket, is_socket_path, SocketError};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// At most this many request headers (HTTP/1.1; beyond, hyper answers
/// 431), in a request head of at most hyper's read buffer (about 400 KiB);
/// HTTP/2 header lists at most 64 KiB.
pub const MAX_HEADERS: usize = 100;
pub const H2_MAX_HEADER_LIST_SIZE: u32 = 64 << 10;

/// The HTTP connection settings of the S3, website and admin listeners: the
/// header limits above.
pub fn http_builder() -> ConnBuilder<TokioExecutor> {
    let mut b = ConnBuilder::new(TokioExecutor::new());
    b.http1().max_headers(MAX_HEADERS);
    b.http2().max_header_list_size(H2_MAX_HEADER_LIST_SIZE);
    b
}

/// How long running requests get to finish at shutdown.
pub const DRAIN: Duration = Duration::from_secs(10);

/// A bound listener.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `bind_addr`: `ip:port`, or the path of a Unix socket. `what`
    /// names the setting in errors (e.g. `s3_api.api_bind_addr`).
    pub async fn bind(bind_addr: &str, what: &str) -> Result<Self, String> {
        if is_socket_path(bind_addr) {
            let path = PathBuf::from(bind_addr);
            let l = bind_unix_socket(&path)
                .and_then(|l| {
                    UnixListener::from_std(l).map_err(|e| SocketError::Bind(path.clone(), e))
                })
                .map_err(|e| format!("{what}: {e}"))?;
            return Ok(Listener::Unix(l, path));
        }
        let addr: SocketAddr = bind_addr.parse().map_err(|_| {
            format!(
                "{what} {bind_addr:?} is neither ip:port nor a socket path (starting with / or .)"
            )
        })?;
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {what} {addr}: {e}"))?;
        Ok(Listener::Tcp(l))
    }

    /// Where it listens: `http://ip:port`, or `unix:<path>`.
    pub fn url(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| format!("http://{a}"))
                .unwrap_or_else(|e| format!("(unknown address: {e})")),
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }

    /// The TCP address, if it is one.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }

    /// Serves connections until `must_exit`, each with the service
    /// `service(peer)` makes (`peer`: the TCP peer; none on a Unix socket),
    /// then waits up to [`DRAIN`] for the requests in progress. `name`
    /// names the listener in logs.
    pub async fn serve<S, B>(
        self,
        name: &'static str,
        service: impl Fn(Option<SocketAddr>) -> S,
        mut must_exit: watch::Receiver<bool>,
    ) where
        S: hyper::service::Service<Request<Incoming>, Response = hyper::Response<B>>
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let http = http_builder();
        let graceful = GracefulShutdown::new();
        let label = metric_label(name);
        let received = metrics::counter!("http_bytes_received_total", "listener" => label);
        let sent = metrics::counter!("http_bytes_sent_total", "listener" => label);
        let spawn = |io: Box<dyn Io>, peer: Option<SocketAddr>| {
            let io = Counted {
                inner: io,
                received: received.clone(),
                sent: sent.clone(),
            };
            let conn = http.serve_connection(TokioIo::new(io), service(peer));
            let conn = graceful.watch(conn.into_owned());
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    debug!("{name} connection ended: {e}");
                }
            });
        };
        loop {
            let accepted = tokio::select! {
                r = async {
                    match &self {
                        Listener::Tcp(l) => l.accept().await.map(|(s, peer)| {
                            let _ = s.set_nodelay(true);
                            debug!("{name} connection from {peer}");
                            (Box::new(s) as Box<dyn Io>, Some(peer))
                        }),
                        Listener::Unix(l, _) => l
                            .accept()
                            .await
                            .map(|(s, _)| (Box::new(s) as Box<dyn Io>, None)),
                    }
                } => r,
                _ = must_exit.changed() => break,
            };
            match accepted {
                Ok((io, peer)) => spawn(io, peer),
                Err(e) => {
                    warn!("{name} listener: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        info!(
            "{name} listener stopping; waiting up to {}s for requests in progress",
            DRAIN.as_secs()
        );
        let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    }
}

/// A connection's byte stream, TCP or Unix.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// The `listener` label of a listener's byte counters: `s3`, `web`,
/// `admin`, or its name as given.
fn metric_label(name: &'static str) -> &'static str {
    match name {
        "S3" => "s3",
        "website" => "web",
        "admin API" => "admin",
        other => other,
    }
}

/// A connection whose bytes read and written are counted.
struct Counted<T> {
    inner: T,
    received: metrics::Counter,
    sent: metrics::Counter,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            self.received
                .increment((buf.filled().len() - before) as u64);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.sent.increment(n as u64);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.sent.increment(n as u64);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn counted_connections_count_both_ways() {
        let (received, sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (a, mut b) = tokio::io::duplex(64);
        let mut c = Counted {
            inner: a,
            received: metrics::Counter::from_arc(received.clone()),
            sent: metrics::Counter::from_arc(sent.clone()),
        };
        c.write_all(b"hello").await.unwrap();
        b.write_all(b"0123456789").await.unwrap();
        let mut got = [0u8; 10];
        c.read_exact(&mut got).await.unwrap();
        let mut echo = [0u8; 5];
        b.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"hello");
        assert_eq!(sent.load(Ordering::Relaxed), 5);
        assert_eq!(received.load(Ordering::Relaxed), 10);
    }
}
