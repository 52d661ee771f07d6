//! Sending one version to one destination: a PutObject of its data and
//! metadata, or a DeleteObject for a delete marker, signed (SigV4) with
//! the remote's key. The version is named by the replica headers
//! ([`crate::objects::replica`]): a garage destination writes it under the same id
//! and stamp, marked `REPLICA`; another S3 service ignores them and makes
//! a version of its own.
//!
//! Carried: the body (opened, for SSE-S3 and SSE-KMS objects: the
//! destination encrypts by its own rules), Content-Type and the other
//! standard headers, user metadata, the current tags, the object lock, a
//! full-object checksum, the storage class the rule names, and the ETag
//! (kept by a garage destination, so a multipart object keeps its
//! `…-N` ETag). Not carried: SSE-C objects (the key is the client's:
//! refused, the version is marked FAILED), ACLs.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_smithy_runtime_api::client::identity::Identity;
use garage_model::history_table::{HistoryEntry, HistoryKey};
use garage_model::object_table::{ObjectVersionData, ObjectVersionState, VersionId};
use garage_model::replication::remote_table::RemoteConfig;
use garage_model::replication::Task;
use garage_util::crdt::Crdt;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::ctx::Api;
use crate::meta;
use crate::objects::replica::{REPLICA_ETAG_HEADER, REPLICA_HEADER};

/// What a key's path segment encodes (all but RFC 3986's unreserved
/// characters; `/` separates segments).
const S3_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// How long one request may wait for a connection, and then for each
/// read of the answer.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a version was not sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The destination refused it (4xx): retrying will not help until
    /// something changes there; the version is marked FAILED.
    #[error("refused: {0}")]
    Refused(String),
    /// Unreachable, 5xx, a timeout, a read here that failed: tried again.
    #[error("{0}")]
    Transient(String),
}

/// The HTTP client of the replication worker (rustls with ring; the
/// system's roots).
pub fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// The parts of one send that the worker decides: to whom, and how.
pub struct Target<'a> {
    pub remote: &'a RemoteConfig,
    pub bucket: &'a str,
    pub storage_class: Option<&'a str>,
}

impl Api {
    /// The history entry of `task`'s version, if it is still there.
    pub async fn task_version(&self, task: &Task) -> Result<Option<HistoryEntry>, SendError> {
        let hk = HistoryKey::of(&task.key, task.timestamp, task.uuid);
        let h = self
            .history
            .get(&task.bucket, &hk)
            .await
            .map_err(|e| SendError::Transient(format!("cannot read the version: {e}")))?;
        Ok(h.filter(|h| !h.is_deleted() && h.version.is_complete()))
    }

    /// Sends `task`'s version `h` to `to`; returns the body bytes sent.
    pub async fn send_version(
        self: &Arc<Self>,
        http: &reqwest::Client,
        to: &Target<'_>,
        task: &Task,
        h: &HistoryEntry,
    ) -> Result<u64, SendError> {
        let vid = VersionId::Id(task.timestamp, task.uuid).to_string();
        let mut headers: Vec<(String, String)> = vec![(REPLICA_HEADER.into(), vid.clone())];
        let (method, body, len) = match &h.version.state {
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker) => {
                ("DELETE", reqwest::Body::from(Vec::new()), 0)
            }
            _ => {
                let (body, len) = self.version_body(task, h, &mut headers).await?;
                if let Some(c) = to.storage_class {
                    headers.push(("x-amz-storage-class".into(), c.to_string()));
                }
                ("PUT", body, len)
            }
        };
        headers.push(("content-length".into(), len.to_string()));
        headers.push(("x-amz-content-sha256".into(), "UNSIGNED-PAYLOAD".into()));
        let url = object_url(&to.remote.endpoint, to.bucket, &task.key);
        let req = signed(http, method, &url, headers, to.remote)?.body(body);
        let resp = req
            .send()
            .await
            .map_err(|e| SendError::Transient(format!("cannot reach the remote: {}", causes(e))))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(len);
        }
        let text = resp.text().await.unwrap_or_default();
        let code = xml_field(&text, "Code").unwrap_or_default();
        let message = xml_field(&text, "Message").unwrap_or_default();
        let what = format!("{method} answered {status} {code}: {message}");
        // A clock off on either side (SigV4's 15 minutes) is waited out,
        // as are timeouts and throttling; other 4xx are refusals.
        let transient = matches!(status.as_u16(), 408 | 429) || code == "RequestTimeTooSkewed";
        if status.is_client_error() && !transient {
            Err(SendError::Refused(what))
        } else {
            Err(SendError::Transient(what))
        }
    }

    /// The body of a data version and its headers (added to `headers`).
    async fn version_body(
        self: &Arc<Self>,
        task: &Task,
        h: &HistoryEntry,
        headers: &mut Vec<(String, String)>,
    ) -> Result<(reqwest::Body, u64), SendError> {
        // The history entry read already is the version (no second read).
        let found = crate::versions::versioning::Found {
            obj: None,
            version: h.version.clone(),
            history: Some(h.clone()),
        };
        let cur = Self::current_of(found, &task.key)
            .map_err(|e| SendError::Transient(format!("cannot read the version: {e}")))?;
        let sse = crate::encryption::sse::check_read(&self.kms, &cur.meta.headers, None)
            .await
            .map_err(|e| {
                SendError::Refused(format!(
                    "the version is encrypted with a key this cluster does not hold (SSE-C) or cannot open: {e}"
                ))
            })?;
        let encrypted = sse.is_some();
        for (k, v) in &cur.meta.headers {
            let kept = matches!(
                k.as_str(),
                meta::CONTENT_TYPE
                    | meta::CACHE_CONTROL
                    | meta::CONTENT_DISPOSITION
                    | meta::CONTENT_ENCODING
                    | meta::CONTENT_LANGUAGE
                    | meta::EXPIRES
                    | "x-amz-website-redirect-location"
            ) || k.starts_with(meta::USER_PREFIX);
            // A full-object checksum is checked again by the
            // destination; a composite one (`…-N`) cannot be.
            let checksum = k.starts_with("x-amz-checksum-")
                && k != crate::objects::checksum::TYPE_HEADER
                && !v.contains('-');
            if kept || checksum {
                headers.push((k.clone(), v.clone()));
            }
        }
        let tags = match h.tags.get() {
            Some(t) => t.clone(),
            None => garage_model::tags::stored_tags(&h.version),
        };
        if !tags.is_empty() {
            let enc: String = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(tags.iter())
                .finish();
            headers.push(("x-amz-tagging".into(), enc));
        }
        let lock = {
            let mut l = h.version.lock.clone();
            l.merge(&cur.lock);
            l
        };
        if let Some(r) = lock.retention() {
            headers.push(("x-amz-object-lock-mode".into(), r.mode.as_str().to_string()));
            headers.push((
                "x-amz-object-lock-retain-until-date".into(),
                rfc3339(r.until),
            ));
        }
        if lock.legal_hold() {
            headers.push(("x-amz-object-lock-legal-hold".into(), "ON".into()));
        }
        if !encrypted {
            headers.push((REPLICA_ETAG_HEADER.into(), cur.meta.etag.clone()));
        }
        let size = cur.meta.size;
        let blob = self
            .content(&cur, 0..size, sse)
            .map_err(|e| SendError::Transient(format!("cannot read the version: {e}")))?;
        Ok((reqwest::Body::wrap_stream(blob), size))
    }
}

/// `ENDPOINT/BUCKET/KEY`, the key's segments percent-encoded.
fn object_url(endpoint: &str, bucket: &str, key: &str) -> String {
    let key: Vec<String> = key
        .split('/')
        .map(|s| utf8_percent_encode(s, S3_PATH).to_string())
        .collect();
    format!(
        "{}/{}/{}",
        endpoint.trim_end_matches('/'),
        utf8_percent_encode(bucket, S3_PATH),
        key.join("/")
    )
}

/// A request to `url` with `headers`, signed (SigV4, unsigned payload)
/// for `remote`.
fn signed(
    http: &reqwest::Client,
    method: &str,
    url: &str,
    mut headers: Vec<(String, String)>,
    remote: &RemoteConfig,
) -> Result<reqwest::RequestBuilder, SendError> {
    let parsed = url::Url::parse(url).map_err(|e| SendError::Refused(format!("{url}: {e}")))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => return Err(SendError::Refused(format!("{url} names no host"))),
    };
    headers.push(("host".into(), host));
    let identity: Identity = Credentials::new(
        &remote.access_key_id,
        &remote.secret_access_key,
        None,
        None,
        "garage-replication",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(&remote.region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| SendError::Refused(format!("cannot sign: {e}")))?
        .into();
    let signable = SignableRequest::new(
        method,
        url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| SendError::Refused(format!("cannot sign: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| SendError::Refused(format!("cannot sign: {e}")))?
        .into_parts();
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut rb = http.request(m, url);
    for (k, v) in headers.iter().filter(|(k, _)| k != "host") {
        rb = rb.header(k, v);
    }
    for (k, v) in instructions.headers() {
        rb = rb.header(k, v);
    }
    Ok(rb)
}

/// An HTTP error and its causes, without the URL.
fn causes(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

/// `ms` (since the epoch) as RFC 3339, as the object lock headers take it.
fn rfc3339(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The text of the first `<name>` element of an XML error body.
fn xml_field(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(xml[start..end].chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_each_segment() {
        assert_eq!(
            object_url("http://127.0.0.1:3900/", "b", "a b/c+d/é"),
            "http://127.0.0.1:3900/b/a%20b/c%2Bd/%C3%A9"
        );
    }

    #[test]
    fn error_fields() {
        let x = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>";
        assert_eq!(xml_field(x, "Code").as_deref(), Some("NoSuchBucket"));
        assert_eq!(xml_field(x, "Message").as_deref(), Some("gone"));
        assert_eq!(xml_field("", "Code"), None);
    }
}
