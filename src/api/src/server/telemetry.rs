//! Request metrics and the request span of the S3 API.
//!
//! Which S3 operation a request is only s3s knows, after routing: the
//! [`RecordOp`] access hook (s3s calls it for every routed request, signed
//! or not) writes the operation name into an [`OpSlot`] that the listener
//! put in the request's extensions, and the listener reads it back once the
//! response is ready to count the request under that name. Metric names are
//! listed in `doc/metrics.md`, span fields in `doc/tracing.md`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use s3s::access::{S3Access, S3AccessContext};
use s3s::{s3_error, S3Result};
use tracing::Span;

/// What the access hook learns of one routed request.
#[derive(Clone, Debug, Default)]
pub struct OpInfo {
    /// The operation (`GetObject`, …).
    pub name: String,
    /// The access key id of its signature (checked by then).
    pub key_id: Option<String>,
    /// The object key it names.
    pub object: Option<String>,
}

/// Where the access hook leaves the [`OpInfo`] of one request.
#[derive(Clone, Default)]
pub struct OpSlot(Arc<OnceLock<OpInfo>>);

impl OpSlot {
    /// The operation, or what the request was when s3s never routed it
    /// (refused before routing: bad signature, malformed request).
    pub fn name(&self, method: &hyper::Method) -> String {
        match self.0.get() {
            Some(i) => i.name.clone(),
            None if method == hyper::Method::OPTIONS => "Options".into(),
            None => "Unknown".into(),
        }
    }

    /// What the access hook recorded, if s3s routed the request.
    pub fn info(&self) -> Option<&OpInfo> {
        self.0.get()
    }
}

/// The access hook: records the operation, then lets anonymous requests
/// through only for the operations a bucket's ACL or policy may open to
/// them ([`ANONYMOUS_OPS`], decided by [`crate::access::authorize`]), then refuses
/// a body too large to be read whole (see
/// [`crate::server::check_buffered_body`]).
pub struct RecordOp;

#[async_trait::async_trait]
impl S3Access for RecordOp {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let info = OpInfo {
            name: cx.s3_op().name().to_string(),
            key_id: cx.credentials().map(|c| c.access_key.clone()),
            object: match cx.s3_path() {
                s3s::path::S3Path::Object { key, .. } => Some(key.to_string()),
                _ => None,
            },
        };
        if let Some(slot) = cx.extensions_mut().get::<OpSlot>() {
            let _ = slot.0.set(info);
        }
        let op = cx.s3_op().name();
        if cx.credentials().is_none() && !ANONYMOUS_OPS.contains(&op) {
            return Err(s3_error!(AccessDenied, "Signature is required"));
        }
        crate::server::check_buffered_body(op, cx.headers())
    }
}

/// The operations an anonymous request may reach (where a bucket's ACL or
/// policy may allow it); every other one needs a signature.
pub const ANONYMOUS_OPS: &[&str] = &[
    "GetObject",
    "HeadObject",
    "PutObject",
    "PostObject",
    "CopyObject",
    "DeleteObject",
    "DeleteObjects",
    "ListObjects",
    "ListObjectsV2",
    "ListObjectVersions",
    "HeadBucket",
    "CreateMultipartUpload",
    "UploadPart",
    "UploadPartCopy",
    "CompleteMultipartUpload",
    "AbortMultipartUpload",
    "ListParts",
    "ListMultipartUploads",
];

/// The span of one S3 request, named `S3 <method> <service|bucket|object>`;
/// its operation and status are filled in by [`finish`]. (The operation
/// cannot be in the name: s3s routes after the signature check, whose key
/// lookup already starts child spans, and a started span keeps its name.)
pub fn request_span(
    method: &hyper::Method,
    kind: &str,
    bucket: Option<&str>,
    request_id: &str,
) -> Span {
    tracing::debug_span!(
        "s3_request",
        otel.name = format!("S3 {method} {kind}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %method,
        http.response.status_code = tracing::field::Empty,
        s3.operation = tracing::field::Empty,
        s3.bucket = bucket.unwrap_or(""),
        s3.request_id = request_id,
    )
}

/// Counts a finished request (its response header is ready; a streamed
/// body may still be flowing) and completes its span.
pub fn finish(span: &Span, op: &str, status: u16, took: Duration) {
    let op = op.to_string();
    span.record("s3.operation", op.as_str());
    span.record("http.response.status_code", status);
    metrics::counter!("api_s3_requests_total", "api_endpoint" => op.clone()).increment(1);
    metrics::histogram!("api_s3_request_duration_seconds", "api_endpoint" => op.clone())
        .record(took.as_secs_f64());
    if status >= 400 {
        metrics::counter!(
            "api_s3_errors_total",
            "api_endpoint" => op,
            "status_code" => status.to_string()
        )
        .increment(1);
    }
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrouted_requests_have_a_name() {
        let slot = OpSlot::default();
        assert_eq!(slot.name(&hyper::Method::GET), "Unknown");
        assert_eq!(slot.name(&hyper::Method::OPTIONS), "Options");
        let _ = slot.0.set(OpInfo {
            name: "PutObject".into(),
            ..Default::default()
        });
        assert_eq!(slot.name(&hyper::Method::PUT), "PutObject");
    }
}
