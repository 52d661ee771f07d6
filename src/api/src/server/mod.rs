//! The S3 endpoint: the s3s service behind `garage_http`'s listener
//! (which accepts connections, serves HTTP/1.1 and h2c, sets
//! `TCP_NODELAY` and stops gracefully), with what surrounds each request
//! here: its id, body limits, the request's region, logs. CORS: s3s
//! hands `OPTIONS` requests (preflights, unauthenticated) to [`Preflight`],
//! a custom route, and [`CorsService`], a thin layer in front of s3s, adds
//! the `Access-Control-*` headers to the responses of requests carrying
//! `Origin`. The matching itself is in `cors.rs`.
//!
//! The S3 endpoint as a whole: this module and [`telemetry`] (request
//! metrics and spans) sit above every family of operations.

pub mod query;
pub mod rechunk;
pub mod telemetry;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use hyper::body::Incoming;
use hyper::header::{
    HeaderMap, HeaderValue, CONNECTION, CONTENT_LENGTH, EXPECT, HOST, ORIGIN, TRANSFER_ENCODING,
};
use hyper::http::Extensions;
use hyper::{Method, Request, StatusCode, Uri};
use s3s::host::{S3Host, SingleDomain};
use s3s::route::S3Route;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{Body, HttpError, HttpResponse, S3Request, S3Response, S3Result};
use tokio::sync::watch;
use tracing::{debug, Instrument};

use crate::ctx::Api;
use crate::error::ApiError;
use crate::logging::delivery::AccessLogs;
use crate::logging::record::Event;
use crate::s3::{GarageS3, KeyAuth};
use crate::website::cors;
use telemetry::{OpSlot, RecordOp};

/// The largest file a PostObject form may carry. s3s 0.14 reads the whole
/// file into memory before the handler sees it (to check the policy's
/// `content-length-range`), so this bounds the memory of each such request
/// (s3s's own default is 5 GB).
pub const POST_OBJECT_MAX_SIZE: u64 = 64 << 20;

/// The largest XML body read whole into memory: CompleteMultipartUpload
/// (10 000 parts with checksums: about 3 MB), DeleteObjects (1 000 keys of
/// up to 1 KiB, escaped), the CORS, lifecycle and website configurations.
/// A larger body is refused with `MaxMessageLengthExceeded` (400) before
/// it is read further. (s3s's own default is 20 MiB.)
pub const XML_MAX_BODY_SIZE: usize = 8 << 20;
/// A PostObject form's fields other than the file: each at most 64 KiB
/// (a policy document is far smaller), 1 MiB and 100 fields in all;
/// beyond, `MalformedPOSTRequest` (400). (s3s: 1 MiB, 20 MiB, 1 000.)
pub const FORM_MAX_FIELD_SIZE: usize = 64 << 10;
pub const FORM_MAX_FIELDS_SIZE: usize = 1 << 20;
pub const FORM_MAX_PARTS: usize = 100;

/// Refuses, before any byte of it is read, a body that s3s would read
/// whole into memory and that is announced larger than
/// [`XML_MAX_BODY_SIZE`]: every operation's but PutObject's and
/// UploadPart's (streamed) and PostObject's (bounded by the form limits).
/// s3s refuses those too, but, for a body that arrives in several pieces,
/// with a 500 `InternalError` instead of AWS's 400.
pub fn check_buffered_body(op: &str, headers: &HeaderMap) -> S3Result<()> {
    if matches!(op, "PutObject" | "UploadPart" | "PostObject") {
        return Ok(());
    }
    let len = headers
        .get(CONTENT_LENGTH)
        .and_then(|l| l.to_str().ok())
        .and_then(|l| l.parse::<u64>().ok());
    match len {
        Some(len) if len > XML_MAX_BODY_SIZE as u64 => Err(s3s::s3_error!(
            MaxMessageLengthExceeded,
            "Your request was too big: {op} bodies are at most {XML_MAX_BODY_SIZE} bytes, this one is {len}"
        )),
        _ => Ok(()),
    }
}

pub struct S3Server {
    listener: garage_http::listener::Listener,
    service: CorsService,
}

/// Finds the bucket a request names, as s3s does: in the `Host` header
/// under `root_domain` (virtual-hosted style), else in the path.
#[derive(Clone)]
struct BucketOf {
    root_domain: Option<Arc<SingleDomain>>,
}

impl BucketOf {
    fn new(root_domain: Option<&str>) -> Result<Self, String> {
        let root_domain = match root_domain {
            None => None,
            Some(d) => {
                let d = d.trim_start_matches('.');
                Some(Arc::new(
                    SingleDomain::new(d).map_err(|e| format!("s3_api.root_domain {d:?}: {e}"))?,
                ))
            }
        };
        Ok(Self { root_domain })
    }

    fn bucket(&self, uri: &Uri, headers: &HeaderMap) -> Option<String> {
        self.path(uri, headers)?.get_bucket_name().map(String::from)
    }

    /// The bucket and whether the request is on the service, a bucket or
    /// an object (for span names).
    fn target(&self, uri: &Uri, headers: &HeaderMap) -> (Option<String>, &'static str) {
        match self.path(uri, headers) {
            Some(s3s::path::S3Path::Root) => (None, "service"),
            Some(s3s::path::S3Path::Bucket { bucket }) => (Some(bucket.into()), "bucket"),
            Some(s3s::path::S3Path::Object { bucket, .. }) => (Some(bucket.into()), "object"),
            None => (None, "request"),
        }
    }

    fn path(&self, uri: &Uri, headers: &HeaderMap) -> Option<s3s::path::S3Path> {
        let path = percent_encoding::percent_decode_str(uri.path())
            .decode_utf8()
            .ok()?;
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| uri.authority().map(|a| a.as_str()));
        let parsed = match (&self.root_domain, host) {
            (Some(d), Some(h))
                if h.parse::<SocketAddr>().is_err() && h.parse::<IpAddr>().is_err() =>
            {
                let vh = d.parse_host_header(h).ok()?;
                s3s::path::parse_virtual_hosted_style(vh.bucket(), &path)
            }
            _ => s3s::path::parse_path_style(&path),
        };
        parsed.ok()
    }
}

/// CORS preflights: every `OPTIONS` request, answered from the bucket's
/// CORS rules without authentication.
struct Preflight {
    api: Arc<Api>,
    bucket_of: BucketOf,
}

#[async_trait::async_trait]
impl S3Route for Preflight {
    fn is_match(&self, method: &Method, _: &Uri, _: &HeaderMap, _: &mut Extensions) -> bool {
        method == Method::OPTIONS
    }

    async fn check_access(&self, _: &mut S3Request<Body>) -> S3Result<()> {
        Ok(())
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let bucket = self
            .bucket_of
            .bucket(&req.uri, &req.headers)
            .ok_or(ApiError::CorsNotAllowed)?;
        let headers = self.api.preflight(&bucket, &req.headers).await?;
        let mut resp = S3Response::new(Body::empty());
        resp.status = Some(StatusCode::OK);
        resp.headers = headers;
        Ok(resp)
    }
}

/// The s3s service, with the `Access-Control-*` headers of the bucket's
/// matching CORS rule added to the response of a request with `Origin`
/// (the rules are read while the request is served, not before).
#[derive(Clone)]
pub struct CorsService {
    inner: S3Service,
    api: Arc<Api>,
    bucket_of: BucketOf,
    /// The connection's peer (set per connection; the `aws:SourceIp` of
    /// bucket policies).
    peer: Option<SocketAddr>,
    /// This node's server access log lines, until delivered (and the
    /// bucket facts it caches).
    access_logs: Arc<AccessLogs>,
}

impl hyper::service::Service<Request<Incoming>> for CorsService {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = BoxFuture<'static, Result<HttpResponse, HttpError>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let slot = OpSlot::default();
        req.extensions_mut().insert(slot.clone());
        if let Some(p) = self.peer {
            req.extensions_mut().insert(crate::request::Peer(p));
        }
        let conditions = crate::request::ConditionValues::of(req.headers(), req.uri());
        req.extensions_mut().insert(conditions);
        let method = req.method().clone();
        let request_id = garage_http::request_id::new_request_id();
        req.extensions_mut()
            .insert(crate::request::RequestId(request_id.clone()));
        let (bucket, kind) = self.bucket_of.target(req.uri(), req.headers());
        let span = telemetry::request_span(&method, kind, bucket.as_deref(), &request_id);
        let started = Instant::now();
        // What a server access log line needs of the request (see
        // `crate::logging`); kept only for requests naming a bucket.
        let logged = bucket.clone().map(|b| {
            (
                b,
                access_log_event(req.uri(), req.headers(), req.version(), self.peer),
            )
        });
        let fut = self.call_inner(req).instrument(span.clone());
        let (api, logs) = (self.api.clone(), self.access_logs.clone());
        Box::pin(async move {
            let mut res = fut.await;
            let status = match &mut res {
                Ok(resp) => {
                    if let Ok(v) = HeaderValue::from_str(&request_id) {
                        resp.headers_mut().insert("x-amz-request-id", v);
                    }
                    resp.status().as_u16()
                }
                Err(_) => 500,
            };
            let took = started.elapsed();
            telemetry::finish(&span, &slot.name(&method), status, took);
            if let Some((bucket, mut event)) = logged {
                event.request_id = request_id;
                event.method = method.to_string();
                event.total_ms = took.as_millis() as u64;
                if let Some(info) = slot.info() {
                    event.op = Some(info.name.clone());
                    event.requester = info.key_id.clone();
                    event.key = info.object.clone();
                }
                match &res {
                    Ok(resp) => finish_event(&mut event, resp, &method),
                    Err(_) => event.status = 500,
                }
                // A cached lookup (no await) unless the bucket's setting
                // is older than the cache's lifetime.
                logs.record(&api, &bucket, event).await;
            }
            res
        })
    }
}

/// The [`Event`] of a request, as far as its head tells.
fn access_log_event(
    uri: &Uri,
    headers: &HeaderMap,
    version: hyper::Version,
    peer: Option<SocketAddr>,
) -> Event {
    let get = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let presigned = uri
        .query()
        .is_some_and(|q| q.contains("X-Amz-Signature=") || q.contains("Signature="));
    let (signature, auth_type) = if headers.contains_key(hyper::header::AUTHORIZATION) {
        (Some("SigV4"), Some("AuthHeader"))
    } else if presigned {
        (Some("SigV4"), Some("QueryString"))
    } else {
        (None, None)
    };
    Event {
        time_ms: garage_util::time::now_msec(),
        remote_ip: peer.map(|p| p.ip()),
        uri: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| uri.path().to_string()),
        http_version: format!("{version:?}"),
        referrer: get("referer"),
        user_agent: get("user-agent"),
        signature,
        auth_type,
        host: get("host"),
        object_size: headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok()),
        ..Default::default()
    }
}

/// Fills in what the response tells: status, bytes sent, the object's
/// size (the whole object's, for a read), its version, the error code.
fn finish_event(event: &mut Event, resp: &HttpResponse, method: &Method) {
    let h = resp.headers();
    let num = |n: hyper::header::HeaderName| {
        h.get(n)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    event.status = resp.status().as_u16();
    // A HEAD answer's Content-Length is the object's; it sends no body.
    let sent = num(CONTENT_LENGTH);
    event.bytes_sent = sent.filter(|_| *method != Method::HEAD);
    event.version_id = h
        .get("x-amz-version-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    if *method == Method::GET || *method == Method::HEAD {
        let total = h
            .get(hyper::header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|r| r.rsplit('/').next())
            .and_then(|t| t.parse().ok());
        event.object_size = total.or(sent).filter(|_| event.status < 300);
    } else if *method != Method::PUT || event.status >= 300 {
        event.object_size = None;
    }
    if event.status >= 400 {
        event.error_code = resp.body().bytes().and_then(|b| error_code(&b));
    }
}

/// The `<Code>` of an S3 error document.
fn error_code(xml: &[u8]) -> Option<String> {
    let mut r = quick_xml::Reader::from_reader(xml);
    let mut in_code = false;
    let mut buf = Vec::new();
    for _ in 0..64 {
        match r.read_event_into(&mut buf).ok()? {
            quick_xml::events::Event::Start(e) => in_code = e.name().as_ref() == b"Code",
            quick_xml::events::Event::Text(t) if in_code => {
                return Some(String::from_utf8_lossy(&t).into_owned());
            }
            quick_xml::events::Event::Eof => return None,
            _ => (),
        }
        buf.clear();
    }
    None
}

impl CorsService {
    fn call_inner(
        &self,
        req: Request<Incoming>,
    ) -> BoxFuture<'static, Result<HttpResponse, HttpError>> {
        // An error answered before the request body was read (a refused
        // upload) closes the connection: the body's unread bytes must not
        // be taken for the next request on it.
        let has_body = req.headers().contains_key(TRANSFER_ENCODING)
            || req
                .headers()
                .get(CONTENT_LENGTH)
                .is_some_and(|l| l.as_bytes() != b"0");
        // `Expect: 100-continue` on an empty body: hyper answers without a
        // `100 Continue` (there is nothing to continue), and botocore
        // (boto3, aws-cli) then keeps that answer's status for the next
        // request on the connection, whose answer it cannot read: the
        // next upload waits for the client's read timeout (60 s) and is
        // sent again. Closing the connection gives the client a fresh one.
        let expects_continue = req
            .headers()
            .get(EXPECT)
            .is_some_and(|e| e.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        // The path is parsed once for both uses below.
        let path = self.bucket_of.path(req.uri(), req.headers());
        let root = matches!(path, Some(s3s::path::S3Path::Root));
        if crate::query::is_query_request(&req, root) {
            let api = self.api.clone();
            return Box::pin(async move {
                let mut resp = query::serve(api, req).await;
                resp.headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
                Ok(resp)
            });
        }
        let expected_owner = req
            .headers()
            .get("x-amz-expected-bucket-owner")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .zip(
                path.as_ref()
                    .and_then(|p| p.get_bucket_name().map(String::from)),
            );
        let cross_origin = self.cross_origin(&req);
        let global = crate::access::auth_scope::is_global(req.method(), path.as_ref(), req.uri());
        let fut = match crate::access::auth_scope::check_request(
            req.headers(),
            req.uri(),
            &self.api.regions,
            global,
        ) {
            Ok(()) if expected_owner.is_some() => {
                let (expected, bucket) = expected_owner.expect("checked");
                let this = self.clone();
                Box::pin(async move {
                    if this
                        .access_logs
                        .owner_differs(&this.api, &bucket, &expected)
                        .await
                    {
                        return ApiError::AccessDenied(
                            "the bucket's owner is not x-amz-expected-bucket-owner".into(),
                        )
                        .into_http_response();
                    }
                    this.forward(req).await
                })
            }
            Ok(()) => self.forward(req),
            Err(refusal) => {
                debug!("request refused before its signature check: {refusal}");
                Box::pin(std::future::ready(refusal.into_http_response()))
            }
        };
        let fut = match cross_origin {
            Some(c) => self.with_cors(c, fut),
            None => fut,
        };
        if !has_body && !expects_continue {
            return fut;
        }
        Box::pin(async move {
            let mut resp = fut.await?;
            let failed = resp.status().is_client_error() || resp.status().is_server_error();
            if failed || !has_body {
                resp.headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(resp)
        })
    }

    /// Hands the request to s3s; a POST body (PostObject's form) in
    /// pieces of at most 32 KiB (see [`crate::server::rechunk`]).
    fn forward(
        &self,
        req: Request<Incoming>,
    ) -> BoxFuture<'static, Result<HttpResponse, HttpError>> {
        if req.method() != Method::POST {
            return hyper::service::Service::call(&self.inner, req);
        }
        let fields = crate::access::step::FormFields::default();
        let mut req = req.map({
            let fields = fields.clone();
            |b| Body::http_body_unsync(crate::server::rechunk::Rechunk::with_form_fields(b, fields))
        });
        req.extensions_mut().insert(fields);
        let inner = self.inner.clone();
        Box::pin(async move { inner.call(req).await })
    }

    /// The `Origin` of a request other than a preflight, with the bucket
    /// it names: its response gets the bucket's matching CORS headers.
    fn cross_origin(&self, req: &Request<Incoming>) -> Option<(String, String, String)> {
        if req.method() == Method::OPTIONS {
            return None;
        }
        let origin = req.headers().get(ORIGIN)?.to_str().ok()?.to_string();
        let bucket = self.bucket_of.bucket(req.uri(), req.headers())?;
        Some((origin, bucket, req.method().to_string()))
    }

    /// Adds to the response of `resp` the `Access-Control-*` headers of the
    /// bucket's first CORS rule matching `origin` and `method`, whatever
    /// the response (errors, refused signatures and presigned requests
    /// included, as S3).
    fn with_cors(
        &self,
        (origin, bucket, method): (String, String, String),
        resp: BoxFuture<'static, Result<HttpResponse, HttpError>>,
    ) -> BoxFuture<'static, Result<HttpResponse, HttpError>> {
        let api = self.api.clone();
        Box::pin(async move {
            let (resp, rules) = tokio::join!(resp, api.bucket_cors_rules(&bucket));
            let mut resp = resp?;
            if let Ok(Some(rules)) = rules {
                if let Some(rule) = cors::find_matching_rule(&rules, &origin, &method, &[]) {
                    cors::add_response_headers(rule, &origin, resp.headers_mut());
                }
            }
            Ok(resp)
        })
    }
}

impl S3Server {
    /// Binds the listener (so that a taken port fails at startup):
    /// `addr` is `ip:port` or the path of a Unix socket.
    pub async fn bind(
        api: Arc<Api>,
        addr: &str,
        root_domain: Option<&str>,
    ) -> Result<Self, String> {
        let mut b = S3ServiceBuilder::new(GarageS3(api.clone()));
        b.set_auth(KeyAuth(api.clone()));
        b.set_access(RecordOp);
        if let Some(d) = root_domain {
            let d = d.trim_start_matches('.');
            let host =
                SingleDomain::new(d).map_err(|e| format!("s3_api.root_domain {d:?}: {e}"))?;
            b.set_host(host);
        }
        let mut config = s3s::config::S3Config::default();
        config.post_object_max_file_size = POST_OBJECT_MAX_SIZE;
        config.xml_max_body_size = XML_MAX_BODY_SIZE;
        config.form_max_field_size = FORM_MAX_FIELD_SIZE;
        config.form_max_fields_size = FORM_MAX_FIELDS_SIZE;
        config.form_max_parts = FORM_MAX_PARTS;
        b.set_config(Arc::new(
            crate::access::request_time::ClusterTimeConfig::new(config),
        ));
        let bucket_of = BucketOf::new(root_domain)?;
        b.set_route(Preflight {
            api: api.clone(),
            bucket_of: bucket_of.clone(),
        });
        let listener = garage_http::listener::Listener::bind(addr, "s3_api.api_bind_addr").await?;
        Ok(Self {
            listener,
            service: CorsService {
                inner: b.build(),
                api,
                bucket_of,
                peer: None,
                access_logs: Arc::new(AccessLogs::default()),
            },
        })
    }

    /// Where it listens: `http://ip:port`, or `unix:<path>`.
    pub fn url(&self) -> String {
        self.listener.url()
    }

    pub async fn run(self, must_exit: watch::Receiver<bool>) {
        let service = self.service;
        let delivery = tokio::spawn(
            service
                .access_logs
                .clone()
                .run(service.api.clone(), must_exit.clone()),
        );
        self.listener
            .serve(
                "S3",
                move |peer| CorsService {
                    peer,
                    ..service.clone()
                },
                must_exit,
            )
            .await;
        // The last lines are written once the listener has stopped.
        let _ = delivery.await;
    }
}
