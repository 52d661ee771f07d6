//! What may authenticate an S3 request, checked before s3s verifies any
//! signature: SigV4 only, signed for this cluster's `s3_region`.
//!
//! SigV2 (`Authorization: AWS <key>:<sig>`, `?Signature=` query strings,
//! forms with a `signature` field) is refused: it signs no body and no
//! date window is enforced for it, so a captured request could be replayed
//! forever. The answer does not depend on the key or on the signature, so
//! it tells nothing about either. AWS answers the same in the regions
//! created since 2014.
//!
//! A SigV4 credential scope names a region; a request signed for another
//! one is refused with AWS's errors, naming both regions, as AWS and the
//! reference system do: a client configured for the wrong region learns
//! what to set.
//!
//! POST forms carry their credentials in the body, which s3s parses: their
//! check is [`check_form`], called once s3s has parsed and verified them.

use hyper::header::{HeaderMap, AUTHORIZATION};
use hyper::Uri;
use s3s::{S3Error, S3ErrorCode};

const USE_SIGV4: &str =
    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.";

/// Why a request's authentication is refused before its signature is
/// checked.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Signature Version 2, in a header, a query string or a form.
    #[error("{USE_SIGV4}")]
    SigV2,
    /// An `Authorization` header with nothing in it.
    #[error("Access Denied: the Authorization header is empty")]
    EmptyAuthorization,
    /// An `Authorization` scheme that is neither SigV4 nor SigV2.
    #[error("Unsupported Authorization Type")]
    UnknownScheme,
    /// `AWS4-HMAC-SHA256` without its three parts.
    #[error("The authorization header is malformed; it must contain Credential=, SignedHeaders= and Signature=")]
    MalformedSigV4,
    /// An empty `Content-MD5` header.
    #[error("The Content-MD5 you specified is not valid: it is empty")]
    EmptyContentMd5,
    /// SigV4 signed for `given` instead of the configured region.
    #[error("{}", wrong_region_message(given, expected, *where_))]
    WrongRegion {
        given: String,
        expected: String,
        where_: Where,
    },
    /// A request dated more than 15 minutes from the cluster's time (see
    /// `request_time`).
    #[error("The difference between the request time and the current time is too large: request time {request}, server time {server} (the cluster's time)")]
    TimeTooSkewed { request: String, server: String },
    /// A presigned URL past its `X-Amz-Expires`.
    #[error("Request has expired")]
    Expired,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Where {
    Header,
    Query,
    Form,
}

fn wrong_region_message(given: &str, expected: &str, where_: Where) -> String {
    match where_ {
        Where::Query => format!(
            "Error parsing the X-Amz-Credential parameter; the region '{given}' is wrong; expecting '{expected}'"
        ),
        Where::Header | Where::Form => format!(
            "The authorization header is malformed; the region '{given}' is wrong; expecting '{expected}'"
        ),
    }
}

impl Refusal {
    /// 400 `InvalidRequest` for SigV2; 403 `AccessDenied` for an empty
    /// `Authorization`; 400 `InvalidArgument` for another scheme,
    /// `AuthorizationHeaderMalformed` for an incomplete SigV4 header,
    /// `InvalidDigest` for an empty `Content-MD5`; for a wrong region
    /// `AuthorizationHeaderMalformed` (header, form) or
    /// `AuthorizationQueryParametersError` (presigned URL), as AWS.
    pub fn code(&self) -> S3ErrorCode {
        match self {
            Refusal::SigV2 => S3ErrorCode::InvalidRequest,
            Refusal::EmptyAuthorization => S3ErrorCode::AccessDenied,
            Refusal::UnknownScheme => S3ErrorCode::InvalidArgument,
            Refusal::MalformedSigV4 => S3ErrorCode::AuthorizationHeaderMalformed,
            Refusal::EmptyContentMd5 => S3ErrorCode::InvalidDigest,
            Refusal::WrongRegion {
                where_: Where::Query,
                ..
            } => S3ErrorCode::AuthorizationQueryParametersError,
            Refusal::WrongRegion { .. } => S3ErrorCode::AuthorizationHeaderMalformed,
            Refusal::TimeTooSkewed { .. } => S3ErrorCode::RequestTimeTooSkewed,
            Refusal::Expired => S3ErrorCode::AccessDenied,
        }
    }

    pub fn into_s3_error(self) -> S3Error {
        let status = match self {
            Refusal::EmptyAuthorization | Refusal::TimeTooSkewed { .. } | Refusal::Expired => {
                hyper::StatusCode::FORBIDDEN
            }
            _ => hyper::StatusCode::BAD_REQUEST,
        };
        let mut e = S3Error::with_message(self.code(), self.to_string());
        e.set_status_code(status);
        e
    }
}

impl From<Refusal> for crate::error::ApiError {
    fn from(r: Refusal) -> Self {
        crate::error::ApiError::Refused {
            code: r.code(),
            message: r.to_string(),
        }
    }
}

/// Checks the `Authorization` header and the query string of a request,
/// and the date of a SigV4 one against the cluster's time (anonymous
/// requests and malformed SigV4 pass: s3s answers those).
pub fn check_request(headers: &HeaderMap, uri: &Uri, region: &str) -> Result<(), Refusal> {
    if headers
        .get("content-md5")
        .is_some_and(|m| m.as_bytes().trim_ascii().is_empty())
    {
        return Err(Refusal::EmptyContentMd5);
    }
    // Signed with SigV4 (a header or a presigned URL): its date is checked
    // once everything else passed.
    let mut signed = false;
    if let Some(auth) = headers.get(AUTHORIZATION) {
        let auth = auth.as_bytes().trim_ascii();
        if auth.is_empty() {
            return Err(Refusal::EmptyAuthorization);
        }
        if auth.starts_with(b"AWS ") {
            return Err(Refusal::SigV2);
        }
        let Some(rest) = auth.strip_prefix(b"AWS4-HMAC-SHA256") else {
            return Err(Refusal::UnknownScheme);
        };
        let rest = String::from_utf8_lossy(rest);
        let part = |name: &str| {
            rest.split(',')
                .find_map(|p| p.trim().strip_prefix(name).map(String::from))
        };
        let credential = part("Credential=");
        if credential.is_none() || part("SignedHeaders=").is_none() || part("Signature=").is_none()
        {
            return Err(Refusal::MalformedSigV4);
        }
        if let Some(given) = credential.as_deref().and_then(scope_region) {
            check_region(given, region, Where::Header)?;
        }
        signed = true;
    }
    if let Some(query) = uri.query() {
        for (name, value) in form_urlencoded(query) {
            match name.as_str() {
                // s3s takes any query string with `Signature` for SigV2.
                "Signature" => return Err(Refusal::SigV2),
                "X-Amz-Credential" => {
                    if let Some(given) = scope_region(&value) {
                        check_region(given, region, Where::Query)?;
                    }
                }
                _ => (),
            }
        }
        signed |= query.contains("X-Amz-Signature=");
    }
    match signed {
        true => super::request_time::check(headers, uri, garage_util::clock::cluster_now_msec()),
        false => Ok(()),
    }
}

/// Checks the credentials of a POST form as s3s verified them: `scope` is
/// the credential's region, `None` for SigV2 (s3s gives none for it).
pub fn check_form(signed: bool, scope: Option<&str>, region: &str) -> Result<(), Refusal> {
    match (signed, scope) {
        (false, _) => Ok(()),
        (true, None) => Err(Refusal::SigV2),
        (true, Some(given)) => check_region(given, region, Where::Form),
    }
}

fn check_region(given: &str, region: &str, where_: Where) -> Result<(), Refusal> {
    if given == region {
        Ok(())
    } else {
        Err(Refusal::WrongRegion {
            given: given.to_string(),
            expected: region.to_string(),
            where_,
        })
    }
}

/// The region of a credential `AKID/yyyymmdd/region/service/aws4_request`.
fn scope_region(credential: &str) -> Option<&str> {
    let mut parts = credential.trim().split('/');
    let region = parts.nth(2)?;
    // Only a whole scope is judged; a truncated one is s3s's to refuse.
    parts.next()?;
    Some(region)
}

/// The decoded pairs of a query string (or of a form-encoded value).
pub fn form_urlencoded(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|kv| !kv.is_empty()).map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (decode(k), decode(v))
    })
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(auth: Option<&str>, uri: &str) -> Result<(), Refusal> {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(AUTHORIZATION, a.parse().unwrap());
        }
        check_request(&h, &uri.parse().unwrap(), "garage")
    }

    fn wrong(given: &str, where_: Where) -> Result<(), Refusal> {
        Err(Refusal::WrongRegion {
            given: given.into(),
            expected: "garage".into(),
            where_,
        })
    }

    const V4: &str = "AWS4-HMAC-SHA256 Credential=GK1/20261125/REGION/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abcd";

    #[test]
    fn sigv2_is_refused_in_a_header_and_a_query_string() {
        assert_eq!(
            req(Some("AWS GK1:c2lnbmF0dXJl"), "/b/k"),
            Err(Refusal::SigV2)
        );
        assert_eq!(
            req(None, "/b/k?AWSAccessKeyId=GK1&Expires=1&Signature=abc%3D"),
            Err(Refusal::SigV2)
        );
        assert_eq!(req(None, "/b/k?Signature="), Err(Refusal::SigV2));
    }

    #[test]
    fn sigv4_must_name_the_configured_region() {
        assert_eq!(req(Some(&V4.replace("REGION", "garage")), "/b"), Ok(()));
        assert_eq!(
            req(Some(&V4.replace("REGION", "us-east-1")), "/b"),
            wrong("us-east-1", Where::Header)
        );
        assert_eq!(
            req(Some(&V4.replace("REGION", "")), "/b"),
            wrong("", Where::Header)
        );
        let q = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=GK1%2F20261125%2FREGION%2Fs3%2Faws4_request&X-Amz-Signature=ab";
        assert_eq!(req(None, &q.replace("REGION", "garage")), Ok(()));
        assert_eq!(
            req(None, &q.replace("REGION", "eu-west-3")),
            wrong("eu-west-3", Where::Query)
        );
    }

    #[test]
    fn a_sigv4_header_does_not_hide_a_sigv2_query_string() {
        assert_eq!(
            req(
                Some(&V4.replace("REGION", "garage")),
                "/b/k?AWSAccessKeyId=GK1&Expires=1&Signature=abc%3D"
            ),
            Err(Refusal::SigV2)
        );
    }

    #[test]
    fn anonymous_requests_and_truncated_scopes_are_left_to_s3s() {
        assert_eq!(req(None, "/b/k?list-type=2&prefix=a%2Fb"), Ok(()));
        assert_eq!(
            req(
                Some("AWS4-HMAC-SHA256 Credential=GK1/2026, SignedHeaders=host, Signature=ab"),
                "/"
            ),
            Ok(())
        );
        assert_eq!(req(None, "/?X-Amz-Credential=nonsense"), Ok(()));
    }

    #[test]
    fn malformed_authorization_is_refused_with_aws_codes() {
        assert_eq!(req(Some(""), "/"), Err(Refusal::EmptyAuthorization));
        assert_eq!(req(Some("   "), "/"), Err(Refusal::EmptyAuthorization));
        assert_eq!(req(Some("Bearer xyz"), "/"), Err(Refusal::UnknownScheme));
        assert_eq!(
            req(Some("AWS4-HMAC-SHA256 garbage"), "/"),
            Err(Refusal::MalformedSigV4)
        );
        assert_eq!(
            req(Some("AWS4-HMAC-SHA256 Credential=GK1/2026"), "/"),
            Err(Refusal::MalformedSigV4)
        );
        let e = Refusal::EmptyAuthorization.into_s3_error();
        assert_eq!(e.status_code(), Some(hyper::StatusCode::FORBIDDEN));
        assert_eq!(
            Refusal::UnknownScheme.into_s3_error().code(),
            &S3ErrorCode::InvalidArgument
        );
        let mut h = HeaderMap::new();
        h.insert("content-md5", "".parse().unwrap());
        assert_eq!(
            check_request(&h, &"/b/k".parse().unwrap(), "garage"),
            Err(Refusal::EmptyContentMd5)
        );
    }

    #[test]
    fn forms_are_checked_once_verified() {
        assert_eq!(check_form(false, None, "garage"), Ok(()));
        assert_eq!(check_form(true, None, "garage"), Err(Refusal::SigV2));
        assert_eq!(check_form(true, Some("garage"), "garage"), Ok(()));
        assert_eq!(
            check_form(true, Some("x"), "garage"),
            wrong("x", Where::Form)
        );
    }

    #[test]
    fn errors_name_both_regions() {
        let e = wrong("us-east-1", Where::Query)
            .unwrap_err()
            .into_s3_error();
        assert_eq!(e.code(), &S3ErrorCode::AuthorizationQueryParametersError);
        let m = e.message().unwrap();
        assert!(m.contains("'us-east-1'") && m.contains("'garage'"), "{m}");
        let e = Refusal::SigV2.into_s3_error();
        assert_eq!(e.code(), &S3ErrorCode::InvalidRequest);
        assert!(e.message().unwrap().contains("AWS4-HMAC-SHA256"));
    }
}
