//! The S3 HTTP listener: hyper (HTTP/1.1 and h2c) serving the s3s service,
//! `TCP_NODELAY` on every connection, graceful stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::ctx::Api;
use crate::s3::{GarageS3, KeyAuth};

/// How long running requests get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(10);

pub struct S3Server {
    listener: TcpListener,
    service: s3s::service::S3Service,
}

impl S3Server {
    /// Binds the listener (so that a taken port fails at startup).
    pub async fn bind(
        api: Arc<Api>,
        addr: SocketAddr,
        root_domain: Option<&str>,
    ) -> Result<Self, String> {
        let mut b = S3ServiceBuilder::new(GarageS3(api.clone()));
        b.set_auth(KeyAuth(api));
        if let Some(d) = root_domain {
            let d = d.trim_start_matches('.');
            let host = s3s::host::SingleDomain::new(d)
                .map_err(|e| format!("s3_api.root_domain {d:?}: {e}"))?;
            b.set_host(host);
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen for S3 on {addr}: {e}"))?;
        Ok(Self {
            listener,
            service: b.build(),
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
                        warn!("S3 listener: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = must_exit.changed() => break,
            };
            let _ = stream.set_nodelay(true);
            debug!("S3 connection from {peer}");
            let conn = http.serve_connection(TokioIo::new(stream), self.service.clone());
            let conn = graceful.watch(conn.into_owned());
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    debug!("S3 connection from {peer} ended: {e}");
                }
            });
        }
        info!(
            "S3 listener stopping; waiting up to {}s for requests in progress",
            DRAIN.as_secs()
        );
        let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    }
}
