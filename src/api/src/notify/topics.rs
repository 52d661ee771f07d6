//! The SNS-compatible topic API on the S3 endpoint, as Ceph RGW serves it:
//! `POST /` with a form body (`Action=CreateTopic&Name=…`), signed with
//! SigV4 for the `sns` service, so that `aws sns create-topic
//! --endpoint-url …` works. Actions: CreateTopic (with `push-endpoint`
//! and the other attributes), ListTopics, GetTopicAttributes,
//! SetTopicAttributes, DeleteTopic. Any valid access key may list topics
//! and make new ones; only a topic's owner changes or deletes it. The
//! endpoint's password is never given back (`push-endpoint` is shown
//! with `****`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use garage_model::key_table::Key;
use garage_model::notify::endpoint::{redact_url, Endpoint};
use garage_model::notify::topic_table::{
    check_topic_name, topic_arn, topic_of_arn, Topic, TopicConfig, TopicFilter,
};
use garage_table::EmptyKey;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{HeaderMap, Method, Request, StatusCode};
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;
use s3s::{Body, HttpResponse};
use tracing::{info, warn};

use crate::ctx::Api;

/// The largest form body taken (topic attributes are small).
const MAX_BODY: usize = 64 << 10;
/// How far a request's `x-amz-date` may be from this node's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);
const XMLNS: &str = "http://sns.amazonaws.com/doc/2010-03-31/";

/// Whether `req` is a topic API call: a form POSTed on the service root.
pub fn is_topic_request(req: &Request<Incoming>, path_is_root: bool) -> bool {
    req.method() == Method::POST
        && path_is_root
        && req
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"))
}

/// An SNS error: its code, HTTP status and message.
#[derive(Debug)]
struct SnsError {
    code: &'static str,
    status: StatusCode,
    message: String,
}

fn invalid(message: impl Into<String>) -> SnsError {
    SnsError {
        code: "InvalidParameter",
        status: StatusCode::BAD_REQUEST,
        message: message.into(),
    }
}

fn denied(message: impl Into<String>) -> SnsError {
    SnsError {
        code: "AuthorizationError",
        status: StatusCode::FORBIDDEN,
        message: message.into(),
    }
}

fn not_found(name: &str) -> SnsError {
    SnsError {
        code: "NotFound",
        status: StatusCode::NOT_FOUND,
        message: format!("Topic does not exist: {name}"),
    }
}

fn internal(e: impl std::fmt::Display) -> SnsError {
    SnsError {
        code: "InternalError",
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: e.to_string(),
    }
}

/// Serves one topic API call.
pub async fn serve(api: Arc<Api>, req: Request<Incoming>) -> HttpResponse {
    let request_id = req
        .extensions()
        .get::<crate::request::RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    match serve_inner(&api, req, &request_id).await {
        Ok(body) => xml_response(StatusCode::OK, body),
        Err(e) => {
            let body = xml(|w| {
                elem(w, "ErrorResponse", Some(XMLNS), |w| {
                    elem(w, "Error", None, |w| {
                        text(
                            w,
                            "Type",
                            if e.status.is_server_error() {
                                "Receiver"
                            } else {
                                "Sender"
                            },
                        );
                        text(w, "Code", e.code);
                        text(w, "Message", &e.message);
                    });
                    text(w, "RequestId", &request_id);
                });
            });
            xml_response(e.status, body)
        }
    }
}

fn xml_response(status: StatusCode, body: String) -> HttpResponse {
    let mut resp = HttpResponse::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/xml"),
    );
    resp
}

async fn serve_inner(
    api: &Arc<Api>,
    req: Request<Incoming>,
    request_id: &str,
) -> Result<String, SnsError> {
    let (parts, body) = req.into_parts();
    let body = read_body(body).await?;
    let key = authenticate(api, &parts.method, &parts.uri, &parts.headers, &body).await?;
    let form: Vec<(String, String)> = crate::request::query_pairs(
        std::str::from_utf8(&body).map_err(|_| invalid("the form is not UTF-8"))?,
    )
    .collect();
    let get = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let action = get("Action").ok_or_else(|| invalid("the form names no Action"))?;
    let region = api.garage.writer.notifier.region().to_string();
    let result = match action {
        "CreateTopic" => {
            let name = get("Name").ok_or_else(|| invalid("CreateTopic needs Name"))?;
            create(api, &key, name, attributes(&form)?).await?;
            xml_result(action, request_id, |w| text(w, "TopicArn", &topic_arn(&region, name)))
        }
        "ListTopics" => {
            let names = list(api).await?;
            xml_result(action, request_id, |w| {
                elem(w, "Topics", None, |w| {
                    for n in &names {
                        elem(w, "member", None, |w| text(w, "TopicArn", &topic_arn(&region, n)));
                    }
                });
            })
        }
        "GetTopicAttributes" => {
            let name = arn_param(get("TopicArn"))?;
            let (t, c) = live(api, name).await?;
            let mut attrs: BTreeMap<String, String> = c.attributes.clone();
            attrs.insert("push-endpoint".into(), redact_url(&c.endpoint));
            attrs.insert("TopicArn".into(), topic_arn(&region, &t.name));
            attrs.insert("Owner".into(), c.owner.clone());
            attrs.insert("Name".into(), t.name.clone());
            let backlog = api.garage.writer.notifier.outbox.backlog();
            attrs.insert(
                "garage:QueuedEventsOnThisNode".into(),
                backlog.get(&t.name).map_or(0, |b| b.events).to_string(),
            );
            xml_result(action, request_id, |w| {
                elem(w, "Attributes", None, |w| {
                    for (k, v) in &attrs {
                        elem(w, "entry", None, |w| {
                            text(w, "key", k);
                            text(w, "value", v);
                        });
                    }
                });
            })
        }
        "SetTopicAttributes" => {
            let name = arn_param(get("TopicArn"))?;
            let attr = get("AttributeName").ok_or_else(|| invalid("SetTopicAttributes needs AttributeName"))?;
            let value = get("AttributeValue").unwrap_or("");
            set_attribute(api, &key, name, attr, value).await?;
            xml_empty(action, request_id)
        }
        "DeleteTopic" => {
            let name = arn_param(get("TopicArn"))?;
            delete(api, &key, name).await?;
            xml_empty(action, request_id)
        }
        other => {
            return Err(SnsError {
                code: "InvalidAction",
                status: StatusCode::BAD_REQUEST,
                message: format!(
                    "action {other:?} is not served (served: CreateTopic, ListTopics, GetTopicAttributes, SetTopicAttributes, DeleteTopic)"
                ),
            })
        }
    };
    Ok(result)
}

async fn read_body(body: Incoming) -> Result<Bytes, SnsError> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(invalid(format!(
            "cannot read the form (at most {MAX_BODY} bytes): {e}"
        ))),
    }
}

fn arn_param(arn: Option<&str>) -> Result<&str, SnsError> {
    let arn = arn.ok_or_else(|| invalid("TopicArn is missing"))?;
    topic_of_arn(arn).ok_or_else(|| invalid(format!("{arn:?} is not a topic's ARN")))
}

/// The `Attributes.entry.N.key` / `.value` pairs of a form.
fn attributes(form: &[(String, String)]) -> Result<BTreeMap<String, String>, SnsError> {
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in form {
        if let Some(rest) = k.strip_prefix("Attributes.entry.") {
            if let Some(n) = rest.strip_suffix(".key") {
                keys.insert(n.to_string(), v.clone());
            } else if let Some(n) = rest.strip_suffix(".value") {
                values.insert(n.to_string(), v.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    for (n, k) in keys {
        let v = values
            .remove(&n)
            .ok_or_else(|| invalid(format!("attribute {k:?} has no value")))?;
        out.insert(k, v);
    }
    Ok(out)
}

async fn create(
    api: &Api,
    key: &Key,
    name: &str,
    mut attrs: BTreeMap<String, String>,
) -> Result<(), SnsError> {
    check_topic_name(name).map_err(invalid)?;
    api.check_notifications_gate().map_err(|e| SnsError {
        code: "InvalidParameter",
        status: StatusCode::BAD_REQUEST,
        message: e.to_string(),
    })?;
    let endpoint = attrs.remove("push-endpoint").ok_or_else(|| {
        invalid("CreateTopic needs the attribute push-endpoint (the URL events are sent to)")
    })?;
    let parsed = Endpoint::parse(&endpoint, &attrs).map_err(invalid)?;
    let existing = api
        .garage
        .topic_table
        .get(&EmptyKey, &name.to_string())
        .await
        .map_err(internal)?;
    if let Some(c) = existing.as_ref().and_then(|t| t.live()) {
        if c.owner != key.key_id {
            return Err(denied(format!(
                "topic {name} belongs to another access key"
            )));
        }
    }
    let config = TopicConfig {
        owner: key.key_id.clone(),
        endpoint,
        attributes: attrs,
    };
    let t = match existing {
        Some(mut t) => {
            t.config.update(Some(config));
            t
        }
        None => Topic::new(name.to_string(), config, garage_util::time::now_msec()),
    };
    api.garage.topic_table.insert(&t).await.map_err(internal)?;
    info!(
        topic = name,
        kind = parsed.kind(),
        owner = %key.key_id,
        "notification topic created"
    );
    Ok(())
}

async fn list(api: &Api) -> Result<Vec<String>, SnsError> {
    let all = api
        .garage
        .topic_table
        .get_range(&EmptyKey, None, Some(TopicFilter::Live), 10_000, false)
        .await
        .map_err(internal)?;
    Ok(all.into_iter().map(|t| t.name).collect())
}

async fn live(api: &Api, name: &str) -> Result<(Topic, TopicConfig), SnsError> {
    let t = api
        .garage
        .topic_table
        .get(&EmptyKey, &name.to_string())
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(name))?;
    let c = t.live().cloned().ok_or_else(|| not_found(name))?;
    Ok((t, c))
}

fn check_owner(key: &Key, c: &TopicConfig, name: &str) -> Result<(), SnsError> {
    match c.owner == key.key_id {
        true => Ok(()),
        false => Err(denied(format!(
            "topic {name} belongs to another access key"
        ))),
    }
}

async fn set_attribute(
    api: &Api,
    key: &Key,
    name: &str,
    attr: &str,
    value: &str,
) -> Result<(), SnsError> {
    let (mut t, mut c) = live(api, name).await?;
    check_owner(key, &c, name)?;
    match attr {
        "push-endpoint" => c.endpoint = value.to_string(),
        _ => {
            c.attributes.insert(attr.to_string(), value.to_string());
        }
    }
    Endpoint::parse(&c.endpoint, &c.attributes).map_err(invalid)?;
    t.config.update(Some(c));
    api.garage.topic_table.insert(&t).await.map_err(internal)
}

async fn delete(api: &Api, key: &Key, name: &str) -> Result<(), SnsError> {
    let (mut t, c) = live(api, name).await?;
    check_owner(key, &c, name)?;
    t.config.update(None);
    api.garage.topic_table.insert(&t).await.map_err(internal)?;
    info!(topic = name, "notification topic deleted");
    Ok(())
}

/// Checks the request's SigV4 signature (service `sns`): the signature is
/// computed again with the key's secret over the headers it signed.
async fn authenticate(
    api: &Api,
    method: &Method,
    uri: &hyper::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Key, SnsError> {
    let auth = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| denied("the topic API needs a SigV4 Authorization header"))?;
    let a = parse_authorization(auth).ok_or_else(|| denied("malformed Authorization header"))?;
    if a.service != "sns" {
        return Err(denied(format!(
            "the credential scope's service is {:?}; the topic API is signed for sns",
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
        warn!(key = %a.key_id, "topic API request with a wrong signature");
        return Err(SnsError {
            code: "SignatureDoesNotMatch",
            status: StatusCode::FORBIDDEN,
            message:
                "The request signature we calculated does not match the signature you provided."
                    .into(),
        });
    }
    Ok(key)
}

struct Authorization {
    key_id: String,
    region: String,
    service: String,
    signed_headers: Vec<String>,
    signature: String,
}

fn parse_authorization(h: &str) -> Option<Authorization> {
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
    region: &'a str,
    key_id: &'a str,
    secret: &'a str,
    time: SystemTime,
}

/// The SigV4 signature (service `sns`) of `r` by `s`.
fn compute_signature(r: &Signed<'_>, s: &Signer<'_>) -> Option<String> {
    let Signed {
        method,
        uri,
        headers,
        body,
    } = *r;
    let Signer {
        region,
        key_id,
        secret,
        time,
    } = *s;
    let identity: Identity = Credentials::new(key_id, secret, None, None, "garage-sns").into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.excluded_headers = Some(Vec::new());
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sns")
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

type W = Writer<Vec<u8>>;

fn xml(f: impl FnOnce(&mut W)) -> String {
    let mut w = Writer::new(Vec::new());
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    f(&mut w);
    String::from_utf8(w.into_inner()).unwrap_or_default()
}

fn elem(w: &mut W, name: &str, ns: Option<&str>, f: impl FnOnce(&mut W)) {
    let mut e = w.create_element(name);
    if let Some(ns) = ns {
        e = e.with_attribute(("xmlns", ns));
    }
    let _ = e.write_inner_content(|w| {
        f(w);
        Ok::<_, std::io::Error>(())
    });
}

fn text(w: &mut W, name: &str, value: &str) {
    let _ = w
        .create_element(name)
        .write_text_content(BytesText::new(value));
}

fn xml_result(action: &str, request_id: &str, f: impl FnOnce(&mut W)) -> String {
    xml(|w| {
        elem(w, &format!("{action}Response"), Some(XMLNS), |w| {
            elem(w, &format!("{action}Result"), None, f);
            elem(w, "ResponseMetadata", None, |w| {
                text(w, "RequestId", request_id)
            });
        });
    })
}

fn xml_empty(action: &str, request_id: &str) -> String {
    xml(|w| {
        elem(w, &format!("{action}Response"), Some(XMLNS), |w| {
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

    #[test]
    fn attributes_pair_keys_and_values() {
        let form = vec![
            (
                "Attributes.entry.1.key".to_string(),
                "push-endpoint".to_string(),
            ),
            (
                "Attributes.entry.1.value".to_string(),
                "http://h/".to_string(),
            ),
            (
                "Attributes.entry.2.key".to_string(),
                "OpaqueData".to_string(),
            ),
            ("Attributes.entry.2.value".to_string(), "x".to_string()),
        ];
        let a = attributes(&form).unwrap();
        assert_eq!(a["push-endpoint"], "http://h/");
        assert_eq!(a["OpaqueData"], "x");
        let bad = vec![("Attributes.entry.1.key".to_string(), "k".to_string())];
        assert!(attributes(&bad).is_err());
    }
}
