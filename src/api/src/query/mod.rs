//! The AWS query protocol on the S3 endpoint: `POST /` with a form body
//! (`Action=…&…`), signed with SigV4 for another service than `s3`, and
//! answered in XML: the plumbing (signature, form, XML) of the
//! SNS-compatible topic API (service `sns`, `notify::topics`), the IAM
//! API (service `iam`, `iam_api`) and STS (service `sts`, `sts`). The server sends each call to the
//! service of its credential scope (`server::query`).

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use garage_model::iam::identity::Identity as IamIdentity;
use garage_model::key_table::Key;
use garage_model::policy::{Decision, Principal, Request as PolicyRequest, Resource, Values};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{HeaderMap, Method, Request, StatusCode};
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;
use s3s::{Body, HttpResponse};
use tracing::warn;

use crate::ctx::Api;

/// The largest form body taken (topic attributes and policy documents
/// are small).
const MAX_BODY: usize = 64 << 10;
/// How far a request's `x-amz-date` may be from this node's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// Whether `req` is a query API call: a form POSTed on the service root.
pub fn is_query_request(req: &Request<Incoming>, path_is_root: bool) -> bool {
    req.method() == Method::POST
        && path_is_root
        && req
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"))
}

/// A query API call, authenticated: its key and the key's IAM identity
/// (its session token checked), its form, its request id, and what its
/// identity's policies may test (its peer, its headers' values).
pub struct Call {
    pub key: Key,
    pub identity: Option<IamIdentity>,
    pub form: Vec<(String, String)>,
    pub request_id: String,
    pub source_ip: Option<std::net::IpAddr>,
    pub conditions: crate::request::ConditionValues,
}

impl Call {
    /// What the caller's identity policies say of `action` on ARN
    /// `resource`: nothing for a key of its own (not made by IAM).
    pub fn identity_decision(&self, action: &str, resource: &str, region: &str) -> Decision {
        let Some(id) = &self.identity else {
            return Decision::NotApplicable;
        };
        id.decision(&PolicyRequest {
            who: &Principal {
                key_id: Some(self.key.key_id.clone()),
                user: id.user.clone(),
                session: id.session.clone(),
            },
            action,
            resource: Resource::Arn(resource),
            values: Values {
                headers: Some(&self.conditions.0),
                source_ip: self.source_ip,
                region: Some(region),
                ..Values::default()
            },
        })
    }

    /// The first value of form field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A query API error: its code, HTTP status and message.
#[derive(Debug)]
pub struct QueryError {
    pub code: &'static str,
    pub status: StatusCode,
    pub message: String,
}

pub fn invalid(message: impl Into<String>) -> QueryError {
    QueryError {
        code: "InvalidParameter",
        status: StatusCode::BAD_REQUEST,
        message: message.into(),
    }
}

pub fn denied(message: impl Into<String>) -> QueryError {
    QueryError {
        code: "AuthorizationError",
        status: StatusCode::FORBIDDEN,
        message: message.into(),
    }
}

pub fn internal(e: impl std::fmt::Display) -> QueryError {
    QueryError {
        code: "InternalError",
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: e.to_string(),
    }
}

pub fn xml_response(status: StatusCode, body: String) -> HttpResponse {
    let mut resp = HttpResponse::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/xml"),
    );
    resp
}
pub async fn read_body(body: Incoming) -> Result<Bytes, QueryError> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(invalid(format!(
            "cannot read the form (at most {MAX_BODY} bytes): {e}"
        ))),
    }
}
/// Checks the request's SigV4 signature (for its credential scope's
/// service: `sns`, `iam` or `sts`): the signature is
/// computed again with the key's secret over the headers it signed.
pub async fn authenticate(
    api: &Api,
    method: &Method,
    uri: &hyper::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Key, QueryError> {
    let auth = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| denied("the query API needs a SigV4 Authorization header"))?;
    let a = parse_authorization(auth).ok_or_else(|| denied("malformed Authorization header"))?;
    if !matches!(a.service.as_str(), "sns" | "iam" | "sts") {
        return Err(denied(format!(
            "the credential scope's service is {:?}; this endpoint's query APIs are signed for sns, iam or sts",
            a.service
        )));
    }
    if !api.regions.accepts(&a.region, true) {
        return Err(denied(format!(
            "the credential scope's region is {:?}; this cluster's is {:?}",
            a.region, api.regions.region
        )));
    }
    let date = headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| denied("x-amz-date is missing"))?;
    let time = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", date)
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map(|z| SystemTime::from(z.timestamp()))
        .ok_or_else(|| denied(format!("x-amz-date {date:?} is not yyyymmddThhmmssZ")))?;
    let skew = match SystemTime::now().duration_since(time) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    if skew > MAX_SKEW {
        return Err(denied(
            "the request's time (x-amz-date) is more than 15 minutes from the server's",
        ));
    }
    let key = api
        .fetch_key(&a.key_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| denied(format!("no access key {}", a.key_id)))?;
    let secret = key
        .params()
        .map(|p| p.secret_key.clone())
        .ok_or_else(|| denied(format!("access key {} is deleted", a.key_id)))?;
    let signed: Vec<(String, String)> = a
        .signed_headers
        .iter()
        .filter(|h| h.as_str() != "x-amz-date")
        .map(|h| {
            let v = headers
                .get_all(h.as_str())
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect::<Vec<_>>()
                .join(",");
            (h.clone(), v)
        })
        .collect();
    let expected = compute_signature(
        &Signed {
            method,
            uri,
            headers: &signed,
            body,
        },
        &Signer {
            service: &a.service,
            region: &a.region,
            key_id: &key.key_id,
            secret: &secret,
            time,
        },
    )
    .ok_or_else(|| denied("cannot compute the request's signature"))?;
    let same = expected.len() == a.signature.len()
        && expected
            .bytes()
            .zip(a.signature.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0;
    if !same {
        warn!(key = %a.key_id, "query API request with a wrong signature");
        return Err(QueryError {
            code: "SignatureDoesNotMatch",
            status: StatusCode::FORBIDDEN,
            message:
                "The request signature we calculated does not match the signature you provided."
                    .into(),
        });
    }
    Ok(key)
}

pub struct Authorization {
    pub key_id: String,
    pub region: String,
    pub service: String,
    pub signed_headers: Vec<String>,
    pub signature: String,
}

pub fn parse_authorization(h: &str) -> Option<Authorization> {
    let rest = h.strip_prefix("AWS4-HMAC-SHA256")?.trim();
    let (mut cred, mut signed, mut sig) = (None, None, None);
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => cred = Some(v),
            "SignedHeaders" => signed = Some(v),
            "Signature" => sig = Some(v),
            _ => {}
        }
    }
    let mut c = cred?.split('/');
    let (key_id, _date, region, service) = (c.next()?, c.next()?, c.next()?, c.next()?);
    Some(Authorization {
        key_id: key_id.to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: signed?.split(';').map(str::to_string).collect(),
        signature: sig?.to_string(),
    })
}

/// What a request's signature covers: its method, path and query, the
/// headers it signed, and its body.
struct Signed<'a> {
    method: &'a Method,
    uri: &'a hyper::Uri,
    headers: &'a [(String, String)],
    body: &'a [u8],
}

/// Who signs, where and when.
struct Signer<'a> {
    service: &'a str,
    region: &'a str,
    key_id: &'a str,
    secret: &'a str,
    time: SystemTime,
}

/// The SigV4 signature of `r` by `s`.
fn compute_signature(r: &Signed<'_>, s: &Signer<'_>) -> Option<String> {
    let Signed {
        method,
        uri,
        headers,
        body,
    } = *r;
    let Signer {
        service,
        region,
        key_id,
        secret,
        time,
    } = *s;
    let identity: Identity = Credentials::new(key_id, secret, None, None, "garage-query").into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.excluded_headers = Some(Vec::new());
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .ok()?
        .into();
    let host = headers
        .iter()
        .find(|(k, _)| k == "host")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "localhost".into());
    let url = format!(
        "http://{host}{}",
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
    );
    let signable = SignableRequest::new(
        method.as_str(),
        &url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .ok()?;
    let (_, signature) = sign(signable, &params).ok()?.into_parts();
    Some(signature)
}
pub type W = Writer<Vec<u8>>;

pub fn xml(f: impl FnOnce(&mut W)) -> String {
    let mut w = Writer::new(Vec::new());
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    f(&mut w);
    String::from_utf8(w.into_inner()).unwrap_or_default()
}

pub fn elem(w: &mut W, name: &str, ns: Option<&str>, f: impl FnOnce(&mut W)) {
    let mut e = w.create_element(name);
    if let Some(ns) = ns {
        e = e.with_attribute(("xmlns", ns));
    }
    let _ = e.write_inner_content(|w| {
        f(w);
        Ok::<_, std::io::Error>(())
    });
}

pub fn text(w: &mut W, name: &str, value: &str) {
    let _ = w
        .create_element(name)
        .write_text_content(BytesText::new(value));
}

pub fn xml_result(xmlns: &str, action: &str, request_id: &str, f: impl FnOnce(&mut W)) -> String {
    xml(|w| {
        elem(w, &format!("{action}Response"), Some(xmlns), |w| {
            elem(w, &format!("{action}Result"), None, f);
            elem(w, "ResponseMetadata", None, |w| {
                text(w, "RequestId", request_id)
            });
        });
    })
}

pub fn xml_empty(xmlns: &str, action: &str, request_id: &str) -> String {
    xml(|w| {
        elem(w, &format!("{action}Response"), Some(xmlns), |w| {
            elem(w, "ResponseMetadata", None, |w| {
                text(w, "RequestId", request_id)
            });
        });
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_headers_are_read() {
        let a = parse_authorization(
            "AWS4-HMAC-SHA256 Credential=GK1/20261130/garage/sns/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=abcd",
        )
        .unwrap();
        assert_eq!(a.key_id, "GK1");
        assert_eq!(a.region, "garage");
        assert_eq!(a.service, "sns");
        assert_eq!(a.signed_headers, ["content-type", "host", "x-amz-date"]);
        assert_eq!(a.signature, "abcd");
        assert!(parse_authorization("AWS abc:def").is_none());
    }

    #[test]
    fn a_signature_computed_twice_is_the_same_and_depends_on_the_body() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let h = vec![
            ("host".to_string(), "127.0.0.1:3900".to_string()),
            (
                "content-type".to_string(),
                "application/x-www-form-urlencoded".to_string(),
            ),
        ];
        let uri: hyper::Uri = "/".parse().unwrap();
        let signer = Signer {
            service: "sns",
            region: "garage",
            key_id: "GK1",
            secret: "s",
            time: t,
        };
        let sign = |body: &[u8]| {
            let r = Signed {
                method: &Method::POST,
                uri: &uri,
                headers: &h,
                body,
            };
            compute_signature(&r, &signer).unwrap()
        };
        let (s1, s2, s3) = (
            sign(b"Action=ListTopics"),
            sign(b"Action=ListTopics"),
            sign(b"Action=DeleteTopic"),
        );
        assert_eq!(s1, s2);
        assert_ne!(s1, s3);
        assert_eq!(s1.len(), 64);
    }
}
