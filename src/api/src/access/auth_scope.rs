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
//! A SigV4 credential scope names a region. Accepted: the configured one,
//! those of `s3_api.also_accept_regions`, and `us-east-1` for the
//! operations AWS serves on its global endpoint whatever the region
//! (ListBuckets, GetBucketLocation, CreateBucket): SDKs and `mc` left on
//! their default region start with those, then learn the bucket's region.
//! Any other region is refused with AWS's errors, naming both regions and
//! carrying `<Region>` and `x-amz-bucket-region` with the configured one,
//! from which aws-cli, boto3 and minio-go retry by themselves. This
//! weakens nothing: the signature is still checked with the key's secret
//! (the region only enters the derivation of the signing key), and a key
//! is the same in every region.
//!
//! POST forms carry their credentials in the body, which s3s parses: their
//! check is [`check_form`], called once s3s has parsed and verified them.

use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Uri};
use quick_xml::events::{BytesDecl, BytesText, Event};
use s3s::path::S3Path;
use s3s::{S3Error, S3ErrorCode};

use crate::request::query_pairs;

pub use crate::ctx::{Regions, US_EAST_1};

/// Whether the request is one AWS serves on its global endpoint whatever
/// the signing region: ListBuckets (GET on the service), GetBucketLocation
/// (GET on a bucket with `?location`), CreateBucket (PUT on a bucket with
/// no sub-resource; a location constraint in its body is checked by
/// CreateBucket against `s3_region`, as always).
pub fn is_global(method: &Method, path: Option<&S3Path>, uri: &Uri) -> bool {
    let names = || query_pairs(uri.query().unwrap_or("")).map(|(k, _)| k);
    match path {
        Some(S3Path::Root) => *method == Method::GET,
        Some(S3Path::Bucket { .. }) if *method == Method::GET => names().any(|k| k == "location"),
        Some(S3Path::Bucket { .. }) if *method == Method::PUT => names().all(|k| {
            // A presigned CreateBucket carries only its signature (and
            // the SDKs' `x-id`).
            k.len() > 6 && k[..6].eq_ignore_ascii_case("x-amz-") || k == "x-id"
        }),
        _ => false,
    }
}

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
    /// MinIO's admin API (`mc admin`, under `/minio/admin/`, signed for
    /// no region).
    #[error("MinIO's admin API (`mc admin`) is not served: manage garage with the `garage` CLI or its admin API")]
    MinioAdmin,
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
    /// `AuthorizationQueryParametersError` (presigned URL), as AWS; 501
    /// `NotImplemented` for MinIO's admin API.
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
            Refusal::MinioAdmin => S3ErrorCode::NotImplemented,
        }
    }

    pub fn into_s3_error(self) -> S3Error {
        let status = match self {
            Refusal::EmptyAuthorization | Refusal::TimeTooSkewed { .. } | Refusal::Expired => {
                hyper::StatusCode::FORBIDDEN
            }
            Refusal::MinioAdmin => hyper::StatusCode::NOT_IMPLEMENTED,
            _ => hyper::StatusCode::BAD_REQUEST,
        };
        let mut e = S3Error::with_message(self.code(), self.to_string());
        e.set_status_code(status);
        if let Refusal::WrongRegion { expected, .. } = &self {
            if let Ok(v) = HeaderValue::from_str(expected) {
                let mut h = HeaderMap::new();
                h.insert(BUCKET_REGION, v);
                e.set_headers(h);
            }
        }
        e
    }

    /// The answer: s3s's error document, or for a wrong region AWS's,
    /// which also carries `<Region>` (s3s's has no room for it).
    pub fn into_http_response(self) -> Result<s3s::HttpResponse, s3s::HttpError> {
        let Refusal::WrongRegion { expected, .. } = &self else {
            return self
                .into_s3_error()
                .to_http_response()
                .map_err(|e| s3s::HttpError::new(Box::new(e)));
        };
        let body = region_error_document(self.code().as_str(), &self.to_string(), expected)
            .map_err(|e| s3s::HttpError::new(Box::new(e)))?;
        let mut resp = hyper::Response::new(s3s::Body::from(body));
        *resp.status_mut() = hyper::StatusCode::BAD_REQUEST;
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
        if let Ok(v) = HeaderValue::from_str(expected) {
            h.insert(BUCKET_REGION, v);
        }
        Ok(resp)
    }
}

/// The header in which AWS names the region to use (botocore's redirector
/// reads it first).
const BUCKET_REGION: &str = "x-amz-bucket-region";

/// `<Error>` with `Code`, `Message` and `Region`.
fn region_error_document(code: &str, message: &str, region: &str) -> std::io::Result<Vec<u8>> {
    let mut w = quick_xml::Writer::new(Vec::new());
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("Error").write_inner_content(|w| {
        w.create_element("Code")
            .write_text_content(BytesText::new(code))?;
        w.create_element("Message")
            .write_text_content(BytesText::new(message))?;
        w.create_element("Region")
            .write_text_content(BytesText::new(region))?;
        Ok(())
    })?;
    Ok(w.into_inner())
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
/// requests and malformed SigV4 pass: s3s answers those); `global`: see
/// [`is_global`].
pub fn check_request(
    headers: &HeaderMap,
    uri: &Uri,
    regions: &Regions,
    global: bool,
) -> Result<(), Refusal> {
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
            // madmin (MinIO's admin client) signs for no region.
            if given.is_empty() && uri.path().starts_with("/minio/admin/") {
                return Err(Refusal::MinioAdmin);
            }
            check_region(given, regions, global, Where::Header)?;
        }
        signed = true;
    }
    if let Some(query) = uri.query() {
        for (name, value) in query_pairs(query) {
            match name.as_str() {
                // s3s takes any query string with `Signature` for SigV2.
                "Signature" => return Err(Refusal::SigV2),
                "X-Amz-Credential" => {
                    if let Some(given) = scope_region(&value) {
                        check_region(given, regions, global, Where::Query)?;
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
pub fn check_form(signed: bool, scope: Option<&str>, regions: &Regions) -> Result<(), Refusal> {
    match (signed, scope) {
        (false, _) => Ok(()),
        (true, None) => Err(Refusal::SigV2),
        (true, Some(given)) => check_region(given, regions, false, Where::Form),
    }
}

fn check_region(
    given: &str,
    regions: &Regions,
    global: bool,
    where_: Where,
) -> Result<(), Refusal> {
    if regions.accepts(given, global) {
        Ok(())
    } else {
        Err(Refusal::WrongRegion {
            given: given.to_string(),
            expected: regions.region.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(auth: Option<&str>, uri: &str) -> Result<(), Refusal> {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(AUTHORIZATION, a.parse().unwrap());
        }
        check_request(&h, &uri.parse().unwrap(), &garage(), false)
    }

    fn garage() -> Regions {
        Regions::new("garage", &[])
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
            check_request(&h, &"/b/k".parse().unwrap(), &garage(), false),
            Err(Refusal::EmptyContentMd5)
        );
    }

    #[test]
    fn forms_are_checked_once_verified() {
        let g = garage();
        assert_eq!(check_form(false, None, &g), Ok(()));
        assert_eq!(check_form(true, None, &g), Err(Refusal::SigV2));
        assert_eq!(check_form(true, Some("garage"), &g), Ok(()));
        assert_eq!(check_form(true, Some("x"), &g), wrong("x", Where::Form));
        assert_eq!(
            check_form(true, Some(US_EAST_1), &g),
            wrong(US_EAST_1, Where::Form),
            "a form upload is no global operation"
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

    fn global(method: Method, uri: &str) -> bool {
        let uri: Uri = uri.parse().unwrap();
        let path = s3s::path::parse_path_style(uri.path()).ok();
        is_global(&method, path.as_ref(), &uri)
    }

    #[test]
    fn the_global_operations_are_listbuckets_getbucketlocation_createbucket() {
        assert!(global(Method::GET, "/"));
        assert!(global(Method::GET, "/bkt?location"));
        assert!(global(Method::GET, "/bkt?location="));
        assert!(global(Method::PUT, "/bkt"));
        assert!(global(Method::PUT, "/bkt?x-id=CreateBucket"));
        assert!(global(
            Method::PUT,
            "/bkt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a&X-Amz-Signature=b"
        ));
        assert!(!global(Method::HEAD, "/"));
        assert!(!global(Method::GET, "/bkt"));
        assert!(!global(Method::GET, "/bkt?versioning"));
        assert!(!global(Method::PUT, "/bkt?versioning"));
        assert!(!global(Method::PUT, "/bkt?tagging"));
        assert!(!global(Method::DELETE, "/bkt"));
        assert!(!global(Method::PUT, "/bkt/k"));
        assert!(!global(Method::GET, "/bkt/location"));
        assert!(!global(Method::POST, "/bkt?location"));
    }

    #[test]
    fn us_east_1_signs_the_global_operations_and_listed_regions_sign_all() {
        let v4 = |r: &str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, V4.replace("REGION", r).parse().unwrap());
            h
        };
        let g = garage();
        let uri: Uri = "/b/k".parse().unwrap();
        assert_eq!(check_request(&v4(US_EAST_1), &uri, &g, true), Ok(()));
        assert_eq!(
            check_request(&v4(US_EAST_1), &uri, &g, false),
            wrong(US_EAST_1, Where::Header)
        );
        assert_eq!(
            check_request(&v4("eu-west-1"), &uri, &g, true),
            wrong("eu-west-1", Where::Header),
            "only us-east-1 is AWS's global region"
        );
        let q = "/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=GK1%2F20261125%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=ab";
        assert_eq!(
            check_request(&HeaderMap::new(), &q.parse().unwrap(), &g, true),
            Ok(())
        );
        let also = Regions::new("garage", &["eu-west-1".into(), "home".into()]);
        for r in ["garage", "eu-west-1", "home"] {
            assert_eq!(check_request(&v4(r), &uri, &also, false), Ok(()), "{r}");
        }
        assert_eq!(
            check_request(&v4("eu-west-2"), &uri, &also, false),
            Err(Refusal::WrongRegion {
                given: "eu-west-2".into(),
                expected: "garage".into(),
                where_: Where::Header
            })
        );
        assert_eq!(check_form(true, Some("home"), &also), Ok(()));
    }

    #[test]
    fn minio_admin_requests_are_told_the_api_is_not_served() {
        let admin = V4.replace("REGION", "");
        assert_eq!(
            req(Some(&admin), "/minio/admin/v3/info"),
            Err(Refusal::MinioAdmin)
        );
        let e = Refusal::MinioAdmin.into_s3_error();
        assert_eq!(e.status_code(), Some(hyper::StatusCode::NOT_IMPLEMENTED));
        assert!(e.message().unwrap().contains("`garage` CLI"));
        // Signed for a region, it is an S3 request (a bucket `minio`).
        assert_eq!(
            req(
                Some(&V4.replace("REGION", "garage")),
                "/minio/admin/v3/info"
            ),
            Ok(())
        );
        assert_eq!(req(Some(&admin), "/b/k"), wrong("", Where::Header));
    }

    #[tokio::test]
    async fn a_wrong_region_answer_names_the_region_to_use() {
        let resp = wrong("us-east-1", Where::Header)
            .unwrap_err()
            .into_http_response()
            .unwrap();
        assert_eq!(resp.status(), hyper::StatusCode::BAD_REQUEST);
        assert_eq!(resp.headers()[BUCKET_REGION], "garage");
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/xml");
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AuthorizationHeaderMalformed</Code><Message>The authorization header is malformed; the region &apos;us-east-1&apos; is wrong; expecting &apos;garage&apos;</Message><Region>garage</Region></Error>"), "{body}");
        // Through s3s (forms), the header at least.
        let e = wrong("x", Where::Form).unwrap_err().into_s3_error();
        let resp = e.to_http_response().unwrap();
        assert_eq!(resp.headers()[BUCKET_REGION], "garage");
        // Other refusals keep s3s's document.
        let resp = Refusal::SigV2.into_http_response().unwrap();
        assert!(resp.headers().get(BUCKET_REGION).is_none());
    }
}
