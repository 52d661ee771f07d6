//! Server-side encryption: SSE-C, objects encrypted at rest with a key
//! the client sends with each request
//! (`x-amz-server-side-encryption-customer-*`), and SSE-S3
//! (`x-amz-server-side-encryption: AES256`, or the bucket's default), with
//! a random data key per object kept in its metadata wrapped (AES-256-GCM)
//! by the cluster's master key (`sse_master_key`). Both seal the data the
//! same way; see doc/s3.md "SSE-C" and "SSE-S3".
//!
//! Each stored block (and inline data) is `nonce (12 bytes) || ciphertext
//! || tag (16 bytes)`, AES-256-GCM with a random nonce per block, so a
//! stored block is always [`OVERHEAD`] bytes longer than its plaintext and
//! plaintext positions stay computable from the version's block list. The
//! block layer only ever sees the sealed bytes (their hash is the block's
//! address), so encrypted data never dedupes with anything else.
//!
//! The object's metadata keeps the algorithm and a salted hash of the key
//! (`blake2(salt || key)`, 32 random bytes of salt per object), enough to
//! tell a wrong key from the right one; never the key, nor its bare MD5.

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use garage_util::data::{blake2sum, gen_uuid};
use md5::{Digest, Md5};

use crate::ctx::MasterKey;
use crate::error::{ApiError, ApiResult};

/// The only algorithm S3 defines for SSE-C.
pub const AES256: &str = "AES256";
/// Bytes a sealed block has more than its plaintext: nonce and tag.
pub const OVERHEAD: u64 = 12 + 16;
/// Stored header: the algorithm of an SSE-C object.
pub const ALGORITHM_HEADER: &str = "x-garage-sse-c-algorithm";
/// Stored header: `hex(salt):hex(blake2(salt || key))`.
pub const KEY_CHECK_HEADER: &str = "x-garage-sse-c-key-check";
/// Stored header of an SSE-S3 object: its data key, sealed with the
/// master key, in base64.
pub const S3_KEY_HEADER: &str = "x-garage-sse-s3-key";

const NEEDS_KEY: &str = "The object was stored using a form of Server Side Encryption. \
     The correct parameters must be provided to retrieve the object.";

/// The key an object's data is sealed with: a customer's (SSE-C) or a
/// data key of SSE-S3. `Debug` does not show the key.
#[derive(Clone)]
pub struct SseKey {
    key: [u8; 32],
    kind: Kind,
}

#[derive(Clone, PartialEq, Eq)]
enum Kind {
    /// base64 of the key's MD5, as echoed in responses.
    Customer { md5_b64: String },
    /// The data key wrapped by the master key, as stored.
    S3 { wrapped: String },
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

/// What the cluster's SSE-S3 master key ([`MasterKey`], held by the
/// API's context) does.
impl MasterKey {
    /// A new SSE-S3 data key, wrapped by this master key.
    pub fn new_data_key(&self) -> SseKey {
        let key: [u8; 32] = Aes256Gcm::generate_key(&mut OsRng).into();
        let wrapped = seal_with(&self.0, &key);
        SseKey {
            key,
            kind: Kind::S3 {
                wrapped: base64::engine::general_purpose::STANDARD.encode(wrapped),
            },
        }
    }

    /// The data key of a stored [`S3_KEY_HEADER`].
    fn data_key(&self, wrapped: &str) -> ApiResult<SseKey> {
        let b = base64::engine::general_purpose::STANDARD
            .decode(wrapped)
            .map_err(|_| ApiError::Internal("corrupt SSE-S3 data key".into()))?;
        let key: [u8; 32] = open_with(&self.0, &b)
            .ok()
            .and_then(|k| k.try_into().ok())
            .ok_or_else(|| {
                ApiError::Internal(
                    "the object's SSE-S3 data key does not open with this node's sse_master_key \
                     (was the master key changed?)"
                        .into(),
                )
            })?;
        Ok(SseKey {
            key,
            kind: Kind::S3 {
                wrapped: wrapped.to_string(),
            },
        })
    }
}

/// The error of an SSE-S3 request to a cluster without a master key.
pub fn no_master_key() -> ApiError {
    ApiError::InvalidRequest(
        "Server-side encryption with S3 managed keys (SSE-S3) is not available: \
         this cluster has no sse_master_key configured"
            .into(),
    )
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

    /// The customer key's MD5 (base64) to echo; none for SSE-S3.
    pub fn customer_md5(&self) -> Option<&str> {
        match &self.kind {
            Kind::Customer { md5_b64 } => Some(md5_b64),
            Kind::S3 { .. } => None,
        }
    }

    pub fn is_customer(&self) -> bool {
        matches!(self.kind, Kind::Customer { .. })
    }

    /// The stored headers of an object encrypted with this key (for
    /// SSE-C, a fresh salt each time).
    pub fn stored_pairs(&self) -> Vec<(String, String)> {
        if let Kind::S3 { wrapped } = &self.kind {
            return vec![(S3_KEY_HEADER.to_string(), wrapped.clone())];
        }
        let salt = gen_uuid();
        vec![
            (ALGORITHM_HEADER.to_string(), AES256.to_string()),
            (
                KEY_CHECK_HEADER.to_string(),
                format!(
                    "{}:{}",
                    hex::encode(salt.as_slice()),
                    self.check(salt.as_slice())
                ),
            ),
        ]
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

    /// The response fields of an object sealed with this key (or none):
    /// (SSE-C algorithm, SSE-C key MD5, `x-amz-server-side-encryption`).
    pub fn response_fields(
        k: Option<&SseKey>,
    ) -> (
        Option<String>,
        Option<String>,
        Option<s3s::dto::ServerSideEncryption>,
    ) {
        match k.map(|k| &k.kind) {
            Some(Kind::Customer { md5_b64 }) => (Some(AES256.into()), Some(md5_b64.clone()), None),
            Some(Kind::S3 { .. }) => (
                None,
                None,
                Some(s3s::dto::ServerSideEncryption::from_static(
                    s3s::dto::ServerSideEncryption::AES256,
                )),
            ),
            None => (None, None, None),
        }
    }
}

/// Whether stored headers are those of an encrypted object (SSE-C or
/// SSE-S3).
pub fn is_encrypted(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(k, _)| k == ALGORITHM_HEADER || k == S3_KEY_HEADER)
}

/// The stored headers without the encryption ones.
pub fn without_sse(headers: &[(String, String)]) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| k != ALGORITHM_HEADER && k != KEY_CHECK_HEADER && k != S3_KEY_HEADER)
        .cloned()
        .collect()
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
/// object's. An SSE-S3 object opens with its data key, unwrapped with
/// `master` (an SSE-C key given for it is InvalidRequest).
pub fn check_read(
    headers: &[(String, String)],
    given: Option<&SseKey>,
    master: Option<&MasterKey>,
) -> ApiResult<Option<SseKey>> {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if let Some(wrapped) = find(S3_KEY_HEADER) {
        if given.is_some() {
            return Err(ApiError::InvalidRequest(
                "The encryption parameters are not applicable to this object.".into(),
            ));
        }
        let m = master.ok_or_else(|| {
            ApiError::Internal(
                "the object is encrypted with SSE-S3 but this node has no sse_master_key".into(),
            )
        })?;
        return m.data_key(wrapped).map(Some);
    }
    let stored = find(KEY_CHECK_HEADER);
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

/// The key a write seals its data with: the SSE-C key given; else an
/// SSE-S3 data key when the request asks for SSE-S3
/// (`x-amz-server-side-encryption: AES256`) or the bucket encrypts by
/// default (`reuse`: the source's SSE-S3 key of a copy, so that the copy
/// shares its blocks); else none. SSE-KMS is NotImplemented; SSE-S3
/// without a master key InvalidRequest.
pub fn write_key(
    master: Option<&MasterKey>,
    customer: Option<SseKey>,
    requested: Option<&str>,
    bucket_default: bool,
    reuse: Option<&SseKey>,
) -> ApiResult<Option<SseKey>> {
    match requested {
        None | Some(AES256) => (),
        Some("aws:kms") | Some("aws:kms:dsse") => {
            return Err(ApiError::NotImplemented(
                "SSE-KMS is not available: this cluster has no KMS; use AES256 (SSE-S3) or SSE-C"
                    .into(),
            ))
        }
        Some(other) => {
            return Err(ApiError::InvalidArgument(format!(
                "The encryption method specified is not supported: {other:?}"
            )))
        }
    }
    if let Some(c) = customer {
        if requested.is_some() {
            return Err(ApiError::InvalidArgument(
                "Server Side Encryption with Customer provided key is incompatible with the \
                 encryption method specified"
                    .into(),
            ));
        }
        return Ok(Some(c));
    }
    if requested.is_none() && !bucket_default {
        return Ok(None);
    }
    let m = master.ok_or_else(no_master_key)?;
    match reuse.filter(|k| !k.is_customer()) {
        Some(k) => Ok(Some(k.clone())),
        None => Ok(Some(m.new_data_key())),
    }
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
        assert_eq!(
            check_read(&stored, Some(&k), None).unwrap(),
            Some(k.clone())
        );
        assert!(matches!(
            check_read(&stored, None, None),
            Err(ApiError::InvalidRequest(_))
        ));
        assert!(matches!(
            check_read(&stored, Some(&key(2)), None),
            Err(ApiError::AccessDenied(_))
        ));
        let plain = without_sse(&stored);
        assert_eq!(plain.len(), 1);
        assert_eq!(check_read(&plain, None, None).unwrap(), None);
        assert!(matches!(
            check_read(&plain, Some(&k), None),
            Err(ApiError::InvalidRequest(_))
        ));
        // Salted: two objects with one key store different checks.
        assert_ne!(k.stored_pairs(), k.stored_pairs());
    }

    #[test]
    fn which_key_a_write_uses() {
        let m = MasterKey::from_hex(&"ab".repeat(32)).unwrap();
        let c = key(3);
        assert_eq!(write_key(Some(&m), None, None, false, None).unwrap(), None);
        assert_eq!(
            write_key(None, Some(c.clone()), None, true, None).unwrap(),
            Some(c.clone())
        );
        let s3 = write_key(Some(&m), None, Some(AES256), false, None)
            .unwrap()
            .unwrap();
        assert!(!s3.is_customer());
        let by_default = write_key(Some(&m), None, None, true, Some(&s3)).unwrap();
        assert_eq!(
            by_default,
            Some(s3.clone()),
            "a copy reuses its source's key"
        );
        assert!(matches!(
            write_key(None, None, Some(AES256), false, None),
            Err(ApiError::InvalidRequest(_))
        ));
        assert!(matches!(
            write_key(Some(&m), None, Some("aws:kms"), false, None),
            Err(ApiError::NotImplemented(_))
        ));
        assert!(matches!(
            write_key(Some(&m), Some(c), Some(AES256), false, None),
            Err(ApiError::InvalidArgument(_))
        ));
    }

    #[test]
    fn sse_s3_data_keys() {
        let m = MasterKey::from_hex(&"ab".repeat(32)).unwrap();
        let other = MasterKey::from_hex(&"cd".repeat(32)).unwrap();
        assert!(MasterKey::from_hex("abcd").is_none());
        let k = m.new_data_key();
        assert!(!k.is_customer() && k.customer_md5().is_none());
        assert_ne!(m.new_data_key(), k, "a key per object");
        let stored = k.stored_pairs();
        assert!(is_encrypted(&stored));
        // The data key is not stored in the clear.
        assert!(!stored[0]
            .1
            .contains(&base64::engine::general_purpose::STANDARD.encode(k.key)));
        let opened = check_read(&stored, None, Some(&m)).unwrap().unwrap();
        assert_eq!(opened, k);
        assert_eq!(opened.open(&k.seal(b"data")).unwrap(), b"data");
        assert!(matches!(
            check_read(&stored, None, Some(&other)),
            Err(ApiError::Internal(_))
        ));
        assert!(matches!(
            check_read(&stored, None, None),
            Err(ApiError::Internal(_))
        ));
        assert!(matches!(
            check_read(&stored, Some(&key(1)), Some(&m)),
            Err(ApiError::InvalidRequest(_))
        ));
        assert!(without_sse(&stored).is_empty());
    }
}
