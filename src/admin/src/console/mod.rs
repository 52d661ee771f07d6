//! The web console at `/ui/` on the admin listener: a page and its script
//! and style sheet, embedded in the binary (no build step, no CDN, works
//! offline). The script is a client of the admin HTTP API: every action is
//! one `/v2/…` request with the operator's admin token, so it goes through
//! the same token scopes and checks as any other API client.
//!
//! The token is held in the page's memory only: never in a URL, a cookie or
//! browser storage (a reload asks for it again). With no cookie there is
//! nothing for a cross-site request to ride on (no CSRF); the content
//! security policy allows only this origin's script and style (no inline
//! script), and the page cannot be framed.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use hyper_util::rt::TokioIo;

use axum::routing::{any, get};
use axum::Router;

use crate::admin_api::error::ApiError;
use crate::admin_api::St;

/// The console's routes, merged into the admin listener's router by the
/// daemon: the page, its assets (no token: the page asks for one) and the
/// S3 relay (authenticated by the presigned signature).
pub fn router(state: St) -> Router {
    Router::new()
        .route("/ui", get(to_index))
        .route("/ui/", get(index))
        .route("/ui/app.js", get(script))
        .route("/ui/app.css", get(style))
        .route("/ui/s3/{*rest}", any(relay))
        .with_state(state)
}

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// Sent with every console answer.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

pub async fn to_index() -> Redirect {
    Redirect::permanent("/ui/")
}

/// The request headers the relay passes on.
const RELAYED: &[&str] = &[
    "content-type",
    "content-length",
    "content-md5",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
];

/// `/ui/s3/…`: relays a presigned S3 request (see PresignS3Request) to
/// this node's S3 endpoint, so that the console's page talks to its own
/// origin only (no CORS rule needed on the bucket). Only requests that
/// carry a SigV4 signature in their query are relayed; the S3 API checks
/// it, and the key's permissions, as for any client. Bodies stream both
/// ways.
pub async fn relay(State(st): State<St>, req: Request) -> Response {
    match relay_inner(&st, req).await {
        Ok(r) => r,
        Err(e) => (
            StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(serde_json::json!({"code": e.code(), "message": e.to_string()})),
        )
            .into_response(),
    }
}

async fn relay_inner(st: &St, req: Request) -> Result<Response, ApiError> {
    let host = st.conf.s3_host.clone().ok_or_else(|| {
        ApiError::BadRequest(
            "s3_api.api_bind_addr is not a TCP address: nothing to relay to".into(),
        )
    })?;
    let (parts, body) = req.into_parts();
    let pq = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
    let target = pq.strip_prefix("/ui/s3").unwrap_or(pq).to_string();
    if !parts
        .uri
        .query()
        .is_some_and(|q| q.contains("X-Amz-Signature="))
    {
        return Err(ApiError::Forbidden(
            "/ui/s3 relays presigned requests only (see PresignS3Request)".into(),
        ));
    }
    let stream = tokio::net::TcpStream::connect(&host)
        .await
        .map_err(|e| ApiError::Internal(format!("cannot reach the S3 endpoint {host}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ApiError::Internal(format!("S3 endpoint {host}: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("console relay connection: {e}");
        }
    });
    let mut out = axum::http::Request::builder()
        .method(parts.method)
        .uri(target)
        .header(header::HOST, host.as_str());
    for name in RELAYED {
        if let Some(v) = parts.headers.get(*name) {
            out = out.header(*name, v);
        }
    }
    let out = out
        .body(body)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let res = sender
        .send_request(out)
        .await
        .map_err(|e| ApiError::Internal(format!("S3 endpoint {host}: {e}")))?;
    let (parts, body) = res.into_parts();
    Ok(Response::from_parts(parts, axum::body::Body::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX.contains(r#"src="/ui/app.js""#));
        assert!(INDEX.contains(r#"href="/ui/app.css""#));
        // No inline script: the policy would block it.
        assert_eq!(INDEX.matches("<script").count(), 1);
        for banned in [
            "http://",
            "https://",
            "localStorage",
            "sessionStorage",
            "innerHTML",
        ] {
            assert!(!SCRIPT.contains(banned), "app.js uses {banned}");
            assert!(!INDEX.contains(banned), "index.html uses {banned}");
        }
    }
}
