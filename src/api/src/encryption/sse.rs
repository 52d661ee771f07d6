//! Server-side encryption: SSE-C, objects encrypted at rest with a key
//! the client sends with each request
//! (`x-amz-server-side-encryption-customer-*`); SSE-S3
//! (`x-amz-server-side-encryption: AES256`, or the bucket's default) and
//! SSE-KMS (`aws:kms`, with a key id, alias or ARN, or the default
//! `aws/s3` key), with a random data key per object kept in its metadata,
//! wrapped by a key of the cluster ([`garage_model::kms`]). All seal the
//! data the same way; see doc/s3.md "Server-side encryption".
//!
//! Each stored block (and inline data) is `nonce (12 bytes) || ciphertext
//! || tag (16 bytes)`, AES-256-GCM with a random nonce per block, so a
//! stored block is always [`OVERHEAD`] bytes longer than its plaintext and
//! plaintext positions stay computable from the version's block list. The
//! block layer only ever sees the sealed bytes (their hash is the block's
//! address), so encrypted data never dedupes with anything else.
//!
//! The object's metadata keeps, for SSE-C, the algorithm and a salted hash
//! of the key (`blake2(salt || key)`, 32 random bytes of salt per object),
//! enough to tell a wrong key from the right one, never the key nor its
//! bare MD5; for SSE-S3 and SSE-KMS, the wrapped data key, and for SSE-KMS
//! its encryption context (the associated data of the wrapping).

use std::collections::BTreeMap;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use garage_model::bucket_table::DefaultEncryption;
use garage_model::kms::{KeyName, Kms};
use garage_util::data::{blake2sum, gen_uuid};
use md5::{Digest, Md5};

use crate::error::{ApiError, ApiResult};

/// The only algorithm S3 defines for SSE-C (and SSE-S3's name).
pub const AES256: &str = "AES256";
/// SSE-KMS's algorithm name.
pub const AWS_KMS: &str = "aws:kms";
/// Bytes a sealed block has more than its plaintext: nonce and tag.
pub const OVERHEAD: u64 = 12 + 16;
/// Stored header: the algorithm of an SSE-C object.
pub const ALGORITHM_HEADER: &str = "x-garage-sse-c-algorithm";
/// Stored header: `hex(salt):hex(blake2(salt || key))`.
pub const KEY_CHECK_HEADER: &str = "x-garage-sse-c-key-check";
/// Stored header of an SSE-S3 object: its wrapped data key (see
/// [`Kms::open_data_key`]).
pub const S3_KEY_HEADER: &str = "x-garage-sse-s3-key";
/// Stored header of an SSE-KMS object: its wrapped data key.
pub const KMS_KEY_HEADER: &str = "x-garage-sse-kms-key";
/// Stored header of an SSE-KMS object: its encryption context (base64 of
/// the JSON object), when it has one.
pub const KMS_CONTEXT_HEADER: &str = "x-garage-sse-kms-context";
/// Stored header of an SSE-KMS object written with a bucket key.
pub const BUCKET_KEY_HEADER: &str = "x-garage-sse-bucket-key";

/// Every stored header that says how an object is sealed.
const SEALING_HEADERS: [&str; 6] = [
    ALGORITHM_HEADER,
    KEY_CHECK_HEADER,
    S3_KEY_HEADER,
    KMS_KEY_HEADER,
    KMS_CONTEXT_HEADER,
    BUCKET_KEY_HEADER,
];

/// The account id in the KMS key ARNs of responses.
const KMS_ACCOUNT: &str = "000000000000";

const NEEDS_KEY: &str = "The object was stored using a form of Server Side Encryption. \
     The correct parameters must be provided to retrieve the object.";

/// The key an object's data is sealed with: a customer's (SSE-C) or a
/// data key of SSE-S3 or SSE-KMS. `Debug` does not show the key.
#[derive(Clone)]
pub struct SseKey {
    key: [u8; 32],
    kind: Kind,
}

#[derive(Clone, PartialEq, Eq)]
enum Kind {
    /// base64 of the key's MD5, as echoed in responses.
    Customer { md5_b64: String },
    /// The data key wrapped by SSE-S3's key, as stored.
    S3 { stored: String },
    /// The data key wrapped by a KMS key, as stored, with its context.
    Kms {
        stored: String,
        key_id: String,
        context: Option<String>,
        bucket_key: bool,
    },
}

impl std::fmt::Debug for SseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseKey").finish_non_exhaustive()
    }
}

impl PartialEq for SseKey {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

fn seal_with(key: &[u8; 32], plain: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(key.into());
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let ct = cipher
        .encrypt(&nonce, plain)
        .expect("AES-GCM encrypts any block of our sizes");
    let mut out = Vec::with_capacity(plain.len() + OVERHEAD as usize);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    out
}

fn open_with(key: &[u8; 32], sealed: &[u8]) -> Result<Vec<u8>, String> {
    if (sealed.len() as u64) < OVERHEAD {
        return Err(format!("sealed block of {} bytes", sealed.len()));
    }
    let (nonce, ct) = sealed.split_at(12);
    Aes256Gcm::new(key.into())
        .decrypt(Nonce::from_slice(nonce), ct)
        .map_err(|_| "sealed block does not authenticate with the key".to_string())
}

/// An encryption context (`x-amz-server-side-encryption-context`: base64
/// of a JSON object of strings), checked; returns it re-encoded with its
/// keys sorted, so that equal contexts are equal bytes.
pub fn parse_context(b64: &str) -> ApiResult<String> {
    let bad = || {
        ApiError::InvalidArgument(
            "The header 'x-amz-server-side-encryption-context' shall be Base64-encoded UTF-8 \
             string holding JSON which represents a string-string map"
                .into(),
        )
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let json = engine.decode(b64.trim()).map_err(|_| bad())?;
    let map: BTreeMap<String, String> = serde_json::from_slice(&json).map_err(|_| bad())?;
    if map.keys().any(|k| k.starts_with("aws:")) {
        return Err(ApiError::InvalidArgument(
            "Encryption context keys starting with aws: are reserved".into(),
        ));
    }
    Ok(engine.encode(serde_json::to_vec(&map).map_err(|_| bad())?))
}

/// The associated data of a stored context (base64 of sorted JSON).
fn context_aad(context: Option<&str>) -> Vec<u8> {
    context
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
        .unwrap_or_default()
}

impl SseKey {
    /// The key of the three SSE-C headers of a request: `None` when none
    /// is given, InvalidArgument when they are incomplete or wrong.
    pub fn from_headers(
        algorithm: Option<&str>,
        key: Option<&str>,
        key_md5: Option<&str>,
    ) -> ApiResult<Option<Self>> {
        let (algorithm, key) = match (algorithm, key) {
            (None, None) if key_md5.is_none() => return Ok(None),
            (Some(a), Some(k)) => (a, k),
            (None, _) => {
                return Err(ApiError::InvalidArgument(
                    "Requests specifying Server Side Encryption with Customer provided keys \
                     must provide a valid encryption algorithm."
                        .into(),
                ))
            }
            (Some(_), None) => {
                return Err(ApiError::InvalidArgument(
                    "Requests specifying Server Side Encryption with Customer provided keys \
                     must provide an appropriate secret key."
                        .into(),
                ))
            }
        };
        if algorithm != AES256 {
            return Err(ApiError::InvalidArgument(
                "The encryption algorithm specified is not valid (only AES256 is).".into(),
            ));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let key: [u8; 32] = b64
            .decode(key.trim())
            .ok()
            .and_then(|k| k.try_into().ok())
            .ok_or_else(|| {
                ApiError::InvalidArgument(
                    "The secret key was invalid for the specified algorithm.".into(),
                )
            })?;
        let md5: [u8; 16] = Md5::digest(key).into();
        let md5_b64 = b64.encode(md5);
        let given = key_md5.ok_or_else(|| {
            ApiError::InvalidArgument(
                "Requests specifying Server Side Encryption with Customer provided keys \
                 must provide the client calculated MD5 of the secret key."
                    .into(),
            )
        })?;
        if b64.decode(given.trim()).ok().as_deref() != Some(&md5[..]) {
            return Err(ApiError::InvalidArgument(
                "The calculated MD5 hash of the key did not match the hash that was provided."
                    .into(),
            ));
        }
        Ok(Some(Self {
            key,
            kind: Kind::Customer { md5_b64 },
        }))
    }

    /// The customer key's MD5 (base64) to echo; none for SSE-S3 and
    /// SSE-KMS.
    pub fn customer_md5(&self) -> Option<&str> {
        match &self.kind {
            Kind::Customer { md5_b64 } => Some(md5_b64),
            _ => None,
        }
    }

    /// An SSE-KMS key's encryption context (base64 of the JSON), if any.
    pub fn context(&self) -> Option<&str> {
        match &self.kind {
            Kind::Kms { context, .. } => context.as_deref(),
            _ => None,
        }
    }

    pub fn is_customer(&self) -> bool {
        matches!(self.kind, Kind::Customer { .. })
    }

    /// The stored headers of an object encrypted with this key (for
    /// SSE-C, a fresh salt each time).
    pub fn stored_pairs(&self) -> Vec<(String, String)> {
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        match &self.kind {
            Kind::S3 { stored } => vec![pair(S3_KEY_HEADER, stored)],
            Kind::Kms {
                stored,
                context,
                bucket_key,
                ..
            } => {
                let mut v = vec![pair(KMS_KEY_HEADER, stored)];
                if let Some(c) = context {
                    v.push(pair(KMS_CONTEXT_HEADER, c));
                }
                if *bucket_key {
                    v.push(pair(BUCKET_KEY_HEADER, "true"));
                }
                v
            }
            Kind::Customer { .. } => {
                let salt = gen_uuid();
                vec![
                    pair(ALGORITHM_HEADER, AES256),
                    pair(
                        KEY_CHECK_HEADER,
                        &format!(
                            "{}:{}",
                            hex::encode(salt.as_slice()),
                            self.check(salt.as_slice())
                        ),
                    ),
                ]
            }
        }
    }

    fn check(&self, salt: &[u8]) -> String {
        let mut b = Vec::with_capacity(salt.len() + 32);
        b.extend_from_slice(salt);
        b.extend_from_slice(&self.key);
        hex::encode(blake2sum(&b).as_slice())
    }

    /// `nonce || ciphertext || tag` of `plain`.
    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        seal_with(&self.key, plain)
    }

    /// The plaintext of [`SseKey::seal`]'s bytes; an error when they were
    /// not sealed with this key or were altered.
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, String> {
        open_with(&self.key, sealed)
    }

    /// Whether `self` can seal a copy the way `ask` wants: the same kind,
    /// and for SSE-KMS the same key and context.
    fn serves(&self, ask: &Sealing) -> bool {
        match (&self.kind, ask) {
            (Kind::S3 { .. }, Sealing::S3) => true,
            (
                Kind::Kms {
                    key_id, context, ..
                },
                Sealing::Kms {
                    key_id: want,
                    context: want_context,
                    ..
                },
            ) => want.as_deref() == Some(key_id.as_str()) && context == want_context,
            _ => false,
        }
    }
}

/// What a response says of an object's encryption.
#[derive(Clone, Debug, Default)]
pub struct SseFields {
    pub sse_customer_algorithm: Option<String>,
    pub sse_customer_key_md5: Option<String>,
    pub server_side_encryption: Option<s3s::dto::ServerSideEncryption>,
    /// The KMS key's ARN.
    pub ssekms_key_id: Option<String>,
    pub bucket_key_enabled: Option<bool>,
}

impl SseFields {
    /// The fields of an object sealed with `k` (or not at all), KMS ARNs
    /// in `region`.
    pub fn of(k: Option<&SseKey>, region: &str) -> Self {
        use s3s::dto::ServerSideEncryption as E;
        match k.map(|k| &k.kind) {
            Some(Kind::Customer { md5_b64 }) => Self {
                sse_customer_algorithm: Some(AES256.into()),
                sse_customer_key_md5: Some(md5_b64.clone()),
                ..Default::default()
            },
            Some(Kind::S3 { .. }) => Self {
                server_side_encryption: Some(E::from_static(E::AES256)),
                ..Default::default()
            },
            Some(Kind::Kms {
                key_id, bucket_key, ..
            }) => Self {
                server_side_encryption: Some(E::from_static(E::AWS_KMS)),
                ssekms_key_id: Some(key_arn(region, key_id)),
                bucket_key_enabled: bucket_key.then_some(true),
                ..Default::default()
            },
            None => Self::default(),
        }
    }
}

impl SseFields {
    /// The fields of an object with these stored headers, read without
    /// its key (an SSE-C object's key MD5 is not stored: not given).
    pub fn of_stored(headers: &[(String, String)], region: &str) -> Self {
        use s3s::dto::ServerSideEncryption as E;
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        if find(S3_KEY_HEADER).is_some() {
            Self {
                server_side_encryption: Some(E::from_static(E::AES256)),
                ..Default::default()
            }
        } else if let Some(stored) = find(KMS_KEY_HEADER) {
            Self {
                server_side_encryption: Some(E::from_static(E::AWS_KMS)),
                ssekms_key_id: Kms::key_id_of(stored).map(|id| key_arn(region, id)),
                bucket_key_enabled: (find(BUCKET_KEY_HEADER) == Some("true")).then_some(true),
                ..Default::default()
            }
        } else if find(ALGORITHM_HEADER).is_some() {
            Self {
                sse_customer_algorithm: Some(AES256.into()),
                ..Default::default()
            }
        } else {
            Self::default()
        }
    }
}

/// The ARN of KMS key `id`.
pub fn key_arn(region: &str, id: &str) -> String {
    format!("arn:aws:kms:{region}:{KMS_ACCOUNT}:key/{id}")
}

/// Sets the encryption fields of an S3 output from an [`SseFields`].
#[macro_export]
macro_rules! set_sse {
    ($out:expr, $f:expr) => {{
        let f: $crate::encryption::sse::SseFields = $f;
        $out.sse_customer_algorithm = f.sse_customer_algorithm;
        $out.sse_customer_key_md5 = f.sse_customer_key_md5;
        $out.server_side_encryption = f.server_side_encryption;
        $out.ssekms_key_id = f.ssekms_key_id;
        $out.bucket_key_enabled = f.bucket_key_enabled;
    }};
}

/// Whether stored headers are those of an encrypted object (SSE-C,
/// SSE-S3 or SSE-KMS).
pub fn is_encrypted(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(k, _)| k == ALGORITHM_HEADER || k == S3_KEY_HEADER || k == KMS_KEY_HEADER)
}

/// The stored headers without the encryption ones.
pub fn without_sse(headers: &[(String, String)]) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| !SEALING_HEADERS.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// Whether a stored header says how an object is sealed.
pub fn is_sealing_header(name: &str) -> bool {
    SEALING_HEADERS.contains(&name)
}

/// The plaintext size of a stored block of `stored` bytes.
pub fn plain_size(stored: u64, encrypted: bool) -> u64 {
    if encrypted {
        stored.saturating_sub(OVERHEAD)
    } else {
        stored
    }
}

/// Checks the key given to read an object with these stored headers:
/// InvalidRequest when the object is encrypted with SSE-C and no key is
/// given or the other way round, AccessDenied when the key is not the
/// object's. An SSE-S3 or SSE-KMS object opens with its data key,
/// unwrapped by the cluster's `kms` (an SSE-C key given for it is
/// InvalidRequest; a disabled KMS key, `KMS.DisabledException`).
pub async fn check_read(
    kms: &Kms,
    headers: &[(String, String)],
    given: Option<&SseKey>,
) -> ApiResult<Option<SseKey>> {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let managed = find(S3_KEY_HEADER).or(find(KMS_KEY_HEADER));
    if let Some(stored) = managed {
        if given.is_some() {
            return Err(ApiError::InvalidRequest(
                "The encryption parameters are not applicable to this object.".into(),
            ));
        }
        let context = find(KMS_CONTEXT_HEADER);
        let key = kms.open_data_key(stored, &context_aad(context)).await?;
        let kind = if find(S3_KEY_HEADER).is_some() {
            Kind::S3 {
                stored: stored.to_string(),
            }
        } else {
            Kind::Kms {
                stored: stored.to_string(),
                key_id: Kms::key_id_of(stored).unwrap_or_default().to_string(),
                context: context.map(String::from),
                bucket_key: find(BUCKET_KEY_HEADER) == Some("true"),
            }
        };
        return Ok(Some(SseKey { key, kind }));
    }
    check_customer(headers, given)
}

/// [`check_read`] for an object that is not sealed with a key of the
/// cluster.
fn check_customer(
    headers: &[(String, String)],
    given: Option<&SseKey>,
) -> ApiResult<Option<SseKey>> {
    let stored = headers
        .iter()
        .find(|(k, _)| k == KEY_CHECK_HEADER)
        .map(|(_, v)| v.as_str());
    match (is_encrypted(headers), given) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(ApiError::InvalidRequest(
            "The encryption parameters are not applicable to this object.".into(),
        )),
        (true, None) => Err(ApiError::InvalidRequest(NEEDS_KEY.into())),
        (true, Some(k)) => {
            let ok = stored
                .and_then(|s| s.split_once(':'))
                .and_then(|(salt, sum)| Some((hex::decode(salt).ok()?, sum)))
                .is_some_and(|(salt, sum)| k.check(&salt) == sum);
            if ok {
                Ok(Some(k.clone()))
            } else {
                Err(ApiError::AccessDenied(
                    "The key given is not the one the object was encrypted with".into(),
                ))
            }
        }
    }
}

/// What a write asks of encryption: its SSE-C key, and its
/// `x-amz-server-side-encryption*` headers.
#[derive(Default)]
pub struct WriteAsk<'a> {
    pub customer: Option<SseKey>,
    /// `x-amz-server-side-encryption`.
    pub algorithm: Option<&'a str>,
    /// `x-amz-server-side-encryption-aws-kms-key-id`.
    pub kms_key_id: Option<&'a str>,
    /// `x-amz-server-side-encryption-context`.
    pub context: Option<&'a str>,
    /// `x-amz-server-side-encryption-bucket-key-enabled`.
    pub bucket_key: Option<bool>,
}

/// The [`WriteAsk`] of an S3 input with the usual encryption fields.
#[macro_export]
macro_rules! write_ask {
    ($i:expr, $customer:expr) => {
        $crate::encryption::sse::WriteAsk {
            customer: $customer,
            algorithm: $i.server_side_encryption.as_ref().map(|s| s.as_str()),
            kms_key_id: $i.ssekms_key_id.as_deref(),
            context: $i.ssekms_encryption_context.as_deref(),
            bucket_key: $i.bucket_key_enabled,
        }
    };
}

/// How a write that is not SSE-C seals its data.
#[derive(Debug, PartialEq, Eq)]
enum Sealing {
    S3,
    Kms {
        key_id: Option<String>,
        context: Option<String>,
        bucket_key: bool,
    },
}

impl WriteAsk<'_> {
    /// The request's headers checked as S3 does, then the bucket's
    /// default applied: `Ok(None)` for no encryption (or SSE-C).
    fn sealing(&self, bucket_default: Option<&DefaultEncryption>) -> ApiResult<Option<Sealing>> {
        let kms_only = |what: &str| {
            ApiError::InvalidArgument(format!(
                "{what} requires the header x-amz-server-side-encryption: aws:kms"
            ))
        };
        match self.algorithm {
            None | Some(AES256) | Some(AWS_KMS) => (),
            Some("aws:kms:dsse") => {
                return Err(ApiError::NotImplemented(
                    "Dual-layer SSE-KMS (aws:kms:dsse) is not available; use aws:kms or AES256"
                        .into(),
                ))
            }
            Some(other) => {
                return Err(ApiError::InvalidArgument(format!(
                    "The encryption method specified is not supported: {other:?}"
                )))
            }
        }
        if self.algorithm != Some(AWS_KMS) {
            if self.kms_key_id.is_some() {
                return Err(kms_only(
                    "x-amz-server-side-encryption-aws-kms-key-id (SSE-KMS)",
                ));
            }
            if self.context.is_some() {
                return Err(kms_only("x-amz-server-side-encryption-context (SSE-KMS)"));
            }
        }
        if self.customer.is_some() {
            if self.algorithm.is_some() {
                return Err(ApiError::InvalidArgument(
                    "Server Side Encryption with Customer provided key is incompatible with the \
                     encryption method specified"
                        .into(),
                ));
            }
            return Ok(None);
        }
        let context = self.context.map(parse_context).transpose()?;
        Ok(match (self.algorithm, bucket_default) {
            (Some(AES256), _) => Some(Sealing::S3),
            (Some(_), d) => Some(Sealing::Kms {
                key_id: self.kms_key_id.map(String::from),
                context,
                bucket_key: self
                    .bucket_key
                    .or(d.map(|d| d.bucket_key_enabled))
                    .unwrap_or(false),
            }),
            (None, None) => None,
            (None, Some(d)) if !d.kms => Some(Sealing::S3),
            (None, Some(d)) => Some(Sealing::Kms {
                key_id: d.kms_key_id.clone(),
                context: None,
                bucket_key: self.bucket_key.unwrap_or(d.bucket_key_enabled),
            }),
        })
    }
}

/// The key a write seals its data with: the SSE-C key given; else a new
/// data key of SSE-S3 or SSE-KMS when the request asks for it or the
/// bucket encrypts by default (`reuse`: the source's key of a copy, taken
/// when it is sealed the way the copy asks, so that the copy shares its
/// blocks); else none.
pub async fn write_key(
    kms: &Kms,
    ask: WriteAsk<'_>,
    bucket_default: Option<&DefaultEncryption>,
    reuse: Option<&SseKey>,
) -> ApiResult<Option<SseKey>> {
    let sealing = ask.sealing(bucket_default)?;
    let Some(sealing) = sealing else {
        return Ok(ask.customer);
    };
    if let Some(k) = reuse.filter(|k| k.serves(&sealing)) {
        return Ok(Some(k.clone()));
    }
    Ok(Some(match sealing {
        Sealing::S3 => {
            let dk = kms.new_data_key(KeyName::SseS3, b"").await?;
            SseKey {
                key: dk.key,
                kind: Kind::S3 { stored: dk.stored },
            }
        }
        Sealing::Kms {
            key_id,
            context,
            bucket_key,
        } => {
            let dk = kms
                .new_data_key(
                    KeyName::Kms(key_id.as_deref()),
                    &context_aad(context.as_deref()),
                )
                .await?;
            SseKey {
                key: dk.key,
                kind: Kind::Kms {
                    stored: dk.stored,
                    key_id: dk.key_id,
                    context,
                    bucket_key,
                },
            }
        }
    }))
}

/// Checks a bucket default's algorithm and key as PutBucketEncryption
/// does (the key is looked up: an unknown one is refused now, not at the
/// first write).
pub async fn check_default(kms: &Kms, d: &DefaultEncryption) -> ApiResult<()> {
    if let (true, Some(name)) = (d.kms, d.kms_key_id.as_deref()) {
        kms.find(name).await?;
    }
    Ok(())
}

/// The ETag of data sealed with `k`: the plaintext's MD5 for SSE-S3 and
/// no encryption (as S3), a random one for SSE-C.
pub fn etag_of(k: Option<&SseKey>, md5: &[u8; 16]) -> String {
    match k {
        Some(k) if k.is_customer() => opaque_etag(),
        _ => hex::encode(md5),
    }
}

/// An ETag for encrypted data: random, so that it reveals nothing of the
/// plaintext (S3's SSE-C ETags are not the plaintext's MD5 either).
pub fn opaque_etag() -> String {
    hex::encode(&gen_uuid().as_slice()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SseKey {
        let b64 = base64::engine::general_purpose::STANDARD;
        let k = [byte; 32];
        let md5 = b64.encode(Md5::digest(k));
        SseKey::from_headers(Some(AES256), Some(&b64.encode(k)), Some(&md5))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn seal_open_round_trip() {
        let k = key(7);
        for len in [0usize, 1, 3071, 1 << 20] {
            let plain: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let sealed = k.seal(&plain);
            assert_eq!(sealed.len() as u64, len as u64 + OVERHEAD);
            assert_eq!(plain_size(sealed.len() as u64, true), len as u64);
            if len > 16 {
                // The plaintext does not show through.
                assert!(!sealed.windows(16).any(|w| w == &plain[..16]));
            }
            assert_eq!(k.open(&sealed).unwrap(), plain);
            // Random nonces: sealing twice differs.
            assert_ne!(k.seal(&plain), sealed);
            assert!(key(8).open(&sealed).is_err());
            let mut bad = sealed.clone();
            bad[12] ^= 1;
            assert!(k.open(&bad).is_err());
        }
        assert!(k.open(&[0; 5]).is_err());
    }

    #[test]
    fn headers_are_checked() {
        let b64 = base64::engine::general_purpose::STANDARD;
        assert!(SseKey::from_headers(None, None, None).unwrap().is_none());
        let k = b64.encode([1u8; 32]);
        let md5 = b64.encode(Md5::digest([1u8; 32]));
        let wrong_md5 = b64.encode(Md5::digest([2u8; 32]));
        let ok = SseKey::from_headers(Some(AES256), Some(&k), Some(&md5)).unwrap();
        assert_eq!(ok.unwrap().customer_md5(), Some(md5.as_str()));
        for (a, k, m) in [
            (Some(AES256), Some(k.as_str()), Some(wrong_md5.as_str())),
            (Some(AES256), Some(k.as_str()), None),
            (Some("AES128"), Some(k.as_str()), Some(md5.as_str())),
            (None, Some(k.as_str()), Some(md5.as_str())),
            (Some(AES256), None, Some(md5.as_str())),
            (Some(AES256), Some("c2hvcnQ="), Some(md5.as_str())),
        ] {
            assert!(matches!(
                SseKey::from_headers(a, k, m),
                Err(ApiError::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn read_key_check() {
        let k = key(1);
        let mut stored = vec![("content-type".to_string(), "x".to_string())];
        stored.extend(k.stored_pairs());
        // Neither the key nor its MD5 is stored.
        let all: String = stored.iter().map(|(a, b)| format!("{a}{b}")).collect();
        assert!(!all.contains(k.customer_md5().unwrap()));
        assert!(!all.contains(&hex::encode(k.key)));
        assert_eq!(check_customer(&stored, Some(&k)).unwrap(), Some(k.clone()));
        assert!(matches!(
            check_customer(&stored, None),
            Err(ApiError::InvalidRequest(_))
        ));
        assert!(matches!(
            check_customer(&stored, Some(&key(2))),
            Err(ApiError::AccessDenied(_))
        ));
        let plain = without_sse(&stored);
        assert_eq!(plain.len(), 1);
        assert_eq!(check_customer(&plain, None).unwrap(), None);
        assert!(matches!(
            check_customer(&plain, Some(&k)),
            Err(ApiError::InvalidRequest(_))
        ));
        // Salted: two objects with one key store different checks.
        assert_ne!(k.stored_pairs(), k.stored_pairs());
    }

    #[test]
    fn which_sealing_a_write_asks_for() {
        let ask = |algorithm, kms_key_id, context| WriteAsk {
            algorithm,
            kms_key_id,
            context,
            ..Default::default()
        };
        let sse_s3 = DefaultEncryption {
            bucket_key_enabled: false,
            kms: false,
            kms_key_id: None,
        };
        let sse_kms = DefaultEncryption {
            bucket_key_enabled: true,
            kms: true,
            kms_key_id: Some("alias/b".into()),
        };
        assert_eq!(ask(None, None, None).sealing(None).unwrap(), None);
        assert_eq!(
            ask(None, None, None).sealing(Some(&sse_s3)).unwrap(),
            Some(Sealing::S3)
        );
        assert_eq!(
            ask(None, None, None).sealing(Some(&sse_kms)).unwrap(),
            Some(Sealing::Kms {
                key_id: Some("alias/b".into()),
                context: None,
                bucket_key: true
            })
        );
        // The request's own choice wins over the bucket's.
        assert_eq!(
            ask(Some(AES256), None, None)
                .sealing(Some(&sse_kms))
                .unwrap(),
            Some(Sealing::S3)
        );
        let b64 = base64::engine::general_purpose::STANDARD;
        let ctx = b64.encode(r#"{"b":"2","a":"1"}"#);
        let Some(Sealing::Kms {
            key_id, context, ..
        }) = ask(Some(AWS_KMS), Some("k1"), Some(&ctx))
            .sealing(None)
            .unwrap()
        else {
            panic!("SSE-KMS expected")
        };
        assert_eq!(key_id.as_deref(), Some("k1"));
        assert_eq!(
            b64.decode(context.unwrap()).unwrap(),
            br#"{"a":"1","b":"2"}"#,
            "the context is kept with sorted keys"
        );
        let (array, reserved) = (b64.encode("[1]"), b64.encode(r#"{"aws:x":"1"}"#));
        for bad in [
            ask(Some(AES256), Some("k1"), None),
            ask(None, None, Some(&ctx)),
            ask(Some(AWS_KMS), None, Some("not base64!")),
            ask(Some(AWS_KMS), None, Some(&array)),
            ask(Some(AWS_KMS), None, Some(&reserved)),
            ask(Some("rot13"), None, None),
        ] {
            assert!(matches!(
                bad.sealing(None),
                Err(ApiError::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            ask(Some("aws:kms:dsse"), None, None).sealing(None),
            Err(ApiError::NotImplemented(_))
        ));
        let with_customer = |algorithm| WriteAsk {
            customer: Some(key(3)),
            algorithm,
            ..Default::default()
        };
        assert_eq!(with_customer(None).sealing(Some(&sse_s3)).unwrap(), None);
        assert!(matches!(
            with_customer(Some(AES256)).sealing(None),
            Err(ApiError::InvalidArgument(_))
        ));
    }

    #[test]
    fn response_fields_name_the_kms_key() {
        let k = SseKey {
            key: [1; 32],
            kind: Kind::Kms {
                stored: "v1;abc;00;xx".into(),
                key_id: "abc".into(),
                context: None,
                bucket_key: true,
            },
        };
        let f = SseFields::of(Some(&k), "garage");
        assert_eq!(
            f.ssekms_key_id.as_deref(),
            Some("arn:aws:kms:garage:000000000000:key/abc")
        );
        assert_eq!(f.bucket_key_enabled, Some(true));
        assert_eq!(f.server_side_encryption.unwrap().as_str(), AWS_KMS);
        assert!(is_encrypted(&k.stored_pairs()));
        assert!(without_sse(&k.stored_pairs()).is_empty());
        assert!(SseFields::of(None, "garage")
            .server_side_encryption
            .is_none());
    }
}
