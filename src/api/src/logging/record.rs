//! One line of a server access log, in AWS's format: space-separated
//! fields, `-` for a field without a value, the time in brackets, the
//! request line, referrer and user agent in double quotes.

use std::net::IpAddr;

/// What the S3 listener knows of one finished request.
#[derive(Clone, Debug, Default)]
pub struct Event {
    /// Milliseconds since the epoch, when the request arrived.
    pub time_ms: u64,
    pub remote_ip: Option<IpAddr>,
    /// The access key id that signed it; none: anonymous.
    pub requester: Option<String>,
    pub request_id: String,
    /// The s3s operation name (`GetObject`, …), none if never routed.
    pub op: Option<String>,
    pub method: String,
    pub key: Option<String>,
    /// Path and query, as sent.
    pub uri: String,
    /// `HTTP/1.1`, `HTTP/2.0`.
    pub http_version: String,
    pub status: u16,
    pub error_code: Option<String>,
    pub bytes_sent: Option<u64>,
    pub object_size: Option<u64>,
    pub total_ms: u64,
    pub referrer: Option<String>,
    pub user_agent: Option<String>,
    pub version_id: Option<String>,
    /// `SigV4`, or none for an anonymous request.
    pub signature: Option<&'static str>,
    /// `AuthHeader` or `QueryString`.
    pub auth_type: Option<&'static str>,
    pub host: Option<String>,
}

/// AWS's operation name, `REST.<METHOD>.<RESOURCE>`.
pub fn operation(op: Option<&str>, method: &str) -> String {
    let resource = match op.unwrap_or("") {
        "GetObject" | "PutObject" | "HeadObject" | "DeleteObject" | "PostObject" => "OBJECT",
        "CopyObject" => "COPY.OBJECT",
        "ListObjects" | "ListObjectsV2" | "CreateBucket" | "DeleteBucket" | "HeadBucket" => {
            "BUCKET"
        }
        "ListBuckets" => "SERVICE",
        "ListObjectVersions" => "BUCKETVERSIONS",
        "GetBucketLocation" => "LOCATION",
        "GetBucketVersioning" | "PutBucketVersioning" => "VERSIONING",
        "CreateMultipartUpload" | "ListMultipartUploads" => "UPLOADS",
        "CompleteMultipartUpload" | "AbortMultipartUpload" | "ListParts" => "UPLOAD",
        "UploadPart" => "PART",
        "UploadPartCopy" => "COPY.PART",
        "DeleteObjects" => "MULTI_OBJECT_DELETE",
        "GetBucketAcl" | "PutBucketAcl" | "GetObjectAcl" | "PutObjectAcl" => "ACL",
        "GetBucketPolicy" | "PutBucketPolicy" | "DeleteBucketPolicy" => "BUCKETPOLICY",
        "GetBucketPolicyStatus" => "POLICYSTATUS",
        "GetBucketCors" | "PutBucketCors" | "DeleteBucketCors" => "CORS",
        "GetBucketWebsite" | "PutBucketWebsite" | "DeleteBucketWebsite" => "WEBSITE",
        "GetBucketLifecycleConfiguration"
        | "PutBucketLifecycleConfiguration"
        | "DeleteBucketLifecycle" => "LIFECYCLE",
        "GetBucketTagging" | "PutBucketTagging" | "DeleteBucketTagging" => "TAGGING",
        "GetObjectTagging" | "PutObjectTagging" | "DeleteObjectTagging" => "OBJECT_TAGGING",
        "GetBucketEncryption" | "PutBucketEncryption" | "DeleteBucketEncryption" => "ENCRYPTION",
        "GetBucketLogging" | "PutBucketLogging" => "LOGGING_STATUS",
        "GetObjectAttributes" => "OBJECT_ATTRIBUTES",
        "GetObjectRetention" | "PutObjectRetention" => "RETENTION",
        "GetObjectLegalHold" | "PutObjectLegalHold" => "LEGAL_HOLD",
        "GetObjectLockConfiguration" | "PutObjectLockConfiguration" => "OBJECT_LOCK_CONFIGURATION",
        "" => "UNKNOWN",
        other => return format!("REST.{method}.{}", other.to_ascii_uppercase()),
    };
    format!("REST.{method}.{resource}")
}

/// A field: `-` when empty or absent.
fn field(v: Option<&str>) -> &str {
    match v {
        Some(s) if !s.is_empty() => s,
        _ => "-",
    }
}

/// A quoted field: `"-"` when absent; quotes and backslashes escaped.
fn quoted(v: Option<&str>) -> String {
    match v {
        Some(s) if !s.is_empty() => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        _ => "\"-\"".into(),
    }
}

/// An object key as AWS logs it: URL-encoded (so it holds no space).
fn key_field(key: Option<&str>) -> String {
    match key {
        Some(k) if !k.is_empty() => percent_encoding::utf8_percent_encode(k, KEY_SET).to_string(),
        _ => "-".into(),
    }
}

const KEY_SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `[06/Feb/2019:00:00:38 +0000]`.
pub fn time_field(ms: u64) -> String {
    let t = jiff::Timestamp::from_millisecond(ms as i64).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!("[{}]", t.strftime("%d/%b/%Y:%H:%M:%S +0000"))
}

impl Event {
    /// The log line (without its newline) of this request on `bucket`,
    /// owned by `owner`.
    pub fn line(&self, owner: Option<&str>, bucket: &str) -> String {
        let num = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
        let request = format!("{} {} {}", self.method, self.uri, self.http_version);
        [
            field(owner).to_string(),
            bucket.to_string(),
            time_field(self.time_ms),
            self.remote_ip
                .map(|i| i.to_string())
                .unwrap_or_else(|| "-".into()),
            field(self.requester.as_deref()).to_string(),
            self.request_id.clone(),
            operation(self.op.as_deref(), &self.method),
            key_field(self.key.as_deref()),
            quoted(Some(&request)),
            self.status.to_string(),
            field(self.error_code.as_deref()).to_string(),
            num(self.bytes_sent.filter(|n| *n > 0)),
            num(self.object_size),
            self.total_ms.to_string(),
            // Turn-around time: not measured apart from the total.
            "-".into(),
            quoted(self.referrer.as_deref()),
            quoted(self.user_agent.as_deref()),
            field(self.version_id.as_deref()).to_string(),
            // Host id: the node has none to give.
            "-".into(),
            field(self.signature).to_string(),
            // Cipher suite: TLS ends before garage.
            "-".into(),
            field(self.auth_type).to_string(),
            field(self.host.as_deref()).to_string(),
            // TLS version, access point ARN.
            "-".into(),
            "-".into(),
            // aclRequired: whether an ACL was needed to allow it.
            "-".into(),
        ]
        .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_aws_fields_in_aws_order() {
        let e = Event {
            time_ms: 1_549_411_238_000,
            remote_ip: Some("192.0.2.3".parse().unwrap()),
            requester: Some("GK1".into()),
            request_id: "3E57427F3EXAMPLE".into(),
            op: Some("GetObject".into()),
            method: "GET".into(),
            key: Some("photos/my cat.jpg".into()),
            uri: "/b/photos/my%20cat.jpg".into(),
            http_version: "HTTP/1.1".into(),
            status: 200,
            bytes_sent: Some(113),
            object_size: Some(113),
            total_ms: 7,
            user_agent: Some("aws-cli/2 \"x\"".into()),
            signature: Some("SigV4"),
            auth_type: Some("AuthHeader"),
            host: Some("127.0.0.1:3900".into()),
            ..Default::default()
        };
        let line = e.line(Some("GKowner"), "b");
        assert_eq!(
            line,
            "GKowner b [06/Feb/2019:00:00:38 +0000] 192.0.2.3 GK1 3E57427F3EXAMPLE \
             REST.GET.OBJECT photos/my%20cat.jpg \"GET /b/photos/my%20cat.jpg HTTP/1.1\" 200 - \
             113 113 7 - \"-\" \"aws-cli/2 \\\"x\\\"\" - - SigV4 - AuthHeader 127.0.0.1:3900 - - -"
        );
        // 26 fields, the quoted ones counted as one.
        let anonymous = Event {
            method: "PUT".into(),
            uri: "/b".into(),
            http_version: "HTTP/1.1".into(),
            status: 403,
            error_code: Some("AccessDenied".into()),
            ..Default::default()
        };
        let l = anonymous.line(None, "b");
        assert!(
            l.starts_with("- b [01/Jan/1970:00:00:00 +0000] - - "),
            "{l}"
        );
        assert!(l.contains(" REST.PUT.UNKNOWN - \"PUT /b HTTP/1.1\" 403 AccessDenied - - 0 "));
    }

    #[test]
    fn operations_are_named_as_aws_names_them() {
        assert_eq!(operation(Some("PutObject"), "PUT"), "REST.PUT.OBJECT");
        assert_eq!(operation(Some("ListObjectsV2"), "GET"), "REST.GET.BUCKET");
        assert_eq!(operation(Some("UploadPart"), "PUT"), "REST.PUT.PART");
        assert_eq!(
            operation(Some("DeleteObjects"), "POST"),
            "REST.POST.MULTI_OBJECT_DELETE"
        );
        assert_eq!(
            operation(Some("GetBucketLogging"), "GET"),
            "REST.GET.LOGGING_STATUS"
        );
        assert_eq!(
            operation(Some("SomethingNew"), "GET"),
            "REST.GET.SOMETHINGNEW"
        );
    }
}
