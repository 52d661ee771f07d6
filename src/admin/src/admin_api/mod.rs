//! The admin HTTP API on `[admin] api_bind_addr`: the reference system's
//! v2 endpoints (`/v2/<Operation>`), JSON in and out, bearer
//! `admin_token`. Each operation is an axum handler annotated with
//! `#[utoipa::path]`; the router and the OpenAPI document
//! (`/v2/openapi.json`) are both built from those annotations, so they
//! cannot drift apart.
//!
//! The handlers are thin wrappers of the typed operations of
//! [`crate::ops`], which the CLI reaches over the admin RPC: the HTTP API
//! and `garage …` share one implementation. Node-local operations
//! (`?node=`) go to their nodes through [`crate::admin_rpc::on_nodes`].

pub(crate) mod auth;
pub(crate) mod bucket;
mod cluster;
pub mod error;
mod extract;
pub(crate) mod iam;
pub(crate) mod key;
pub(crate) mod kms;
mod layout;
pub(crate) mod node;
mod objects;
mod openapi;
pub(crate) mod remote;
pub(crate) mod token;
pub(crate) mod topic;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Router;
use tracing::{debug, info, warn};
use utoipa_axum::router::OpenApiRouter;

use crate::admin_rpc::AdminEndpoint;
use crate::ops::NodeConfig;
use error::{ApiError, ErrorBody, PendingError};
use garage_model::garage::Garage;

/// What every handler gets.
pub struct AdminState {
    pub garage: Arc<Garage>,
    /// `admin.admin_token`; without it every token-protected endpoint
    /// refuses.
    pub admin_token: Option<String>,
    /// The region (named in error bodies) and the S3 endpoint (for
    /// presigned requests and the console's relay).
    pub conf: NodeConfig,
    /// `s3_web.root_domain` and `s3_api.root_domain`, for `/check`.
    pub root_domains: Vec<String>,
    /// The admin RPC endpoint, to run node-local operations on other nodes.
    pub admin_rpc: Arc<AdminEndpoint>,
}

pub type St = Arc<AdminState>;

/// The token-protected operations, and the part of the OpenAPI document
/// that describes exactly them (generated from their annotations).
fn operations() -> (Router<St>, utoipa::openapi::OpenApi) {
    let r = OpenApiRouter::new();
    let r = cluster::routes(r);
    let r = layout::routes(r);
    let r = key::routes(r);
    let r = bucket::routes(r);
    let r = node::routes(r);
    let r = token::routes(r);
    let r = kms::routes(r);
    let r = topic::routes(r);
    let r = remote::routes(r);
    let r = iam::routes(r);
    let r = objects::routes(r);
    r.split_for_parts()
}

/// The routes served without a token (documented in [`openapi::ApiDoc`]).
fn special_routes() -> Vec<(Method, &'static str, MethodRouter<St>)> {
    vec![
        (Method::GET, "/health", get(cluster::health)),
        (Method::GET, "/check", get(cluster::check)),
        (
            Method::GET,
            "/v2/GetClusterHealth",
            get(cluster::get_cluster_health),
        ),
        (Method::GET, "/v2/openapi.json", get(openapi::openapi_json)),
    ]
}

/// The OpenAPI document of the admin API, as served at `/v2/openapi.json`.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let mut doc = <openapi::ApiDoc as utoipa::OpenApi>::openapi();
    doc.merge(operations().1);
    doc
}

/// Every (method, path) the router serves.
#[cfg(test)]
fn served_routes() -> Vec<(Method, String)> {
    let mut out: Vec<(Method, String)> = special_routes()
        .into_iter()
        .map(|(m, p, _)| (m, p.to_string()))
        .collect();
    for (path, item) in operations().1.paths.paths {
        for (m, op) in [
            (Method::GET, &item.get),
            (Method::POST, &item.post),
            (Method::PUT, &item.put),
            (Method::DELETE, &item.delete),
        ] {
            if op.is_some() {
                out.push((m, path.clone()));
            }
        }
    }
    out
}

/// The whole admin router. Other routers (`/metrics`) can be merged into
/// it with [`Router::merge`]; the token check applies to the operations
/// of this one only.
pub fn router(state: St) -> Router {
    let (ops, _) = operations();
    let protected = ops.route_layer(middleware::from_fn_with_state(
        state.clone(),
        auth::require_admin_token,
    ));
    let mut r = Router::new();
    for (_, path, route) in special_routes() {
        r = r.route(path, route);
    }
    r.merge(protected)
        .fallback(|req: Request| async move {
            let path = req.uri().path();
            // The reference's older API versions: refused by name, so that
            // a client made for them says what to change.
            if path.starts_with("/v1/") || path.starts_with("/v0/") {
                return ApiError::BadRequest(format!(
                    "{} endpoints are not served: this admin API is the reference's v2 \
                     (`/v2/<EndpointName>`, e.g. /v2/GetClusterStatus; list at /v2/openapi.json)",
                    &path[..3]
                ));
            }
            ApiError::NotFound(format!(
                "no admin API endpoint {} {path}: see /v2/openapi.json for the list",
                req.method(),
            ))
        })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            finish_response,
        ))
        .with_state(state)
}

/// Answers CORS preflights (any path, no token, as the reference does),
/// lets browsers read every answer, and turns an [`ApiError`] answer into
/// its JSON body, with the request's path and the region; logs it.
async fn finish_response(State(state): State<St>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if method == Method::OPTIONS {
        let methods = HeaderValue::from_static("OPTIONS, GET, POST");
        return (
            StatusCode::NO_CONTENT,
            [
                (header::ALLOW, methods.clone()),
                (header::ACCESS_CONTROL_ALLOW_METHODS, methods),
                (
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                ),
                (
                    header::ACCESS_CONTROL_ALLOW_HEADERS,
                    HeaderValue::from_static("authorization, content-type"),
                ),
            ],
        )
            .into_response();
    }
    let mut res = next.run(req).await;
    res.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    let status = res.status();
    // axum's own answers (405) become JSON errors too.
    let pending = match res.extensions().get::<PendingError>() {
        Some(p) => p.clone(),
        None if status == StatusCode::METHOD_NOT_ALLOWED => PendingError {
            code: "MethodNotAllowed",
            message: format!("{method} is not allowed on {path}"),
        },
        None => return res,
    };
    if status.is_server_error() {
        warn!("admin API {method} {path}: {status} {}", pending.message);
    } else {
        debug!("admin API {method} {path}: {status} {}", pending.message);
    }
    let body = ErrorBody {
        code: pending.code.to_string(),
        message: pending.message,
        region: state.conf.region.clone(),
        path,
    };
    let mut out = (status, axum::Json(body)).into_response();
    if status == StatusCode::METHOD_NOT_ALLOWED {
        if let Some(allow) = res.headers().get(header::ALLOW) {
            out.headers_mut().insert(header::ALLOW, allow.clone());
        }
    }
    out.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    out
}

/// Binds `addr` (`ip:port`, or the path of a Unix socket), so that a bad
/// address stops startup, and returns the task serving the admin API
/// until `must_exit` (the listener loop shared with S3 and the website
/// endpoint: [`garage_http::listener`]).
pub async fn start(
    addr: &str,
    router: Router,
    must_exit: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = garage_http::listener::Listener::bind(addr, "admin.api_bind_addr")
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    info!("admin API listening on {}", listener.url());
    Ok(tokio::spawn(listener.serve(
        "admin API",
        move |_peer| hyper_util::service::TowerToHyperService::new(router.clone()),
        must_exit,
    )))
}
