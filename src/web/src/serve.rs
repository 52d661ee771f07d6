//! One website request: the bucket from the `Host`, then the
//! configuration's rules (redirect-all, routing rules, index document,
//! the redirect adding a directory's slash, the error document), the
//! object read with its conditions and range, and CORS.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use garage_api::meta;
use garage_api::objects::read::{check_version, Conditions, Current};
use garage_api::website::cors;
use garage_api::{error::ApiError, Api};
use garage_model::bucket_table::{check_bucket_name, CorsRule, WebsiteConfig};
use garage_table::EmptyKey;
use garage_util::data::Uuid;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, StatusCode, Uri};
use s3s::dto::{ETagCondition, Range, Timestamp, TimestampFormat};
use s3s::Body;

use crate::error::{error_page, WebError};
use crate::host::{bucket_name, host_name};
use crate::routing::{self, Redirection};

pub type Response = hyper::Response<Body>;

/// The index document of a configuration that does not name one (only a
/// redirect-all configuration lacks one, and it never reaches the lookup).
const DEFAULT_INDEX: &str = "index.html";

/// The website endpoint's request handler.
pub struct Web {
    api: Arc<Api>,
    root_domain: String,
}

/// The bucket a request is for, once found with website access.
struct Site {
    id: Uuid,
    host: String,
    config: WebsiteConfig,
    cors: Vec<CorsRule>,
}

/// What a request asks, as the handler needs it.
pub struct Ask<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
}

impl Web {
    pub fn new(api: Arc<Api>, root_domain: &str) -> Self {
        Self {
            api,
            root_domain: root_domain.to_string(),
        }
    }

    /// Answers a request; every error becomes a response (an error page,
    /// or the bucket's error document).
    pub async fn handle(&self, ask: &Ask<'_>) -> Handled {
        let head = ask.method == Method::HEAD;
        let site = match self.site(ask).await {
            Ok(s) => s,
            Err(e) => return Handled::error(&e, head, false),
        };
        let answer = match *ask.method {
            Method::OPTIONS => preflight(&site, ask.headers),
            Method::GET | Method::HEAD => self.get(&site, ask).await,
            ref m => Err(WebError::MethodNotAllowed(m.to_string())),
        };
        let mut handled = match answer {
            Ok(response) => Handled {
                response,
                site_found: true,
                server_error: None,
            },
            Err(e) => Handled::error(&e, head, true),
        };
        if ask.method != Method::OPTIONS {
            add_cors(&site, ask, handled.response.headers_mut());
        }
        handled
    }

    /// The bucket under the request's host name, if it has website access.
    async fn site(&self, ask: &Ask<'_>) -> Result<Site, WebError> {
        let raw = ask
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| ask.uri.authority().map(|a| a.as_str()))
            .ok_or(WebError::NoHost)?;
        let host = host_name(raw).ok_or(WebError::NoHost)?;
        let name = bucket_name(&host, &self.root_domain);
        let no_site = || WebError::NoSuchWebsite(host.clone());
        // Aliases are valid bucket names: anything else (an IP address, a
        // long made-up name) has no bucket, without a lookup.
        if check_bucket_name(&name).is_err() {
            return Err(no_site());
        }
        // Both lookups read this node's copies (fully replicated tables).
        let id = self
            .api
            .metadata
            .global_alias_target(&name)
            .await?
            .ok_or_else(no_site)?;
        let bucket = self
            .api
            .metadata
            .buckets
            .get(&EmptyKey, &id)
            .await?
            .ok_or_else(no_site)?;
        let params = bucket.params().ok_or_else(no_site)?;
        let config = params.website().cloned().ok_or_else(no_site)?;
        Ok(Site {
            id,
            host: raw.to_string(),
            config,
            cors: params.cors_config.get().clone().unwrap_or_default(),
        })
    }

    async fn get(&self, site: &Site, ask: &Ask<'_>) -> Result<Response, WebError> {
        let head = ask.method == Method::HEAD;
        let path_and_query = ask.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        if let Some(all) = &site.config.redirect_all {
            return Ok(redirect_response(&routing::redirect_all(
                all,
                path_and_query,
            )));
        }
        let key = routing::path_key(ask.uri.path()).ok_or(WebError::BadPath)?;
        let rules = &site.config.routing_rules;
        if let Some(rule) = routing::rule_before_lookup(rules, &key) {
            return Ok(redirect_response(&routing::redirect(
                rule, &key, &site.host,
            )));
        }
        let index = site
            .config
            .index_document
            .as_deref()
            .unwrap_or(DEFAULT_INDEX);
        let object = routing::object_key(&key, index);

        let cond = RequestConditions::of(ask.headers);
        let lookup = match head {
            true => self.api.current(site.id, &object, None).await,
            false => self.api.current_for_get(site.id, &object, None).await,
        };
        let err = match lookup {
            Ok(cur) => match check_version(&self.api.kms, &cur, cond.as_conditions(), None).await {
                Ok(sse) => {
                    let range = ask
                        .headers
                        .get(header::RANGE)
                        .and_then(|r| r.to_str().ok())
                        .and_then(|r| Range::parse(r).ok())
                        .filter(|_| if_range_holds(ask.headers, &cur));
                    return self.object_response(&cur, sse, range, StatusCode::OK, head);
                }
                Err(ApiError::NotModified) => return Ok(not_modified(&cur)),
                Err(e) => WebError::Api(e),
            },
            Err(e) => WebError::Api(e),
        };

        let status = err.status();
        if status == StatusCode::NOT_FOUND && !routing::is_directory(&key) {
            // A directory named without its final slash: send the browser
            // to the slashed path, so that relative links in its index work.
            let dir_index = format!("{key}/{index}");
            if self.api.current(site.id, &dir_index, None).await.is_ok() {
                let mut location = routing::path_of(&format!("{key}/"));
                if let Some(q) = ask.uri.query() {
                    location = format!("{location}?{q}");
                }
                return Ok(redirect_response(&Redirection {
                    status: 302,
                    location,
                }));
            }
        }
        if status.is_client_error() {
            if let Some(rule) = routing::rule_after_error(rules, &key, status.as_u16()) {
                return Ok(redirect_response(&routing::redirect(
                    rule, &key, &site.host,
                )));
            }
        }
        if status.is_client_error() {
            if let Some(doc) = &site.config.error_document {
                // The bucket's own error page, for every 4xx as S3 does;
                // when it is missing or cannot be read, the built-in one.
                if let Ok(cur) = self.api.current(site.id, doc, None).await {
                    if let Ok(sse) =
                        check_version(&self.api.kms, &cur, Conditions::default(), None).await
                    {
                        return self.object_response(&cur, sse, None, status, head);
                    }
                }
            }
        }
        Err(err)
    }

    /// An object (or the part of it `range` asks) with its headers.
    fn object_response(
        &self,
        cur: &Current,
        sse: Option<garage_api::encryption::sse::SseKey>,
        range: Option<Range>,
        status: StatusCode,
        head: bool,
    ) -> Result<Response, WebError> {
        let size = cur.meta.size;
        let mut status = status;
        let mut builder = hyper::Response::builder();
        let headers = builder.headers_mut().expect("fresh builder");
        object_headers(cur, headers);
        let body_range = match range {
            Some(r) if status == StatusCode::OK => match r.check(size) {
                Ok(r) => {
                    status = StatusCode::PARTIAL_CONTENT;
                    set(
                        headers,
                        header::CONTENT_RANGE,
                        &format!("bytes {}-{}/{size}", r.start, r.end - 1),
                    );
                    r
                }
                Err(_) => {
                    let mut resp = error_response(&WebError::Api(ApiError::InvalidRange), head);
                    set(
                        resp.headers_mut(),
                        header::CONTENT_RANGE,
                        &format!("bytes */{size}"),
                    );
                    return Ok(resp);
                }
            },
            _ => 0..size,
        };
        set(
            headers,
            header::CONTENT_LENGTH,
            &(body_range.end - body_range.start).to_string(),
        );
        let body = if head || body_range.is_empty() {
            Body::empty()
        } else {
            Body::from(self.api.content(cur, body_range, sse)?)
        };
        builder
            .status(status)
            .body(body)
            .map_err(|e| WebError::Api(ApiError::Internal(format!("response: {e}"))))
    }
}

/// Whether a `Range` applies under the request's `If-Range` (RFC 9110
/// 13.1.5): always without one; with an ETag, if it is the object's
/// (strong comparison: a weak one never matches); with a date, if it is
/// the object's Last-Modified. Otherwise the whole object is sent.
fn if_range_holds(h: &HeaderMap, cur: &Current) -> bool {
    let Some(v) = h.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let v = v.trim();
    if v.starts_with('"') || v.starts_with("W/") {
        return v == format!("\"{}\"", cur.meta.etag);
    }
    match httpdate::parse_http_date(v) {
        Ok(t) => t
            .duration_since(UNIX_EPOCH)
            .is_ok_and(|d| d.as_secs() == cur.timestamp / 1000),
        Err(_) => false,
    }
}

/// The conditional headers of a request, parsed; an unparsable one is
/// ignored, as RFC 9110 says.
struct RequestConditions {
    if_match: Option<ETagCondition>,
    if_none_match: Option<ETagCondition>,
    if_modified_since: Option<Timestamp>,
    if_unmodified_since: Option<Timestamp>,
}

impl RequestConditions {
    fn of(h: &HeaderMap) -> Self {
        let etag = |n: HeaderName| {
            h.get(n)
                .and_then(|v| ETagCondition::parse_http_header(v.as_bytes()).ok())
        };
        let date = |n: HeaderName| {
            h.get(n)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| Timestamp::parse(TimestampFormat::HttpDate, v).ok())
        };
        Self {
            if_match: etag(header::IF_MATCH),
            if_none_match: etag(header::IF_NONE_MATCH),
            if_modified_since: date(header::IF_MODIFIED_SINCE),
            if_unmodified_since: date(header::IF_UNMODIFIED_SINCE),
        }
    }

    fn as_conditions(&self) -> Conditions<'_> {
        Conditions {
            if_match: self.if_match.as_ref(),
            if_none_match: self.if_none_match.as_ref(),
            if_modified_since: self.if_modified_since.as_ref(),
            if_unmodified_since: self.if_unmodified_since.as_ref(),
        }
    }
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

fn http_date(ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(ms))
}

/// The headers describing an object: its type and the other standard
/// headers stored with it, its user metadata, ETag and date.
fn object_headers(cur: &Current, headers: &mut HeaderMap) {
    let stored = meta::Stored(&cur.meta.headers);
    set(
        headers,
        header::CONTENT_TYPE,
        &stored
            .get(meta::CONTENT_TYPE)
            .unwrap_or_else(|| "binary/octet-stream".into()),
    );
    for (name, h) in [
        (meta::CACHE_CONTROL, header::CACHE_CONTROL),
        (meta::CONTENT_DISPOSITION, header::CONTENT_DISPOSITION),
        (meta::CONTENT_ENCODING, header::CONTENT_ENCODING),
        (meta::CONTENT_LANGUAGE, header::CONTENT_LANGUAGE),
        (meta::EXPIRES, header::EXPIRES),
    ] {
        if let Some(v) = stored.get(name) {
            set(headers, h, &v);
        }
    }
    for (k, v) in cur.meta.headers.iter() {
        if k.starts_with(meta::USER_PREFIX) {
            if let (Ok(n), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::from_str(v)) {
                headers.insert(n, v);
            }
        }
    }
    set(headers, header::ETAG, &format!("\"{}\"", cur.meta.etag));
    set(headers, header::LAST_MODIFIED, &http_date(cur.timestamp));
    set(headers, header::ACCEPT_RANGES, "bytes");
}

fn not_modified(cur: &Current) -> Response {
    let mut resp = hyper::Response::new(Body::empty());
    *resp.status_mut() = StatusCode::NOT_MODIFIED;
    let h = resp.headers_mut();
    set(h, header::ETAG, &format!("\"{}\"", cur.meta.etag));
    set(h, header::LAST_MODIFIED, &http_date(cur.timestamp));
    resp
}

fn redirect_response(r: &Redirection) -> Response {
    let mut resp = hyper::Response::new(Body::empty());
    *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::MOVED_PERMANENTLY);
    set(resp.headers_mut(), header::LOCATION, &r.location);
    resp
}

/// The built-in page of an error (no body for `HEAD`).
/// A request's answer, and what the listener logs and counts about it.
pub struct Handled {
    pub response: Response,
    /// Whether the host name matched a bucket with website access.
    pub site_found: bool,
    /// The cause of a server error (5xx), for the log.
    pub server_error: Option<String>,
}

impl Handled {
    fn error(e: &WebError, head: bool, site_found: bool) -> Self {
        Self {
            response: error_response(e, head),
            site_found,
            server_error: e.status().is_server_error().then(|| e.to_string()),
        }
    }
}

pub fn error_response(e: &WebError, head: bool) -> Response {
    let status = e.status();
    if status == StatusCode::NOT_MODIFIED {
        let mut resp = hyper::Response::new(Body::empty());
        *resp.status_mut() = status;
        return resp;
    }
    let page = error_page(status, &e.public_message());
    let len = page.len();
    let mut resp = hyper::Response::new(if head {
        Body::empty()
    } else {
        Body::from(page)
    });
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    set(h, header::CONTENT_TYPE, "text/html; charset=utf-8");
    set(h, header::CONTENT_LENGTH, &len.to_string());
    if status == StatusCode::METHOD_NOT_ALLOWED {
        set(h, header::ALLOW, "GET, HEAD, OPTIONS");
    }
    resp
}

/// A CORS preflight, answered from the bucket's rules.
fn preflight(site: &Site, req: &HeaderMap) -> Result<Response, WebError> {
    let get = |n: HeaderName| req.get(n).and_then(|v| v.to_str().ok());
    let origin = get(header::ORIGIN)
        .ok_or_else(|| WebError::BadRequest("A CORS preflight needs an Origin header".into()))?;
    let method = get(header::ACCESS_CONTROL_REQUEST_METHOD).ok_or_else(|| {
        WebError::BadRequest(
            "A CORS preflight needs an Access-Control-Request-Method header".into(),
        )
    })?;
    let wanted = get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .map(cors::parse_request_headers)
        .unwrap_or_default();
    let rule = cors::find_matching_rule(&site.cors, origin, method, &wanted)
        .ok_or(WebError::CorsNotAllowed)?;
    let mut resp = hyper::Response::new(Body::empty());
    *resp.headers_mut() = cors::preflight_headers(rule, origin, &wanted);
    Ok(resp)
}

/// The `Access-Control-*` headers of the rule a request with `Origin`
/// matches, on its answer (whatever its status).
fn add_cors(site: &Site, ask: &Ask<'_>, headers: &mut HeaderMap) {
    let Some(origin) = ask
        .headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
    else {
        return;
    };
    if let Some(rule) = cors::find_matching_rule(&site.cors, origin, ask.method.as_str(), &[]) {
        cors::add_response_headers(rule, origin, headers);
    }
}
