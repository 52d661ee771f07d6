//! PresignS3Request (garage's own endpoint, for the web console): an S3
//! request presigned with SigV4 (query parameters, `aws-sigv4`) with the
//! secret of one access key. The admin token lets an operator act as any
//! key; the S3 API then applies that key's permissions on the bucket, as
//! for any client.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    UriPathNormalizationMode,
};
use aws_smithy_runtime_api::client::identity::Identity;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use garage_model::garage::Garage;
use garage_table::EmptyKey;

/// Longest validity of a presigned request (S3's own limit: 7 days).
pub const MAX_EXPIRES_SECS: u64 = 7 * 24 * 3600;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresignS3Request {
    /// The access key whose secret signs (its permissions apply).
    pub access_key_id: String,
    /// `GET`, `HEAD`, `PUT`, `POST` or `DELETE`.
    pub method: String,
    /// The bucket's name (path style).
    pub bucket: String,
    /// The object key; empty or absent for a request on the bucket.
    #[serde(default)]
    pub key: Option<String>,
    /// The request's query parameters (`uploadId`, `partNumber`,
    /// `list-type`, `prefix`, …).
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// Validity in seconds (default 900, at most 7 days).
    #[serde(default)]
    pub expires_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresignS3Response {
    /// Path and query of the presigned request, on the S3 endpoint.
    pub path_and_query: String,
    /// The `Host` the request was signed for (the S3 endpoint).
    pub host: String,
}

/// What S3 leaves unencoded in a path segment or query value.
const S3_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn enc(s: &str) -> String {
    utf8_percent_encode(s, S3_ENCODE).to_string()
}

/// Presigns `r` for the S3 endpoint at `host` (`ip:port`) in `region`.
/// [`presign`] for this node's S3 endpoint and region.
pub async fn presign_for(
    g: &Garage,
    conf: &super::NodeConfig,
    r: PresignS3Request,
) -> Result<PresignS3Response, ApiError> {
    let host = conf.s3_host.as_deref().ok_or_else(|| {
        ApiError::BadRequest(
            "s3_api.api_bind_addr is not a TCP address: there is no S3 endpoint to presign for"
                .into(),
        )
    })?;
    presign(g, r, host, &conf.region).await
}

pub async fn presign(
    g: &Garage,
    r: PresignS3Request,
    host: &str,
    region: &str,
) -> Result<PresignS3Response, ApiError> {
    let method = r.method.to_ascii_uppercase();
    if !["GET", "HEAD", "PUT", "POST", "DELETE"].contains(&method.as_str()) {
        return Err(ApiError::BadRequest(format!(
            "method {:?}: use GET, HEAD, PUT, POST or DELETE",
            r.method
        )));
    }
    let expires = r.expires_secs.unwrap_or(900);
    if !(1..=MAX_EXPIRES_SECS).contains(&expires) {
        return Err(ApiError::BadRequest(format!(
            "expiresSecs {expires}: give 1 to {MAX_EXPIRES_SECS}"
        )));
    }
    if r.bucket.is_empty() || r.bucket.contains('/') {
        return Err(ApiError::BadRequest(format!(
            "bucket {:?} is not a bucket name",
            r.bucket
        )));
    }
    let key = g
        .key_table
        .get(&EmptyKey, &r.access_key_id)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .filter(|k| k.params().is_some())
        .ok_or_else(|| ApiError::NoSuchAccessKey(r.access_key_id.clone()))?;
    let secret = key.params().expect("live").secret_key.clone();

    let mut path = format!("/{}", enc(&r.bucket));
    if let Some(k) = r.key.as_deref().filter(|k| !k.is_empty()) {
        path.push('/');
        path.push_str(&k.split('/').map(enc).collect::<Vec<_>>().join("/"));
    }
    let query: Vec<String> = r
        .query
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    let mut url = format!("http://{host}{path}");
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }

    let identity: Identity =
        Credentials::new(&key.key_id, &secret, None, None, "garage-admin").into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(expires));
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .into();
    let headers = [("host", host)];
    let signable = SignableRequest::new(
        &method,
        &url,
        headers.into_iter(),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| ApiError::BadRequest(format!("cannot sign {url}: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| ApiError::Internal(format!("signing: {e}")))?
        .into_parts();
    let mut req = axum::http::Request::builder()
        .method(method.as_str())
        .uri(&url)
        .body(())
        .map_err(|e| ApiError::BadRequest(format!("{url}: {e}")))?;
    instructions.apply_to_request_http1x(&mut req);
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    Ok(PresignS3Response {
        path_and_query,
        host: host.to_string(),
    })
}
